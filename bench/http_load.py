"""A cheap load generator for the MCP server over HTTP: keep-alive connections on one loop.

`serve_http.py` measures whether two workers on two cores serve 1.6x one worker; the
load generator runs on the same cores, so every millisecond of CPU it spends per call is
taken from the server (aiohttp's client spent ~0.36 ms a call, a third of what SeaweedFS
spent). This one sends pre-encoded HTTP/1.1 requests (every `tools/call` body and its
headers are built once, before the clock starts) over one `asyncio.Protocol` connection
per client, on uvloop when installed, and parses only the status line, `Content-Length`
and the body.

Every call is checked, not only its status: a call fails when the answer is not a 200, is
a JSON-RPC error, is a result with `isError`, or is not the answer the call asked for (the
skill's id for `load_skill`, the file's text for `read_skill_file`, the user's skill count
for `list_skills`). The first answer to each distinct request is checked by decoding it;
later answers that are byte for byte the same as a checked one pass without decoding
(the server is stateless and its answers deterministic), any other is decoded and checked.
Every call's latency is kept.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any
from urllib.parse import urlsplit

TOOLS = ("list_skills", "load_skill", "read_skill_file")
QUERIES = ("fill a pdf form", "quarterly report", "translate a contract", "review code", "plan a trip")
GUIDE_PATH = "references/guide.md"
GUIDE_START = "# Guide"


def call_body(tool: str, skill: str, n: int) -> bytes:
    """The JSON-RPC `tools/call` of one call (`n` picks the query of `list_skills`)."""
    if tool == "list_skills":
        arguments: dict[str, str] = {"query": QUERIES[n % len(QUERIES)]}
    elif tool == "load_skill":
        arguments = {"name": skill}
    else:
        arguments = {"name": skill, "path": GUIDE_PATH}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return json.dumps(message).encode()


WARM_UP_HEADER = "X-Bench-Warm-Up"
"""Sent with the warm-up's calls, so that the step tracer (`serve_trace.py`) leaves them out."""


