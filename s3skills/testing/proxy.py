"""`FaultProxy`: an HTTP/1.1 proxy for S3 endpoints that adds latency and injects faults.

Point an S3 client (`endpoint_url=proxy.url`) at the proxy and the proxy at a
local S3 server. It forwards one request at a time per client connection, with
keep-alive, and can:

- add a fixed latency per request, to imitate S3 round trips in benchmarks;
- answer with an S3 error (503 `SlowDown`, 500 `InternalError`, 403
  `AccessDenied`), reset the connection without answering, or forward the
  request and cut the response body short, for the next N requests or for the
  requests a predicate picks;
- count requests per HTTP method and keep a log of them.

The `Host` header is forwarded unchanged, so SigV4 signatures made for the
proxy's address still verify upstream. Only plain HTTP is spoken.

Example:
    with FaultProxy("http://127.0.0.1:5000") as proxy:
        proxy.inject("slowdown", count=2, match=match_request(method="GET"))
        client = boto3.client("s3", endpoint_url=proxy.url, ...)
        client.get_object(Bucket="b", Key="k")  # two 503s, retried by botocore
        assert proxy.requests["GET"] == 3
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Self, get_args
from urllib.parse import urlsplit

__all__ = [
    "FaultKind",
    "FaultProxy",
    "FaultRule",
    "ProxyRequest",
    "RequestMatcher",
    "RequestRecord",
    "match_request",
]

FaultKind = Literal["slowdown", "internal_error", "access_denied", "reset", "truncate"]
"""What an injected fault does.

- `slowdown`: answer `503 SlowDown` (S3 throttling), without forwarding.
- `internal_error`: answer `500 InternalError`, without forwarding.
- `access_denied`: answer `403 AccessDenied`, without forwarding.
- `reset`: close the client connection with a TCP reset, without forwarding.
- `truncate`: forward the request (upstream acts on it), then send the response
  head and only half of its body (or half of the head when the body is empty),
  and close the connection.
"""

_ERROR_RESPONSES: dict[str, tuple[int, str, str, str]] = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal_error": (500, "Internal Server Error", "InternalError", "We encountered an internal error."),
    "access_denied": (403, "Forbidden", "AccessDenied", "Access Denied"),
}

_MAX_HEAD = 1024 * 1024
# What ends one client connection (and only it): peers gone, timeouts, malformed HTTP.
_BROKEN = (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError)
_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """A request as the proxy saw it, given to match predicates.

    Attributes:
        method: The HTTP method, upper case (`GET`, `PUT`...).
        path: The path, percent-encoded as sent (`/bucket/key`).
        query: The query string without `?` (`list-type=2&prefix=...`).
        headers: The header fields in order, names as sent.
    """

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


RequestMatcher = Callable[[ProxyRequest], bool]
"""A predicate choosing the requests a fault applies to."""


def match_request(
    method: str | Iterable[str] | None = None,
    path: str | None = None,
    query: str | None = None,
) -> RequestMatcher:
    """Build a predicate over requests; every given criterion must hold.

    Args:
        method: A method or several (`"PUT"`, `("GET", "HEAD")`).
        path: A regular expression searched in the path (`r"/notes\\.md$"`).
        query: A regular expression searched in the query string (`"list-type=2"`).

    Returns:
        A function for `FaultProxy.inject(..., match=...)`.
    """
    methods = None if method is None else {method.upper()} if isinstance(method, str) else {m.upper() for m in method}
    path_re = re.compile(path) if path is not None else None
    query_re = re.compile(query) if query is not None else None

    def matcher(request: ProxyRequest) -> bool:
        if methods is not None and request.method not in methods:
            return False
        if path_re is not None and not path_re.search(request.path):
            return False
        return query_re is None or bool(query_re.search(request.query))

    return matcher


@dataclass(slots=True)
class FaultRule:
    """One injected fault: what it does, to which requests, how many more times.

    Returned by `FaultProxy.inject`; read `fired` to see how often it applied.
    """

    kind: FaultKind
    remaining: int | None
    match: RequestMatcher | None = None
    fired: int = 0

    @property
    def exhausted(self) -> bool:
        """True once the rule has fired `count` times (never for `count=None`)."""
        return self.remaining is not None and self.remaining <= 0

    def _applies(self, request: ProxyRequest) -> bool:
        return not self.exhausted and (self.match is None or self.match(request))


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request in the proxy's log, and the fault it met (None: forwarded)."""

    method: str
    path: str
    query: str
    fault: FaultKind | None


