"""Server processes behind a real load balancer: deploys, crashes and lost buckets cost no call.

Debian's HAProxy (started by the tests on loopback, as `deploy/haproxy.cfg` configures it:
`/readyz` checked, a request whose connection failed or that got no answer sent to another
replica) in front of 3 `python -m s3skills.serve.mcp --transport http` processes on one
SeaweedFS bucket, while 50 clients call `list_skills`, `load_skill` and `read_skill_file`:

- a rolling restart (SIGTERM one replica at a time, start it again) fails no call, and each
  replica is out of the balancer (its `/readyz` failing) while its process still runs;
- `kill -9` of a replica fails at most the calls in flight on it, none once HAProxy has
  marked it down;
- a replica that cannot read the bucket any more is taken out by readiness (and comes back);
- replicas of 2 worker processes each (`--workers 2`) restart one by one failing no call, and
  every worker of every replica serves calls (its own metrics files count them).

Also, without a balancer: SIGTERM with a call stuck on a stalled S3 exits 0 within the drain
deadline, and the container's entry point. All slow (server processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from mcp_harness import ServerLog, child_env
from procs import alive, eventually
from worker_metrics import per_worker, worker_pids

from s3skills.testing import FaultProxy, SeaweedBucket, free_ports, make_client, skill_md

pytestmark = pytest.mark.slow

USERS = {"tok-ana": "ana", "tok-bob": "bob"}
SKILLS = [f"skill-{i}" for i in range(5)]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
HEADERS["MCP-Protocol-Version"] = "2025-11-25"
CLIENTS = 50
DRAIN = ("--unready-seconds", "1.5", "--drain-seconds", "15")


@pytest.fixture(scope="module")
def haproxy() -> str:
    found = subprocess.run(["which", "haproxy"], capture_output=True, text=True, check=False).stdout.strip()
    if not found:
        pytest.skip("haproxy is not installed: apt-get install haproxy (.ci/run does)")
    return found


def _seed(bucket: SeaweedBucket) -> None:
    client = make_client(bucket.endpoint_url, access_key=bucket.access_key, secret_key=bucket.secret_key)
    try:
        for user in USERS.values():
            for name in SKILLS:
                home = f"users/{user}/skills/{name}/"
                client.put_object(Bucket=bucket.bucket, Key=home + "SKILL.md", Body=skill_md(name, f"Does {name}."))
                client.put_object(Bucket=bucket.bucket, Key=home + "references/guide.md", Body=b"# Guide\n")
    finally:
        client.close()


@pytest.fixture
def moto_bucket(bucket: str, moto_endpoint: str) -> SeaweedBucket:
    """The shared moto server's bucket of the test, seeded (moto accepts any credentials)."""
    seeded = SeaweedBucket(moto_endpoint, bucket, "test", "test")
    _seed(seeded)
    return seeded


