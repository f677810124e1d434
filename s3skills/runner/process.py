"""Processes: start one with resource limits in its own session, cap its output, kill its tree.

`run_process` is the plumbing every process-based launcher shares. The child is
started with `start_new_session=True` (it leads a new session and process group)
and through the `_limits.py` trampoline, which sets the rlimits and then execs the
command: no `preexec_fn`, which is unsafe in a process with threads. When the run
ends (normally, on timeout, on the output cap, or because the caller was cancelled)
the whole process group is killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from s3skills.errors import S3SkillsError

__all__ = [
    "DRAIN_SECONDS",
    "Finished",
    "LaunchError",
    "Limits",
    "killpg",
    "limits_prefix",
    "run_process",
    "signal_status",
]

DRAIN_SECONDS = 2.0
"""After the kill, how long the output pipes may take to close."""

_TRAMPOLINE = str(Path(__file__).with_name("_limits.py"))


class LaunchError(S3SkillsError):
    """A launcher could not start the script; the message says why, for the model."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The resource limits of one run; None leaves a resource unlimited (by us).

    Attributes:
        cpu_seconds: `RLIMIT_CPU` soft limit (SIGXCPU); the hard limit is one second
            more (SIGKILL).
        memory_bytes: `RLIMIT_AS`, the address space.
        file_bytes: `RLIMIT_FSIZE`, the largest file the script may write.
        processes: `RLIMIT_NPROC`. The kernel counts every process of the uid and
            exempts root: it binds only under a dedicated uid.
    """

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    file_bytes: int | None = None
    processes: int | None = None

    def rlimits(self) -> list[tuple[str, int, int]]:
        """`(name, soft, hard)` for each limit set, never above this process's own hard limit.

        Core dumps are always off (`CORE=0:0`).
        """
        wanted = [
            ("CPU", self.cpu_seconds, 1),
            ("AS", self.memory_bytes, 0),
            ("FSIZE", self.file_bytes, 0),
            ("NPROC", self.processes, 0),
            ("CORE", 0, 0),
        ]
        out = []
        for name, soft, slack in wanted:
            if soft is None:
                continue
            if soft < 0:
                raise ValueError(f"The {name} limit must not be negative, not {soft}")
            hard = soft + slack
            _, ours = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))
            if ours != resource.RLIM_INFINITY:  # raising a hard limit fails: clamp instead
                soft, hard = min(soft, ours), min(hard, ours)
            out.append((name, soft, hard))
        return out


def limits_prefix(limits: Limits) -> list[str]:
    """The argv that applies `limits` and then execs what follows it (an absolute path).

    Raises:
        LaunchError: This process has no known interpreter (`sys.executable` is empty).
    """
    if not sys.executable:
        raise LaunchError("Could not start the script: the service's Python interpreter is unknown.")
    pairs = [f"{name}={soft}:{hard}" for name, soft, hard in limits.rlimits()]
    return [sys.executable, "-I", "-S", _TRAMPOLINE, *pairs, "--"]


def signal_status(code: int | None) -> int | None:
    """A shell's exit status for a signal (128 + N) as Python reports one (-N); others as they are.

    Launchers that run the script under a shell or a sandbox's init get the former.
    """
    if code is not None and code > 128 and (code - 128) in signal.valid_signals():
        return -(code - 128)
    return code


def killpg(pgid: int) -> None:
    """SIGKILL every process of group `pgid`; a group that is already gone is fine.

    A process that left the group (`setsid`, `setpgid`) is not reached: only a
    sandbox with its own pid namespace can promise that.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(slots=True)
class Finished:
    """What a process run gave.

    Attributes:
        stdout: The first `max_output_bytes` of stdout.
        stderr: The last `max_stderr_bytes` of stderr.
        returncode: The exit status, negative for a signal; None if unknown.
        timed_out: The time limit was reached and the process group killed.
        truncated: stdout went over its cap and the process group was killed.
    """

    stdout: bytes
    stderr: bytes
    returncode: int | None
    timed_out: bool = False
    truncated: bool = False


class _Watch(asyncio.SubprocessProtocol):
    """Keeps the first `out_cap` bytes of stdout and the last `err_cap` of stderr.

    On the first stdout byte past the cap it kills the process group and drops the
    rest, so a script printing gigabytes costs a bounded amount of memory.
    """

    def __init__(self, out_cap: int, err_cap: int) -> None:
        loop = asyncio.get_running_loop()
        self.out_cap, self.err_cap = out_cap, err_cap
        self.stdout, self.stderr = bytearray(), bytearray()
        self.pid: int | None = None
        self.truncated = False
        self.exited: asyncio.Future[None] = loop.create_future()  # the process itself ended
        self.closed: asyncio.Future[None] = loop.create_future()  # ... and every pipe is closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.pid = transport.get_pid()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 2:
            self.stderr += data
            del self.stderr[: max(0, len(self.stderr) - self.err_cap)]
        elif not self.truncated:
            room = self.out_cap - len(self.stdout)
            self.stdout += data[:room]
            if len(data) > room:
                self.truncated = True
                if self.pid is not None:
                    killpg(self.pid)

    def process_exited(self) -> None:
        # Not `Process.wait()`: on 3.11 it also waits for the pipes, which forked children hold.
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.process_exited()
        if not self.closed.done():
            self.closed.set_result(None)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: bytes | None,
    timeout: float,  # noqa: ASYNC109 - the kill needs the pid, so asyncio.timeout around us cannot do it
    max_output_bytes: int,
    max_stderr_bytes: int,
) -> Finished:
    """Run `argv` in a new session, feed it `stdin`, and kill its process group when it ends.

    Args:
        argv: The command; `argv[0]` is executed directly, without a shell.
        cwd: Its working directory.
        env: Its whole environment (nothing of ours is inherited).
        stdin: Bytes written to its stdin, which is then closed; None for /dev/null.
        timeout: Wall-clock seconds before the process group is killed.
        max_output_bytes: stdout cap; past it the group is killed (`truncated`).
        max_stderr_bytes: How much of the end of stderr is kept.

    Raises:
        LaunchError: The process could not be started.
    """
    watch = _Watch(max_output_bytes, max_stderr_bytes)
    try:
        transport, _ = await asyncio.get_running_loop().subprocess_exec(
            lambda: watch,
            *argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise LaunchError(f"Could not start the script ({argv[0]}): {exc}") from None
    timed_out = False
    try:
        if stdin is not None:
            pipe = transport.get_pipe_transport(0)
            assert isinstance(pipe, asyncio.WriteTransport)
            pipe.write(stdin)  # buffered by the loop: a script that never reads cannot block us
            pipe.close()  # EOF once the buffer is written
        await asyncio.wait_for(asyncio.shield(watch.exited), timeout)
    except TimeoutError:
        timed_out = True
    finally:
        killpg(transport.get_pid())  # always: what it forked dies too, and so does a cancelled run
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(watch.closed), DRAIN_SECONDS)
        transport.close()  # a process that left the group may still hold the pipes
    return Finished(bytes(watch.stdout), bytes(watch.stderr), transport.get_returncode(), timed_out, watch.truncated)