@dataclass(slots=True)
class _Message:
    """An HTTP message head plus its raw framed body."""

    head: bytes
    start_line: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    close_delimited: bool = False
    keep_alive: bool = True

    def get(self, name: str) -> str | None:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


class _ClientGoneError(Exception):
    """The client closed its connection between requests."""


class FaultProxy:
    """A loopback HTTP proxy in front of an S3 endpoint, in its own thread.

    Args:
        upstream_url: The S3 endpoint to forward to (`http://127.0.0.1:PORT`).
        latency: Seconds added before each request is answered or forwarded.
        host: The address to listen on.
        port: The port to listen on; 0 picks a free one.
        connect_timeout: Seconds to wait for the upstream connection.
        read_timeout: Seconds to wait for upstream data.
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        latency: float = 0.0,
        host: str = _LOOPBACK,
        port: int = 0,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream_url must be an http:// URL, got {upstream_url!r}")
        if latency < 0:
            raise ValueError("latency must be >= 0")
        self.upstream_url = upstream_url
        self._upstream = (parts.hostname, parts.port or 80)
        self._host = host
        self._port = port
        self._latency = float(latency)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._counts: Counter[str] = Counter()
        self._connections = 0
        self._log: list[RequestRecord] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._startup_error: BaseException | None = None

    def __repr__(self) -> str:
        return f"FaultProxy({self.upstream_url!r}, latency={self._latency!r}, url={self._url_or_none()!r})"

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Self:
        """Start listening (in a daemon thread) and return self.

        Raises:
            RuntimeError: Already started, or the listener could not be opened.
        """
        if self._thread is not None:
            raise RuntimeError("FaultProxy is already started")
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._main(ready))
            except BaseException as exc:  # reported to start()
                self._startup_error = exc
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="s3skills-fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout=30) or self._startup_error is not None:
            self.stop()
            raise RuntimeError(f"FaultProxy could not start: {self._startup_error!r}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listener and every connection, then end the thread. Idempotent."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or loop is None:
            return
        if stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _url_or_none(self) -> str | None:
        return f"http://{self._host}:{self._port}" if self._port else None

    @property
    def url(self) -> str:
        """The proxy's endpoint URL, for `endpoint_url=` (after `start`)."""
        url = self._url_or_none()
        if url is None or self._thread is None:
            raise RuntimeError("FaultProxy is not started")
        return url

    @property
    def port(self) -> int:
        """The port the proxy listens on (after `start`)."""
        return int(urlsplit(self.url).port or 0)

    # -- configuration --------------------------------------------------------------------

    @property
    def latency(self) -> float:
        """Seconds added to every request; can be changed while running."""
        return self._latency

    @latency.setter
    def latency(self, value: float) -> None:
        if value < 0:
            raise ValueError("latency must be >= 0")
        self._latency = float(value)

    def inject(self, kind: FaultKind, count: int | None = 1, match: RequestMatcher | None = None) -> FaultRule:
        """Apply a fault to the next `count` requests (that `match` accepts).

        Rules are tried in the order they were injected; the first one that applies
        fires and the request gets no other fault.

        Args:
            kind: What to do (see `FaultKind`).
            count: How many requests to affect; None for every one until
                `clear_faults`.
            match: Only requests this predicate accepts (see `match_request`).

        Returns:
            The rule, whose `fired` counts the requests it affected.
        """
        if kind not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {kind!r}; use one of {get_args(FaultKind)}")
        if count is not None and count < 0:
            raise ValueError("count must be >= 0 or None")
        rule = FaultRule(kind=kind, remaining=count, match=match)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self._lock:
            self._rules.clear()

    # -- observation ------------------------------------------------------------------------

    @property
    def requests(self) -> Counter[str]:
        """Requests received per HTTP method, faulted ones included (a snapshot)."""
        with self._lock:
            return Counter(self._counts)

    @property
    def total_requests(self) -> int:
        """Every request received so far."""
        with self._lock:
            return sum(self._counts.values())

    @property
    def connections(self) -> int:
        """Client connections accepted so far (keep-alive makes this much smaller than requests)."""
        with self._lock:
            return self._connections

    @property
    def history(self) -> list[RequestRecord]:
        """Every request received, in order, with the fault it met (a snapshot)."""
        with self._lock:
            return list(self._log)

    def reset_counts(self) -> None:
        """Forget the counts, the connection count and the history (faults stay)."""
        with self._lock:
            self._counts.clear()
            self._log.clear()
            self._connections = 0

    def _record(self, request: ProxyRequest) -> FaultKind | None:
        with self._lock:
            fault: FaultKind | None = None
            for rule in self._rules:
                if rule._applies(request):
                    rule.fired += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    fault = rule.kind
                    break
            self._counts[request.method] += 1
            self._log.append(RequestRecord(request.method, request.path, request.query, fault))
            return fault

    # -- the server ---------------------------------------------------------------------------

    async def _main(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, self._host, self._port, limit=_MAX_HEAD)
        self._port = int(server.sockets[0].getsockname()[1])
        ready.set()
        async with server:
            await self._stopping.wait()
            server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            handlers = list(self._handlers)
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        self._writers.add(writer)
        with self._lock:
            self._connections += 1
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    request = await _read_request(reader, writer)
                except _ClientGoneError:
                    return
                info = _request_info(request)
                fault = self._record(info)
                if self._latency:
                    await asyncio.sleep(self._latency)
                if fault == "reset":
                    _reset(writer)
                    return
                if fault in _ERROR_RESPONSES:
                    writer.write(_error_response(fault, info.method, request.keep_alive))
                    await writer.drain()
                    if not request.keep_alive:
                        return
                    continue
                response, upstream = await self._forward(request, info.method, upstream)
                if not response.keep_alive or response.close_delimited:
                    _close(upstream)  # the upstream's own connection ends; the client's need not
                    upstream = None
                head = _client_head(response, info.method, request.keep_alive)
                if fault == "truncate":
                    body = response.body
                    writer.write(head + body[: len(body) // 2] if body else head[: len(head) // 2])
                    await writer.drain()
                    writer.transport.abort()
                    return
                writer.write(head + response.body)
                await writer.drain()
                if not request.keep_alive:
                    return
        except _BROKEN:
            writer.transport.abort()  # a broken client or upstream: drop this connection only
        except asyncio.CancelledError:
            # Only `stop()` cancels handlers. Ending normally keeps asyncio's stream callback
            # from logging the cancellation as an unhandled error.
            writer.transport.abort()
        finally:
            _close(upstream)
            self._writers.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _forward(
        self,
        request: _Message,
        method: str,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
    ) -> tuple[_Message, tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """Send `request` upstream and read the whole response.

        A kept-alive upstream connection that turns out closed is replaced once.
        """
        for attempt in range(2):
            reused = upstream is not None
            if upstream is None:
                upstream = await asyncio.wait_for(
                    asyncio.open_connection(*self._upstream, limit=_MAX_HEAD), self._connect_timeout
                )
            up_reader, up_writer = upstream
            try:
                up_writer.write(request.head + request.body)
                await up_writer.drain()
                response = await asyncio.wait_for(_read_response(up_reader, method), self._read_timeout)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                _close(upstream)
                upstream = None
                partial = isinstance(exc, asyncio.IncompleteReadError) and bool(exc.partial)
                if reused and attempt == 0 and not partial:
                    continue
                raise
            return response, upstream
        raise ConnectionError("upstream closed the connection")  # pragma: no cover - loop returns or raises


# -- HTTP/1.1 framing ------------------------------------------------------------------------------


def _parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line!r}")
        headers.append((name.strip(), value.strip()))
    return lines[0], headers


def _keep_alive(version: str, connection: str | None) -> bool:
    tokens = {t.strip().lower() for t in (connection or "").split(",")}
    if version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    # Tolerate stray blank lines between messages (RFC 9112 section 2.2).
    return head.lstrip(b"\r\n")


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """Read a chunked body and return it still framed, trailers included."""
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        parts.append(size_line)
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while True:
                trailer = await reader.readuntil(b"\r\n")
                parts.append(trailer)
                if trailer == b"\r\n":
                    return b"".join(parts)
        parts.append(await reader.readexactly(size + 2))


async def _read_body(reader: asyncio.StreamReader, message: _Message) -> None:
    encoding = (message.get("Transfer-Encoding") or "").lower()
    if "chunked" in encoding:
        message.body = await _read_chunked(reader)
    elif (length := message.get("Content-Length")) is not None:
        message.body = await reader.readexactly(int(length))


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Message:
    try:
        head = await _read_head(reader)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            raise _ClientGoneError from None
        raise
    start_line, headers = _parse_head(head)
    parts = start_line.split(" ")
    if len(parts) != 3:
        raise ValueError(f"malformed request line {start_line!r}")
    message = _Message(head, start_line, headers)
    message.keep_alive = _keep_alive(parts[2], message.get("Connection"))
    if (message.get("Expect") or "").lower() == "100-continue":
        # Answer the interim response here and drop the header upstream, so the
        # upstream never sends a 100 of its own.
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
        message.head = _build_head(start_line, [(k, v) for k, v in headers if k.lower() != "expect"])
    await _read_body(reader, message)
    return message


async def _read_response(reader: asyncio.StreamReader, method: str) -> _Message:
    while True:
        head = await _read_head(reader)
        start_line, headers = _parse_head(head)
        parts = start_line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ValueError(f"malformed status line {start_line!r}")
        status = int(parts[1])
        if 100 <= status < 200 and status != 101:
            continue  # interim responses are not forwarded (the proxy answered 100 itself)
        break
    message = _Message(head, start_line, headers)
    message.keep_alive = _keep_alive(parts[0], message.get("Connection"))
    if method == "HEAD" or status in (204, 304):
        return message
    encoding = (message.get("Transfer-Encoding") or "").lower()
    if "chunked" in encoding or message.get("Content-Length") is not None:
        await _read_body(reader, message)
    else:
        message.body = await reader.read()  # delimited by the connection's end
        message.close_delimited = True
    return message


def _build_head(start_line: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [start_line, *(f"{k}: {v}" for k, v in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection"})


def _client_head(response: _Message, method: str, keep_alive: bool) -> bytes:
    """The response head for the client: connection management is per hop.

    The upstream may close after every response (moto does); the client's connection stays
    open unless the client asked otherwise. A body delimited by the upstream closing gets a
    Content-Length, since the client's connection does not close.
    """
    headers = [(k, v) for k, v in response.headers if k.lower() not in _HOP_BY_HOP]
    if response.close_delimited and method != "HEAD":
        headers.append(("Content-Length", str(len(response.body))))
    headers.append(("Connection", "keep-alive" if keep_alive else "close"))
    return _build_head(response.start_line, headers)


def _request_info(request: _Message) -> ProxyRequest:
    method, target, _ = request.start_line.split(" ")
    if target.startswith(("http://", "https://")):  # absolute form
        split = urlsplit(target)
        path, query = split.path or "/", split.query
    else:
        path, _, query = target.partition("?")
    return ProxyRequest(method.upper(), path, query, tuple(request.headers))


def _error_response(kind: str, method: str, keep_alive: bool) -> bytes:
    status, reason, code, text = _ERROR_RESPONSES[kind]
    request_id = uuid.uuid4().hex[:16].upper()
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{text}</Message>"
        f"<RequestId>{request_id}</RequestId></Error>"
    ).encode()
    headers = [
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", request_id),
        ("Connection", "keep-alive" if keep_alive else "close"),
    ]
    head = _build_head(f"HTTP/1.1 {status} {reason}", headers)
    return head if method == "HEAD" else head + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0) rather than FIN: the client sees a reset."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _close(
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
) -> None:
    if upstream is not None:
        upstream[1].transport.abort()
