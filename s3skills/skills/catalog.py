"""`SkillCatalog`: the index of each library prefix, cached by ETag.

A library is a key prefix (`users/ana/skills/`); a skill is a folder holding
`SKILL.md` one or two levels below it (`s3skills.ids.SkillId.from_key`). Indexing
a library costs one LIST per 1,000 keys; only the `SKILL.md` objects whose ETag
changed are read again, with a ranged GET of their head when that holds the whole
frontmatter. Parsing runs off the I/O loop, so a library of large frontmatters does
not stall other tenants. With a TTL, a refresh inside the TTL costs nothing.

Bodies of `SKILL.md` are cached by (key, ETag) within a byte budget shared by all
tenants. The catalog knows prefixes, not tenants: `s3skills.skills.SkillLibrary`
decides which prefixes a call may see and merges them.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from s3skills._loop import gather_limited
from s3skills.config import Limits
from s3skills.errors import FileTooLarge, NotFound
from s3skills.ids import SkillId
from s3skills.skills.model import InvalidSkill, SkillInfo
from s3skills.skills.parse import frontmatter_prefix, parse_skill_md
from s3skills.skills.versions import versions_by_skill
from s3skills.storage import ObjectInfo, ObjectStore

__all__ = ["LibraryIndex", "SkillCatalog", "SkillEntry"]


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """One `SKILL.md` of a library: its parsed skill, or why it was skipped."""

    skill_id: str
    key: str
    etag: str
    size: int
    info: SkillInfo | None
    problem: str | None


@dataclass
class LibraryIndex:
    """The cached index of one library prefix.

    Attributes:
        source: `user` or `shared`.
        prefix: The library's key prefix.
        entries: Skill id -> entry, for every `SKILL.md` found.
        refreshed_at: Clock time of the last listing (None: never listed).
        truncated: Skills past `Limits.max_skills_per_library` that were not indexed.
    """

    source: str
    prefix: str
    entries: dict[str, SkillEntry] = field(default_factory=dict)
    refreshed_at: float | None = None
    truncated: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SkillCatalog:
    """Discovers, parses and caches the skills of library prefixes.

    Args:
        store: The object store holding the libraries.
        limits: Size limits (frontmatter, SKILL.md, skills per library, body cache).
        ttl: Seconds during which a refreshed library is trusted without a LIST.
            None lists on every refresh, so edits show at once.
        head_bytes: How much of a `SKILL.md` the ranged GET reads.
        max_libraries: How many library indexes stay cached (LRU).
        clock: Time source for the TTL (tests pass their own).
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        limits: Limits | None = None,
        ttl: float | None = None,
        head_bytes: int = 8192,
        max_libraries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.limits = limits or Limits()
        self.ttl = ttl
        self.head_bytes = head_bytes
        self.max_libraries = max_libraries
        self._clock = clock
        self._indexes: OrderedDict[str, LibraryIndex] = OrderedDict()
        self._bodies: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()
        self._body_bytes = 0

    # -- indexes -------------------------------------------------------------------------

    def cached(self, prefix: str) -> LibraryIndex | None:
        """The index of `prefix` if it was listed before (no request)."""
        index = self._indexes.get(prefix)
        return index if index is not None and index.refreshed_at is not None else None

    def _index(self, source: str, prefix: str) -> LibraryIndex:
        index = self._indexes.get(prefix)
        if index is None:
            index = self._indexes[prefix] = LibraryIndex(source, prefix)
            while len(self._indexes) > self.max_libraries:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(prefix)
        return index

    def _fresh(self, index: LibraryIndex) -> bool:
        return self.ttl is not None and index.refreshed_at is not None and self._clock() - index.refreshed_at < self.ttl

    async def aindex(self, source: str, prefix: str, *, force: bool = False, cached: bool = False) -> LibraryIndex:
        """The index of one library, refreshed unless it is fresh.

        Args:
            source: `user` or `shared` (recorded on each `SkillInfo`).
            prefix: The library's key prefix (ends with `skills/`).
            force: List even within the TTL.
            cached: Accept any index already read, whatever its age.
        """
        if cached and (known := self.cached(prefix)) is not None:
            return known
        index = self._index(source, prefix)
        async with index.lock:
            if self._fresh(index) and not force:
                return index
            objects, _ = await self.store.alist(prefix)
            found: dict[str, ObjectInfo] = {}
            for obj in objects:
                skill_id = SkillId.from_key(obj.key, prefix)
                if skill_id is not None:
                    found[str(skill_id)] = obj
            keep = sorted(found)[: self.limits.max_skills_per_library]
            index.truncated = len(found) - len(keep)
            changed = [
                (sid, found[sid]) for sid in keep if (e := index.entries.get(sid)) is None or e.etag != found[sid].etag
            ]
            jobs = [partial(self._head, obj) for _, obj in changed]
            heads = await gather_limited(jobs, self.limits.concurrency)
            items = [(sid, obj, head) for (sid, obj), head in zip(changed, heads, strict=True)]
            parsed = await asyncio.to_thread(_parse_all, source, items) if items else []
            entries = {sid: index.entries[sid] for sid in keep if sid in index.entries}
            entries.update((e.skill_id, e) for e in parsed)
            index.entries = _with_versions(entries, versions_by_skill(prefix, objects, entries))
            index.refreshed_at = self._clock()
            return index

    async def _head(self, obj: ObjectInfo) -> tuple[bytes, str] | str:
        """The bytes of a SKILL.md needed to parse its frontmatter, or why it was skipped."""
        if obj.size > self.limits.max_skill_md_bytes:
            return f"SKILL.md is {obj.size} bytes; the limit is {self.limits.max_skill_md_bytes}"
        try:
            head = await self.store.aget_range(obj.key, 0, self.head_bytes)
            if head.size <= len(head.data):
                return head.data, head.etag
            prefix = frontmatter_prefix(head.data)
            if prefix is not None:
                return prefix, head.etag
            # The frontmatter is longer than the head: read up to its limit, no more.
            limit = self.limits.max_frontmatter_bytes + self.head_bytes
            more = await self.store.aget_range(obj.key, 0, limit)
            if more.size > len(more.data) and frontmatter_prefix(more.data) is None:
                return f"the frontmatter is over {self.limits.max_frontmatter_bytes} bytes"
            return (frontmatter_prefix(more.data) or more.data), more.etag
        except NotFound:
            return "SKILL.md disappeared while the index was built"
        except FileTooLarge as exc:
            return str(exc)

    def invalidate(self, prefix: str | None = None) -> None:
        """Forget the age of cached indexes (one prefix, or all): the next query lists."""
        for key, index in self._indexes.items():
            if prefix is None or key == prefix:
                index.refreshed_at = None

    # -- bodies --------------------------------------------------------------------------

    async def atext(self, entry: SkillEntry) -> str:
        """The full text of a skill's `SKILL.md` (no request when cached for its ETag)."""
        cache_key = (entry.key, entry.etag)
        hit = self._bodies.get(cache_key)
        if hit is not None:
            self._bodies.move_to_end(cache_key)
            return hit[0]
        body = await self.store.aget(entry.key, max_bytes=self.limits.max_skill_md_bytes)
        text = body.data.decode("utf-8-sig", errors="replace")
        if body.etag == entry.etag and len(body.data) <= self.limits.body_cache_bytes // 4:
            self._bodies[cache_key] = (text, len(body.data))
            self._body_bytes += len(body.data)
            while self._body_bytes > self.limits.body_cache_bytes and self._bodies:
                _, (_, size) = self._bodies.popitem(last=False)
                self._body_bytes -= size
        return text

    @property
    def body_cache_bytes(self) -> int:
        """Bytes of SKILL.md bodies held in memory now."""
        return self._body_bytes


