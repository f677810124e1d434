"""Probes, metrics and drain of the serving room (`s3skills.serve.probes`, `metrics`, `http`), in process.

The app under test is the MCP server's HTTP app behind `probed_app`, driven through httpx's
ASGI transport; the library is a `MemoryObjectStore` or the shared moto server. What a
server process does with them (workers, SIGTERM, a real balancer) is in
`tests/test_serve_balancer.py` (slow).
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from s3skills.config import Config
from s3skills.errors import CredentialsError
from s3skills.options import flag_value
from s3skills.serve.auth import JsonFileTokenVerifier
from s3skills.serve.http import HttpSettings, probed_app, worker_count
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.mcp import _served, library_source
from s3skills.serve.probes import Drain, Probes, Readiness, bucket_check
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.testing import MemoryObjectStore, skill_md

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def _call(n: int, tool: str, **arguments: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tok-ana": "ana", "tok-bob": "bob"}))
    path.chmod(0o600)
    return path


def _library() -> SkillLibrary:
    store = MemoryObjectStore()
    store.put_object("users/ana/skills/deploy/SKILL.md", skill_md("deploy", "Deploy the services"))
    store.put_object("users/ana/skills/deploy/references/steps.md", "steps\n")
    return SkillLibrary(store, Config())


async def _app(library: SkillLibrary, tokens: Path, *, metrics: bool) -> Any:
    skills = SkillsServer(LibrarySkillSource(library), tools=True)
    settings = HttpSettings(metrics=metrics)
    return probed_app(_served(skills, JsonFileTokenVerifier(tokens), settings), settings)


@pytest.fixture
async def client(tokens: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = await _app(_library(), tokens, metrics=True)
    async with (
        app_lifespan(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http,
    ):
        yield http


class app_lifespan:
    """Run an ASGI app's lifespan (startup, then shutdown at exit) as a server does."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.queue: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def __aenter__(self) -> None:
        self.task = asyncio.ensure_future(self.app({"type": "lifespan"}, self.queue.get, self.sent.put))
        await self.queue.put({"type": "lifespan.startup"})
        assert (await self.sent.get())["type"] == "lifespan.startup.complete"

    async def __aexit__(self, *exc: object) -> None:
        await self.queue.put({"type": "lifespan.shutdown"})
        assert (await self.sent.get())["type"] == "lifespan.shutdown.complete"
        await self.task


async def test_healthz_and_readyz_answer_without_a_token_and_the_bucket_is_asked_once_per_window(
    tokens: Path,
) -> None:
    library = _library()
    app = await _app(library, tokens, metrics=False)
    readiness: Readiness = app.readiness
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        assert (await http.get("/healthz")).text == "ok\n"
        answers = [await http.get("/readyz") for _ in range(20)]
        assert {a.status_code for a in answers} == {200}
        assert readiness.checks == 1  # twenty probes, one LIST
        assert (await http.get("/metrics")).status_code == 404  # metrics off: the path is the app's
        assert (await http.post("/readyz")).status_code == 405
        readiness.draining = True
        drained = await http.get("/readyz")
        assert (drained.status_code, drained.text) == (503, "draining\n")
        assert (await http.get("/healthz")).status_code == 200  # still alive


async def test_a_server_that_cannot_read_its_bucket_is_not_ready_and_says_why(moto_endpoint: str) -> None:
    source = library_source("no-such-bucket-s3skills", endpoint_url=moto_endpoint)
    readiness = Readiness(bucket_check(source.library), timeout=60)
    app = Probes(_not_found, readiness)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            answer = await http.get("/readyz")
    finally:
        await source.library.store.aclose()
    assert (answer.status_code, answer.text) == (503, "cannot read the bucket: BucketNotFound\n")
    assert "no-such-bucket" not in answer.text  # nothing of the configuration leaks


async def test_readiness_comes_back_after_its_window_once_the_check_passes() -> None:
    now = [0.0]
    failing = [True]

    async def check() -> None:
        if failing[0]:
            raise CredentialsError("refused")

    readiness = Readiness(check, ttl=5.0, clock=lambda: now[0])
    assert await readiness.state() == (False, "cannot read the bucket: CredentialsError")
    failing[0] = False
    now[0] = 4.0
    assert (await readiness.state())[0] is False  # the window's answer stands: no request
    now[0] = 5.0
    assert (await readiness.state())[0] is False  # the last outcome answers; a check starts behind it
    await readiness.check_now()  # (what that background check does)
    assert await readiness.state() == (True, "ready")
    assert readiness.checks == 2


async def test_a_check_that_hangs_is_a_failure_after_its_timeout_not_a_hung_probe() -> None:
    async def hangs() -> None:
        await asyncio.Event().wait()

    readiness = Readiness(hangs, timeout=0.05)
    assert await readiness.state() == (False, "the bucket did not answer within 0.05 s")


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(families: dict[str, Any], name: str, **labels: str) -> float:
    samples = (s for f in families.values() for s in f.samples if s.name == name)
    return float(sum(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())))


