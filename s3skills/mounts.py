"""Mount resolution: which mounts a call has, and where each virtual path lives in S3.

`Mounts` resolves the tenant of a call (explicit ids first, else the LangGraph
run), the skills it may see under /skills (loaded ones; the whole library in
library mode), and turns a `VPath` into a `Location`, `RootDir` or `SkillsDir`.
It keeps no tenant state except skills loaded outside a graph, kept per user id.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from s3skills.errors import NotFound, SkillError, TenantError
from s3skills.layout import (
    ARTIFACT_DIRS,
    KeyLayout,
    Location,
    RootDir,
    SkillsDir,
    find_loaded_skill,
    mounts_of,
    skill_leaf,
)
from s3skills.paths import VPath
from s3skills.store import ObjectInfo, ObjectStore
from s3skills.tenancy import IdentityFn, Tenant, resolve_tenant

if TYPE_CHECKING:
    from s3skills.catalog import SkillCatalog

__all__ = ["Mounts", "Resolved"]

Resolved = Location | RootDir | SkillsDir


class Mounts:
    """The virtual filesystem's mount table, resolved per call.

    Args:
        store: The object store.
        layout: The key templates.
        catalog: Where a skill lives when there is a shared library, and the
            library itself in library mode.
        user_id: A fixed user (else the run's context).
        thread_id: A fixed thread (else the run's config).
        ticket_id: A fixed ticket (else the run's context).
        shared_prefix: The organisation library, if any.
        skills_mode: `gated` or `library`.
        ticket_writable: Whether /ticket admits writes.
        identity: Decides the ids not fixed here (else the run's context).
    """

    def __init__(
        self,
        store: ObjectStore,
        layout: KeyLayout,
        catalog: SkillCatalog,
        *,
        user_id: str | None,
        thread_id: str | None,
        ticket_id: str | None,
        shared_prefix: str | None,
        skills_mode: str,
        ticket_writable: bool,
        identity: IdentityFn | None = None,
    ) -> None:
        self.store = store
        self.layout = layout
        self.catalog = catalog
        self.user_id, self.thread_id, self.ticket_id = user_id, thread_id, ticket_id
        self.shared_prefix = shared_prefix
        self.skills_mode = skills_mode
        self.ticket_writable = ticket_writable
        self.instance_skills: dict[str | None, list[str]] = {}
        self.identity = identity

    def tenant(self) -> Tenant:
        """The identity of the current call (explicit values, else the run's context)."""
        return resolve_tenant(
            user_id=self.user_id,
            thread_id=self.thread_id,
            ticket_id=self.ticket_id,
            instance_skills=self.instance_skills,
            identity=self.identity,
        )

    async def visible(self) -> Tenant:
        """The tenant of this call with the skills it may see under /skills."""
        tenant = self.tenant()
        if self.skills_mode == "library" and tenant.user_id is not None:
            seen: dict[str, str] = {}
            for skill in await self.catalog.askills(tenant.user_id):
                seen.setdefault(skill_leaf(skill.id), skill.id)  # ids are sorted: first wins
            tenant = replace(tenant, loaded_skills=tuple(seen.values()))
        return tenant

    async def skill_home(self, tenant: Tenant, skill_id: str) -> str:
        """The key prefix of a skill's folder: the user's copy, else the shared one."""
        if self.shared_prefix is None:
            return self.layout.user_prefix(tenant) + skill_id + "/"
        if tenant.user_id is None:
            self.layout.user_prefix(tenant)  # raises the clear "no user id" error
        user = str(tenant.user_id)
        try:
            # The index the prompt middleware reads on every model call is fresh enough
            # here: a file operation must not cost a LIST of the whole library. Only a
            # skill the cached index does not know is looked up again.
            return await self.catalog.ahome(user, skill_id, cached=True)
        except SkillError:
            pass
        try:
            return await self.catalog.ahome(user, skill_id)
        except SkillError:
            raise NotFound(skill_id) from None

    async def resolve(self, tenant: Tenant, vpath: VPath) -> Resolved:
        parts = vpath.parts
        if not parts:
            return RootDir()
        head, rest = parts[0], parts[1:]
        if head == "workspace" and tenant.thread_id is not None:
            return Location(VPath(("workspace",)), self.layout.workspace_prefix(tenant), rest, True, "workspace")
        if head in ARTIFACT_DIRS and tenant.thread_id is not None:
            prefix = self.layout.workspace_prefix(tenant) + head + "/"
            return Location(VPath((head,)), prefix, rest, True, "workspace")
        if head == "ticket" and tenant.ticket_id is not None:
            prefix = self.layout.ticket_prefix(tenant)
            return Location(VPath(("ticket",)), prefix, rest, self.ticket_writable, "ticket")
        if head == "skills" and tenant.loaded_skills:
            if not rest:
                return SkillsDir()
            skill_id = find_loaded_skill(tenant, rest[0])
            home = await self.skill_home(tenant, skill_id)
            return Location(VPath(("skills", rest[0])), home, rest[1:], False, "skills")
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
            leaf = skill_leaf(skill_id)
            sub = await self.resolve(tenant, VPath(("skills", leaf)))
            assert isinstance(sub, Location)
            roots.append(sub)
        return roots

    async def objects_under(self, loc: Location) -> list[ObjectInfo]:
        """Every object at or below `loc` (1 LIST per 1,000 keys)."""
        if not loc.rel:
            objects, _ = await self.store.alist(loc.prefix)
            return [o for o in objects if not o.key.endswith("/")]
        objects, _ = await self.store.alist(loc.key)
        return [
            o for o in objects if o.key == loc.key or (o.key.startswith(loc.dir_prefix) and not o.key.endswith("/"))
        ]
