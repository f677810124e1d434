"""`SandboxBackendLauncher` through a real deepagents sandbox backend: `LocalShellBackend`
(`virtual_mode=False`, so upload paths and command paths agree). It isolates nothing; what
is tested is the launcher's contract: upload, stdin args, separate stdout/stderr, limits,
time limit, output cap, status, cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends.local_shell import LocalShellBackend

from s3skills import S3Backend
from s3skills.runner import SandboxBackendLauncher, ScriptRunner
from s3skills.testing import skill_md

SKILL = "remoto/caja"
SCRIPTS = {
    "main.py": """
import json, os, sys
from helpers import triple
args = json.load(sys.stdin)
sys.stderr.write("log line\\n")
with open(os.environ["SKILL_ARGS_FILE"]) as f:
    same = json.load(f) == args
print(json.dumps({"tripled": triple(args["n"]), "cwd": os.getcwd(), "same": same, "argv": sys.argv[1:],
                  "env": sorted(os.environ)}))
""",
    "helpers.py": "def triple(n):\n    return 3 * n\n",
    "argv.py": "import json, sys\nprint(json.dumps(json.loads(sys.argv[1])))\n",
    "sleeper.py": "import time\ntime.sleep(60)\n",
    "flood.py": "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 65536)\n",
    "spin.py": "while True:\n    pass\n",
    "exit3.py": "import sys\nprint('{\"bad\": 1}')\nsys.exit(3)\n",
}


@pytest.fixture
def seeded(module_backend: Callable[[dict[str, bytes]], S3Backend]) -> S3Backend:
    files = {
        f"ana/skills/{SKILL}/SKILL.md": skill_md("caja", "Scripts run in a sandbox backend.", body="# caja\n").encode()
    }
    files.update({f"ana/skills/{SKILL}/scripts/{name}": text.encode() for name, text in SCRIPTS.items()})
    return module_backend(files)


@pytest.fixture
def sandbox_root(tmp_path: Path) -> Path:
    return tmp_path / "sandbox"


def _runner(backend: S3Backend, root: Path, **options: Any) -> ScriptRunner:
    shell = LocalShellBackend(root_dir=root.parent, virtual_mode=False, env={"PATH": "/usr/bin:/bin"})
    launcher = SandboxBackendLauncher(shell, root=str(root), python="/usr/bin/python3")
    return ScriptRunner(backend, launcher=launcher, **{"timeout": 20, **options})


def test_a_script_runs_in_the_sandbox_with_args_on_stdin(seeded: S3Backend, sandbox_root: Path) -> None:
    obs = _runner(seeded, sandbox_root).run(SKILL, "main.py", {"n": 7}, loaded=[SKILL])
    assert obs.ok, obs
    assert obs.result["tripled"] == 21
    assert obs.result["same"] is True
    assert obs.result["argv"] == []
    assert Path(obs.result["cwd"]).parent == sandbox_root  # the sandbox's own run folder
    assert "SKILL_ARGS_FILE" in obs.result["env"]
    assert "AWS_ACCESS_KEY_ID" not in obs.result["env"]  # env -i: only the job's variables
    assert obs.stderr_tail == "log line\n"  # kept apart from stdout
    assert list(sandbox_root.iterdir()) == []  # the run folder is removed


def test_args_via_argv_in_the_sandbox(seeded: S3Backend, sandbox_root: Path) -> None:
    obs = _runner(seeded, sandbox_root, args_via="argv").run(SKILL, "argv.py", {"it's": "quoted"}, loaded=[SKILL])
    assert obs.ok, obs
    assert obs.result == {"it's": "quoted"}


def test_time_limit_in_the_sandbox(seeded: S3Backend, sandbox_root: Path) -> None:
    obs = _runner(seeded, sandbox_root, timeout=1).run(SKILL, "sleeper.py", None, loaded=[SKILL])
    assert obs.timed_out
    assert "longer than 1 s" in (obs.error or "")


def test_output_cap_in_the_sandbox(seeded: S3Backend, sandbox_root: Path) -> None:
    obs = _runner(seeded, sandbox_root, max_output_bytes=65536).run(SKILL, "flood.py", None, loaded=[SKILL])
    assert obs.truncated
    assert "more than 64 KiB" in (obs.error or "")


def test_cpu_limit_and_exit_codes_in_the_sandbox(seeded: S3Backend, sandbox_root: Path) -> None:
    spin = _runner(seeded, sandbox_root, cpu_seconds=1).run(SKILL, "spin.py", None, loaded=[SKILL])
    assert spin.exit_code == -24  # SIGXCPU
    assert "CPU time" in (spin.error or "")
    failed = _runner(seeded, sandbox_root).run(SKILL, "exit3.py", None, loaded=[SKILL])
    assert failed.exit_code == 3
    assert failed.result == {"bad": 1}


def test_root_must_be_absolute() -> None:
    shell = LocalShellBackend(root_dir="/", virtual_mode=False)
    with pytest.raises(ValueError, match="absolute"):
        SandboxBackendLauncher(shell, root="relative/dir")