async def test_metrics_parse_and_their_counters_move_with_the_calls_with_no_user_in_any_label(
    client: httpx.AsyncClient,
) -> None:
    before = _families((await client.get("/metrics")).text)
    ana = {**HEADERS, "Authorization": "Bearer tok-ana"}
    calls = [
        _call(1, "list_skills", query="deploy"),
        _call(2, "load_skill", name="deploy"),
        _call(3, "read_skill_file", name="deploy", path="references/steps.md"),
        _call(4, "load_skill", name="nowhere"),  # a tool error
        _call(5, "no_such_tool"),  # a protocol error
    ]
    for body in calls:
        assert (await client.post("/mcp", json=body, headers=ana)).status_code == 200
    assert (await client.post("/mcp", json=calls[0], headers=HEADERS)).status_code == 401
    text = (await client.get("/metrics")).text
    after = _families(text)

    def moved(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - (
            _value(before, name, **labels) if name.removesuffix("_total") in before else 0
        )

    assert moved("s3skills_mcp_calls_total", method="tools/call", tool="list_skills", status="ok") == 1
    assert moved("s3skills_mcp_calls_total", method="tools/call", tool="read_skill_file", status="ok") == 1
    assert moved("s3skills_mcp_calls_total", method="tools/call", tool="load_skill", status="ok") == 1
    assert moved("s3skills_mcp_calls_total", method="tools/call", tool="load_skill", status="tool_error") == 1
    assert moved("s3skills_mcp_calls_total", method="tools/call", tool="other", status="error") == 1
    assert moved("s3skills_errors_total", kind="tool_error") == 1
    assert moved("s3skills_errors_total", kind="protocol") == 1
    assert moved("s3skills_mcp_call_seconds_count", method="tools/call", tool="load_skill") == 2
    assert moved("s3skills_s3_requests_total", operation="GetObject") >= 3  # memory store: GetObject per read
    assert moved("s3skills_index_reads_total") >= 3
    assert moved("s3skills_index_age_seconds_count") >= 3
    assert moved("s3skills_http_requests_total", path="/mcp", code="401") == 1
    assert moved("s3skills_http_requests_total", path="/mcp", code="200") == 5
    labels = {v for f in after.values() for s in f.samples for v in s.labels.values()}
    assert not labels & {"ana", "bob", "tok-ana", "deploy", "nowhere", "no_such_tool", "references/steps.md"}


def test_drain_goes_unready_at_once_hands_over_after_the_unready_time_and_exits_at_the_deadline() -> None:
    readiness = Readiness()
    handed_over = threading.Event()
    exited: list[int] = []
    gone = threading.Event()

    def previous(sig: int, frame: Any) -> None:  # the server's own handler (uvicorn's handle_exit)
        handed_over.set()

    def exit_now(code: int) -> None:
        exited.append(code)
        gone.set()

    drain = Drain(readiness, deadline=0.4, unready_seconds=0.1, exit=exit_now)
    handler = drain._handler(previous)
    handler(signal.SIGTERM, None)
    assert readiness.draining
    assert not handed_over.is_set()  # still serving, unready, for unready_seconds
    assert handed_over.wait(10)
    assert gone.wait(10)  # the server did not finish in time: the watchdog ends the process
    assert exited == [0]
    assert drain.graceful_seconds == 0.5  # never less than half a second to finish calls


def test_a_second_signal_hands_over_at_once() -> None:
    calls: list[int] = []
    drain = Drain(Readiness(), deadline=30, unready_seconds=20, exit=lambda code: None)
    handler = drain._handler(lambda sig, frame: calls.append(sig))
    handler(signal.SIGTERM, None)
    handler(signal.SIGINT, None)
    drain.cancel()
    assert calls == [signal.SIGINT]


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 1), ("", 1), ("3", 3), ("auto", None), ("0", ValueError), ("two", ValueError)]
)
def test_workers_take_a_number_or_auto(value: str | None, expected: Any) -> None:
    if expected is ValueError:
        with pytest.raises(ValueError, match="--workers"):
            worker_count(value)
        return
    got = worker_count(value)
    assert got == expected if expected is not None else got >= 1


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("on", True), ("no", False), ("0", False)])
def test_the_metrics_variable_is_a_flag(value: str, expected: bool) -> None:
    assert flag_value("metrics", False, {"S3SKILLS_METRICS": value}) is expected
    assert flag_value("metrics", True, {"S3SKILLS_METRICS": "0"}) is True  # the flag given wins
    with pytest.raises(ValueError, match="S3SKILLS_METRICS"):
        flag_value("metrics", False, {"S3SKILLS_METRICS": "sometimes"})
