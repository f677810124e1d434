"""The mount table: which mounts a call has, and where each virtual path lives in S3.

A resolved virtual path is a `Location` (a key prefix and the segments below it),
or one of the virtual folders `RootDir` (`/`) and `SkillsDir` (`/skills`). Every
key is built from allow-listed identity parts (`KeyLayout`) and checked to start
with the prefix of its mount. `/skills/<leaf>/` maps to the loaded, enabled skill
with that leaf, through `SkillLibrary.ahome`; a nested skill's folder is not part
of it (`Location.excluded`).

`Mounts` keeps no tenant state except skills loaded outside a graph, per user id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from s3skills.config import Config
from s3skills.errors import InvalidPath, NotFound, SkillError, TenantError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import VPath, join_key
from s3skills.skills import SkillLibrary, anested_now
from s3skills.storage import ObjectInfo, ObjectStore
from s3skills.tenancy import Tenant

__all__ = [
    "ARTIFACT_DIRS",
    "Location",
    "Mounts",
    "Resolved",
    "RootDir",
    "SkillsDir",
    "loaded_skill_of",
    "mounts_of",
]

ARTIFACT_DIRS = ("large_tool_results", "conversation_history")
"""Root folders that deepagents writes through the backend; they live in the thread."""


@dataclass(frozen=True, slots=True)
class Location:
    """A virtual path resolved to storage.

    Attributes:
        vbase: The virtual folder that `prefix` stands for (`/workspace`, `/skills/pdf`).
        prefix: The key prefix of that folder (ends with `/`).
        rel: The segments below `vbase` (empty for the folder itself).
        writable: Whether the mount admits writes.
        mount: `workspace`, `ticket` or `skills`.
        excluded: Key prefixes under `prefix` that are not part of this mount
            (the folders of skills nested in a skill).
    """

    vbase: VPath
    prefix: str
    rel: tuple[str, ...]
    writable: bool
    mount: str
    excluded: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The object key of this path (the prefix itself for the folder)."""
        return join_key(self.prefix, self.rel)

    @property
    def dir_prefix(self) -> str:
        """The prefix to list when this path is a folder."""
        return self.prefix if not self.rel else self.key + "/"

    def owns(self, key: str) -> bool:
        """Whether `key` belongs to this mount (under its prefix, not in an excluded folder)."""
        return key.startswith(self.prefix) and not any(key.startswith(p) for p in self.excluded)

    def vpath(self, key: str) -> str:
        """The virtual path of `key`, which must lie under `prefix`."""
        if not key.startswith(self.prefix):
            raise InvalidPath("Invalid path: a key outside its mount")
        tail = key[len(self.prefix) :]
        return str(self.vbase).rstrip("/") + "/" + tail

    def with_rel(self, rel: tuple[str, ...]) -> Location:
        """The same mount, another path below it."""
        return replace(self, rel=rel)


@dataclass(frozen=True, slots=True)
class RootDir:
    """The virtual root `/`: lists the mounts that exist for this call."""


@dataclass(frozen=True, slots=True)
class SkillsDir:
    """The virtual folder `/skills`: lists the loaded skills by leaf name."""


Resolved = Location | RootDir | SkillsDir


def mounts_of(tenant: Tenant) -> list[str]:
    """The root folders visible to this call, in listing order."""
    names = []
    if tenant.thread_id is not None:
        names.append("workspace")
    if tenant.ticket_id is not None:
        names.append("ticket")
    if tenant.loaded_skills:
        names.append("skills")
    return names


def _loaded_with_leaf(tenant: Tenant, leaf: str) -> str:
    for skill_id in tenant.loaded_skills:
        if SkillId.parse(skill_id).leaf == leaf:
            return skill_id
    raise NotFound(f"/skills/{leaf} is not a loaded skill")


def loaded_skill_of(tenant: Tenant, loc: Location) -> str | None:
    """The id of the loaded skill a `/skills/<leaf>/...` location belongs to (None elsewhere)."""
    if loc.mount != "skills" or len(loc.vbase.parts) < 2:
        return None
    try:
        return _loaded_with_leaf(tenant, loc.vbase.parts[1])
    except NotFound:
        return None


