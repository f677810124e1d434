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
- A skill may be named by its id or by its leaf when that is unique.

Every coroutine has a generated sync twin (`index`, `get`, ...).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from s3skills._loop import io_bound, sync_method
from s3skills.config import Config
from s3skills.errors import AccessDenied, InvalidPath, NotFound, SkillError, StoreError, TenantError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import VPath, join_key
from s3skills.skills.catalog import LibraryIndex, SkillCatalog, SkillEntry
from s3skills.skills.matching import closest_ids
from s3skills.skills.model import InvalidSkill, SkillInfo, SkillProblem
from s3skills.skills.parse import get_skill_doc, parse_skill_md
from s3skills.skills.pinned import VerifiedKey, read_verified, verified_key
from s3skills.skills.ranking import Ranker, order_for
from s3skills.skills.registry import SkillRegistry, merge_index
from s3skills.skills.results import (
    LoadResult,
    SkillFile,
    SkillHome,
    SkillPage,
    check_leaf_clash,
    files_of,
    shared_prefix,
    sort_into_homes,
)
from s3skills.skills.versions import SkillVersion, current_from_objects, current_version
from s3skills.skills.versions import history as version_history
from s3skills.skills.writers import LibraryWriter
from s3skills.storage import ObjectBody, ObjectInfo, ObjectStore, ObjectVersion
from s3skills.tenancy import Identity, SkillPin, Tenant, resolve_tenant, run_config

__all__ = ["LoadResult", "SkillFile", "SkillHome", "SkillLibrary", "SkillPage", "check_leaf_clash"]


@dataclass(frozen=True, slots=True)
class _Known:
    """A skill of the merged index, with the entry and library it came from (None: code)."""

    info: SkillInfo
    entry: SkillEntry | None
    prefix: str | None
    library: LibraryIndex | None = None


@dataclass(frozen=True)
class _Merged:
    """One tenant's merged index at one version of its libraries (shared: never changed)."""

    known: dict[str, _Known]
    everything: tuple[SkillInfo, ...]
    enabled: tuple[SkillInfo, ...]


_VIEWS = 32
"""Merged views kept per `SkillLibrary` (one per tenant library version in use)."""


