"""The script runner (seed 003): real scripts, fetched from a moto bucket, run in real processes.

The library is read-only for these tests, so one bucket and one store (one aioboto3 client)
serve the module; the bucket is re-seeded when another module's reset has removed it.
Durations are never asserted; limits are checked by what the process could or could not do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import stat
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from langchain_core.messages import AIMessage, ToolMessage
from procs import alive, eventually

import s3skills.runner.process as runner_process
from s3skills import S3Backend, create_skills_agent
from s3skills._loop import run_sync
from s3skills.layout import KeyLayout
from s3skills.runner import Finished, Job, LocalLauncher, ScriptObservation, ScriptRunner, key_parts, script_parts
from s3skills.storage import RequestCounter
from s3skills.storage import S3ObjectStore as ObjectStore
from s3skills.testing import MemoryObjectStore, MotoServer, make_client, unique_bucket_name
from s3skills.testing.scripted import ScriptedChatModel, tool_call
from s3skills.tools.script_tool import script_tool

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

SKILL = "calculos/calc"
OTHER = "calculos/otra"

SKILL_MD = """---
name: {name}
description: Scripts de prueba del ejecutor.
---
# {name}
Run scripts/main.py with {{"n": 21}}.
"""

SCRIPTS = {
    "helpers.py": "def double(n):\n    return 2 * n\n",
    "main.py": """
import json, os, sys
from helpers import double
raw = sys.stdin.read()
args = json.loads(raw)
with open(os.environ["SKILL_ARGS_FILE"]) as f:
    from_file = json.load(f)
print(json.dumps({"doubled": double(args["n"]), "cwd": os.getcwd(), "stdin": raw, "file": from_file,
                  "argv": sys.argv[1:]}))
""",
    "via_argv.py": """
import json, os, sys
print(json.dumps({"argv1": json.loads(sys.argv[1]), "stdin": sys.stdin.read(),
                  "file": os.environ.get("SKILL_ARGS_FILE")}))
""",
    "lib/deep.py": """
import json, sys
print(json.dumps({"deep": json.load(sys.stdin)}))
""",
    "bad_json.py": "print('hello, not json')\n",
    "two_values.py": "print('1')\nprint('2')\n",
    "exit3.py": """
import json, sys
print(json.dumps({"error": "precio is missing"}))
sys.stderr.write("boom: precio is missing\\n")
sys.exit(3)
""",
    "sleeper.py": """
import os, sys, time
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
sys.stderr.write(f"child={child} cwd={os.getcwd()}\\n")
sys.stderr.flush()
time.sleep(60)
""",
    "flood.py": """
import sys
chunk = "x" * 65536
for _ in range(800):  # 50 MiB
    sys.stdout.write(chunk)
sys.stdout.flush()
sys.stderr.write("finished\\n")
""",
    "env.py": """
import json, os
print(json.dumps({"env": dict(os.environ), "home": os.path.expanduser("~")}))
""",
    "forker.py": """
import json, os, time
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print(json.dumps({"children": kids}))
""",
    "limits.py": """
import json, os, resource
names = ["RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE"]
out = {n: list(resource.getrlimit(getattr(resource, n))) for n in names}
out["own_group"] = os.getpgid(0) == os.getpid()
out["own_session"] = os.getsid(0) == os.getpid()
print(json.dumps(out))
""",
    "hog.py": "data = bytearray(1024 * 1024 * 1024)\nprint(len(data))\n",
    "bigfile.py": "open('big.bin', 'wb').write(b'0' * (3 * 1024 * 1024))\nprint('{}')\n",
    "spin.py": "while True:\n    pass\n",
    "pidfile.py": """
import json, os, sys, time
folder = json.load(sys.stdin)["dir"]
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
with open(os.path.join(folder, "pids.tmp"), "w") as f:
    f.write(f"{os.getpid()} {child} {os.getcwd()}")
os.rename(os.path.join(folder, "pids.tmp"), os.path.join(folder, "pids"))
time.sleep(60)
""",
    "escape.py": """
import json, os, time
child = os.fork()
if child == 0:
    os.setsid()  # leaves the process group: the runner's kill no longer reaches it
    time.sleep(60)
    os._exit(0)
