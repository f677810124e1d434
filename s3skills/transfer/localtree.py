"""Local trees of skills: what a folder holds, read and checked without any network I/O.

A local tree is one of:

* a folder of skills (`pdf/SKILL.md`, like the `skills/` folder of anthropics/skills),
* a folder of categories of skills (`escrituras/compraventa/SKILL.md`), or both,
* a single skill folder (`SKILL.md` at its root), named by its folder.

`scan_tree` drops junk (`.git`, `__pycache__`, `*.pyc`...), validates every `SKILL.md`
with `validate_skill_md`, and refuses what must never become a key: symlinks that leave
the tree, paths that `VPath.parse` rejects or with unsafe segments, skill ids outside the
allow-list, oversized files. `s3skills.transfer` pushes what it accepts; the CLI's
`validate` command prints what it found.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from s3skills.config import Limits
from s3skills.errors import InvalidPath, SkillError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import VPath
from s3skills.skills.parse import validate_skill_md

__all__ = [
    "JUNK_NAMES",
    "MAX_FILE_BYTES",
    "Finding",
    "Item",
    "LocalFile",
    "LocalTree",
    "check_relative_path",
    "file_md5",
    "scan_tree",
    "skill_of",
]

MAX_FILE_BYTES = Limits().max_file_bytes
"""Largest file pushed or pulled: the limit an agent reads and writes with (one size policy)."""
JUNK_NAMES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".DS_Store",
        "Thumbs.db",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".venv",
        "node_modules",
        ".ipynb_checkpoints",
    }
)
"""File and folder names never pushed (nor are `*.pyc` / `*.pyo` files)."""
_JUNK_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True, slots=True)
class Item:
    """One file of a report: a path and why it is in its list.

    `path` is relative to the library prefix (`pdf/SKILL.md`) for uploaded, skipped,
    deleted and downloaded files, and relative to the local tree for refused ones.
    """

    path: str
    reason: str
    size: int = 0


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem of the local tree: a `SKILL.md` problem, or a file that is refused.

    Attributes:
        path: The path relative to the scanned folder (`pdf/SKILL.md`).
        level: `error` or `warning`.
        message: One line.
        fatal: The skill (or file) cannot be pushed as it is.
    """

    path: str
    level: str
    message: str
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class LocalFile:
    """A file of the tree that may be pushed."""

    local: Path
    rel: str  # relative to the scanned folder, `/`-separated, NFC
    key_rel: str  # relative to the library prefix: `<skill id>/<path in the skill>`
    skill: str
    size: int


@dataclass
class LocalTree:
    """What `scan_tree` found.

    Attributes:
        root: The scanned folder.
        base: `""` for a tree; `"<name>/"` when the folder is itself one skill.
        skills: Skill id -> folder, for every valid skill id.
        files: The files inside those skills, in key order.
        problems: What `validate_skill_md` says of each `SKILL.md` (fatal ones block a push).
        refused: Files and folders that can never be pushed (unsafe paths, symlinks
            leaving the tree, invalid skill ids, oversized files), with the reason.
            Paths are relative to `root`; a folder's ends with `/`.
        ignored: Junk and files outside any skill, with the reason.
    """

    root: Path
    base: str = ""
    skills: dict[str, Path] = field(default_factory=dict)
    files: list[LocalFile] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    refused: list[Item] = field(default_factory=list)
    ignored: list[Item] = field(default_factory=list)

    @property
    def single(self) -> bool:
        """True when the scanned folder is itself one skill."""
        return bool(self.base)

    def findings(self) -> list[Finding]:
        """Refusals (as fatal errors) and `SKILL.md` problems, by path."""
        refused = [Finding(item.path, "error", item.reason, True) for item in self.refused]
        return sorted([*refused, *self.problems], key=lambda f: f.path)


def _unsafe_segment(segment: str) -> str | None:
    """Why a path segment should not become part of a key, or None when it is fine."""
    if segment != segment.strip():
        return "it starts or ends with whitespace"
    if segment.endswith("."):
        return "it ends with '.'"
    if any(not ch.isprintable() for ch in segment):
        return "it holds non-printable characters"
    return None


def check_relative_path(rel: str) -> str | None:
    """Why a `/`-separated relative path cannot be a key (or a local file), or None."""
    try:
        parts = VPath.parse("/" + rel).parts
    except InvalidPath as exc:
        return str(exc)
    for segment in parts:
        why = _unsafe_segment(segment)
        if why is not None:
            return f"unsafe name {segment!r}: {why}"
    return None