@dataclass
class Replica:
    """One server process on a fixed loopback port (restarted on the same port)."""

    port: int
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    log: ServerLog | None = None

    def start(self) -> None:
        self._close()
        self.proc = subprocess.Popen(
            [sys.executable, *self.argv, "--port", str(self.port)], env=self.env, stderr=subprocess.PIPE
        )
        self.log = ServerLog(self.proc)
        if not self.log.listening.wait(120) or self.proc.poll() is not None:
            raise RuntimeError("replica did not start: " + "".join(self.log.lines)[-3000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._close()

    def _close(self) -> None:
        """Close the pipe of a process that has ended (its log thread read it to the end)."""
        if self.proc is not None and self.proc.poll() is not None:
            if self.log is not None:
                self.log.text()
            if self.proc.stderr is not None:
                self.proc.stderr.close()

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def _server_argv(bucket: SeaweedBucket, tokens: Path, endpoint: str, *extra: str) -> list[str]:
    return [
        *("-m", "s3skills.serve.mcp", "--bucket", bucket.bucket, "--endpoint-url", endpoint),
        *("--transport", "http", "--tokens", str(tokens), *extra),
    ]


def _env(bucket: SeaweedBucket) -> dict[str, str]:
    env = child_env()
    env.update(AWS_ACCESS_KEY_ID=bucket.access_key, AWS_SECRET_ACCESS_KEY=bucket.secret_key, AWS_REGION="us-east-1")
    return env


class HAProxy:
    """Debian's haproxy in the foreground, with an admin socket for its view of the servers."""

    def __init__(self, binary: str, folder: Path, ports: list[int]) -> None:
        (self.port,) = free_ports(1)
        self.socket = folder / "haproxy.sock"
        servers = "\n".join(f"    server r{i} 127.0.0.1:{p}" for i, p in enumerate(ports))
        config = folder / "haproxy.cfg"
        config.write_text(
            f"global\n    maxconn 1024\n    stats socket {self.socket} mode 600 level admin\n"
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 60s\n    timeout server 60s\n"
            "    timeout check 5s\n"
            "    retries 3\n    option redispatch 1\n    retry-on conn-failure empty-response\n"
            f"frontend mcp\n    bind 127.0.0.1:{self.port}\n    default_backend s3skills\n"
            "backend s3skills\n    balance roundrobin\n    option httpchk GET /readyz\n"
            "    http-check expect status 200\n    default-server inter 300ms fall 2 rise 2 check\n"
            f"{servers}\n"
        )
        check = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        self.proc = subprocess.Popen(
            [binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert eventually(lambda: self.socket.exists(), 30)

    def stats(self) -> dict[str, dict[str, str]]:
        """`show stat` of the backend's servers, by name (status, scur...)."""
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(self.socket))
            conn.sendall(b"show stat\n")
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(header, ln.split(","), strict=False)) for ln in lines[1:] if ln]
        return {r["svname"]: r for r in rows if r.get("pxname") == "s3skills" and r["svname"].startswith("r")}

    def status(self, name: str) -> str:
        return self.stats()[name]["status"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@dataclass
class Cluster:
    balancer: HAProxy
    replicas: list[Replica]
    proxy: FaultProxy
    url: str = ""

    def all_up(self) -> bool:
        return all(s["status"] == "UP" for s in self.balancer.stats().values())


@pytest.fixture(scope="module")
def cluster(haproxy: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """SeaweedFS, a bucket of 2 users x 5 skills, 3 replicas (the third reads S3 through a
    `FaultProxy`) and HAProxy in front of them; all stopped at the end."""
    from s3skills.testing import SeaweedServer, make_bucket, unique_bucket_name

    folder = tmp_path_factory.mktemp("balancer")
    tokens = folder / "tokens.json"
    tokens.write_text(json.dumps(USERS))
    tokens.chmod(0o600)
    with contextlib.ExitStack() as stack:
        weed = stack.enter_context(SeaweedServer())
        name = make_bucket(
            weed.endpoint_url, unique_bucket_name(), access_key=weed.access_key, secret_key=weed.secret_key
        )
        bucket = SeaweedBucket(weed.endpoint_url, name, weed.access_key, weed.secret_key)
        _seed(bucket)
        proxy = stack.enter_context(FaultProxy(weed.endpoint_url))
        replicas = [
            Replica(
                port, _server_argv(bucket, tokens, proxy.url if i == 2 else weed.endpoint_url, *DRAIN), _env(bucket)
            )
            for i, port in enumerate(free_ports(3))
        ]
        yield _behind_haproxy(stack, haproxy, folder, replicas, proxy)


def _behind_haproxy(
    stack: contextlib.ExitStack, haproxy: str, folder: Path, replicas: list[Replica], proxy: FaultProxy
) -> Cluster:
    """Start `replicas` and HAProxy in front of them (`stack` stops them all); once all are UP."""
    for replica in replicas:
        stack.callback(replica.stop)
        replica.start()
    balancer = HAProxy(haproxy, folder, [replica.port for replica in replicas])
    stack.callback(balancer.stop)
    made = Cluster(balancer, replicas, proxy, f"http://127.0.0.1:{balancer.port}/mcp")
    assert eventually(made.all_up, 60), made.balancer.stats()
    return made


@dataclass
class Load:
    """`CLIENTS` clients calling through the balancer, in a thread, until stopped."""

    url: str
    calls: list[tuple[float, float, str | None]] = field(default_factory=list)  # (start, end, failure)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Load:
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()
        assert eventually(lambda: len(self.calls) >= CLIENTS, 60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(120)

    def failures(self, after: float = 0.0) -> list[tuple[float, float, str | None]]:
        return [c for c in list(self.calls) if c[2] is not None and c[0] >= after]

    async def _run(self) -> None:
        await asyncio.gather(*(self._client(n) for n in range(CLIENTS)))

    async def _client(self, n: int) -> None:
        token = list(USERS)[n % len(USERS)]
        headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=1)) as http:
            i = 0
            while not self.stopping.is_set():
                skill = SKILLS[(n + i) % len(SKILLS)]
                tool, arguments = [
                    ("list_skills", {"query": "does"}),
                    ("load_skill", {"name": skill}),
                    ("read_skill_file", {"name": skill, "path": "references/guide.md"}),
                ][i % 3]
                body = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                }
                started = time.monotonic()
                failure: str | None = None
                try:
                    async with http.post(self.url, json=body, headers=headers) as answer:
                        text = await answer.text()
                    if answer.status != 200:
                        failure = f"HTTP {answer.status}: {text[:200]}"
                    else:
                        result = json.loads(text)
                        if "error" in result or result["result"].get("isError"):
                            failure = text[:300]
                except (aiohttp.ClientError, TimeoutError) as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                self.calls.append((started, time.monotonic(), failure))
                i += 1


def test_a_rolling_restart_behind_haproxy_fails_no_call_and_each_replica_leaves_through_readyz_first(
    cluster: Cluster,
) -> None:
    out_while_running: list[bool] = []
    with Load(cluster.url) as load:
        for i, replica in enumerate(cluster.replicas):
            assert replica.proc is not None
            pid = replica.proc.pid
            replica.proc.send_signal(signal.SIGTERM)
            name = f"r{i}"
            assert eventually(lambda: cluster.balancer.status(name).startswith("DOWN"), 30)
            out_while_running.append(alive(pid))  # taken out by its /readyz, not by its port closing
            assert replica.proc.wait(30) == 0
            replica.start()
            assert eventually(cluster.all_up, 60), cluster.balancer.stats()
        assert eventually(lambda: len(load.calls) > 10 * CLIENTS, 60)
    assert out_while_running == [True, True, True]
    assert load.failures() == []
    assert len(load.calls) > 10 * CLIENTS


def test_kill_9_of_a_replica_fails_at_most_its_calls_in_flight_and_none_after_haproxy_marks_it_down(
    cluster: Cluster,
) -> None:
    victim = cluster.replicas[1]
    with Load(cluster.url) as load:
        assert eventually(lambda: len(load.calls) > 3 * CLIENTS, 60)
        in_flight = int(cluster.balancer.stats()["r1"]["scur"])
        assert victim.proc is not None
        victim.proc.kill()
        killed_at = time.monotonic()
        assert eventually(lambda: cluster.balancer.status("r1").startswith("DOWN"), 30)
        down_at = time.monotonic()
        count = len(load.calls)
        assert eventually(lambda: len(load.calls) > count + 3 * CLIENTS, 60)
    victim.proc.wait(30)
    victim.start()
    assert eventually(cluster.all_up, 60)
    around_kill = load.failures(after=killed_at - 60)
    assert len(around_kill) <= max(in_flight, 0) + 1  # +1: a call that reached it as stats were read
    assert load.failures(after=down_at) == []


def test_a_replica_that_cannot_read_the_bucket_is_taken_out_by_readiness_and_comes_back(cluster: Cluster) -> None:
    cut_off = cluster.replicas[2]  # reads S3 through the fault proxy
    with Load(cluster.url) as load:
        rule = cluster.proxy.inject("internal_error", count=None)
        try:
            assert eventually(lambda: cluster.balancer.status("r2").startswith("DOWN"), 60)
            down_at = time.monotonic()
            assert cut_off.get("/healthz") == (200, "ok\n")  # alive: only readiness took it out
            status, why = cut_off.get("/readyz")
            # the store answers 500s: the probe's read gives up (StoreUnavailable) or its retries
            # outlast the probe's 5 s deadline, depending on the backoff's draw; both say why
            assert (status, why) in {
                (503, "cannot read the bucket: StoreUnavailable\n"),
                (503, "the bucket did not answer within 5 s\n"),
            }
            count = len(load.calls)
            assert eventually(lambda: len(load.calls) > count + 3 * CLIENTS, 60)
            after_down = load.failures(after=down_at + 1.0)  # a call routed just before the mark may fail
        finally:
            cluster.proxy.clear_faults()
        assert rule.fired > 0
        assert eventually(cluster.all_up, 60)  # its next check passes: back in
    assert after_down == []


def _calls_per_worker(replica: Replica, scratch: Path) -> dict[int, float]:
    """{worker pid: calls it counted} for the running manager of `replica` (`--workers --metrics`)."""
    assert replica.proc is not None
    (run_dir,) = Path(replica.env["PROMETHEUS_MULTIPROC_DIR"]).iterdir()  # a stopped run removed its own
    counted = Path(tempfile.mkdtemp(dir=scratch))
    return {pid: sum(per_worker(run_dir, pid, counted).values()) for pid in worker_pids(replica.proc.pid)}


def _every_worker_served(replica: Replica, scratch: Path) -> bool:
    calls = _calls_per_worker(replica, scratch)
    return len(calls) == 2 and all(calls.values())


def test_replicas_of_two_workers_behind_haproxy_restart_one_by_one_failing_no_call_and_every_worker_serves(
    haproxy: str, seaweed_bucket: SeaweedBucket, tmp_path: Path
) -> None:
    _seed(seaweed_bucket)
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(USERS))
    tokens.chmod(0o600)
    replicas = []
    for port in free_ports(2):
        env = {**_env(seaweed_bucket), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / f"metrics-{port}")}
        argv = _server_argv(seaweed_bucket, tokens, seaweed_bucket.endpoint_url, *DRAIN, "--workers", "2", "--metrics")
        replicas.append(Replica(port, argv, env))
    out_while_running: list[bool] = []
    with contextlib.ExitStack() as stack:
        proxy = stack.enter_context(FaultProxy(seaweed_bucket.endpoint_url))  # in no replica's path here
        cluster = _behind_haproxy(stack, haproxy, tmp_path, replicas, proxy)
        with Load(cluster.url) as load:
            for i, replica in enumerate(replicas):
                assert replica.proc is not None
                served = eventually(lambda: _every_worker_served(replica, tmp_path), 60)
                assert served, _calls_per_worker(replica, tmp_path)
                workers = worker_pids(replica.proc.pid)
                replica.proc.send_signal(signal.SIGTERM)
                name = f"r{i}"
                assert eventually(lambda: cluster.balancer.status(name).startswith("DOWN"), 30)
                out_while_running.append(all(alive(pid) for pid in workers))  # out through /readyz first
                assert replica.proc.wait(30) == 0
                assert eventually(lambda: not any(alive(pid) for pid in workers), 10)
                replica.start()
                assert eventually(cluster.all_up, 60), cluster.balancer.stats()
            for replica in replicas:  # the workers started again serve too
                served = eventually(lambda: _every_worker_served(replica, tmp_path), 60)
                assert served, _calls_per_worker(replica, tmp_path)
    assert out_while_running == [True, True]
    assert load.failures() == []
    assert len(load.calls) > 5 * CLIENTS


