"""Where an MCP call's time goes: the HTTP server with a step tracer, and the per-step table.

Run by `serve_http.py --trace`. The server is started as `python bench/serve_trace.py
<the server's arguments>`: this module wraps the steps of a call in timers, then runs
`s3skills.serve.mcp.main`. Each HTTP request gets a trace (a context variable, so the
steps that run on the library's I/O loop or in a worker thread are timed in it too):

- `server`: the request in the ASGI app, first byte in to last byte out;
- `auth`: the bearer token's verification;
- `handler`: the tool's handler (`SkillTools._call_tool`); `server - auth - handler` is
  the MCP framing (JSON-RPC parsing and validation, the per-request transport and its
  tasks, the JSON answer);
- `io-loop hop`: waiting for the library's private I/O loop to start a call, and for the
  server's loop to take its answer back;
- `index`: the catalog's answer for a library (`SkillCatalog.aindex`), of which
  `index: gather wait` is the time a refresh waits for more callers (`gather_delay`);
- `s3`: S3 requests (botocore's `before-call` to `after-call`);
- `ranking`: `list_skills(query)`'s ranking in the fair-share pool, queue included.

Steps nest (`s3` is inside `index` or `handler`), so they do not add up. Wall times are
taken at `--clients` clients; CPU times with one client calling in turn (process CPU
over the step, so a step's CPU is its own and includes the I/O loop's thread). At exit
the server writes `{tool: {step: [(wall_s, cpu_s), ...]}}` to `$S3SKILLS_TRACE_OUT`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

STEPS = ("server", "auth", "handler", "io-loop hop", "index", "index: gather wait", "s3", "ranking")
_trace: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("s3skills_trace", default=None)
_done: list[dict[str, Any]] = []


def _add(step: str, wall: float, cpu: float) -> None:
    trace = _trace.get()
    if trace is not None:
        got = trace.setdefault(step, [0.0, 0.0])
        got[0] += wall
        got[1] += cpu


def _timed(step: str, fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        w, c = time.perf_counter(), time.process_time()
        try:
            return await fn(*args, **kwargs)
        finally:
            _add(step, time.perf_counter() - w, time.process_time() - c)

    return wrapper


def install() -> None:
    """Wrap the steps of a call in timers (before the server is built)."""
    import s3skills._loop as loop_module
    from s3skills.serve import mcp as mcp_module
    from s3skills.serve.auth import JsonFileTokenVerifier
    from s3skills.serve.fairshare import TenantLimiter
    from s3skills.serve.tools import SkillTools
    from s3skills.skills.index.catalog import SkillCatalog
    from s3skills.storage import S3ObjectStore

    JsonFileTokenVerifier.verify_token = _timed("auth", JsonFileTokenVerifier.verify_token)  # type: ignore[method-assign]
    SkillCatalog.aindex = _timed("index", SkillCatalog.aindex)  # type: ignore[method-assign]
    TenantLimiter.run = _timed("ranking", TenantLimiter.run)  # type: ignore[method-assign]
    original_call = SkillTools._call_tool

    async def call_tool(self: Any, ctx: Any, params: Any) -> Any:
        trace = _trace.get()
        if trace is not None:
            trace["tool"] = params.name
        return await _timed("handler", original_call)(self, ctx, params)

    SkillTools._call_tool = call_tool  # type: ignore[method-assign]
    original_init = SkillCatalog.__init__

    def catalog_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.sleep = _timed("index: gather wait", self.sleep)

    SkillCatalog.__init__ = catalog_init  # type: ignore[method-assign]
    original_hop = loop_module.on_io_loop

    async def on_io_loop(coro: Coroutine[Any, Any, Any]) -> Any:
        if asyncio.get_running_loop() is loop_module._loop:
            return await coro
        asked, inner = time.perf_counter(), [0.0]

        async def measured() -> Any:
            started = time.perf_counter()
            try:
                return await coro
            finally:
                inner[0] = time.perf_counter() - started

        result = await original_hop(measured())
        _add("io-loop hop", time.perf_counter() - asked - inner[0], 0.0)
        return result

    loop_module.on_io_loop = on_io_loop  # type: ignore[assignment]
    original_client = S3ObjectStore._client

    async def client(self: Any) -> Any:
        made = await original_client(self)
        if not getattr(made, "_traced", False):
            made._traced = True
            made.meta.events.register("before-call.s3", _s3_started)
            made.meta.events.register("after-call.s3", _s3_ended)
        return made

    S3ObjectStore._client = client  # type: ignore[method-assign]
    original_app = mcp_module.http_app

    def http_app(*args: Any, **kwargs: Any) -> Any:
        return _Traced(original_app(*args, **kwargs))

    mcp_module.http_app = http_app


_s3_started_at: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("s3_at", default=None)


def _s3_started(model: Any = None, **_: Any) -> None:
    _s3_started_at.set((time.perf_counter(), time.process_time()))
    trace = _trace.get()
    if trace is not None and model is not None:  # S3 requests of the call, by operation
        ops = trace.setdefault("s3 requests", {})
        ops[model.name] = ops.get(model.name, 0) + 1


def _s3_ended(**_: Any) -> None:
    began = _s3_started_at.get()
    if began is not None:
        _add("s3", time.perf_counter() - began[0], time.process_time() - began[1])


class _Traced:
    """ASGI middleware: one trace per HTTP request, kept when the request was a tool call."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:  # the app's own attributes (its router's lifespan)
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        trace: dict[str, Any] = {}
        warm_up = any(name == b"x-bench-warm-up" for name, _ in scope["headers"])  # http_load.WARM_UP_HEADER
        token = _trace.set(trace)
        w, c = time.perf_counter(), time.process_time()
        try:
            await self.app(scope, receive, send)
        finally:
            _add("server", time.perf_counter() - w, time.process_time() - c)
            _trace.reset(token)
            if "tool" in trace and not warm_up:
                _done.append(trace)


