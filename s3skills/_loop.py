"""One async implementation, a generated sync API (fsspec's `sync_wrapper` idea).

All S3 I/O runs on one private event loop in a daemon thread. Sync callers block
on it; async callers await it from their own loop without blocking that loop.
Either way the coroutine runs in a *copy of the caller's context*, so LangGraph's
`get_config()` / `get_runtime()` (context variables) work inside it, and no
client is ever bound to a caller's loop that may close under it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import functools
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "close_at_exit",
    "gather_limited",
    "io_bound",
    "io_loop",
    "offload",
    "on_io_loop",
    "run_sync",
    "serve_on_running_loop",
    "sync_method",
]

T = TypeVar("T")
P = ParamSpec("P")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def io_loop() -> asyncio.AbstractEventLoop:
    """The private I/O loop, started on first use (and again after a fork)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def _run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=_run, name="s3skills-io", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


@contextlib.contextmanager
def serve_on_running_loop() -> Iterator[None]:
    """Make the running loop the I/O loop while the block runs (call it from a coroutine).

    For a server whose event loop lives as long as it serves: its requests' library calls
    then run on its own loop, with no hop to the private loop's thread and back (a hop
    costs two thread wake-ups, and the two loops contend for the GIL: at 50 concurrent MCP
    calls the hops held a call ~60-280 ms, bench/README.md). Sync callers in other threads
    still submit to it; a sync call from the loop's own thread raises, as on the private loop.
    """
    global _loop, _thread
    loop = asyncio.get_running_loop()
    with _lock:
        previous = (_loop, _thread)
        _loop, _thread = loop, threading.current_thread()
    try:
        yield
    finally:
        with _lock:
            if _loop is loop:
                _loop, _thread = previous


def _submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    loop = io_loop()
    ctx = contextvars.copy_context()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()

    def _start() -> None:
        task = loop.create_task(coro, context=ctx)

        def _done(t: asyncio.Task[T]) -> None:
            if result.cancelled():
                return
            if t.cancelled():
                result.cancel()
            elif (exc := t.exception()) is not None:
                result.set_exception(exc)
            else:
                result.set_result(t.result())

        task.add_done_callback(_done)
        result.add_done_callback(lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None)

    loop.call_soon_threadsafe(_start)
    return result


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the I/O loop and block until it finishes.

    Raises:
        RuntimeError: When called from the I/O loop itself (it would deadlock).
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None and running is _loop:
        coro.close()
        raise RuntimeError("s3skills: a sync method was called from its own I/O loop; use the async one")
    return _submit(coro).result()


async def on_io_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` run on the I/O loop; cancelling the caller cancels it too."""
    if asyncio.get_running_loop() is _loop:
        return await coro
    fut = _submit(coro)
    try:
        return await asyncio.wrap_future(fut)
    except asyncio.CancelledError:
        fut.cancel()
        raise


def sync_method(async_fn: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """Build the sync twin of an `async def` method: same parameters (for type checkers
    too), the awaited result."""

    @functools.wraps(async_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(_as_coroutine(async_fn(*args, **kwargs)))

    wrapper.__name__ = async_fn.__name__.removeprefix("a")
    owner, dot, _ = async_fn.__qualname__.rpartition(".")
    wrapper.__qualname__ = owner + dot + wrapper.__name__
    wrapper.__doc__ = f"Sync version of `{async_fn.__name__}` (runs on the private I/O loop).\n\n" + (
        async_fn.__doc__ or ""
    )
    return wrapper


async def gather_limited(jobs: Iterable[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run `jobs` (coroutine factories) with at most `limit` in flight; results in job order.

    On the first failure the running jobs are cancelled and awaited, no new job
    starts, and that failure is raised: nothing outlives the call. The one
    bounded-concurrency helper of the project (grep, catalog refresh, push/pull,
    script fetch, batch transfers).
    """
    todo = list(enumerate(jobs))
    todo.reverse()
    results: dict[int, T] = {}

    async def worker() -> None:
        while todo:
            index, job = todo.pop()
            results[index] = await job()

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, min(limit, len(todo)))):
                group.create_task(worker())
    except BaseExceptionGroup as failure:
        raise failure.exceptions[0] from None
    return [results[i] for i in sorted(results)]


def io_bound(async_fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Make an `async def` method always run on the I/O loop (in the caller's context)."""

    @functools.wraps(async_fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return await on_io_loop(async_fn(*args, **kwargs))

    return wrapper


async def _await(aw: Awaitable[T]) -> T:
    return await aw


def _as_coroutine(aw: Awaitable[T]) -> Coroutine[Any, Any, T]:
    if asyncio.iscoroutine(aw):
        return aw
    return _await(aw)


_closers: weakref.WeakSet[Any] = weakref.WeakSet()


def close_at_exit(obj: Any) -> None:
    """Have `await obj.aclose_all()` run on the I/O loop when the interpreter exits."""
    _closers.add(obj)


def _shutdown() -> None:
    loop = _loop
    if loop is None or loop.is_closed() or _thread is None or not _thread.is_alive():
        return

    async def close_all() -> None:
        await asyncio.gather(*(obj.aclose_all() for obj in list(_closers)), return_exceptions=True)

    with contextlib.suppress(Exception):  # best effort at exit
        _submit(close_all()).result(timeout=5)
    loop.call_soon_threadsafe(loop.stop)


atexit.register(_shutdown)


def _after_fork_in_child() -> None:
    # The loop thread does not survive a fork, and the lock may have been held by it:
    # the child starts its own loop on first use.
    global _lock, _loop, _thread
    _lock = threading.Lock()
    _loop = None
    _thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


async def offload(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run CPU-bound or blocking work in a worker thread, so the shared I/O loop keeps
    serving other tenants meanwhile."""
    return await asyncio.to_thread(fn, *args, **kwargs)
