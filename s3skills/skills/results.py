"""What `SkillLibrary` answers: where a skill lives, its files, a page of a search, a load.

Plain values (no I/O), plus the rule that two loaded skills never share a folder name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from s3skills.errors import SkillError
from s3skills.ids import SkillId
from s3skills.skills.model import SkillInfo
from s3skills.skills.versions import SkillVersion

__all__ = ["LoadResult", "SkillFile", "SkillHome", "SkillPage", "check_leaf_clash"]


@dataclass(frozen=True, slots=True)
class SkillHome:
    """Where an S3 skill's files live.

    Attributes:
        skill: The skill.
        prefix: The key prefix of its folder (ends with `/`).
        excluded: Key prefixes below `prefix` that belong to nested skills.
    """

    skill: SkillInfo
    prefix: str
    excluded: tuple[str, ...] = ()

    def owns(self, key: str) -> bool:
        """Whether `key` is one of this skill's files (not a nested skill's)."""
        return key.startswith(self.prefix) and not any(key.startswith(p) for p in self.excluded)


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill: its path relative to the skill folder, size and ETag.

    `key` is the object's key: an opaque identity for caches (two users of one shared
    library see the same key), never a path to show or to build another key from.
    """

    path: str
    size: int
    etag: str
    key: str = ""


@dataclass(frozen=True, slots=True)
class SkillPage:
    """One page of `search`: the skills, the total that matched, and the next cursor."""

    skills: list[SkillInfo]
    total: int
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What loading a skill gives: the skill, its instructions and its files' virtual paths.

    `version` is the version loaded (its id, and each file's ETag and VersionId), for
    the thread to pin (`version.pin()`); None for a code skill.
    """

    skill: SkillInfo
    instructions: str
    files: list[str]
    version: SkillVersion | None = None

    @property
    def is_code(self) -> bool:
        """True for a code skill (its tools appear once loaded; it has no files)."""
        return self.skill.source == "code"


def check_leaf_clash(skill_id: str, loaded: Sequence[str]) -> None:
    """Refuse a second loaded skill whose folder name under /skills is taken.

    Raises:
        SkillError: Another loaded skill has the same leaf name.
    """
    leaf = SkillId.parse(skill_id).leaf
    for other in loaded:
        if other != skill_id and SkillId.is_valid(other) and SkillId.parse(other).leaf == leaf:
            raise SkillError(
                f"Cannot load '{skill_id}': the loaded skill '{other}' already appears as /skills/{leaf}. "
                "Two loaded skills cannot share a folder name."
            )
