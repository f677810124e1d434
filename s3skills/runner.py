"""The script runner (seed 003): run a file of a loaded skill's `scripts/`, get one JSON value back.

`ScriptRunner.arun(skill_id, script, args, loaded=...)` fetches the skill's whole
`scripts/` folder (1 LIST, bounded concurrent GETs) into a fresh temporary
directory, runs the script there without a shell as `python script.py '<json>'`
(`bash` for `.sh`) and turns what happened into a `ScriptObservation` the model
can act on. It never raises for a refused or failed run, and the temporary
directory is removed whatever happens.

THIS IS NOT A SANDBOX. It runs tenant-supplied code as the service's own user.
The scrubbed environment, the process-group kill and the rlimits are hygiene that
keep honest scripts from leaking credentials or running away; they do not stop a
hostile script from reading the service's files or `/proc/<ppid>/environ`, or from
using the network (cloud metadata endpoints included). Run the service inside a
container/gVisor/Firecracker/nsjail with no network and no credentials; see
docs/THREAT_MODEL.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from s3skills._loop import gather_limited, io_bound, sync_method
from s3skills.errors import InvalidPath, S3SkillsError, SkillError, TenantError
from s3skills.ids import SkillId
from s3skills.skills.usage import log_usage

if TYPE_CHECKING:
    from s3skills.skills import SkillLibrary

__all__ = [
    "DEFAULT_TIMEOUT",
    "SAFE_PATH",
    "ScriptObservation",
    "ScriptRunner",
    "key_parts",
    "script_parts",
    "scrubbed_env",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds a script may run when neither `timeout=` nor `SKILL_TIMEOUT` says otherwise."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The only `PATH` a script sees."""

_SUFFIXES = (".py", ".sh")
_MAX_ARG_BYTES = 120_000  # Linux refuses a single argv string over 128 KiB (MAX_ARG_STRLEN)
_DRAIN_SECONDS = 2.0  # after the kill, how long the pipes may take to close
_MIB = 1024 * 1024
_TIMED_OUT = (
    "The script ran longer than {:g} s and was stopped; it and every process it started were killed. "
    "Make it faster or give it less work."
)
_TOO_MUCH = "The script printed more than {} on stdout and was stopped. Print ONE (smaller) JSON value."


@dataclass(frozen=True, slots=True)
class ScriptObservation:
    """What a script run gave, as the model sees it (`to_json()` is the tool's answer).

    Attributes:
        ok: The script exited 0 and printed exactly one JSON value.
        result: That value (also kept on a non-zero exit when stdout was valid JSON).
        error: Why the run failed, in words the model can act on; None when ok.
        exit_code: The exit status, negative for a signal; None when nothing ran.
        stderr_tail: The end of stderr (at most `max_stderr_bytes`).
        duration_ms: Wall time of the whole call (fetch and run).
        timed_out: The time limit was reached and the process group killed.
        truncated: stdout went over its cap and the process group was killed.
    """

    ok: bool
    result: Any = None
    error: str | None = None
    exit_code: int | None = None
    stderr_tail: str = ""
    duration_ms: int = 0
    timed_out: bool = False
    truncated: bool = False

    def to_json(self) -> str:
        """The observation as one JSON object."""
        return json.dumps(asdict(self), ensure_ascii=False, default=str)


class _Refused(Exception):
    """A run that does not happen; the message is for the model."""

    def __init__(self, message: str, outcome: str = "refused") -> None:
        super().__init__(message)
        self.outcome = outcome


# -- pure helpers -------------------------------------------------------------------------


def _bad_segment(segment: str) -> bool:
    return (
        segment in ("", ".", "..")
        or "\\" in segment
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in segment)
        or len(segment.encode("utf-8")) > 255
    )


