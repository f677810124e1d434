"""S3 faults seen through `S3Backend`: retried when transient, reported (never raised) when not.

The backend talks to moto through `s3skills.testing.FaultProxy`, which answers 503/500/403,
resets connections or cuts responses short on cue, and logs every request it sees. The
arrange/assert side talks to moto directly (`s3_client`), so the proxy only sees the
backend's own traffic.

botocore's exponential backoff is set to zero here (`_no_backoff`): retries still happen,
in the same number, without seconds of jittered sleep per test.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aioboto3
import pytest
from botocore.exceptions import ClientError, ConnectionClosedError
from botocore.retries import standard

from s3skills import AccessDenied, S3Backend
from s3skills.layout import KeyLayout
from s3skills.testing import (
    FaultKind,
    FaultProxy,
    ProxyRequest,
    RequestMatcher,
    RequestRecord,
    make_client,
    match_request,
)

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

USER, THREAD = "alice", "t1"
WS = f"threads/{THREAD}/"
NOTES = "alpha\nneedle here\nomega-free line\n"
DEEP = "another needle\n"
DATA = "plain text\n"

TRANSIENT: tuple[FaultKind, ...] = ("slowdown", "internal_error", "reset")

LIST = match_request(method="GET", query=r"(^|&)list-type=2")
PUT = match_request(method="PUT")
BATCH_DELETE = match_request(method="POST", query=r"(^|&)delete")


def get_of(name: str) -> RequestMatcher:
    """The GetObject requests of the workspace file `name`."""
    return match_request(method="GET", path=f"/{re.escape(WS + name)}$")


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_endpoint) as running:
        yield running


# One session for the module: each backend still gets its own client (and retry
# quota), but botocore's service model is loaded once rather than once per test.
_SESSION = aioboto3.Session()


def make_backend(bucket: str, endpoint_url: str, *, retry_attempts: int = 4) -> S3Backend:
    return S3Backend(
        bucket,
        user_id=USER,
        thread_id=THREAD,
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        session=_SESSION,
        retry_attempts=retry_attempts,
        layout=SEEDS,
    )


@pytest.fixture
def seeded(s3_client: Any, bucket: str) -> str:
    """A workspace with three files (written straight to moto, not through the proxy)."""
    for key, body in ((f"{WS}notes.md", NOTES), (f"{WS}sub/deep.md", DEEP), (f"{WS}data.txt", DATA)):
        s3_client.put_object(Bucket=bucket, Key=key, Body=body.encode())
    return bucket


@pytest.fixture
def backend(seeded: str, proxy: FaultProxy) -> Iterator[S3Backend]:
    instance = make_backend(seeded, proxy.url)
    yield instance
    instance.close()


@pytest.fixture
def fragile_backend(seeded: str, proxy: FaultProxy) -> Iterator[S3Backend]:
    """Two attempts per request: faults that last outlast the retries quickly."""
    instance = make_backend(seeded, proxy.url, retry_attempts=2)
    yield instance
    instance.close()


def body_of(s3_client: Any, bucket: str, key: str) -> str | None:
    """The object's text, or None when it does not exist."""
    try:
        return str(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
    except ClientError as exc:
        if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
            return None
        raise


def as_request(record: RequestRecord) -> ProxyRequest:
    return ProxyRequest(record.method, record.path, record.query, ())


def assert_retried(proxy: FaultProxy, match: RequestMatcher, faults: int) -> None:
    """The proxy faulted `faults` matching requests, and then forwarded the same request again."""
    seen = [r for r in proxy.history if match(as_request(r))]
    faulted = [r for r in seen if r.fault is not None]
    assert len(faulted) == faults, seen
    last = faulted[-1]
    later = seen[seen.index(last) + 1 :]
    assert any(
        (r.method, r.path, r.query) == (last.method, last.path, last.query) and r.fault is None for r in later
    ), f"the faulted request was not retried: {seen}"


# -- the operations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One backend operation: how to call it, and how to tell that it did its job."""

    name: str
    args: tuple[Any, ...]
    check: Callable[[Any, Any, str], None]

    def call(self, backend: S3Backend) -> Any:
        return getattr(backend, self.name)(*self.args)

    async def acall(self, backend: S3Backend) -> Any:
        return await getattr(backend, "a" + self.name)(*self.args)


def check_ls(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert [e["path"] for e in result.entries] == ["/workspace/data.txt", "/workspace/notes.md", "/workspace/sub/"]


def check_read(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert result.file_data["content"] == NOTES


def check_write(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert body_of(s3, bucket, f"{WS}new.md") == "fresh\n"


def check_edit(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert result.occurrences == 1
    assert body_of(s3, bucket, f"{WS}notes.md") == NOTES.replace("alpha", "ALPHA")


def check_grep(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert sorted((m["path"], m["line"]) for m in result.matches) == [
        ("/workspace/notes.md", 2),
        ("/workspace/sub/deep.md", 1),
    ]


def check_glob(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert sorted(m["path"] for m in result.matches) == ["/workspace/notes.md", "/workspace/sub/deep.md"]


def check_delete(result: Any, s3: Any, bucket: str) -> None:
    assert result.error is None
    assert body_of(s3, bucket, f"{WS}notes.md") is None


def check_upload(result: Any, s3: Any, bucket: str) -> None:
    assert [r.error for r in result] == [None]
    assert body_of(s3, bucket, f"{WS}up.txt") == "uploaded\n"


def check_download(result: Any, s3: Any, bucket: str) -> None:
    assert [(r.error, r.content) for r in result] == [(None, NOTES.encode())]


LS = Op("ls", ("/workspace",), check_ls)
READ = Op("read", ("/workspace/notes.md",), check_read)
WRITE = Op("write", ("/workspace/new.md", "fresh\n"), check_write)
EDIT = Op("edit", ("/workspace/notes.md", "alpha", "ALPHA"), check_edit)
GREP = Op("grep", ("needle", "/workspace"), check_grep)
GLOB = Op("glob", ("**/*.md", "/workspace"), check_glob)
DELETE = Op("delete", ("/workspace/notes.md",), check_delete)
UPLOAD = Op("upload_files", ([("/workspace/up.txt", b"uploaded\n")],), check_upload)
DOWNLOAD = Op("download_files", (["/workspace/notes.md"],), check_download)
OPS = (LS, READ, WRITE, EDIT, GREP, GLOB, DELETE, UPLOAD, DOWNLOAD)

# Which request of each operation gets the fault.
RECOVERY_CASES = [
    pytest.param(LS, LIST, id="ls-list"),
    pytest.param(READ, get_of("notes.md"), id="read-get"),
    pytest.param(WRITE, PUT, id="write-put"),
    pytest.param(EDIT, get_of("notes.md"), id="edit-get"),
    pytest.param(EDIT, PUT, id="edit-put"),
    pytest.param(GREP, LIST, id="grep-list"),
    pytest.param(GREP, get_of("sub/deep.md"), id="grep-get"),
    pytest.param(GLOB, LIST, id="glob-list"),
    pytest.param(DELETE, LIST, id="delete-list"),
    pytest.param(DELETE, BATCH_DELETE, id="delete-batch"),
    pytest.param(UPLOAD, PUT, id="upload-put"),
    pytest.param(DOWNLOAD, get_of("notes.md"), id="download-get"),
]


# -- transient faults are retried ---------------------------------------------------------------


@pytest.mark.parametrize("kind", TRANSIENT)
@pytest.mark.parametrize(("op", "match"), RECOVERY_CASES)
def test_transient_faults_on_the_first_attempts_are_retried_to_success(
    backend: S3Backend, proxy: FaultProxy, s3_client: Any, op: Op, match: RequestMatcher, kind: FaultKind
) -> None:
    rule = proxy.inject(kind, count=2, match=match)

    result = op.call(backend)

    op.check(result, s3_client, backend.bucket)
    assert rule.fired == 2
    assert_retried(proxy, match, faults=2)


@pytest.mark.parametrize("kind", TRANSIENT)
@pytest.mark.parametrize(("op", "match"), RECOVERY_CASES)
async def test_async_operations_retry_transient_faults_to_success(
    backend: S3Backend, proxy: FaultProxy, s3_client: Any, op: Op, match: RequestMatcher, kind: FaultKind
) -> None:
    rule = proxy.inject(kind, count=2, match=match)

    result = await op.acall(backend)

    op.check(result, s3_client, backend.bucket)
    assert rule.fired == 2
    assert_retried(proxy, match, faults=2)


def test_retry_attempts_is_the_total_number_of_attempts(seeded: str, proxy: FaultProxy) -> None:
    backend = make_backend(seeded, proxy.url, retry_attempts=3)
    try:
        proxy.inject("slowdown", count=None)
        result = backend.read("/workspace/notes.md")
    finally:
        backend.close()

    assert result.error is not None
    assert proxy.requests == {"GET": 3}


def test_a_persistent_fault_is_retried_a_bounded_number_of_times(seeded: str, proxy: FaultProxy) -> None:
    backend = make_backend(seeded, proxy.url, retry_attempts=3)
    try:
        proxy.inject("slowdown", count=None)
        result = backend.read("/workspace/notes.md")
    finally:
        backend.close()

    assert result.error is not None
    # retry_attempts=3 is the total number of attempts.
    assert proxy.requests["GET"] == 3
    assert set(proxy.requests) == {"GET"}


async def test_concurrent_grep_gets_survive_interleaved_faults(backend: S3Backend, proxy: FaultProxy) -> None:
    proxy.inject("slowdown", count=1, match=get_of("notes.md"))
    proxy.inject("reset", count=1, match=get_of("sub/deep.md"))
    proxy.inject("internal_error", count=1, match=get_of("data.txt"))

    results = await asyncio.gather(*(backend.agrep("needle", "/workspace") for _ in range(3)))

    for result in results:
        assert result.error is None
        assert len(result.matches) == 2


# -- faults that outlast the retries are reported ------------------------------------------------


def unavailable(op: Op, result: Any) -> list[str]:
    """The error strings of a result (one per file for upload/download)."""
    errors = [r.error for r in result] if isinstance(result, list) else [result.error]
    assert all(isinstance(e, str) for e in errors), errors
    return [str(e) for e in errors]


@pytest.mark.parametrize("kind", TRANSIENT)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_faults_outlasting_the_retries_come_back_as_storage_unavailable(
    fragile_backend: S3Backend, proxy: FaultProxy, op: Op, kind: FaultKind
) -> None:
    proxy.inject(kind, count=None)

    result = op.call(fragile_backend)

    for error in unavailable(op, result):
        assert "storage is unavailable" in error
        assert "not found" not in error.lower()
    # Retried, and bounded: retry_attempts=2 in all (aiohttp also replays a request once by
    # itself when a reused keep-alive connection is reset).
    limit = 2 if kind != "reset" else 4
    assert 2 <= proxy.total_requests <= limit


@pytest.mark.parametrize("kind", TRANSIENT)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
async def test_async_faults_outlasting_the_retries_come_back_as_storage_unavailable(
    fragile_backend: S3Backend, proxy: FaultProxy, op: Op, kind: FaultKind
) -> None:
    proxy.inject(kind, count=None)

    result = await op.acall(fragile_backend)

    for error in unavailable(op, result):
        assert "storage is unavailable" in error


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_an_unreachable_endpoint_is_reported_not_raised(seeded: str, op: Op) -> None:
    # The proxy is stopped before the call: its port refuses connections.
    with FaultProxy("http://127.0.0.1:9") as gone:
        url = gone.url
    backend = make_backend(seeded, url, retry_attempts=2)
    try:
        result = op.call(backend)
    finally:
        backend.close()

    for error in unavailable(op, result):
        assert "storage is unavailable" in error


@pytest.mark.parametrize("op", [UPLOAD, DOWNLOAD], ids=lambda op: op.name)
def test_transfer_errors_name_the_file(fragile_backend: S3Backend, proxy: FaultProxy, op: Op) -> None:
    proxy.inject("slowdown", count=None)

    [response] = op.call(fragile_backend)

    assert response.error is not None
    assert response.path in response.error


# -- no partial objects ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TRANSIENT)
def test_a_write_failing_on_every_attempt_leaves_no_object(
    fragile_backend: S3Backend, proxy: FaultProxy, s3_client: Any, kind: FaultKind
) -> None:
    proxy.inject(kind, count=None, match=PUT)

    result = fragile_backend.write("/workspace/new.md", "never stored\n")

    assert result.error is not None
    assert "storage is unavailable" in result.error
    assert body_of(s3_client, fragile_backend.bucket, f"{WS}new.md") is None


def test_a_write_whose_responses_are_all_cut_short_stores_the_whole_object_or_nothing(
    fragile_backend: S3Backend, proxy: FaultProxy, s3_client: Any
) -> None:
    # `truncate` forwards the PUT (moto stores it) and cuts the answer: the client sees a
    # failure although the write landed. What must never happen is a partial object.
    content = "".join(f"line {i}\n" for i in range(2000))
    proxy.inject("truncate", count=None, match=PUT)

    result = fragile_backend.write("/workspace/big.md", content)

    assert result.error is not None
    assert "storage is unavailable" in result.error
    assert body_of(s3_client, fragile_backend.bucket, f"{WS}big.md") in (None, content)


def test_a_write_refused_before_sending_leaves_no_object(seeded: str, moto_endpoint: str, s3_client: Any) -> None:
    backend = make_backend(seeded, moto_endpoint, retry_attempts=3)
    attempts: list[str] = []

    def refuse(request: Any, **_: Any) -> None:
        attempts.append(request.method)
        raise ConnectionClosedError(endpoint_url=request.url)

    backend.store.register_event("before-send.s3.PutObject", refuse)
    try:
        result = backend.write("/workspace/new.md", "never stored\n")
    finally:
        backend.close()

    assert result.error is not None
    assert "storage is unavailable" in result.error
    assert len(attempts) >= 2
    assert set(attempts) == {"PUT"}
    assert body_of(s3_client, seeded, f"{WS}new.md") is None


def test_connection_errors_raised_before_send_are_retried(seeded: str, moto_endpoint: str, s3_client: Any) -> None:
    backend = make_backend(seeded, moto_endpoint, retry_attempts=4)
    attempts: list[str] = []

    def flaky(request: Any, **_: Any) -> None:
        attempts.append(request.method)
        if len(attempts) <= 2:
            raise ConnectionClosedError(endpoint_url=request.url)

    backend.store.register_event("before-send.s3.PutObject", flaky)
    try:
        result = backend.write("/workspace/new.md", "fresh\n")
    finally:
        backend.close()

    assert result.error is None
    assert attempts == ["PUT"] * 3
    assert body_of(s3_client, seeded, f"{WS}new.md") == "fresh\n"


@pytest.mark.parametrize("kind", TRANSIENT)
@pytest.mark.parametrize("match", [get_of("notes.md"), PUT], ids=["get", "put"])
def test_a_failed_edit_leaves_the_original_content(
    fragile_backend: S3Backend, proxy: FaultProxy, s3_client: Any, kind: FaultKind, match: RequestMatcher
) -> None:
    proxy.inject(kind, count=None, match=match)

    result = fragile_backend.edit("/workspace/notes.md", "alpha", "ALPHA")

    assert result.error is not None
    assert "storage is unavailable" in result.error
    assert body_of(s3_client, fragile_backend.bucket, f"{WS}notes.md") == NOTES


def test_an_edit_whose_responses_are_all_cut_short_applies_once_or_not_at_all(
    fragile_backend: S3Backend, proxy: FaultProxy, s3_client: Any
) -> None:
    proxy.inject("truncate", count=None, match=PUT)

    result = fragile_backend.edit("/workspace/notes.md", "alpha", "alpha alpha")

    assert result.error is not None
    assert body_of(s3_client, fragile_backend.bucket, f"{WS}notes.md") in (
        NOTES,
        NOTES.replace("alpha", "alpha alpha", 1),
    )


def test_an_edit_whose_first_response_is_lost_reports_success(
    backend: S3Backend, proxy: FaultProxy, s3_client: Any
) -> None:
    proxy.inject("truncate", count=1, match=PUT)

    result = backend.edit("/workspace/notes.md", "alpha", "ALPHA")

    assert body_of(s3_client, backend.bucket, f"{WS}notes.md") == NOTES.replace("alpha", "ALPHA")
    assert result.error is None


@pytest.mark.parametrize("op", [READ, GREP, DOWNLOAD, EDIT], ids=lambda op: op.name)
def test_a_truncated_object_body_is_retried(backend: S3Backend, proxy: FaultProxy, s3_client: Any, op: Op) -> None:
    proxy.inject("truncate", count=1, match=get_of("notes.md"))

    op.check(op.call(backend), s3_client, backend.bucket)


def test_a_body_cut_short_on_every_attempt_reads_as_storage_unavailable(
    fragile_backend: S3Backend, proxy: FaultProxy
) -> None:
    proxy.inject("truncate", count=None, match=get_of("notes.md"))

    result = fragile_backend.read("/workspace/notes.md")

    assert result.error is not None
    assert "storage is unavailable" in result.error


def test_truncated_listing_responses_are_retried(backend: S3Backend, proxy: FaultProxy, s3_client: Any) -> None:
    # Non-streaming responses are read inside botocore's retry loop.
    proxy.inject("truncate", count=1, match=LIST)

    check_ls(backend.ls("/workspace"), s3_client, backend.bucket)
    assert_retried(proxy, LIST, faults=1)


# -- 403 is not 404 -------------------------------------------------------------------------------------


DENIED_CASES = [
    pytest.param(LS, LIST, id="ls"),
    pytest.param(READ, get_of("notes.md"), id="read"),
    pytest.param(Op("read", ("/workspace/notes",), check_read), get_of("notes"), id="read-without-extension"),
    pytest.param(EDIT, get_of("notes.md"), id="edit-get"),
    pytest.param(EDIT, PUT, id="edit-put"),
    pytest.param(WRITE, PUT, id="write"),
    pytest.param(GREP, LIST, id="grep-list"),
    # One file, so that the failure is the only GET.
    pytest.param(Op("grep", ("needle", "/workspace/notes.md"), check_grep), get_of("notes.md"), id="grep-get"),
    pytest.param(GLOB, LIST, id="glob"),
    pytest.param(DELETE, LIST, id="delete-list"),
    pytest.param(DELETE, BATCH_DELETE, id="delete-batch"),
]


@pytest.mark.parametrize(("op", "match"), DENIED_CASES)
def test_access_denied_is_reported_as_permission_denied_not_as_not_found(
    backend: S3Backend, proxy: FaultProxy, op: Op, match: RequestMatcher
) -> None:
    rule = proxy.inject("access_denied", count=None, match=match)

    result = op.call(backend)

    assert result.error is not None
    assert "not found" not in result.error.lower()
    assert "Permission denied" in result.error
    assert rule.fired == 1  # a 403 is final: not retried


@pytest.mark.parametrize(
    ("op", "match"),
    [pytest.param(UPLOAD, PUT, id="upload"), pytest.param(DOWNLOAD, get_of("notes.md"), id="download")],
)
def test_access_denied_transfers_say_permission_denied(
    backend: S3Backend, proxy: FaultProxy, op: Op, match: RequestMatcher
) -> None:
    proxy.inject("access_denied", count=None, match=match)

    assert [r.error for r in op.call(backend)] == ["permission_denied"]


def drain(loop: asyncio.AbstractEventLoop) -> None:
    """Wait (bounded) for every task on `loop`, the library's I/O loop, to finish."""

    async def wait_for_others() -> None:
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            await asyncio.wait(others, timeout=30)

    asyncio.run_coroutine_threadsafe(wait_for_others(), loop).result(timeout=60)


def test_a_failed_grep_leaves_no_request_running(seeded: str, proxy: FaultProxy) -> None:
    backend = make_backend(seeded, proxy.url)
    others = 2  # sub/deep.md and data.txt are held; notes.md gets the 403
    lock = threading.Lock()
    entered, left = [0], [0]
    loops: list[asyncio.AbstractEventLoop] = []
    release, others_held = asyncio.Event(), asyncio.Event()

    async def hold(request: Any, **_: Any) -> None:
        if request.url.endswith("/notes.md"):
            await others_held.wait()  # answer the 403 only once the other GETs are in flight
            return
        loops.append(asyncio.get_running_loop())
        with lock:
            entered[0] += 1
            if entered[0] == others:
                others_held.set()
        try:
            await release.wait()
        finally:
            with lock:
                left[0] += 1

    backend.store.register_event("before-send.s3.GetObject", hold)
    proxy.inject("access_denied", count=None, match=get_of("notes.md"))
    try:
        result = backend.grep("needle", "/workspace")
        with lock:
            running_after_return = entered[0] - left[0]
    finally:
        if loops:  # let the stray GETs finish before the client is closed under them
            loops[0].call_soon_threadsafe(release.set)
            drain(loops[0])
        backend.close()

    assert result.error is not None
    assert "Permission denied" in result.error
    assert running_after_return == 0


def test_exists_raises_access_denied_instead_of_answering_no(backend: S3Backend, proxy: FaultProxy) -> None:
    proxy.inject("access_denied", count=None)

    with pytest.raises(AccessDenied):
        backend.exists("/workspace/notes.md")


def test_a_missing_file_is_still_not_found(backend: S3Backend, proxy: FaultProxy) -> None:
    result = backend.read("/workspace/missing.md")

    assert result.error == "File '/workspace/missing.md' not found"


# -- the proxy itself ------------------------------------------------------------------------------------


def test_proxy_forwards_chunked_request_bodies(proxy: FaultProxy, bucket: str, s3_client: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        chunks = iter([b"hello ", b"chunked ", b"world"])
        conn.request("PUT", f"/{bucket}/chunked.txt", body=chunks, encode_chunked=True)
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()

    assert response.status == 200
    assert body_of(s3_client, bucket, "chunked.txt") == "hello chunked world"


def test_proxy_answers_expect_100_continue_itself(proxy: FaultProxy, bucket: str, s3_client: Any) -> None:
    expect_headers: list[str | None] = []

    def spy(request: ProxyRequest) -> bool:
        expect_headers.append(request.header("Expect"))
        return False

    proxy.inject("reset", count=None, match=spy)
    client = make_client(proxy.url)

    client.put_object(Bucket=bucket, Key="file-like.txt", Body=io.BytesIO(b"file-like body"))

    assert expect_headers == ["100-continue"]
    assert body_of(s3_client, bucket, "file-like.txt") == "file-like body"


def test_proxy_keeps_client_connections_alive(proxy: FaultProxy, seeded: str) -> None:
    client = make_client(proxy.url)

    for _ in range(5):
        client.get_object(Bucket=seeded, Key=f"{WS}notes.md")["Body"].read()

    assert proxy.requests == {"GET": 5}
    assert proxy.connections == 1


def test_faults_apply_in_injection_order_and_only_to_matching_requests(backend: S3Backend, proxy: FaultProxy) -> None:
    put_rule = proxy.inject("slowdown", count=1, match=PUT)
    any_rule = proxy.inject("internal_error", count=1)

    assert backend.read("/workspace/notes.md").error is None

    assert (put_rule.fired, any_rule.fired) == (0, 1)
    assert any_rule.exhausted
    assert not put_rule.exhausted
    assert [r.fault for r in proxy.history] == ["internal_error", None]


def test_inject_rejects_an_unknown_fault_kind(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        proxy.inject("explode", count=1)  # type: ignore[arg-type]


def test_proxy_url_needs_a_running_proxy(moto_endpoint: str) -> None:
    proxy = FaultProxy(moto_endpoint)
    with pytest.raises(RuntimeError, match="not started"):
        _ = proxy.url
    with proxy:
        assert proxy.url.startswith("http://127.0.0.1:")
    proxy.stop()  # idempotent