def _parse_all(source: str, items: list[tuple[str, ObjectInfo, tuple[bytes, str] | str]]) -> list[SkillEntry]:
    """Parse fetched heads (runs in a worker thread: YAML parsing is CPU work)."""
    out = []
    for skill_id, obj, head in items:
        if isinstance(head, str):
            out.append(SkillEntry(skill_id, obj.key, obj.etag, obj.size, None, head))
            continue
        data, etag = head
        try:
            parsed = parse_skill_md(data, folder=SkillId.parse(skill_id).leaf)
        except InvalidSkill as exc:
            out.append(SkillEntry(skill_id, obj.key, etag, obj.size, None, str(exc)))
            continue
        info = SkillInfo(id=skill_id, metadata=parsed.metadata, source=source, etag=etag, warnings=parsed.warnings)
        out.append(SkillEntry(skill_id, obj.key, etag, obj.size, info, None))
    return out


def _with_versions(entries: dict[str, SkillEntry], versions: dict[str, str]) -> dict[str, SkillEntry]:
    """The entries with each skill's current version id (computed from the listing: no request)."""
    out = {}
    for sid, entry in entries.items():
        version = versions.get(sid)
        if entry.info is not None and entry.info.version != version:
            entry = replace(entry, info=replace(entry.info, version=version))
        out[sid] = entry
    return out
