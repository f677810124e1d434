"""`SkillCatalog`: the index of each library prefix, cached by ETag.

A library is a key prefix (`users/ana/skills/`); a skill is a folder holding
`SKILL.md` one or two levels below it (`s3skills.ids.SkillId.from_key`). Indexing
a library costs one LIST per 1,000 keys; only the `SKILL.md` objects whose ETag
changed are read again, with a ranged GET of their head when that holds the whole
frontmatter. Parsing runs in a worker thread, except a cold listing's, which runs on
the loop a few heads at a time (`s3skills.skills.streaming`): either way a library of
large frontmatters stalls other tenants only briefly. With a TTL, a refresh inside the
TTL costs nothing; the shared library may have a TTL of its own (`shared_ttl`: every
tenant reads it), while the user's library is asked on every query.

With a manifest (`s3skills.skills.manifest`, on when the catalog is given
`manifest_key`), indexing a library is one conditional GET of its manifest: 304 when
unchanged, no LIST. `verify` says when the manifest is checked against a LIST of
the library (in parallel by category folder), changed `SKILL.md` files read again
and the manifest rewritten: `always` on every refresh, `interval` at most once per
`verify_interval` seconds (and whenever the manifest says no LIST confirmed it that
recently), `never` only when the manifest is missing or damaged.

One refresh per library is in flight at a time, and every caller that asks while it
runs shares its answer (single-flight): however many tenants use a shared library,
it costs one conditional GET per refresh, and nobody queues behind a lock held across
a request. A library that concurrent callers are asking for (one shared a refresh in
the last second) has its next refresh wait `gather_delay` before it asks, so that more
callers share it, each answered with what the store held after it asked. A manifest
rebuilt by a refresh is written in the background, after the answer (`aflush` waits
for those writes). A library known of nothing is listed page by page, the first page
small, each `SKILL.md` head read and parsed as its page arrives
(`s3skills.skills.streaming`).

Bodies of `SKILL.md` are cached by (key, ETag) within a byte budget shared by all
tenants. The catalog knows prefixes, not tenants: `s3skills.skills.SkillLibrary`
decides which prefixes a call may see and merges them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from s3skills._loop import gather_limited
from s3skills.config import Limits, VerifyMode
from s3skills.errors import Conflict, FileTooLarge, NotFound, S3SkillsError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.skills.derived import weigh
from s3skills.skills.manifest import Manifest, SkillEntry, aread_manifest, aupdate_manifest, awrite_manifest
from s3skills.skills.model import InvalidSkill, SkillInfo
from s3skills.skills.parse import frontmatter_prefix, parse_skill_md
from s3skills.skills.sketch import make_sketch
from s3skills.skills.streaming import first_page_small, read_as_listed
from s3skills.skills.versions import versions_by_skill
from s3skills.storage import NotModified, ObjectBody, ObjectInfo, ObjectStore

__all__ = ["GATHER_DELAY", "LibraryIndex", "SkillCatalog", "SkillEntry"]

GATHER_DELAY = 0.2
"""Default `SkillCatalog.gather_delay` (seconds), chosen from `bench/tenants.py` (bench/README.md)."""

_CONTENDED = 1.0  # seconds a library counts as asked by concurrent callers after one shared a refresh

_DEFAULT_WEIGHT = 1024  # an entry's own fields (id, key, ETag, SkillInfo), beyond its metadata


@dataclass
class LibraryIndex:
    """The cached index of one library prefix.

    Attributes:
        source: `user` or `shared`.
        prefix: The library's key prefix.
        entries: Skill id -> entry, for every `SKILL.md` found.
        refreshed_at: Clock time of the last refresh (None: never refreshed).
        truncated: Skills past `Limits.max_skills_per_library` that were not indexed.
        manifest_etag: ETag of the manifest the entries match (None: none read).
        manifest_verified_at: When a LIST last confirmed that manifest (its own record).
        verified_at: When this process last reconciled the library with a LIST.
        reconcile: A LIST reconciliation is due at the next refresh (a skill went missing).
        flight: The refresh in flight, whose answer concurrent callers share.
        failure: Why the last refresh failed, until `failed_until` (clock time) passes.
        markers: Folders (relative to `prefix`, ending with `/`) of every `SKILL.md` key the
            last LIST saw, at any depth and whatever its id: what ends a skill.
        weight: Estimated bytes its entries hold (the cache of indexes is bounded in bytes).
        generation: Bumped by `SkillCatalog.invalidate`: a refresh started before cannot
            answer a caller that came after.
        writing: The background write of a manifest this index rebuilt (awaited by the
            next refresh of the index and by `SkillCatalog.aflush`).
        contended_until: Until when (`time.monotonic`) a refresh waits `gather_delay`
            before it asks: concurrent callers shared one recently.
    """

    source: str
    prefix: str
    entries: dict[str, SkillEntry] = field(default_factory=dict)
    refreshed_at: float | None = None
    truncated: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    flight: asyncio.Future[LibraryIndex] | None = None
    failure: S3SkillsError | None = None
    failed_until: float = 0.0
    manifest_etag: str | None = None
    manifest_verified_at: float | None = None
    verified_at: float | None = None
    reconcile: bool = False
    markers: frozenset[str] = frozenset()
    weight: int = 0
    generation: int = 0
    flight_generation: int = 0
    contended_until: float = 0.0
    writing: asyncio.Task[None] | None = field(default=None, repr=False)

    def skill_folders(self) -> set[str]:
        """Every folder of this library known to hold a `SKILL.md`, parsed or not, enabled or not.

        From the entries (the manifest's or a LIST's, problems included) and the last LIST's
        `SKILL.md` keys; relative to `prefix`, each ending with `/`.
        """
        return {sid + "/" for sid in self.entries} | self.markers


class SkillCatalog:
    """Discovers, parses and caches the skills of library prefixes.

    Args:
        store: The object store holding the libraries.
        limits: Size limits (frontmatter, SKILL.md, skills per library, body cache).
        ttl: Seconds during which a refreshed library is trusted without a request.
            None asks on every query, so edits show at once.
        shared_ttl: The same for the libraries indexed as `shared` when longer than
            `ttl` (None: `ttl`). One shared library serves every tenant: trusting it a
            few seconds makes it cost one conditional GET per window however many ask.
        head_bytes: How much of a `SKILL.md` the ranged GET reads.
        max_libraries: How many library indexes stay cached (LRU).
        max_index_bytes: Estimated bytes of decoded entries all cached indexes may hold
            (least recently used out first; the one in use always stays).
        failure_backoff: Seconds a library whose refresh failed is not refreshed again
            (unless forced): its last good index, or the failure, answers meanwhile.
        clock: Time source for the TTL and verification (seconds since the epoch: the
            manifest records it; tests pass their own). Kept as the `clock` attribute,
            which a test may replace on a catalog built for it (`S3Backend`'s).
        manifest_key: Library prefix -> its manifest's key (`KeyLayout.manifest_key`);
            None indexes with LISTs only.
        verify: When a manifest is checked against a LIST (see the module docstring).
        verify_interval: Seconds between checks with `verify="interval"`.
        gather_delay: Seconds a refresh of a library that concurrent callers shared in the
            last second waits before it asks, so that the callers arriving meanwhile share
            it too. Those get an answer read after they asked (fresher than joining a
            request already out, which they would share anyway); a caller alone never
            waits. 0 turns it off.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        limits: Limits | None = None,
        ttl: float | None = None,
        shared_ttl: float | None = None,
        head_bytes: int = 8192,
        max_libraries: int = 1024,
        max_index_bytes: int = 256 * 1024 * 1024,
        failure_backoff: float = 2.0,
        clock: Callable[[], float] = time.time,
        manifest_key: Callable[[str], str] | None = None,
        verify: VerifyMode = "interval",
        verify_interval: float = 300.0,
        gather_delay: float = GATHER_DELAY,
    ) -> None:
        if verify not in ("always", "interval", "never"):
            raise ValueError("verify must be 'always', 'interval' or 'never'")
        self.store = store
        self.manifest_key = manifest_key
        self.verify = verify
        self.verify_interval = verify_interval
        self.gather_delay = gather_delay
        self.limits = limits or Limits()
        self.ttl = ttl
        self.shared_ttl = shared_ttl
        self.head_bytes = head_bytes
        self.max_libraries = max_libraries
        self.max_index_bytes = max_index_bytes
        self.failure_backoff = failure_backoff
        self.clock = clock
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
            self._trim()
        else:
            self._indexes.move_to_end(prefix)
        return index

    def _weighed(self, index: LibraryIndex) -> None:
        """Record what `index` holds now and drop the least recently used indexes past the budgets."""
        index.weight = sum(e.weight or _DEFAULT_WEIGHT for e in index.entries.values())
        self._trim()

    def _trim(self) -> None:
        total = sum(i.weight for i in self._indexes.values())
        while len(self._indexes) > 1 and (len(self._indexes) > self.max_libraries or total > self.max_index_bytes):
            _, gone = self._indexes.popitem(last=False)
            total -= gone.weight

    @property
    def index_bytes(self) -> int:
        """Estimated bytes of decoded entries the cached indexes hold now."""
        return sum(i.weight for i in self._indexes.values())

    def ttl_of(self, source: str) -> float | None:
        """Seconds an index of a `source` library is trusted without a request (None: none)."""
        if source != "shared" or self.shared_ttl is None:
            return self.ttl
        return self.shared_ttl if self.ttl is None else max(self.ttl, self.shared_ttl)

    def _fresh(self, index: LibraryIndex) -> bool:
        ttl = self.ttl_of(index.source)
        return ttl is not None and index.refreshed_at is not None and self.clock() - index.refreshed_at < ttl

    async def aindex(self, source: str, prefix: str, *, force: bool = False, cached: bool = False) -> LibraryIndex:
        """The index of one library, refreshed unless it is fresh.

        One refresh is in flight per library: a caller that finds one running shares its
        answer (or its error) instead of queueing for another. A refresh that failed is not
        tried again for `failure_backoff` seconds: meanwhile the last good index answers, or
        the failure does (no request).

        Args:
            source: `user` or `shared` (recorded on each `SkillInfo`).
            prefix: The library's key prefix (ends with `skills/`).
            force: List even within the TTL (and within a failure's back-off); a refresh
                already in flight is not enough, one that starts after this call is made.
            cached: Accept any index already read, whatever its age.
        """
        if cached and (known := self.cached(prefix)) is not None:
            return known
        index = self._index(source, prefix)
        must = force or index.reconcile
        if not must:
            if self._fresh(index):
                return index
            flight = index.flight
            if (
                flight is not None
                and not flight.done()
                and flight.get_loop() is asyncio.get_running_loop()
                and index.flight_generation == index.generation  # none started before an invalidation
            ):
                index.contended_until = time.monotonic() + _CONTENDED
                try:
                    return await asyncio.shield(flight)
                except asyncio.CancelledError:
                    if not flight.cancelled():
                        raise  # this call was cancelled
                return await self.aindex(source, prefix)  # the refresh it waited for was: try again
            if index.failure is not None and self.clock() < index.failed_until:
                return self._after_failure(index)
        flight = asyncio.get_running_loop().create_future()
        async with index.lock:  # forced refreshes run one after another, never interleaved
            if not must and self._fresh(index):  # one finished while this call waited
                flight.set_result(index)
                return index
            index.flight, index.flight_generation = flight, index.generation
            try:
                if not must and self.gather_delay > 0 and time.monotonic() < index.contended_until:
                    await asyncio.sleep(self.gather_delay)  # the callers arriving now share this refresh
                await self._refresh(index, source, prefix, force=force)
            except S3SkillsError as exc:
                index.failure, index.failed_until = exc, self.clock() + self.failure_backoff
                flight.set_exception(exc)
                flight.exception()  # retrieved: waiters re-raise it, nobody has to
                raise
            except BaseException:  # cancelled, or a bug: the waiters try for themselves
                flight.cancel()
                raise
            finally:
                if index.flight is flight:
                    index.flight = None
            index.failure = None
            flight.set_result(index)
            return index

    def _after_failure(self, index: LibraryIndex) -> LibraryIndex:
        """While a failed refresh backs off: the last good index, else the failure again."""
        if index.refreshed_at is not None:
            return index
        assert index.failure is not None
        raise copy.copy(index.failure).with_traceback(None)

    async def _refresh(self, index: LibraryIndex, source: str, prefix: str, *, force: bool) -> None:
        """One refresh of a library's index (the flight every concurrent caller shares)."""
        key = self._manifest_key(prefix)
        if key is None:
            if index.entries:
                objects, _ = await self.store.alist(prefix)
                await self._apply_listing(index, source, prefix, objects)
            else:
                await self._cold_listing(index, source, prefix)
        else:
            if index.writing is not None:  # our own manifest write: read what it wrote
                with contextlib.suppress(Exception):
                    await asyncio.shield(index.writing)
            await self._refresh_from_manifest(index, source, prefix, key, force=force)
        index.reconcile = False
        index.refreshed_at = self.clock()
        self._weighed(index)

    async def aflush(self) -> None:
        """Wait for the manifest writes that refreshes left in the background."""
        pending = [i.writing for i in self._indexes.values() if i.writing is not None and not i.writing.done()]
        for task in pending:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)

    async def areconcile(self, source: str, prefix: str) -> LibraryIndex:
        """Check a library against a LIST now (and rewrite its manifest if it differs)."""
        index = self._index(source, prefix)
        index.reconcile = True
        return await self.aindex(source, prefix)

    def _manifest_key(self, prefix: str) -> str | None:
        if self.manifest_key is None:
            return None
        try:
            return self.manifest_key(prefix)
        except ValueError:
            return None

    async def _refresh_from_manifest(
        self, index: LibraryIndex, source: str, prefix: str, key: str, *, force: bool
    ) -> None:
        """1 conditional GET of the manifest; a LIST reconciliation when one is due."""
        limit = self.limits.max_skills_per_library
        try:
            manifest = await aread_manifest(
                self.store, key, prefix, source, etag=index.manifest_etag, max_entries=limit
            )
        except NotModified:  # the entries are the index's already: only the verification time matters
            manifest = Manifest(prefix, verified_at=index.manifest_verified_at)
            manifest.etag = index.manifest_etag
        else:
            if manifest is not None and manifest.valid:
                index.entries = manifest.entries
                index.markers = index.markers | manifest.ends  # a LIST of this process may know more
                index.truncated = manifest.dropped if len(manifest.entries) >= limit else 0
            index.manifest_etag = manifest.etag if manifest is not None and manifest.valid else None
            index.manifest_verified_at = manifest.verified_at if manifest is not None else None
        now = self.clock()
        due = (
            force
            or index.reconcile
            or manifest is None
            or not manifest.valid
            or manifest.dropped > 0
            or self.verify == "always"
            or (self.verify == "interval" and self._interval_due(index, manifest, now))
        )
        if due:
            await self._reconcile(index, source, prefix, key, manifest, now)

    def _interval_due(self, index: LibraryIndex, manifest: Manifest, now: float) -> bool:
        if index.verified_at is not None and now - self.verify_interval < index.verified_at <= now:
            return False  # this process checked it recently
        return not manifest.verified_within(now, self.verify_interval)

    async def _reconcile(
        self, index: LibraryIndex, source: str, prefix: str, key: str, manifest: Manifest | None, now: float
    ) -> None:
        """LIST the library (in parallel by folder), read what changed, rewrite the manifest."""
        index.reconcile = False
        base = {sid: e.etag for sid, e in index.entries.items()} if manifest is not None and manifest.valid else {}
        if index.entries:
            objects = await self._list_parallel(prefix)
            changed = await self._apply_listing(index, source, prefix, objects)
        else:
            changed = await self._cold_listing(index, source, prefix)
        index.verified_at = now
        stale_record = self.verify == "interval" and not (
            manifest is not None and manifest.verified_within(now, self.verify_interval)
        )
        if not (changed or manifest is None or not manifest.valid or manifest.dropped or stale_record):
            return
        ours = Manifest(prefix, dict(index.entries), built_at=now, verified_at=now, ends=index.markers)
        ours.etag = manifest.etag if manifest is not None else None
        # The answer does not wait for the write: the next refresh of this index awaits it.
        index.writing = _background(self._write_manifest(index, source, prefix, key, ours, base, now))

    async def _write_manifest(
        self, index: LibraryIndex, source: str, prefix: str, key: str, ours: Manifest, base: dict[str, str], now: float
    ) -> None:
        """Store a rebuilt manifest, merging what other writers recorded meanwhile (3 tries)."""
        for _ in range(3):
            try:
                await awrite_manifest(self.store, key, ours)
                index.manifest_etag, index.manifest_verified_at = ours.etag, now
                return
            except Conflict:
                latest = await aread_manifest(
                    self.store, key, prefix, source, max_entries=self.limits.max_skills_per_library
                )
            except S3SkillsError:
                return  # a read-only bucket: the index is right, the manifest stays as it is
            if latest is None:
                ours.etag = None
                continue
            ours.etag = latest.etag
            if latest.valid:  # keep what other writers recorded since our manifest was read
                for sid, entry in latest.entries.items():
                    if base.get(sid) != entry.etag:
                        ours.entries[sid] = entry
                for sid in set(base) - set(latest.entries):
                    ours.entries.pop(sid, None)
        index.manifest_etag = None  # the next refresh reads whatever won

    async def _list_parallel(self, prefix: str) -> list[ObjectInfo]:
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

    async def _cold_listing(self, index: LibraryIndex, source: str, prefix: str) -> bool:
        """A library known of nothing: LIST it page by page, reading each SKILL.md as its page arrives.

        Twice `Limits.concurrency` reads are in flight (the connection pool `S3Backend`
        sizes): on a 20 ms proxy, 64 reads in flight indexed 1,000 skills 1.0-1.3x faster
        than 32 (bench/README.md, `bench/cold_vs_raw.py`).
        """

        def wanted(obj: ObjectInfo) -> str | None:
            sid = SkillId.from_key(obj.key, prefix)
            return None if sid is None else str(sid)

        objects, entries = await read_as_listed(
            first_page_small(self.store, prefix),
            wanted,
            self._head,
            partial(_parse_all, source),
            concurrency=2 * self.limits.concurrency,
            weight=_head_weight,
            limit=self.limits.max_skills_per_library,
        )
        return await self._apply_listing(index, source, prefix, objects, {e.skill_id: e for e in entries})

    async def _apply_listing(
        self,
        index: LibraryIndex,
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
            *await self._read_entries(
                source, [(sid, obj) for sid, obj in changed if sid not in ready or ready[sid].etag != obj.etag]
            ),
        ]
        entries = {sid: index.entries[sid] for sid in keep if sid in index.entries}
        entries.update((e.skill_id, e) for e in parsed)
        differs = bool(changed) or len(entries) != len(index.entries) or ends_changed
        # Each skill's version id comes from the same listing (no request); an index read
        # from the manifest alone keeps the versions it had (the skill's load lists it anyway).
        index.entries = _with_versions(entries, versions_by_skill(prefix, objects, entries))
        return differs

    async def _read_entries(self, source: str, objects: list[tuple[str, ObjectInfo]]) -> list[SkillEntry]:
        jobs = [partial(self._head, obj) for _, obj in objects]
        heads = await gather_limited(jobs, self.limits.concurrency)
        items = [(sid, obj, head) for (sid, obj), head in zip(objects, heads, strict=True)]
        return await asyncio.to_thread(_parse_all, source, items) if items else []

    async def arefresh_entries(self, source: str, prefix: str, skill_ids: list[str]) -> None:
        """Read some skills' `SKILL.md` again, fix the cached index and the manifest.

        For an entry found untrue (a stale or forged manifest): 1 ranged GET per
        skill, and the manifest's GET and conditional PUT.
        """
        fresh = await self.aread_entries(source, prefix, skill_ids)
        index = self._indexes.get(prefix)
        if index is not None:
            for sid, entry in fresh.items():
                if entry is None:
                    index.entries.pop(sid, None)
                else:
                    index.entries[sid] = entry
            self._weighed(index)
        key = self._manifest_key(prefix)
        if key is not None:

            async def known(ids: list[str]) -> dict[str, SkillEntry | None]:
                return (
                    {sid: fresh[sid] for sid in ids}
                    if set(ids) <= set(fresh)
                    else await self.aread_entries(source, prefix, ids)
                )

            await aupdate_manifest(
                self.store, key, prefix, skill_ids, known, source=source, max_entries=self.limits.max_skills_per_library
            )
            if index is not None:
                index.manifest_etag = None

    async def aread_entries(self, source: str, prefix: str, skill_ids: list[str]) -> dict[str, SkillEntry | None]:
        """The current entries of some skills (1 ranged GET each; None: the SKILL.md is gone)."""

        async def head(sid: str) -> tuple[str, ObjectInfo, tuple[bytes, str] | str] | None:
            key = prefix + sid + "/" + SKILL_FILE
            try:
                probe = await self.store.aget_range(key, 0, self.head_bytes)
            except NotFound:
                return None
            obj = ObjectInfo(key, probe.size, probe.etag)
            whole = probe.size <= len(probe.data) and probe.size <= self.limits.max_skill_md_bytes
            return sid, obj, (probe.data, probe.etag) if whole else await self._head(obj, probe)

        found = await gather_limited([partial(head, sid) for sid in skill_ids], self.limits.concurrency)
        items = [item for item in found if item is not None]
        out: dict[str, SkillEntry | None] = dict.fromkeys(skill_ids)
        if items:
            out.update((e.skill_id, e) for e in await asyncio.to_thread(_parse_all, source, items))
        return out

    async def _head(self, obj: ObjectInfo, probe: ObjectBody | None = None) -> tuple[bytes, str] | str:
        """The bytes of a SKILL.md needed to parse its frontmatter, or why it was skipped.

        `probe` is the first `head_bytes` already read, if the caller has them.
        """
        if obj.size > self.limits.max_skill_md_bytes:
            return f"SKILL.md is {obj.size} bytes; the limit is {self.limits.max_skill_md_bytes}"
        try:
            head = probe or await self.store.aget_range(obj.key, 0, self.head_bytes)
            if head.size <= len(head.data):
                return head.data, head.etag
            prefix = frontmatter_prefix(head.data)
            if prefix is not None:  # with the body the head holds (whole lines), for the sketch
                cut = head.data.rfind(b"\n") + 1
                return (head.data[:cut] if cut >= len(prefix) else prefix), head.etag
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
        """Forget the age of cached indexes (one prefix, or all): the next query lists.

        A refresh already in flight does not answer the queries that come after.
        """
        for key, index in self._indexes.items():
            if prefix is None or key == prefix:
                index.refreshed_at = None
                index.generation += 1

    # -- what writers hand over ---------------------------------------------------------------

    async def aentries_of(
        self, source: str, prefix: str, bodies: Mapping[str, tuple[bytes, str]]
    ) -> dict[str, SkillEntry]:
        """The entries of `SKILL.md` files a writer just stored, from their bytes (no request).

        Args:
            source: `user` or `shared`.
            prefix: The library prefix.
            bodies: Skill id -> (the `SKILL.md` bytes written, the ETag the PUT returned).

        The same entry a reader would build from a ranged GET of the object (`_head`).
        """
        items = []
        for sid, (data, etag) in bodies.items():
            obj = ObjectInfo(prefix + sid + "/" + SKILL_FILE, len(data), etag)
            items.append((sid, obj, self._head_of(data, etag)))
        return {e.skill_id: e for e in await asyncio.to_thread(_parse_all, source, items)} if items else {}

    def _head_of(self, data: bytes, etag: str) -> tuple[bytes, str] | str:
        """What `_head` would read of an object holding `data` (its head, or why not)."""
        if len(data) > self.limits.max_skill_md_bytes:
            return f"SKILL.md is {len(data)} bytes; the limit is {self.limits.max_skill_md_bytes}"
        head = data[: self.head_bytes]
        if len(data) <= len(head):
            return data, etag
        found = frontmatter_prefix(head)
        if found is not None:  # with the body the head holds (whole lines), as `_head` keeps it
            cut = head.rfind(b"\n") + 1
            return (head[:cut] if cut >= len(found) else found), etag
        more = data[: self.limits.max_frontmatter_bytes + self.head_bytes]
        if len(data) > len(more) and frontmatter_prefix(more) is None:
            return f"the frontmatter is over {self.limits.max_frontmatter_bytes} bytes"
        return (frontmatter_prefix(more) or more), etag

    async def abuild_entries(
        self, source: str, prefix: str, known: Mapping[str, SkillEntry] | None = None
    ) -> dict[str, SkillEntry]:
        """Every entry of a library from a LIST of it, for a writer creating its manifest.

        Only the `SKILL.md` files whose listed ETag matches no entry in `known` (nor in
        the cached index) are read: 1 ranged GET each.
        """
        scratch = LibraryIndex(source, prefix)
        cached = self._indexes.get(prefix)
        scratch.entries = {**(cached.entries if cached is not None else {}), **(known or {})}
        objects = await self._list_parallel(prefix)
        await self._apply_listing(scratch, source, prefix, objects)
        return scratch.entries

    # -- bodies --------------------------------------------------------------------------

    async def abody(self, entry: SkillEntry) -> tuple[str, str]:
        """The text of a skill's `SKILL.md` and the ETag it was read with.

        An ETag other than the entry's means the index (or manifest) was stale.

        Raises:
            NotFound: The `SKILL.md` is gone.
        """
        cache_key = (entry.key, entry.etag)
        hit = self._bodies.get(cache_key)
        if hit is not None:
            self._bodies.move_to_end(cache_key)
            return hit[0], entry.etag
        body = await self.store.aget(entry.key, max_bytes=self.limits.max_skill_md_bytes)
        text = body.data.decode("utf-8-sig", errors="replace")
        if body.etag != entry.etag:
            return text, body.etag
        if len(body.data) <= self.limits.body_cache_bytes // 4:
            self._bodies[cache_key] = (text, len(body.data))
            self._body_bytes += len(body.data)
            while self._body_bytes > self.limits.body_cache_bytes and self._bodies:
                _, (_, size) = self._bodies.popitem(last=False)
                self._body_bytes -= size
        return text, body.etag

    @property
    def body_cache_bytes(self) -> int:
        """Bytes of SKILL.md bodies held in memory now."""
        return self._body_bytes


def _head_weight(head: tuple[bytes, str] | str) -> int:
    """The bytes a read head gives the parser (a skipped object's reason: nothing)."""
    return len(head[0]) if isinstance(head, tuple) else 0


def _parse_all(source: str, items: list[tuple[str, ObjectInfo, tuple[bytes, str] | str]]) -> list[SkillEntry]:
    """Parse fetched heads (CPU work: in a worker thread, or on the loop a few at a time)."""
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
        info = SkillInfo(
            id=skill_id,
            metadata=parsed.metadata,
            source=source,
            etag=etag,
            warnings=parsed.warnings,
            sketch=make_sketch(parsed.body),
        )
        weight = weigh(parsed.metadata.model_dump(mode="json"), max_depth=1 << 16, limit=1 << 40)
        weight = (weight or 0) + _DEFAULT_WEIGHT + len(info.sketch)
        out.append(SkillEntry(skill_id, obj.key, etag, obj.size, info, None, weight=weight, checked=True))
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


def _background(coro: Coroutine[None, None, None]) -> asyncio.Task[None]:
    """A task whose failure is read by whoever awaits it, and never logged as unretrieved."""
    task = asyncio.ensure_future(coro)
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return task
