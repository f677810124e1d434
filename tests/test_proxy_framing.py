"""HTTP/1.1 framing through `FaultProxy`, on the wire: what reaches moto and what comes back.

Requests are written byte for byte to the proxy's socket (moto behind it does not check
signatures), so each case pins one framing edge: chunked bodies with extensions and
trailers, aws-chunked payloads as botocore frames them, `Expect: 100-continue`,
pipelining, HTTP/1.0, malformed requests, and clients that vanish mid-body. Stored
objects are read back from moto directly, not through the proxy.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
import zlib
from base64 import b64encode
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum

from s3skills.testing import FaultProxy, ProxyRequest, SeaweedBucket, make_client

LOOPBACK = "127.0.0.1"


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_endpoint) as running:
        yield running


class _Kept:
    """The connection's one buffered reader, which each `http.client.HTTPResponse` may not close."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def close(self) -> None:
        pass


class Wire:
    """A raw client connection to the proxy: write bytes, read whole responses in order."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((LOOPBACK, port), timeout=10)
        self.file = self.sock.makefile("rb")

    def makefile(self, *_: Any, **__: Any) -> Any:  # what http.client.HTTPResponse reads from
        return _Kept(self.file)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def interim(self) -> bytes:
        """The next status line, for `100 Continue` (with its blank line)."""
        line = self.file.readline()
        assert self.file.readline() == b"\r\n"
        return line

    def response(self, method: str = "GET") -> tuple[int, http.client.HTTPMessage, bytes]:
        answer = http.client.HTTPResponse(self, method=method)  # type: ignore[arg-type]
        answer.begin()
        return answer.status, answer.headers, answer.read()

    def closed_by_peer(self) -> bool:
        return self.file.read() == b""

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture
def wire(proxy: FaultProxy) -> Iterator[Wire]:
    connection = Wire(proxy.port)
    yield connection
    connection.close()


def signed(method: str, proxy: FaultProxy, path: str, version: str = "1.1") -> bytes:
    """A body-less request for `path`, signed (moto refuses anonymous reads) for the proxy's address."""
    request = AWSRequest(method=method, url=f"{proxy.url}{path}")
    S3SigV4Auth(Credentials("testing", "testing"), "s3", "us-east-1").add_auth(request)
    host = "" if version == "1.0" else f"Host: {LOOPBACK}:{proxy.port}\r\n"
    head = "".join(f"{name}: {value}\r\n" for name, value in request.headers.items())
    return f"{method} {path} HTTP/{version}\r\n{host}{head}\r\n".encode()


