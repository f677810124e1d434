"""Reads of one skill, mixed into `SkillLibrary`: where it lives, its `SKILL.md`, files and versions.

Each read trusts the real objects over the index: a `SKILL.md` is loaded or its files opened
only once the file itself says the skill is enabled (`_confirmed`: the index may come from a
manifest that lies), a folder below the skill that holds a `SKILL.md` is never part of it
(from the index and, where the call lists the folder, from the listing itself), and a thread's
pins are checked against what the store returns (`s3skills.skills.versions.pinned`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from s3skills._loop import io_bound
from s3skills.config import Config
from s3skills.errors import AccessDenied, InvalidPath, NotFound, SkillError, StoreError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import VPath, join_key
from s3skills.skills.code.registry import SkillRegistry
from s3skills.skills.format.model import InvalidSkill, SkillInfo
from s3skills.skills.format.parse import get_skill_doc, parse_skill_md
from s3skills.skills.index.catalog import LibraryIndex, SkillCatalog
from s3skills.skills.index.folders import FolderCache
from s3skills.skills.index.served import ChannelServer
from s3skills.skills.results import (
    Known,
    LoadResult,
    SkillFile,
    SkillHome,
    check_leaf_clash,
    files_of,
    shared_prefix,
    sort_into_homes,
)
from s3skills.skills.versions.approvals import Approval, afind_approval
from s3skills.skills.versions.history import SkillVersion, current_from_objects, current_version
from s3skills.skills.versions.history import history as version_history
from s3skills.skills.versions.pinned import PinnedTexts, read_verified
from s3skills.skills.versions.records import aread_records, recorded_history
from s3skills.storage import ObjectBody, ObjectInfo, ObjectStore, ObjectVersion
from s3skills.tenancy import SkillPin, Tenant

__all__ = ["MAX_FOLDER_DEPTH", "SkillReads", "anested_now"]


class SkillReads:
    """Reads of one skill for the current tenant (mixed into `SkillLibrary`, which finds skills)."""

    store: ObjectStore
    config: Config
    catalog: SkillCatalog
    folders: FolderCache
    registry: SkillRegistry | None
    _pinned_md: PinnedTexts
    channels: ChannelServer
    _confirmed_md: OrderedDict[tuple[str, str], None]
    _user: Callable[[Tenant | None], Tenant]
    _find: Callable[..., Awaitable[Known]]
    _find_in: Callable[..., Awaitable[tuple[Known, dict[str, Known]]]]
    _known: Callable[..., Awaitable[dict[str, Known]]]

    # -- one skill ---------------------------------------------------------------------------

    @staticmethod
    def _home(hit: Known) -> SkillHome:
        """Where `hit` lives, with every folder below it that holds a `SKILL.md` of its own library.

        Never from the merged index: a nested skill that another library (the user's own,
        shadowing a shared one) also has, or that is disabled or does not parse, still ends
        the outer skill in the outer skill's library.
        """
        if hit.prefix is None:
            raise NotFound(f"'{hit.info.id}' is a code skill: it has no files")
        inside = hit.info.id + "/"  # ids in the index are canonical: a string prefix is a folder prefix
        nested = hit.library.folders_below(inside) if hit.library is not None else []
        return SkillHome(hit.info, hit.prefix + inside, tuple(hit.prefix + f for f in nested))

    @io_bound
    async def ahome(self, name: str, *, tenant: Tenant | None = None, cached: bool = True) -> SkillHome:
        """Where an enabled S3 skill's files live (for the filesystem adapter).

        By default the index already read is trusted (no request on a hot path);
        a skill it does not know is looked up again.

        Raises:
            SkillError: Unknown or disabled. NotFound: a code skill (no files).
        """
        return (await self._located(name, self._user(tenant), cached=cached))[0]

    async def _located(
        self, name: str, tenant: Tenant, *, cached: bool = True
    ) -> tuple[SkillHome, LibraryIndex | None]:
        """`ahome`, and the index of the skill's library when its folders may be read from
        `folders` (a catalog TTL, no channel; see `s3skills.skills.index.folders`), else None."""
        hit, _ = await self._find_in(name, tenant, cached=cached)
        hit = await self._confirmed(hit, tenant)
        library = hit.library if self.catalog.ttl_of(hit.info.source) and not self.channels.active else None
        return self._home(hit), library

    async def _confirmed(self, hit: Known, tenant: Tenant) -> Known:
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

    def _confirm(self, hit: Known) -> None:
        """Remember that this version of the skill's `SKILL.md` enables it (at most 65,536 kept)."""
        if hit.entry is not None:
            self._confirmed_md[(hit.entry.key, hit.entry.etag)] = None
            while len(self._confirmed_md) > 65_536:
                self._confirmed_md.popitem(last=False)

    @io_bound
    async def askill_md(self, name: str, *, tenant: Tenant | None = None, cached: bool = False) -> str:
        """The full text of an enabled skill's `SKILL.md` (cached by ETag).

        A code skill gives its instructions. With `cached`, the index already read finds
        the skill (no index request unless it does not know `name`): for a caller that has
        just read a fresh index in the same call. The text is the file as stored now either way.
        """
        tenant = self._user(tenant)
        hit = await self._find(name, tenant, cached=cached)
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

    async def _text(self, hit: Known, tenant: Tenant) -> tuple[Known, str]:
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
            if (hit.entry.key, etag) in self._confirmed_md:  # this version was parsed and found enabled
                return hit, text
            if _enabled_in(text, hit.info.id):
                self._confirm(hit)
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
        home, library = await self._located(name, tenant)
        if library is not None:  # a listing is trusted as long as the index is (its TTL)
            objects = list((await self.folders.alist(library, home.prefix)).values())
        else:
            objects, _ = await self.store.alist(home.prefix)
        return files_of(_ended(home, objects), objects, self._pin(tenant, home))

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
                found[home.skill.id] = files_of(_ended(home, owned), owned, self._pin(tenant, home))
        return found

    @io_bound
    async def aopen(
        self, name: str, path: str, *, tenant: Tenant | None = None, max_bytes: int | None = None
    ) -> ObjectBody:
        """Read one file of an enabled S3 skill. `path` is relative to the skill folder.

        Costs 1 GET, and for a file in a subfolder 1 HEAD per folder level, sent with it: a
        folder that holds a `SKILL.md` now is another skill's, even one written after the
        index was read (see `anested_now`). With a catalog TTL (and no pin), the skill
        folder's listing decides instead, trusted as long as the index (1 LIST when it is
        older, and 1 GET per file version: `s3skills.skills.index.folders`).

        When the tenant's thread loaded the skill (`Tenant.skill_versions`), the file is
        read as it was at that load (see `s3skills.skills.versions.history.read_pinned`).

        Raises:
            InvalidPath: A path that is not plainly inside the folder.
            NotFound: No such file (or it belongs to a nested skill).
            SkillChanged: The skill changed since the thread loaded it (no versioning).
        """
        rel = VPath.parse("/" + path.lstrip("/") if isinstance(path, str) else path).parts
        if not rel:
            raise InvalidPath("Give the path of a file inside the skill")
        tenant = self._user(tenant)
        home, library = await self._located(name, tenant)
        key = join_key(home.prefix, rel)
        if not home.owns(key):
            raise NotFound(path)
        limit = max_bytes or self.config.limits.max_file_bytes
        pin = self._pin(tenant, home)
        if pin is None and library is not None:  # the folder's listing answers, within the index's TTL
            return await self.folders.aopen(library, home.prefix, key, _folders_above(rel), limit)
        read = read_verified(self.store, home.prefix, "/".join(rel), pin, max_bytes=limit)
        (body, _), nested = await asyncio.gather(read, anested_now(self.store, home.prefix, rel))
        if nested:
            raise NotFound(path)  # a nested skill's file: never part of this one, whatever the index says
        return body

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
        # Inside a channel, a load pins the channel's version (then kept by the thread's pin).
        version = self.channels.version_of(_library_of(home), hit.info.id) or await self._current(home)
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

    def _pin(self, tenant: Tenant, home: SkillHome) -> SkillPin | None:
        """The version reads of a skill serve: the thread's own pin, else the channel's (None: current)."""
        own = tenant.skill_versions.get(home.skill.id)
        if own is not None or not self.channels.active:
            return own
        return self.channels.pin_of(_library_of(home), home.skill.id)

    # -- approvals ----------------------------------------------------------------------------

    def approvals_prefix(self, library_prefix: str) -> str:
        """Where the approvals of a library's scripts live (`Config.approvals_prefix` or beside it)."""
        return self.config.approvals_prefix or self.config.layout.approvals_prefix(library_prefix)

    async def aneeds_approval(self, name: str, *, tenant: Tenant | None = None) -> str | None:
        """The approvals prefix when running `name`'s scripts needs an approval, else None.

        Needed for a skill of the shared library with `Config.require_approval` (the default).
        """
        if not self.config.require_approval:
            return None
        hit = await self._find(name, self._user(tenant), cached=True)
        if hit.info.source != "shared" or hit.prefix is None:
            return None
        return self.approvals_prefix(hit.prefix)

    async def aapproval(self, name: str, digest: str, script: str, *, tenant: Tenant | None = None) -> Approval | None:
        """The approval of running `script` (below `scripts/`) of `name` at its folder's `digest` (1 GET)."""
        hit = await self._find(name, self._user(tenant), cached=True)
        if hit.prefix is None:
            return None  # a code skill: no files, no scripts
        return await afind_approval(self.store, self.approvals_prefix(hit.prefix), hit.info.id, digest, script)

    # -- versions -----------------------------------------------------------------------------

    @io_bound
    async def aversion(self, name: str, *, tenant: Tenant | None = None) -> SkillVersion:
        """The current version of an enabled S3 skill (1 ListObjectVersions)."""
        return await self._current(await self.ahome(name, tenant=tenant, cached=False))

    @io_bound
    async def ahistory(self, name: str, *, tenant: Tenant | None = None) -> list[SkillVersion]:
        """The versions of an enabled S3 skill, newest first (1 ListObjectVersions per 1,000).

        Exact from its version records (1 LIST and 1 GET per record), inferred from write
        times before them (`s3skills.skills.versions.records.recorded_history`); records that
        lie are ignored.
        """
        home = await self.ahome(name, tenant=tenant, cached=False)
        versions: list[ObjectVersion] = await self.store.alist_versions(home.prefix)
        owns = _ended(home, versions).owns
        try:
            records_prefix = self.config.layout.records_prefix(home.prefix[: -len(home.skill.id) - 1])
        except ValueError:
            return version_history(home.skill.id, home.prefix, versions, owns)
        records, _ = await aread_records(self.store, records_prefix, home.skill.id)
        return recorded_history(home.skill.id, home.prefix, versions, owns, records)[0]

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
        text = self._pinned_md.get(home.prefix, pin)
        if text is not None:
            return text
        body, verified = await read_verified(
            self.store, home.prefix, "SKILL.md", pin, max_bytes=self.config.limits.max_skill_md_bytes
        )
        text = get_skill_doc(body.data.decode("utf-8-sig", errors="replace"))
        self._pinned_md.put(verified, text)
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


