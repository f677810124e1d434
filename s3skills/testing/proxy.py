"""`FaultProxy`: an HTTP/1.1 proxy for S3 endpoints that adds latency and injects faults.

Point an S3 client (`endpoint_url=proxy.url`) at the proxy and the proxy at a
local S3 server. It forwards one request at a time per client connection, with
keep-alive, streaming bodies both ways (HTTP framing by h11), and can:

- add a fixed latency per request, to imitate S3 round trips in benchmarks;
- answer with an S3 error (503 `SlowDown`, 500 `InternalError`, 403
  `AccessDenied`), reset the connection without answering, or forward the
  request and cut the response body short, for the next N requests or for the
  requests a predicate picks (see `s3skills.testing.faults`);
- count requests per HTTP method and keep a log of them.

The `Host` header is forwarded unchanged, so SigV4 signatures made for the
proxy's address still verify upstream. Only plain HTTP is spoken. The proxy
answers `Expect: 100-continue` itself. Connection management is per hop: a body
that upstream delimits by closing its connection reaches an HTTP/1.1 client
chunked, on a connection that stays open. HTTP/1.0 clients get one request per
connection. A client that breaks HTTP/1.1 gets a 400; one that disappears
mid-request has its upstream request aborted too, so upstream never acts on a
partial body.

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
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Self
from urllib.parse import urlsplit

import h11

from s3skills.testing._base import Stoppable
from s3skills.testing._wire import MAX_HEAD, Peer, client_response, proxy_request, reset, upstream_request
from s3skills.testing.faults import (
    FaultBook,
    FaultKind,
    FaultRule,
    ProxyRequest,
    RequestMatcher,
    RequestRecord,
    answers_without_forwarding,
    error_response,
    match_request,
)

__all__ = [
    "FaultKind",
    "FaultProxy",
    "FaultRule",
    "ProxyRequest",
    "RequestMatcher",
    "RequestRecord",
    "match_request",
]

# What ends one client connection (and only it): peers gone, timeouts, broken HTTP.
_BROKEN = (OSError, TimeoutError, h11.ProtocolError)
_LOOPBACK = "127.0.0.1"
# A request body up to this size is kept while it is sent, so that it can be sent again
# on a fresh connection when a kept-alive upstream connection turns out to be closed.
_REPLAY_LIMIT = 1024 * 1024


class FaultProxy(Stoppable):
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
        netloc = parts.netloc.encode("latin-1")
        self._target = _Target(parts.hostname, parts.port or 80, netloc, connect_timeout, read_timeout)
        self._host = host
        self._port = port
        self._latency = float(latency)
        self._book = FaultBook()
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
        return self._book.add(kind, count, match)

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        self._book.clear()

    # -- observation ------------------------------------------------------------------------

    @property
    def requests(self) -> Counter[str]:
        """Requests received per HTTP method, faulted ones included (a snapshot)."""
        return self._book.counts()

    @property
    def total_requests(self) -> int:
        """Every request received so far."""
        return sum(self._book.counts().values())

    @property
    def connections(self) -> int:
        """Client connections accepted so far (keep-alive makes this much smaller than requests)."""
        return self._book.connections()

    @property
    def open_connections(self) -> int:
        """Client connections open now; a connection's upstream side is closed before it leaves this count."""
        return self._book.open_connections()

    @property
    def history(self) -> list[RequestRecord]:
        """Every request received, in order, with the fault it met (a snapshot)."""
        return self._book.history()

    def reset_counts(self) -> None:
        """Forget the counts, the connection count and the history (faults stay)."""
        self._book.reset()

    # -- the server ---------------------------------------------------------------------------

    async def _main(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, self._host, self._port, limit=MAX_HEAD)
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
        self._book.connected()
        relay = _Relay(Peer(h11.SERVER, reader, writer), self._target)
        try:
            while await self._exchange(relay):
                pass
        except _BROKEN:
            relay.client.abort()  # a broken client or upstream: drop this connection only
        except asyncio.CancelledError:
            # Only `stop()` cancels handlers. Ending normally keeps asyncio's stream callback
            # from logging the cancellation as an unhandled error.
            relay.client.abort()
        finally:
            relay.close_upstream()
            self._book.disconnected()
            self._writers.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _exchange(self, relay: _Relay) -> bool:
        """Serve one request on `relay`'s client connection; False when the connection ends."""
        try:
            event = await relay.client.next_event()
        except h11.RemoteProtocolError as exc:
            await relay.refuse(exc)
            return False
        if isinstance(event, h11.ConnectionClosed):
            return False
        assert isinstance(event, h11.Request), event
        info = proxy_request(event)
        fault = self._book.record(info)
        if self._latency:
            await asyncio.sleep(self._latency)
        if fault == "reset":
            reset(relay.client.writer)
            return False
        if fault is not None and answers_without_forwarding(fault):
            await relay.answer_error(fault, info.method)
        elif not await relay.forward(event, truncate=fault == "truncate"):
            return False
        return relay.client.next_cycle()


@dataclass(frozen=True, slots=True)
class _Target:
    """Where and how to reach upstream."""

    host: str
    port: int
    host_header: bytes
    connect_timeout: float
    read_timeout: float


