"""`s3skills mcp --transport http --workers N`: real worker processes, their metrics, their end.

The slow tests start the CLI as a user does (`python -m s3skills.cli ... mcp --workers 2
--metrics`) on a free loopback port against the shared moto server, and watch its worker
processes through /proc (the manager's children) and their metrics files (the Prometheus
client's multiprocess mode writes one set per process, named by its pid):

- both workers answer calls, and `/metrics` (parsed by the client's own parser) counts every
  call made across both; SIGTERM ends the manager and every worker with status 0 within the
  drain deadline, releases the port and removes the run's metrics directory;
- SIGKILL of the manager leaves no worker serving (the kernel's parent-death signal makes
  them drain), the port is released, and the metrics directory it could not remove does not
  leak into the next run's figures;
- the watchdog used where the kernel cannot signal ends a process whose parent was killed;
- each worker listens on a socket of its own (`SO_REUSEPORT`), the manager on none, and each
  holds a fair share of 60 keep-alive connections opened at once (found through
  /proc/net/tcp and the processes' descriptors), also after a killed worker was replaced.

The fast tests give `--workers` and `PROMETHEUS_MULTIPROC_DIR` bad values: clear errors, no
server started; and pin the sockets on loopback: the manager's bound socket gets no
connection, a port another process listens on is busy, each worker binds its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from mcp_harness import ServerLog, child_env
from procs import alive, eventually
from worker_metrics import calls_of, cmdline, families, per_worker, worker_pids

from s3skills.cli import main
from s3skills.serve import reuseport
from s3skills.serve.http import MAX_WORKERS, HttpSettings, ServerError, bind, metrics_dir, worker_count
from s3skills.serve.lifeline import follow_parent, worker_factory
from s3skills.testing import make_client, skill_md

USERS = {"tok-ana": "ana", "tok-bob": "bob"}
SKILLS = ["alpha", "beta", "gamma"]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
DRAIN = 10.0
TOOLS = ("list_skills", "load_skill", "read_skill_file")


# -- fast: option values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "--workers must be between 1 and 256 (or auto), not 0"),
        ("-1", "--workers takes a whole number or auto, not '-1'"),
        ("x", "--workers takes a whole number or auto, not 'x'"),
        ("2.5", "--workers takes a whole number or auto, not '2.5'"),
        ("1_0", "--workers takes a whole number or auto, not '1_0'"),  # int() would read 10
        ("\u0663", "--workers takes a whole number or auto, not '\u0663'"),  # int() would read 3
        ("257", "--workers must be between 1 and 256 (or auto), not 257"),
        ("9" * 5000, "--workers must be between 1 and 256 (or auto), not 99999999999999999999"),
    ],
    ids=["zero", "negative", "word", "fraction", "underscore", "arabic-indic-digit", "257", "5000-digits"],
)
def test_a_bad_worker_count_is_a_usage_error_of_one_line_and_no_server_starts(
    value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.json"  # never read: the count is refused first
    argv = ["--bucket", "b", "--endpoint-url", "http://127.0.0.1:9", "mcp", "--transport", "http"]
    code = main([*argv, "--tokens", str(tokens), "--port", "0", "--workers", value])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [f"s3skills mcp: error: {message}"]
    assert "listening on" not in err


def test_the_worker_count_variable_is_checked_as_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S3SKILLS_WORKERS", "-3")
    argv = ["--bucket", "b", "--endpoint-url", "http://127.0.0.1:9", "mcp", "--transport", "http"]
    assert main([*argv, "--tokens", str(tmp_path / "t.json")]) == 2
    assert "--workers takes a whole number or auto, not '-3'" in capsys.readouterr().err


def test_auto_is_the_cpus_this_process_may_run_on() -> None:
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert worker_count("auto") == worker_count(" AUTO ") == min(MAX_WORKERS, expected or 1)
    assert (worker_count(None), worker_count(""), worker_count(" 3 ")) == (1, 1, 3)


def test_the_metrics_directory_is_private_to_the_run_and_removed_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "metrics"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(base))
    with metrics_dir(HttpSettings(workers=2, metrics=True)):
        made = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
        assert made.parent == base
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
        assert stat.S_IMODE(base.stat().st_mode) == 0o700  # made by the server: private too
    assert not made.exists()
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(base)  # put back


def test_without_the_variable_the_directory_is_a_private_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    with metrics_dir(HttpSettings(workers=2, metrics=True)):
        made = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
        assert made.parent == tmp_path
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    assert list(tmp_path.iterdir()) == []
    with metrics_dir(HttpSettings(workers=1, metrics=True)):  # one process, no variable: memory only
        assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ


def test_a_crashed_runs_directory_is_removed_and_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "metrics"
    base.mkdir(mode=0o700)
    dead = _dead_pid()
    stale = [base / f"s3skills-metrics-{dead}-old", base / f"s3skills-metrics-{os.getpid()}-old"]  # PID reuse
    for folder in stale:
        folder.mkdir()
        (folder / f"counter_{os.getpid()}.db").write_bytes(b"\x00" * 64)  # the pid this process has
    kept = base / "s3skills-metrics-1-running"  # pid 1 runs: a live run's directory is left alone
    kept.mkdir()
    unrelated = base / f"counter_{os.getpid()}.db"  # a file of whatever else uses the variable
    unrelated.write_bytes(b"x")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(base))
    with metrics_dir(HttpSettings(workers=1, metrics=True)):
        made = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
        assert list(made.iterdir()) == []  # this run starts from nothing
        assert [f.exists() for f in stale] == [False, False]
    assert kept.exists()
    assert unrelated.read_bytes() == b"x"


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_metrics_directory_others_may_write_is_refused(
    mode: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "shared"
    base.mkdir()
    base.chmod(mode)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(base))
    with (
        pytest.raises(ServerError, match="may be written by other users") as caught,
        metrics_dir(HttpSettings(workers=2, metrics=True)),
    ):
        pass
    assert caught.value.status == 2
    assert list(base.iterdir()) == []
    base.chmod(mode | stat.S_ISVTX)  # sticky, as /tmp: others cannot swap this run's directory
    with metrics_dir(HttpSettings(workers=2, metrics=True)):
        assert Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).parent == base


def test_a_metrics_variable_naming_a_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "file"))
    with (
        pytest.raises(ServerError, match=r"PROMETHEUS_MULTIPROC_DIR=.*file is not a directory"),
        metrics_dir(HttpSettings(workers=2, metrics=True)),
    ):
        pass


def test_a_worker_whose_manager_is_already_gone_exits_at_once() -> None:
    exits: list[int] = []
    # the watchdog: asking the kernel would tie this test process to its own parent
    assert follow_parent(_dead_pid(), exit=exits.append, prefer_watchdog=True) == "gone"
    assert exits == [0]


@pytest.mark.parametrize(
    "env",
    [{}, {"S3SKILLS_WORKER_PARENT": "12x", "S3SKILLS_WORKER_FACTORY": "a:b"}, {"S3SKILLS_WORKER_PARENT": "1"}],
)
def test_a_worker_started_without_its_managers_variables_says_so(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("S3SKILLS_WORKER_PARENT", "S3SKILLS_WORKER_FACTORY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match="S3SKILLS_WORKER_PARENT"):
        worker_factory()


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# -- fast: the workers' own sockets (SO_REUSEPORT) ---------------------------------------------


def test_the_managers_socket_that_never_listens_gets_no_connection_of_the_port() -> None:
    assert reuseport.available() == sys.platform.startswith("linux")
    with contextlib.ExitStack() as stack:
        held = stack.enter_context(bind("127.0.0.1", 0, reuse_port=True))  # as the manager holds the port
        port = held.getsockname()[1]
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # bound, not listening: nothing answers
        worker = stack.enter_context(reuseport.own_socket(held.family, held.getsockname()))
        worker.listen(64)
        clients = [stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10)) for _ in range(30)]
        worker.settimeout(10)
        accepted = [stack.enter_context(worker.accept()[0]) for _ in clients]  # every one: none went to `held`
        assert sorted(a.getpeername() for a in accepted) == sorted(c.getsockname() for c in clients)
        assert reuseport.listening(port) == 1


@pytest.mark.parametrize("reuse", [False, True], ids=["plain-listener", "reuseport-listener"])
def test_a_port_another_process_listens_on_is_busy_even_for_a_reuseport_socket(reuse: bool) -> None:
    with socket.socket() as other:
        if reuse:  # the same user's: without the check the manager would join its listeners
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        port = other.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is busy"):
            bind("127.0.0.1", port, reuse_port=True)
        assert reuseport.listening(port) == 1


def test_every_worker_started_binds_a_socket_of_its_own_on_the_managers_port() -> None:
    with bind("127.0.0.1", 0, reuse_port=True) as held:
        port = held.getsockname()[1]
        handed = reuseport.WorkerSockets(held.family, held.getsockname())
        assert list(handed) == []  # the manager holds no listening socket
        firsts = [pickle.loads(pickle.dumps(handed)) for _ in range(2)]  # what each worker started unpickles
        try:
            assert [[s.getsockname() for s in got] for got in firsts] == [[("127.0.0.1", port)]] * 2
            assert firsts[0][0].fileno() != firsts[1][0].fileno()
            assert reuseport.listening(port) == 0  # a worker's server listens once its app has started
            for got in firsts:
                got[0].listen(8)
            assert reuseport.listening(port) == 2
        finally:
            for got in firsts:
                got[0].close()


def test_a_worker_that_cannot_bind_the_port_exits_with_the_startup_failure_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as other:  # a listener without SO_REUSEPORT holds the address
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        handed = reuseport.WorkerSockets(other.family, other.getsockname())
        with pytest.raises(SystemExit) as ended:
            pickle.loads(pickle.dumps(handed))
    assert ended.value.code == 3  # uvicorn's manager stops instead of starting it again
    assert "cannot bind ('127.0.0.1'," in capsys.readouterr().err


# -- slow: real worker processes ----------------------------------------------------------------


@dataclass
class Manager:
    """A running `s3skills mcp --workers 2 --metrics` and how to watch it."""

    proc: subprocess.Popen[bytes]
    log: ServerLog
    port: int
    base: Path  # PROMETHEUS_MULTIPROC_DIR as given: the run's directory is made inside

    def workers(self) -> set[int]:
        """The pids of the manager's worker processes (its children running the server)."""
        return worker_pids(self.proc.pid)

    def run_dir(self) -> Path:
        (made,) = self.base.iterdir()
        return made

    def get(self, path: str) -> tuple[int, str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as answer:
            return answer.status, answer.read().decode()


@pytest.fixture
def seeded(moto_endpoint: str, bucket: str) -> tuple[str, str]:
    client = make_client(moto_endpoint)
    try:
        for user in USERS.values():
            for name in SKILLS:
                home = f"users/{user}/skills/{name}/"
                client.put_object(Bucket=bucket, Key=home + "SKILL.md", Body=skill_md(name, f"Does {name} work."))
                client.put_object(Bucket=bucket, Key=home + "references/guide.md", Body=b"# Guide\n")
    finally:
        client.close()
    return moto_endpoint, bucket


@contextlib.contextmanager
def manager(seeded: tuple[str, str], tmp_path: Path) -> Iterator[Manager]:
    """The CLI with `--workers 2 --metrics`, `PROMETHEUS_MULTIPROC_DIR` at `tmp_path/metrics`;
    killed at the end with every worker it had, whatever the test did."""
    endpoint, bucket = seeded
    base = tmp_path / "metrics"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(USERS))
    tokens.chmod(0o600)
    env = child_env()
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    env["PROMETHEUS_MULTIPROC_DIR"] = str(base)
    argv = [sys.executable, "-m", "s3skills.cli", "--bucket", bucket, "--endpoint-url", endpoint, "mcp"]
    argv += ["--transport", "http", "--port", "0", "--tokens", str(tokens), "--workers", "2", "--metrics"]
    proc = subprocess.Popen([*argv, "--drain-seconds", str(DRAIN)], env=env, stderr=subprocess.PIPE)
    log = ServerLog(proc)
    workers: set[int] = set()
    try:
        assert log.listening.wait(120), log.text()[-3000:]
        assert proc.poll() is None, log.text()[-3000:]
        line = next(ln for ln in log.lines if ln.startswith("listening on http://"))
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        running = Manager(proc, log, port, base)
        assert eventually(lambda: len(running.workers()) == 2, 120), log.text()[-3000:]
        workers = running.workers()
        yield running
    finally:
        workers |= Manager(proc, log, 0, base).workers() if proc.poll() is None else set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pid in workers:  # never leave a worker behind, whatever the test did
            with contextlib.suppress(ProcessLookupError):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        log.text()
        if proc.stderr is not None:
            proc.stderr.close()


