"""The bubblewrap launcher: the same runner, with the script inside `bwrap` namespaces.

Each property is shown against `LocalLauncher` too, where it does NOT hold, so a test that
passes under bwrap is known to test something. Skipped only where bwrap is not installed (install:
`apt-get install -y bubblewrap`; tests/allowed_skips.py allows that outside CI only); an installed
bwrap that cannot create its namespaces fails the tests that need it, with the probe's error.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from s3skills import S3Backend
from s3skills.aio import run_sync
from s3skills.runner import BubblewrapLauncher, Job, Launcher, LaunchError, Limits, LocalLauncher, ScriptRunner
from s3skills.testing import skill_md

SKILL = "aislado/caja"

SCRIPTS = {
    "net.py": """
import json, socket, sys
args = json.load(sys.stdin)
try:
    socket.create_connection(("127.0.0.1", args["port"]), timeout=5).close()
    reached = "connected"
except OSError as exc:
    reached = type(exc).__name__
print(json.dumps({"reached": reached, "interfaces": [n for _, n in socket.if_nameindex()]}))
""",
    "peek.py": """
import json, sys
out = {}
for path in json.load(sys.stdin)["paths"]:
    try:
        with open(path) as f:
            out[path] = f.read()
    except OSError as exc:
        out[path] = type(exc).__name__
print(json.dumps(out))
""",
    "ps.py": """
import json, os
cmdlines = []
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdlines.append(f.read().replace(b"\\0", b" ").decode(errors="replace"))
        except OSError:
            pass
print(json.dumps({"cmdlines": cmdlines, "uid": os.getuid()}))
""",
    "write.py": """
import json, os, sys
out = {}
for path in json.load(sys.stdin)["paths"] + [os.path.join(os.getcwd(), "out.txt")]:
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = type(exc).__name__
print(json.dumps(out))
""",
    "escape.py": """
import json, os, sys, time
token = json.load(sys.stdin)["token"]
child = os.fork()
if child == 0:
    os.setsid()  # leaves the process group: only a pid namespace still reaches it
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", token])
print(json.dumps({"forked": True}))
""",
    "venv.py": "import json, sys\nimport aioitertools\nprint(json.dumps([sys.prefix, aioitertools.__file__]))\n",
    "sleeper.py": "import time\ntime.sleep(60)\n",
    "hog.py": "data = bytearray(1024 * 1024 * 1024)\nprint(len(data))\n",
    "spin.py": "while True:\n    pass\n",
    "hello.sh": '#!/bin/bash\nprintf \'{"shell": %s}\\n\' "$(cat)"\n',
}


def _bwrap_problem() -> str | None:
    """Why bwrap cannot run here, or None when it can (probed through the launcher itself)."""
    try:
        launcher = BubblewrapLauncher()
    except LaunchError as exc:
        return str(exc)
    workdir = Path(tempfile.mkdtemp(prefix="s3skills-probe-"))
    try:
        job = Job(("/bin/sh", "-c", "echo ok"), workdir, {"PATH": "/usr/bin:/bin"}, None, Limits(), 20, 1024, 4096)
        finished = run_sync(launcher.launch(job))
    finally:
        shutil.rmtree(workdir)
    if finished.returncode != 0 or finished.stdout != b"ok\n":
        return f"bwrap cannot create its namespaces here: {finished.stderr.decode(errors='replace').strip()}"
    return None


INSTALLED = shutil.which("bwrap") is not None
PROBLEM = _bwrap_problem() if INSTALLED else "bubblewrap is not installed"
_skip_without_bwrap = pytest.mark.skipif(
    not INSTALLED, reason="bubblewrap is not installed (apt-get install -y bubblewrap)"
)


def _fail_unless_bwrap_runs() -> None:
    if PROBLEM is not None:
        pytest.fail(f"bubblewrap is installed but cannot run here: {PROBLEM}")


@pytest.fixture
def bwrap_runs() -> None:
    """Fails the test when an installed bwrap cannot create its namespaces (never a skip)."""
    _fail_unless_bwrap_runs()


def needs_bwrap(test: Callable[..., Any]) -> Callable[..., Any]:
    """Skipped without bwrap; failed when bwrap is there but cannot run."""
    marked: Callable[..., Any] = _skip_without_bwrap(pytest.mark.usefixtures("bwrap_runs")(test))
    return marked


@pytest.fixture
def seeded(module_backend: Callable[[dict[str, bytes]], S3Backend]) -> S3Backend:
    files = {
        f"ana/skills/{SKILL}/SKILL.md": skill_md("caja", "Scripts that probe the sandbox.", body="# caja\n").encode()
    }
    files.update({f"ana/skills/{SKILL}/scripts/{name}": text.encode() for name, text in SCRIPTS.items()})
    return module_backend(files)


def _runner(backend: S3Backend, launcher: Launcher, **options: Any) -> ScriptRunner:
    return ScriptRunner(backend, launcher=launcher, **{"timeout": 20, **options})


def _launchers() -> list[Any]:
    return [
        pytest.param("bwrap", marks=_skip_without_bwrap),
        pytest.param("local"),
    ]


def _make(kind: str) -> Launcher:
    if kind == "bwrap":
        _fail_unless_bwrap_runs()
        return BubblewrapLauncher()
    return LocalLauncher()


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.mark.parametrize("kind", _launchers())
def test_the_sandbox_has_no_network(seeded: S3Backend, listener: int, kind: str) -> None:
    obs = _runner(seeded, _make(kind)).run(SKILL, "net.py", {"port": listener}, loaded=[SKILL])
    assert obs.ok, obs
    if kind == "bwrap":
        assert obs.result["reached"] != "connected"
        assert obs.result["interfaces"] == ["lo"]  # its own loopback, not the host's
    else:  # not a sandbox: the host's loopback (and everything else) is reachable
        assert obs.result["reached"] == "connected"


@pytest.fixture
def planted() -> Iterator[list[str]]:
    """A secret file in /tmp and one in the service's HOME."""
    token = uuid.uuid4().hex
    paths = [Path(tempfile.gettempdir()) / f"s3skills-planted-{token}", Path.home() / f".s3skills-planted-{token}"]
    for path in paths:
        path.write_text(f"secret-{token}")
    try:
        yield [str(p) for p in paths]
    finally:
        for path in paths:
            path.unlink()


