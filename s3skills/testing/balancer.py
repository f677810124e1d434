"""`RoundRobinProxy`: a tiny HTTP/1.1 load balancer on loopback, for tests of server replicas.

Each request goes to the next upstream in turn (a new upstream connection per request,
with `Connection: close` both ways), so a client that talks to the proxy meets every
replica, request after request. Headers can be added to every forwarded request (a bearer
token for a client that cannot send one, such as the MCP conformance suite). The response
is relayed as it arrives (JSON or an event stream) until the upstream closes.

Only what tests need: request bodies framed by `Content-Length` (no chunked uploads),
plain HTTP, loopback upstreams.

Example:
    with RoundRobinProxy(["http://127.0.0.1:8001", "http://127.0.0.1:8002"]) as proxy:
        httpx.post(proxy.url + "/mcp", ...)   # answered by 8001, the next one by 8002
        assert proxy.forwarded == [1, 1]
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping, Sequence
from typing import Self
from urllib.parse import urlsplit

from s3skills.testing._base import Stoppable

__all__ = ["RoundRobinProxy"]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"}


class RoundRobinProxy(Stoppable):
    """A loopback HTTP proxy that spreads requests over upstreams in turn, in its own thread.

    Args:
        upstreams: `http://HOST:PORT` of each replica (at least one).
        headers: Headers set on every forwarded request (replacing the client's).
        host: The address to listen on (loopback).
        port: The port; 0 picks a free one.

    Raises:
        ValueError: No upstream, or one that is not an `http://` URL.
        RuntimeError: The listener could not be opened.
    """

    def __init__(
        self,
        upstreams: Sequence[str],
        *,
        headers: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if not upstreams:
            raise ValueError("RoundRobinProxy needs at least one upstream")
        self._targets: list[tuple[str, int]] = []
        for url in upstreams:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname or not parts.port:
                raise ValueError(f"an upstream must be http://HOST:PORT, got {url!r}")
            self._targets.append((parts.hostname, parts.port))
        self._headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        self._host, self._port = host, port
        self._next = 0
        self.forwarded = [0] * len(self._targets)
        """Requests forwarded to each upstream, in the order given."""
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="s3skills-round-robin", daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            self.stop()
            raise RuntimeError(f"RoundRobinProxy could not start: {self._error!r}")

    def __enter__(self) -> Self:
        return self

    @property
    def url(self) -> str:
        """`http://HOST:PORT` of the proxy."""
        return f"http://{self._host}:{self._port}"

    def stop(self) -> None:
        """Close the listener and end the thread. Idempotent."""
        if self._stopping is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to the constructor
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, self._host, self._port, limit=_MAX_HEAD)
        self._port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        async with server:
            await self._stopping.wait()
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _pick(self) -> int:
        index = self._next
        self._next = (self._next + 1) % len(self._targets)
        self.forwarded[index] += 1
        return index

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._relay(reader, writer)
        except asyncio.CancelledError:  # stop(): end quietly
            writer.transport.abort()
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
            if task is not None:
                self._tasks.discard(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head[:-4].split(b"\r\n")
            headers = [(name.strip().lower(), value.strip()) for name, _, value in (ln.partition(b":") for ln in lines)]
            if any(n == b"transfer-encoding" for n, _ in headers):
                writer.write(b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            length = int(next((v for n, v in headers if n == b"content-length"), b"0"))
            if not 0 <= length <= _MAX_BODY:
                raise ValueError("bad Content-Length")
            body = await reader.readexactly(length)
            replaced = {n for n, _ in self._headers}
            kept = [(n, v) for n, v in headers if n not in _HOP and n not in replaced]
            out = [request_line, *(n + b": " + v for n, v in [*kept, *self._headers]), b"Connection: close"]
            host, port = self._targets[self._pick()]
            up_reader, up_writer = await asyncio.open_connection(host, port)
            try:
                up_writer.write(b"\r\n".join(out) + b"\r\n\r\n" + body)
                await up_writer.drain()
                while chunk := await up_reader.read(65536):
                    writer.write(chunk)
                    await writer.drain()
            finally:
                up_writer.close()
                with contextlib.suppress(OSError):
                    await up_writer.wait_closed()
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.transport.abort()
