"""`SkillLibrary`: the one seam every front end and adapter uses for skills.

It is tenant-aware: each method works for the tenant of the current call (or an
explicit `Tenant`). It owns the catalog layers (shared < user < code skills from a
`SkillRegistry`), the rules that decide what a skill is and who may see it, and
the skills' files:

- A disabled skill (`enabled: false`) does not exist for the agent: it cannot be
  found, loaded, read or run, and its folder is not mounted.
- A skill is one folder: a folder inside it holding a `SKILL.md` key is another
  skill and is never part of the outer one (`SkillHome.excluded`), whatever that
  `SKILL.md` says (parsed or not, enabled or not) and whoever else has that id. The
  nested folders come from the outer skill's own library: its index (every `SKILL.md`
  the library's catalog saw, problems included) and, where a call lists the folder,
  the listing itself.
- A code skill never maps to S3 keys.
- Two loaded skills never share a leaf (the folder name under `/skills/`).
- A skill may be named by its id, by its leaf when that is unique, or by its frontmatter
  `name` (case-insensitive, `Xero Automation`) when that is unique: hosts name skills so.

Every coroutine has a generated sync twin (`index`, `get`, ...).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from s3skills._loop import io_bound, offload, sync_method
from s3skills.config import Config
from s3skills.errors import InvalidPath, S3SkillsError, SkillError, TenantError
from s3skills.ids import SkillId
from s3skills.skills.code.registry import SkillRegistry, merge_index
from s3skills.skills.format.model import SkillInfo, SkillProblem
from s3skills.skills.index.catalog import SkillCatalog
from s3skills.skills.index.folders import FolderCache
from s3skills.skills.index.served import ChannelServer
from s3skills.skills.index.writers import LibraryWriter
from s3skills.skills.ranking.rankers import Ranker, order_for
from s3skills.skills.ranking.suggest import closest_ids
from s3skills.skills.reads import SkillReads
from s3skills.skills.results import (
    Known,
    LoadResult,
    SkillFile,
    SkillHome,
    SkillPage,
    check_leaf_clash,
)
from s3skills.skills.usage_store import UsageRecorder
from s3skills.skills.versions.pinned import PinnedTexts
from s3skills.storage import ObjectStore
from s3skills.tenancy import Identity, Tenant, resolve_tenant, run_config

__all__ = ["LoadResult", "SkillFile", "SkillHome", "SkillLibrary", "SkillPage", "check_leaf_clash"]


@dataclass(frozen=True)
class _Merged:
    """One tenant's merged index at one version of its libraries (shared: never changed)."""

    known: dict[str, Known]
    everything: tuple[SkillInfo, ...]
    enabled: tuple[SkillInfo, ...]
    names: dict[str, tuple[str, ...]]  # frontmatter name (`_name_key`) -> the enabled skills' ids


_VIEWS = 32
"""Merged views kept per `SkillLibrary` (one per tenant library version in use)."""