def test_sigterm_with_a_call_stuck_on_a_stalled_s3_exits_0_within_the_drain_deadline(
    moto_bucket: SeaweedBucket, tmp_path: Path
) -> None:
    seaweed_bucket = moto_bucket
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(USERS))
    tokens.chmod(0o600)
    with FaultProxy(seaweed_bucket.endpoint_url) as proxy:
        (port,) = free_ports(1)
        argv = _server_argv(seaweed_bucket, tokens, proxy.url, "--drain-seconds", "4")
        replica = Replica(port, argv, _env(seaweed_bucket))
        replica.start()
        try:
            assert replica.get("/readyz")[0] == 200
            proxy.latency = 600.0  # S3 stalls from now on
            seen = sum(proxy.requests.values())
            stuck = threading.Thread(target=_one_call, args=(port,), daemon=True)
            stuck.start()
            assert eventually(lambda: sum(proxy.requests.values()) > seen, 30)  # the call waits on S3
            assert replica.proc is not None
            replica.proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = replica.proc.wait(4 + 10)  # raises if the deadline did not end it
            waited = time.monotonic() - signalled
        finally:
            proxy.latency = 0.0
            replica.stop()
    assert code == 0
    assert waited < 4 + 10
    assert replica.log is not None
    text = replica.log.text()
    # cut by the server's graceful timeout (the deadline less the unready time and 2 s to close),
    # or else by the drain's watchdog at the deadline
    assert "timeout graceful shutdown exceeded" in text or "drain deadline (4 s) passed" in text


def _one_call(port: int) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_skills"}})
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp", data=body.encode(), headers={**HEADERS, "Authorization": "Bearer tok-ana"}
    )
    with contextlib.suppress(OSError):
        urllib.request.urlopen(request, timeout=120).read()


def test_the_container_entry_point_copies_the_mounted_tokens_into_a_private_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "data.json").write_text(json.dumps(USERS))
    (secret / "tokens.json").symlink_to(secret / "data.json")  # a Kubernetes secret is a symlink
    env = {**child_env(), "S3SKILLS_TOKENS_FILE": str(secret / "tokens.json"), "TMPDIR": str(tmp_path)}
    env.pop("S3SKILLS_BUCKET", None)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["sh", str(root / "deploy" / "entrypoint.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    copy = tmp_path / "s3skills" / "tokens.json"
    assert copy.read_text() == json.dumps(USERS)
    assert not copy.is_symlink()
    assert oct(copy.stat().st_mode & 0o777) == "0o600"
    assert done.returncode == 2  # the server itself ran: it asks for a bucket
    assert "no bucket" in done.stderr
