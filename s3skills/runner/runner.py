"""`ScriptRunner` (seed 003): run a file of a loaded skill's `scripts/`, get one JSON value back.

`ScriptRunner.arun(skill_id, script, args, loaded=...)` stages the skill's whole
`scripts/` folder into a fresh private directory (`staging`), hands the run to a
`Launcher` (`launcher`) without a shell, with a scrubbed environment and limits, and
turns what happened into a `ScriptObservation` the model can act on. It never raises
for a refused or failed run, and the directory is removed whatever happens.

How the script gets its arguments (`args_via`):
- `"stdin"` (default): the JSON arrives on stdin, and the same bytes are in a 0600
  file named by `SKILL_ARGS_FILE`. Neither is visible to other users: argv is
  (`/proc/<pid>/cmdline` is world-readable), so arguments stay out of it.
- `"argv"`: seed 003's contract, `python script.py '<json>'`. Any local user can
  read the arguments while the script runs; use it only for scripts that need it
  and arguments that are not secret.

With the default `LocalLauncher` this is NOT A SANDBOX; see `LocalLauncher` and
docs/THREAT_MODEL.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from s3skills._loop import io_bound, sync_method
from s3skills.errors import InvalidPath, S3SkillsError
from s3skills.ids import SkillId
from s3skills.runner.launcher import Job, Launcher, LocalLauncher
from s3skills.runner.process import Finished, LaunchError, Limits
from s3skills.runner.staging import Refused, human, private_dir, script_parts, stage, write_args
from s3skills.skills.usage import log_usage
from s3skills.skills.versions.approvals import scripts_digest
from s3skills.tenancy import loaded_skill_ids

if TYPE_CHECKING:
    from s3skills.skills import SkillLibrary

__all__ = ["ARGS_ENV", "DEFAULT_TIMEOUT", "SAFE_PATH", "ArgsVia", "ScriptObservation", "ScriptRunner", "scrubbed_env"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds a script may run when neither `timeout=` nor `SKILL_TIMEOUT` says otherwise."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The only `PATH` a script sees."""

ARGS_ENV = "SKILL_ARGS_FILE"
"""With `args_via="stdin"`: the variable naming the 0600 file that holds the JSON arguments."""

ArgsVia = Literal["stdin", "argv"]

_MAX_ARG_BYTES = 120_000  # Linux refuses a single argv string over 128 KiB (MAX_ARG_STRLEN)
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


