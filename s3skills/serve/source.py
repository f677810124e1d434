"""The data-source seam of the MCP server: what it needs to know about a user's skills.

The server (`s3skills.serve.mcp`) is written against `SkillSource` only. A source answers
for one user at a time and never decides who the user is: the server passes the user id
it took from the transport (the command line for stdio, the verified token for HTTP).

A source lists a skill's files with their ETags (a listing, no reads); the server reads a
file only to compute a digest it has not seen for that (key, ETag), or when a client asks
for it. A source that already knows a file's SHA-256 (a manifest, an object checksum)
puts it in `SkillFile.sha256`, and the server then never reads the file to hash it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from s3skills.skills import SkillInfo

__all__ = ["SkillFile", "SkillSource"]


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill, as a listing describes it.

    Attributes:
        path: The path relative to the skill's folder (`SKILL.md`, `references/a.md`),
            already checked: no `..`, `.`, empty segment, backslash, NUL or control character.
        size: The size in bytes.
        etag: An opaque version tag; it changes whenever the bytes change.
        sha256: The lowercase hex SHA-256 of the bytes, when the source knows it.
        key: A storage-wide name of the file (the object key), used to share digests
            between users of one shared library; None to cache per user and skill.
    """

    path: str
    size: int
    etag: str
    sha256: str | None = None
    key: str | None = None


@runtime_checkable
class SkillSource(Protocol):
    """A user's enabled skills and their files.

    Every method raises `s3skills.errors.SkillError` (or `NotFound`) for a skill that the
    user does not have or that is disabled, and `s3skills.errors.NotFound` for a missing file.
    """

    async def list_skills(self, user_id: str) -> list[SkillInfo]:
        """The user's enabled skills, sorted by id."""
        ...

    async def files(self, user_id: str, skill_id: str) -> list[SkillFile]:
        """Every file of the skill, `SKILL.md` included, sorted by path.

        A folder inside the skill that holds its own `SKILL.md` is another skill, so its
        files are not listed here.
        """
        ...

    async def read(self, user_id: str, skill_id: str, path: str) -> tuple[bytes, str]:
        """The bytes of one file of the skill and the ETag of exactly those bytes."""
        ...