@pytest.mark.parametrize("kind", _launchers())
def test_the_sandbox_cannot_read_files_outside_its_staging_dir(
    seeded: S3Backend, planted: list[str], kind: str
) -> None:
    paths = [*planted, "/etc/hostname", "/etc/passwd"]
    obs = _runner(seeded, _make(kind)).run(SKILL, "peek.py", {"paths": paths}, loaded=[SKILL])
    assert obs.ok, obs
    if kind == "bwrap":
        assert obs.result == dict.fromkeys(paths, "FileNotFoundError")
    else:
        assert all(obs.result[p].startswith("secret-") for p in planted)


@pytest.mark.parametrize("kind", _launchers())
def test_the_sandbox_cannot_see_other_processes(seeded: S3Backend, kind: str) -> None:
    obs = _runner(seeded, _make(kind)).run(SKILL, "ps.py", None, loaded=[SKILL])
    assert obs.ok, obs
    ours = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    seen_us = any(ours in line for line in obs.result["cmdlines"])
    if kind == "bwrap":
        assert not seen_us
        assert len(obs.result["cmdlines"]) <= 3  # bwrap's init, the script (and a shell at most)
        assert obs.result["uid"] == 65534
    else:
        assert seen_us


@needs_bwrap
def test_in_the_sandbox_only_the_staging_dir_is_writable(seeded: S3Backend, planted: list[str]) -> None:
    targets = ["/x", "/tmp/x", "/usr/x", str(Path(planted[1]).with_name(".s3skills-new"))]
    obs = _runner(seeded, BubblewrapLauncher()).run(SKILL, "write.py", {"paths": targets}, loaded=[SKILL])
    assert obs.ok, obs
    written = {path for path, what in obs.result.items() if what == "written"}
    assert [Path(p).name for p in written] == ["out.txt"]  # in the staging dir, and nowhere else
    assert not Path(targets[-1]).exists()


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _gone(token: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while _processes_with(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@needs_bwrap
def test_in_the_sandbox_even_a_setsid_escapee_is_killed(seeded: S3Backend) -> None:
    # With LocalLauncher this process survives (test_runner: the documented limit);
    # the sandbox's pid namespace dies with its init, taking every process in it.
    token = f"s3skills-escapee-{uuid.uuid4().hex}"
    obs = _runner(seeded, BubblewrapLauncher()).run(SKILL, "escape.py", {"token": token}, loaded=[SKILL])
    assert obs.ok, obs
    try:
        assert _gone(token)
    finally:
        for pid in _processes_with(token):
            os.kill(pid, 9)


@needs_bwrap
def test_in_the_sandbox_the_timeout_and_the_limits_still_apply(seeded: S3Backend) -> None:
    runner = _runner(seeded, BubblewrapLauncher(), timeout=1)
    slow = runner.run(SKILL, "sleeper.py", None, loaded=[SKILL])
    assert slow.timed_out
    assert "longer than 1 s" in (slow.error or "")

    hog = _runner(seeded, BubblewrapLauncher(), memory_mb=256).run(SKILL, "hog.py", None, loaded=[SKILL])
    assert hog.exit_code == 1
    assert "MemoryError" in hog.stderr_tail

    spin = _runner(seeded, BubblewrapLauncher(), cpu_seconds=1).run(SKILL, "spin.py", None, loaded=[SKILL])
    assert spin.exit_code == -24  # SIGXCPU, reported as a signal although bwrap says 152
    assert "CPU time" in (spin.error or "")


@needs_bwrap
def test_in_the_sandbox_shell_scripts_and_args_on_stdin_work(seeded: S3Backend) -> None:
    obs = _runner(seeded, BubblewrapLauncher()).run(SKILL, "hello.sh", {"a": [1]}, loaded=[SKILL])
    assert obs.ok, obs
    assert obs.result == {"shell": {"a": [1]}}


@needs_bwrap
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the tests do not run in a virtualenv")
def test_a_virtualenv_shown_read_only_runs_scripts_with_its_packages(seeded: S3Backend) -> None:
    launcher = BubblewrapLauncher(ro_binds=[sys.prefix])
    obs = ScriptRunner(seeded, timeout=20, python=sys.executable, launcher=launcher).run(
        SKILL, "venv.py", None, loaded=[SKILL]
    )
    assert obs.ok, obs
    prefix, module = obs.result
    assert prefix == sys.prefix
    assert Path(module).is_relative_to(sys.prefix)
    bare = _runner(seeded, BubblewrapLauncher()).run(SKILL, "venv.py", None, loaded=[SKILL])
    # Without the bind: the base interpreter, which cannot see the venv's packages.
    assert (
        "ModuleNotFoundError" in bare.stderr_tail
        if not bare.ok
        else not Path(bare.result[1]).is_relative_to(sys.prefix)
    )


def test_bubblewrap_launcher_says_when_bwrap_is_missing(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="bubblewrap"):
        BubblewrapLauncher(str(tmp_path / "no-bwrap"))


def test_both_launchers_fit_the_seam() -> None:
    assert isinstance(LocalLauncher(), Launcher)
    if INSTALLED:
        assert isinstance(BubblewrapLauncher(), Launcher)
    assert not isinstance(object(), Launcher)


@needs_bwrap
def test_bubblewrap_command_line_unshares_everything() -> None:
    job = Job((sys.executable, "/w/scripts/main.py"), Path("/w"), {}, None, Limits(), 5, 10, 10)
    argv = BubblewrapLauncher().sandbox_argv(job)
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--disable-userns"):
        assert flag in argv
    assert argv[argv.index("--bind") + 1 : argv.index("--bind") + 3] == ["/w", "/w"]
    assert argv.count("--bind") == 1  # the staging dir is the only writable bind
    assert argv[argv.index("--") + 1 :] == [os.path.realpath(sys.executable), "/w/scripts/main.py"]
    assert subprocess.run([argv[0], "--version"], capture_output=True, check=False).returncode == 0
