"""`skills/list` at library scale: pages listed per library, digests recalled from the digest book.

The request logs come from `KeyLogStore` (every key asked for); the page files come from
`SkillLibrary.afiles_many`, checked against `afiles` on every store kind, SeaweedFS included
(it does not list keys in S3's byte order).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from keylog import KeyLogStore
from mcp.client.client import Client
from mcp_harness import list_all

from s3skills.config import Config
from s3skills.errors import AccessDenied
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.skills.index.digests import BOOK_SCHEMA, DigestBooks, Record, book_key, decode_book, encode_book
from s3skills.storage import ObjectStore, RequestCounter
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md, write_file
from s3skills.transfer import apush_tree

LIBRARY = "users/ana/skills/"
BOOK = "users/ana/.s3skills/digests.json"


def seed(store: MemoryObjectStore, categories: int, per_category: int) -> dict[str, bytes]:
    """`categories * per_category` skills of three files each; returns every file by key."""
    files: dict[str, bytes] = {}
    for c in range(categories):
        for i in range(per_category):
            folder = f"{LIBRARY}cat-{c:02d}/skill-{i:03d}/"
            files[folder + "SKILL.md"] = skill_md(f"skill-{i:03d}", f"Skill {i} of category {c}.").encode()
            files[folder + "references/guide.md"] = f"# Guide {c}/{i}\n".encode()
            files[folder + "assets/logo.bin"] = bytes([c, i % 256, 0, 255]) * 8
    for key, data in files.items():
        store.put_object(key, data)
    return files


def server_on(store: ObjectStore, **config: Any) -> SkillsServer:
    """A server as a new process builds it: nothing cached."""
    return SkillsServer(LibrarySkillSource(SkillLibrary(store, Config(**config))), user_id="ana")


async def list_everything(store: ObjectStore, **config: Any) -> tuple[list[dict[str, Any]], int]:
    """Every entry as a fresh server lists it; it exits as a server does (its manifest stored)."""
    skills = server_on(store, **config)
    async with Client(skills.server) as client:
        listed = await list_all(client.session)
    library = skills.source.library  # type: ignore[attr-defined]
    await library.aflush()  # the manifest an index rebuilt is written after its answer
    return listed


def digests_are_right(entries: list[dict[str, Any]], files: dict[str, bytes]) -> None:
    for entry in entries:
        for resource in entry["resources"]:
            data = files[LIBRARY + resource["uri"].removeprefix("skill://")]
            assert resource["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
            assert resource["size"] == len(data)


@pytest.mark.slow
async def test_a_cold_server_lists_a_thousand_skills_without_reading_one_of_their_files() -> None:
    store = KeyLogStore()
    files = seed(store, categories=10, per_category=100)

    first, pages = await list_everything(store)  # the first listing ever hashes each file once
    hashed = [key for op, key in store.take() if op == "GetObject" and key.startswith(LIBRARY)]
    assert len(first) == 1000
    assert pages == 20
    assert sorted(hashed) == sorted(files)

    again, _ = await list_everything(store)  # another process: its caches are empty
    log = store.take()
    assert again == first
    digests_are_right(again, files)
    assert not [key for op, key in log if op == "GetObject" and key.startswith(LIBRARY)]
    assert not [key for op, key in log if op == "PutObject"]  # nothing new to record
    lists = [prefix for op, prefix in log if op == "ListObjectsV2"]
    gets = [key for op, key in log if op == "GetObject"]
    # Per page: one LIST of the category folder (300 keys), the manifest's and the book's GET.
    assert len(lists) <= pages
    assert all(p.startswith(LIBRARY + "cat-") for p in lists)
    assert len(gets) <= 2 * pages + 1
    assert set(gets) <= {BOOK, "users/ana/.s3skills/manifest.json"}


async def test_a_page_of_a_flat_library_is_one_listing_of_the_prefix_its_skills_share() -> None:
    store = KeyLogStore()
    for i in range(120):
        store.put_object(f"{LIBRARY}skill-{i:03d}/SKILL.md", skill_md(f"skill-{i:03d}", "A flat one."))
    store.put_object("users/ana/.s3skills/manifest.json", b"{}")  # damaged: the index is rebuilt first
    _, pages = await list_everything(store)
    log = store.take()
    assert pages == 3
    # The rebuild lists the library itself (its manifest is written after the first answer).
    lists = [prefix for op, prefix in log if op == "ListObjectsV2" and prefix != LIBRARY]
    # One LIST per page, of the key prefix its skills share (skill-000..049: "skill-0").
    assert lists == [LIBRARY + "skill-0", LIBRARY + "skill-0", LIBRARY + "skill-1"]


async def test_a_file_changed_in_place_is_hashed_again_and_its_record_replaced() -> None:
    store = KeyLogStore()
    files = seed(store, categories=1, per_category=3)
    await list_everything(store)
    changed = LIBRARY + "cat-00/skill-001/references/guide.md"
    files[changed] = b"# Guide 0/9\n"  # the same size, other bytes: only the ETag tells
    store.put_object(changed, files[changed])
    store.take()

    entries, _ = await list_everything(store)
    hashed = [key for op, key in store.take() if op == "GetObject" and key.startswith(LIBRARY)]
    # Before opening a file of a skill its index took from the manifest (a cache that may lie),
    # the library reads that skill's SKILL.md once to confirm it is enabled.
    assert hashed == [LIBRARY + "cat-00/skill-001/SKILL.md", changed]
    digests_are_right(entries, files)
    record = decode_book((await store.aget(BOOK)).data)["cat-00/skill-001/references/guide.md"]
    assert record.sha256 == hashlib.sha256(files[changed]).hexdigest()


async def test_a_pushed_library_is_listed_by_a_cold_server_without_reading_one_of_its_files(tmp_path: Path) -> None:
    files: dict[str, bytes] = {}
    for i in range(3):
        folder = f"cat/skill-{i}/"
        files[LIBRARY + folder + "SKILL.md"] = skill_md(f"skill-{i}", f"Pushed skill {i}.", version="1.0").encode()
        files[LIBRARY + folder + "assets/data.bin"] = bytes(range(256)) * (i + 1)
    for key, data in files.items():
        write_file(tmp_path, key[len(LIBRARY) :], data)
    store = KeyLogStore()
    await apush_tree(store, tmp_path, LIBRARY)
    book = decode_book((await store.aget(BOOK)).data)
    frontmatter = book["cat/skill-0/SKILL.md"].frontmatter
    assert frontmatter == {"name": "skill-0", "description": "Pushed skill 0.", "version": 1.0}  # YAML's types
    store.take()

    entries, _ = await list_everything(store)
    log = store.take()
    assert len(entries) == 3
    digests_are_right(entries, files)
    # The index reads each SKILL.md's head (GetRange); no file is read whole to be hashed.
    assert not [key for op, key in log if op == "GetObject" and key.startswith(LIBRARY)]


@pytest.mark.parametrize(
    "damage",
    [
        b"{not json",
        b"[]",
        b'{"schema": "s3skills.digests/99", "files": {}}',
        b"\xff\xfe binary",
        b'{"schema": "' + BOOK_SCHEMA.encode() + b'", "files": {"cat-00/skill-000/SKILL.md": {"etag": 1}}}',
    ],
)
async def test_a_damaged_book_costs_reads_never_a_wrong_digest(damage: bytes) -> None:
    store = KeyLogStore()
    files = seed(store, categories=1, per_category=2)
    store.put_object(BOOK, damage)

    entries, _ = await list_everything(store)
    assert len(entries) == 2
    digests_are_right(entries, files)
    assert len(decode_book((await store.aget(BOOK)).data)) == len(files)  # rewritten whole


async def test_a_record_of_another_version_is_not_trusted() -> None:
    store = KeyLogStore()
    files = seed(store, categories=1, per_category=1)
    rel = "cat-00/skill-000/references/guide.md"
    stale = Record(etag="0" * 32, size=len(files[LIBRARY + rel]), sha256="ab" * 32)
    store.put_object(BOOK, encode_book({rel: stale}))

    entries, _ = await list_everything(store)
    digests_are_right(entries, files)


class ReadOnlyBooks(MemoryObjectStore):
    """A store where the server's credentials may not write under `.s3skills/`."""

    async def aput(self, key: str, data: bytes, **options: Any) -> str:
        if "/.s3skills/" in key:
            raise AccessDenied(f"PutObject {key}: Access Denied")
        return await super().aput(key, data, **options)