class SkillLibrary(LibraryWriter):
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
    library's manifest current; see `s3skills.skills.writers`.
    """

    def __init__(
        self,
        store: ObjectStore,
        config: Config | None = None,
        *,
        registry: SkillRegistry | None = None,
        tenant: Callable[[], Tenant] | None = None,
        catalog: SkillCatalog | None = None,
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
        # the ETag S3 returned), never by a pin's claim alone: see `s3skills.skills.pinned`.
        self._pinned_md: OrderedDict[VerifiedKey, str] = OrderedDict()
        self._confirmed_md: OrderedDict[tuple[str, str], None] = OrderedDict()  # (key, ETag) found enabled
        # The merged index of each recent library version (`_merged`): key -> (key's objects, view).
        self._views: OrderedDict[tuple[object, ...], tuple[tuple[object, ...], _Merged]] = OrderedDict()

    def tenant(self) -> Tenant:
        """The tenant of the current call."""
        return self._tenant()

    def with_registry(self, registry: SkillRegistry | None) -> SkillLibrary:
        """The same library (store, catalog cache, tenancy) with other code skills."""
        if registry is None or registry is self.registry:
            return self
        return SkillLibrary(self.store, self.config, registry=registry, tenant=self._tenant, catalog=self.catalog)

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

    async def _known(self, tenant: Tenant, *, cached: bool = False, refresh: bool = False) -> dict[str, _Known]:
        """The tenant's merged skills by id (shared between calls: read it, never change it)."""
        return (await self._merged(tenant, cached=cached, refresh=refresh)).known

    async def _merged(self, tenant: Tenant, *, cached: bool = False, refresh: bool = False) -> _Merged:
        indexes = [
            (source, prefix, await self.catalog.aindex(source, prefix, cached=cached, force=refresh))
            for source, prefix in self.libraries(tenant)
        ]
        code = self.registry.list_skills(run_config(tenant)) if self.registry is not None else []
        # The key is what the catalog holds (the very entry objects it verified, recognised by
        # identity: a changed SKILL.md, a refresh or a rebuilt manifest makes new ones) and the
        # code skills' metadata objects; nothing a client sends takes part. The key's objects are
        # kept alive with the view, so their identities cannot be reused while it is cached.
        key = tuple(
            (source, prefix, id(index), tuple(map(id, index.entries.values()))) for source, prefix, index in indexes
        ) + tuple((s.id, id(s.metadata)) for s in code)
        hit = self._views.get(key)
        if hit is not None:
            self._views.move_to_end(key)
            return hit[1]
        merged: dict[str, _Known] = {}
        for source, prefix, index in indexes:
            for skill_id, entry in index.entries.items():
                if entry.info is not None:
                    merged[skill_id] = _Known(entry.info, entry, prefix, index)
                elif source == "user":
                    merged.pop(skill_id, None)  # a broken user copy hides the shared one
        for info in merge_index([], code):
            merged[info.id] = _Known(info, None, None)
        ordered = [k.info for _, k in sorted(merged.items())]
        view = _Merged(merged, tuple(ordered), tuple(s for s in ordered if s.metadata.enabled))
        holders: tuple[object, ...] = tuple(
            (source, prefix, index, tuple(index.entries.values())) for source, prefix, index in indexes
        ) + tuple((s.id, s.metadata) for s in code)
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

    async def _find(self, name: str, tenant: Tenant, *, cached: bool = False) -> _Known:
        """An enabled skill by id or unique leaf; unknown, disabled and ambiguous raise."""
        return (await self._find_in(name, tenant, cached=cached))[0]

    async def _find_in(self, name: str, tenant: Tenant, *, cached: bool = False) -> tuple[_Known, dict[str, _Known]]:
        """`_find`, with the merged index it was found in."""
        known = await self._known(tenant, cached=cached)
        if cached and not _resolves(name, known):
            known = await self._known(tenant)  # a skill the cached index does not know yet
        wanted = _name(name)
        hit = known.get(wanted)
        if hit is None and "/" not in wanted:
            leaves = [k for sid, k in known.items() if _leaf(sid) == wanted and k.info.metadata.enabled]
            if len(leaves) > 1:
                ids = ", ".join(sorted(k.info.id for k in leaves))
                raise SkillError(f"'{wanted}' names several skills ({ids}): give the full id.")
            hit = leaves[0] if leaves else None
        if hit is not None and hit.info.metadata.enabled:
            return hit, known
        code = self.registry.get(wanted) if self.registry is not None else None
        if code is not None and hit is None:
            raise SkillError(f"The skill '{wanted}' is not available in this context.")
        enabled = [k.info for k in known.values() if k.info.metadata.enabled]
        suggestions = closest_ids(wanted, enabled)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise SkillError(f"Skill '{wanted}' not found.{hint} Call list_skills to see them all.")

    @io_bound
    async def aget(self, name: str, *, tenant: Tenant | None = None, cached: bool = False) -> SkillInfo:
        """One enabled skill, by id or by its folder name when unique.

        Raises:
            SkillError: Unknown, disabled or ambiguous (the message suggests ids).
            InvalidPath: A malformed name.
        """
        return (await self._find(name, self._user(tenant), cached=cached)).info

    @io_bound
    async def aresolve(self, name: str, *, tenant: Tenant | None = None, cached: bool = False) -> str:
        """The id of the enabled skill `name` stands for (an id or a unique folder name).

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
            prior: Raises the matches the user uses (`s3skills.skills.ranking.prior_for`, from
                the server's usage log: never from what a client sent).
            ranker: Who ranks the matches (`s3skills.skills.Ranker`); the lexical one by default.
        """
        skills = await self.aindex(category, tenant=tenant)
        if query.strip():
            skills = order_for([query], skills, prior=prior, ranker=ranker)  # the matches best first, then by id
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise InvalidPath(f"Invalid cursor {cursor!r}: pass the next_cursor of a previous page") from None
        start = max(0, start)
        page = skills[start : start + max(1, limit)]
        end = start + len(page)
        return SkillPage(page, len(skills), str(end) if end < len(skills) else None)

    # -- one skill ---------------------------------------------------------------------------

    @staticmethod
    def _home(hit: _Known) -> SkillHome:
        """Where `hit` lives, with every folder below it that holds a `SKILL.md` of its own library.

        Never from the merged index: a nested skill that another library (the user's own,
        shadowing a shared one) also has, or that is disabled or does not parse, still ends
        the outer skill in the outer skill's library.
        """
        if hit.prefix is None:
            raise NotFound(f"'{hit.info.id}' is a code skill: it has no files")
        inside = hit.info.id + "/"  # ids in the index are canonical: a string prefix is a folder prefix
        folders = hit.library.skill_folders() if hit.library is not None else {inside}
        nested = sorted(f for f in folders if f.startswith(inside) and f != inside)
        return SkillHome(hit.info, hit.prefix + inside, tuple(hit.prefix + f for f in nested))

    @io_bound
    async def ahome(self, name: str, *, tenant: Tenant | None = None, cached: bool = True) -> SkillHome:
        """Where an enabled S3 skill's files live (for the filesystem adapter).

        By default the index already read is trusted (no request on a hot path);
        a skill it does not know is looked up again.

        Raises:
            SkillError: Unknown or disabled. NotFound: a code skill (no files).
        """
        tenant = self._user(tenant)
        hit, _ = await self._find_in(name, tenant, cached=cached)
        return self._home(await self._confirmed(hit, tenant))

    async def _confirmed(self, hit: _Known, tenant: Tenant) -> _Known:
        """`hit`, once its real `SKILL.md` says it is enabled (the index may come from a lying manifest).

        An entry this process parsed from the `SKILL.md` itself needs nothing; one from a
        manifest is checked once per `SKILL.md` version (key and ETag), and the body is cached
        by ETag, so a skill just loaded or prompted costs nothing more. A file of a skill the
        index wrongly calls enabled is never opened or staged. (Listing several skills' files
        at once, `afiles_many`, shows names and sizes only, and does not check.)

        Raises:
            SkillError: The `SKILL.md` is gone or does not enable the skill.
        """
        if hit.entry is None or hit.entry.checked or (hit.entry.key, hit.entry.etag) in self._confirmed_md:
            return hit
        hit, _ = await self._text(hit, tenant)
        self._confirm(hit)
        return hit

    def _confirm(self, hit: _Known) -> None:
        """Remember that this version of the skill's `SKILL.md` enables it (at most 65,536 kept)."""
        if hit.entry is not None:
            self._confirmed_md[(hit.entry.key, hit.entry.etag)] = None
            while len(self._confirmed_md) > 65_536:
                self._confirmed_md.popitem(last=False)

    @io_bound
    async def askill_md(self, name: str, *, tenant: Tenant | None = None) -> str:
        """The full text of an enabled skill's `SKILL.md` (cached by ETag).

        A code skill gives its instructions.
        """
        tenant = self._user(tenant)
        hit = await self._find(name, tenant)
        if hit.entry is None:
            return self._code_instructions(hit.info.id)
        return (await self._text(hit, tenant))[1]

    @io_bound
    async def ainstructions(self, name: str, *, tenant: Tenant | None = None) -> str:
        """The instructions of an enabled skill: its `SKILL.md` body, or a code skill's own."""
        tenant = self._user(tenant)
        hit = await self._find(name, tenant)
        if hit.entry is None:
            return self._code_instructions(hit.info.id)
        return get_skill_doc((await self._text(hit, tenant))[1])

    async def ainstructions_of(self, skill: SkillInfo, *, tenant: Tenant | None = None) -> str:
        """Like `ainstructions`, for a skill of an index just read (no index request)."""
        if skill.source == "code":
            return self._code_instructions(skill.id)
        tenant = self._user(tenant)
        known = await self._known(tenant, cached=True)
        hit = known.get(skill.id)
        if hit is None or hit.entry is None or hit.info.etag != skill.etag:
            hit = await self._find(skill.id, tenant)
        if hit.entry is None:
            return self._code_instructions(hit.info.id)
        return get_skill_doc((await self._text(hit, tenant))[1])

    async def _text(self, hit: _Known, tenant: Tenant) -> tuple[_Known, str]:
        """The SKILL.md of an S3 skill as stored now, and the skill it describes.

        The index (or the manifest it came from) may be stale: a SKILL.md that is gone
        answers "not found", one that changed is indexed again, both after a LIST
        reconciliation of the library. What is loaded is decided by the real file.
        """
        assert hit.entry is not None
        assert hit.prefix is not None
        try:
            text, etag = await self.catalog.abody(hit.entry)
        except NotFound:
            await self.catalog.areconcile(hit.info.source, hit.prefix)
            raise SkillError(f"Skill '{hit.info.id}' not found. Call list_skills to see them all.") from None
        if etag == hit.entry.etag:
            if _enabled_in(text, hit.info.id):
                return hit, text
            # The index said enabled, the file says otherwise (a forged or damaged manifest).
            await self.catalog.arefresh_entries(hit.info.source, hit.prefix, [hit.info.id])
            raise SkillError(f"Skill '{hit.info.id}' not found. Call list_skills to see them all.")
        await self.catalog.areconcile(hit.info.source, hit.prefix)
        hit = await self._find(hit.info.id, tenant)
        if hit.entry is None:
            return hit, self._code_instructions(hit.info.id)
        try:
            return hit, (await self.catalog.abody(hit.entry))[0]
        except NotFound:
            raise SkillError(f"Skill '{hit.info.id}' not found. Call list_skills to see them all.") from None

    def _code_instructions(self, skill_id: str) -> str:
        code = self.registry.get(skill_id) if self.registry is not None else None
        if code is None:  # pragma: no cover - the index came from the registry
            raise SkillError(f"Skill '{skill_id}' not found.")
        return code.get_system_instructions()

    @io_bound
    async def afiles(self, name: str, *, tenant: Tenant | None = None) -> list[SkillFile]:
        """The files of an enabled S3 skill (1 LIST per 1,000 keys), nested skills left out.

        A skill the tenant's thread pinned at a versioned load lists only the files of
        that version (those `aopen` can read).
        """
        tenant = self._user(tenant)
        home = await self.ahome(name, tenant=tenant)
        objects, _ = await self.store.alist(home.prefix)
        return files_of(_ended(home, objects), objects, tenant.skill_versions.get(home.skill.id))

    @io_bound
    async def afiles_many(self, names: Sequence[str], *, tenant: Tenant | None = None) -> dict[str, list[SkillFile]]:
        """The files of several enabled S3 skills, by skill id, as `afiles` lists them.

        One listing per library instead of one per skill: each library is listed below
        the longest key prefix its requested skills share (1 LIST per 1,000 keys there), and
        every key is given to the skill whose folder holds it. Key order is not relied on
        (SeaweedFS does not list in S3's byte order).

        Raises:
            SkillError: A name is unknown or disabled. NotFound: a code skill.
        """
        tenant = self._user(tenant)
        known = await self._known(tenant, cached=True)
        homes: list[SkillHome] = []
        for name in dict.fromkeys(names):
            hit = known.get(name) if isinstance(name, str) else None
            if hit is None or not hit.info.metadata.enabled:  # a leaf, or an id the index must confirm
                hit, known = await self._find_in(name, tenant, cached=True)
            homes.append(self._home(hit))
        by_library: dict[str, list[SkillHome]] = {}
        for home in homes:
            by_library.setdefault(home.prefix[: -len(home.skill.id) - 1], []).append(home)
        found: dict[str, list[SkillFile]] = {}
        for group in by_library.values():
            objects, _ = await self.store.alist(shared_prefix([home.prefix for home in group]))
            for home, owned in sort_into_homes(group, objects):
                found[home.skill.id] = files_of(_ended(home, owned), owned, tenant.skill_versions.get(home.skill.id))
        return found

    @io_bound
    async def aopen(
        self, name: str, path: str, *, tenant: Tenant | None = None, max_bytes: int | None = None
    ) -> ObjectBody:
        """Read one file of an enabled S3 skill (1 GET). `path` is relative to the skill folder.

        When the tenant's thread loaded the skill (`Tenant.skill_versions`), the file is
        read as it was at that load (see `s3skills.skills.versions.read_pinned`).

        Raises:
            InvalidPath: A path that is not plainly inside the folder.
            NotFound: No such file (or it belongs to a nested skill).
            SkillChanged: The skill changed since the thread loaded it (no versioning).
        """
        rel = VPath.parse("/" + path.lstrip("/") if isinstance(path, str) else path).parts
        if not rel:
            raise InvalidPath("Give the path of a file inside the skill")
        tenant = self._user(tenant)
        home = await self.ahome(name, tenant=tenant)
        key = join_key(home.prefix, rel)
        if not home.owns(key):
            raise NotFound(path)
        limit = max_bytes or self.config.limits.max_file_bytes
        pin = tenant.skill_versions.get(home.skill.id)
        return (await read_verified(self.store, home.prefix, "/".join(rel), pin, max_bytes=limit))[0]

    @io_bound
    async def aload(self, name: str, loaded: Sequence[str] = (), *, tenant: Tenant | None = None) -> LoadResult:
        """Check and describe the load of a skill (the caller records it in its state).

        Costs the index (cached by ETag), the SKILL.md body (cached by ETag) and, for an
        S3 skill, 1 LIST of its folder.

        Raises:
            SkillError: Unknown, disabled, ambiguous, unavailable, or its leaf is taken.
        """
        tenant = self._user(tenant)
        hit = await self._find(name, tenant)
        check_leaf_clash(hit.info.id, [*loaded, *tenant.loaded_skills])
        if hit.entry is None:
            return LoadResult(hit.info, self._code_instructions(hit.info.id), [])
        hit, text = await self._text(hit, tenant)
        if hit.entry is None:
            return LoadResult(hit.info, text, [])
        self._confirm(hit)
        home = self._home(hit)
        version = await self._current(home)
        leaf = SkillId.parse(hit.info.id).leaf
        files = sorted(f"/skills/{leaf}/{f.path}" for f in version.files)
        return LoadResult(hit.info, get_skill_doc(text), files, version)

    async def _current(self, home: SkillHome) -> SkillVersion:
        """The current version of a skill: 1 ListObjectVersions (a plain LIST without the permission)."""
        try:
            versions = await self.store.alist_versions(home.prefix)
        except (AccessDenied, StoreError):  # no s3:ListBucketVersions, or a store without it
            objects, _ = await self.store.alist(home.prefix)
            return current_from_objects(home.skill.id, home.prefix, objects, _ended(home, objects).owns)
        return current_version(home.skill.id, home.prefix, versions, _ended(home, versions).owns)

    # -- versions -----------------------------------------------------------------------------

    @io_bound
    async def aversion(self, name: str, *, tenant: Tenant | None = None) -> SkillVersion:
        """The current version of an enabled S3 skill (1 ListObjectVersions)."""
        return await self._current(await self.ahome(name, tenant=tenant, cached=False))

    @io_bound
    async def ahistory(self, name: str, *, tenant: Tenant | None = None) -> list[SkillVersion]:
        """The versions of an enabled S3 skill, newest first (1 ListObjectVersions per 1,000)."""
        home = await self.ahome(name, tenant=tenant, cached=False)
        versions: list[ObjectVersion] = await self.store.alist_versions(home.prefix)
        return version_history(home.skill.id, home.prefix, versions, _ended(home, versions).owns)

    async def ainstructions_pinned(
        self, skill: SkillInfo, pin: SkillPin | None, *, tenant: Tenant | None = None
    ) -> str:
        """The instructions of `skill` as the thread loaded it (`pin`), for the prompt.

        No request when the pinned `SKILL.md` is the indexed one (its body is cached
        by ETag) or was read before; otherwise 1 GET of the pinned version.

        Raises:
            SkillChanged: The `SKILL.md` changed and the bucket keeps no old versions.
        """
        pinned = pin.files.get("SKILL.md") if pin is not None else None
        if pinned is None or pinned.etag == skill.etag or skill.source == "code":
            return await self.ainstructions_of(skill, tenant=tenant)
        home = await self.ahome(skill.id, tenant=tenant)
        # A pin is client input: only a read by VersionId that returned the pinned ETag is cached
        # (a version is immutable), and a hit needs that exact key, VersionId and ETag.
        claimed = verified_key(home.prefix, "SKILL.md", pin) if pinned.version_id else None
        if claimed is not None and (text := self._pinned_md.get(claimed)) is not None:
            self._pinned_md.move_to_end(claimed)
            return text
        body, verified = await read_verified(
            self.store, home.prefix, "SKILL.md", pin, max_bytes=self.config.limits.max_skill_md_bytes
        )
        text = get_skill_doc(body.data.decode("utf-8-sig", errors="replace"))
        if verified is not None and verified.version_id is not None:
            self._pinned_md[verified] = text
            # Older versions are rare: at most 256 of them, within a quarter of the body cache's budget.
            budget = self.config.limits.body_cache_bytes // 4
            while len(self._pinned_md) > 256 or (
                len(self._pinned_md) > 1 and sum(len(t) for t in self._pinned_md.values()) > budget
            ):
                self._pinned_md.popitem(last=False)
        return text

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

    def invalidate(self, tenant: Tenant | None = None) -> None:
        """Forget the age of the tenant's cached indexes (all, with no tenant known)."""
        try:
            tenant = self._user(tenant)
        except TenantError:
            self.catalog.invalidate()
            return
        for _, prefix in self.libraries(tenant):
            self.catalog.invalidate(prefix)

    index = sync_method(aindex)
    get = sync_method(aget)
    resolve = sync_method(aresolve)
    search = sync_method(asearch)
    home = sync_method(ahome)
    skill_md = sync_method(askill_md)
    instructions = sync_method(ainstructions)
    files = sync_method(afiles)
    files_many = sync_method(afiles_many)
    open = sync_method(aopen)
    load = sync_method(aload)
    version = sync_method(aversion)
    history = sync_method(ahistory)
    note_changed = sync_method(LibraryWriter.anote_changed)
    create = sync_method(LibraryWriter.acreate)
    set_enabled = sync_method(LibraryWriter.aset_enabled)
    remove = sync_method(LibraryWriter.aremove)
    flush = sync_method(LibraryWriter.aflush)


