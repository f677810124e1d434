"""The seeds' API of `S3Backend`, kept as thin methods over the protocol and the catalog.

`ls_info`, `grep_raw`, `glob_info` (deepagents <= 0.4 names), `exists`, loading
skills on the instance outside a graph (`load_skill`, `loaded_skills`), and the
catalog helpers `load_skills`, `load_skills_frontmatter`,
`load_all_skills_formatted`, `load_skill_content`. Each has an `a`-prefixed
async twin; the sync one is generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deepagents.backends.protocol import FileInfo, GrepMatch

from s3skills import formats
from s3skills._sync import io_bound, sync_method
from s3skills.errors import InvalidPath, NotFound, SkillError, TenantError
from s3skills.layout import Location, skill_leaf, validate_skill_id
from s3skills.paths import VPath
from s3skills.skillmd import SkillInfo
from s3skills.tenancy import Tenant

if TYPE_CHECKING:
    from deepagents.backends.protocol import GlobResult, GrepResult, LsResult

    from s3skills.catalog import SkillCatalog
    from s3skills.layout import KeyLayout
    from s3skills.mounts import Mounts
    from s3skills.store import ObjectStore

__all__ = ["SeedAPI", "check_leaf_clash"]


def check_leaf_clash(skill_id: str, loaded: Sequence[str]) -> None:
    """Refuse a second loaded skill whose folder name under /skills is taken.

    Raises:
        SkillError: Another loaded skill has the same leaf name.
    """
    leaf = skill_leaf(skill_id)
    for other in loaded:
        if other != skill_id and skill_leaf(other) == leaf:
            raise SkillError(
                f"Cannot load '{skill_id}': the loaded skill '{other}' already appears as /skills/{leaf}. "
                "Two loaded skills cannot share a folder name."
            )


class SeedAPI:
    """Mixed into `S3Backend`; every method relies on the backend's own parts."""

    if TYPE_CHECKING:  # provided by S3Backend
        catalog: SkillCatalog
        store: ObjectStore
        layout: KeyLayout
        mounts: Mounts

        def tenant(self) -> Tenant: ...
        async def als(self, path: str) -> LsResult: ...
        async def agrep(
            self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
        ) -> GrepResult: ...
        async def aglob(self, pattern: str, path: str | None = None) -> GlobResult: ...

    # -- the seeds' names -----------------------------------------------------------------------

    async def als_info(self, path: str) -> list[FileInfo]:
        """Seed alias of `als`: the entries, or `[]` on error."""
        return (await self.als(path)).entries or []

    async def agrep_raw(self, pattern: str, path: str | None = None, glob: str | None = None) -> list[GrepMatch] | str:
        """Seed alias of `agrep`: the matches, or the error string."""
        result = await self.agrep(pattern, path, glob)
        return result.error if result.error is not None else (result.matches or [])

    async def aglob_info(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """Seed alias of `aglob`: the matches, or `[]` on error."""
        return (await self.aglob(pattern, path)).matches or []

    @io_bound
    async def aexists(self, path: str) -> bool:
        """True when `path` is a file or a non-empty folder visible to this caller.

        Raises:
            S3SkillsError: A store fault (403, unavailable): not a "no".
        """

        try:
            vpath = VPath.parse(path)
            target = await self.mounts.resolve(await self.mounts.visible(), vpath)
        except (NotFound, InvalidPath, TenantError):
            return False
        if not isinstance(target, Location) or not target.rel:
            return True
        if await self.store.aexists(target.key):
            return True
        async for page in self.store.alist_pages(target.dir_prefix, page_size=1):
            return bool(page.objects)
        return False

    ls_info = sync_method(als_info)
    grep_raw = sync_method(agrep_raw)
    glob_info = sync_method(aglob_info)
    exists = sync_method(aexists)

    # -- loaded skills outside a graph ------------------------------------------------------------

    @property
    def loaded_skills(self) -> list[str]:
        """Skills the current user loaded on this instance with `load_skill` (outside a graph)."""
        return list(self.tenant().loaded_skills)

    def _user(self, tenant: Tenant) -> str:
        """The user id of the call, or the clear error that there is none."""
        self.layout.user_prefix(tenant)
        return str(tenant.user_id)

    def current_user(self) -> str:
        """The user id of the current call.

        Raises:
            TenantError: The call has no user id (none given, none in the run's context).
        """
        return self._user(self.tenant())

    @io_bound
    async def aload_skill(self, skill_id: str) -> str:
        """Load a skill on this instance (the seeds' usage, outside a graph).

        The load is kept per user id, so a shared instance never shows one user's
        loads to another. Inside an agent, `cargar_habilidad` records loads in the
        thread's state instead.

        Returns:
            The normalised skill id.

        Raises:
            SkillError: Unknown skill, or another loaded skill has the same leaf name.
            InvalidPath: A malformed id.
        """
        skill = validate_skill_id(skill_id)
        tenant = self.tenant()
        check_leaf_clash(skill, tenant.loaded_skills)
        await self.catalog.aget(self._user(tenant), skill)
        mine = self.mounts.instance_skills.setdefault(tenant.user_id, [])
        if skill not in mine:
            mine.append(skill)
        return skill

    load_skill = sync_method(aload_skill)

    # -- the seeds' catalog API -----------------------------------------------------------------

    @io_bound
    async def aload_skills(self, category: str | None = "all") -> list[SkillInfo]:
        """The enabled skills of the caller's library (user over shared), by id."""
        return await self.catalog.askills(self._user(self.tenant()), category=category)

    @io_bound
    async def aload_skills_frontmatter(self, category: str | None = None, budget_chars: int = 100_000) -> str:
        """The index as concatenated YAML frontmatter blocks (seed 002)."""
        return formats.format_yaml(await self.aload_skills(category), budget_chars)

    @io_bound
    async def aload_all_skills_formatted(self, category: str | None = None, budget_chars: int = 100_000) -> str:
        """The index as a human list grouped by category."""
        return formats.format_grouped(await self.aload_skills(category), budget_chars)

    @io_bound
    async def aload_skill_content(self, skill_id: str) -> str:
        """The full text of a skill's SKILL.md.

        Raises:
            SkillError: Unknown skill (the message suggests the closest ids).
        """
        _, text = await self.catalog.askill_md(self._user(self.tenant()), validate_skill_id(skill_id))
        return text

    @io_bound
    async def askill_files(self, skill_id: str, *, limit: int = 50, home: str | None = None) -> list[str]:
        """Virtual paths of a skill's files as they appear once it is loaded.

        Costs 1 LIST when `home` (from `catalog.home_of`) is given, else the index too.

        Raises:
            SkillError: Unknown skill.
        """
        skill = validate_skill_id(skill_id)
        if home is None:
            home = await self.catalog.ahome(self._user(self.tenant()), skill)
        objects, _ = await self.store.alist(home)
        base = f"/skills/{skill_leaf(skill)}/"
        paths = sorted(base + o.key[len(home) :] for o in objects if not o.key.endswith("/"))
        return paths[:limit] + ([f"... and {len(paths) - limit} more"] if len(paths) > limit else [])

    load_skills = sync_method(aload_skills)
    load_skills_frontmatter = sync_method(aload_skills_frontmatter)
    load_all_skills_formatted = sync_method(aload_all_skills_formatted)
    load_skill_content = sync_method(aload_skill_content)

    def unload_skill(self, skill_id: str) -> None:
        """Forget a skill loaded with `load_skill`, for the current user (for every user
        when the call has no user id)."""
        skill = validate_skill_id(skill_id)
        user = self.tenant().user_id
        for owner, skills in self.mounts.instance_skills.items():
            if (user is None or owner == user) and skill in skills:
                skills.remove(skill)
