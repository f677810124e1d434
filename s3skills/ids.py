"""`SkillId`: the one value type for skill ids, and the rules that make a folder a skill.

A skill is a folder holding `SKILL.md`. Its id is its path below a library's
`skills/` prefix: `pdf`, or `escrituras/compraventa` (a category, then the skill).
Each segment is an allow-listed identity part (`s3skills.paths.check_identity`):
dot-folders such as `.curated` are fine, `.` and `..` never are. The last
segment, the *leaf*, is the folder name the agent sees under `/skills/`.

A `SKILL.md` ends a skill: a folder inside a skill is part of it, never another
skill (`nested_in` applies that rule to a set of ids).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from s3skills.errors import InvalidPath
from s3skills.paths import check_identity

__all__ = ["MAX_ID_DEPTH", "SKILL_FILE", "SkillId", "nested_in"]

SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""

MAX_ID_DEPTH = 2
"""Segments in an id: `skill` or `category/skill`."""


@dataclass(frozen=True, slots=True, order=True)
class SkillId:
    """A checked skill id. Build it with `parse` or `from_key`; `str()` gives the id."""

    parts: tuple[str, ...]

    @classmethod
    def parse(cls, raw: object) -> SkillId:
        """Check an id given by a caller (`category/skill` or `skill`; surrounding `/` ignored).

        Raises:
            InvalidPath: Not one or two allow-listed segments.
        """
        if isinstance(raw, SkillId):
            return raw
        if not isinstance(raw, str):
            raise InvalidPath(f"Invalid skill id {raw!r}")
        parts = tuple(raw.strip().strip("/").split("/"))
        if not 1 <= len(parts) <= MAX_ID_DEPTH:
            raise InvalidPath(f"Invalid skill id {raw!r}: use 'skill' or 'category/skill'")
        for part in parts:
            check_identity(part, "skill id segment")
        return cls(parts)

    @classmethod
    def from_key(cls, key: str, library_prefix: str) -> SkillId | None:
        """The id of the skill whose `SKILL.md` is at `key`, or None when `key` is not one.

        `key` must lie under `library_prefix` (a `.../skills/` prefix), at a depth of
        one or two folders, and name a `SKILL.md` inside a folder with a valid id.
        """
        if not key.startswith(library_prefix):
            return None
        parts = key[len(library_prefix) :].split("/")
        if parts[-1] != SKILL_FILE or not 2 <= len(parts) <= MAX_ID_DEPTH + 1:
            return None
        try:
            return cls.parse("/".join(parts[:-1]))
        except InvalidPath:
            return None

    @classmethod
    def is_valid(cls, raw: object) -> bool:
        """Whether `raw` parses (for values from untrusted state: never raises)."""
        try:
            cls.parse(raw)
        except InvalidPath:
            return False
        return isinstance(raw, str)

    @property
    def leaf(self) -> str:
        """The last segment: the skill's folder name, as the agent sees it under `/skills/`."""
        return self.parts[-1]

    @property
    def category(self) -> str | None:
        """The first segment of a two-segment id, else None."""
        return self.parts[0] if len(self.parts) > 1 else None

    def __str__(self) -> str:
        return "/".join(self.parts)

    def contains(self, other: SkillId) -> bool:
        """Whether `other` lies strictly inside this skill's folder."""
        return len(other.parts) > len(self.parts) and other.parts[: len(self.parts)] == self.parts


def nested_in(skill_id: str, ids: Iterable[str]) -> list[str]:
    """The ids among `ids` whose folders lie inside `skill_id`'s folder (not part of it)."""
    outer = SkillId.parse(skill_id)
    return sorted(i for i in ids if outer.contains(SkillId.parse(i)))
