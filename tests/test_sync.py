"""The generated sync API and the one bounded-concurrency helper."""

from __future__ import annotations

import asyncio
import contextvars
from functools import partial

import pytest

from s3skills._loop import gather_limited, io_bound, on_io_loop, run_sync, sync_method

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class Thing:
    async def aname(self, suffix: str) -> str:
        """Return the caller's context value."""
        return VAR.get() + suffix

    name = sync_method(aname)


def test_sync_twin_runs_in_the_callers_context() -> None:
    VAR.set("alice")
    assert Thing().name("!") == "alice!"
    assert Thing.name.__name__ == "name"
    assert Thing.name.__qualname__ == "Thing.name"


async def test_async_callers_reach_the_io_loop_in_their_context() -> None:
    VAR.set("bob")
    here = asyncio.get_running_loop()

    @io_bound
    async def where() -> tuple[str, bool]:
        return VAR.get(), asyncio.get_running_loop() is here

    assert await where() == ("bob", False)


def test_a_sync_call_from_the_io_loop_is_refused_not_deadlocked() -> None:
    async def inner() -> None:
        coro = asyncio.sleep(0)
        run_sync(coro)

    with pytest.raises(RuntimeError, match="I/O loop"):
        run_sync(on_io_loop(inner()))


async def test_gather_limited_keeps_order_and_the_limit() -> None:
    running = 0
    peak = 0

    async def job(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        running -= 1
        return i * 10

    assert await gather_limited([partial(job, i) for i in range(20)], 4) == [i * 10 for i in range(20)]
    assert peak == 4
    assert await gather_limited([], 4) == []


async def test_gather_limited_cancels_the_running_jobs_and_starts_no_more_after_a_failure() -> None:
    started: list[int] = []
    cancelled: list[int] = []
    release = asyncio.Event()

    async def job(i: int) -> int:
        started.append(i)
        if i == 1:
            raise ValueError("boom")
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(i)
            raise
        return i

    with pytest.raises(ValueError, match="boom"):
        await gather_limited([partial(job, i) for i in range(10)], 3)
    assert sorted(started) == [0, 1, 2]
    assert sorted(cancelled) == [0, 2]
