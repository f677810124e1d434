"""What `SkillLibrary` answers: where a skill lives, its files, a page of a search, a load.

Plain values (no I/O), the rule that two loaded skills never share a folder name, and
how listed keys become skills' files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from s3skills.errors import SkillError
from s3skills.ids import SkillId
from s3skills.skills.format.model import SkillInfo
from s3skills.skills.index.catalog import LibraryIndex, SkillEntry
from s3skills.skills.versions.history import SkillVersion
from s3skills.storage import ObjectInfo
from s3skills.tenancy import SkillPin

__all__ = [
    "Known",
    "LoadResult",
    "SkillFile",
    "SkillHome",
    "SkillPage",
    "check_leaf_clash",
    "files_of",
    "shared_prefix",
    "sort_into_homes",
]


@dataclass(frozen=True, slots=True)
class Known:
    """A skill of a tenant's merged index, with the entry and library it came from (None: code)."""

    info: SkillInfo
    entry: SkillEntry | None
    prefix: str | None
    library: LibraryIndex | None = None


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


def files_of(home: SkillHome, objects: Sequence[ObjectInfo], pin: SkillPin | None = None) -> list[SkillFile]:
    """The files of `home` among listed objects: nested skills' and folder markers left out.

    With the `pin` of a versioned load, only the files of that version are kept.
    """
    pinned = pin.files if pin is not None and pin.versioned else None
    return [
        SkillFile(o.key[len(home.prefix) :], o.size, o.etag, o.key)
        for o in objects
        if home.owns(o.key) and not o.key.endswith("/") and (pinned is None or o.key[len(home.prefix) :] in pinned)
    ]


def shared_prefix(folders: Sequence[str]) -> str:
    """The longest key prefix every one of `folders` starts with (not cut at a `/`).

    `skill-001/` and `skill-002/` share `skill-00`: a LIST of that prefix holds both
    folders and no `skill-1.../`, which a cut at the last `/` would also list.
    """
    lo, hi = min(folders), max(folders)
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def sort_into_homes(
    homes: Sequence[SkillHome], objects: Sequence[ObjectInfo]
) -> list[tuple[SkillHome, list[ObjectInfo]]]:
    """Each home with the listed objects under its folder and under no deeper home's.

    Order-free: keys may come in any order (SeaweedFS does not list in S3's byte order).
    `files_of` then drops what belongs to nested skills that were not asked for.
    """
    folders = {home.prefix: home for home in homes}
    owned: dict[str, list[ObjectInfo]] = {home.prefix: [] for home in homes}
    for obj in objects:
        cut = len(obj.key)
        while (cut := obj.key.rfind("/", 0, cut)) >= 0:
            if (folder := obj.key[: cut + 1]) in folders:  # the deepest folder asked for
                owned[folder].append(obj)
                break
    return [(home, owned[prefix]) for prefix, home in folders.items()]
