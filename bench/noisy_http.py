"""Noisy neighbours over HTTP: a hostile channel file against a real MCP server process.

The scenarios of issue 34's finding, as a deployment runs them: moto on a loopback port (a
process of its own), the server started as a user would,

    python -m s3skills.serve.mcp --bucket B --endpoint-url E --shared org --channel production \\
        --transport http --port 0 --tokens tokens.json

and two tenants with bearer tokens. bob's library and the shared `org` (with a `production`
channel) are ordinary; eve owns `users/eve/.s3skills/channels/production.json`:

- `http-quiet`: eve's channel is ordinary and eve makes no calls (the reference);
- `http-busy`: eve's channel is ordinary and she makes `list_skills` calls six at a time for the
  whole window (what her calls cost bob whatever her channel holds);
- `channel-flood`: eve's channel is the finding's: valid, plus an extra field of 6.5 million
  three-letter strings (39 MB); eve makes `list_skills` calls six at a time for the whole window;
- `channel-rewrite`: eve's channel carries the bulk under every cap (1.1 million strings, 6.6 MB)
  and she rewrites one byte of it before each of her calls (six at a time), so every call
  meets a new ETag.

bob calls `list_skills` every `interval` seconds; the server's resident memory (VmRSS) is
sampled every 20 ms. eve runs in a process of her own (`python bench/noisy_http.py --eve ...`),
so her uploads and her client's CPU are not the measuring process's. Reported: bob's p50, p99
and maximum (ms), the server's RSS before the attack and its peak during it (MB), the CPU
seconds the server and moto used meanwhile, and eve's completed calls. Used by `bench/noisy.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aioboto3
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from s3skills._loop import run_sync
from s3skills.layout import KeyLayout
from s3skills.skills.versions.channels import Channel, acurrent_skills
from s3skills.storage import S3ObjectStore
from s3skills.testing import make_bucket, make_client, skill_md

HTTP_SCENARIOS = ("http-quiet", "http-busy", "channel-flood", "channel-rewrite")
RSS_TARGET_MB = 150.0
P99_TARGET_MS = 150.0
BUCKET = "noisy-http"
CHANNEL = "production"
ROOT = Path(__file__).resolve().parent.parent
EVE_CHANNEL = f"users/eve/.s3skills/channels/{CHANNEL}.json"


def channel_bytes(name: str, strings: int = 0, tag: str = "") -> bytes:
    """A valid empty channel; with `strings`, an extra field of that many three-letter strings."""
    doc = {"schema": "s3skills.channel/1", "name": name, "updated": None, "actor": tag or None, "skills": {}}
    head = json.dumps(doc, separators=(",", ":")).encode()
    if not strings:
        return head
    return head[:-1] + b',"x":[' + b'"abc",' * (strings - 1) + b'"abc"]}'


def _library(client: Any) -> None:
    """bob's and eve's libraries and the shared `org` (its channel is written by `run_http_scenario`)."""
    for name in ("pdf-forms", "deploy", "docs-writer", "spreadsheets", "invoices"):
        client.put_object(
            Bucket=BUCKET, Key=f"users/bob/skills/{name}/SKILL.md", Body=skill_md(name, f"Works with {name}.")
        )
        client.put_object(Bucket=BUCKET, Key=f"shared/org/skills/org-{name}/SKILL.md", Body=skill_md(f"org-{name}"))
    client.put_object(Bucket=BUCKET, Key="users/eve/skills/notes/SKILL.md", Body=skill_md("notes", "Eve's notes."))


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _Sampler:
    """The peak RSS of a process, sampled every 20 ms by a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with contextlib.suppress(OSError, ValueError):
                self.peak = max(self.peak, _rss_mb(self.pid))

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def _server(endpoint: str, tmp: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps({"bob-token": "bob", "eve-token": "eve"}))
    tokens.chmod(0o600)
    env = _env()
    args = ["--bucket", BUCKET, "--endpoint-url", endpoint, "--shared", "org", "--channel", CHANNEL]
    args += ["--transport", "http", "--port", "0", "--tokens", str(tokens)]
    proc = subprocess.Popen([sys.executable, "-m", "s3skills.serve.mcp", *args], env=env, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        for raw in proc.stderr:
            lines.append(raw.decode("utf-8", "replace"))
            if lines[-1].startswith("listening on http://"):
                break
        else:
            raise RuntimeError("the MCP server did not start: " + "".join(lines)[-2000:])
        threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()  # keep draining
        yield lines[-1].removeprefix("listening on ").strip(), proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def _session(url: str, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _eve(scenario: str, url: str, endpoint: str) -> int:
    """eve's six calls at a time until this process's stdin closes (run in a process of her own,
    so that her uploads and her client's CPU are not the measuring process's); prints `ready`
    once her sessions are open."""
    client = make_client(endpoint)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)), daemon=True).start()
    done = 0
    lock = asyncio.Lock()

    async def one(session: ClientSession, n: int) -> None:
        nonlocal done
        k = 0
        while not stop.is_set():
            if scenario == "channel-rewrite":  # one byte differs from the last: a new ETag each call
                k += 1
                body = channel_bytes(CHANNEL, 1_100_000, tag=f"{n}-{k % 10}")
                async with lock:
                    await asyncio.to_thread(client.put_object, Bucket=BUCKET, Key=EVE_CHANNEL, Body=body)
            await session.call_tool("list_skills", {"query": "notes"})
            done += 1

    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(_session(url, "eve-token")) for _ in range(6)]
        print("ready", flush=True)
        await asyncio.gather(*(one(s, n) for n, s in enumerate(sessions)))
    return done


