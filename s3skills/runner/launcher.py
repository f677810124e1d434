"""The launcher seam: who actually runs a staged script, and inside what.

`ScriptRunner` stages a skill's `scripts/` into a private directory and hands a
`Job` to a `Launcher`, which runs it and returns `Finished`. Two launchers ship:

- `LocalLauncher`: a plain child process of the service. NOT a sandbox.
- `BubblewrapLauncher`: the same process inside `bwrap` namespaces (no network, no
  other processes, only the system directories, the interpreter and the staged
  folder visible, the staged folder the only writable place).

Any object with an `async launch(job) -> Finished` method is a launcher, so a
remote sandbox (a container, a VM, a deepagents sandbox backend) can be plugged in.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from s3skills.runner.process import Finished, LaunchError, Limits, limits_prefix, run_process, signal_status

__all__ = ["SYSTEM_DIRS", "BubblewrapLauncher", "Job", "Launcher", "LocalLauncher"]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""What `BubblewrapLauncher` shows of the host by default (read-only; missing ones are skipped)."""

_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_NOBODY = 65534


@dataclass(frozen=True, slots=True)
class Job:
    """One staged script, ready to run.

    Attributes:
        command: Absolute interpreter, absolute script path, and (only with
            `args_via="argv"`) the JSON arguments.
        workdir: The private staging directory (mode 0700): the script's cwd, its
            HOME, and the only place it should write. The scripts are in `workdir/scripts/`.
        env: The script's whole environment.
        stdin: The bytes for the script's stdin (the JSON arguments), or None for /dev/null.
        limits: The rlimits to apply.
        timeout: Wall-clock seconds before the run is killed.
        max_output_bytes: stdout cap.
        max_stderr_bytes: How much of the end of stderr to keep.
    """

    command: tuple[str, ...]
    workdir: Path
    env: Mapping[str, str]
    stdin: bytes | None
    limits: Limits
    timeout: float
    max_output_bytes: int
    max_stderr_bytes: int


@runtime_checkable
class Launcher(Protocol):
    """Runs a `Job` and reports what happened; never leaves a process of the job running.

    `launch` returns `Finished` for every run that started (a timeout or a crash is
    a result, not an exception), raises `LaunchError` when nothing could start, and
    on cancellation stops the job before re-raising.
    """

    async def launch(self, job: Job) -> Finished:
        """Run `job` to completion (or to its limits)."""
        ...


async def run_job(job: Job, command: Sequence[str]) -> Finished:
    """Run `command` for `job` on this machine, under the job's rlimits, time limit and output caps."""
    return await run_process(
        [*limits_prefix(job.limits), *command],
        cwd=job.workdir,
        env=job.env,
        stdin=job.stdin,
        timeout=job.timeout,
        max_output_bytes=job.max_output_bytes,
        max_stderr_bytes=job.max_stderr_bytes,
    )


class LocalLauncher:
    """Runs the script as a child process of the service, as the service's own user.

    THIS IS NOT A SANDBOX. The script can read every file the service can (its
    HOME, its config, `/proc/<ppid>/environ` of the service), see and signal every
    process of the same uid (other tenants' scripts included, with their args
    files and stdin pipes), and use the network (cloud metadata endpoints
    included). What it does give: a scrubbed environment (built by the runner), a
    new session whose whole process group is SIGKILLed when the run ends, and
    rlimits (CPU, address space, file size, processes, no core dumps) applied by a
    trampoline that execs the interpreter (no `preexec_fn`). A process that calls
    `setsid` leaves the group and survives the kill.
    """

    async def launch(self, job: Job) -> Finished:
        """Run `job` locally with its limits; see the class docstring for what that protects."""
        return await run_job(job, job.command)


