"""A small library's skill folders are listed whole: one LIST per TTL for all of them.

With a catalog TTL, a skill folder's listing answers `load_skill` and `read_skill_file`
(`s3skills.skills.index.folders`). Listed one folder at a time, a user who loads 20 skills
costs 20 LISTs per TTL, and each worker of a server pays them again; a library of at most
`WHOLE_LIBRARY_SKILLS` skill folders whose files fit one LIST page is listed once instead,
and every folder's listing is cut from it, the same objects a LIST of the folder answers.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable

import pytest

from s3skills._loop import serve_on_running_loop
from s3skills.config import Config
from s3skills.errors import NotFound
from s3skills.skills import SkillLibrary
from s3skills.skills.index import folders as folder_module
from s3skills.skills.index.catalog import LibraryIndex, SkillEntry
from s3skills.skills.index.folders import MAX_LISTED
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md

TTL = 60.0
ROOT = "users/ana/skills/"
NAMES = ("deploy", "review", "triage", "release", "oncall")


class _Library:
    """A user's library of skills, trusted for `TTL` on a clock the test moves, counting requests."""

    def __init__(self, names: tuple[str, ...] = NAMES) -> None:
        self.store = MemoryObjectStore()
        for name in names:
            self.store.put_object(f"{ROOT}{name}/SKILL.md", skill_md(name, f"The {name} skill"))
            self.store.put_object(f"{ROOT}{name}/references/notes.md", f"{name} notes\n")
        self.library = SkillLibrary(self.store, Config(catalog_ttl=TTL), tenant=lambda: Tenant("ana"))
        self.now = 1_000_000.0
        self.library.catalog.clock = lambda: self.now
        self.requests: Counter[str] = Counter()
        self.store.add_request_hook(lambda operation: self.requests.update([operation]))

    async def read(self, name: str, path: str = "references/notes.md") -> bytes:
        return (await self.library.aopen(name, path)).data

    async def lists(self, work: Awaitable[object]) -> int:
        """The LISTs `work` sent."""
        before = self.requests["ListObjectsV2"]
        await work
        return self.requests["ListObjectsV2"] - before


@pytest.mark.parametrize(("whole", "expected"), [(folder_module.WHOLE_LIBRARY_SKILLS, 1), (0, len(NAMES))])
async def test_reading_every_skill_of_a_small_library_costs_one_list_per_ttl(
    whole: int, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folder_module, "WHOLE_LIBRARY_SKILLS", whole)  # 0: one LIST per folder, as before
    lib = _Library()
    with serve_on_running_loop():
        await lib.library.aindex()
        await lib.library.catalog.aflush()

        async def every_skill() -> None:
            for name in NAMES:
                assert await lib.read(name) == f"{name} notes\n".encode()
                assert {f.path for f in await lib.library.afiles(name)} == {"SKILL.md", "references/notes.md"}

        assert await lib.lists(every_skill()) == expected
        assert await lib.lists(every_skill()) == 0  # within the TTL: every listing is kept
        lib.now += TTL + 1
        assert await lib.lists(every_skill()) == expected  # too old: listed again, the same way


async def test_concurrent_misses_in_one_library_share_one_list() -> None:
    lib = _Library()
    with serve_on_running_loop():
        await lib.library.aindex()
        await lib.library.catalog.aflush()
        lib.now += TTL + 1  # the index refresh below is a conditional GET; every listing is a miss
        await lib.library.aindex()
        reads = asyncio.gather(*(lib.read(name) for name in NAMES * 4))
        assert await lib.lists(reads) == 1


async def test_a_skill_folder_listed_with_the_library_shows_a_write_once_the_ttl_has_passed() -> None:
    lib = _Library()
    with serve_on_running_loop():
        await lib.read("deploy")  # lists the whole library: review's listing is from now
        lib.store.put_object(f"{ROOT}review/references/late.md", "late\n")
        lib.now += TTL / 2
        with pytest.raises(NotFound):
            await lib.read("review", "references/late.md")  # the listing is the TTL's promise
        lib.now += TTL
        assert await lib.read("review", "references/late.md") == b"late\n"


