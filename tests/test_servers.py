"""Pin the behaviour of the local S3 servers that the rest of the suite and the library rely on."""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from s3skills.testing import (
    LOOPBACK,
    LiveTarget,
    MotoServer,
    SeaweedBucket,
    SeaweedServer,
    SeaweedStartupError,
    free_port,
    free_ports,
    make_bucket,
    make_client,
)

WRONG_ETAG = '"0123456789abcdef0123456789abcdef"'


def error_of(call: Callable[[], object]) -> tuple[int, str]:
    """Run ``call``, expecting a ClientError; return its HTTP status and error code."""
    with pytest.raises(ClientError) as info:
        call()
    response: Any = info.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


# --- helpers --------------------------------------------------------------------------------


def test_free_port_is_bindable_on_loopback() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind((LOOPBACK, port))


def test_free_ports_are_distinct() -> None:
    ports = free_ports(12)
    assert len(set(ports)) == 12


# --- environment isolation --------------------------------------------------------------------


def test_session_uses_dummy_credentials_and_no_profile() -> None:
    assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == "testing"
    assert os.environ["AWS_DEFAULT_REGION"] == "us-east-1"
    assert "AWS_PROFILE" not in os.environ
    assert not any(name.startswith("AWS_ENDPOINT_URL") for name in os.environ)
    for variable in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        with open(os.environ[variable]) as handle:
            assert handle.read() == ""


def test_non_loopback_connections_are_refused() -> None:
    # 192.0.2.0/24 is TEST-NET-1: the guard must refuse before any packet is sent.
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError, match="non-loopback"):
        sock.connect(("192.0.2.1", 443))


# --- moto -----------------------------------------------------------------------------------


def test_moto_serves_put_get_on_loopback(moto_endpoint: str, s3_client: Any, bucket: str) -> None:
    url = urllib.parse.urlsplit(moto_endpoint)
    assert url.hostname == LOOPBACK
    assert url.port
    s3_client.put_object(Bucket=bucket, Key="skills/a/SKILL.md", Body=b"hello")
    body = s3_client.get_object(Bucket=bucket, Key="skills/a/SKILL.md")["Body"].read()
    assert body == b"hello"


def test_moto_reset_empties_buckets(moto_server: MotoServer, s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key="k", Body=b"v")
    moto_server.reset()
    assert s3_client.list_buckets()["Buckets"] == []


# --- SeaweedFS ------------------------------------------------------------------------------


@pytest.fixture
def seaweed_client(seaweed_bucket: SeaweedBucket) -> Iterator[Any]:
    """A boto3 client with the SeaweedFS admin credentials."""
    client = make_client(
        seaweed_bucket.endpoint_url,
        access_key=seaweed_bucket.access_key,
        secret_key=seaweed_bucket.secret_key,
    )
    yield client
    client.close()


def test_seaweed_serves_put_get_on_loopback(seaweed_bucket: SeaweedBucket, seaweed_client: Any) -> None:
    assert urllib.parse.urlsplit(seaweed_bucket.endpoint_url).hostname == LOOPBACK
    client = seaweed_client
    client.put_object(Bucket=seaweed_bucket.bucket, Key="skills/a/SKILL.md", Body=b"hello")
    body = client.get_object(Bucket=seaweed_bucket.bucket, Key="skills/a/SKILL.md")["Body"].read()
    assert body == b"hello"


def test_seaweed_rejects_unknown_credentials(seaweed_bucket: SeaweedBucket) -> None:
    # Authentication is on, so the exposed access/secret key pair is what clients must use.
    client = make_client(seaweed_bucket.endpoint_url, access_key="testing", secret_key="testing")
    try:
        listing = lambda: client.list_objects_v2(Bucket=seaweed_bucket.bucket)  # noqa: E731
        assert error_of(listing) == (403, "InvalidAccessKeyId")
    finally:
        client.close()


