"""The library manifest: the index in one request, verified by mode, kept current by writers.

Request counts are pinned on the memory store and on moto; concurrent writers run on
SeaweedFS (conditional PUTs). Keys are arranged in the default layout
(`users/{user_id}/skills/`, manifest at `users/{user_id}/.s3skills/manifest.json`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aioboto3
import pytest

from s3skills._loop import run_sync
from s3skills.config import Config, VerifyMode
from s3skills.errors import SkillError
from s3skills.layout import KeyLayout
from s3skills.skills import SkillCatalog, SkillLibrary
from s3skills.skills.index.writers import anote_changed
from s3skills.storage import ListPage, RequestCounter, S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, SeaweedBucket, builders
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()  # the default layout: users/{user_id}/skills/
ANA = Tenant(user_id="ana")
PREFIX = "users/ana/skills/"
MANIFEST = "users/ana/.s3skills/manifest.json"


def skill_md(name: str, description: str = "Does things", **extra: str) -> bytes:
    return builders.skill_md(name, description, body=f"# {name}\n\nInstructions.\n", **extra).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class InFlightStore(MemoryObjectStore):
    """A memory store that records how many LISTs were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.max_in_flight = 0
        self._guard = threading.Lock()

    async def alist_pages(  # type: ignore[override]
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        with self._guard:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # a round trip, during which other LISTs may start
            async for page in super().alist_pages(prefix, delimiter=delimiter, page_size=page_size):
                yield page
        finally:
            with self._guard:
                self.in_flight -= 1


def library(
    store: Any, *, verify: VerifyMode = "interval", ttl: float | None = None, clock: Any = None
) -> SkillLibrary:
    config = Config(layout=LAYOUT, catalog_ttl=ttl, verify=verify)
    catalog = SkillCatalog(
        store,
        limits=config.limits,
        ttl=ttl,
        manifest_key=LAYOUT.manifest_key,
        verify=verify,
        verify_interval=config.verify_interval,
        **({"clock": clock} if clock is not None else {}),
    )
    return SkillLibrary(store, config, catalog=catalog, tenant=lambda: ANA)


def built(store: Any, **options: Any) -> SkillLibrary:
    """A library that has indexed once, and the manifest it rebuilt written (in the background)."""
    lib = library(store, **options)
    lib.index()
    lib.flush()
    return lib


def fill(store: MemoryObjectStore, categories: int, per_category: int) -> None:
    for c in range(categories):
        for i in range(per_category):
            store.put_object(f"{PREFIX}cat{c}/skill-{i}/SKILL.md", skill_md(f"skill-{i}"))


def counted(store: Any) -> RequestCounter:
    counter = RequestCounter()
    store.add_request_hook(counter)
    return counter


# -- the key -----------------------------------------------------------------------------------


def test_the_manifest_is_a_sibling_of_skills_outside_every_namespace() -> None:
    assert LAYOUT.manifest_key(PREFIX) == MANIFEST
    assert KeyLayout.seeds().manifest_key("ana/skills/") == "ana/.s3skills/manifest.json"
    assert LAYOUT.manifest_key("shared/acme/skills/") == "shared/acme/.s3skills/manifest.json"
    clashing = KeyLayout(
        user_skills="{user_id}/skills/", workspace="{user_id}/{thread_id}/", shared_skills="s/{library}/skills/"
    )
    with pytest.raises(ValueError, match="inside workspace"):
        clashing.manifest_key("ana/skills/")


# -- readers: request counts on the memory store ---------------------------------------------------


def test_a_cold_index_with_a_current_manifest_is_one_get() -> None:
    store = MemoryObjectStore()
    fill(store, 3, 20)
    built(store)  # builds the manifest (LISTs, heads, 1 PUT)
    assert MANIFEST in set(store.keys())
    counter = counted(store)
    skills = library(store).index()  # a new process
    assert len(skills) == 60
    assert counter.counts == {"GetObject": 1}


def test_building_the_manifest_lists_page_by_page_and_writes_it_once() -> None:
    store = InFlightStore()
    fill(store, 4, 5)
    counter = counted(store)
    built(store)
    # 1 GET (404), 1 LIST page (reads start as pages arrive), 1 ranged GET per skill, 1 PUT
    assert counter.counts == {"GetObject": 1 + 20, "ListObjectsV2": 1, "PutObject": 1}


def test_a_warm_index_with_an_unchanged_manifest_is_one_conditional_get() -> None:
    store = MemoryObjectStore()
    fill(store, 2, 10)
    lib = library(store)
    lib.index()
    lib.flush()  # the manifest it rebuilt is written after the answer
    counter = counted(store)
    assert len(lib.index()) == 20
    assert counter.counts == {"GetObject": 1}


def test_within_the_ttl_an_index_costs_nothing() -> None:
    store = MemoryObjectStore()
    fill(store, 2, 10)
    lib = library(store, ttl=60)
    lib.index()
    lib.flush()  # the manifest it rebuilt is written after the answer
    counter = counted(store)
    lib.index()
    assert counter.counts == {}


def test_always_lists_every_category_concurrently_and_reads_exactly_the_changed_skill_md() -> None:
    store = InFlightStore()
    fill(store, 5, 8)
    built(store)
    store.put_object(f"{PREFIX}cat3/skill-2/SKILL.md", skill_md("skill-2", "Edited outside s3skills"))
    lib = library(store, verify="always")
    store.max_in_flight = 0
    counter = counted(store)
    skills = {s.id: s for s in lib.index()}
    assert skills["cat3/skill-2"].metadata.description == "Edited outside s3skills"
    lib.flush()
    # the manifest, the folder LIST, 5 category LISTs (concurrent), 1 ranged GET, the rewrite
    assert counter.counts == {"GetObject": 2, "ListObjectsV2": 6, "PutObject": 1}
    assert store.max_in_flight == 5


def test_a_damaged_or_foreign_manifest_is_rebuilt_without_an_error() -> None:
    store = MemoryObjectStore()
    fill(store, 1, 3)
    for junk in (b"{not json", json.dumps({"schema": "other/9", "skills": {}}).encode(), b"[]"):
        store.put_object(MANIFEST, junk)
        lib = library(store, verify="never")
        assert len(lib.index()) == 3
        lib.flush()
        assert json.loads(store._get(MANIFEST).data)["schema"] == "s3skills.manifest/1"


def test_a_forged_manifest_cannot_name_keys_outside_its_library_nor_enable_a_skill() -> None:
    store = MemoryObjectStore()
    store.put_object(f"{PREFIX}pdf/SKILL.md", skill_md("pdf"))
    store.put_object(f"{PREFIX}secret/SKILL.md", skill_md("secret", enabled="false"))
    store.put_object(f"{PREFIX}secret/key.txt", b"classified")
    store.put_object("users/bob/skills/private/SKILL.md", skill_md("private"))
    built(store)
    doc = json.loads(store._get(MANIFEST).data)
    doc["skills"]["secret"]["metadata"]["enabled"] = True  # forged: the real file says disabled
    doc["skills"]["../../bob/skills/private"] = {"key": "users/bob/skills/private/SKILL.md", "etag": "x", "size": 1}
    doc["skills"]["private"] = {"key": "users/bob/skills/private/SKILL.md", "etag": "x", "size": 1, "metadata": {}}
    store.put_object(MANIFEST, json.dumps(doc))
    lib = library(store, verify="never")
    ids = [s.id for s in lib.index()]
    assert "private" not in ids
    assert "../../bob/skills/private" not in ids
    with pytest.raises(SkillError, match="not found"):
        lib.load("secret")  # the real SKILL.md decides, and the index is reconciled
    with pytest.raises(SkillError):
        lib.open("secret", "key.txt")
    assert "secret" not in [s.id for s in lib.index()]


def test_loading_a_skill_whose_skill_md_is_gone_answers_not_found_and_reconciles() -> None:
    store = MemoryObjectStore()
    fill(store, 1, 3)
    lib = library(store, verify="never")
    lib.index()
    lib.flush()  # the manifest it rebuilt is written after the answer
    run_sync(store.adelete_many([f"{PREFIX}cat0/skill-1/SKILL.md"]))  # out of band
    assert "cat0/skill-1" in [s.id for s in lib.index()]  # trusted until someone notices
    with pytest.raises(SkillError, match="not found"):
        lib.load("cat0/skill-1")
    assert "cat0/skill-1" not in [s.id for s in lib.index()]
    lib.flush()
    assert "cat0/skill-1" not in [s.id for s in library(store, verify="never").index()]  # manifest rewritten


def test_interval_shows_an_out_of_band_write_after_the_interval() -> None:
    store = MemoryObjectStore()
    fill(store, 1, 2)
    clock = Clock()
    lib = library(store, clock=clock)
    lib.index()
    lib.flush()  # the manifest it rebuilt is written after the answer
    store.put_object(f"{PREFIX}cat0/new/SKILL.md", skill_md("new"))
    clock.now += 299
    counter = counted(store)
    assert "cat0/new" not in [s.id for s in lib.index()]
    assert counter.counts == {"GetObject": 1}
    clock.now += 2
    assert "cat0/new" in [s.id for s in lib.index()]
    assert counter["ListObjectsV2"] == 2  # the folder LIST and the one category


# -- writers ------------------------------------------------------------------------------------


def test_library_writers_keep_the_manifest_current() -> None:
    store = MemoryObjectStore()
    fill(store, 1, 2)
    lib = library(store, verify="never")
    lib.index()
    lib.flush()  # the manifest it rebuilt is written after the answer
    lib.create("tools/new", {"SKILL.md": skill_md("new"), "scripts/main.py": b"print(1)\n"})
    assert lib.set_enabled("cat0/skill-0", False) is True
    assert lib.remove("cat0/skill-1") == 1
    fresh = library(store, verify="never")
    counter = counted(store)
    everything = {s.id: s.metadata.enabled for s in fresh.index(include_disabled=True)}
    assert everything == {"cat0/skill-0": False, "tools/new": True}
    assert counter.counts == {"GetObject": 1}


def test_a_writer_without_a_manifest_creates_it_whole_so_the_next_reader_pays_one_get() -> None:
    store = MemoryObjectStore()
    fill(store, 2, 3)  # written by another tool: no manifest
    store.put_object(f"{PREFIX}pdf/SKILL.md", skill_md("pdf"))
    assert run_sync(anote_changed(store, PREFIX, ["pdf"])) is True
    assert MANIFEST in set(store.keys())
    counter = counted(store)
    assert {s.id for s in library(store).index()} == {"pdf", *(f"cat{c}/skill-{i}" for c in range(2) for i in range(3))}
    assert counter.counts == {"GetObject": 1}


def test_a_writer_that_may_not_create_the_manifest_leaves_it_for_the_next_reader() -> None:
    store = MemoryObjectStore()
    store.put_object(f"{PREFIX}pdf/SKILL.md", skill_md("pdf"))
    assert run_sync(anote_changed(store, PREFIX, ["pdf"], create=False)) is True
    assert MANIFEST not in set(store.keys())


class HeldManifestStore(MemoryObjectStore):
    """Holds the first manifest PUT until `release` is set: a reader's background write, delayed."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.held = False

    async def aput(self, key: str, data: bytes, **kwargs: Any) -> str:
        if key == MANIFEST and not self.held:
            self.held = True
            await self.release.wait()
        return await super().aput(key, data, **kwargs)


async def test_a_background_manifest_write_that_merged_another_writers_skill_leaves_the_index_showing_it() -> None:
    store = HeldManifestStore()
    fill(store, 1, 3)
    reader = SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda: ANA)
    assert len(await reader.aindex()) == 3  # cold: its rebuilt manifest waits to be written
    writer = SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda: ANA)  # another process
    await writer.acreate("cat0/late", {"SKILL.md": skill_md("late")})
    store.release.set()
    await reader.aflush()  # its write met the writer's manifest and merged the new skill into it
    assert "cat0/late" in json.loads((await store.aget(MANIFEST)).data)["skills"]
    assert "cat0/late" in [s.id for s in await reader.aindex()]


def test_a_writer_hands_over_the_bytes_it_wrote_instead_of_reading_them_back() -> None:
    store = MemoryObjectStore()
    fill(store, 1, 2)
    built(store)
    data = skill_md("pdf", "Handed over")
    etag = run_sync(store.aput(f"{PREFIX}pdf/SKILL.md", data))
    counter = counted(store)
    assert run_sync(anote_changed(store, PREFIX, ["pdf"], written={"pdf": (data, etag)})) is True
    assert counter.counts == {"GetObject": 1, "PutObject": 1}  # the manifest's read and write: no SKILL.md read
    assert library(store).get("pdf").metadata.description == "Handed over"


# -- moto --------------------------------------------------------------------------------------------


@pytest.fixture
def moto_store(moto_endpoint: str, bucket: str) -> S3ObjectStore:
    return S3ObjectStore(bucket, endpoint_url=moto_endpoint)


def test_on_moto_cold_is_one_get_and_warm_is_one_304(moto_store: S3ObjectStore, s3_client: Any, bucket: str) -> None:
    for c in range(3):
        for i in range(4):
            s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}cat{c}/s{i}/SKILL.md", Body=skill_md(f"s{i}"))
    built(moto_store)
    counter = counted(moto_store)
    lib = library(moto_store)
    assert len(lib.index()) == 12
    assert counter.counts == {"GetObject": 1}
    counter.reset()
    assert len(lib.index()) == 12
    assert counter.counts == {"GetObject": 1}  # answered 304: see the next test for the body
    ttl = library(moto_store, ttl=60)
    ttl.index()
    ttl.flush()  # the manifest it rebuilt is written after the answer
    counter.reset()
    ttl.index()
    assert counter.counts == {}


def test_on_moto_an_unchanged_manifest_answers_304(moto_store: S3ObjectStore, s3_client: Any, bucket: str) -> None:
    from s3skills.storage import NotModified

    s3_client.put_object(Bucket=bucket, Key=MANIFEST, Body=b"{}")
    etag = s3_client.head_object(Bucket=bucket, Key=MANIFEST)["ETag"].strip('"')
    with pytest.raises(NotModified):
        run_sync(moto_store.aget(MANIFEST, if_none_match=etag))
    assert run_sync(moto_store.aget(MANIFEST, if_none_match="0" * 32)).data == b"{}"


def test_on_moto_after_a_push_the_next_index_shows_it_with_no_list(moto_store: S3ObjectStore, tmp_path: Path) -> None:
    (tmp_path / "lib" / "pdf").mkdir(parents=True)
    (tmp_path / "lib" / "pdf" / "SKILL.md").write_bytes(skill_md("pdf", "Version one"))
    run_sync(apush_tree(moto_store, tmp_path / "lib", PREFIX))
    lib = library(moto_store)
    assert lib.get("pdf").metadata.description == "Version one"
    (tmp_path / "lib" / "pdf" / "SKILL.md").write_bytes(skill_md("pdf", "Version two"))
    run_sync(apush_tree(moto_store, tmp_path / "lib", PREFIX))
    counter = counted(moto_store)
    assert lib.get("pdf").metadata.description == "Version two"
    assert counter.counts == {"GetObject": 1}


def test_on_moto_an_out_of_band_put_shows_at_once_with_always(
    moto_store: S3ObjectStore, s3_client: Any, bucket: str
) -> None:
    s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}pdf/SKILL.md", Body=skill_md("pdf"))
    built(moto_store)
    s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}docs/new/SKILL.md", Body=skill_md("new"))
    assert "docs/new" not in [s.id for s in library(moto_store, verify="never").index()]
    assert "docs/new" in [s.id for s in library(moto_store, verify="always").index()]


# -- SeaweedFS: concurrent writers ---------------------------------------------------------------------


@pytest.mark.seaweedfs
def test_eight_concurrent_writers_lose_no_manifest_entry(seaweed_bucket: SeaweedBucket) -> None:
    session = aioboto3.Session(
        aws_access_key_id=seaweed_bucket.access_key,
        aws_secret_access_key=seaweed_bucket.secret_key,
        region_name="us-east-1",
    )
    stores = [
        S3ObjectStore(seaweed_bucket.bucket, endpoint_url=seaweed_bucket.endpoint_url, session=session)
        for _ in range(8)
    ]
    run_sync(stores[0].aput(f"{PREFIX}base/SKILL.md", skill_md("base")))
    built(stores[0])  # the manifest exists

    async def writers() -> list[bool]:
        async def one(i: int) -> bool:
            await stores[i].aput(f"{PREFIX}w/skill-{i}/SKILL.md", skill_md(f"skill-{i}"))
            return await anote_changed(stores[i], PREFIX, [f"w/skill-{i}"], manifest_key=MANIFEST)

        return await asyncio.gather(*(one(i) for i in range(8)))

    assert all(run_sync(writers()))
    counter = counted(stores[0])
    ids = {s.id for s in library(stores[0], verify="never").index()}
    assert ids == {"base", *(f"w/skill-{i}" for i in range(8))}
    assert counter.counts == {"GetObject": 1}