async def test_each_folder_cut_from_the_library_listing_is_what_a_list_of_the_folder_answers() -> None:
    lib = _Library(("deploy", "review"))
    odd = [
        f"{ROOT}deploy/references/SKILL.md",  # a nested skill: its files are also under deploy/
        f"{ROOT}deploy/references/inner.md",
        f"{ROOT}deploy//double.md",
        f"{ROOT}deploy-old/stale.md",  # a sibling whose name starts like a skill's: not deploy's
        f"{ROOT}README.md",  # beside the skills, in no folder
        f"{ROOT}notes/draft.md",  # a folder without a SKILL.md
        f"{ROOT}review/a b/ñ.md",
    ]
    for key in odd:
        lib.store.put_object(key, skill_md("references", "Nested") if key.endswith("SKILL.md") else "x\n")
    with serve_on_running_loop():
        index = await lib.library.catalog.aindex("user", ROOT)
        assert index.skill_folders() == {"deploy/", "review/", "deploy/references/"}
        # what a skill's home asks on every read: its nested skill folders, not a sibling's
        assert index.folders_below("deploy/") == ["deploy/references/"]
        assert index.folders_below("deploy/references/") == []
        assert index.folders_below("review/") == []
        cache = lib.library.folders
        for folder in sorted(index.skill_folders()):
            whole = await cache.alist(index, ROOT + folder)
            alone, _ = await lib.store.alist(ROOT + folder)
            assert whole == {o.key: o for o in alone}, folder
        with pytest.raises(NotFound):
            await lib.read("deploy", "references/inner.md")  # the nested skill's file, never deploy's
        assert await lib.read("deploy/references", "inner.md") == b"x\n"
        assert await lib.read("review", "a b/ñ.md") == b"x\n"


async def test_a_library_over_one_page_is_listed_folder_by_folder_for_the_rest_of_its_generation() -> None:
    lib = _Library(("deploy", "review", "bulk"))
    for n in range(MAX_LISTED):
        lib.store.put_object(f"{ROOT}bulk/data/{n:04d}.txt", "d\n")
    with serve_on_running_loop():
        await lib.library.aindex()
        await lib.library.catalog.aflush()
        assert await lib.lists(lib.read("deploy")) == 3  # two pages say "too big", then the folder's LIST
        assert await lib.lists(lib.read("review")) == 1  # no second try of the whole library
        lib.library.invalidate()  # a new generation: asked again once
        assert await lib.lists(lib.read("deploy")) == 3


async def test_a_library_of_more_skill_folders_than_the_bound_is_listed_folder_by_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(folder_module, "WHOLE_LIBRARY_SKILLS", len(NAMES) - 1)
    lib = _Library()
    with serve_on_running_loop():
        await lib.library.aindex()
        await lib.library.catalog.aflush()
        for name in NAMES:
            assert await lib.lists(lib.read(name)) == 1


def test_the_folders_below_a_skill_are_its_nested_entries_and_markers_never_a_sibling_or_itself() -> None:
    def entry(sid: str) -> SkillEntry:
        return SkillEntry(sid, f"{ROOT}{sid}/SKILL.md", "e", 1, None, "does not parse")

    ids = ("ops/deploy", "ops/deploy/inner", "ops/deploy-old", "ops/deployment", "review")
    index = LibraryIndex("user", ROOT, entries={sid: entry(sid) for sid in ids})
    index.markers = frozenset({"ops/deploy/", "ops/deploy/broken/", "ops/deploy-old/x/", "ops/deploy/inner/"})
    for folder in sorted(index.skill_folders()):
        expected = sorted(f for f in index.skill_folders() if f.startswith(folder) and f != folder)
        assert index.folders_below(folder) == expected, folder
    assert index.folders_below("ops/deploy/") == ["ops/deploy/broken/", "ops/deploy/inner/"]
    assert index.folders_below("review/") == []


async def test_reading_a_large_librarys_skills_never_builds_its_whole_folder_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 10,000 skills the whole set cost 3 ms of CPU a read; a skill's home asks only its own folders."""
    monkeypatch.setattr(folder_module, "WHOLE_LIBRARY_SKILLS", len(NAMES) - 1)  # too big to list whole
    built: list[str] = []
    whole = LibraryIndex.skill_folders

    def counted(index: LibraryIndex) -> set[str]:
        built.append(index.prefix)
        return whole(index)

    monkeypatch.setattr(LibraryIndex, "skill_folders", counted)
    lib = _Library()
    with serve_on_running_loop():
        await lib.library.aindex()
        await lib.library.catalog.aflush()
        for name in NAMES:
            assert await lib.read(name) == f"{name} notes\n".encode()
            assert {f.path for f in await lib.library.afiles(name)} == {"SKILL.md", "references/notes.md"}
    assert built == []
