"""The script runner (seed 003): run a file of a loaded skill's `scripts/`, get one JSON value back.

Split by seam:
- `staging`: the skill's `scripts/` fetched into a private (0700) temp dir; path checks.
- `process`: starting a process with rlimits in a new session (a trampoline, no
  `preexec_fn`), output caps, killing its process group.
- `launcher`: the seam. `LocalLauncher` (a child process; NOT a sandbox) and
  `BubblewrapLauncher` (bwrap namespaces: no network, no other processes, only the
  staged folder writable), `SandboxBackendLauncher` (a deepagents sandbox backend's
  `execute`: a container, a VM, a remote sandbox).
- `runner`: `ScriptRunner` and the `ScriptObservation` the model sees.

Arguments go to the script's stdin (and a 0600 file named by `SKILL_ARGS_FILE`), not
to argv, which every local user can read; `args_via="argv"` keeps seed 003's
`argv[1]` for the scripts that need it. See docs/THREAT_MODEL.md.
"""

from s3skills.runner.launcher import SYSTEM_DIRS, BubblewrapLauncher, Job, Launcher, LocalLauncher
from s3skills.runner.process import Finished, LaunchError, Limits
from s3skills.runner.runner import (
    ARGS_ENV,
    DEFAULT_TIMEOUT,
    SAFE_PATH,
    ArgsVia,
    ScriptObservation,
    ScriptRunner,
    scrubbed_env,
)
from s3skills.runner.sandbox_backend import SandboxBackendLauncher
from s3skills.runner.staging import key_parts, script_parts

__all__ = [
    "ARGS_ENV",
    "DEFAULT_TIMEOUT",
    "SAFE_PATH",
    "SYSTEM_DIRS",
    "ArgsVia",
    "BubblewrapLauncher",
    "Finished",
    "Job",
    "LaunchError",
    "Launcher",
    "Limits",
    "LocalLauncher",
    "SandboxBackendLauncher",
    "ScriptObservation",
    "ScriptRunner",
    "key_parts",
    "script_parts",
    "scrubbed_env",
]