def skill_of(key_rel: str, skills: Iterable[str]) -> str | None:
    """The shallowest skill (of `skills`) whose folder holds `key_rel`, or None."""
    owners = [s for s in skills if key_rel.startswith(s + "/")]
    return min(owners, key=len) if owners else None


def scan_tree(source: Path, *, max_file_bytes: int = MAX_FILE_BYTES) -> LocalTree:
    """Read a local tree of skills (no network).

    Args:
        source: A folder of skills, of categories of skills, or one skill folder.
        max_file_bytes: Larger files are refused.

    Returns:
        The skills, their files, the findings and the ignored files.

    Raises:
        SkillError: `source` is not a folder.
    """
    root = Path(source).expanduser()
    if not root.is_dir():
        raise SkillError(f"{source}: not a folder")
    real = root.resolve()
    base = unicodedata.normalize("NFC", real.name) + "/" if (root / SKILL_FILE).is_file() else ""
    tree = LocalTree(root=root, base=base)
    candidates: list[tuple[Path, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            sub = here / name
            rel = sub.relative_to(root).as_posix()
            if name in JUNK_NAMES:
                tree.ignored.append(Item(rel + "/", "junk"))
            elif sub.is_symlink():
                if sub.resolve().is_relative_to(real):
                    tree.ignored.append(Item(rel + "/", "symlinked folder: not followed"))
                else:
                    tree.refused.append(Item(rel + "/", "symlink to a folder outside the tree"))
            else:
                continue
            dirnames.remove(name)
        dirnames.sort()
        for name in sorted(filenames):
            path = here / name
            rel = unicodedata.normalize("NFC", path.relative_to(root).as_posix())
            if name in JUNK_NAMES or name.endswith(_JUNK_SUFFIXES):
                tree.ignored.append(Item(rel, "junk"))
                continue
            why = _check_file(path, real, max_file_bytes) or check_relative_path(rel)
            if why is not None:
                tree.refused.append(Item(rel, why))
                continue
            candidates.append((path, rel, path.stat().st_size))
    _assign(tree, candidates)
    return tree


def _check_file(path: Path, real_root: Path, max_file_bytes: int) -> str | None:
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(real_root):
            return "symlink to a file outside the tree"
        if not target.is_file():
            return "broken symlink"
    elif not path.is_file():
        return "not a regular file"
    size = path.stat().st_size
    if size > max_file_bytes:
        return f"the file is {size} bytes; the limit is {max_file_bytes} ({max_file_bytes // 2**20} MiB)"
    return None


def _assign(tree: LocalTree, candidates: list[tuple[Path, str, int]]) -> None:
    """Find the skills among the files, validate them, and give each file its skill."""
    blocked: list[str] = []
    too_deep: set[str] = set()
    for path, rel, _ in candidates:
        parts = (tree.base + rel).split("/")
        if parts[-1] != SKILL_FILE:
            continue
        if not 2 <= len(parts) <= 3:
            too_deep.add(rel)
            continue
        skill_id = "/".join(parts[:-1])
        try:
            normalised = str(SkillId.parse(skill_id))
        except InvalidPath as exc:
            normalised, reason = "", str(exc)
        else:
            reason = f"skill id {skill_id!r} would be read as {normalised!r}; rename the folder"
        if normalised != skill_id:
            tree.refused.append(Item(rel, reason))
            blocked.append(skill_id)
            continue
        tree.skills[skill_id] = path.parent
        data = path.read_bytes()
        for problem in validate_skill_md(data, folder=parts[-2]):
            tree.problems.append(Finding(rel, problem.level, problem.message, problem.fatal))
    for path, rel, size in candidates:
        key_rel = tree.base + rel
        skill = skill_of(key_rel, tree.skills)
        if skill is None:
            if rel in too_deep:
                why = "a SKILL.md more than two folders below the tree is not a skill"
            elif skill_of(key_rel, blocked):
                why = "inside a refused skill"
            else:
                why = "not inside a skill folder"
            tree.ignored.append(Item(rel, why))
        else:
            tree.files.append(LocalFile(path, rel, key_rel, skill, size))
    tree.files.sort(key=lambda f: f.key_rel)


def file_md5(path: Path) -> str:
    """The hex MD5 of a file (what S3 reports as the ETag of a single-part upload)."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
