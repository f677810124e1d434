"""`SkillCatalog`: the index of a user's skills, cached by ETag.

A skill is a folder holding `SKILL.md`, one or two levels below a library
prefix (`{user_id}/skills/`, and optionally `{shared}/skills/` below it in
precedence). A refresh of a library costs one LIST per 1,000 keys; only the
`SKILL.md` objects whose ETag changed are read again, with a ranged GET of
their head when that holds the whole frontmatter. With a TTL, a refresh inside
the TTL costs nothing. Invalid skills are skipped and reported by `problems()`.

Bodies of `SKILL.md` (needed once a skill is loaded) are cached by ETag too, so
an unchanged library costs at most one LIST per model call.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from s3skills._sync import gather_limited, io_bound, sync_method
from s3skills.errors import FileTooLarge, NotFound, SkillError
from s3skills.layout import KeyLayout, validate_skill_id
from s3skills.matching import closest_ids, rank
from s3skills.skillmd import (
    MAX_SKILL_MD_BYTES,
    InvalidSkill,
    SkillInfo,
    frontmatter_prefix,
    get_skill_doc,
    parse_skill_md,
)
from s3skills.store import ObjectInfo, ObjectStore
from s3skills.tenancy import Tenant

__all__ = ["SkillCatalog", "SkillProblem"]

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A skill that was skipped (`error`) or loaded with a remark (`warning`)."""

    skill_id: str
    source: str
    level: str
    reason: str


@dataclass
class _Entry:
    etag: str
    size: int
    info: SkillInfo | None
    problem: str | None


