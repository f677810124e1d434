"""`CatalogSkillSource`: the MCP server's `SkillSource` over `SkillCatalog` and `ObjectStore`.

The catalog says which skills a user has (enabled ones only) and where each one's folder
is; the store lists and reads the folder. A skill's file listing costs one LIST of its
folder; reading a file costs one GET. Keys found under the folder that do not make a valid
path (`a//b`, `..`, control characters) are left out, as are the files of a folder that
holds its own `SKILL.md` (another skill).
"""

from __future__ import annotations

import logging

from s3skills._sync import on_io_loop
from s3skills.catalog import SkillCatalog
from s3skills.errors import InvalidPath
from s3skills.paths import VPath, join_key
from s3skills.serve.source import SkillFile
from s3skills.skillmd import SkillInfo

__all__ = ["CatalogSkillSource", "check_file_path"]

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
MAX_FILE_BYTES = 16 * 1024 * 1024
"""Largest file read (the skills extension's limit for a whole skill)."""


def check_file_path(path: str) -> tuple[str, ...]:
    """The segments of a path relative to a skill folder, with `VPath`'s rules.

    Raises:
        InvalidPath: Empty, absolute, or with `..`, `.`, `//`, a backslash, NUL or a
            control character.
    """
    if not isinstance(path, str) or path == "" or path.startswith("/") or path.endswith("/"):
        raise InvalidPath(f"Invalid path {path!r}: use a relative path such as 'references/a.md'")
    return VPath.parse("/" + path).parts


def _nested_skill_dirs(paths: list[tuple[str, ...]]) -> set[tuple[str, ...]]:
    return {parts[:-1] for parts in paths if len(parts) > 1 and parts[-1] == SKILL_FILE}


def _inside(parts: tuple[str, ...], dirs: set[tuple[str, ...]]) -> bool:
    return any(parts[: len(d)] == d for d in dirs)


class CatalogSkillSource:
    """A `SkillSource` over a `SkillCatalog` (its store is the catalog's).

    Args:
        catalog: The catalog of the bucket (with its key layout and shared library).
        max_file_bytes: Largest file `read` returns; a larger one raises `FileTooLarge`.
    """

    def __init__(self, catalog: SkillCatalog, *, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.catalog = catalog
        self.max_file_bytes = max_file_bytes

    async def list_skills(self, user_id: str) -> list[SkillInfo]:
        """The user's enabled skills (user library over shared), sorted by id."""
        return await self.catalog.askills(user_id)

    async def _home(self, user_id: str, skill_id: str) -> str:
        skill = await self.catalog.aget(user_id, skill_id, cached=True)  # enabled only
        return self.catalog.home_of(user_id, skill)

    async def files(self, user_id: str, skill_id: str) -> list[SkillFile]:
        """The skill's files from one LIST of its folder (no reads)."""
        home = await self._home(user_id, skill_id)
        objects, _ = await on_io_loop(self.catalog.store.alist(home))
        found: list[tuple[tuple[str, ...], SkillFile]] = []
        for obj in objects:
            rel = obj.key[len(home) :]
            try:
                parts = check_file_path(rel)
            except InvalidPath:
                logger.warning("skill %s: key %r is not a valid file path; it is not served", skill_id, rel)
                continue
            found.append((parts, SkillFile(path="/".join(parts), size=obj.size, etag=obj.etag, key=obj.key)))
        nested = _nested_skill_dirs([parts for parts, _ in found])
        return sorted((f for parts, f in found if not _inside(parts, nested)), key=lambda f: f.path)

    async def read(self, user_id: str, skill_id: str, path: str) -> tuple[bytes, str]:
        """One GET of the file (after the catalog lookup, usually cached).

        Raises:
            InvalidPath: A bad path.
            NotFound: No such file.
            FileTooLarge: The file is over `max_file_bytes`.
        """
        parts = check_file_path(path)
        home = await self._home(user_id, skill_id)
        body = await on_io_loop(self.catalog.store.aget(join_key(home, parts), max_bytes=self.max_file_bytes))
        return body.data, body.etag
