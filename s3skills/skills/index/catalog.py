"""`SkillCatalog`: the index of each library prefix, cached by ETag.

A library is a key prefix (`users/ana/skills/`); a skill is a folder holding
`SKILL.md` one or two levels below it (`s3skills.ids.SkillId.from_key`). Indexing
a library costs one LIST per 1,000 keys; only the `SKILL.md` objects whose ETag
changed are read again, with a ranged GET of their head when that holds the whole
frontmatter. Parsing runs in a worker thread, except a cold listing's, which runs on
the loop a few heads at a time (`s3skills.skills.index.streaming`): either way a library of
large frontmatters stalls other tenants only briefly. With a TTL, a refresh inside the
TTL costs nothing; the shared library may have a TTL of its own (`shared_ttl`: every
tenant reads it), while the user's library is asked on every query.

With a manifest (`s3skills.skills.index.manifest`, on when the catalog is given
`manifest_key`), indexing a library is one conditional GET of its manifest: 304 when
unchanged, no LIST. `verify` says when the manifest is checked against a LIST of
the library (in parallel by category folder), changed `SKILL.md` files read again
and the manifest rewritten: `always` on every refresh, `interval` at most once per
`verify_interval` seconds (and whenever the manifest says no LIST confirmed it that
recently), `never` only when the manifest is missing or damaged.

One refresh per library is in flight at a time, and every caller that asks while it runs
shares its answer (single-flight): however many tenants use a shared library, it costs one
conditional GET per refresh, and nobody queues behind a lock held across a request. A
library that concurrent callers are asking for (one shared a refresh in the last second)
has its next refresh wait as long as its last one took (at most `gather_delay`) before it
asks, so that more callers share it, each answered with what the store held after it
asked. A manifest rebuilt by a refresh is written in the background, after the answer
(`aflush` waits for those writes). A library known of nothing is listed page by page, the
first page small, each `SKILL.md` head read and parsed as its page arrives (`streaming`).

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
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field

from s3skills.config import Limits, VerifyMode
from s3skills.errors import S3SkillsError
from s3skills.skills.index.bodies import BodyCache
from s3skills.skills.index.heads import DEFAULT_ENTRY_WEIGHT, HeadReader
from s3skills.skills.index.listing import Lister
from s3skills.skills.index.manifest import Manifest, SkillEntry, aread_manifest, aupdate_manifest
from s3skills.skills.index.marks import amerge_write, live_marks
from s3skills.storage import NotModified, ObjectStore

__all__ = ["GATHER_DELAY", "LibraryIndex", "SkillCatalog", "SkillEntry"]

GATHER_DELAY = 0.2
"""Default `SkillCatalog.gather_delay` (seconds), chosen from `bench/tenants.py` (bench/README.md)."""

_CONTENDED = 1.0  # seconds a library counts as asked by concurrent callers after one shared a refresh


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
        manifest_writing: The writers' marks that manifest holds (`s3skills.skills.index.marks`).
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
        contended_until: Until when (`time.monotonic`) a refresh waits before it asks
            (`refresh_seconds`, the last one's duration): concurrent callers shared one recently.
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
    manifest_writing: dict[str, float] = field(default_factory=dict)
    verified_at: float | None = None
    reconcile: bool = False
    markers: frozenset[str] = frozenset()
    weight: int = 0
    generation: int = 0
    flight_generation: int = 0
    contended_until: float = 0.0
    refresh_seconds: float = 0.0
    writing: asyncio.Task[None] | None = field(default=None, repr=False)

    def skill_folders(self) -> set[str]:
        """Every folder of this library known to hold a `SKILL.md`, parsed or not, enabled or not.

        From the entries (the manifest's or a LIST's, problems included) and the last LIST's
        `SKILL.md` keys; relative to `prefix`, each ending with `/`.
        """
        return {sid + "/" for sid in self.entries} | self.markers

    def folders_below(self, folder: str) -> list[str]:
        """The folders of `skill_folders` strictly inside `folder` (relative, ending with `/`), sorted.

        What `skill_folders` filtered to `folder` gives, without building the library's whole
        set: asked on every file read of a skill, in a library of 10,000 skills.
        """
        below = {sid + "/" for sid in self.entries if sid.startswith(folder)}
        below.update(m for m in self.markers if m.startswith(folder))
        below.discard(folder)
        return sorted(below)


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
        gather_delay: The most seconds a contended refresh waits (as long as the last took:
            a fixed 0.2 s held every call of a busy server, bench/README.md); 0: never.
        monotonic: The clock of that window and of a refresh's duration (tests move it).
        sleep: How a refresh waits for more callers (tests release it by hand).
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
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if verify not in ("always", "interval", "never"):
            raise ValueError("verify must be 'always', 'interval' or 'never'")
        self.store = store
        self.manifest_key = manifest_key
        self.verify = verify
        self.verify_interval = verify_interval
        self.gather_delay = gather_delay
        self.monotonic = monotonic
        self.sleep = sleep
        self.limits = limits or Limits()
        self.ttl = ttl
        self.shared_ttl = shared_ttl
        self.heads = HeadReader(store, self.limits, head_bytes)
        self.lister = Lister(store, self.limits, self.heads)
        self.max_libraries = max_libraries
        self.max_index_bytes = max_index_bytes
        self.failure_backoff = failure_backoff
        self.clock = clock
        self._indexes: OrderedDict[str, LibraryIndex] = OrderedDict()
        self.bodies = BodyCache(store, self.limits)
        self.observers: list[Callable[[bool, float], None]] = []  # (answered from memory, its age)

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
        index.weight = sum(e.weight or DEFAULT_ENTRY_WEIGHT for e in index.entries.values())
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
        """The index of one library, refreshed unless it is fresh (each answer told to `observers`).

        One refresh is in flight per library: a caller that finds one running shares its answer
        (or its error) instead of queueing for another. A refresh that failed is not tried again
        for `failure_backoff` seconds: meanwhile the last good index answers, or the failure does.

        Args:
            source: `user` or `shared` (recorded on each `SkillInfo`).
            prefix: The library's key prefix (ends with `skills/`).
            force: List even within the TTL (and within a failure's back-off); a refresh
                already in flight is not enough, one that starts after this call is made.
            cached: Accept any index already read, whatever its age.
        """
        before = self._indexes[prefix].refreshed_at if prefix in self._indexes else None
        index = await self._aindex(source, prefix, force=force, cached=cached)
        for observe in self.observers:
            observe(before is not None and index.refreshed_at == before, self.clock() - (index.refreshed_at or 0.0))
        return index

    async def _aindex(self, source: str, prefix: str, *, force: bool, cached: bool) -> LibraryIndex:
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
                index.contended_until = self.monotonic() + _CONTENDED
                try:
                    return await asyncio.shield(flight)
                except asyncio.CancelledError:
                    if not flight.cancelled():
                        raise  # this call was cancelled
                return await self._aindex(source, prefix, force=False, cached=False)  # that refresh was cancelled
            if index.failure is not None and self.clock() < index.failed_until:
                return self._after_failure(index)
        flight = asyncio.get_running_loop().create_future()
        async with index.lock:  # forced refreshes run one after another, never interleaved
            if not must and self._fresh(index):  # one finished while this call waited
                flight.set_result(index)
                return index
            index.flight, index.flight_generation = flight, index.generation
            try:
                wait = min(self.gather_delay, index.refresh_seconds)  # one round trip, bounded
                if not must and wait > 0 and self.monotonic() < index.contended_until:
                    await self.sleep(wait)  # the callers arriving now share this refresh
                started = self.monotonic()
                await self._refresh(index, source, prefix, force=force)
                index.refresh_seconds = self.monotonic() - started
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
                await self.lister.aapply(index, source, prefix, objects)
            else:
                await self.lister.acold(index, source, prefix)
        else:
            if index.writing is not None:  # our own manifest write: read what it wrote
                with contextlib.suppress(Exception):
                    await asyncio.shield(index.writing)
            await self._refresh_from_manifest(index, source, prefix, key, force=force)
        index.reconcile, index.refreshed_at = False, self.clock()
        self._weighed(index)

    async def aflush(self) -> None:
        """Wait for the manifest writes that refreshes left in the background."""
        for task in [i.writing for i in self._indexes.values() if i.writing is not None and not i.writing.done()]:
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
            manifest = Manifest(prefix, verified_at=index.manifest_verified_at, writing=index.manifest_writing)
            manifest.etag = index.manifest_etag
        else:
            if manifest is not None and manifest.valid:
                index.entries = manifest.entries
                index.markers = index.markers | manifest.ends  # a LIST of this process may know more
                index.truncated = manifest.dropped if len(manifest.entries) >= limit else 0
            index.manifest_etag = manifest.etag if manifest is not None and manifest.valid else None
            index.manifest_verified_at = manifest.verified_at if manifest is not None else None
            index.manifest_writing = manifest.writing if manifest is not None else {}
        now = self.clock()
        due = (
            force
            or index.reconcile
            or manifest is None
            or not manifest.valid
            or manifest.dropped > 0
            or bool(manifest.writing)  # a writer is writing, or died writing: the bucket may be ahead
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
            objects = await self.lister.alist(prefix)
            changed = await self.lister.aapply(index, source, prefix, objects)
        else:
            changed = await self.lister.acold(index, source, prefix)
        index.verified_at = now
        stale_record = self.verify == "interval" and not (
            manifest is not None and manifest.verified_within(now, self.verify_interval)
        )
        live = live_marks(manifest, now)  # kept; a mark not renewed within the lease is dropped
        dead = manifest is not None and live != manifest.writing
        if not (changed or manifest is None or not manifest.valid or manifest.dropped or stale_record or dead):
            return
        ours = Manifest(prefix, dict(index.entries), built_at=now, verified_at=now, ends=index.markers, writing=live)
        ours.etag = manifest.etag if manifest is not None else None
        # The answer does not wait for the write: the next refresh of this index awaits it.
        index.writing = _background(self._write_manifest(index, source, prefix, key, ours, base, now))

    async def _write_manifest(
        self, index: LibraryIndex, source: str, prefix: str, key: str, ours: Manifest, base: dict[str, str], now: float
    ) -> None:
        """Store a rebuilt manifest (see `amerge_write`); the index learns the ETag it has now."""
        limit = self.limits.max_skills_per_library
        before = dict(ours.entries)
        written = await amerge_write(self.store, key, ours, base, source=source, max_entries=limit, now=now)
        merged = ours.entries.keys() != before.keys() or any(e is not before[s] for s, e in ours.entries.items())
        if written and not merged:
            index.manifest_etag, index.manifest_verified_at = ours.etag, now
        elif written is not None:
            # Another writer won, or wrote meanwhile and its entries were merged into ours:
            # the index lacks them, so the next refresh reads the manifest whole (1 GET).
            index.manifest_etag = None

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

    @property
    def head_bytes(self) -> int:
        """How much of a `SKILL.md` the first ranged GET reads."""
        return self.heads.head_bytes

    async def aread_entries(self, source: str, prefix: str, skill_ids: list[str]) -> dict[str, SkillEntry | None]:
        """The current entries of some skills (1 ranged GET each; None: the SKILL.md is gone)."""
        return await self.heads.aentries(source, prefix, skill_ids)

    def invalidate(self, prefix: str | None = None) -> None:
        """Forget the age of cached indexes (one prefix, or all): the next query lists.

        A refresh already in flight does not answer the queries that come after.
        """
        for key, index in self._indexes.items():
            if prefix is None or key == prefix:
                index.refreshed_at = None
                index.generation += 1

    # -- bodies --------------------------------------------------------------------------

    async def abody(self, entry: SkillEntry) -> tuple[str, str]:
        """The text of a skill's `SKILL.md` and its ETag, from the body cache (see `BodyCache.aget`)."""
        return await self.bodies.aget(entry)

    @property
    def body_cache_bytes(self) -> int:
        """Bytes of SKILL.md bodies held in memory now."""
        return self.bodies.size

    def known_entries(self, prefix: str) -> dict[str, SkillEntry]:
        """The entries this catalog holds for `prefix`, however old (no request; empty if none)."""
        index = self._indexes.get(prefix)
        return dict(index.entries) if index is not None else {}


def _background(coro: Coroutine[None, None, None]) -> asyncio.Task[None]:
    """A task whose failure is read by whoever awaits it, and never logged as unretrieved."""
    task = asyncio.ensure_future(coro)
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return task