def _library_of(home: SkillHome) -> str:
    """The library prefix of a skill's home (its folder prefix without the id)."""
    return home.prefix[: -len(home.skill.id) - 1]


def _enabled_in(text: str, skill_id: str) -> bool:
    """Whether a SKILL.md's own frontmatter enables it (what loading trusts, not the index)."""
    try:
        return parse_skill_md(text, folder=SkillId.parse(skill_id).leaf).metadata.enabled
    except InvalidSkill:
        return False


MAX_FOLDER_DEPTH = 16
"""Folders a file may lie below its skill's folder (each costs one HEAD on a read)."""


async def anested_now(store: ObjectStore, prefix: str, rel: Sequence[str]) -> bool:
    """Whether a folder between a skill's folder (`prefix`) and the file `rel` holds a `SKILL.md` now.

    The one rule every read path uses for "is this file inside a nested skill?": asked of
    the bucket as it is (1 HEAD per folder level, concurrently), never of an index that
    may predate the write. A file at the skill's top level costs nothing.

    Raises:
        InvalidPath: The file lies more than `MAX_FOLDER_DEPTH` folders deep.
        AccessDenied: A HEAD was refused (a 403 is not a "no").
    """
    folders = _folders_above(rel)
    if not folders:
        return False
    found = await asyncio.gather(*(store.aexists(prefix + folder + SKILL_FILE) for folder in folders))
    return any(found)


def _folders_above(rel: Sequence[str]) -> list[str]:
    """The folders between a skill's folder and the file `rel` (each ending with `/`).

    Raises:
        InvalidPath: The file lies more than `MAX_FOLDER_DEPTH` folders deep.
    """
    folders = ["/".join(rel[:depth]) + "/" for depth in range(1, len(rel))]
    if len(folders) > MAX_FOLDER_DEPTH:
        raise InvalidPath(f"A file inside a skill may lie at most {MAX_FOLDER_DEPTH} folders deep")
    return folders


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