def _dump() -> None:
    out = os.environ.get("S3SKILLS_TRACE_OUT")
    if not out:
        return
    table: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for trace in _done:
        tool = table.setdefault(trace["tool"], {})
        for step in STEPS:
            tool.setdefault(step, []).append(tuple(trace.get(step, (0.0, 0.0))))  # type: ignore[arg-type]
        tool.setdefault("s3 requests", []).append(trace.get("s3 requests", {}))  # type: ignore[arg-type]
    Path(out).write_text(json.dumps(table))


def trace(
    bucket: str, endpoint: str, keys: Any, tokens_file: Path, tokens: dict[str, str], args: Any, server: Any, load: Any
) -> Any:
    """The per-step figures: wall at `args.clients` clients, CPU with one client (`server` and
    `load` are `serve_http`'s)."""
    from http_load import run, sweep  # bench/http_load.py: on uvloop, as the timed runs

    out: dict[str, Any] = {}
    for label, clients, duration in (("wall", args.clients, args.duration), ("cpu", 1, max(5.0, args.duration / 2))):
        dump = tokens_file.parent / f"trace-{label}.json"
        os.environ["S3SKILLS_TRACE_OUT"] = str(dump)
        try:
            with server(bucket, endpoint, keys, tokens_file, 1, *args.server_options, launcher=__file__) as (url, _p):
                run(sweep(url, tokens, args.skills, clients))
                run(load(url, tokens, len(tokens), 3.0, args.skills, warm_up=True))
                _done_marker = run(load(url, tokens, clients, duration, args.skills))
        finally:
            del os.environ["S3SKILLS_TRACE_OUT"]
        client_side: dict[str, list[float]] = {}
        for tool, _start, seconds, _error in _done_marker["samples"]:
            client_side.setdefault(tool, []).append(seconds)
        out[label] = {"steps": json.loads(dump.read_text()), "client": client_side, "clients": clients}
    return out


def print_table(traced: dict[str, Any]) -> None:
    """Median ms per call, by tool and step: wall at N clients, CPU at one client."""
    wall, cpu = traced["wall"], traced["cpu"]
    print(f"\nper call, median ms: wall at {wall['clients']} clients / CPU at 1 client (warm-up calls left out)")
    tools = sorted(wall["steps"])
    print(f"{'step':<22}" + "".join(f"{t:>26}" for t in tools))
    rows = [("client (end to end)", None), *((s, s) for s in STEPS)]
    for label, step in rows:
        cells = []
        for t in tools:
            if step is None:
                w = statistics.median(wall["client"][t]) * 1000
                c = statistics.median(cpu["client"][t]) * 1000
                cells.append(f"{w:9.2f} / {c:6.2f} (wall)")
                continue
            w = statistics.median(x[0] for x in wall["steps"][t][step]) * 1000
            c = statistics.median(x[1] for x in cpu["steps"][t][step]) * 1000
            cells.append(f"{w:9.2f} / {c:6.2f} cpu")
        print(f"{label:<22}" + "".join(f"{cell:>26}" for cell in cells))
    print(f"S3 requests per call, mean by operation, at {wall['clients']} clients / at 1 client:")
    for t in tools:
        at_n, at_1 = (requests_per_call(run["steps"][t]["s3 requests"]) for run in (wall, cpu))
        print(f"  {t}: {at_n} / {at_1}")


def requests_per_call(calls: list[dict[str, int]]) -> dict[str, float]:
    """Mean S3 requests per call by operation (the warm-up's calls are not traced)."""
    ops = sorted({op for call in calls for op in call})
    return {op: round(sum(call.get(op, 0) for call in calls) / max(1, len(calls)), 3) for op in ops}


if __name__ == "__main__":
    install()
    atexit.register(_dump)
    from s3skills.serve.mcp import main

    raise SystemExit(main(sys.argv[1:]))
