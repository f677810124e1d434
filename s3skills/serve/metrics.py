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
`multiprocess_dir` makes a private directory for the run and points `PROMETHEUS_MULTIPROC_DIR`
at it before any worker starts (inside the directory the variable named, if any), and
`/metrics` on any worker answers for all of them; the directory is removed when the server
ends. A single process uses the same private directory when the variable is set (so an
earlier run's files are never read), and plain memory otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
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
_PREFIX = "s3skills-metrics-"
_OURS: set[str] = set()  # the directories this process has made and not yet removed


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[str]:
    """A private directory for the multiprocess mode of the processes started in the block,
    named by `PROMETHEUS_MULTIPROC_DIR` inside it and removed after it.

    The directory is made for this run alone (mode 0700, its name unique and holding this
    process's pid) inside the directory `PROMETHEUS_MULTIPROC_DIR` names, or the system's
    temporary directory without the variable: no other run's files are ever read, even
    when a pid repeats (PID 1 in every container). Directories of earlier runs whose
    process is gone (a crashed or killed manager leaves its own) are removed first; the
    variable is put back as it was after the block.

    Raises:
        ValueError: `PROMETHEUS_MULTIPROC_DIR` is not a directory, or other users may write
            to it without the sticky bit (they could swap this run's directory for theirs),
            or the directory cannot be made there; the message says which and what to do.
    """
    given = os.environ.get(_ENV)
    base = Path(given) if given else Path(tempfile.gettempdir())
    try:
        if given:
            with contextlib.suppress(FileExistsError):  # a file there is refused by the check
                base.mkdir(mode=0o700, parents=True)
        _check_base(base)
        _sweep(base)
        made = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)
    except OSError as exc:
        raise ValueError(f"{_ENV}={base}: cannot make the metrics directory there: {exc.strerror or exc}") from None
    _OURS.add(made)
    os.environ[_ENV] = made
    try:
        yield made
    finally:
        if given:
            os.environ[_ENV] = given
        else:
            os.environ.pop(_ENV, None)
        shutil.rmtree(made, ignore_errors=True)
        _OURS.discard(made)


def _check_base(base: Path) -> None:
    info = base.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{_ENV}={base} is not a directory: point it at one, or unset it")
    shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if shared and not info.st_mode & stat.S_ISVTX:
        raise ValueError(
            f"{_ENV}={base} may be written by other users (mode {stat.S_IMODE(info.st_mode):o}, not sticky): "
            "point it at a directory only this user writes, or unset it (a private temporary one is made)"
        )


def _sweep(base: Path) -> None:
    """Remove this user's metrics directories of runs whose process has ended."""
    for entry in base.glob(_PREFIX + "*"):
        pid = entry.name.removeprefix(_PREFIX).split("-", 1)[0]
        if not pid.isascii() or not pid.isdigit() or str(entry) in _OURS:
            continue
        try:
            info = entry.lstat()
        except FileNotFoundError:  # removed meanwhile (another run sweeping)
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if int(pid) == os.getpid() or not _running(int(pid)):  # our pid, yet not ours: an earlier run's
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


_HEADER_BYTES = 8
"""A multiprocess file's header (its used length, then padding): a shorter file is still being created."""


def _sized(path: Path) -> bool:
    try:
        return path.stat().st_size >= _HEADER_BYTES
    except FileNotFoundError:
        return False


class _SizedFiles:
    """A collector merging the multiprocess files of `folder`, as the client's
    `MultiProcessCollector` does, but for a file its worker has only begun to create.

    The client creates a worker's file empty and sizes it a moment later; a scrape in between
    failed on it (`struct.error`: a 500 from `/metrics` while a worker starts, seen when a replica's
    workers were restarted under load). Such a file holds no figure yet, so leaving it out loses none.
    """

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    def collect(self) -> Any:
        from prometheus_client.multiprocess import MultiProcessCollector

        files = sorted(str(f) for f in self.folder.glob("*.db") if _sized(f))
        return MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call]


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

        if not self.multiprocess:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        merged = CollectorRegistry()
        merged.register(_SizedFiles(os.environ[_ENV]))
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
