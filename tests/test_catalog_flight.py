"""Many tenants at once, and faults while an index is built (issue 21, items 6 and 7).

- One refresh per library is in flight, and every concurrent caller shares its answer: a
  shared library costs one conditional GET however many tenants ask at once.
- A ranged read whose body is cut short is read again, like a whole read: the index of a
  library whose every `SKILL.md` head read is truncated once still holds every skill.
- A failed index build backs off: within `failure_backoff` the last good index (or the
  failure) answers without a request, instead of every model call trying again.

The fault tests run on SeaweedFS (a real S3 server) behind a `FaultProxy`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aioboto3
import pytest
from botocore.retries import standard

from s3skills.errors import StoreUnavailable
from s3skills.layout import KeyLayout
from s3skills.skills import SkillCatalog
from s3skills.storage import ObjectBody, S3ObjectStore
from s3skills.testing import FaultProxy, MemoryObjectStore, ProxyRequest, SeaweedBucket, builders, match_request

LAYOUT = KeyLayout()
PREFIX = "shared/org/skills/"
SKILLS = [f"cat/skill-{i:02d}" for i in range(12)]


def skill_md(name: str) -> bytes:
    return builders.skill_md(name, f"The {name} skill.", body="Body.").encode()


class GatedStore(MemoryObjectStore):
    """A memory store whose manifest GETs wait for `gate` (a round trip the test controls)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.arrived = asyncio.Event()  # a manifest GET is waiting at the gate
        self.manifest_gets = 0

    async def aget(self, key: str, **kwargs: Any) -> ObjectBody:
        if key.endswith("manifest.json"):
            self.manifest_gets += 1
            self.arrived.set()
            await self.gate.wait()
        return await super().aget(key, **kwargs)


async def test_concurrent_callers_share_one_refresh_of_a_library() -> None:
    store = GatedStore()
    for sid in SKILLS:
        store.put_object(f"{PREFIX}{sid}/SKILL.md", skill_md(sid.rsplit("/", 1)[1]))
    catalog = SkillCatalog(store, manifest_key=LAYOUT.manifest_key, verify="never")
    store.gate.set()
    await catalog.aindex("shared", PREFIX)  # builds the manifest
    store.gate.clear()
    store.manifest_gets = 0
    tasks = [asyncio.ensure_future(catalog.aindex("shared", PREFIX)) for _ in range(50)]
    await store.arrived.wait()
    for _ in range(10):  # let every caller reach the flight (each needs one step of the loop)
        await asyncio.sleep(0)
    store.gate.set()
    indexes = await asyncio.gather(*tasks)
    assert store.manifest_gets == 1  # one conditional GET for fifty callers
    assert all(index is indexes[0] for index in indexes)
    assert sorted(indexes[0].entries) == SKILLS


async def built_on_a_clock(
    store: GatedStore, gather_delay: float, now: list[float], sleep: Callable[[float], Awaitable[None]]
) -> SkillCatalog:
    """A catalog whose wait runs on `now` and `sleep` (moved by the test), its manifest built."""
    catalog = SkillCatalog(
        store,
        manifest_key=LAYOUT.manifest_key,
        verify="never",
        gather_delay=gather_delay,
        monotonic=lambda: now[0],
        sleep=sleep,
    )
    store.gate.set()
    await catalog.aindex("shared", PREFIX)  # builds the manifest
    await catalog.aflush()
    return catalog