async def _calls(port: int, count: int) -> list[str]:
    """`count` tools/call POSTs at once, each on a new connection (so any worker may take it);
    the tools called, in order. Every call must succeed."""
    url = f"http://127.0.0.1:{port}/mcp"

    async def one(i: int) -> str:
        tool = TOOLS[i % 3]
        skill = SKILLS[i % len(SKILLS)]
        arguments = {"list_skills": {}, "load_skill": {"name": skill}}.get(
            tool, {"name": skill, "path": "references/guide.md"}
        )
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        token = list(USERS)[i % 2]
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:
            headers = {**HEADERS, "Authorization": f"Bearer {token}"}
            async with http.post(url, json=body, headers=headers) as answer:
                text = await answer.text()
        assert answer.status == 200, text
        result = json.loads(text)
        assert "error" not in result, text
        assert not result["result"].get("isError"), text
        return tool

    return list(await asyncio.gather(*(one(i) for i in range(count))))


def _port_free(port: int) -> bool:
    """Nothing listens on `port` any more: a new server can bind it (as servers do, with
    SO_REUSEADDR: the closed connections' TIME_WAIT does not count) and listen."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            probe.listen(1)
        except OSError:
            return False
        return True


def _pids_in(run_dir: Path) -> set[int]:
    return {int(f.stem.rsplit("_", 1)[1]) for f in run_dir.glob("*.db")}


@pytest.mark.slow
def test_two_workers_both_answer_metrics_count_every_call_and_sigterm_ends_them_all_with_status_0(
    seeded: tuple[str, str], tmp_path: Path
) -> None:
    with manager(seeded, tmp_path) as server:
        run_dir, workers = server.run_dir(), server.workers()
        assert run_dir.name.startswith(f"s3skills-metrics-{server.proc.pid}-")
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
        made: list[str] = []
        for _ in range(20):  # rounds of concurrent calls until each worker has answered some
            made += asyncio.run(_calls(server.port, 24))
            answered = {pid for pid in workers if sum(per_worker(run_dir, pid, tmp_path / f"s{len(made)}").values())}
            if answered == workers:
                break
        assert answered == workers, "one worker answered every call"
        assert _pids_in(run_dir) == workers  # only the workers count: the manager serves nothing
        assert server.workers() == workers  # none died and was replaced

        status, text = server.get("/metrics")
        assert status == 200
        counted = calls_of(families(text))
        assert counted == {tool: float(made.count(tool)) for tool in TOOLS}
        by_worker = [per_worker(run_dir, pid, tmp_path / f"w{pid}") for pid in workers]
        assert all(sum(figures.values()) > 0 for figures in by_worker)
        assert sum(sum(figures.values()) for figures in by_worker) == len(made)

        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(DRAIN + 10) == 0  # raises when the drain deadline did not end it
        assert eventually(lambda: not any(alive(pid) for pid in workers), 10)
        assert _port_free(server.port)
        assert not run_dir.exists()
        assert "ended with status" not in server.log.text()


@pytest.mark.slow
def test_kill_9_of_the_manager_ends_its_workers_frees_the_port_and_its_metrics_stay_out_of_the_next_run(
    seeded: tuple[str, str], tmp_path: Path
) -> None:
    with manager(seeded, tmp_path) as server:
        first = asyncio.run(_calls(server.port, 12))
        crashed_dir, workers = server.run_dir(), server.workers()
        server.proc.kill()
        server.proc.wait(30)
        gone = eventually(lambda: not any(alive(pid) for pid in workers), DRAIN + 10)
        assert gone, [(pid, cmdline(pid)) for pid in workers if alive(pid)]
        assert eventually(lambda: _port_free(server.port), 10)
        assert _pids_in(crashed_dir) == workers  # left behind by the killed manager

    with manager(seeded, tmp_path) as again:
        assert not crashed_dir.exists()  # the next run removed it
        second = asyncio.run(_calls(again.port, 9))
        counted = calls_of(families(again.get("/metrics")[1]))
        assert sum(counted.values()) == len(second)  # nothing of the first run's len(first) calls
        assert len(first) == 12


WATCHED = textwrap.dedent(
    """
    import os, pathlib, subprocess, sys, time
    if sys.argv[1] == "manager":
        child = subprocess.Popen([sys.executable, __file__, "worker", str(os.getpid()), *sys.argv[2:]])
        print(child.pid, flush=True)
        time.sleep(600)
    else:
        from s3skills.serve.lifeline import follow_parent
        mechanism = follow_parent(int(sys.argv[2]), poll=0.05, prefer_watchdog=sys.argv[4] == "watchdog")
        pathlib.Path(sys.argv[3]).write_text(mechanism)
        time.sleep(600)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["watchdog", "pdeathsig"])