class ScriptRunner:
    """Runs scripts of loaded skills in a private scratch directory, with limits.

    Args:
        backend: Where the skills are: a `SkillLibrary`, or an `S3Backend` (its `skills`).
        timeout: Wall-clock seconds before the whole process tree is killed.
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
        python: The interpreter of `.py` scripts, a path or a name looked up on the
            service's PATH (`bash` from `SAFE_PATH` runs `.sh`).
        max_script_files: Most files a skill's `scripts/` folder may hold.
        max_script_bytes: Most bytes in that folder.
        extra_env: Variables added to the scrubbed environment (an explicit opt-in).
        args_via: `"stdin"` (default: JSON on stdin and in the 0600 file named by
            `SKILL_ARGS_FILE`) or `"argv"` (seed 003's `argv[1]`, readable by every
            local user in `/proc/<pid>/cmdline` while the script runs).
        launcher: What runs the staged script; `LocalLauncher()` (not a sandbox)
            by default, `BubblewrapLauncher()` for namespaces on this host.

    Raises:
        ValueError: A timeout that is not a positive number (also from
            `SKILL_TIMEOUT`), or an unknown `args_via`.
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
        args_via: ArgsVia = "stdin",
        launcher: Launcher | None = None,
    ) -> None:
        if timeout is None:
            raw = os.environ.get("SKILL_TIMEOUT", "").strip()
            try:
                timeout = float(raw) if raw else DEFAULT_TIMEOUT
            except ValueError:
                raise ValueError(f"SKILL_TIMEOUT must be a number of seconds, not {raw!r}") from None
        if not timeout > 0 or math.isinf(timeout):
            raise ValueError(f"The script timeout must be a positive number of seconds, not {timeout!r}")
        if args_via not in ("stdin", "argv"):
            raise ValueError(f"args_via must be 'stdin' or 'argv', not {args_via!r}")
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
        self.args_via: ArgsVia = args_via
        self.launcher: Launcher = launcher if launcher is not None else LocalLauncher()

    @property
    def limits(self) -> Limits:
        """The rlimits every run gets."""
        return Limits(
            cpu_seconds=self.cpu_seconds,
            memory_bytes=self.memory_mb * _MIB if self.memory_mb is not None else None,
            file_bytes=self.max_file_mb * _MIB if self.max_file_mb is not None else None,
            processes=self.max_processes,
        )

    @io_bound
    async def arun(self, skill_id: str, script: str, args: Any, *, loaded: Sequence[str]) -> ScriptObservation:
        """Run `script` of `skill_id` with `json.dumps(args)` as its input. Never raises for a failed run.

        Args:
            skill_id: The skill (`category/skill`; its leaf name also works).
            script: A path inside the skill's `scripts/` folder (`main.py`, `scripts/main.py`).
            args: Any JSON-serialisable value, delivered as `args_via` says.
            loaded: The skills loaded in this run; any other skill is refused.
        """
        started = time.monotonic()
        outcome, shown = "error", str(skill_id)
        try:
            shown = self._loaded_skill(skill_id, loaded)
            observation, outcome = await self._run(shown, script, args, started)
        except asyncio.CancelledError:
            outcome = "cancelled"  # the launcher killed the processes on the way out
            raise
        except Refused as refused:
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
            raise Refused(str(exc)) from None
        loaded = loaded_skill_ids(list(loaded))  # may come from graph state: client input
        by_leaf = [s for s in loaded if "/" not in wanted and SkillId.parse(s).leaf == wanted]
        if wanted in loaded or len(by_leaf) == 1:
            return wanted if wanted in loaded else by_leaf[0]
        raise Refused(
            f"Skill '{wanted}' is not loaded in this conversation: load it with cargar_habilidad "
            "first; only the scripts of loaded skills can be run."
        )

    async def _run(self, skill_id: str, script: str, args: Any, started: float) -> tuple[ScriptObservation, str]:
        try:
            parts = script_parts(script)
            payload = json.dumps(args, ensure_ascii=False)
        except (InvalidPath, TypeError, ValueError) as exc:
            raise Refused(str(exc) if isinstance(exc, InvalidPath) else f"The args are not JSON: {exc}") from None
        if len(payload.encode("utf-8")) > _MAX_ARG_BYTES:
            raise Refused(f"The args are too large ({len(payload)} characters of JSON; keep them under 100 KB).")
        if parts[-1].endswith(".py"):
            interpreter = self.python if os.path.isabs(self.python) else shutil.which(self.python)
            if interpreter is None:
                raise Refused(f"Python scripts cannot be run here: {self.python!r} is not installed.")
        else:
            interpreter = shutil.which("bash", path=SAFE_PATH)
            if interpreter is None:
                raise Refused("Shell scripts cannot be run here: bash is not installed.")
        with private_dir() as workdir:
            target = await stage(
                self.library,
                skill_id,
                parts,
                workdir,
                max_files=self.max_script_files,
                max_bytes=self.max_script_bytes,
            )
            await self._check_approval(skill_id, parts, workdir / "scripts")
            try:
                finished = await self.launcher.launch(self._job(interpreter, target, workdir, payload))
            except LaunchError as exc:
                raise Refused(str(exc), "error") from None
        outcome, result, error = self._verdict(finished)
        stderr = finished.stderr.decode("utf-8", errors="replace")
        observation = ScriptObservation(
            outcome == "ok",
            result,
            error,
            finished.returncode,
            stderr,
            _ms(started),
            finished.timed_out,
            finished.truncated,
        )
        return observation, outcome

    async def _check_approval(self, skill_id: str, parts: tuple[str, ...], root: Path) -> None:
        """Refuse a script of a shared skill whose staged `scripts/` folder no approval names.

        The digest is computed from the bytes staged for this run (what would run), never
        from what the store or a record claims (`s3skills.skills.versions.approvals`).
        """
        try:
            needed = await self.library.aneeds_approval(skill_id)
        except S3SkillsError as exc:
            raise Refused(str(exc)) from None
        if needed is None:
            return

        def read() -> dict[str, bytes]:
            return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

        digest = scripts_digest(await asyncio.to_thread(read))
        script = "/".join(parts)
        if await self.library.aapproval(skill_id, digest, script) is None:
            raise Refused(
                f"The script scripts/{script} of '{skill_id}' is not approved for its current content "
                f"(scripts digest {digest[:12]}): it changed since it was approved, or was never approved. "
                f"An approver reviews it and runs: s3skills --shared <library> approve {skill_id} "
                f"--script scripts/{script}"
            )

    def _job(self, interpreter: str, target: Path, workdir: Path, payload: str) -> Job:
        """The launcher's job: the arguments go to stdin and a 0600 file, or (opt-in) to argv."""
        env = scrubbed_env(workdir, self.extra_env)
        command: tuple[str, ...] = (interpreter, str(target))
        stdin: bytes | None = None
        if self.args_via == "argv":
            command = (*command, payload)
        else:
            stdin = payload.encode("utf-8")
            env[ARGS_ENV] = str(write_args(workdir, stdin))
        return Job(
            command=command,
            workdir=workdir,
            env=env,
            stdin=stdin,
            limits=self.limits,
            timeout=self.timeout,
            max_output_bytes=self.max_output_bytes,
            max_stderr_bytes=self.max_stderr_bytes,
        )

    def _verdict(self, run: Finished) -> tuple[str, Any, str | None]:
        """`(outcome, result, error)` of a finished run; outcome is `ok` or what went wrong."""
        code = run.returncode
        if run.timed_out:
            return "timeout", None, _TIMED_OUT.format(self.timeout)
        if run.truncated:
            return "output_limit", None, _TOO_MUCH.format(human(self.max_output_bytes))
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            why = {
                signal.SIGXCPU.value: f" (it used more than {self.cpu_seconds} s of CPU time)",
                signal.SIGXFSZ.value: f" (it tried to write a file over {self.max_file_mb} MB)",
                signal.SIGKILL.value: " (perhaps it ran out of memory)",
                signal.SIGSEGV.value: " (it crashed)",
            }.get(-code, "")
            return "signal", None, f"The script was killed by {name}{why}."
        result, problem = _parse(run.stdout)
        if code != 0:
            hint = " Its JSON output is in result." if problem is None else ""
            return "exit_code", result, f"The script failed with exit code {code}; see stderr_tail.{hint}"
        return ("invalid_output", None, problem) if problem else ("ok", result, None)

    def _log(self, skill: str, script: object, outcome: str, started: float) -> None:
        version = None
        try:
            tenant = self.library.tenant()
            user, thread = tenant.user_id, tenant.thread_id
            pin = tenant.skill_versions.get(skill)
            version = pin.version if pin is not None else None  # the version the thread loaded
        except S3SkillsError:
            user = thread = None
        log_usage(
            "script_run",
            skill=skill,
            user=user,
            thread=thread,
            duration_ms=(time.monotonic() - started) * 1000,
            outcome=outcome,
            version=version,
            script=str(script),
        )
        self.library.count_use(skill, "script_run", outcome)
