"""The seeds' API of `S3Backend`: deepagents <= 0.4 names and seed 002's skill helpers.

The seeds were written for deepagents <= 0.4 (`ls_info`, `grep_raw`, `glob_info`, text
results) and used the backend itself to load skills outside a graph. Those names stay,
each a documented delegation to the 0.7 protocol (`als`, `agrep`, `aglob`) or to
`SkillLibrary`, with a generated sync twin. `S3Backend` inherits them from `SeedsAPI`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepagents.backends.protocol import FileInfo, GlobResult, GrepMatch, GrepResult, LsResult

from s3skills._loop import on_io_loop, sync_method
from s3skills.errors import InvalidPath, NotFound, SkillError, TenantError
from s3skills.fs.mounts import Location, Mounts
from s3skills.ids import SkillId
from s3skills.paths import VPath
from s3skills.skills import SkillLibrary
from s3skills.skills.format import render
from s3skills.storage import ObjectStore
from s3skills.tenancy import Tenant

__all__ = ["SeedsAPI"]


class SeedsAPI:
    """The seeds' names over the backend's protocol methods (mixed into `S3Backend`)."""

    store: ObjectStore
    skills: SkillLibrary
    mounts: Mounts
    _instance_skills: dict[str | None, list[str]]

    if TYPE_CHECKING:  # provided by S3Backend

        def tenant(self) -> Tenant: ...

        async def als(self, path: str) -> LsResult: ...

        async def agrep(
            self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
        ) -> GrepResult: ...

        async def aglob(self, pattern: str, path: str | None = None) -> GlobResult: ...

    async def als_info(self, path: str) -> list[FileInfo]:
        """Seed alias of `als` (deepagents <= 0.4): the entries, or `[]` on error."""
        return (await self.als(path)).entries or []

    async def agrep_raw(self, pattern: str, path: str | None = None, glob: str | None = None) -> list[GrepMatch] | str:
        """Seed alias of `agrep`: the matches, or the error string."""
        result = await self.agrep(pattern, path, glob)
        if result.matches:
            return result.matches  # a search cut by a limit still returns what it found
        return result.error if result.error is not None else []

    async def aglob_info(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """Seed alias of `aglob`: the matches, or `[]` on error."""
        return (await self.aglob(pattern, path)).matches or []

    async def aexists(self, path: str) -> bool:
        """True when `path` is a file or a non-empty folder visible to this caller.

        Raises:
            S3SkillsError: A store fault (403, unavailable): not a "no".
        """
        return await on_io_loop(self._exists(path))

    async def _exists(self, path: str) -> bool:
        try:
            target = await self.mounts.resolve(await self.mounts.visible(), VPath.parse(path))
        except (NotFound, InvalidPath, TenantError):
            return False
        if not isinstance(target, Location) or not target.rel:
            return True
        if await self.store.aexists(target.key):
            return True
        return bool(await self.mounts.objects_under(target))

    @property
    def loaded_skills(self) -> list[str]:
        """Skills the current user loaded on this instance with `load_skill` (outside a graph)."""
        return list(self.tenant().loaded_skills)

    async def aload_skill(self, skill_id: str) -> str:
        """Load a skill on this instance, for the current user (the seeds' usage, outside a graph).

        Inside an agent, `cargar_habilidad` records loads in the thread's state instead.

        Returns:
            The skill's id.

        Raises:
            SkillError: Unknown, disabled, or another loaded skill has the same leaf name.
        """
        tenant = self.tenant()
        result = await self.skills.aload(skill_id, tenant=tenant)
        mine = self._instance_skills.setdefault(tenant.user_id, [])
        if result.skill.id not in mine:
            mine.append(result.skill.id)
        return result.skill.id

    def unload_skill(self, skill_id: str) -> None:
        """Forget a skill loaded with `load_skill`, for the current user."""
        wanted = str(SkillId.parse(skill_id))
        user = self.tenant().user_id
        for owner, skills in self._instance_skills.items():
            if (user is None or owner == user) and wanted in skills:
                skills.remove(wanted)

    async def aload_skills(self, category: str | None = "all") -> list[str]:
        """The ids of the caller's enabled skills (seed 002), user over shared."""
        return [s.id for s in await self.skills.aindex(category)]

    async def aload_skills_frontmatter(self, category: str | None = None, budget_chars: int = 100_000) -> str:
        """The YAML frontmatter blocks of the caller's enabled skills (seed 002), within a budget."""
        return render.format_yaml(await self.skills.aindex(category), budget_chars)

    async def aload_all_skills_formatted(self, category: str | None = None, budget_chars: int = 100_000) -> str:
        """The index as a human list grouped by category."""
        return render.format_grouped(await self.skills.aindex(category), budget_chars)

    async def aload_skill_content(self, skill_id: str) -> str | None:
        """The full text of a skill's SKILL.md, or None when there is no such enabled skill."""
        try:
            return await self.skills.askill_md(skill_id)
        except SkillError:
            return None

    ls_info = sync_method(als_info)
    grep_raw = sync_method(agrep_raw)
    glob_info = sync_method(aglob_info)
    exists = sync_method(aexists)
    load_skill = sync_method(aload_skill)
    load_skills = sync_method(aload_skills)
    load_skills_frontmatter = sync_method(aload_skills_frontmatter)
    load_all_skills_formatted = sync_method(aload_all_skills_formatted)
    load_skill_content = sync_method(aload_skill_content)