def _name(name: object) -> str:
    """A skill name as given (an id or a leaf), checked."""
    return str(SkillId.parse(name))


def _enabled_in(text: str, skill_id: str) -> bool:
    """Whether a SKILL.md's own frontmatter enables it (what loading trusts, not the index)."""
    try:
        return parse_skill_md(text, folder=SkillId.parse(skill_id).leaf).metadata.enabled
    except InvalidSkill:
        return False


def _ended(home: SkillHome, listed: Sequence[ObjectInfo | ObjectVersion]) -> SkillHome:
    """`home` with every listed folder below it that holds a `SKILL.md` key excluded too.

    The listing is the last word: a `SKILL.md` the index does not know (written since,
    deeper than an id can be, in a folder no id can name) still ends the outer skill.
    """
    own = home.prefix + SKILL_FILE
    tail = "/" + SKILL_FILE
    ends = {
        o.key[: -len(SKILL_FILE)]
        for o in listed
        if o.key.startswith(home.prefix)
        and o.key.endswith(tail)
        and o.key != own
        and (not isinstance(o, ObjectVersion) or (o.is_latest and not o.is_delete_marker))
    }
    extra = tuple(sorted(ends - set(home.excluded)))
    return replace(home, excluded=home.excluded + extra) if extra else home


def _resolves(name: str, known: dict[str, _Known]) -> bool:
    wanted = _name(name)
    return wanted in known or any(_leaf(sid) == wanted for sid in known)


def _leaf(skill_id: str) -> str:
    """The folder name of a canonical id from the index (no parsing needed)."""
    return skill_id.rpartition("/")[2]