def script_parts(script: object) -> tuple[str, ...]:
    """Parse a `script` argument into its segments below `scripts/`.

    Accepts `main.py`, `lib/tool.py`, `scripts/main.py`. Rejects (never resolves)
    absolute paths, `..`, `.`, empty segments, backslashes, control characters and
    extensions other than `.py`/`.sh`.

    Raises:
        InvalidPath: Saying why, in words for the model.
    """
    if not isinstance(script, str) or not script.strip():
        raise InvalidPath("Give the script as a path inside the skill's scripts/ folder, e.g. 'main.py'.")
    text = script.strip()
    if text.startswith("/"):
        raise InvalidPath(f"Invalid script {text!r}: give its path relative to the skill's scripts/ folder.")
    parts = tuple(text.split("/"))
    parts = parts[1:] if parts[0] == "scripts" else parts
    if not parts or any(_bad_segment(p) for p in parts):
        raise InvalidPath(f"Invalid script {text!r}: only files under the skill's scripts/ folder can be run.")
    if not parts[-1].endswith(_SUFFIXES) or parts[-1] in _SUFFIXES:
        raise InvalidPath(f"Cannot run {text!r}: only Python (.py) and shell (.sh) scripts can be run.")
    return parts


def key_parts(rel: str) -> tuple[str, ...] | None:
    """The local path segments of a key relative to `scripts/`, or None when unsafe."""
    parts = tuple(rel.split("/"))
    return None if not rel or any(_bad_segment(p) for p in parts) else parts