def test_seaweed_startup_failure_raises_with_the_log_tail(tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    fake.write_text("#!/bin/sh\necho 'listen tcp: address already in use'\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(SeaweedStartupError, match=r"(?s)exited with code 3.*address already in use"):
        SeaweedServer(weed=str(fake), startup_timeout=10)


def test_seaweed_startup_timeout_kills_the_process_and_removes_its_dir(tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    # Records its pid and working directory (the server's temp dir), then never serves S3.
    fake.write_text(
        f"#!/bin/sh\necho $$ > {tmp_path}/pid\npwd > {tmp_path}/cwd\necho 'still starting'\nexec sleep 30\n"
    )
    fake.chmod(0o755)
    with pytest.raises(SeaweedStartupError, match=r"(?s)did not serve S3.*still starting"):
        SeaweedServer(weed=str(fake), startup_timeout=0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)
    assert not Path((tmp_path / "cwd").read_text().strip()).exists()


@pytest.mark.live
def test_live_round_trip(live_target: LiveTarget) -> None:
    client = make_client(
        live_target.endpoint_url,
        access_key=live_target.access_key,
        secret_key=live_target.secret_key,
        region=live_target.region,
    )
    key = f"s3skills-test/{uuid.uuid4().hex}"
    try:
        client.put_object(Bucket=live_target.bucket, Key=key, Body=b"hello", IfNoneMatch="*")
        assert client.get_object(Bucket=live_target.bucket, Key=key)["Body"].read() == b"hello"
    finally:
        client.delete_object(Bucket=live_target.bucket, Key=key)
        client.close()


# --- conditional writes on both servers -------------------------------------------------------


class Target(NamedTuple):
    """A client and an empty bucket on one of the servers."""

    server: str
    client: Any
    bucket: str


@pytest.fixture(
    params=[
        "moto",
        pytest.param("seaweedfs", marks=pytest.mark.seaweedfs),
        pytest.param("localstack", marks=(pytest.mark.localstack, pytest.mark.slow)),
    ]
)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """An empty bucket on moto, SeaweedFS and LocalStack, with a client allowing parallel requests."""
    # No retries: a retried conditional PUT could turn a 412 or a race into something else.
    config = Config(max_pool_connections=16, retries={"max_attempts": 1})
    if request.param == "moto":
        endpoint: str = request.getfixturevalue("moto_endpoint")
        name = make_bucket(endpoint, "conditional-writes")
        client = make_client(endpoint, config=config)
    else:
        bucket_fixture = "seaweed_bucket" if request.param == "seaweedfs" else "localstack_bucket"
        sw: SeaweedBucket = request.getfixturevalue(bucket_fixture)
        endpoint, name = sw.endpoint_url, sw.bucket
        client = make_client(endpoint, access_key=sw.access_key, secret_key=sw.secret_key, config=config)
    yield Target(request.param, client, name)
    client.close()


def test_if_none_match_star_creates_a_new_key(target: Target) -> None:
    client, bucket = target.client, target.bucket
    client.put_object(Bucket=bucket, Key="new", Body=b"v", IfNoneMatch="*")
    assert client.get_object(Bucket=bucket, Key="new")["Body"].read() == b"v"


def test_if_none_match_star_on_existing_key_fails_412(target: Target) -> None:
    client, bucket = target.client, target.bucket
    client.put_object(Bucket=bucket, Key="k", Body=b"first")
    put = lambda: client.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")  # noqa: E731
    assert error_of(put) == (412, "PreconditionFailed")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"


def test_if_match_wrong_etag_fails_412(target: Target) -> None:
    client, bucket = target.client, target.bucket
    client.put_object(Bucket=bucket, Key="k", Body=b"first")
    put = lambda: client.put_object(Bucket=bucket, Key="k", Body=b"second", IfMatch=WRONG_ETAG)  # noqa: E731
    assert error_of(put) == (412, "PreconditionFailed")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"


def test_if_match_current_etag_replaces_and_stale_etag_fails(target: Target) -> None:
    client, bucket = target.client, target.bucket
    first = client.put_object(Bucket=bucket, Key="k", Body=b"first")["ETag"]
    assert client.head_object(Bucket=bucket, Key="k")["ETag"] == first
    second = client.put_object(Bucket=bucket, Key="k", Body=b"second", IfMatch=first)["ETag"]
    assert second != first
    stale = lambda: client.put_object(Bucket=bucket, Key="k", Body=b"third", IfMatch=first)  # noqa: E731
    assert error_of(stale) == (412, "PreconditionFailed")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"second"


def test_if_match_on_missing_key(target: Target) -> None:
    """AWS answers 404 NoSuchKey here; so do moto and LocalStack. SeaweedFS answers 412 instead.

    The library must therefore treat both as "the object you meant to edit is gone or changed".
    """
    client, bucket = target.client, target.bucket
    put = lambda: client.put_object(Bucket=bucket, Key="missing", Body=b"v", IfMatch=WRONG_ETAG)  # noqa: E731
    expected = {"moto": (404, "NoSuchKey"), "localstack": (404, "NoSuchKey"), "seaweedfs": (412, "PreconditionFailed")}
    assert error_of(put) == expected[target.server]


def test_concurrent_if_none_match_creates_have_one_winner(target: Target) -> None:
    client, bucket = target.client, target.bucket
    writers = 4
    barrier = threading.Barrier(writers)

    def create(i: int) -> str:
        barrier.wait(timeout=10)
        try:
            client.put_object(Bucket=bucket, Key="race", Body=f"writer {i}".encode(), IfNoneMatch="*")
        except ClientError as exc:
            return str(exc.response["Error"]["Code"])
        return f"writer {i}"

    with ThreadPoolExecutor(writers) as pool:
        results = list(pool.map(create, range(writers)))
    winners = [r for r in results if r.startswith("writer")]
    assert len(winners) == 1
    # AWS may also answer 409 ConditionalRequestConflict to a racing conditional write.
    assert set(results) - set(winners) <= {"PreconditionFailed", "ConditionalRequestConflict"}
    assert client.get_object(Bucket=bucket, Key="race")["Body"].read().decode() == winners[0]