class _UpstreamClosedError(ConnectionError):
    """Upstream closed its connection before answering."""


class _Relay:
    """One client connection and the upstream connection that serves it (kept alive when it can be)."""

    def __init__(self, client: Peer, target: _Target) -> None:
        self.client = client
        self.target = target
        self.upstream: Peer | None = None
        self.reused = False  # the upstream connection already served a request

    def close_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.abort()
            self.upstream = None

    async def _connect(self) -> Peer:
        self.close_upstream()
        target = self.target
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(target.host, target.port, limit=MAX_HEAD), target.connect_timeout
        )
        self.upstream = Peer(h11.CLIENT, reader, writer)
        self.reused = False
        return self.upstream

    async def refuse(self, exc: h11.RemoteProtocolError) -> None:
        """Answer a request that breaks HTTP/1.1 with an error status, when one can still be sent."""
        if self.client.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            self.client.abort()
            return
        body = f"Bad request: {exc}\n".encode()
        headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body))), ("Connection", "close")]
        await self.client.send(
            h11.Response(status_code=exc.error_status_hint, headers=headers), h11.Data(data=body), h11.EndOfMessage()
        )

    async def _continue(self) -> None:
        if self.client.conn.they_are_waiting_for_100_continue:
            await self.client.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"))

    async def answer_error(self, kind: FaultKind, method: str) -> None:
        """Read the request body (to keep the connection usable) and answer with `kind`'s S3 error."""
        await self._continue()
        while not isinstance(await self.client.next_event(), h11.EndOfMessage):
            pass
        status, reason, headers, body = error_response(kind)
        events: list[h11.Event] = [h11.Response(status_code=status, reason=reason, headers=headers)]
        if method != "HEAD":
            events.append(h11.Data(data=body))
        await self.client.send(*events, h11.EndOfMessage())

    async def forward(self, request: h11.Request, *, truncate: bool) -> bool:
        """Stream `request` upstream and its response back; False when the client connection ended.

        With `truncate`, the response is read whole, then the client gets its head and half
        of its body (or half of the head when there is no body), and is disconnected.
        """
        if self.upstream is None:
            await self._connect()
        # Kept for a resend while it is small; None once it is too big to keep.
        sent: list[h11.Event] | None = []
        kept = 0
        await self._continue()
        event: h11.Event = upstream_request(request, self.target.host_header)
        while True:
            if sent is not None:
                kept += len(event.data) if isinstance(event, h11.Data) else 0
                if kept <= _REPLAY_LIMIT:
                    sent.append(event)
                else:
                    sent = None
            await self._send_upstream(event, sent)
            if isinstance(event, h11.EndOfMessage):
                break
            event = await self.client.next_event()
        response = await self._response(sent)
        upstream = self.upstream
        assert upstream is not None
        head = client_response(response)
        if truncate:
            body = bytearray()
            while isinstance(part := await upstream.next_event(self.target.read_timeout), h11.Data):
                body += part.data
            self._end_upstream_cycle()
            head_bytes = self.client.frame(head)
            framed = self.client.frame(h11.Data(data=bytes(body))) if body else b""
            self.client.writer.write(
                head_bytes + framed[: len(framed) // 2] if framed else head_bytes[: len(head_bytes) // 2]
            )
            await self.client.writer.drain()
            self.client.abort()
            return False
        await self.client.send(head)
        while True:
            part = await upstream.next_event(self.target.read_timeout)
            if isinstance(part, h11.Data):
                await self.client.send(part)
            elif isinstance(part, h11.EndOfMessage):
                # Trailers exist only in chunked bodies, which HTTP/1.0 clients do not get.
                chunked = (self.client.conn.their_http_version or b"1.0") >= b"1.1"
                await self.client.send(h11.EndOfMessage(headers=part.headers if chunked else []))
                break
        self._end_upstream_cycle()
        return True

    async def _send_upstream(self, event: h11.Event, sent: list[h11.Event] | None) -> None:
        """Send `event`; on a kept-alive connection found closed, resend `sent` on a new one."""
        upstream = self.upstream
        assert upstream is not None
        try:
            await upstream.send(event)
        except OSError:
            if not (self.reused and sent is not None):
                raise
            await (await self._connect()).send(*sent)

    async def _response(self, sent: list[h11.Event] | None) -> h11.Response:
        """The upstream's final response head (interim 1xx answers are skipped).

        A kept-alive connection that closes before answering anything is replaced once, and
        the request sent again, when all of it was kept.
        """
        while True:
            upstream = self.upstream
            assert upstream is not None
            try:
                event = await upstream.next_event(self.target.read_timeout)
                if isinstance(event, h11.ConnectionClosed):
                    raise _UpstreamClosedError("upstream closed the connection before answering")
            except (OSError, h11.RemoteProtocolError):
                if not (self.reused and sent is not None and upstream.received == 0):
                    raise
                await (await self._connect()).send(*sent)
                continue
            if isinstance(event, h11.Response):
                return event

    def _end_upstream_cycle(self) -> None:
        upstream = self.upstream
        if upstream is not None and upstream.next_cycle():
            self.reused = True
        else:
            self.close_upstream()