async def test_a_contended_library_gathers_the_next_callers_into_one_refresh_read_after_they_asked() -> None:
    """The wait and its one-second window run on a clock and a sleep the test moves by hand."""
    store = GatedStore()
    for sid in SKILLS:
        store.put_object(f"{PREFIX}{sid}/SKILL.md", skill_md(sid.rsplit("/", 1)[1]))
    now = [100.0]
    waits: list[float] = []
    released = asyncio.Event()

    async def held(seconds: float) -> None:  # the catalog's wait, until the test releases it
        waits.append(seconds)
        await released.wait()

    catalog = await built_on_a_clock(store, 1.0, now, held)
    # A caller alone never waits: its refresh asks at once.
    store.gate.clear()
    store.arrived.clear()
    alone = asyncio.ensure_future(catalog.aindex("shared", PREFIX))
    await store.arrived.wait()
    assert waits == []
    now[0] += 2.0  # that refresh takes 2 s: longer than gather_delay, so the wait below is all of it
    # Two callers share that refresh: the library is contended now.
    joiner = asyncio.ensure_future(catalog.aindex("shared", PREFIX))
    await asyncio.sleep(0)
    store.gate.set()
    await asyncio.gather(alone, joiner)

    # The next refresh waits before it asks; meanwhile another process adds a skill.
    async def ask() -> set[str]:
        return set((await catalog.aindex("shared", PREFIX)).entries)  # what this caller was answered

    gets = store.manifest_gets
    now[0] += 0.5  # within the window
    first = asyncio.ensure_future(ask())
    for _ in range(100):  # until the refresh is in its wait (a bounded number of turns)
        if waits:
            break
        await asyncio.sleep(0)
    assert waits == [1.0]
    other = SkillCatalog(store, manifest_key=LAYOUT.manifest_key, verify="always")
    store.put_object(f"{PREFIX}cat/new-one/SKILL.md", skill_md("new-one"))
    await other.aindex("shared", PREFIX)
    await other.aflush()
    assert store.manifest_gets == gets + 1  # the other process's read; ours has not asked yet
    later = [asyncio.ensure_future(ask()) for _ in range(5)]
    for _ in range(10):
        await asyncio.sleep(0)
    released.set()
    answers = await asyncio.gather(first, *later)
    assert store.manifest_gets == gets + 2  # one conditional GET for the six callers
    assert all("cat/new-one" in answer for answer in answers)  # read after every one of them asked
    # Past the window, a caller alone asks at once again.
    now[0] += 5.0
    released.clear()
    waits.clear()
    await catalog.aindex("shared", PREFIX)
    assert waits == []


async def test_a_contended_refresh_waits_only_as_long_as_the_last_refresh_took() -> None:
    """A 0.2 s wait of a library whose refresh takes 5 ms held every caller 40 round trips."""
    store = GatedStore()
    store.put_object(f"{PREFIX}a/SKILL.md", skill_md("a"))
    now = [100.0]
    waits: list[float] = []

    async def recorded(seconds: float) -> None:
        waits.append(seconds)

    catalog = await built_on_a_clock(store, 0.2, now, recorded)
    store.gate.clear()
    store.arrived.clear()
    alone = asyncio.ensure_future(catalog.aindex("shared", PREFIX))
    await store.arrived.wait()
    now[0] += 0.005  # this refresh's round trip: 5 ms
    joiner = asyncio.ensure_future(catalog.aindex("shared", PREFIX))  # shares it: the library is contended
    await asyncio.sleep(0)
    store.gate.set()
    await asyncio.gather(alone, joiner)
    gets = store.manifest_gets
    await catalog.aindex("shared", PREFIX)
    assert waits == [pytest.approx(0.005)]  # one round trip, not gather_delay
    assert store.manifest_gets == gets + 1  # and it still asked after the caller came


async def test_a_forced_refresh_is_not_satisfied_by_one_already_in_flight() -> None:
    store = GatedStore()
    store.put_object(f"{PREFIX}a/SKILL.md", skill_md("a"))
    catalog = SkillCatalog(store, manifest_key=LAYOUT.manifest_key, verify="never")
    store.gate.set()
    await catalog.aindex("shared", PREFIX)
    store.gate.clear()
    store.manifest_gets = 0
    store.arrived.clear()
    first = asyncio.ensure_future(catalog.aindex("shared", PREFIX))
    await store.arrived.wait()
    store.put_object(f"{PREFIX}b/SKILL.md", skill_md("b"))  # written after that refresh started
    forced = asyncio.ensure_future(catalog.aindex("shared", PREFIX, force=True))
    for _ in range(10):
        await asyncio.sleep(0)
    store.gate.set()
    await first
    index = await forced
    assert store.manifest_gets == 2
    assert sorted(index.entries) == ["a", "b"]


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)