def request_bytes(host: str, path: str, token: str, body: bytes, *, warm_up: bool = False) -> bytes:
    """One whole HTTP/1.1 POST, as an MCP client sends a stateless call."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        + (f"{WARM_UP_HEADER}: 1\r\n" if warm_up else "")
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def check_answer(tool: str, skill: str, per_user: int, status: int, body: bytes) -> str | None:
    """None when `body` is the right answer to the call, else what is wrong with it."""
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    try:
        answer = json.loads(body)
    except ValueError:
        return f"not JSON: {body[:200]!r}"
    if "error" in answer:
        return f"error: {answer['error']}"
    result = answer.get("result") or {}
    if result.get("isError"):
        return f"isError: {str(result.get('content'))[:200]}"
    structured = result.get("structuredContent") or {}
    if tool == "list_skills" and structured.get("total") != per_user:
        return f"list_skills: {structured.get('total')} skills, not {per_user}"
    if tool == "load_skill" and structured.get("id") != skill:
        return f"load_skill: loaded {structured.get('id')!r}, not {skill!r}"
    if tool == "read_skill_file" and not str((result.get("content") or [{}])[0].get("text", "")).startswith(
        GUIDE_START
    ):
        return f"read_skill_file: not the guide: {str(result.get('content'))[:200]}"
    return None


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: Any = None  # a TCP transport (uvloop's is no asyncio.Transport)
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionResetError("the server closed the connection")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(self.lost)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answer = _parse(self.buffer)
        if answer is not None and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(answer)

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        if self.lost is not None or self.transport is None:
            raise ConnectionResetError("the connection is closed")
        self.buffer.clear()
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self.waiter


def _parse(buffer: bytearray) -> tuple[int, bytes] | None:
    """(status, body) once `buffer` holds a whole response with a `Content-Length`, else None."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end]).split(b"\r\n")
    length = 0
    for line in head[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if len(buffer) < end + 4 + length:
        return None
    return int(head[0].split()[1]), bytes(buffer[end + 4 : end + 4 + length])


async def load(
    url: str,
    tokens: dict[str, str],
    clients: int,
    duration: float,
    per_user: int,
    seed: int = 7,
    *,
    warm_up: bool = False,
) -> dict[str, Any]:
    """`clients` clients calling for `duration` seconds; every call's (tool, start, seconds, error).

    Each client is one user (round robin over `tokens`) on its own connection, and loops over
    the tools in turn on a skill picked at random (seeded). `warm_up` marks the calls as a
    warm-up's (`WARM_UP_HEADER`).
    """
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
    users = list(tokens)
    prepared: dict[tuple[str, str, str, int], bytes] = {}
    for token in users:
        for s in range(per_user):
            skill = f"skill-{s:03d}"
            for tool in TOOLS:
                for q in range(len(QUERIES)) if tool == "list_skills" else (0,):
                    body = call_body(tool, skill, q)
                    prepared[(token, tool, skill, q)] = request_bytes(
                        f"{host}:{port}", path, token, body, warm_up=warm_up
                    )
    checked: dict[tuple[str, str, str, int], bytes] = {}  # request -> an answer found right
    samples: list[tuple[str, float, float, str | None]] = []
    loop = asyncio.get_running_loop()
    began = time.perf_counter()
    stop_at = began + duration

    def _check(which: tuple[str, str, str, int], status: int, body: bytes) -> str | None:
        error = check_answer(which[1], which[2], per_user, status, body)
        if error is None:
            checked[which] = body
        return error

    async def client(c: int) -> None:
        token = users[c % len(users)]
        pick = random.Random(seed * 1000 + c)
        _, conn = await loop.create_connection(_Connection, host, port)
        try:
            n = 0
            while time.perf_counter() < stop_at:
                tool = TOOLS[n % len(TOOLS)]
                skill = f"skill-{pick.randrange(per_user):03d}"
                which = (token, tool, skill, n % len(QUERIES) if tool == "list_skills" else 0)
                start = time.perf_counter()
                error: str | None
                try:
                    status, body = await conn.send(prepared[which])
                except OSError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    _, conn = await loop.create_connection(_Connection, host, port)
                else:
                    error = None if checked.get(which) == body and status == 200 else _check(which, status, body)
                samples.append((tool, start - began, time.perf_counter() - start, error))
                n += 1
        finally:
            if conn.transport is not None:
                conn.transport.close()

    await asyncio.gather(*(client(c) for c in range(clients)))
    return {"wall": time.perf_counter() - began, "samples": samples}


async def sweep(url: str, tokens: dict[str, str], per_user: int, clients: int, rounds: int = 2) -> int:
    """Every user loads and reads every skill `rounds` times, over `clients` connections; the calls made.

    What a long-running server has seen: its caches hold what its users call (with `--workers`
    each worker has its own, and a connection goes to one worker, so the sweep goes over every
    connection more than once).

    Raises:
        RuntimeError: A call failed (the first failure).
    """
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
    todo = [
        (token, tool, f"skill-{s:03d}")
        for _ in range(rounds)
        for token in tokens
        for s in range(per_user)
        for tool in ("load_skill", "read_skill_file")
    ]
    todo.reverse()
    loop = asyncio.get_running_loop()

    async def client() -> None:
        _, conn = await loop.create_connection(_Connection, host, port)
        try:
            while todo:
                token, tool, skill = todo.pop()
                raw = request_bytes(f"{host}:{port}", path, token, call_body(tool, skill, 0), warm_up=True)
                error = check_answer(tool, skill, per_user, *await conn.send(raw))
                if error is not None:
                    raise RuntimeError(f"warm-up {tool}({skill}) failed: {error}")
        finally:
            conn.transport.close()

    total = len(todo)
    await asyncio.gather(*(client() for _ in range(clients)))
    return total


def run(coro: Any) -> Any:
    """Run a coroutine on uvloop when it is installed (as the server does), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
