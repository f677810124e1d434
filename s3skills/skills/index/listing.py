"""Indexing a library from a LIST: which `SKILL.md` files changed, and what ends a skill.

`Lister` turns a listing of a library prefix into the catalog's entries: it reads again
only the `SKILL.md` whose ETag changed (`s3skills.skills.index.heads`), drops the skills past
`Limits.max_skills_per_library`, records every folder holding a `SKILL.md` (what ends a
skill, parsed or not) and each skill's version id from the same listing (no request). A
library known of nothing is listed page by page, each head read as its page arrives
(`s3skills.skills.index.streaming`); a known one is listed in parallel by category folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Protocol

from s3skills._loop import gather_limited
from s3skills.config import Limits
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.skills.index.heads import HeadReader, head_weight, parse_read
from s3skills.skills.index.manifest import SkillEntry
from s3skills.skills.index.streaming import first_page_small, read_as_listed
from s3skills.skills.versions.history import versions_by_skill
from s3skills.storage import ObjectInfo, ObjectStore

__all__ = ["Listed", "Lister", "with_versions"]


class Listed(Protocol):
    """What a listing updates: the catalog's `LibraryIndex` has these fields."""

    entries: dict[str, SkillEntry]
    markers: frozenset[str]
    truncated: int


class Lister:
    """Lists libraries and applies what a listing shows to a `LibraryIndex`.

    Args:
        store: The object store holding the libraries.
        limits: `concurrency` and `max_skills_per_library` apply.
        heads: Reads and parses the `SKILL.md` files that changed.
    """

    def __init__(self, store: ObjectStore, limits: Limits, heads: HeadReader) -> None:
        self.store = store
        self.limits = limits
        self.heads = heads

    async def alist(self, prefix: str) -> list[ObjectInfo]:
        """Every object of a library: one LIST of its folders, then one per folder, concurrently.

        A library of more top folders than twice the concurrency (many uncategorised
        skills) is listed page after page instead, which is then fewer round trips.
        """
        top, folders = await self.store.alist(prefix, delimiter="/")
        if len(folders) > 2 * self.limits.concurrency:
            objects, _ = await self.store.alist(prefix)
            return objects
        jobs = [partial(self.store.alist, folder) for folder in folders]
        listed = await gather_limited(jobs, self.limits.concurrency)
        return [*top, *(obj for objects, _ in listed for obj in objects)]

    async def acold(self, index: Listed, source: str, prefix: str) -> bool:
        """A library known of nothing: LIST it page by page, reading each SKILL.md as its page arrives.

        Twice `Limits.concurrency` reads are in flight (the connection pool `S3Backend`
        sizes). On a 20 ms proxy and 2 cores, 64 and 32 in flight index 1,000 skills in
        times whose spreads overlap (bench/README.md, `bench/cold_vs_raw.py`): the CPU,
        not the reads in flight, bounds a cold index there.
        """

        def wanted(obj: ObjectInfo) -> str | None:
            sid = SkillId.from_key(obj.key, prefix)
            return None if sid is None else str(sid)

        objects, entries = await read_as_listed(
            first_page_small(self.store, prefix),
            wanted,
            lambda obj: self.heads.aread_parsed(source, str(SkillId.from_key(obj.key, prefix)), obj),
            partial(parse_read, source),
            concurrency=2 * self.limits.concurrency,
            weight=head_weight,
            limit=self.limits.max_skills_per_library,
        )
        return await self.aapply(index, source, prefix, objects, {e.skill_id: e for e in entries})

    async def aapply(
        self,
        index: Listed,
        source: str,
        prefix: str,
        objects: list[ObjectInfo],
        early: Mapping[str, SkillEntry] | None = None,
    ) -> bool:
        """Update the entries from a listing (changed SKILL.md read again); True if any changed.

        `early`: entries already read for this listing (their ETag is checked against it).
        """
        found: dict[str, ObjectInfo] = {}
        markers: set[str] = set()
        tail = "/" + SKILL_FILE
        for obj in objects:
            if obj.key.startswith(prefix) and obj.key.endswith(tail):
                markers.add(obj.key[len(prefix) : -len(SKILL_FILE)])
            skill_id = SkillId.from_key(obj.key, prefix)
            if skill_id is not None:
                found[str(skill_id)] = obj
        ends_before = {m for m in index.markers if m[:-1] not in index.entries}
        ends_changed = {m for m in markers if m[:-1] not in found} != ends_before
        index.markers = frozenset(markers)
        keep = sorted(found)[: self.limits.max_skills_per_library]
        index.truncated = len(found) - len(keep)
        changed = [
            (sid, found[sid]) for sid in keep if (e := index.entries.get(sid)) is None or e.etag != found[sid].etag
        ]
        ready = early or {}
        fresh = [ready[sid] for sid, obj in changed if sid in ready and ready[sid].etag == obj.etag]
        parsed = [
            *fresh,
            *await self.heads.aparse(
                source, [(sid, obj) for sid, obj in changed if sid not in ready or ready[sid].etag != obj.etag]
            ),
        ]
        entries = {sid: index.entries[sid] for sid in keep if sid in index.entries}
        entries.update((e.skill_id, e) for e in parsed)
        differs = bool(changed) or len(entries) != len(index.entries) or ends_changed
        # Each skill's version id comes from the same listing (no request); an index read
        # from the manifest alone keeps the versions it had (the skill's load lists it anyway).
        index.entries = with_versions(entries, versions_by_skill(prefix, objects, entries))
        return differs


def with_versions(entries: dict[str, SkillEntry], versions: dict[str, str]) -> dict[str, SkillEntry]:
    """The entries with each skill's current version id (computed from the listing: no request)."""
    out = {}
    for sid, entry in entries.items():
        version = versions.get(sid)
        if entry.info is not None and entry.info.version != version:
            entry = replace(entry, info=replace(entry.info, version=version))
        out[sid] = entry
    return out