def test_a_worker_ends_when_its_manager_is_killed_with_either_mechanism(mechanism: str, tmp_path: Path) -> None:
    script, said = tmp_path / "watched.py", tmp_path / "mechanism"
    script.write_text(WATCHED)
    argv = [sys.executable, str(script), "manager", str(said), mechanism]
    parent = subprocess.Popen(argv, env=child_env(), stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        assert eventually(said.exists, 60)
        assert eventually(lambda: said.read_text() == mechanism, 10)  # in place (pdeathsig: on Linux)
        parent.kill()
        parent.wait(30)
        assert eventually(lambda: not alive(worker), 30)
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)
        parent.stdout.close()


def _tcp_sockets() -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every TCP socket of this network namespace."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            f = row.split()
            found.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16), f[3], f[9]))
    return found


def _holders(inodes: dict[str, int], pids: set[int]) -> list[tuple[int, int]]:
    """(the value `inodes` gives a socket's inode, pid) for every descriptor `pids` hold on one."""
    held: list[tuple[int, int]] = []
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    held.append((inodes[link[8:-1]], pid))
    return held


async def _connections_per_worker(port: int, count: int, pids: set[int]) -> dict[int, int]:
    """Open `count` keep-alive connections at once, one `/healthz` answered on each (so a
    worker has accepted it), and count, while all are open, the ones each pid holds."""

    async def one() -> asyncio.StreamWriter:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), 60)
        assert status.startswith(b"HTTP/1.1 200"), status
        return writer

    writers = await asyncio.gather(*(one() for _ in range(count)))
    try:
        clients = {w.get_extra_info("sockname")[1] for w in writers}
        served = {
            inode: peer
            for local, peer, state, inode in _tcp_sockets()
            if local == port and peer in clients and state == "01"
        }
        held = _holders(served, pids)
        assert sorted(peer for peer, _ in held) == sorted(clients)  # each connection is one worker's
        return {pid: [owner for _, owner in held].count(pid) for pid in pids}
    finally:
        for writer in writers:
            writer.close()


