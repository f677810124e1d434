"""`LibrarySkillSource`: the MCP server's `SkillSource` over a `SkillLibrary`.

The library decides what a user may see (enabled skills only; a nested skill's folder
is not part of the outer one; a code skill has no files) and where each skill lives.
A skill's file listing costs one LIST of its folder; reading a file costs one GET.
Keys under a folder that do not make a valid relative path are left out.
"""

from __future__ import annotations

import logging

from s3skills.errors import InvalidPath
from s3skills.paths import VPath
from s3skills.serve.source import SkillFile
from s3skills.skills import SkillInfo, SkillLibrary
from s3skills.tenancy import Tenant

__all__ = ["MAX_FILE_BYTES", "LibrarySkillSource", "check_file_path"]

logger = logging.getLogger(__name__)

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


class LibrarySkillSource:
    """A `SkillSource` over a `SkillLibrary` (S3 skills only: MCP serves files).

    Args:
        library: The skills of the bucket (its layout and shared library).
        max_file_bytes: Largest file `read` returns; a larger one raises `FileTooLarge`.
    """

    def __init__(self, library: SkillLibrary, *, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.library = library
        self.max_file_bytes = max_file_bytes

    async def list_skills(self, user_id: str) -> list[SkillInfo]:
        """The user's enabled S3 skills (user library over shared), sorted by id."""
        skills = await self.library.aindex(tenant=Tenant(user_id=user_id))
        return [s for s in skills if s.source != "code"]

    async def files(self, user_id: str, skill_id: str) -> list[SkillFile]:
        """The skill's files from one LIST of its folder (no reads)."""
        found = []
        for f in await self.library.afiles(skill_id, tenant=Tenant(user_id=user_id)):
            try:
                parts = check_file_path(f.path)
            except InvalidPath:
                logger.warning("skill %s: %r is not a valid file path; it is not served", skill_id, f.path)
                continue
            found.append(SkillFile(path="/".join(parts), size=f.size, etag=f.etag, key=f.key))
        return sorted(found, key=lambda f: f.path)

    async def read(self, user_id: str, skill_id: str, path: str) -> tuple[bytes, str]:
        """One GET of the file (after the index lookup, usually cached).

        Raises:
            InvalidPath: A bad path.
            NotFound: No such file.
            FileTooLarge: The file is over `max_file_bytes`.
        """
        check_file_path(path)
        body = await self.library.aopen(skill_id, path, tenant=Tenant(user_id=user_id), max_bytes=self.max_file_bytes)
        return body.data, body.etag