@pytest.fixture
def seaweed_proxy(seaweed_bucket: SeaweedBucket) -> Iterator[tuple[SeaweedBucket, FaultProxy]]:
    with FaultProxy(seaweed_bucket.endpoint_url) as proxy:
        yield seaweed_bucket, proxy


def _store(bucket: SeaweedBucket, proxy: FaultProxy) -> S3ObjectStore:
    session = aioboto3.Session(
        aws_access_key_id=bucket.access_key, aws_secret_access_key=bucket.secret_key, region_name="us-east-1"
    )
    return S3ObjectStore(bucket.bucket, endpoint_url=proxy.url, region_name="us-east-1", session=session)


def _ranged(request: ProxyRequest) -> bool:
    return request.method == "GET" and request.header("Range") is not None


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_truncated_ranged_reads_are_retried_and_every_skill_is_indexed(
    seaweed_proxy: tuple[SeaweedBucket, FaultProxy],
) -> None:
    bucket, proxy = seaweed_proxy
    store = _store(bucket, proxy)
    try:
        for sid in SKILLS:
            await store.aput(f"{PREFIX}{sid}/SKILL.md", skill_md(sid.rsplit("/", 1)[1]))
        proxy.inject("truncate", count=len(SKILLS), match=_ranged)  # every head read is cut short once
        index = await SkillCatalog(store, verify="never").aindex("shared", PREFIX)
        assert sorted(sid for sid, e in index.entries.items() if e.info is not None) == SKILLS
        assert sum(r.fault == "truncate" for r in proxy.history) == len(SKILLS)
    finally:
        await store.aclose()


async def test_a_body_cut_short_seven_times_running_is_read_on_the_eighth_and_not_after(
    seaweed_proxy: tuple[SeaweedBucket, FaultProxy],
) -> None:
    # botocore's 4 attempts cover requests; a body cut short has its own budget (body_attempts,
    # 8 by default), so a cold index of thousands of heads survives a fifth of them cut short.
    bucket, proxy = seaweed_proxy
    store = _store(bucket, proxy)
    try:
        await store.aput(f"{PREFIX}a/SKILL.md", skill_md("a"))
        proxy.inject("truncate", count=7, match=_ranged)
        head = await store.aget_range(f"{PREFIX}a/SKILL.md", 0, 4096)
        assert head.data.decode().startswith("---\nname: a\n")
        assert sum(r.fault == "truncate" for r in proxy.history) == 7
        proxy.inject("truncate", count=8, match=_ranged)
        with pytest.raises(StoreUnavailable):
            await store.aget_range(f"{PREFIX}a/SKILL.md", 0, 4096)
    finally:
        await store.aclose()


async def test_a_failed_index_build_backs_off_instead_of_retrying_on_every_call(
    seaweed_proxy: tuple[SeaweedBucket, FaultProxy],
) -> None:
    bucket, proxy = seaweed_proxy
    store = _store(bucket, proxy)
    clock = Clock()
    try:
        await store.aput(f"{PREFIX}a/SKILL.md", skill_md("a"))
        catalog = SkillCatalog(store, manifest_key=LAYOUT.manifest_key, clock=clock, failure_backoff=5.0)
        proxy.inject("internal_error", count=None, match=match_request(method="GET"))
        with pytest.raises(StoreUnavailable):
            await catalog.aindex("shared", PREFIX)
        proxy.reset_counts()
        for _ in range(20):  # twenty model calls within the back-off: no request
            with pytest.raises(StoreUnavailable):
                await catalog.aindex("shared", PREFIX)
        assert proxy.total_requests == 0
        proxy.clear_faults()
        clock.now += 6.0
        good = await catalog.aindex("shared", PREFIX)
        assert sorted(good.entries) == ["a"]
        proxy.inject("internal_error", count=None, match=match_request(method="GET"))
        clock.now += 1.0
        with pytest.raises(StoreUnavailable):
            await catalog.aindex("shared", PREFIX)
        proxy.reset_counts()
        assert await catalog.aindex("shared", PREFIX) is good  # the last good index answers meanwhile
        assert proxy.total_requests == 0
    finally:
        await store.aclose()
