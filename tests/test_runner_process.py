"""Process plumbing without S3: the rlimit trampoline (no `preexec_fn`), the process-tree kill,
stdin delivery, and the Limits table. Real processes, no mocks.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from procs import alive, eventually

from s3skills.aio import run_sync
from s3skills.runner import Finished, Job, LaunchError, Limits, LocalLauncher
from s3skills.runner import _limits as trampoline
from s3skills.runner.process import limits_prefix, run_process

MIB = 1024 * 1024


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _launch(workdir: Path, code: str, *, stdin: bytes | None = None, timeout: float = 20, **limits: int) -> Finished:
    script = workdir / "script.py"
    script.write_text(code)
    job = Job(
        command=(sys.executable, str(script)),
        workdir=workdir,
        env={"PATH": "/usr/bin:/bin", "HOME": str(workdir)},
        stdin=stdin,
        limits=Limits(**limits),
        timeout=timeout,
        max_output_bytes=MIB,
        max_stderr_bytes=64 * 1024,
    )
    return run_sync(LocalLauncher().launch(job))


# -- the trampoline ------------------------------------------------------------------------------


def test_trampoline_parses_limits_and_the_command() -> None:
    limits, command = trampoline.parse(["CPU=3:4", "AS=100:100", "--", "/bin/echo", "--", "x"])
    assert limits == [(resource.RLIMIT_CPU, (3, 4)), (resource.RLIMIT_AS, (100, 100))]
    assert command == ["/bin/echo", "--", "x"]  # only the first -- separates


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["CPU=1:1", "/bin/true"], "missing '--'"),
        (["STACK=1:1", "--", "/bin/true"], "bad limit"),
        (["CPU=1", "--", "/bin/true"], "bad limit"),
        (["CPU=-1:1", "--", "/bin/true"], "bad limit"),
        (["--"], "absolute path"),
        (["--", "true"], "absolute path"),
    ],
)
def test_trampoline_rejects_bad_arguments(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trampoline.parse(argv)


def test_trampoline_sets_the_limits_then_becomes_the_command() -> None:
    probe = "import os, resource; print(os.getpid(), *resource.getrlimit(resource.RLIMIT_FSIZE))"
    proc = subprocess.run(
        [*limits_prefix(Limits(file_bytes=5 * MIB)), sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    _, soft, hard = proc.stdout.split()
    assert (int(soft), int(hard)) == (5 * MIB, 5 * MIB)


def test_trampoline_reports_a_command_it_cannot_run(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*limits_prefix(Limits()), str(tmp_path / "missing")], capture_output=True, text=True, check=False, timeout=30
    )
    assert proc.returncode == 127
    assert "s3skills launcher:" in proc.stderr


def test_launch_keeps_the_pid_so_the_script_leads_its_session(workdir: Path) -> None:
    code = "import json, os\nprint(json.dumps([os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid()]))\n"
    finished = _launch(workdir, code)
    assert json.loads(finished.stdout) == [True, True]


# -- limits, tree kill, stdin ------------------------------------------------------------------------


def test_limits_table() -> None:
    table = {name: (soft, hard) for name, soft, hard in Limits(cpu_seconds=5, memory_bytes=MIB).rlimits()}
    assert table == {"CPU": (5, 6), "AS": (MIB, MIB), "CORE": (0, 0)}  # CPU: SIGKILL 1 s after SIGXCPU


def test_limits_are_clamped_to_our_own_hard_limit() -> None:
    # In a child that lowered its own hard CPU limit: asking for more than that cannot work.
    code = (
        "import resource\n"
        "from s3skills.runner import Limits\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (7, 7))\n"
        "print(Limits(cpu_seconds=100).rlimits()[0])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert proc.stdout.strip() == "('CPU', 7, 7)"


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        Limits(memory_bytes=-1).rlimits()


def test_timeout_kills_children_and_grandchildren(workdir: Path) -> None:
    code = """
import os, sys, time
child = os.fork()
if child == 0:
    grandchild = os.fork()
    if grandchild == 0:
        time.sleep(60)
        os._exit(0)
    sys.stderr.write(f"grandchild={grandchild}\\n")
    sys.stderr.flush()
    time.sleep(60)
    os._exit(0)
sys.stderr.write(f"child={child}\\n")
sys.stderr.flush()
time.sleep(60)
"""
    finished = _launch(workdir, code, timeout=2)
    assert finished.timed_out
    assert finished.returncode == -9
    pids = [int(line.split("=")[1]) for line in finished.stderr.decode().split()]
    assert len(pids) == 2
    assert eventually(lambda: not any(alive(p) for p in pids)), "a child or grandchild survived"


def test_a_script_that_never_reads_stdin_is_not_blocked_by_big_args(workdir: Path) -> None:
    finished = _launch(workdir, "print('{}')\n", stdin=b"x" * (1024 * 1024))  # 16 pipe buffers
    assert finished.returncode == 0
    assert finished.stdout == b"{}\n"


def test_stdin_is_devnull_without_args(workdir: Path) -> None:
    finished = _launch(workdir, "import sys\nprint(repr(sys.stdin.read()))\n")
    assert finished.stdout == b"''\n"


def test_memory_limit_applies_through_the_trampoline(workdir: Path) -> None:
    finished = _launch(workdir, "data = bytearray(512 * 1024 * 1024)\n", memory_bytes=128 * MIB)
    assert finished.returncode == 1
    assert b"MemoryError" in finished.stderr


def test_a_command_that_cannot_start_is_a_launch_error(workdir: Path) -> None:
    async def start() -> Finished:
        return await run_process(
            [str(workdir / "missing")],
            cwd=workdir,
            env={},
            stdin=None,
            timeout=5,
            max_output_bytes=10,
            max_stderr_bytes=10,
        )

    with pytest.raises(LaunchError, match="Could not start the script"):
        run_sync(start())


def test_no_preexec_fn_anywhere_in_the_runner() -> None:
    # preexec_fn runs Python between fork and exec, unsafe with threads (we always have one).
    package = Path(trampoline.__file__).parent
    assert [p.name for p in package.glob("*.py") if "preexec_fn=" in p.read_text()] == []
