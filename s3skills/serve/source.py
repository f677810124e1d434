"""The data-source seam of the MCP server: what it needs to know about a user's skills.

The server (`s3skills.serve.mcp`) is written against `SkillSource` only. A source answers
for one user at a time and never decides who the user is: the server passes the user id
it took from the transport (the command line for stdio, the verified token for HTTP).

A source lists a skill's files with their ETags (a listing, no reads), for one skill or
for a page of skills at once. The server reads a file only to compute a digest it has not
seen for that (key, ETag), or when a client asks for it. A source that already knows a
file's SHA-256 (an object checksum) puts it in `SkillFile.sha256`; a source that keeps the
fingerprints the server computed (`remember`) gives them back (`recall`), so a server that
starts cold reads no file whose version it has described before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from s3skills.serve.entries import Fingerprint
from s3skills.skills import SkillInfo

__all__ = ["CountsLoads", "SkillFile", "SkillSource"]


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

    async def files_many(self, user_id: str, skill_ids: Sequence[str]) -> dict[str, list[SkillFile]]:
        """`files` of several skills at once, by skill id (a page of `skills/list`)."""
        ...

    async def read(self, user_id: str, skill_id: str, path: str) -> tuple[bytes, str]:
        """The bytes of one file of the skill and the ETag of exactly those bytes."""
        ...

    async def recall(self, user_id: str, files: Sequence[SkillFile]) -> dict[str, Fingerprint]:
        """Fingerprints remembered for these listed files, by `SkillFile.key`.

        Only a fingerprint of the exact version listed (its ETag) may be given; an empty
        dict is always a correct answer.
        """
        ...

    async def remember(self, user_id: str, known: Sequence[tuple[SkillFile, Fingerprint]]) -> None:
        """Keep fingerprints the server computed, each for the version in its `SkillFile`.

        Best effort: a source may keep nothing, and must not raise for a failed write.
        """
        ...


@runtime_checkable
class CountsLoads(Protocol):
    """A source that counts a skill's loads (optional: the server counts with it if it has it).

    The server calls `count_load` when a client reads a skill's `SKILL.md` through the skills
    extension (`resources/read`), as the tools face's `load_skill` counts a load. It must cost
    no request and never raise.
    """

    def count_load(self, user_id: str, skill_id: str) -> None:
        """Count one load of `skill_id` by `user_id`."""
        ...
