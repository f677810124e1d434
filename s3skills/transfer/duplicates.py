"""Several folders of one tree that map to one skill id: copies collapse, others get distinct ids.

Repository roots often hold the same skill twice (`examples/x` and `libs/cli/examples/x`).
When two or more folders map to one id (`s3skills.transfer.localtree`'s mapping rule):

1. **Byte-identical copies collapse.** Folders whose files (relative paths and bytes;
   nested skills' files excluded) are identical are one skill: the folder with the
   shortest path (then the first in byte order) is pushed, each copy is reported.
2. **Differing folders get the shortest distinguishing id.** The rule: list each
   folder's ancestor folder names, nearest first, leaving out generic containers
   (`skills`, `plugins`, `.claude`...); take the smallest `k` for which the first `k`
   names differ between all the folders; each folder's category becomes those `k`
   names, outermost first, joined by `-`, and its leaf stays its folder name. When
   the names without containers cannot tell the folders apart, every name counts. So
   `libs/cli/examples/skills/web` and `libs/code/examples/skills/web` (both
   `examples/web`) become `cli-examples/web` and `code-examples/web`; `skills/pdf`
   and `.claude/skills/pdf` become `skills/pdf` and `.claude-skills/pdf`. A folder
   with fewer ancestors uses all it has.
3. With a forced category (`--category C`) differing folders are not renamed (the new
   ids would leave C). With a repository's category (`--category-from-repo`,
   `category_prefix`) they are, under its name: `deepagents-cli-examples/web`. If no
   such ids exist (an id is invalid, or taken by another skill of the tree),
   the folders are refused as before, with the reason: never guessed silently.

Both outcomes are reported (`LocalTree.duplicates`, `LocalTree.renamed`), never silent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from s3skills.errors import InvalidPath, SkillError
from s3skills.ids import SkillId

__all__ = ["Resolution", "resolve_duplicates"]


@dataclass
class Resolution:
    """What `resolve_duplicates` decided.

    Attributes:
        by_id: Skill id -> its folders; ids still holding several folders are ambiguous.
        copies: Dropped folder -> the folder it is a byte-identical copy of.
        renamed: Folder -> the distinguishing id it was given, and the id it first mapped to.
    """

    by_id: dict[str, list[str]]
    copies: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, tuple[str, str]] = field(default_factory=dict)


def _digest(folder: str, files: list[tuple[str, Callable[[], bytes]]]) -> str:
    """The digest of a folder's files; a file that cannot be read makes the folder unique."""
    digest = hashlib.sha256()
    for rel, read in sorted(files, key=lambda item: item[0]):
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        try:
            digest.update(hashlib.sha256(read()).digest())
        except SkillError:
            return "unreadable:" + folder  # never a copy of anything: kept and reported by the scan
    return digest.hexdigest()


def _ancestors(folder: str) -> list[str]:
    """The names of the folders above `folder`, nearest first."""
    return list(reversed(folder.split("/")[:-1])) if folder else []


def _distinguishing(folders: list[str], generic: frozenset[str]) -> dict[str, str] | None:
    """Folder -> category by the rule (module docstring); None when the ancestors cannot tell them apart."""
    for skip in (generic, frozenset[str]()):
        names = {f: [n for n in _ancestors(f) if n.casefold() not in skip] for f in folders}
        longest = max(len(a) for a in names.values())
        for k in range(1, longest + 1):
            keys = {f: tuple(a[:k]) for f, a in names.items()}
            if len(set(keys.values())) == len(folders):
                return {f: "-".join(reversed(key)) for f, key in keys.items()}
    return None


def resolve_duplicates(
    by_id: Mapping[str, list[str]],
    files_of: Callable[[str], list[tuple[str, Callable[[], bytes]]]],
    *,
    rename: bool = True,
    category_prefix: str | None = None,
    generic: frozenset[str] = frozenset(),
) -> Resolution:
    """Collapse byte-identical copies and give differing folders distinct ids (see the module).

    Args:
        by_id: Skill id -> the folders that map to it (relative to the scanned folder).
        files_of: A folder's own files as `(path inside the folder, a function that reads it)`
            (the scan's safe read: it raises `SkillError` for a file it will not read).
        rename: Give differing folders distinguishing ids; False (a category forced by
            the caller, which the new ids would not keep) leaves them ambiguous.
        category_prefix: Put first in each distinguishing category (`prefix-cli-examples`).
        generic: Folder names (case-folded) that say nothing of a skill (`GENERIC_CONTAINERS`).
    """
    out = Resolution({sid: list(folders) for sid, folders in by_id.items()})
    for skill_id, folders in sorted(by_id.items()):
        if len(folders) < 2:
            continue
        kept: dict[str, str] = {}  # digest -> the folder kept
        for folder in sorted(folders, key=lambda f: (len(f), f)):
            digest = _digest(folder, files_of(folder))
            if digest in kept:
                out.copies[folder] = kept[digest]
            else:
                kept[digest] = folder
        distinct = sorted(kept.values())
        out.by_id[skill_id] = distinct
        if len(distinct) < 2 or not rename:
            continue
        categories = _distinguishing(distinct, generic)
        if categories is None:
            continue
        leaf = SkillId.parse(skill_id).leaf
        if category_prefix:
            categories = {f: f"{category_prefix}-{c}" if c else category_prefix for f, c in categories.items()}
        wanted = {folder: f"{category}/{leaf}" if category else leaf for folder, category in categories.items()}
        taken = set(out.by_id) - {skill_id}
        try:
            valid = all(str(SkillId.parse(new)) == new for new in wanted.values())
        except InvalidPath:
            valid = False
        if not valid or taken & set(wanted.values()) or len(set(wanted.values())) != len(wanted):
            continue
        del out.by_id[skill_id]
        for folder, new in wanted.items():
            out.by_id[new] = [folder]
            out.renamed[folder] = (new, skill_id)
    return out
