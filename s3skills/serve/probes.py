"""Probes and drain for a server process: `/healthz`, `/readyz`, `/metrics`, and SIGTERM.

Shared by every HTTP front end of the serving room (the MCP server, the console): wrap an
ASGI app in `Probes` and give it a `Readiness`; install a `Drain` once the server runs.

- `/healthz`: 200 while the process answers (nothing else is checked).
- `/readyz`: 200 while the server can read its bucket with its credentials, 503 (with the
  reason) while it cannot or while it drains. The bucket is asked at most once per `ttl`
  (one LIST of one key, in the background, shared by every probe), never once per probe,
  and a probe never waits for it (but the first one).
- `/metrics` (when a `metrics` callable is given): the Prometheus text exposition.

The three paths answer without authentication (a balancer or an orchestrator probes them),
so a deployment keeps them internal; they hold no user data. Any other path goes to the app.

`Drain` turns the first SIGTERM (or SIGINT) into: readiness false at once (balancers stop
sending), `unready_seconds` more of normal serving (so they notice), then the server's own
graceful shutdown (stop accepting, finish the calls in flight); a process still alive
`deadline` seconds after the signal exits at once (status 0), whatever a call waits on
(a stalled S3 cannot keep it alive). A second signal goes straight to the server's shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import FrameType
from typing import Any

from s3skills.errors import AccessDenied, S3SkillsError
from s3skills.skills import SkillLibrary

__all__ = ["DRAIN_SECONDS", "Drain", "Probes", "Readiness", "bucket_check", "drain_lifespan", "exit_normally"]

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 30.0
"""Default drain deadline: seconds from SIGTERM to exit, at most (Kubernetes' default grace period)."""

Check = Callable[[], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def bucket_check(library: SkillLibrary) -> Check:
    """A readiness check: list one key of the bucket under the layout's root.

    An access denied there passes (a policy may grant each user's prefix alone, as
    `s3skills.serve.mcp.check_store` accepts at start); a missing bucket, refused or
    missing credentials, or an unreachable store fail.
    """

    async def check() -> None:
        try:
            async for _page in library.store.alist_pages(library.config.layout.root, page_size=1):
                break
        except AccessDenied:
            return

    return check


class Readiness:
    """Whether the server should get traffic: its bucket check passed recently and it is not draining.

    Args:
        check: Raises when the server cannot serve (`bucket_check`); None: always ready.
        ttl: Seconds a check's outcome answers probes before the bucket is asked again.
        timeout: Seconds a check may take; longer counts as a failure.
        clock: Monotonic clock (tests move it).

    Attributes:
        draining: Set by `Drain` on SIGTERM: not ready from then on.
    """

    def __init__(
        self,
        check: Check | None = None,
        *,
        ttl: float = 5.0,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.check = check
        self.ttl = ttl
        self.timeout = timeout
        self.clock = clock
        self.draining = False
        self.checks = 0
        """Checks run so far (each costs one request)."""
        self._outcome: tuple[float, str | None] | None = None  # (when, why not ready or None)
        self._flight: asyncio.Task[None] | None = None  # a background check of `state`
        self._running: asyncio.Task[str | None] | None = None

    async def state(self) -> tuple[bool, str]:
        """(ready, reason), from the last check (never waiting for one but the first).

        When that check is older than `ttl` a new one starts in the background and the
        next probes read it: a probe answers at once, however slow the bucket is.
        """
        if self.draining:
            return False, "draining"
        if self.check is None:
            return True, "ready"
        if self._outcome is None:
            await self.check_now()
        elif self.clock() - self._outcome[0] >= self.ttl and (self._flight is None or self._flight.done()):
            self._flight = asyncio.ensure_future(self.check_now())
        assert self._outcome is not None
        why = self._outcome[1]
        return (why is None, why or "ready")

    async def check_now(self) -> None:
        """Run the check (one at a time: a caller that finds one running waits for it) and keep its outcome."""
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._run())
        started = self.clock()
        why = await asyncio.shield(self._running)
        self._outcome = (started, why)

    async def _run(self) -> str | None:
        assert self.check is not None
        self.checks += 1
        try:
            async with asyncio.timeout(self.timeout):
                await self.check()
        except TimeoutError:
            return f"the bucket did not answer within {self.timeout:g} s"
        except S3SkillsError as exc:
            return f"cannot read the bucket: {type(exc).__name__}"
        except Exception as exc:  # a bug in a check must not kill the probe
            logger.warning("readiness check failed: %r", exc)
            return f"readiness check failed: {type(exc).__name__}"
        return None


async def _answer(send: Any, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    headers.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Probes:
    """ASGI middleware answering `/healthz`, `/readyz` and (with `metrics`) `/metrics` before `app`.

    Args:
        app: The application every other request goes to.
        readiness: What `/readyz` says.
        metrics: Returns `(body, content type)` of the exposition; None: `/metrics` goes to the app.
    """

    def __init__(
        self, app: ASGIApp, readiness: Readiness, *, metrics: Callable[[], tuple[bytes, str]] | None = None
    ) -> None:
        self.app = app
        self.readiness = readiness
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in ("/healthz", "/readyz", "/metrics") or (path == "/metrics" and self.metrics is None):
            await self.app(scope, receive, send)
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _answer(send, 405, b"use GET\n")
        elif path == "/healthz":
            await _answer(send, 200, b"ok\n")
        elif path == "/readyz":
            ready, why = await self.readiness.state()
            await _answer(send, 200 if ready else 503, why.encode() + b"\n")
        else:
            assert self.metrics is not None
            body, content_type = await asyncio.to_thread(self.metrics)  # merging worker files reads the disk
            await _answer(send, 200, body, content_type)


class Drain:
    """SIGTERM handling for a server process (see the module): unready, serve a little more, shut down.

    Args:
        readiness: Set draining on the first signal.
        deadline: Seconds from the signal to exit, at most (the watchdog's).
        unready_seconds: Seconds of normal serving, unready, before the server shuts down.
        exit: How the watchdog ends the process (tests replace it).
    """

    def __init__(
        self,
        readiness: Readiness,
        *,
        deadline: float = DRAIN_SECONDS,
        unready_seconds: float = 0.0,
        exit: Callable[[int], Any] = os._exit,
    ) -> None:
        if deadline <= 0 or unready_seconds < 0 or unready_seconds >= deadline:
            raise ValueError("the drain deadline must be > 0 and longer than the unready time (>= 0)")
        self.readiness = readiness
        self.deadline = deadline
        self.unready_seconds = unready_seconds
        self._exit = exit
        self.signalled_at: float | None = None
        self._timers: list[threading.Timer] = []
        self._previous: dict[int, Any] = {}

    @property
    def graceful_seconds(self) -> float:
        """What the server may spend finishing calls once it stops accepting (uvicorn's
        `timeout_graceful_shutdown`): the deadline less the unready time and 2 s to close."""
        return max(0.5, self.deadline - self.unready_seconds - 2.0)

    def install(self) -> None:
        """Chain SIGTERM and SIGINT in front of the handlers in place (the server's): main thread only."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            self._previous[sig] = previous
            signal.signal(sig, self._handler(previous))

    def uninstall(self) -> None:
        """Put back the handlers `install` chained in front of; disarm the timers unless draining."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if self.signalled_at is None:
            self.cancel()

    def _handler(self, previous: Any) -> Callable[[int, FrameType | None], None]:
        def handle(sig: int, frame: FrameType | None) -> None:
            if self.signalled_at is not None:  # a second signal: shut down now
                _call(previous, sig, frame)
                return
            self.begin()
            if self.unready_seconds > 0:
                self._later(self.unready_seconds, lambda: _call(previous, sig, None))
            else:
                _call(previous, sig, frame)

        return handle

    def begin(self) -> None:
        """Start draining: unready now, the watchdog armed for the deadline."""
        self.signalled_at = time.monotonic()
        self.readiness.draining = True
        logger.info("draining: not ready; exiting within %g s", self.deadline)
        self._later(self.deadline, self._overdue)

    def _overdue(self) -> None:
        logger.warning("the drain deadline (%g s) passed with calls still running: exiting", self.deadline)
        logging.shutdown()
        self._exit(0)

    def _later(self, seconds: float, fn: Callable[[], None]) -> None:
        timer = threading.Timer(seconds, fn)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def cancel(self) -> None:
        """Disarm the timers (the process ended in time, or a test is done)."""
        for timer in self._timers:
            timer.cancel()


def _call(handler: Any, sig: int, frame: FrameType | None) -> None:
    if callable(handler):
        handler(sig, frame)
    elif handler == signal.SIG_DFL:  # nobody handled it: what the signal would have done
        with contextlib.suppress(OSError):
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)


def drain_lifespan(app: Any, drain: Drain) -> None:
    """Extend a Starlette `app`'s lifespan with `drain`: installed at start-up, once the server's
    own signal handlers are in place (so chained in front of them; main thread only), put back
    at shut-down, and the drained end made a normal one (`exit_normally`)."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(owner: Any) -> AsyncIterator[Any]:
        if threading.current_thread() is threading.main_thread():
            drain.install()
        try:
            async with inner(owner) as state:
                yield state
        finally:
            drain.uninstall()
            exit_normally()

    app.router.lifespan_context = lifespan


def exit_normally() -> None:
    """Make the uvicorn server whose handler is in place end with status 0 after a SIGTERM.

    uvicorn raises a signal it shut down for again once it is done, which kills the process
    (status -15, which an orchestrator reads as a crash); a drained end is a normal one.
    """
    import uvicorn

    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    if isinstance(server, uvicorn.Server):
        server._captured_signals.clear()