print(json.dumps({"escaped": child}))
""",
    "hello.sh": '#!/bin/bash\nset -eu\nprintf \'{"shell": true, "args": %s}\\n\' "$(cat)"\n',
    "notes.txt": "not runnable\n",
}

ALLOWED_ENV = {
    "PATH",
    "LANG",
    "LC_ALL",
    "HOME",
    "TMPDIR",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING",
    "PYTHONNOUSERSITE",
    "SKILL_ARGS_FILE",
}


def _all_dead(pids: list[int]) -> bool:
    return eventually(lambda: not any(alive(p) for p in pids))


def seed(client: Any, bucket: str) -> None:
    client.create_bucket(Bucket=bucket)
    for skill in (SKILL, OTHER):
        name = skill.rsplit("/", 1)[-1]
        client.put_object(Bucket=bucket, Key=f"ana/skills/{skill}/SKILL.md", Body=SKILL_MD.format(name=name))
    for rel, text in SCRIPTS.items():
        client.put_object(Bucket=bucket, Key=f"ana/skills/{SKILL}/scripts/{rel}", Body=text.encode())
    client.put_object(Bucket=bucket, Key=f"ana/skills/{SKILL}/references/tool.py", Body=b"print(1)\n")
    client.put_object(Bucket=bucket, Key=f"ana/skills/{OTHER}/scripts/main.py", Body=b"print(1)\n")


@pytest.fixture(scope="module")
def library(moto_server: MotoServer) -> Iterator[tuple[ObjectStore, Any]]:
    """One read-only library and one store (aioboto3 client) for the module.

    Runs only read the bucket, so it is seeded once; building a client costs about a second.
    """
    client = make_client(moto_server.endpoint_url)
    store = ObjectStore(unique_bucket_name("runner"), endpoint_url=moto_server.endpoint_url)
    yield store, client
    run_sync(store.aclose())
    client.close()


@pytest.fixture
def backend(library: tuple[ObjectStore, Any]) -> S3Backend:
    store, client = library
    try:
        client.head_bucket(Bucket=store.bucket)
    except ClientError:  # first use, or a test of another module reset the server
        seed(client, store.bucket)
    return S3Backend(store.bucket, store=store, user_id="ana", layout=SEEDS)


@pytest.fixture
def runner(backend: S3Backend) -> ScriptRunner:
    return ScriptRunner(backend, timeout=20)


def run(runner: ScriptRunner, script: str, args: Any = None, skill: str = SKILL) -> ScriptObservation:
    return runner.run(skill, script, args, loaded=[SKILL])


# -- good runs -------------------------------------------------------------------------------


def test_good_script_imports_a_sibling_and_gets_json_args_on_stdin_and_in_a_file(runner: ScriptRunner) -> None:
    obs = run(runner, "main.py", {"n": 21, "texto": "año"})

    assert obs.ok, obs
    assert obs.error is None
    assert obs.exit_code == 0
    assert obs.result["doubled"] == 42
    assert json.loads(obs.result["stdin"]) == {"n": 21, "texto": "año"}
    assert obs.result["file"] == {"n": 21, "texto": "año"}
    assert obs.result["argv"] == []  # nothing in argv, where every local user could read it
    assert not Path(obs.result["cwd"]).exists()  # the temp dir is gone
    assert json.loads(obs.to_json())["result"]["doubled"] == 42


@pytest.mark.parametrize("script", ["scripts/main.py", "main.py"])
def test_script_path_with_or_without_the_folder(runner: ScriptRunner, script: str) -> None:
    assert run(runner, script, {"n": 1}).result["doubled"] == 2


def test_nested_script_and_a_skill_named_by_its_leaf(runner: ScriptRunner) -> None:
    obs = runner.run("calc", "scripts/lib/deep.py", [1, "dos"], loaded=[SKILL])
    assert obs.ok, obs
    assert obs.result == {"deep": [1, "dos"]}


def test_shell_script_runs_with_bash(runner: ScriptRunner) -> None:
    obs = run(runner, "hello.sh", {"a": [1, 2]})
    assert obs.ok, obs
    assert obs.result == {"shell": True, "args": {"a": [1, 2]}}


def test_args_via_argv_keeps_the_seed_003_contract(backend: S3Backend) -> None:
    obs = ScriptRunner(backend, timeout=20, args_via="argv").run(SKILL, "via_argv.py", {"n": 3}, loaded=[SKILL])
    assert obs.ok, obs
    assert obs.result == {"argv1": {"n": 3}, "stdin": "", "file": None}  # argv only: stdin empty, no file


def test_python_named_on_the_path_or_refused_when_missing(backend: S3Backend) -> None:
    assert ScriptRunner(backend, timeout=20, python="python3").run(SKILL, "main.py", {"n": 2}, loaded=[SKILL]).ok
    missing = ScriptRunner(backend, python="no-such-python-3").run(SKILL, "main.py", {"n": 2}, loaded=[SKILL])
    assert not missing.ok
    assert "'no-such-python-3' is not installed" in (missing.error or "")


def test_unknown_args_via_is_refused(backend: S3Backend) -> None:
    with pytest.raises(ValueError, match="args_via"):
        ScriptRunner(backend, args_via="env")  # type: ignore[arg-type]


async def test_async_run_from_another_event_loop(runner: ScriptRunner) -> None:
    obs = await runner.arun(SKILL, "main.py", {"n": 5}, loaded=[SKILL])
    assert obs.ok, obs
    assert obs.result["doubled"] == 10


def test_every_run_logs_a_usage_record(runner: ScriptRunner, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="s3skills.usage"):
        run(runner, "main.py", {"n": 1})
        run(runner, "exit3.py")
        runner.run(OTHER, "main.py", None, loaded=[SKILL])
    records = [r for r in caplog.records if r.name == "s3skills.usage"]
    assert [(r.event, r.skill, r.outcome) for r in records] == [  # type: ignore[attr-defined]
        ("script_run", SKILL, "ok"),
        ("script_run", SKILL, "exit_code"),
        ("script_run", OTHER, "refused"),
    ]
    first = records[0]
    assert (first.script, first.user_id, first.thread_id) == ("main.py", "ana", None)  # type: ignore[attr-defined]
    assert first.duration_ms >= 0  # type: ignore[attr-defined]


# -- failures the model can act on -------------------------------------------------------------


def test_invalid_json_output(runner: ScriptRunner) -> None:
    obs = run(runner, "bad_json.py")
    assert not obs.ok
    assert obs.exit_code == 0
    assert "not one JSON value" in (obs.error or "")
    assert "hello, not json" in (obs.error or "")


def test_two_json_values_are_not_one(runner: ScriptRunner) -> None:
    obs = run(runner, "two_values.py")
    assert not obs.ok
    assert "Extra data" in (obs.error or "")


def test_non_zero_exit_keeps_the_json_and_the_stderr(runner: ScriptRunner) -> None:
    obs = run(runner, "exit3.py")
    assert not obs.ok
    assert obs.exit_code == 3
    assert "exit code 3" in (obs.error or "")
    assert obs.result == {"error": "precio is missing"}
    assert "boom: precio is missing" in obs.stderr_tail


def test_timeout_kills_the_whole_process_group(backend: S3Backend) -> None:
    obs = ScriptRunner(backend, timeout=2).run(SKILL, "sleeper.py", None, loaded=[SKILL])

    assert not obs.ok
    assert obs.timed_out
    assert obs.exit_code == -9
    assert "longer than 2 s" in (obs.error or "")
    fields = dict(item.split("=", 1) for item in obs.stderr_tail.split())
    assert _all_dead([int(fields["child"])]), "the forked child survived the timeout"
    assert not Path(fields["cwd"]).exists()


def memory_backend() -> S3Backend:
    """The same library in a `MemoryObjectStore`: no server thread allocates in this process."""
    store = MemoryObjectStore()
    for skill in (SKILL, OTHER):
        name = skill.rsplit("/", 1)[-1]
        store.put_object(f"ana/skills/{skill}/SKILL.md", SKILL_MD.format(name=name).encode())
    for rel, text in SCRIPTS.items():
        store.put_object(f"ana/skills/{SKILL}/scripts/{rel}", text.encode())
    return S3Backend(store.bucket, store=store, user_id="ana", layout=SEEDS)


def test_fifty_megabytes_of_output_are_cut_and_the_script_killed() -> None:
    # In memory, not on moto: tracemalloc counts every thread, and the in-process moto
    # server's werkzeug reads request bodies into 10 MB buffers, which is not ours to measure.
    runner = ScriptRunner(memory_backend(), timeout=20)
    run(runner, "main.py", {"n": 1})  # warm up: the catalog is built once
    tracemalloc.start()
    try:
        obs = run(runner, "flood.py")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert not obs.ok
    assert obs.truncated
    assert obs.result is None
    assert "more than 1 MiB" in (obs.error or "")
    assert "finished" not in obs.stderr_tail  # killed before it wrote everything
    assert peak < 16 * 1024 * 1024  # nowhere near 50 MB was held


def test_environment_is_scrubbed(runner: ScriptRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-aws",
        "AWS_SESSION_TOKEN": "s3cr3t-session",
        "GITHUB_TOKEN": "s3cr3t-gh",
        "OPENAI_API_KEY": "s3cr3t-openai",
        "DB_PASSWORD_SECRET": "s3cr3t-db",
        "HTTPS_PROXY": "http://proxy.invalid:3128",
        "PYTHONPATH": "/somewhere",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)

    obs = run(runner, "env.py")

    assert obs.ok, obs
    env = obs.result["env"]
    assert set(env) <= ALLOWED_ENV
    assert "s3cr3t" not in json.dumps(env)
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["LC_ALL"] == "C.UTF-8"
    assert obs.result["home"] == env["HOME"]
    assert env["TMPDIR"].startswith(env["HOME"])


def test_forked_children_do_not_outlive_the_run(runner: ScriptRunner) -> None:
    obs = run(runner, "forker.py")
    assert obs.ok, obs
    children = obs.result["children"]
    assert len(children) == 3
    assert _all_dead(children)


async def test_cancelling_a_run_kills_its_processes(runner: ScriptRunner, tmp_path: Path) -> None:
    task = asyncio.create_task(runner.arun(SKILL, "pidfile.py", {"dir": str(tmp_path)}, loaded=[SKILL]))
    pids_file = tmp_path / "pids"
    for _ in range(1000):  # polls, not a clock: up to 20 s for the script to start and write it
        if pids_file.exists():
            break
        assert not task.done(), task.result()
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the script never wrote its pid file")
    parent, child, workdir = pids_file.read_text().split()

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _all_dead([int(parent), int(child)])
    assert eventually(lambda: not Path(workdir).exists())


def test_a_process_that_leaves_the_group_survives_but_the_run_ends(
    runner: ScriptRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Documented limit (not a sandbox): setsid escapes the group kill. The run still ends,
    # after a short drain, even though the escaped process holds the output pipes. The drain
    # is shortened from 2 s: its length is not the point, its end is.
    monkeypatch.setattr(runner_process, "DRAIN_SECONDS", 0.2)
    obs = run(runner, "escape.py")
    escaped = obs.result["escaped"]
    try:
        assert obs.ok, obs
        assert alive(escaped)
    finally:
        os.kill(escaped, signal.SIGKILL)
    assert _all_dead([escaped])


def test_concurrent_runs_are_independent(runner: ScriptRunner) -> None:
    async def both() -> list[ScriptObservation]:
        return list(await asyncio.gather(*(runner.arun(SKILL, "main.py", {"n": n}, loaded=[SKILL]) for n in (1, 2, 3))))

    observations = run_sync(both())
    assert [o.result["doubled"] for o in observations] == [2, 4, 6]
    assert len({o.result["cwd"] for o in observations}) == 3


def test_resource_limits_are_set_in_the_child(backend: S3Backend) -> None:
    obs = ScriptRunner(backend, timeout=5, memory_mb=256, max_file_mb=2, max_processes=32).run(
        SKILL, "limits.py", None, loaded=[SKILL]
    )
    assert obs.ok, obs
    mib = 1024 * 1024
    assert obs.result["RLIMIT_CPU"] == [6, 7]  # derived from the timeout; SIGKILL 1 s after SIGXCPU
    assert obs.result["RLIMIT_AS"] == [256 * mib, 256 * mib]
    assert obs.result["RLIMIT_FSIZE"] == [2 * mib, 2 * mib]
    assert obs.result["RLIMIT_NPROC"] == [32, 32]  # set, but root (uid 0) is exempt from it
    assert obs.result["RLIMIT_CORE"] == [0, 0]
    assert obs.result["own_group"]
    assert obs.result["own_session"]


def test_memory_limit_makes_a_big_allocation_fail(backend: S3Backend) -> None:
    obs = ScriptRunner(backend, timeout=20, memory_mb=256).run(SKILL, "hog.py", None, loaded=[SKILL])
    assert not obs.ok
    assert obs.exit_code == 1
    assert "MemoryError" in obs.stderr_tail


def test_file_size_limit(backend: S3Backend) -> None:
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of the signal killing it.
    obs = ScriptRunner(backend, timeout=20, max_file_mb=1).run(SKILL, "bigfile.py", None, loaded=[SKILL])
    assert not obs.ok
    assert obs.exit_code == 1
    assert "File too large" in obs.stderr_tail


def test_cpu_limit_stops_a_busy_loop(backend: S3Backend) -> None:
    obs = ScriptRunner(backend, timeout=20, cpu_seconds=1).run(SKILL, "spin.py", None, loaded=[SKILL])
    assert not obs.ok
    assert not obs.timed_out
    assert obs.exit_code == -24  # SIGXCPU
    assert "CPU time" in (obs.error or "")


@pytest.mark.skipif(os.geteuid() != 0, reason="shows the behaviour as root")
def test_nproc_does_not_bind_root(backend: S3Backend) -> None:
    # RLIMIT_NPROC counts every process of the uid and the kernel exempts root: as root, fork
    # trees are stopped by the process-group kill (and, in production, by a pids cgroup).
    obs = ScriptRunner(backend, timeout=20, max_processes=1).run(SKILL, "forker.py", None, loaded=[SKILL])
    assert obs.ok, obs
    assert _all_dead(obs.result["children"])


# Run as root, the script drops to this uid after the trampoline has set its rlimits (python -I -S:
# the standard library only). The uid is one no process uses, so RLIMIT_NPROC=1 counts the script alone.
_DROP = (
    "import os, sys; uid = int(sys.argv[1]); os.setgroups([]); os.setgid(uid); os.setuid(uid);"
    " os.execv(sys.argv[2], sys.argv[2:])"
)


def _unused_uid() -> int:
    """A uid above the usual ranges that no account names and no process runs as."""
    named = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 6}
    running: set[int] = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
            running.update(int(n) for n in status.read_text().split("Uid:", 1)[1].split("\n", 1)[0].split())
    return next(uid for uid in range(64000, 65000) if uid not in named | running)


def _runnable_by_others(path: str) -> bool:
    """Every folder on the way is searchable, and the file readable and executable, by any uid."""
    real = Path(os.path.realpath(path))
    if not real.is_file() or real.stat().st_mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
        return False
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in real.parents)


class _AsAnotherUid:
    """`LocalLauncher`, with the script started as `uid` (a root service running scripts as a
    dedicated user): the production trampoline sets the job's rlimits, then `_DROP` gives up
    root and execs the interpreter. The staging folder is handed to that uid first."""

    def __init__(self, uid: int) -> None:
        self.uid = uid

    async def launch(self, job: Job) -> Finished:
        for path in [job.workdir, *job.workdir.rglob("*")]:
            os.chown(path, self.uid, self.uid)
        drop = (sys.executable, "-I", "-S", "-c", _DROP, str(self.uid))
        return await LocalLauncher().launch(dataclasses.replace(job, command=(*drop, *job.command)))


def test_nproc_binds_other_uids(backend: S3Backend) -> None:
    # The kernel exempts root from RLIMIT_NPROC: as root (CI), the script runs as an unused uid.
    options: dict[str, Any] = {}
    if os.geteuid() == 0:
        python = next(
            (p for p in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3") if _runnable_by_others(p)), None
        )
        assert python is not None, (
            "as root, no Python that another uid can run (tried the venv's, /usr/bin, /usr/local/bin)"
        )
        options = {"launcher": _AsAnotherUid(_unused_uid()), "python": python}
    obs = ScriptRunner(backend, timeout=20, max_processes=1, **options).run(SKILL, "forker.py", None, loaded=[SKILL])
    assert not obs.ok
    assert "BlockingIOError" in obs.stderr_tail


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("skill", "script", "expected"),
    [
        (OTHER, "main.py", "is not loaded"),
        ("nope/missing", "main.py", "is not loaded"),
        ("../ana", "main.py", "Invalid"),
        (SKILL, "../SKILL.md", "Invalid script"),
        (SKILL, "scripts/../SKILL.md", "Invalid script"),
        (SKILL, "/etc/passwd", "relative to the skill's scripts/"),
        (SKILL, "scripts\\main.py", "Invalid script"),
        (SKILL, "", "scripts/ folder"),
        (SKILL, "SKILL.md", "only Python (.py) and shell (.sh)"),
        (SKILL, "notes.txt", "only Python (.py) and shell (.sh)"),
        (SKILL, "references/tool.py", "not found in the scripts/ folder"),
        (SKILL, "missing.py", "Available: bad_json.py"),
    ],
)
def test_refused(runner: ScriptRunner, backend: S3Backend, skill: str, script: str, expected: str) -> None:
    obs = run(runner, script, skill=skill)
    assert not obs.ok
    assert obs.exit_code is None
    assert expected in (obs.error or "")


def test_an_unloaded_skill_costs_no_request(runner: ScriptRunner, backend: S3Backend) -> None:
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    obs = runner.run(OTHER, "main.py", None, loaded=[SKILL])
    assert "is not loaded" in (obs.error or "")
    assert counter.total == 0


def test_args_must_be_json(runner: ScriptRunner) -> None:
    obs = run(runner, "main.py", {"n": object()})
    assert not obs.ok
    assert "JSON" in (obs.error or "")


@pytest.mark.parametrize(
    ("script", "parts"),
    [("main.py", ("main.py",)), ("scripts/main.py", ("main.py",)), ("lib/x.sh", ("lib", "x.sh"))],
)
def test_script_parts(script: str, parts: tuple[str, ...]) -> None:
    assert script_parts(script) == parts


@pytest.mark.parametrize(
    ("rel", "parts"),
    [
        ("main.py", ("main.py",)),
        ("lib/x.py", ("lib", "x.py")),
        ("../x.py", None),
        ("a/../../x.py", None),
        ("a//x.py", None),
        ("./x.py", None),
        ("a\\..\\x.py", None),
        ("a/x\x00.py", None),
        ("", None),
    ],
)
def test_key_parts_never_leave_the_folder(rel: str, parts: tuple[str, ...] | None) -> None:
    assert key_parts(rel) == parts


def test_timeout_from_the_environment(backend: S3Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_TIMEOUT", "7.5")
    assert ScriptRunner(backend).timeout == 7.5
    monkeypatch.setenv("SKILL_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="SKILL_TIMEOUT"):
        ScriptRunner(backend)


# -- the tool inside an agent ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_tool_in_an_agent_runs_only_loaded_skills(
    library: tuple[ObjectStore, Any], backend: S3Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = library
    agent_backend = S3Backend(store.bucket, store=store, layout=SEEDS)  # the user comes from the run's context

    def call(name: str, **args: Any) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call(name, args)])

    model = ScriptedChatModel(
        steps=[
            call("run_skill_script", skill=SKILL, script="main.py", args={"n": 21}),
            call("cargar_habilidad", skill_path=SKILL),
            call("run_skill_script", skill=SKILL, script="main.py", args={"n": 21}),
        ]
    )
    agent = create_skills_agent(model, agent_backend, tools=[script_tool(agent_backend)])
    request: dict[str, Any] = {"messages": [{"role": "user", "content": "Dobla 21"}]}
    options: dict[str, Any] = {"context": {"user_id": "ana"}, "config": {"configurable": {"thread_id": "t-1"}}}
    with caplog.at_level(logging.INFO, logger="s3skills.usage"):
        out = agent.invoke(request, **options) if mode == "sync" else await agent.ainvoke(request, **options)

    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == ["run_skill_script", "cargar_habilidad", "run_skill_script"]
    before = json.loads(str(results[0].content))
    assert before["ok"] is False
    assert "is not loaded" in before["error"]
    after = json.loads(str(results[2].content))
    assert after["ok"] is True, after
    assert after["result"]["doubled"] == 42

    runs = [r for r in caplog.records if getattr(r, "event", None) == "script_run"]
    assert [(r.outcome, r.user_id, r.thread_id) for r in runs] == [  # type: ignore[attr-defined]
        ("refused", "ana", "t-1"),
        ("ok", "ana", "t-1"),
    ]