async def test_a_server_that_may_not_write_the_book_still_serves_right_digests() -> None:
    store = ReadOnlyBooks()
    files = seed(store, categories=1, per_category=4)
    entries, _ = await list_everything(store)
    assert len(entries) == 4
    digests_are_right(entries, files)
    assert not await store.aexists(BOOK)


async def test_concurrent_writers_of_one_book_lose_no_record() -> None:
    store = MemoryObjectStore()
    one, two = DigestBooks(store, Config().layout), DigestBooks(store, Config().layout)
    record = Record(etag="e", size=1, sha256="cd" * 32)
    await one.arecall(LIBRARY)
    await two.arecall(LIBRARY)
    assert await one.aremember(LIBRARY, {"a/SKILL.md": record})
    assert await two.aremember(LIBRARY, {"b/SKILL.md": record})  # its copy is stale: conflict, re-read, merge
    assert set(decode_book((await store.aget(book_key(Config().layout, LIBRARY))).data)) == {"a/SKILL.md", "b/SKILL.md"}


async def test_a_server_for_many_tenants_holds_only_the_books_it_used_last() -> None:
    store = MemoryObjectStore()
    books = DigestBooks(store, Config().layout, max_held=2)
    record = Record(etag="e", size=1, sha256="ab" * 32)
    for user in ("ana", "bob", "eva"):
        assert await books.aremember(f"users/{user}/skills/", {"x/SKILL.md": record})
    assert books.held == ["users/bob/skills/", "users/eva/skills/"]
    assert (await books.arecall("users/ana/skills/"))["x/SKILL.md"] == record  # read again from the store
    assert books.held == ["users/eva/skills/", "users/ana/skills/"]


