"""Every writer leaves the index current, and many tenants share one refresh of a library.

Pinned as request counts (`RequestCounter`), never as times: a fresh reader's first index
after a push, the first MCP `skills/list` page after a push, a rollback, and the
single-flight refresh (many concurrent callers, one conditional GET). Concurrency is
arranged with gates (an `asyncio.Event` a request waits on), not sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_harness import ANY, ListSkills

from s3skills._loop import run_sync
from s3skills.config import Config
from s3skills.errors import AccessDenied, CredentialsError
from s3skills.layout import KeyLayout
from s3skills.skills import SkillCatalog, SkillLibrary
from s3skills.storage import ListPage, ObjectBody, RequestCounter, S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, builders
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()
ANA = Tenant(user_id="ana")
PREFIX = LAYOUT.user_prefix("ana")
MANIFEST = LAYOUT.manifest_key(PREFIX)


def skill_md(name: str, description: str = "Does things") -> bytes:
    return builders.skill_md(name, description, body=f"# {name}\n\nInstructions.\n").encode()


def tree(root: Path, count: int, *, categories: int = 4, references: bool = False) -> Path:
    for i in range(count):
        folder = root / f"cat{i % categories}" / f"skill-{i:05d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_bytes(skill_md(f"skill-{i:05d}", f"Skill number {i}"))
        if references:
            (folder / "references").mkdir()
            (folder / "references" / "guide.md").write_bytes(b"# Guide\n")
    return root


def counted(store: Any) -> RequestCounter:
    counter = RequestCounter()
    store.add_request_hook(counter)
    return counter


def fresh_library(store: Any, **config: Any) -> SkillLibrary:
    """What a new process builds: nothing cached."""
    return SkillLibrary(store, Config(layout=LAYOUT, **config), tenant=lambda: ANA)


# -- the first reader after a write ---------------------------------------------------------------


def first_index_after_push(tmp_path: Path, count: int) -> tuple[int, RequestCounter]:
    store = MemoryObjectStore()
    report = run_sync(apush_tree(store, tree(tmp_path / "lib", count), PREFIX, concurrency=64))
    assert len(report.skills) == count
    counter = counted(store)
    skills = fresh_library(store).index()
    return len(skills), counter


def test_after_a_push_of_1000_skills_a_fresh_readers_first_index_is_one_get(tmp_path: Path) -> None:
    found, counter = first_index_after_push(tmp_path, 1000)
    assert found == 1000
    assert counter.counts == {"GetObject": 1}  # the manifest the push created: no LIST, no SKILL.md read


@pytest.mark.slow
def test_after_a_push_of_10000_skills_a_fresh_readers_first_index_is_one_get(tmp_path: Path) -> None:
    found, counter = first_index_after_push(tmp_path, 10_000)
    assert found == 10_000
    assert counter.counts == {"GetObject": 1}


def test_a_push_reads_back_no_skill_md_it_wrote(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    counter = counted(store)
    run_sync(apush_tree(store, tree(tmp_path / "lib", 200), PREFIX))
    # 1 LIST to plan; the writer's mark: the manifest's GET (404), the listing that builds it
    # (the library is still empty: 1 LIST) and its PUT; 200 PUTs; the book's GET (404) and PUT; the
    # manifest's last update (GET, PUT, clearing the mark): no GET of a SKILL.md.
    # Then each skill's version record: 1 ListObjectVersions and 1 conditional PUT.
    assert counter["GetObject"] == 3
    assert counter["PutObject"] == 200 + 3 + 200
    assert counter["ListObjectVersions"] == 200
    assert counter["ListObjectsV2"] == 1 + 1


def test_a_push_into_a_library_written_by_another_tool_indexes_all_of_it(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    for i in range(5):  # `aws s3 sync`: no manifest
        store.put_object(f"{PREFIX}old/tool-{i}/SKILL.md", skill_md(f"tool-{i}"))
    run_sync(apush_tree(store, tree(tmp_path / "lib", 10), PREFIX))
    counter = counted(store)
    ids = {s.id for s in fresh_library(store).index()}
    assert ids == {*(f"old/tool-{i}" for i in range(5)), *(f"cat{i % 4}/skill-{i:05d}" for i in range(10))}
    assert counter.counts == {"GetObject": 1}


def test_on_moto_a_push_leaves_a_manifest_whose_etags_match_the_listing(
    moto_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    store = S3ObjectStore(bucket, endpoint_url=moto_endpoint)
    run_sync(apush_tree(store, tree(tmp_path / "lib", 30), PREFIX))
    counter = counted(store)
    lib = fresh_library(store, verify="always")  # checks the manifest against a LIST now
    assert len(lib.index()) == 30
    lib.flush()
    assert counter["PutObject"] == 0  # the LIST agreed with every entry: nothing rewritten
    assert counter["GetObject"] == 1  # and no SKILL.md was read again
    run_sync(store.aclose_all())


async def test_on_moto_the_first_mcp_skills_list_page_after_a_push_is_at_most_5_requests(
    moto_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    from s3skills.serve.library_source import LibrarySkillSource
    from s3skills.serve.server import SkillsServer

    store = S3ObjectStore(bucket, endpoint_url=moto_endpoint)
    # 60 skills: more than one page (50 skills), so the page must come with a next cursor.
    await apush_tree(store, tree(tmp_path / "lib", 60, references=True), PREFIX)
    counter = counted(store)
    server = SkillsServer(LibrarySkillSource(fresh_library(store)), user_id="ana")
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(store.aclose)
        client = await stack.enter_async_context(Client(server.server))
        page = await client.session.send_request(ListSkills(params=None), ANY)
    assert len(page["skills"]) == 50
    assert page.get("nextCursor")
    # The manifest, one LIST of the page's folders, the digest book: no file read, nothing written.
    assert sum(counter.counts.values()) <= 5
    assert counter["PutObject"] == 0


def test_library_writers_create_the_manifest_when_there_is_none() -> None:
    store = MemoryObjectStore()
    for i in range(3):
        store.put_object(f"{PREFIX}cat/s{i}/SKILL.md", skill_md(f"s{i}"))
    lib = fresh_library(store, manifest=True)
    lib.create("tools/new", {"SKILL.md": skill_md("new")})
    counter = counted(store)
    assert {s.id for s in fresh_library(store).index()} == {"cat/s0", "cat/s1", "cat/s2", "tools/new"}
    assert counter.counts == {"GetObject": 1}


def test_enable_and_remove_leave_the_index_current_without_reading_back_what_they_wrote() -> None:
    store = MemoryObjectStore()
    lib = fresh_library(store)
    lib.create("cat/a", {"SKILL.md": skill_md("a")})
    lib.create("cat/b", {"SKILL.md": skill_md("b")})
    counter = counted(store)
    assert lib.set_enabled("cat/a", False) is True
    # The SKILL.md's GET and conditional PUT, then the manifest's GET and PUT: no ranged re-read;
    # and the version record (its ListObjectVersions and conditional PUT).
    assert counter.counts == {"GetObject": 2, "PutObject": 3, "ListObjectVersions": 1}
    lib.remove("cat/b")
    counter.reset()
    everything = {s.id: s.metadata.enabled for s in fresh_library(store).index(include_disabled=True)}
    assert everything == {"cat/a": False}
    assert counter.counts == {"GetObject": 1}


def test_a_rollback_leaves_the_index_showing_the_restored_version(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from s3skills.cli import main

    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    cli = ["--bucket", bucket, "--user", "ana", "--endpoint-url", moto_endpoint, "--json"]
    store = S3ObjectStore(bucket, endpoint_url=moto_endpoint)
    key = f"{PREFIX}pdf/SKILL.md"
    s3_client.put_object(Bucket=bucket, Key=key, Body=skill_md("pdf", "Version one"))
    fresh_library(store).note_changed(["pdf"])  # the manifest exists
    s3_client.put_object(Bucket=bucket, Key=key, Body=skill_md("pdf", "Version two"))
    fresh_library(store).note_changed(["pdf"])
    capsys.readouterr()
    assert main([*cli, "history", "pdf"]) == 0
    _, one = (v["version"] for v in json.loads(capsys.readouterr().out)["versions"])
    assert main([*cli, "rollback", "pdf", "--to", one]) == 0
    counter = counted(store)
    assert fresh_library(store, verify="never").get("pdf").metadata.description == "Version one"
    assert counter.counts == {"GetObject": 1}
    run_sync(store.aclose_all())


def test_a_listing_error_reaches_the_caller_with_its_cause() -> None:
    class Broken(MemoryObjectStore):
        async def alist_pages(  # type: ignore[override]
            self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
        ) -> AsyncIterator[ListPage]:
            try:
                raise LookupError("The config profile (nobody) could not be found")
            except LookupError as exc:
                raise CredentialsError("list: no such profile") from exc
            yield  # an async generator

    with pytest.raises(CredentialsError) as caught:
        run_sync(catalog_of(Broken()).aindex("user", PREFIX))
    assert isinstance(caught.value.__cause__, LookupError)  # what the CLI shows ("AWS profile not found")


# -- a cold index with no manifest ----------------------------------------------------------------------


class PagedStore(MemoryObjectStore):
    """A memory store whose listing holds its second page until a SKILL.md has been read."""

    def __init__(self) -> None:
        super().__init__()
        self.first_read = asyncio.Event()
        self.reads_before_last_page = -1
        self.reads = 0

    async def aget_range(self, key: str, start: int, length: int) -> ObjectBody:
        self.reads += 1
        self.first_read.set()
        return await super().aget_range(key, start, length)

    async def alist_pages(  # type: ignore[override]
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        if page_size < 1000:  # the cold index's small first page: as a server lists it
            async for page in super().alist_pages(prefix, delimiter=delimiter, page_size=page_size):
                yield page
            return
        pages = [page async for page in super().alist_pages(prefix, delimiter=delimiter, page_size=page_size)]
        for n, page in enumerate(pages):
            if n == len(pages) - 1 and n > 0:
                await asyncio.wait_for(self.first_read.wait(), 60)  # a guard against a hang, not a timing
                self.reads_before_last_page = self.reads
            yield page


async def test_a_cold_index_without_a_manifest_reads_skill_md_heads_while_the_listing_still_arrives() -> None:
    store = PagedStore()
    for i in range(1500):  # two listing pages
        store.put_object(f"{PREFIX}cat{i % 3}/s{i:04d}/SKILL.md", skill_md(f"s{i:04d}"))
    counter = counted(store)
    catalog = catalog_of(store)
    index = await catalog.aindex("user", PREFIX)
    await catalog.aflush()
    assert len(index.entries) == 1500
    assert store.reads_before_last_page > 0
    # The manifest's GET (404), a small first LIST page (the reads start a round trip in), then
    # two pages of 1,000, one ranged GET per skill, the manifest's PUT.
    assert counter.counts == {"GetObject": 1 + 1500, "ListObjectsV2": 1 + 2, "PutObject": 1}


# -- many tenants at once: one refresh in flight per library ------------------------------------------


class GatedStore(MemoryObjectStore):
    """A memory store whose GETs of one key, and PUTs of another, wait for a gate to open."""

    def __init__(self, get_key: str | None = None, put_key: str | None = None) -> None:
        super().__init__()
        self.get_key, self.put_key = get_key, put_key
        self.get_gate, self.put_gate = asyncio.Event(), asyncio.Event()
        self.get_entered, self.put_entered = asyncio.Event(), asyncio.Event()

    def hold_gets(self) -> None:
        """From now on the gated GET waits (and `get_entered` says when one does)."""
        self.get_gate.clear()
        self.get_entered.clear()

    async def aget(self, key: str, **options: Any) -> ObjectBody:  # type: ignore[override]
        if key == self.get_key:
            self.get_entered.set()
            await self.get_gate.wait()
        return await super().aget(key, **options)

    async def aput(self, key: str, data: bytes, **options: Any) -> str:  # type: ignore[override]
        if key == self.put_key:
            self.put_entered.set()
            await self.put_gate.wait()
        return await super().aput(key, data, **options)


def catalog_of(store: Any, **options: Any) -> SkillCatalog:
    return SkillCatalog(store, manifest_key=LAYOUT.manifest_key, **options)


async def built(store: MemoryObjectStore) -> None:
    catalog = catalog_of(store)
    await catalog.aindex("shared", PREFIX)
    await catalog.aflush()


async def test_two_hundred_concurrent_callers_share_one_conditional_get_of_a_library() -> None:
    store = GatedStore(get_key=MANIFEST)
    for i in range(5):
        store.put_object(f"{PREFIX}cat/s{i}/SKILL.md", skill_md(f"s{i}"))
    store.get_gate.set()
    await built(store)
    store.hold_gets()
    catalog = catalog_of(store)
    counter = counted(store)
    callers = [asyncio.create_task(catalog.aindex("shared", PREFIX)) for _ in range(200)]
    await store.get_entered.wait()  # the first caller's GET is in flight; every other caller has joined it
    store.get_gate.set()
    indexes = await asyncio.gather(*callers)
    assert counter.counts == {"GetObject": 1}
    assert all(index is indexes[0] and len(index.entries) == 5 for index in indexes)


async def test_a_caller_after_an_invalidation_does_not_take_the_older_refreshs_answer() -> None:
    store = GatedStore(get_key=MANIFEST)
    store.put_object(f"{PREFIX}cat/a/SKILL.md", skill_md("a"))
    store.get_gate.set()
    await built(store)
    store.hold_gets()
    catalog = catalog_of(store, verify="never")
    counter = counted(store)
    first = asyncio.create_task(catalog.aindex("shared", PREFIX))
    await store.get_entered.wait()
    catalog.invalidate(PREFIX)  # a write happened after that refresh began
    second = asyncio.create_task(catalog.aindex("shared", PREFIX))
    store.get_gate.set()
    await asyncio.gather(first, second)
    assert counter.counts == {"GetObject": 2}  # the second caller refreshed again


async def test_a_cancelled_caller_does_not_cancel_the_refresh_the_others_wait_for() -> None:
    store = GatedStore(get_key=MANIFEST)
    store.put_object(f"{PREFIX}cat/a/SKILL.md", skill_md("a"))
    store.get_gate.set()
    await built(store)
    store.hold_gets()
    catalog = catalog_of(store)
    first = asyncio.create_task(catalog.aindex("shared", PREFIX))
    await store.get_entered.wait()
    others = [asyncio.create_task(catalog.aindex("shared", PREFIX)) for _ in range(3)]
    await asyncio.sleep(0)  # let them join (a yield, not a wait for time)
    first.cancel()
    store.get_gate.set()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert all(len(index.entries) == 1 for index in await asyncio.gather(*others))


async def test_a_failed_refresh_reaches_every_caller_waiting_on_it_and_the_next_one_retries_after_the_back_off() -> (
    None
):
    store = GatedStore(get_key=MANIFEST)
    store.put_object(f"{PREFIX}cat/a/SKILL.md", skill_md("a"))
    now = [1_000_000.0]
    catalog = catalog_of(store, clock=lambda: now[0], failure_backoff=2.0)
    store.fail_next("ListObjectsV2", AccessDenied("list: the store answered AccessDenied"))
    callers = [asyncio.create_task(catalog.aindex("shared", PREFIX)) for _ in range(3)]
    await store.get_entered.wait()
    store.get_gate.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, AccessDenied) for r in results)
    counter = counted(store)
    with pytest.raises(AccessDenied):  # within the back-off: the failure again, no request
        await catalog.aindex("shared", PREFIX)
    assert counter.counts == {}
    now[0] += 2.5
    assert len((await catalog.aindex("shared", PREFIX)).entries) == 1


async def test_the_manifest_a_cold_index_rebuilds_does_not_delay_its_answer() -> None:
    store = GatedStore(put_key=MANIFEST)
    for i in range(4):
        store.put_object(f"{PREFIX}cat/s{i}/SKILL.md", skill_md(f"s{i}"))
    catalog = catalog_of(store)
    index = await catalog.aindex("user", PREFIX)  # answered while the manifest's PUT is held
    assert len(index.entries) == 4
    await store.put_entered.wait()
    assert MANIFEST not in set(store.keys())
    store.put_gate.set()
    await catalog.aflush()
    assert MANIFEST in set(store.keys())
    counter = counted(store)
    assert len((await catalog_of(store).aindex("user", PREFIX)).entries) == 4
    assert counter.counts == {"GetObject": 1}
