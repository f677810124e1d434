"""`SandboxBackendLauncher`: run the staged script through a deepagents sandbox backend.

A deepagents `SandboxBackendProtocol` (a container, a VM, a remote sandbox service)
offers `aupload_files`, `aexecute(command, timeout=)` and `adownload_files`. The
launcher uploads the staged folder to a fresh directory in the sandbox, runs one
`bash` command there that applies the limits (`ulimit`), the time limit (coreutils
`timeout`, which signals the whole process group), an empty environment plus the
job's (`env -i`), and caps stdout (`head -c`), then downloads stdout, the end of
stderr and the exit status, and removes the directory.

The isolation is the backend's: this launcher adds none. The sandbox needs `bash`,
coreutils (`timeout`, `head`, `tail`, `env`) and `python3` for `.py` scripts, and
its upload paths and command paths must name the same files (for deepagents'
`LocalShellBackend`: `virtual_mode=False`). A cancelled run cannot stop the
backend's `execute` call: the script then runs until its time limit.
"""

from __future__ import annotations

import math
import shlex
import signal
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from s3skills.runner.launcher import Job
from s3skills.runner.process import Finished, LaunchError, signal_status

if TYPE_CHECKING:
    from deepagents.backends.protocol import SandboxBackendProtocol

__all__ = ["SandboxBackendLauncher"]

_ULIMIT = {"CPU": ("t", 1), "AS": ("v", 1024), "FSIZE": ("f", 1024), "NPROC": ("u", 1), "CORE": ("c", 1024)}
_TIMEOUT_STATUS = 124  # coreutils timeout, when SIGTERM ended the command
_GRACE_SECONDS = 1  # SIGKILL this long after SIGTERM
_OUT = ".s3skills-out"


class SandboxBackendLauncher:
    """Runs each job with `sandbox.aexecute`, in a fresh directory under `root`.

    Args:
        sandbox: A deepagents `SandboxBackendProtocol` (`aupload_files`,
            `aexecute`, `adownload_files`).
        root: The sandbox directory under which each run gets its own folder.
        python: The sandbox's interpreter for `.py` scripts.
        bash: The sandbox's bash, for `.sh` scripts and for the wrapper command.
    """

    def __init__(
        self,
        sandbox: SandboxBackendProtocol,
        *,
        root: str = "/tmp/s3skills-runs",  # noqa: S108 - a path inside the sandbox, not on this host
        python: str = "python3",
        bash: str = "bash",
    ) -> None:
        if not root.startswith("/") or "\0" in root:
            raise ValueError(f"root must be an absolute path in the sandbox, not {root!r}")
        self.sandbox = sandbox
        self.root = root.rstrip("/") or "/"
        self.python = python
        self.bash = bash

    async def launch(self, job: Job) -> Finished:
        """Upload the staged folder, run the script in the sandbox, collect what it gave.

        Raises:
            LaunchError: The upload failed or the sandbox gave back nothing to read.
        """
        run_dir = f"{self.root}/{uuid.uuid4().hex}"
        uploads = [
            (f"{run_dir}/{path.relative_to(job.workdir).as_posix()}", path.read_bytes())
            for path in sorted(job.workdir.rglob("*"))
            if path.is_file()
        ]
        failed = [r.path for r in await self.sandbox.aupload_files(uploads) if r.error]
        try:
            if failed:
                raise LaunchError(f"Could not upload the script to the sandbox ({len(failed)} files failed).")
            response = await self.sandbox.aexecute(self.command(job, run_dir), timeout=math.ceil(job.timeout) + 10)
            out = f"{run_dir}/{_OUT}"
            got = await self.sandbox.adownload_files([f"{out}/stdout", f"{out}/stderr", f"{out}/status"])
        finally:
            await self.sandbox.aexecute(f"rm -rf -- {shlex.quote(run_dir)}", timeout=30)
        stdout, stderr, status = (r.content if r.error is None else None for r in got)
        if stdout is None or status is None:
            said = response.output.strip()[-300:]
            raise LaunchError(f"The sandbox did not run the script (no status came back): {said}")
        fields = [int(f) for f in status.split() if f.isdigit()]
        code, elapsed = (fields[0], fields[1]) if len(fields) == 2 else (None, 0)
        timed_out = code in (_TIMEOUT_STATUS, 128 + signal.SIGKILL) and elapsed >= math.floor(job.timeout)
        code = signal_status(code)
        return Finished(
            stdout=stdout[: job.max_output_bytes],
            stderr=stderr or b"",
            returncode=code,
            timed_out=timed_out,
            truncated=len(stdout) > job.max_output_bytes,
        )

    def command(self, job: Job, run_dir: str) -> str:
        """The one shell command that runs `job` in `run_dir` of the sandbox."""
        script = Path(job.command[1]).relative_to(job.workdir).as_posix()
        interpreter = self.python if script.endswith(".py") else self.bash
        host_dir = str(job.workdir)
        env = [
            f"{name}={value.replace(host_dir, run_dir, 1) if value.startswith(host_dir) else value}"
            for name, value in job.env.items()
        ]
        limits = []
        for name, soft, hard in job.limits.rlimits():
            flag, unit = _ULIMIT[name]
            # soft first: a hard limit below the current soft one is refused (EINVAL)
            limits.append(f"ulimit -S -{flag} {soft // unit} && ulimit -H -{flag} {hard // unit}")
        stdin = "args.json" if job.stdin is not None else "/dev/null"
        words = ["timeout", "-k", str(_GRACE_SECONDS), f"{job.timeout:g}", "env", "-i", *env, interpreter, script]
        run = shlex.join([*words, *job.command[2:]])
        inner = "\n".join(
            [
                f"cd {shlex.quote(run_dir)} && mkdir -p tmp {_OUT} || exit 1",
                "( " + (" && ".join(limits) or "true") + " || exit 126",
                f"  start=$SECONDS; {run} < {stdin} 2> {_OUT}/stderr.all | head -c {job.max_output_bytes + 1} "
                f"> {_OUT}/stdout",
                f'  echo "${{PIPESTATUS[0]}} $((SECONDS - start))" > {_OUT}/status )',
                f"tail -c {job.max_stderr_bytes} {_OUT}/stderr.all > {_OUT}/stderr",
            ]
        )
        return f"{shlex.quote(self.bash)} -c {shlex.quote(inner)}"
