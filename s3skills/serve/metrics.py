"""Prometheus metrics of a serving process (`s3skills mcp --transport http --metrics`).

`ServerMetrics` counts, with the official client (`prometheus-client`, in the `mcp` extra):

- `s3skills_mcp_calls_total{method, tool, status}`: MCP requests; `status` is `ok`,
  `tool_error` (a tool result with `isError`) or `error`;
- `s3skills_mcp_call_seconds{method, tool}`: their latency (histogram), from the request
  parsed to its result;
- `s3skills_errors_total{kind}`: failed calls by kind: the library's error class
  (`StoreUnavailable`, `SkillError`...), `tool_error`, `protocol` (a bad request) or `internal`;
- `s3skills_s3_requests_total{operation}`: S3 API calls (`GetObject`, `ListObjectsV2`...;
  a retried call counts once);
- `s3skills_index_reads_total{result}`: a library's index asked for: `hit` (answered from
  memory) or `refresh` (it waited for a request);
- `s3skills_index_age_seconds`: the age of the index each answer came from (histogram);
- `s3skills_http_requests_total{path, code}`: HTTP responses; `path` is `/mcp`, `probe` or `other`.

Every label takes values from a fixed set (methods outside the protocol's are `other`, tools
outside the server's are `other`): no user id, token, skill or path reaches a label, so the
number of series is bounded whatever clients send.

With several worker processes, the client's multiprocess mode merges every worker's figures:
`multiprocess_dir` prepares `PROMETHEUS_MULTIPROC_DIR` before any worker starts (emptied on
start; a temporary directory when the variable is not set), and `/metrics` on any worker
answers for all of them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from s3skills.errors import S3SkillsError
from s3skills.skills import SkillLibrary

__all__ = ["METHODS", "ServerMetrics", "multiprocess_dir"]

METHODS = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/directory/read",
        "skills/list",
        "skills/get",
    }
)
"""The methods counted by name; any other is counted as `other`."""

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_AGE_BUCKETS = (0.001, 0.01, 0.1, 1.0, 5.0, 30.0, 60.0, 300.0, 3600.0)
_ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[str]:
    """Prepare the multiprocess mode for the worker processes started in the block (a temporary
    directory is removed after it).

    The directory named by `PROMETHEUS_MULTIPROC_DIR` is emptied of earlier runs' files;
    without the variable a private temporary directory is made and the variable set.
    """
    given = os.environ.get(_ENV)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):  # a previous run's figures would add to this one's
            stale.unlink()
        yield str(folder)
        return
    made = tempfile.mkdtemp(prefix="s3skills-metrics-")
    os.environ[_ENV] = made
    try:
        yield made
    finally:
        os.environ.pop(_ENV, None)
        shutil.rmtree(made, ignore_errors=True)


class ServerMetrics:
    """The metrics of one server process (see the module); `attach` it to what it observes.

    Args:
        tools: The tool names counted by name (others are `other`).
    """

    def __init__(self, tools: tuple[str, ...] = ()) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.multiprocess = bool(os.environ.get(_ENV))
        self.registry = CollectorRegistry()
        self.tools = frozenset(tools)
        self.calls = Counter(
            "s3skills_mcp_calls",
            "MCP requests, by method, tool and outcome.",
            ["method", "tool", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "s3skills_mcp_call_seconds",
            "Latency of MCP requests.",
            ["method", "tool"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "s3skills_errors", "Failed MCP requests, by kind of error.", ["kind"], registry=self.registry
        )
        self.s3 = Counter("s3skills_s3_requests", "S3 API calls, by operation.", ["operation"], registry=self.registry)
        self.index_reads = Counter(
            "s3skills_index_reads", "Library indexes asked for, by result.", ["result"], registry=self.registry
        )
        self.index_age = Histogram(
            "s3skills_index_age_seconds",
            "Age of the index each answer came from.",
            buckets=_AGE_BUCKETS,
            registry=self.registry,
        )
        self.http = Counter(
            "s3skills_http_requests",
            "HTTP responses, by path and status code.",
            ["path", "code"],
            registry=self.registry,
        )

    # -- what it observes ---------------------------------------------------------------------

    def attach(self, server: Any, library: SkillLibrary | None) -> None:
        """Observe an MCP `Server` (its requests) and a library (its S3 requests and index reads)."""
        server.middleware.insert(0, self._middleware)  # outermost: sees the errors the others map
        if library is not None:
            library.store.add_request_hook(self._s3_request)
            library.catalog.observers.append(self._index_read)

    def _s3_request(self, operation: str) -> None:
        self.s3.labels(operation if operation.isalnum() else "other").inc()

    def _index_read(self, hit: bool, age: float) -> None:
        self.index_reads.labels("hit" if hit else "refresh").inc()
        self.index_age.observe(max(0.0, age))

    async def _middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        method = ctx.method if ctx.method in METHODS else "other"
        tool = ""
        if method == "tools/call":
            name = ctx.params.get("name") if isinstance(ctx.params, dict) else getattr(ctx.params, "name", None)
            tool = name if name in self.tools else "other"
        started = time.perf_counter()
        status = "error"
        try:
            result = await call_next(ctx)
            failed = result.get("isError") if isinstance(result, dict) else getattr(result, "is_error", False)
            status = "tool_error" if failed else "ok"
            if failed:
                self.errors.labels("tool_error").inc()
            return result
        except Exception as exc:
            self.errors.labels(_kind(exc)).inc()
            raise
        finally:
            self.calls.labels(method, tool, status).inc()
            self.latency.labels(method, tool).observe(time.perf_counter() - started)

    def http_response(self, path: str, code: int) -> None:
        """Count one HTTP response."""
        probe = path in ("/healthz", "/readyz", "/metrics")
        group = "/mcp" if path.rstrip("/") == "/mcp" else "probe" if probe else "other"
        self.http.labels(group, str(code)).inc()

    # -- exposition ---------------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition (every worker's figures in multiprocess mode) and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector

        if not self.multiprocess:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        merged = CollectorRegistry()
        MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return generate_latest(merged), CONTENT_TYPE_LATEST

    def process_ended(self) -> None:
        """In multiprocess mode, mark this process dead (its gauges leave; counters stay summed)."""
        if self.multiprocess:
            from prometheus_client.multiprocess import mark_process_dead

            mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    def asgi(self, app: Any) -> Any:
        """`app` with its HTTP responses counted (`s3skills_http_requests_total`)."""

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            code = [500]

            async def sending(message: Any) -> None:
                if message["type"] == "http.response.start":
                    code[0] = int(message["status"])
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                self.http_response(str(scope.get("path", "")), code[0])

        return counted


def _kind(exc: BaseException) -> str:
    """A failed call's kind, from a fixed set: the library error behind a protocol error, else its family."""
    cause = exc.__context__ if isinstance(exc, MCPError) else exc
    if isinstance(cause, S3SkillsError):
        return type(cause).__name__
    if isinstance(exc, MCPError):
        return "internal" if cause is not None else "protocol"
    return "internal"