def scrubbed_env(workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A script's environment, built from scratch (nothing of ours is inherited), plus `extra`."""
    env = {
        "PATH": SAFE_PATH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONNOUSERSITE": "1",
    }
    return env | dict(extra or {})


def _limit(which: int, soft: int | None, slack: int = 0) -> tuple[int, tuple[int, int]] | None:
    """`(resource, (soft, soft + slack))`, never above our own hard limit (raising it fails)."""
    if soft is None:
        return None
    hard = soft + slack
    _, ours = resource.getrlimit(which)
    if ours != resource.RLIM_INFINITY:
        soft, hard = min(soft, ours), min(hard, ours)
    return which, (soft, hard)


def _human(size: int) -> str:
    return f"{size // _MIB} MiB" if size >= _MIB and size % _MIB == 0 else f"{size // 1024} KiB"


def _parse(stdout: bytes) -> tuple[Any, str | None]:
    """The one JSON value of stdout, or why there is none."""
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None, "The script's stdout is not UTF-8 text; it must print one JSON value."
    if not text.strip():
        return None, "The script printed nothing on stdout; it must print one JSON value (send logs to stderr)."
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, (
            f"The script's stdout is not one JSON value ({exc.msg}, line {exc.lineno} column {exc.colno}). "
            f"It must print exactly one JSON value and send anything else to stderr. "
            f"Output began: {text.strip()[:200]!r}"
        )


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# -- process plumbing ---------------------------------------------------------------------


def _killpg(pgid: int) -> None:
    # start_new_session made the script the leader of its own group; this reaches every
    # process it forked that did not leave the group (setsid/setpgid escape it).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Run(asyncio.SubprocessProtocol):
    """One process: keeps the first `out_cap` bytes of stdout and the last `err_cap` of stderr.

    On the first stdout byte past the cap it kills the process group and drops the
    rest, so a script printing gigabytes costs a bounded amount of memory.
    """

    def __init__(self, out_cap: int, err_cap: int) -> None:
        loop = asyncio.get_running_loop()
        self.out_cap, self.err_cap = out_cap, err_cap
        self.stdout, self.stderr = bytearray(), bytearray()
        self.pid: int | None = None
        self.returncode: int | None = None
        self.truncated = self.timed_out = False
        self.exited: asyncio.Future[None] = loop.create_future()  # the script itself ended
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
                    _killpg(self.pid)

    def process_exited(self) -> None:
        # Not `Process.wait()`: on 3.11 it also waits for the pipes, which forked children hold.
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.process_exited()
        self.closed.set_result(None)


class ScriptRunner:
    """Runs scripts of loaded skills in a scratch directory, with limits.

    Args:
        backend: Where the skills are: a `SkillLibrary`, or an `S3Backend` (its `skills`).
        timeout: Wall-clock seconds before the whole process group is killed.
            None: `SKILL_TIMEOUT` from the environment, else 30.
        max_output_bytes: stdout cap; past it the run is stopped (`truncated`).
        max_stderr_bytes: How much of the end of stderr is kept.
        memory_mb: `RLIMIT_AS` (address space) of the script; None for none.
        cpu_seconds: `RLIMIT_CPU` (SIGXCPU, then SIGKILL 1 s later); None
            derives it from the timeout (`ceil(timeout) + 1`).
        max_file_mb: `RLIMIT_FSIZE`, the largest file the script may write.
        max_processes: `RLIMIT_NPROC`. The kernel counts EVERY process of the uid
            (not of the script) and exempts root: it only means something when
            the service runs under a dedicated uid. None for none.
        python: The interpreter of `.py` scripts (`bash` from `SAFE_PATH` runs `.sh`).
        max_script_files: Most files a skill's `scripts/` folder may hold.
        max_script_bytes: Most bytes in that folder.
        extra_env: Variables added to the scrubbed environment (an explicit opt-in).

    Raises:
        ValueError: A timeout that is not a positive number (also from `SKILL_TIMEOUT`).
    """

    def __init__(
        self,
        backend: SkillLibrary | Any,
        *,
        timeout: float | None = None,
        max_output_bytes: int = _MIB,
        max_stderr_bytes: int = 64 * 1024,
        memory_mb: int | None = 512,
        cpu_seconds: int | None = None,
        max_file_mb: int | None = 50,
        max_processes: int | None = 64,
        python: str = sys.executable or "python3",
        max_script_files: int = 200,
        max_script_bytes: int = 10 * _MIB,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        if timeout is None:
            raw = os.environ.get("SKILL_TIMEOUT", "").strip()
            try:
                timeout = float(raw) if raw else DEFAULT_TIMEOUT
            except ValueError:
                raise ValueError(f"SKILL_TIMEOUT must be a number of seconds, not {raw!r}") from None
        if not timeout > 0 or math.isinf(timeout):
            raise ValueError(f"The script timeout must be a positive number of seconds, not {timeout!r}")
        self.library: SkillLibrary = getattr(backend, "skills", backend)
        self.timeout = float(timeout)
        self.max_output_bytes = max_output_bytes
        self.max_stderr_bytes = max_stderr_bytes
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds if cpu_seconds is not None else math.ceil(self.timeout) + 1
        self.max_file_mb = max_file_mb
        self.max_processes = max_processes
        self.python = python
        self.max_script_files = max_script_files
        self.max_script_bytes = max_script_bytes
        self.extra_env = dict(extra_env or {})

    @io_bound
    async def arun(self, skill_id: str, script: str, args: Any, *, loaded: Sequence[str]) -> ScriptObservation:
        """Run `script` of `skill_id` with `json.dumps(args)` as argv[1]. Never raises for a failed run.

        Args:
            skill_id: The skill (`category/skill`; its leaf name also works).
            script: A path inside the skill's `scripts/` folder (`main.py`, `scripts/main.py`).
            args: Any JSON-serialisable value.
            loaded: The skills loaded in this run; any other skill is refused.
        """
        started = time.monotonic()
        outcome, shown = "error", str(skill_id)
        try:
            shown = self._loaded_skill(skill_id, loaded)
            observation, outcome = await self._run(shown, script, args, started)
        except asyncio.CancelledError:
            outcome = "cancelled"  # the process group was killed on the way out
            raise
        except _Refused as refused:
            outcome = refused.outcome
            observation = ScriptObservation(ok=False, error=str(refused), duration_ms=_ms(started))
        except Exception as exc:  # a bug of ours must not take the agent down
            logger.exception("script run of %s failed", shown)
            error = f"The script could not be run: internal error ({type(exc).__name__})."
            observation = ScriptObservation(ok=False, error=error, duration_ms=_ms(started))
        finally:
            self._log(shown, script, outcome, started)
        return observation

    run = sync_method(arun)

    # -- steps ----------------------------------------------------------------------------

    @staticmethod
    def _loaded_skill(skill_id: object, loaded: Sequence[str]) -> str:
        try:
            wanted = str(SkillId.parse(skill_id))
        except S3SkillsError as exc:
            raise _Refused(str(exc)) from None
        by_leaf = [s for s in loaded if "/" not in wanted and SkillId.is_valid(s) and SkillId.parse(s).leaf == wanted]
        if wanted in loaded or len(by_leaf) == 1:
            return wanted if wanted in loaded else by_leaf[0]
        raise _Refused(
            f"Skill '{wanted}' is not loaded in this conversation: load it with cargar_habilidad "
            "first; only the scripts of loaded skills can be run."
        )

    async def _run(self, skill_id: str, script: str, args: Any, started: float) -> tuple[ScriptObservation, str]:
        try:
            parts = script_parts(script)
            payload = json.dumps(args, ensure_ascii=False)
        except (InvalidPath, TypeError, ValueError) as exc:
            raise _Refused(str(exc) if isinstance(exc, InvalidPath) else f"The args are not JSON: {exc}") from None
        if len(payload.encode("utf-8")) > _MAX_ARG_BYTES:
            raise _Refused(f"The args are too large ({len(payload)} characters of JSON; keep them under 100 KB).")
        interpreter = self.python if parts[-1].endswith(".py") else shutil.which("bash", path=SAFE_PATH)
        if interpreter is None:
            raise _Refused("Shell scripts cannot be run here: bash is not installed.")
        workdir = Path(tempfile.mkdtemp(prefix="s3skills-run-"))
        try:
            target = await self._stage(skill_id, parts, workdir)
            run = await self._execute([interpreter, str(target), payload], workdir)
        finally:
            try:
                shutil.rmtree(workdir)
            except OSError as exc:  # e.g. a process that left the group still writes there
                logger.warning("could not remove the work directory of a script run: %s", exc)
                shutil.rmtree(workdir, ignore_errors=True)
        outcome, result, error = self._verdict(run)
        stderr = run.stderr.decode("utf-8", errors="replace")
        observation = ScriptObservation(
            outcome == "ok", result, error, run.returncode, stderr, _ms(started), run.timed_out, run.truncated
        )
        return observation, outcome

    async def _stage(self, skill_id: str, parts: tuple[str, ...], workdir: Path) -> Path:
        """Download the skill's `scripts/` folder into `workdir/scripts/`; return the script's path."""
        library = self.library
        try:
            listed = await library.afiles(skill_id)
        except (SkillError, TenantError) as exc:
            raise _Refused(str(exc)) from None
        except S3SkillsError as exc:
            raise _Refused(f"Could not list the scripts of '{skill_id}': {exc}", "fetch_error") from None
        base = "scripts/"
        files = [f for f in listed if f.path.startswith(base)]
        rel = "/".join(parts)
        if not any(f.path == base + rel for f in files):
            runnable = sorted(f.path[len(base) :] for f in files if f.path.endswith(_SUFFIXES))
            raise _Refused(
                f"Script '{rel}' not found in the scripts/ folder of '{skill_id}' (only scripts/ can be run). "
                f"Available: {', '.join(runnable[:20]) or 'none'}."
            )
        if len(files) > self.max_script_files or sum(f.size for f in files) > self.max_script_bytes:
            raise _Refused(
                f"The scripts/ folder of '{skill_id}' is too large to run ({len(files)} files; the limits are "
                f"{self.max_script_files} files and {_human(self.max_script_bytes)})."
            )
        root = (workdir / "scripts").resolve()
        (workdir / "tmp").mkdir()

        async def fetch(rel_path: str) -> None:
            local = key_parts(rel_path[len(base) :])
            path = root.joinpath(*local).resolve() if local else None
            if path is None or not path.is_relative_to(root):
                logger.warning("skipping an unsafe key in the scripts of skill %s", skill_id)
                return
            body = await library.aopen(skill_id, rel_path, max_bytes=self.max_script_bytes)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body.data)

        # gather_limited lets every started fetch end first, so none writes after the cleanup.
        try:
            jobs = [partial(fetch, f.path) for f in files]
            await gather_limited(jobs, min(self.library.config.limits.concurrency, 16))
        except (S3SkillsError, OSError) as exc:
            raise _Refused(f"Could not fetch the scripts of '{skill_id}': {exc}", "fetch_error") from exc
        return root.joinpath(*parts)

    async def _execute(self, argv: list[str], workdir: Path) -> _Run:
        limits = [
            limit
            for limit in (
                _limit(resource.RLIMIT_CPU, self.cpu_seconds, 1),
                _limit(resource.RLIMIT_AS, self.memory_mb * _MIB if self.memory_mb is not None else None),
                _limit(resource.RLIMIT_FSIZE, self.max_file_mb * _MIB if self.max_file_mb is not None else None),
                _limit(resource.RLIMIT_NPROC, self.max_processes),
                _limit(resource.RLIMIT_CORE, 0),
            )
            if limit is not None
        ]

        def apply_limits() -> None:  # runs in the child between fork and exec: keep it tiny
            for which, pair in limits:
                resource.setrlimit(which, pair)

        run = _Run(self.max_output_bytes, self.max_stderr_bytes)
        try:
            transport, _ = await asyncio.get_running_loop().subprocess_exec(
                lambda: run,
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=scrubbed_env(workdir, self.extra_env),
                start_new_session=True,
                preexec_fn=apply_limits,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise _Refused(f"Could not start the script ({argv[0]}): {exc}", "error") from None
        try:
            await asyncio.wait_for(asyncio.shield(run.exited), self.timeout)
        except TimeoutError:
            run.timed_out = True
        finally:
            _killpg(transport.get_pid())  # always: what it forked dies too, and so does a cancelled run
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(run.closed), _DRAIN_SECONDS)
            transport.close()  # a process that left the group may still hold the pipes
            run.returncode = transport.get_returncode()
        return run

    def _verdict(self, run: _Run) -> tuple[str, Any, str | None]:
        """`(outcome, result, error)` of a finished run; outcome is `ok` or what went wrong."""
        code = run.returncode
        if run.timed_out:
            return "timeout", None, _TIMED_OUT.format(self.timeout)
        if run.truncated:
            return "output_limit", None, _TOO_MUCH.format(_human(self.max_output_bytes))
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            why = {
                signal.SIGXCPU.value: f" (it used more than {self.cpu_seconds} s of CPU time)",
                signal.SIGXFSZ.value: f" (it tried to write a file over {self.max_file_mb} MB)",
                signal.SIGKILL.value: " (perhaps it ran out of memory)",
                signal.SIGSEGV.value: " (it crashed)",
            }.get(-code, "")
            return "signal", None, f"The script was killed by {name}{why}."
        result, problem = _parse(bytes(run.stdout))
        if code != 0:
            hint = " Its JSON output is in result." if problem is None else ""
            return "exit_code", result, f"The script failed with exit code {code}; see stderr_tail.{hint}"
        return ("invalid_output", None, problem) if problem else ("ok", result, None)

    def _log(self, skill: str, script: object, outcome: str, started: float) -> None:
        try:
            tenant = self.library.tenant()
            user, thread = tenant.user_id, tenant.thread_id
        except S3SkillsError:
            user = thread = None
        log_usage(
            "script_run",
            skill=skill,
            user=user,
            thread=thread,
            duration_ms=(time.monotonic() - started) * 1000,
            outcome=outcome,
            script=str(script),
        )
