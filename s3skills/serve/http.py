"""Serving an ASGI app of the serving room over HTTP: one process or a worker per core.

`serve_app` runs an app with uvicorn in this process (on uvloop when the caller runs it on
`loop_factory()`'s loop), `serve_workers` in worker processes:

- the app is wrapped in `s3skills.serve.probes.Probes` (`/healthz`, `/readyz`, and
  `/metrics` when metrics are on), and its library calls run on the server's own loop
  (`s3skills.aio.serve_on_running_loop`);
- SIGTERM drains (`s3skills.serve.probes.Drain`): unready at once, `unready_seconds` more
  of serving, then stop accepting and finish the calls in flight; the process exits within
  `drain_seconds` of the signal (status 0), whatever a call waits on;
- with `workers > 1`, uvicorn's process manager starts that many worker processes (each a
  whole server, built by the factory named by import string, so a worker that dies is
  started again), each listening on a socket of its own bound to the port with
  `SO_REUSEPORT`, so that the kernel spreads the connections over them
  (`s3skills.serve.reuseport`; where the option is missing, on one shared listening socket,
  as a warning says); `PROMETHEUS_MULTIPROC_DIR` points at a private directory of the run
  (`metrics_dir`) so that `/metrics` answers for every worker;
- each worker follows the manager (`s3skills.serve.lifeline`): a manager killed with
  SIGKILL leaves no worker serving (they drain and exit, the port is released); on
  SIGTERM the manager passes the signal on, and exits 0 once every worker has exited 0.

`listening on http://HOST:PORT/mcp` is printed on stderr once connections are taken: in
one process, once the server listens; with workers on sockets of their own, once every
worker listens (the manager holds the port from the start, with a socket that never
listens); on one shared socket, once it listens, before the first worker starts
(connections wait in its backlog until a worker takes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from s3skills.aio import serve_on_running_loop
from s3skills.serve import lifeline, reuseport
from s3skills.serve.lifeline import FACTORY_ENV, PARENT_ENV
from s3skills.serve.metrics import ServerMetrics, multiprocess_dir
from s3skills.serve.probes import DRAIN_SECONDS, Drain, Probes, Readiness, drain_lifespan

__all__ = [
    "MAX_WORKERS",
    "HttpSettings",
    "Served",
    "ServerError",
    "bind",
    "loop_factory",
    "metrics_dir",
    "probed_app",
    "serve_app",
    "serve_workers",
    "worker_count",
]

logger = logging.getLogger(__name__)


class ServerError(Exception):
    """The server cannot start as configured; the message is the one line that says why and the fix."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """How an HTTP server runs.

    Attributes:
        host: The address to bind (loopback by default).
        port: The port (0 picks a free one).
        workers: Worker processes (1: the server runs in this process).
        metrics: Serve `/metrics`.
        drain_seconds: Seconds from SIGTERM to exit, at most.
        unready_seconds: Seconds of serving, unready, after SIGTERM (for balancers to notice).
        path: The app's path, printed in the `listening on` line.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    metrics: bool = False
    drain_seconds: float = DRAIN_SECONDS
    unready_seconds: float = 0.0
    path: str = "/mcp"


@dataclass
class Served:
    """What one server process serves: its app, its readiness, its metrics and its clean-up.

    Attributes:
        app: The ASGI app (a Starlette app: its lifespan is extended).
        readiness: What `/readyz` says.
        metrics: The process's metrics, when on.
        close: Closes what the app holds (its S3 clients), at the end of its lifespan.
    """

    app: Any
    readiness: Readiness
    metrics: ServerMetrics | None
    close: Callable[[], Awaitable[None]]


def worker_count(value: str | None) -> int:
    """`--workers`: a whole number from 1 to `MAX_WORKERS`, or `auto` (the CPUs this process may
    run on: `os.process_cpu_count`, else its CPU affinity, at most `MAX_WORKERS`).

    Raises:
        ValueError: Neither; the message names the option and the accepted values.
    """
    if value is None or value.strip() == "":
        return 1
    given = value.strip()
    if given.lower() == "auto":
        return min(MAX_WORKERS, _cpus())
    if not given.isascii() or not given.isdigit():  # "-1", "2.5", "x", "٣" and "1_0" are not counts
        raise ValueError(f"--workers takes a whole number or auto, not {value!r}")
    if len(given) > 6 or not 1 <= int(given) <= MAX_WORKERS:
        raise ValueError(f"--workers must be between 1 and {MAX_WORKERS} (or auto), not {given[:20]}")
    return int(given)


