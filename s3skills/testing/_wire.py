"""HTTP/1.1 framing for `FaultProxy`: h11 connections driven over asyncio streams.

h11 parses and frames; this module only moves bytes between it and the sockets, and
decides which header fields cross the proxy (connection management is per hop).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Sequence
from urllib.parse import urlsplit

import h11

from s3skills.testing.faults import ProxyRequest

__all__ = ["Peer", "client_response", "proxy_request", "reset", "upstream_request"]

READ_SIZE = 64 * 1024
MAX_HEAD = 1024 * 1024

# Per-hop fields: never forwarded in either direction (RFC 9110 section 7.6.1). h11 adds
# its own `Connection: close` where the hop needs it, and frames each hop itself.
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"upgrade"})


class Peer:
    """One side of the proxy: an h11 state machine over an asyncio stream pair.

    Args:
        role: `h11.SERVER` facing the S3 client, `h11.CLIENT` facing upstream.
        reader: The stream to read from.
        writer: The stream to write to.
    """

    def __init__(
        self, role: type[h11.CLIENT] | type[h11.SERVER], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.conn = h11.Connection(role, max_incomplete_event_size=MAX_HEAD)
        self.reader = reader
        self.writer = writer
        self.received = 0  # bytes read in the current request/response cycle

    async def next_event(self, seconds: float | None = None) -> h11.Event:
        """The next event from the peer, reading as needed (EOF is given to h11 as such).

        Raises:
            h11.RemoteProtocolError: The peer broke HTTP/1.1, or closed mid-message.
            TimeoutError: No data within `seconds` (None: wait as long as it takes).
        """
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                if event is h11.PAUSED:  # a pipelined message waits for our answer
                    raise h11.LocalProtocolError("read past the end of a message cycle")
                assert isinstance(event, h11.Event)
                return event
            if seconds is None:
                data = await self.reader.read(READ_SIZE)
            else:
                data = await asyncio.wait_for(self.reader.read(READ_SIZE), seconds)
            self.received += len(data)
            self.conn.receive_data(data)

    def frame(self, *events: h11.Event) -> bytes:
        """Serialize `events` (h11 checks they are valid in the current state)."""
        return b"".join(self.conn.send(event) or b"" for event in events)

    async def send(self, *events: h11.Event) -> None:
        """Write `events` and wait until the transport's buffer drains."""
        self.writer.write(self.frame(*events))
        await self.writer.drain()

    def next_cycle(self) -> bool:
        """Start the next request/response cycle; False when the connection must close."""
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
            self.received = 0
            return True
        return False

    def abort(self) -> None:
        """Drop the connection at once (no FIN handshake wait)."""
        self.writer.transport.abort()


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def proxy_request(request: h11.Request) -> ProxyRequest:
    """The request as match predicates see it: method, path, query, headers as sent."""
    target = _text(request.target)
    if target.startswith(("http://", "https://")):  # absolute form
        split = urlsplit(target)
        path, query = split.path or "/", split.query
    else:
        path, _, query = target.partition("?")
    headers = tuple((_text(name), _text(value)) for name, value in _raw(request.headers))
    return ProxyRequest(_text(request.method).upper(), path, query, headers)


def _raw(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Header fields with their names as sent (h11 lower-cases them when iterated)."""
    raw_items = getattr(headers, "raw_items", None)
    return list(raw_items()) if raw_items is not None else list(headers)


def upstream_request(request: h11.Request, host: bytes) -> h11.Request:
    """The request to send upstream.

    Headers are forwarded as sent (so SigV4 signatures still verify), less the per-hop
    ones and `Expect`: the proxy answers `100 Continue` itself, so upstream never sends one.
    A `Content-Length` beside `Transfer-Encoding` is dropped (chunked framing wins, and
    forwarding both invites request smuggling); a missing `Host` (HTTP/1.0) is added.
    """
    chunked = any(name.lower() == b"transfer-encoding" for name, _ in _raw(request.headers))
    dropped = _HOP_BY_HOP | {b"expect"} | ({b"content-length"} if chunked else set())
    headers = [(name, value) for name, value in _raw(request.headers) if name.lower() not in dropped]
    if not any(name.lower() == b"host" for name, _ in headers):
        headers.insert(0, (b"Host", host))
    return h11.Request(method=request.method, target=request.target, headers=headers)


def client_response(response: h11.Response) -> h11.Response:
    """The upstream's response for the client, less the per-hop header fields.

    The framing (`Content-Length` or chunked) is kept when the client can take it; a body
    upstream delimited by closing its connection goes out chunked, so the client's
    connection stays open (h11 picks the framing for each hop).
    """
    headers = [(name, value) for name, value in _raw(response.headers) if name.lower() not in _HOP_BY_HOP]
    return h11.Response(status_code=response.status_code, headers=headers, reason=response.reason)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0) rather than FIN: the peer sees a connection reset."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