def stored(s3_client: Any, bucket: str, key: str) -> bytes | None:
    try:
        return bytes(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as exc:
        if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
            return None
        raise


def wait_until_closed(proxy: FaultProxy) -> None:
    """Wait (bounded) until the proxy has closed every client connection, upstream sides first."""
    deadline = time.monotonic() + 10
    while proxy.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.open_connections == 0


def aws_chunked(payload: bytes, chunk_size: int) -> bytes:
    """`payload` framed as botocore frames a trailer-checksummed upload (aws-chunked)."""
    return bytes(AwsChunkedWrapper(io.BytesIO(payload), Crc32Checksum, "x-amz-checksum-crc32", chunk_size).read())


def crc32_header(payload: bytes) -> str:
    return b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()


PAYLOAD = b"The quick brown fox jumps over the lazy dog.\n" * 40

# (id, extra header lines, framed body, what upstream must store)
REQUEST_BODIES = [
    ("content-length", f"Content-Length: {len(PAYLOAD)}\r\n", PAYLOAD, PAYLOAD),
    (
        "chunked",
        "Transfer-Encoding: chunked\r\n",
        b"5\r\nhello\r\n1\r\n \r\n6\r\nchunks\r\n0\r\n\r\n",
        b"hello chunks",
    ),
    (
        "chunked-upper-hex-and-extensions",
        "Transfer-Encoding: chunked\r\n",
        b"A;name=value\r\n0123456789\r\n1;x\r\n!\r\n0\r\n\r\n",
        b"0123456789!",
    ),
    (
        "chunked-and-content-length",  # chunked framing wins; the stale length is not forwarded
        "Transfer-Encoding: chunked\r\nContent-Length: 999\r\n",
        b"3\r\nabc\r\n0\r\n\r\n",
        b"abc",
    ),
    (
        "aws-chunked-in-chunked",
        "Transfer-Encoding: chunked\r\nContent-Encoding: aws-chunked\r\n"
        "x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\n"
        f"x-amz-decoded-content-length: {len(PAYLOAD)}\r\nx-amz-trailer: x-amz-checksum-crc32\r\n",
        b"".join(
            f"{len(part):x}\r\n".encode() + part + b"\r\n"
            for part in (aws_chunked(PAYLOAD, 512)[i : i + 700] for i in range(0, len(aws_chunked(PAYLOAD, 512)), 700))
        )
        + b"0\r\n\r\n",
        PAYLOAD,
    ),
]


@pytest.mark.parametrize(
    ("headers", "body", "expected"), [case[1:] for case in REQUEST_BODIES], ids=[case[0] for case in REQUEST_BODIES]
)
def test_request_bodies_reach_upstream_whole(
    proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any, headers: str, body: bytes, expected: bytes
) -> None:
    wire.send(f"PUT /{bucket}/k HTTP/1.1\r\nHost: {LOOPBACK}:{proxy.port}\r\n{headers}\r\n".encode() + body)

    status, _, _ = wire.response("PUT")

    assert status == 200
    assert stored(s3_client, bucket, "k") == expected


@pytest.mark.seaweedfs
def test_chunked_trailers_are_forwarded_and_upstream_connections_reused(seaweed_bucket: SeaweedBucket) -> None:
    # moto (werkzeug) refuses HTTP trailers; SeaweedFS (Go) takes them and keeps connections alive.
    sw = seaweed_bucket
    with FaultProxy(sw.endpoint_url) as proxy:
        wire = Wire(proxy.port)
        try:
            for key in ("one", "two"):
                request = AWSRequest(method="PUT", url=f"{proxy.url}/{sw.bucket}/{key}", data=b"body")
                S3SigV4Auth(Credentials(sw.access_key, sw.secret_key), "s3", "us-east-1").add_auth(request)
                head = f"Host: {LOOPBACK}:{proxy.port}\r\n" + "".join(
                    f"{name}: {value}\r\n" for name, value in request.headers.items()
                )
                framing = "Transfer-Encoding: chunked\r\nTrailer: x-note\r\n"
                wire.send(
                    f"PUT /{sw.bucket}/{key} HTTP/1.1\r\n{head}{framing}\r\n".encode()
                    + b"4\r\nbody\r\n0\r\nx-note: kept\r\n\r\n"
                )
                assert wire.response("PUT")[0] == 200
        finally:
            wire.close()
        reader = make_client(sw.endpoint_url, access_key=sw.access_key, secret_key=sw.secret_key)
        try:
            assert [reader.get_object(Bucket=sw.bucket, Key=k)["Body"].read() for k in ("one", "two")] == [b"body"] * 2
        finally:
            reader.close()
        assert proxy.connections == 1


def test_boto3_aws_chunked_uploads_with_trailer_checksums_are_stored(
    proxy: FaultProxy, bucket: str, s3_client: Any
) -> None:
    # botocore uses aws-chunked with a trailing checksum only over TLS; ask for it as it does
    # there, so that the upload is framed exactly as it is against AWS.
    seen: list[ProxyRequest] = []
    client = make_client(proxy.url)

    def use_trailer(params: dict[str, Any], **_: Any) -> None:
        params["context"]["checksum"]["request_algorithm"]["in"] = "trailer"

    client.meta.events.register("before-call.s3.PutObject", use_trailer)
    proxy.inject("reset", count=None, match=lambda request: seen.append(request) and False)
    body = bytes(range(256)) * 12_000  # 3 MB: past the proxy's resend buffer, streamed through

    client.put_object(Bucket=bucket, Key="big.bin", Body=io.BytesIO(body), ChecksumAlgorithm="CRC32")
    client.close()

    (put,) = seen
    assert put.header("Content-Encoding") == "aws-chunked"
    assert put.header("Transfer-Encoding") == "chunked"
    assert put.header("x-amz-trailer") == "x-amz-checksum-crc32"
    assert stored(s3_client, bucket, "big.bin") == body
    head = s3_client.head_object(Bucket=bucket, Key="big.bin", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == crc32_header(body)


def test_expect_100_continue_is_answered_before_the_body_is_sent(
    proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any
) -> None:
    wire.send(
        f"PUT /{bucket}/k HTTP/1.1\r\nHost: {LOOPBACK}\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n".encode()
    )

    assert wire.interim() == b"HTTP/1.1 100 Continue\r\n"
    wire.send(b"body")
    status, _, _ = wire.response("PUT")

    assert status == 200
    assert stored(s3_client, bucket, "k") == b"body"


def test_a_faulted_expect_100_continue_request_keeps_the_connection_usable(
    proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any
) -> None:
    proxy.inject("slowdown", count=1)
    head = f"PUT /{bucket}/k HTTP/1.1\r\nHost: {LOOPBACK}\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"

    wire.send(head.encode())
    assert wire.interim() == b"HTTP/1.1 100 Continue\r\n"
    wire.send(b"lost")
    first, _, error = wire.response("PUT")
    wire.send(head.encode())
    assert wire.interim() == b"HTTP/1.1 100 Continue\r\n"
    wire.send(b"kept")
    second, _, _ = wire.response("PUT")

    assert (first, second) == (503, 200)
    assert b"<Code>SlowDown</Code>" in error
    assert stored(s3_client, bucket, "k") == b"kept"
    assert proxy.connections == 1


@pytest.mark.parametrize(
    ("framing", "partial"),
    [
        ("Content-Length: 100\r\n", b"only part of the body"),
        ("Transfer-Encoding: chunked\r\n", b"14\r\nonly part of the body\r\n"),  # no terminating 0 chunk
        ("Transfer-Encoding: chunked\r\n", b"64\r\nhalf a chun"),
    ],
    ids=["content-length", "chunked-between-chunks", "chunked-inside-a-chunk"],
)
def test_a_client_closing_mid_body_stores_nothing_and_the_proxy_keeps_serving(
    proxy: FaultProxy, bucket: str, s3_client: Any, framing: str, partial: bytes
) -> None:
    cut = Wire(proxy.port)
    cut.send(f"PUT /{bucket}/partial HTTP/1.1\r\nHost: {LOOPBACK}\r\n{framing}\r\n".encode() + partial)
    cut.close()
    wait_until_closed(proxy)

    assert stored(s3_client, bucket, "partial") is None
    client = make_client(proxy.url)
    client.put_object(Bucket=bucket, Key="after", Body=b"fine")
    client.close()
    assert stored(s3_client, bucket, "after") == b"fine"


def test_pipelined_requests_are_answered_in_order(proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any) -> None:
    s3_client.put_object(Bucket=bucket, Key="a", Body=b"first")
    s3_client.put_object(Bucket=bucket, Key="b", Body=b"second")

    wire.send(signed("GET", proxy, f"/{bucket}/a") + signed("GET", proxy, f"/{bucket}/b"))

    assert wire.response()[2] == b"first"
    assert wire.response()[2] == b"second"
    assert proxy.requests == {"GET": 2}


def test_head_responses_keep_their_length_and_the_connection(
    proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any
) -> None:
    s3_client.put_object(Bucket=bucket, Key="k", Body=b"12345")

    wire.send(signed("HEAD", proxy, f"/{bucket}/k") + signed("GET", proxy, f"/{bucket}/k"))
    status, headers, body = wire.response("HEAD")

    assert (status, headers["Content-Length"], body) == (200, "5", b"")
    assert wire.response()[2] == b"12345"


def test_an_http_1_0_client_gets_its_answer_and_a_closed_connection(
    proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any
) -> None:
    s3_client.put_object(Bucket=bucket, Key="k", Body=b"old client")

    wire.send(signed("GET", proxy, f"/{bucket}/k", version="1.0"))  # no Host: the proxy adds upstream's

    status, _, body = wire.response()
    assert (status, body) == (200, b"old client")
    assert wire.closed_by_peer()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NOT A REQUEST\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nbroken header line\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
        (b"PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400),
        (b"PUT /b/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ],
    ids=["request-line", "header-line", "no-host", "content-length", "transfer-coding"],
)
def test_malformed_requests_are_refused_and_reach_nobody(
    proxy: FaultProxy, wire: Wire, request_bytes: bytes, status: int
) -> None:
    wire.send(request_bytes)

    answer, headers, _ = wire.response()
    assert answer == status
    assert headers["Connection"] == "close"
    assert wire.closed_by_peer()
    assert proxy.total_requests == 0


def test_a_malformed_body_after_a_valid_head_aborts_the_connection(
    proxy: FaultProxy, wire: Wire, bucket: str, s3_client: Any
) -> None:
    # The head was counted and forwarded; the broken chunk ends both connections, so
    # upstream never sees a complete request.
    wire.send(f"PUT /{bucket}/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".encode())

    assert wire.closed_by_peer()
    wait_until_closed(proxy)
    assert proxy.requests == {"PUT": 1}
    assert stored(s3_client, bucket, "k") is None


def test_large_response_bodies_stream_through(proxy: FaultProxy, bucket: str, s3_client: Any) -> None:
    body = bytes(range(256)) * 16_000  # 4 MB
    s3_client.put_object(Bucket=bucket, Key="big", Body=body)
    client = make_client(proxy.url)

    got = client.get_object(Bucket=bucket, Key="big")["Body"].read()
    client.close()

    assert got == body