@contextlib.contextmanager
def _attacker(scenario: str, url: str, endpoint: str) -> Iterator[Callable[[], int]]:
    """eve's process, started and ready; yields a function that stops her and returns her calls."""
    args = [sys.executable, str(Path(__file__).resolve()), "--eve", scenario, url, endpoint]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env())
    assert proc.stdin is not None
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        proc.kill()
        raise RuntimeError("eve's process did not start")

    def stop() -> int:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.close()
        return int(proc.stdout.read().strip() or 0)

    try:
        yield stop
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


async def _bob(url: str, calls: int, interval: float) -> list[float]:
    samples: list[float] = []
    async with _session(url, "bob-token") as bob:
        for _ in range(calls):
            started = time.perf_counter()
            result = await bob.call_tool("list_skills", {"query": "fill pdf forms"})
            took = time.perf_counter() - started
            if result.is_error:
                raise RuntimeError(f"bob's list_skills failed: {result.content}")
            samples.append(took * 1000)
            await asyncio.sleep(max(0.0, interval - took))
    return samples


_MOTO = (
    "import sys\nfrom s3skills.testing import MotoServer\n"
    "moto = MotoServer()\nprint(moto.endpoint_url, flush=True)\nsys.stdin.read()"
)


@contextlib.contextmanager
def _moto() -> Iterator[tuple[str, int]]:
    """A moto server in a process of its own (its CPU is not the measuring client's); yields its URL and pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _MOTO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    try:
        yield proc.stdout.readline().decode().strip(), proc.pid
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def run_http_scenario(scenario: str, calls: int, interval: float = 0.05) -> dict[str, Any]:
    """One scenario on a fresh moto server and MCP server process; bob's samples and the server's RSS."""
    with _moto() as (endpoint, moto_pid):
        make_bucket(endpoint, BUCKET)
        client = make_client(endpoint)
        _library(client)

        layout, org_prefix = KeyLayout(), "shared/org/skills/"
        session = aioboto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        store = S3ObjectStore(BUCKET, endpoint_url=endpoint, session=session)
        org = run_sync(acurrent_skills(store, org_prefix))
        key = layout.channels_prefix(org_prefix) + f"{CHANNEL}.json"
        client.put_object(Bucket=BUCKET, Key=key, Body=Channel(CHANNEL, org).to_bytes())
        run_sync(store.aclose())
        strings = {"channel-flood": 6_500_000, "channel-rewrite": 1_100_000}.get(scenario, 0)
        client.put_object(Bucket=BUCKET, Key=EVE_CHANNEL, Body=channel_bytes(CHANNEL, strings))
        with tempfile.TemporaryDirectory() as tmp, _server(endpoint, Path(tmp)) as (url, proc):
            await _bob(url, 3, 0.0)  # warm: bob's index, the shared library and its channel
            baseline, cpu, s3_cpu = _rss_mb(proc.pid), _cpu_s(proc.pid), _cpu_s(moto_pid)
            with contextlib.ExitStack() as stack:
                stop = stack.enter_context(_attacker(scenario, url, endpoint)) if scenario != "http-quiet" else None
                sampler = stack.enter_context(_Sampler(proc.pid))
                await asyncio.sleep(0.5)  # the attack runs before bob measures
                listing = await _bob(url, calls, interval)
                hostile = stop() if stop is not None else 0
            peak, cpu = max(sampler.peak, _rss_mb(proc.pid)), _cpu_s(proc.pid) - cpu
            s3_cpu = _cpu_s(moto_pid) - s3_cpu
    return {
        "scenario": scenario,
        "list_skills_ms": listing,
        "rss_baseline_mb": round(baseline, 1),
        "rss_peak_mb": round(peak, 1),
        "hostile_calls": hostile,
        "server_cpu_s": round(cpu, 2),
        "s3_cpu_s": round(s3_cpu, 2),
    }


if __name__ == "__main__" and sys.argv[1:2] == ["--eve"]:
    print(asyncio.run(_eve(*sys.argv[2:5])), flush=True)