class Mounts:
    """The virtual filesystem's mount table, resolved per call.

    Args:
        store: The object store.
        config: Layout, skills mode, ticket access.
        library: Where a loaded skill's folder is (and the whole library in library mode).
        tenant: The tenant of the current call.
    """

    def __init__(self, store: ObjectStore, config: Config, library: SkillLibrary, tenant: Callable[[], Tenant]) -> None:
        self.store = store
        self.config = config
        self.library = library
        self.tenant = tenant

    async def visible(self) -> Tenant:
        """The tenant of this call with the skills it may see under /skills."""
        tenant = self.tenant()
        if self.config.skills_mode == "library" and tenant.user_id is not None:
            seen: dict[str, str] = {}
            for skill in await self.library.aindex(tenant=tenant):
                if skill.source != "code":
                    seen.setdefault(SkillId.parse(skill.id).leaf, skill.id)  # ids are sorted: first wins
            tenant = replace(tenant, loaded_skills=tuple(seen.values()))
        return tenant

    async def mounted(self, tenant: Tenant) -> list[str]:
        """The loaded skills that have a folder under /skills now (the index already read answers).

        `loaded_skills` is client input: a disabled, deleted, unknown or code skill named there
        is not listed (and `_skill` refuses to open it).
        """
        if not tenant.loaded_skills or tenant.user_id is None:
            return []
        folders = {s.id for s in await self.library.aindex(tenant=tenant, cached=True) if s.source != "code"}
        return [skill_id for skill_id in tenant.loaded_skills if skill_id in folders]

    async def _skill(self, tenant: Tenant, leaf: str, rest: tuple[str, ...]) -> Location:
        skill_id = _loaded_with_leaf(tenant, leaf)
        try:
            home = await self.library.ahome(skill_id, tenant=tenant)
        except SkillError:
            raise NotFound(f"/skills/{leaf}") from None  # deleted or disabled since it was loaded
        loc = Location(VPath(("skills", leaf)), home.prefix, rest, False, "skills", home.excluded)
        if rest and not loc.owns(loc.key + "/"):
            raise NotFound(f"/skills/{leaf}/{'/'.join(rest)}")
        return loc

    async def resolve(self, tenant: Tenant, vpath: VPath) -> Resolved:
        """Where `vpath` lives for this tenant.

        Raises:
            NotFound: No such mount for this call (an unloaded skill does not exist).
            TenantError: `/workspace` without a thread id.
        """
        parts = vpath.parts
        if not parts:
            return RootDir()
        head, rest = parts[0], parts[1:]
        layout = self.config.layout
        if head == "workspace" and tenant.thread_id is not None:
            prefix = layout.workspace_prefix(tenant.user_id, tenant.thread_id)
            return Location(VPath(("workspace",)), prefix, rest, True, "workspace")
        if head in ARTIFACT_DIRS and tenant.thread_id is not None:
            prefix = layout.workspace_prefix(tenant.user_id, tenant.thread_id) + head + "/"
            return Location(VPath((head,)), prefix, rest, True, "workspace")
        if head == "ticket" and tenant.ticket_id is not None:
            prefix = layout.ticket_prefix(tenant.ticket_id, tenant.user_id)
            return Location(VPath(("ticket",)), prefix, rest, self.config.ticket_writable, "ticket")
        if head == "skills" and tenant.loaded_skills:
            if not rest:
                return SkillsDir()
            return await self._skill(tenant, rest[0], rest[1:])
        if head == "workspace" and tenant.thread_id is None:
            raise TenantError(
                "There is no /workspace in this run: it has no thread id (config={'configurable': {'thread_id': ...}})."
            )
        raise NotFound(str(vpath))

    async def search_roots(self, tenant: Tenant, vpath: VPath) -> list[Location]:
        """The storage areas a grep/glob of `vpath` covers: only what the caller may see."""
        target = await self.resolve(tenant, vpath)
        if isinstance(target, Location):
            return [target]
        roots: list[Location] = []
        if isinstance(target, RootDir):
            for name in mounts_of(tenant):
                if name != "skills":
                    sub = await self.resolve(tenant, VPath((name,)))
                    assert isinstance(sub, Location)
                    roots.append(sub)
        for skill_id in tenant.loaded_skills:
            try:
                roots.append(await self._skill(tenant, SkillId.parse(skill_id).leaf, ()))
            except NotFound:
                continue  # a code skill, or one disabled since it was loaded
        return roots

    async def objects_under(self, loc: Location) -> list[ObjectInfo]:
        """Every object at or below `loc` that belongs to its mount (1 LIST per 1,000 keys).

        In a skill, a listed folder that holds a `SKILL.md` is another skill's, whatever the
        index said (the listing is newer than the index that built `loc`), and so is a folder
        below one that holds a `SKILL.md` now (`anested_now`).
        """
        if loc.mount == "skills" and loc.rel and await anested_now(self.store, loc.prefix, (*loc.rel, "")):
            return []  # the folder is in a nested skill's (1 HEAD per level, as a read costs)
        objects, _ = await self.store.alist(loc.key if loc.rel else loc.prefix)
        ends = _nested_folders(loc, objects) if loc.mount == "skills" else ()
        return [
            o
            for o in objects
            if not o.key.endswith("/")
            and (not loc.rel or o.key == loc.key or o.key.startswith(loc.dir_prefix))
            and loc.owns(o.key)
            and not any(o.key.startswith(end) for end in ends)
        ]


def _nested_folders(loc: Location, objects: list[ObjectInfo]) -> tuple[str, ...]:
    """The listed folders below a skill's own that hold a `SKILL.md` (each ends the skill there)."""
    own = loc.prefix + SKILL_FILE
    return tuple(o.key[: -len(SKILL_FILE)] for o in objects if o.key.endswith("/" + SKILL_FILE) and o.key != own)
