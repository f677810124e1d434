"""Script arguments stay private: not in argv (world-readable `/proc/<pid>/cmdline`), but on stdin
and in a 0600 file. A real scanner process reads every `/proc/*/cmdline` while a script holds
a secret argument; as another uid (when the tests run as root) it also tries the args file,
the script's environ and its stdin. `args_via="argv"` is shown to expose the secret.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from s3skills import S3Backend
from s3skills.runner import ScriptRunner
from s3skills.testing import skill_md

SKILL = "privado/tenant"
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

# Reads its arguments the documented way (stdin, argv[1] when given), publishes its pid and
# args-file path, then holds the secret until the test says go.
HOLD = """
import json, os, sys, time
raw = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
args = json.loads(raw)
folder = args["dir"]
with open(os.path.join(folder, "pid.tmp"), "w") as f:
    json.dump({"pid": os.getpid(), "args_file": os.environ.get("SKILL_ARGS_FILE")}, f)
os.rename(os.path.join(folder, "pid.tmp"), os.path.join(folder, "pid"))
deadline = time.monotonic() + 30
while not os.path.exists(os.path.join(folder, "go")) and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"secret_length": len(args["ssn"])}))
"""

MODES = """
import json, os, stat
p = os.environ["SKILL_ARGS_FILE"]
with open(p) as f:
    args = json.load(f)
mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)
print(json.dumps({"file": mode(p), "dir": mode(os.path.dirname(p)), "args": args}))
"""

# Another local process: 50 passes over every /proc/*/cmdline, then tries the other channels.
SCANNER = """
import json, os, sys
secret = sys.stdin.readline().strip().encode()
pid, args_file = sys.argv[1], sys.argv[2]
seen_target, hits = 0, set()
for _ in range(50):
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == str(os.getpid()):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                data = f.read()
        except OSError:
            continue
        seen_target += entry == pid and bool(data)
        if secret in data:
            hits.add(entry)
def readable(path):
    try:
        with open(path, "rb") as f:
            return secret in f.read()
    except OSError:
        return False
print(json.dumps({"seen_target": seen_target, "hits": sorted(hits), "args_file": readable(args_file),
                  "environ": readable(f"/proc/{pid}/environ"), "stdin": readable(f"/proc/{pid}/fd/0")}))
"""


@pytest.fixture
def runner_for(module_backend: Callable[[dict[str, bytes]], S3Backend]) -> Any:
    md = skill_md("tenant", "Holds a secret argument.", body="# tenant\n")
    files = {f"ana/skills/{SKILL}/SKILL.md": md.encode()}
    scripts = {"hold.py": HOLD, "modes.py": MODES}
    files.update({f"ana/skills/{SKILL}/scripts/{name}": text.encode() for name, text in scripts.items()})
    backend = module_backend(files)
    return lambda via: ScriptRunner(backend, timeout=30, args_via=via)


def _scan_as() -> dict[str, Any]:
    """Run the scanner as another uid when we can (root), so file modes are what is tested."""
    if os.geteuid() == 0 and os.access(SYSTEM_PYTHON, os.X_OK):
        return {"python": SYSTEM_PYTHON, "user": NOBODY, "group": NOBODY, "extra_groups": []}
    return {"python": sys.executable}


async def _run_while_scanning(runner: ScriptRunner, folder: Path, secret: str) -> tuple[Any, dict[str, Any]]:
    """Start `hold.py` with the secret, scan while it holds it, then let it finish."""
    args = {"ssn": secret, "dir": str(folder)}
    task = asyncio.create_task(runner.arun(SKILL, "hold.py", args, loaded=[SKILL]))
    try:
        pid_file = folder / "pid"
        for _ in range(3000):
            if pid_file.exists() or task.done():
                break
            await asyncio.sleep(0.01)
        assert pid_file.exists(), task.result() if task.done() else "the script never started"
        info = json.loads(pid_file.read_text())
        how = _scan_as()
        scanner = await asyncio.create_subprocess_exec(
            how.pop("python"),
            "-I",
            "-c",
            SCANNER,
            str(info["pid"]),
            str(info["args_file"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"},
            **how,
        )
        out, _ = await scanner.communicate((secret + "\n").encode())
        report = json.loads(out)
    finally:
        (folder / "go").touch()
    observation = await task
    return observation, report


async def test_a_concurrent_process_never_sees_the_secret_in_any_cmdline(runner_for: Any, tmp_path: Path) -> None:
    secret = f"ssn-{uuid.uuid4().hex}"
    observation, report = await _run_while_scanning(runner_for("stdin"), tmp_path, secret)

    assert observation.ok, observation
    assert observation.result == {"secret_length": len(secret)}  # the script did get it
    assert report["seen_target"] > 0  # the scanner read the script's own cmdline while it ran
    assert report["hits"] == []


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK), reason="needs root to scan as uid 65534"
)
async def test_another_uid_cannot_read_the_args_file_environ_or_stdin(runner_for: Any, tmp_path: Path) -> None:
    secret = f"ssn-{uuid.uuid4().hex}"
    observation, report = await _run_while_scanning(runner_for("stdin"), tmp_path, secret)

    assert observation.ok, observation
    assert report["seen_target"] > 0
    assert report == {**report, "hits": [], "args_file": False, "environ": False, "stdin": False}


async def test_args_via_argv_exposes_the_secret_to_every_local_process(runner_for: Any, tmp_path: Path) -> None:
    # The documented cost of seed 003's contract: why it is an explicit opt-in.
    secret = f"ssn-{uuid.uuid4().hex}"
    observation, report = await _run_while_scanning(runner_for("argv"), tmp_path, secret)

    assert observation.ok, observation
    assert report["hits"], "argv is world-readable in /proc/<pid>/cmdline"


def test_args_file_is_private_to_the_service_uid(runner_for: Any) -> None:
    observation = runner_for("stdin").run(SKILL, "modes.py", {"a": 1}, loaded=[SKILL])
    assert observation.ok, observation
    assert observation.result == {"file": 0o600, "dir": 0o700, "args": {"a": 1}}


# -- the bundled example and the scaffold read stdin ---------------------------------------------

ITP = Path(__file__).parents[1] / "s3skills/examples/library/calculos/impuestos-transmision/scripts/calcular_itp.py"


@pytest.mark.parametrize(
    ("stdin", "argv", "code"),
    [
        ('{"precio": 250000, "comunidad": "madrid"}', [], 0),
        ("", ['{"precio": 250000, "comunidad": "madrid"}'], 0),  # seed 003's argv[1], when given
        ("", [], 2),  # nothing on stdin: a clear error
        ("not json", [], 2),
    ],
)
def test_example_itp_script_reads_stdin_or_argv(stdin: str, argv: list[str], code: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-I", str(ITP), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        timeout=30,
        check=False,
    )
    out = json.loads(proc.stdout)
    assert proc.returncode == code, proc.stderr
    assert (out["cuota"] == 15000.0) if code == 0 else bool(out["error"])


def test_scaffold_script_reads_stdin_or_argv(tmp_path: Path) -> None:
    from s3skills.cli.scaffold import SCRIPT_PATH, scaffold_files

    script = tmp_path / "main.py"
    script.write_bytes(scaffold_files("echo-stats", "Stats.", code=True)[SCRIPT_PATH])
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    def run(stdin: str, *argv: str) -> Any:
        proc = subprocess.run(
            [sys.executable, "-I", str(script), *argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        )
        return json.loads(proc.stdout)

    assert run('{"numbers": [1, 2, 3]}')["result"]["count"] == 3
    assert run("", '{"numbers": [4]}')["result"]["count"] == 1