@dataclass
class _Layer:
    """The cached index of one library prefix."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    refreshed_at: float | None = None
    lock: asyncio.Lock | None = None


class SkillCatalog:
    """Discovers, parses and caches the skills of each user.

    Args:
        store: The object store holding the libraries.
        layout: The key layout (where a user's library lives).
        shared_prefix: The organisation library, if any (lower precedence).
        ttl: Seconds during which a refreshed library is trusted without a LIST.
            None (the default) lists on every refresh, so edits show at once.
        head_bytes: How much of a `SKILL.md` the ranged GET reads.
        max_libraries: How many library indexes stay cached (LRU).
        clock: Time source for the TTL (tests pass their own).
    """

    def __init__(
        self,
        store: ObjectStore,
        layout: KeyLayout | None = None,
        *,
        shared_prefix: str | None = None,
        ttl: float | None = None,
        head_bytes: int = 8192,
        max_libraries: int = 1024,
        max_bodies: int = 256,
        concurrency: int = 32,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.layout = layout or KeyLayout()
        self.shared_prefix = shared_prefix.strip("/") if shared_prefix else None
        self.ttl = ttl
        self.head_bytes = head_bytes
        self.max_libraries = max_libraries
        self.max_bodies = max_bodies
        self.concurrency = concurrency
        self._clock = clock
        self._layers: OrderedDict[str, _Layer] = OrderedDict()
        self._bodies: OrderedDict[tuple[str, str], str] = OrderedDict()

    # -- layers ------------------------------------------------------------------------

    def prefixes(self, user_id: str) -> list[tuple[str, str]]:
        """`(source, prefix)` of the user's libraries, lowest precedence first."""
        tenant = Tenant(user_id=user_id)
        out = []
        if self.shared_prefix:
            out.append(("shared", self.layout.shared_prefix(self.shared_prefix)))
        out.append(("user", self.layout.user_prefix(tenant)))
        return out

    def _layer(self, prefix: str) -> _Layer:
        layer = self._layers.get(prefix)
        if layer is None:
            layer = self._layers[prefix] = _Layer()
            while len(self._layers) > self.max_libraries:
                self._layers.popitem(last=False)
        else:
            self._layers.move_to_end(prefix)
        if layer.lock is None:
            layer.lock = asyncio.Lock()
        return layer

    async def _refresh(self, source: str, prefix: str, *, force: bool) -> _Layer:
        layer = self._layer(prefix)
        assert layer.lock is not None
        async with layer.lock:
            fresh = (
                self.ttl is not None
                and layer.refreshed_at is not None
                and self._clock() - layer.refreshed_at < self.ttl
            )
            if fresh and not force:
                return layer
            objects, _ = await self.store.alist(prefix)
            found: dict[str, ObjectInfo] = {}
            for obj in objects:
                rel = obj.key[len(prefix) :]
                parts = rel.split("/")
                if parts[-1] == SKILL_FILE and 2 <= len(parts) <= 3:
                    found["/".join(parts[:-1])] = obj
            changed = [
                (sid, o) for sid, o in found.items() if (e := layer.entries.get(sid)) is None or e.etag != o.etag
            ]

            async def load(skill_id: str, obj: ObjectInfo) -> tuple[str, _Entry]:
                return skill_id, await self._parse(source, skill_id, obj)

            results = await gather_limited([partial(load, sid, o) for sid, o in changed], self.concurrency)
            entries = {sid: e for sid, e in layer.entries.items() if sid in found}
            entries.update(results)
            layer.entries = entries
            layer.refreshed_at = self._clock()
            return layer

    async def _parse(self, source: str, skill_id: str, obj: ObjectInfo) -> _Entry:
        def bad(reason: str) -> _Entry:
            return _Entry(obj.etag, obj.size, None, reason)

        try:
            validate_skill_id(skill_id)
        except ValueError as exc:
            return bad(str(exc))
        if obj.size > MAX_SKILL_MD_BYTES:
            return bad(f"SKILL.md is {obj.size} bytes; the limit is {MAX_SKILL_MD_BYTES}")
        try:
            head = await self.store.aget_range(obj.key, 0, self.head_bytes)
            data = head.data if head.size <= len(head.data) else frontmatter_prefix(head.data)
            etag = head.etag
            if data is None:  # the frontmatter is longer than the head: read it all
                body = await self.store.aget(obj.key, max_bytes=MAX_SKILL_MD_BYTES)
                data, etag = body.data, body.etag
            parsed = parse_skill_md(data, folder=skill_id.rsplit("/", 1)[-1])
        except NotFound:
            return bad("SKILL.md disappeared while the index was built")
        except (InvalidSkill, FileTooLarge) as exc:
            return bad(str(exc))
        info = SkillInfo(id=skill_id, metadata=parsed.metadata, source=source, etag=etag, warnings=parsed.warnings)
        return _Entry(etag, obj.size, info, None)

    # -- queries -----------------------------------------------------------------------

    @io_bound
    async def askills(
        self,
        user_id: str,
        *,
        category: str | None = None,
        include_disabled: bool = False,
        refresh: bool = False,
        cached: bool = False,
    ) -> list[SkillInfo]:
        """The user's skills (user library over shared), sorted by id.

        Args:
            user_id: Whose library.
            category: Only skills of this category (None or "all": every one).
            include_disabled: Also skills whose frontmatter says `enabled: false`.
            refresh: List even within the TTL.
            cached: Use an index already read, whatever its age (no request when
                every layer was read before); for lookups on a hot path.
        """
        merged: dict[str, SkillInfo] = {}
        for source, prefix in self.prefixes(user_id):
            layer = self._layers.get(prefix) if cached else None
            if layer is None or layer.refreshed_at is None:
                layer = await self._refresh(source, prefix, force=refresh)
            for skill_id, entry in layer.entries.items():
                if entry.info is not None:
                    merged[skill_id] = entry.info
                elif source == "user":
                    merged.pop(skill_id, None)  # a broken user copy hides the shared one
        skills = sorted(merged.values(), key=lambda s: s.id)
        if not include_disabled:
            skills = [s for s in skills if s.metadata.enabled]
        if category and category != "all":
            skills = [s for s in skills if s.category == category]
        return skills

    @io_bound
    async def aget(
        self, user_id: str, skill_id: str, *, include_disabled: bool = False, cached: bool = False
    ) -> SkillInfo:
        """One skill by id.

        Raises:
            SkillError: No such (enabled) skill; the message suggests the closest ids.
        """
        wanted = validate_skill_id(skill_id)
        skills = await self.askills(user_id, include_disabled=True, cached=cached)
        for skill in skills:
            if skill.id == wanted and (include_disabled or skill.metadata.enabled):
                return skill
        enabled = [s for s in skills if s.metadata.enabled]
        suggestions = closest_ids(wanted, enabled)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        disabled = " It is disabled." if any(s.id == wanted for s in skills) else ""
        raise SkillError(f"Skill '{wanted}' not found.{disabled}{hint} Call list_skills to see them all.")

    def home_of(self, user_id: str, skill: SkillInfo) -> str:
        """The key prefix of the folder of a skill from an index just read (no request)."""
        for source, prefix in self.prefixes(user_id):
            if source == skill.source:
                return prefix + skill.id + "/"
        raise SkillError(f"Skill '{skill.id}' not found.")  # pragma: no cover - sources are ours

    @io_bound
    async def ahome(self, user_id: str, skill_id: str, *, cached: bool = False) -> str:
        """The key prefix of a skill's folder in the layer that provides it.

        Raises:
            SkillError: The skill does not exist (or is broken) in any layer.
        """
        return self.home_of(user_id, await self.aget(user_id, skill_id, include_disabled=True, cached=cached))

    @io_bound
    async def askill_md(self, user_id: str, skill_id: str) -> tuple[SkillInfo, str]:
        """A skill and the full text of its `SKILL.md`, cached by ETag.

        Raises:
            SkillError: Unknown skill.
        """
        skill = await self.aget(user_id, skill_id, include_disabled=True)
        return skill, await self.atext_of(user_id, skill)

    @io_bound
    async def atext_of(self, user_id: str, skill: SkillInfo) -> str:
        """The full text of the `SKILL.md` of a skill from an index just read.

        Costs no request when the body of that ETag is cached.
        """
        home = self.home_of(user_id, skill)
        cache_key = (home, skill.etag)
        text = self._bodies.get(cache_key)
        if text is None:
            body = await self.store.aget(home + SKILL_FILE, max_bytes=MAX_SKILL_MD_BYTES)
            text = body.data.decode("utf-8-sig", errors="replace")
            self._bodies[cache_key] = text
            while len(self._bodies) > self.max_bodies:
                self._bodies.popitem(last=False)
        else:
            self._bodies.move_to_end(cache_key)
        return text

    @io_bound
    async def ainstructions(self, user_id: str, skill_id: str) -> str:
        """The body of a skill's `SKILL.md` (without frontmatter)."""
        _, text = await self.askill_md(user_id, skill_id)
        return get_skill_doc(text)

    @io_bound
    async def amatch(self, user_id: str, query: str, *, limit: int = 5) -> list[tuple[SkillInfo, float]]:
        """Skills ranked for a request (BM25 over id, name, description and tags)."""
        return rank(query, await self.askills(user_id), limit=limit)

    def problems(self, user_id: str | None = None) -> list[SkillProblem]:
        """Skipped and suspicious skills seen by the last refresh of each cached library.

        Args:
            user_id: Only this user's libraries (and the shared one); None for all cached.
        """
        wanted = None if user_id is None else {p for _, p in self.prefixes(user_id)}
        out: list[SkillProblem] = []
        for prefix, layer in self._layers.items():
            if wanted is not None and prefix not in wanted:
                continue
            source = (
                "shared" if self.shared_prefix and prefix == self.layout.shared_prefix(self.shared_prefix) else "user"
            )
            for skill_id, entry in sorted(layer.entries.items()):
                if entry.problem is not None:
                    out.append(SkillProblem(skill_id, source, "error", entry.problem))
                elif entry.info is not None:
                    out.extend(SkillProblem(skill_id, source, "warning", w) for w in entry.info.warnings)
        return out

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget cached indexes (of one user, or all), so the next query lists again."""
        if user_id is None:
            self._layers.clear()
            return
        for _, prefix in self.prefixes(user_id):
            layer = self._layers.get(prefix)
            if layer is not None:
                layer.refreshed_at = None

    skills = sync_method(askills)
    get = sync_method(aget)
    home = sync_method(ahome)
    skill_md = sync_method(askill_md)
    instructions = sync_method(ainstructions)
    text_of = sync_method(atext_of)
    match = sync_method(amatch)
