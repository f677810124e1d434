"""Fair share per tenant: the CPU-bound work of a request runs off the event loop, in its tenant's queue.

Ranking a library for a query costs CPU in proportion to the query (about 6 us per
character with the lexical ranker). `SkillLibrary.asearch` ranks on the private I/O loop,
where every tenant's S3 requests run, so one tenant's long query there stalls them all.
`asearch_fair` ranks first in a worker thread of a `TenantLimiter` and hands the result to
`asearch` (a `Ranker` that answers from it), so the I/O loop and the server's own loop
only page the result:

* the query is capped before it gets here (`s3skills.config.Limits.max_query_chars`);
* a tenant runs at most `per_tenant` such calls at once; its other calls wait in its own
  queue (at most `queue`; more are refused at once with `TenantBusy`), never in front of
  another tenant's;
* the worker threads are a bounded pool shared by every tenant.

A thread cannot be stopped, so a call's time is bounded by its input caps, not by a
timer; a caller that gives up frees its place in the queue, and the tenant's slot is held
until the work it started has finished (a burst of cancelled calls cannot run beside it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from s3skills.skills import LexicalRanker, Ranker, SkillInfo, SkillLibrary, SkillPage
from s3skills.tenancy import Tenant

__all__ = ["TenantBusy", "TenantLimiter", "asearch_fair"]

T = TypeVar("T")


class TenantBusy(RuntimeError):
    """A tenant already has as many CPU-bound calls running and waiting as it may."""


class _Slot:
    """One tenant's share: the calls it may run at once, and how many it has in."""

    def __init__(self, per_tenant: int) -> None:
        self.running = asyncio.Semaphore(per_tenant)
        self.users = 0


class TenantLimiter:
    """Runs CPU-bound calls in a bounded thread pool, at most `per_tenant` per tenant at once.

    Args:
        per_tenant: Calls of one tenant that run at once (`Limits.tenant_cpu_calls`).
        queue: Calls of one tenant that may wait beyond those (`Limits.tenant_cpu_queue`);
            more raise `TenantBusy` at once.
        workers: Threads shared by every tenant (default: the CPUs, at most 4).

    Attributes:
        peak: The most calls of each tenant seen running at once (for operators and tests).
    """

    def __init__(self, *, per_tenant: int = 1, queue: int = 16, workers: int | None = None) -> None:
        if per_tenant < 1 or queue < 0:
            raise ValueError("per_tenant must be >= 1 and queue >= 0")
        self.per_tenant = per_tenant
        self.queue = queue
        size = workers or min(4, os.cpu_count() or 1)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="s3skills-cpu")
        self._slots: dict[str, _Slot] = {}
        self._running: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    async def run(self, tenant: str, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread, in `tenant`'s queue.

        Raises:
            TenantBusy: The tenant has `per_tenant + queue` calls in already.
        """
        slot = self._slots.get(tenant)
        if slot is None:
            slot = self._slots[tenant] = _Slot(self.per_tenant)
        if slot.users >= self.per_tenant + self.queue:
            raise TenantBusy(
                f"busy: this user already has {slot.users} searches running or waiting (the limit is "
                f"{self.per_tenant + self.queue}); try again when they finish"
            )
        slot.users += 1
        try:
            await slot.running.acquire()
        except BaseException:
            self._leave(tenant, slot)
            raise
        loop = asyncio.get_running_loop()
        self._running[tenant] = self._running.get(tenant, 0) + 1
        self.peak[tenant] = max(self.peak.get(tenant, 0), self._running[tenant])
        future = self._pool.submit(functools.partial(fn, *args))

        def finished(_: concurrent.futures.Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits on it any more
                loop.call_soon_threadsafe(self._release, tenant, slot)

        future.add_done_callback(finished)  # the slot is held until the thread is done, even if the caller left
        return await asyncio.wrap_future(future)

    def _release(self, tenant: str, slot: _Slot) -> None:
        self._running[tenant] -= 1
        if not self._running[tenant]:
            del self._running[tenant]
        slot.running.release()
        self._leave(tenant, slot)

    def _leave(self, tenant: str, slot: _Slot) -> None:
        slot.users -= 1
        if slot.users == 0 and self._slots.get(tenant) is slot:
            del self._slots[tenant]  # idle tenants hold nothing

    def close(self) -> None:
        """Stop the worker threads (calls already submitted finish)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Ranked:
    """A `Ranker` that answers from a ranking computed elsewhere for one list of skills."""

    def __init__(self, ranker: Ranker, query: str, skills: Sequence[SkillInfo], pairs: list[tuple[SkillInfo, float]]):
        self.ranker, self.query, self.skills, self.pairs = ranker, query, skills, pairs

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        same = len(skills) == len(self.skills) and all(a is b for a, b in zip(skills, self.skills, strict=True))
        if query == self.query and same:
            return self.pairs
        return self.ranker.rank(query, skills)  # the index changed in between: rank this (capped) query here


_LEXICAL = LexicalRanker()


async def asearch_fair(
    library: SkillLibrary,
    limiter: TenantLimiter,
    query: str,
    *,
    tenant: Tenant,
    limit: int,
    cursor: str | None = None,
    category: str | None = None,
    prior: Mapping[str, float] | None = None,
    ranker: Ranker | None = None,
) -> SkillPage:
    """`library.asearch(...)` with the ranking done in `limiter`, in the tenant's queue (see the module).

    The index is read once as `asearch` reads it (`cached=True` first: no request when it
    is warm), ranked in a worker thread, then paged by `asearch` from that ranking.

    Raises:
        TenantBusy: The tenant's queue is full.
    """
    used: Ranker | None = ranker
    if query.strip():
        real = ranker or _LEXICAL
        skills = await library.aindex(category, tenant=tenant, cached=True)
        pairs = await limiter.run(tenant.user_id or "", lambda: list(real.rank(query, skills)))
        used = _Ranked(real, query, skills, pairs)
    return await library.asearch(
        query, limit=limit, cursor=cursor, category=category, tenant=tenant, prior=prior, ranker=used
    )