def test_each_library_has_its_own_book_beside_its_manifest() -> None:
    layout = Config().layout
    assert book_key(layout, LIBRARY) == BOOK
    assert book_key(layout, "shared/acme/skills/") == "shared/acme/.s3skills/digests.json"
    assert book_key(layout, "users/ana/extra/") == "users/ana/.s3skills/digests-extra.json"


# -- afiles_many on every store ---------------------------------------------------------------

TRICKY = {
    "a/SKILL.md": skill_md("a", "Outer."),
    "a/x.md": "x",
    "a/b/SKILL.md": skill_md("b", "Nested in a."),
    "a/b/y.md": "y",
    "a/notes/deep/z.md": "z",
    "a-b/SKILL.md": skill_md("a-b", "Sorts between a and a/ in bytes."),
    "a-b/w.md": "w",
    "a0/SKILL.md": skill_md("a0", "After a/."),
    "c/d/SKILL.md": skill_md("d", "In category c."),
    "c/d/r/q.md": "q",
    "off/SKILL.md": skill_md("off", "Disabled.", enabled="false"),
    "off/secret.md": "s",
}


@pytest.fixture(params=["memory", "moto", pytest.param("seaweedfs", marks=pytest.mark.seaweedfs)])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[ObjectStore]:
    if request.param == "memory":
        yield MemoryObjectStore()
        return
    store = request.getfixturevalue("s3_store_on")(request.param)
    yield store
    await store.aclose()


async def test_the_files_of_a_page_are_the_files_of_each_skill_from_one_listing_per_library(
    any_store: ObjectStore,
) -> None:
    for rel, text in TRICKY.items():
        await any_store.aput(LIBRARY + rel, text.encode())
        await any_store.aput("shared/acme/skills/" + rel.replace("a", "s", 1), text.encode())
    library = SkillLibrary(any_store, Config(shared_library="acme"))
    ids = [s.id for s in await library.aindex(tenant=_ana())]
    assert "off" not in ids
    assert {"a", "a/b", "a-b", "a0", "c/d", "s"} <= set(ids)
    one_by_one = {sid: await library.afiles(sid, tenant=_ana()) for sid in ids}
    await library.aflush()  # the cold index writes its manifest in the background: not a cost of afiles_many

    counter = RequestCounter()
    any_store.add_request_hook(counter)
    together = await library.afiles_many(ids, tenant=_ana())
    assert {sid: sorted(files, key=str) for sid, files in together.items()} == {
        sid: sorted(files, key=str) for sid, files in one_by_one.items()
    }
    assert [f.path for f in together["a"]] == ["SKILL.md", "notes/deep/z.md", "x.md"]
    assert counter["ListObjectsV2"] == 2  # the user's library and the shared one
    assert counter.total == 2

    counter.reset()
    siblings = await library.afiles_many(["a", "a-b", "a0"], tenant=_ana())  # they share the key prefix "a"
    assert siblings == {sid: one_by_one[sid] for sid in ("a", "a-b", "a0")}
    assert counter.total == 1


def _ana() -> Tenant:
    return Tenant(user_id="ana")