class SkillLibrary(SkillReads, LibraryWriter):
    """The skills of every tenant, seen one tenant at a time.

    Args:
        store: The object store holding the libraries.
        config: Layout, shared library, TTL and limits (shared with the backend).
        registry: Code skills, indexed with the S3 skills.
        tenant: How to find the tenant of the current call; by default the run's
            context (see `s3skills.tenancy`).
        catalog: A `SkillCatalog` to share (one is built otherwise, reading each
            library's manifest as `config.manifest` and `config.verify` say).

    Writers (`acreate`, `aset_enabled`, `aremove`, `anote_changed`) keep each
    library's manifest current; see `s3skills.skills.index.writers`.
    """

    def __init__(
        self,
        store: ObjectStore,
        config: Config | None = None,
        *,
        registry: SkillRegistry | None = None,
        tenant: Callable[[], Tenant] | None = None,
        catalog: SkillCatalog | None = None,
        usage: UsageRecorder | None = None,
    ) -> None:
        self.store = store
        self.config = config or Config()
        self.registry = registry
        self.catalog = catalog or SkillCatalog(
            store,
            limits=self.config.limits,
            ttl=self.config.catalog_ttl,
            shared_ttl=self.config.shared_catalog_ttl,
            manifest_key=self.config.layout.manifest_key if self.config.manifest else None,
            verify=self.config.verify,
            verify_interval=self.config.verify_interval,
        )
        self._tenant = tenant or (lambda: self.config.check_tenant(resolve_tenant(Identity())))
        # Older SKILL.md bodies read by VersionId, keyed by what the read verified (key, VersionId and
        # the ETag S3 returned), never by a pin's claim alone: see `s3skills.skills.versions.pinned`.
        self._pinned_md = PinnedTexts(self.config.limits.body_cache_bytes // 4)
        self._confirmed_md: OrderedDict[tuple[str, str], None] = OrderedDict()  # (key, ETag) found enabled
        # The merged index of each recent library version (`_merged`): key -> (key's objects, view).
        self._views: OrderedDict[tuple[object, ...], tuple[tuple[object, ...], _Merged]] = OrderedDict()
        self.channels = ChannelServer(store, self.config, self.catalog)  # `Config.channel`, if any
        self.usage = usage or UsageRecorder(
            store,
            self.config.layout,
            interval=self.config.usage_flush_interval,
            enabled=self.config.usage_store,
        )
        """Counts of loads and runs per library and day, written to `.s3skills/usage/` (`count_use`)."""
        # Skill folders' listings and files, within the index's TTL (`s3skills.skills.index.folders`).
        self.folders = FolderCache(store, self.config.limits, self.catalog.ttl_of, lambda: self.catalog.clock())

    def tenant(self) -> Tenant:
        """The tenant of the current call."""
        return self._tenant()

    def with_registry(self, registry: SkillRegistry | None) -> SkillLibrary:
        """The same library (store, catalog cache, tenancy) with other code skills."""
        if registry is None or registry is self.registry:
            return self
        return SkillLibrary(
            self.store, self.config, registry=registry, tenant=self._tenant, catalog=self.catalog, usage=self.usage
        )

    def _user(self, tenant: Tenant | None) -> Tenant:
        tenant = tenant or self.tenant()
        self.config.layout.user_prefix(tenant.user_id)  # the clear "no user id" error
        return tenant

    def libraries(self, tenant: Tenant) -> list[tuple[str, str]]:
        """`(source, prefix)` of the tenant's libraries, lowest precedence first."""
        out = []
        if self.config.shared_library is not None:
            out.append(("shared", self.config.layout.shared_prefix(self.config.shared_library)))
        out.append(("user", self.config.layout.user_prefix(tenant.user_id)))
        return out

    # -- the merged index ------------------------------------------------------------------

    async def _known(self, tenant: Tenant, *, cached: bool = False, refresh: bool = False) -> dict[str, Known]:
        """The tenant's merged skills by id (shared between calls: read it, never change it)."""
        return (await self._merged(tenant, cached=cached, refresh=refresh)).known

    async def _merged(self, tenant: Tenant, *, cached: bool = False, refresh: bool = False) -> _Merged:
        indexes = [
            (source, prefix, await self.catalog.aindex(source, prefix, cached=cached, force=refresh))
            for source, prefix in self.libraries(tenant)
        ]
        served = [await self.channels.aserve(source, prefix, index) for source, prefix, index in indexes]
        code = self.registry.list_skills(run_config(tenant)) if self.registry is not None else []
        # The key is what the catalog holds (the very entry objects it verified, recognised by
        # identity: a changed SKILL.md, a refresh or a rebuilt manifest makes new ones) and the
        # code skills' metadata objects; nothing a client sends takes part. The key's objects are
        # kept alive with the view, so their identities cannot be reused while it is cached.
        key = (
            tuple(
                (source, prefix, id(index), tuple(map(id, index.entries.values()))) for source, prefix, index in indexes
            )
            + tuple((s.id, id(s.metadata)) for s in code)
            + tuple(map(id, served))
        )
        hit = self._views.get(key)
        if hit is not None:
            self._views.move_to_end(key)
            return hit[1]
        merged: dict[str, Known] = {}
        for (source, prefix, index), shown in zip(indexes, served, strict=True):
            for skill_id, entry in (index.entries if shown is None else shown.entries).items():
                if entry.info is not None:
                    merged[skill_id] = Known(entry.info, entry, prefix, index)
                elif source == "user":
                    merged.pop(skill_id, None)  # a broken user copy hides the shared one
        for info in merge_index([], code):
            merged[info.id] = Known(info, None, None)
        ordered = [k.info for _, k in sorted(merged.items())]
        enabled = tuple(s for s in ordered if s.metadata.enabled)
        names: dict[str, tuple[str, ...]] = {}
        for info in enabled:  # built once per view: a lookup by name costs no request and no scan
            named = _name_key(info.metadata.name)
            names[named] = (*names.get(named, ()), info.id)
        view = _Merged(merged, tuple(ordered), enabled, names)
        holders: tuple[object, ...] = (
            tuple((source, prefix, index, tuple(index.entries.values())) for source, prefix, index in indexes)
            + tuple((s.id, s.metadata) for s in code)
            + tuple(served)
        )
        self._views[key] = (holders, view)
        while len(self._views) > _VIEWS:
            self._views.popitem(last=False)
        return view

    @io_bound
    async def aindex(
        self,
        category: str | None = None,
        *,
        include_disabled: bool = False,
        tenant: Tenant | None = None,
        cached: bool = False,
        refresh: bool = False,
    ) -> list[SkillInfo]:
        """The tenant's skills (code over user over shared), sorted by id.

        The merged, sorted view is computed once per version of the tenant's libraries (what
        the catalog verified) and reused by every call until one changes; each call gets its
        own list, holding the same `SkillInfo` objects (so the ranking's caches recognise them).

        Args:
            category: Only skills of this category (None or "all": every one).
            include_disabled: Also disabled skills (for management tools, never agents).
            tenant: The tenant (default: the current call's).
            cached: Use indexes already read whatever their age (no request if all were).
            refresh: List even within the TTL.
        """
        view = await self._merged(self._user(tenant), cached=cached, refresh=refresh)
        skills = view.everything if include_disabled else view.enabled
        if category and category != "all":
            return [s for s in skills if s.category == category]
        return list(skills)

    async def _find(self, name: str, tenant: Tenant, *, cached: bool = False) -> Known:
        """An enabled skill by id, unique leaf or unique frontmatter name; unknown, disabled and
        ambiguous raise."""
        return (await self._find_in(name, tenant, cached=cached))[0]

    async def _find_in(self, name: str, tenant: Tenant, *, cached: bool = False) -> tuple[Known, dict[str, Known]]:
        """`_find`, with the merged index it was found in.

        The id first, then the folder name (leaf), then the frontmatter `name`, compared
        case-insensitively (`Xero Automation`), which is how hosts name skills; a name
        that is not a valid id (spaces, uppercase...) is only looked up so. All from the
        merged view already read: no request beyond the index.
        """
        view = await self._merged(tenant, cached=cached)
        if cached and not _resolves(name, view):
            view = await self._merged(tenant)  # a skill the cached index does not know yet
        known = view.known
        try:
            wanted: str | None = _name(name)
        except InvalidPath:
            wanted = None  # not an id: perhaps a skill's name
        hit = None if wanted is None else known.get(wanted)
        if wanted is not None and hit is None and "/" not in wanted:
            leaves = [k for sid, k in known.items() if _leaf(sid) == wanted and k.info.metadata.enabled]
            if len(leaves) > 1:
                ids = ", ".join(sorted(k.info.id for k in leaves))
                raise SkillError(f"'{wanted}' names several skills ({ids}): give the full id.")
            hit = leaves[0] if leaves else None
        if hit is not None and hit.info.metadata.enabled:
            return hit, known
        by_name = view.names.get(_name_key(name), ()) if isinstance(name, str) else ()
        if len(by_name) > 1:
            raise SkillError(f"{name!r} is the name of several skills ({', '.join(by_name)}): give the id.")
        if by_name:
            return known[by_name[0]], known
        if wanted is None:
            _name(name)  # raises the invalid id's error
        assert wanted is not None
        code = self.registry.get(wanted) if self.registry is not None else None
        if code is not None and hit is None:
            raise SkillError(f"The skill '{wanted}' is not available in this context.")
        suggestions = closest_ids(wanted, list(view.enabled))
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise SkillError(f"Skill '{wanted}' not found.{hint} Call list_skills to see them all.")

    @io_bound
    async def aget(self, name: str, *, tenant: Tenant | None = None, cached: bool = False) -> SkillInfo:
        """One enabled skill, by id, or by its folder name or frontmatter `name` when unique.

        Raises:
            SkillError: Unknown, disabled or ambiguous (the message suggests ids).
            InvalidPath: A malformed name.
        """
        return (await self._find(name, self._user(tenant), cached=cached)).info

    @io_bound
    async def aresolve(self, name: str, *, tenant: Tenant | None = None, cached: bool = False) -> str:
        """The id of the enabled skill `name` stands for (an id, a unique folder name or `name`).

        With `cached`, the index already read answers (no request unless it does not know `name`).
        """
        return (await self._find(name, self._user(tenant), cached=cached)).info.id

    @io_bound
    async def asearch(
        self,
        query: str = "",
        *,
        limit: int = 20,
        cursor: str | None = None,
        category: str | None = None,
        tenant: Tenant | None = None,
        prior: Mapping[str, float] | None = None,
        ranker: Ranker | None = None,
    ) -> SkillPage:
        """Enabled skills ranked for `query` (BM25), or by id without a query, in pages.

        Args:
            query: Words of the request; empty lists every skill by id.
            limit: Skills per page.
            cursor: The `next_cursor` of the previous page.
            category: Only this category.
            prior: Raises the matches the user uses (`s3skills.skills.ranking.rankers.prior_for`, from
                the server's usage log: never from what a client sent).
            ranker: Who ranks the matches (`s3skills.skills.Ranker`); the lexical one by default.
        """
        skills = await self.aindex(category, tenant=tenant)
        if query.strip():
            # The matches best first, then by id: ranked in a worker thread, so the shared I/O
            # loop serves other tenants meanwhile (the query is capped where it enters).
            skills = await offload(order_for, [query], skills, prior=prior, ranker=ranker)
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise InvalidPath(f"Invalid cursor {cursor!r}: pass the next_cursor of a previous page") from None
        start = max(0, start)
        page = skills[start : start + max(1, limit)]
        end = start + len(page)
        return SkillPage(page, len(skills), str(end) if end < len(skills) else None)

    # -- housekeeping -----------------------------------------------------------------------

    def problems(self, tenant: Tenant | None = None) -> list[SkillProblem]:
        """Skipped and suspicious skills seen by the last indexing of the tenant's libraries."""
        tenant = self._user(tenant)
        out: list[SkillProblem] = []
        for source, prefix in self.libraries(tenant):
            index = self.catalog.cached(prefix)
            if index is None:
                continue
            for skill_id, entry in sorted(index.entries.items()):
                if entry.problem is not None:
                    out.append(SkillProblem(skill_id, source, "error", entry.problem))
                elif entry.info is not None:
                    out.extend(SkillProblem(skill_id, source, "warning", w) for w in entry.info.warnings)
            if index.truncated:
                out.append(
                    SkillProblem(
                        "*",
                        source,
                        "error",
                        f"{index.truncated} skills were not indexed: the limit is "
                        f"{self.config.limits.max_skills_per_library} per library",
                    )
                )
        return out

    def count_use(self, skill_id: str, event: str, outcome: str, *, tenant: Tenant | None = None) -> None:
        """Count a use of `skill_id` in the usage of the library the tenant's index finds it in.

        `event` and `outcome` are the usage record's (`log_usage`). No request and no I/O:
        the library is looked up in the indexes already cached (the user's library first, as
        it overrides the shared one); a skill found in none (a code skill, a name that did
        not resolve) is not counted. Writes happen in the background (`UsageRecorder`);
        this never raises.
        """
        if not self.usage.enabled:
            return
        try:
            tenant = self._user(tenant)
            for _, prefix in reversed(self.libraries(tenant)):
                index = self.catalog.cached(prefix)
                entry = index.entries.get(skill_id) if index is not None else None
                if entry is not None and entry.info is not None:
                    self.usage.count(prefix, skill_id, event, outcome)
                    return
        except (S3SkillsError, ValueError):
            return  # no tenant, no library: nothing to count it in

    @io_bound
    async def aflush(self) -> None:
        """Wait for the manifest writes an index left in the background, and write the usage
        counts not yet written (a process calls it before it exits)."""
        await LibraryWriter.aflush(self)
        await self.usage.aflush()

    def invalidate(self, tenant: Tenant | None = None) -> None:
        """Forget the age of the tenant's cached indexes (all, with no tenant known)."""
        try:
            tenant = self._user(tenant)
        except TenantError:
            self.catalog.invalidate()
            self.channels.invalidate()
            return
        for _, prefix in self.libraries(tenant):
            self.catalog.invalidate(prefix)
            self.channels.invalidate(prefix)

    index = sync_method(aindex)
    get = sync_method(aget)
    resolve = sync_method(aresolve)
    search = sync_method(asearch)
    home = sync_method(SkillReads.ahome)
    skill_md = sync_method(SkillReads.askill_md)
    instructions = sync_method(SkillReads.ainstructions)
    files = sync_method(SkillReads.afiles)
    files_many = sync_method(SkillReads.afiles_many)
    open = sync_method(SkillReads.aopen)
    load = sync_method(SkillReads.aload)
    version = sync_method(SkillReads.aversion)
    history = sync_method(SkillReads.ahistory)
    note_changed = sync_method(LibraryWriter.anote_changed)
    create = sync_method(LibraryWriter.acreate)
    set_enabled = sync_method(LibraryWriter.aset_enabled)
    remove = sync_method(LibraryWriter.aremove)
    flush = sync_method(aflush)


def _name(name: object) -> str:
    """A skill name as given (an id or a leaf), checked."""
    return str(SkillId.parse(name))


def _name_key(name: str) -> str:
    """A frontmatter name as names are compared: case-insensitive, runs of spaces as one."""
    return " ".join(name.split()).casefold()


def _resolves(name: str, view: _Merged) -> bool:
    """Whether `view` knows `name` (as an id, a leaf or a skill's name)."""
    if isinstance(name, str) and _name_key(name) in view.names:
        return True
    try:
        wanted = _name(name)
    except InvalidPath:
        return False
    return wanted in view.known or any(_leaf(sid) == wanted for sid in view.known)


def _leaf(skill_id: str) -> str:
    """The folder name of a canonical id from the index (no parsing needed)."""
    return skill_id.rpartition("/")[2]
