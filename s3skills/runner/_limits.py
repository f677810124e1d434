"""Trampoline: set resource limits, then become the command (`os.execv`). Standard library only.

Usage: `python -I -S _limits.py RESOURCE=SOFT:HARD ... -- /abs/command arg ...`

The launcher starts this file instead of running `resource.setrlimit` in a
`preexec_fn`: code between fork and exec is unsafe in a process with threads (the
service always has an I/O loop thread), while this runs in a fresh single-threaded
interpreter. The limits survive `execv`, so the command (and every process it forks)
inherits them; so does the process id, so the caller's session and process group
are the command's. It is run by file path with `-I -S`, so it imports nothing but
the standard library and works wherever the interpreter does.

Exit status 127 and a line on stderr: a bad argument, a limit that could not be
set, or a command that could not be executed.
"""

from __future__ import annotations

import os
import resource
import sys

__all__ = ["main", "parse"]

_NAMES = frozenset({"AS", "CORE", "CPU", "FSIZE", "NPROC", "NOFILE"})


def parse(argv: list[str]) -> tuple[list[tuple[int, tuple[int, int]]], list[str]]:
    """`(limits, command)` from `argv` (without the program name).

    Raises:
        ValueError: A malformed limit, an unknown resource, no `--`, or no command.
    """
    if "--" not in argv:
        raise ValueError("missing '--' before the command")
    split = argv.index("--")
    limits = []
    for item in argv[:split]:
        name, _, pair = item.partition("=")
        soft, _, hard = pair.partition(":")
        if name not in _NAMES or not soft.isdigit() or not hard.isdigit():
            raise ValueError(f"bad limit {item!r}: expected NAME=SOFT:HARD with NAME in {sorted(_NAMES)}")
        limits.append((getattr(resource, f"RLIMIT_{name}"), (int(soft), int(hard))))
    command = argv[split + 1 :]
    if not command or not os.path.isabs(command[0]):
        raise ValueError("the command must start with an absolute path")
    return limits, command


def main(argv: list[str]) -> int:
    """Apply the limits and exec the command; returns only on failure."""
    try:
        limits, command = parse(argv)
        for which, pair in limits:
            resource.setrlimit(which, pair)
        os.execv(command[0], command)  # noqa: S606 - the whole point: become the command, no shell
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"s3skills launcher: {exc}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