def _listeners(port: int, pids: set[int]) -> dict[int, int]:
    """{pid: the listening sockets on `port` it holds} for `pids` (a shared one counts for each)."""
    inodes = {inode: n for n, (local, _, state, inode) in enumerate(_tcp_sockets()) if local == port and state == "0A"}
    held = _holders(inodes, pids)
    return {pid: [owner for _, owner in held].count(pid) for pid in pids}


@pytest.mark.slow
def test_two_workers_each_hold_a_fair_share_of_keep_alive_connections_also_after_a_restart(
    seeded: tuple[str, str], tmp_path: Path
) -> None:
    with manager(seeded, tmp_path) as server:
        workers = server.workers()
        everyone = {server.proc.pid, *workers}
        assert _listeners(server.port, everyone) == {server.proc.pid: 0, **dict.fromkeys(workers, 1)}
        shares = asyncio.run(_connections_per_worker(server.port, 60, workers))
        assert min(shares.values()) >= 15, shares  # >= 25 % each (a hash, not a rotation); shared: 59 and 1

        victim = min(workers)
        os.kill(victim, signal.SIGKILL)  # uvicorn's manager starts another, which binds a socket of its own
        assert eventually(lambda: len(server.workers() - workers) == 1 and len(server.workers()) == 2, 120)
        again = server.workers()
        assert eventually(lambda: reuseport.listening(server.port) == 2, 120)
        assert _listeners(server.port, {server.proc.pid, *again}) == {server.proc.pid: 0, **dict.fromkeys(again, 1)}
        shares = asyncio.run(_connections_per_worker(server.port, 60, again))
        assert min(shares.values()) >= 15, shares