class BubblewrapLauncher:
    """Runs the script inside bubblewrap (`bwrap`) namespaces: a sandbox on one Linux host.

    The script sees a fresh root: the system directories (`SYSTEM_DIRS`, the
    dynamic linker's cache) and the interpreter's installation read-only, a
    private `/proc` (only its own processes), a minimal `/dev`, and the staging
    directory at its real path, the only writable folder (bwrap's in-memory `/dev`
    also takes writes, which vanish with the sandbox). Nothing else of `/tmp`, of
    HOME or of `/etc` exists in there.
    `--unshare-all` gives it no network (only a down loopback), and its own pid,
    IPC, UTS and cgroup namespaces; it runs as uid/gid 65534 in a user namespace
    it cannot nest (`--disable-userns`), with every capability dropped, in a new
    session (`--new-session`, no TTY injection). `--die-with-parent` plus the pid
    namespace mean that killing the run kills every process the script started,
    those that called `setsid` included. The same rlimits as `LocalLauncher` apply.

    The interpreter's installation is the folder above its `bin/` (for
    `/opt/py/bin/python3`, `/opt/py`): keep the interpreter out of the service's
    HOME, or that HOME is shown too. It shares the host kernel: it is not a VM. A process killed by signal N is
    reported as -N; bwrap encodes it as exit status 128+N, so a script that exits
    with such a status on purpose is reported as killed by that signal.

    Args:
        bwrap: The `bwrap` executable; None finds it on PATH.
        ro_binds: Host paths shown read-only at the same path (added to the system
            directories and the interpreter's installation), e.g. a virtualenv
            whose python should run the scripts with its packages.
        user_namespace: Run as uid 65534 in a user namespace (needs bwrap >= 0.8).

    Raises:
        LaunchError: bwrap is not installed.
    """

    def __init__(self, bwrap: str | None = None, *, ro_binds: Sequence[str] = (), user_namespace: bool = True) -> None:
        found = bwrap or shutil.which("bwrap")
        if not found or not os.access(found, os.X_OK):
            raise LaunchError("bubblewrap (bwrap) is not installed: install it or use LocalLauncher.")
        self.bwrap = os.path.abspath(found)
        self.ro_binds = tuple(ro_binds)
        self.user_namespace = user_namespace

    def sandbox_argv(self, job: Job) -> list[str]:
        """The bwrap command line that runs `job.command` (without the limits prefix)."""
        argv = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if self.user_namespace:
            argv += ["--unshare-user", "--uid", str(_NOBODY), "--gid", str(_NOBODY), "--disable-userns"]
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        for path in _SYSTEM_FILES:
            argv += ["--ro-bind-try", path, path]
        real = os.path.realpath(job.command[0])
        # A virtualenv's python (a symlink) runs as itself when its folder is shown.
        interpreter = job.command[0] if any(_under(job.command[0], b) for b in self.ro_binds) else real
        shown = [*self.ro_binds, *_installation(real)]
        for path in shown:
            argv += ["--ro-bind", path, path]
        workdir = str(job.workdir)
        argv += ["--proc", "/proc", "--dev", "/dev", "--bind", workdir, workdir]
        argv += ["--remount-ro", "/", "--chdir", workdir, "--"]  # the root (and so /tmp) read-only
        return [*argv, interpreter, *job.command[1:]]

    async def launch(self, job: Job) -> Finished:
        """Run `job` in the sandbox; see the class docstring for what it shows the script."""
        finished = await run_job(job, self.sandbox_argv(job))
        finished.returncode = signal_status(finished.returncode)
        return finished


def _installation(interpreter: str) -> list[str]:
    """The directory to show for `interpreter`: none under the system dirs, else its prefix.

    A Python at `<prefix>/bin/python3.X` needs `<prefix>/lib` (stdlib, libpython).
    """
    path = Path(interpreter)
    if any(_under(interpreter, d) for d in SYSTEM_DIRS):
        return []
    prefix = path.parent.parent if path.parent.name == "bin" else path.parent
    return [str(prefix)]


def _under(path: str, folder: str) -> bool:
    return Path(path).is_relative_to(folder)