MAX_WORKERS = 256
"""The most worker processes `--workers` starts."""


def _cpus() -> int:
    counted = getattr(os, "process_cpu_count", None)  # Python 3.13: affinity-aware
    if counted is not None:
        return int(counted() or 1)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def probed_app(served: Served, settings: HttpSettings) -> Any:
    """`served.app` behind the probes (and metrics), its lifespan extended with the drain
    (`drain_lifespan`), the loop and the clean-up (bounded by the drain deadline)."""
    app = served.app
    drain_lifespan(
        app, Drain(served.readiness, deadline=settings.drain_seconds, unready_seconds=settings.unready_seconds)
    )
    drained = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(owner: Any) -> AsyncIterator[Any]:
        with serve_on_running_loop():  # library calls run on this loop: no hop to another thread
            try:
                async with drained(owner) as state:
                    yield state
            finally:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5.0):  # a stalled S3 cannot hold the exit
                        await served.close()
                if served.metrics is not None:
                    served.metrics.process_ended()

    app.router.lifespan_context = lifespan
    wrapped = served.metrics.asgi(app) if served.metrics is not None else app
    metrics = served.metrics.exposition if served.metrics is not None else None
    return Probes(wrapped, served.readiness, metrics=metrics)


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to `host:port` (not yet listening).

    With `reuse_port`, bound with `SO_REUSEPORT` (`s3skills.serve.reuseport`), so that other
    sockets of this user may bind the port too; a port another process listens on is still
    refused as busy (a socket with the option would join that process's listeners).

    Raises:
        ServerError: The port is busy (another process listens there), or the address
            cannot be bound; the message says so and what to do.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServerError(f"cannot bind to --host {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if reuse_port:
            _nobody_listens(sock.family, sock.getsockname())
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServerError(
                f"port {port} on {host} is busy: another process listens there; "
                "stop it, or choose another port with --port (0 picks a free one)"
            ) from None
        raise ServerError(f"cannot bind to {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _nobody_listens(family: int, address: tuple[Any, ...]) -> None:
    """Raise EADDRINUSE when a socket listens on `address`: a plain socket (`SO_REUSEADDR`
    alone) may bind beside a bound socket that does not listen, never beside a listening one."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)


def _announce(sock: socket.socket, path: str) -> None:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{port}{path}", file=sys.stderr, flush=True)


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that says where it listens once it accepts connections, and that
    ends normally on SIGINT/SIGTERM (uvicorn raises the signal again after its graceful
    shutdown, which would kill the process before the S3 clients are closed)."""

    path = "/mcp"

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:  # the app could not start: uvicorn said why
            return
        _announce(self.servers[0].sockets[0], self.path)  # type: ignore[arg-type]


def _config(app: Any, settings: HttpSettings, **extra: Any) -> uvicorn.Config:
    drain = Drain(Readiness(), deadline=settings.drain_seconds, unready_seconds=settings.unready_seconds)
    return uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=drain.graceful_seconds,  # type: ignore[arg-type]
        **extra,
    )


async def serve_app(served: Served, settings: HttpSettings) -> None:
    """Serve `served` in this process, on the running loop, until SIGTERM/SIGINT (see the module).

    Raises:
        ServerError: The port is busy or cannot be bound.
    """
    sock = bind(settings.host, settings.port)
    try:
        server = _AnnouncingServer(_config(probed_app(served, settings), settings))
        server.path = settings.path
        await server.serve(sockets=[sock])
    finally:
        sock.close()


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop uvicorn would choose: uvloop when it is installed."""
    return uvicorn.Config(_no_app).get_loop_factory()


async def _no_app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - never served
    raise RuntimeError("no app")


class _Manager(Multiprocess):
    """uvicorn's process manager, reporting how its workers ended; with workers on sockets of
    their own, it calls `announce` once as many sockets listen on `port` as it runs workers."""

    def __init__(
        self, config: uvicorn.Config, sockets: list[socket.socket], announce: Callable[[], None] | None, port: int
    ) -> None:
        super().__init__(config, sockets)
        self._announce, self._port = announce, port

    def init_processes(self) -> None:
        """Start the workers and, for up to a minute, wait until they listen (a signal, or a
        worker that ended, leaves it to the run loop, which looks again every half second)."""
        super().init_processes()
        deadline = time.monotonic() + 60.0
        while self._announce is not None and not self.signal_queue and time.monotonic() < deadline:
            if any(process.exitcode is not None for process in self.processes):
                return
            self._announce_if_listening()
            time.sleep(0.05)

    def keep_subprocess_alive(self) -> None:
        super().keep_subprocess_alive()
        self._announce_if_listening()

    def _announce_if_listening(self) -> None:
        if self._announce is None or self.should_exit.is_set():
            return
        count = reuseport.listening(self._port)
        if count is None or count >= self.processes_num:
            announce, self._announce = self._announce, None
            announce()

    def status(self) -> int:
        """0 when every worker exited 0 (each is named on stderr otherwise), else 1."""
        failed = [(p.pid, p.exitcode) for p in self.processes if p.exitcode != 0]
        for pid, code in failed:
            print(f"worker {pid} ended with status {code}", file=sys.stderr, flush=True)
        return 1 if failed else 0


def serve_workers(settings: HttpSettings, factory: str) -> int:
    """Serve with `settings.workers` worker processes until SIGTERM/SIGINT (see the module).

    Each worker follows this process (`s3skills.serve.lifeline`): if this process is killed
    (SIGKILL), its workers get SIGTERM from the kernel and drain, and the port is released.
    With metrics, the workers' figures live in a private directory for this run, removed
    at the end (`s3skills.serve.metrics.multiprocess_dir`). On Linux each worker listens on
    a socket of its own (`s3skills.serve.reuseport`), a worker started again binds a new
    one, and this process only holds the port.

    Args:
        settings: Where and how.
        factory: `module:function` that builds a worker's ASGI app (`probed_app(...)`) in
            the worker process, from the environment this process set for it.

    Returns:
        0 when every worker ended with status 0, else 1.

    Raises:
        ServerError: The port is busy or cannot be bound, or the metrics directory
            (`PROMETHEUS_MULTIPROC_DIR`) cannot be used (status 2).
    """
    own = reuseport.available()
    if not own:
        logger.warning(
            "SO_REUSEPORT is not available here: the %d workers share one listening socket, "
            "and one of them may take most connections",
            settings.workers,
        )
    sock = bind(settings.host, settings.port, reuse_port=own)
    try:
        with metrics_dir(settings):
            os.environ[PARENT_ENV], os.environ[FACTORY_ENV] = str(os.getpid()), factory
            config = _config(f"{lifeline.__name__}:worker_factory", settings, factory=True, workers=settings.workers)
            port = sock.getsockname()[1]
            if own:  # sock only holds the port: it never listens, so it gets no connections
                sockets = reuseport.WorkerSockets(sock.family, sock.getsockname())
                manager = _Manager(config, sockets, lambda: _announce(sock, settings.path), port)
            else:
                sock.listen(2048)  # connections wait here until a worker takes them
                _announce(sock, settings.path)
                manager = _Manager(config, [sock], None, port)
            manager.run()
            return manager.status()
    finally:
        sock.close()


@contextlib.contextmanager
def metrics_dir(settings: HttpSettings) -> Iterator[None]:
    """The private metrics directory of a run, for the block (`multiprocess_dir`): with
    metrics and workers, always; with metrics in one process, when `PROMETHEUS_MULTIPROC_DIR`
    is set (the client then writes files, which must not be another run's); else none.

    Raises:
        ServerError: (status 2) `PROMETHEUS_MULTIPROC_DIR` cannot be used; the message says why.
    """
    wanted = settings.metrics and (settings.workers > 1 or bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")))
    with contextlib.ExitStack() as stack:
        if wanted:
            try:
                stack.enter_context(multiprocess_dir())
            except ValueError as exc:
                raise ServerError(str(exc), 2) from None
        yield
