"""Local trees of skills: what a folder holds, read and checked without any network I/O.

Every `SKILL.md` below the scanned folder, at any depth, makes its folder a skill
(junk such as `.git`, `node_modules`, `__pycache__` or `.venv` is never entered; other
dot-folders, like openai/skills' `.curated`, are ordinary folders). A `SKILL.md` ends a
skill: a skill folder inside another one is a separate skill, and its files are not
files of the outer one (`LocalTree.nested` reports each).

The mapping rule, from a skill folder to a skill id (`category/leaf` or `leaf`):

* the leaf is the skill folder's name (the scanned folder's own name when it holds the
  `SKILL.md` itself);
* the category is the nearest folder above it, inside the scanned folder, that is
  neither a generic container (`GENERIC_CONTAINERS`: `skills`, `plugins`,
  `external_plugins`, `packages`, `src`, `.claude`, `.github`...) nor a skill folder;
  none is found -> no category. So `pdf/SKILL.md` -> `pdf`, `escrituras/compraventa`
  -> `escrituras/compraventa`, `plugins/sentry/skills/triage` -> `sentry/triage`,
  `skills/.curated/gh-fix-ci` -> `.curated/gh-fix-ci`, and a nested
  `skills/qdrant/minimize-latency` (inside the skill `qdrant`) -> `minimize-latency`;
* `category=` (the CLI's `--category C`) forces the category of every skill;
  `repository=` (`--category-from-repo`, `s3skills.transfer.repository`) too, and folders
  that would then share an id get the repository's name and their distinguishing folder
  names (`deepagents-cli-examples/web`), so every skill of a repository keeps an id.

Folders that map to one id are first resolved by `s3skills.transfer.duplicates`:
byte-identical copies collapse into one, and differing folders get the shortest
distinguishing id (both reported). Folders it cannot tell apart, or a top-level skill
whose id is also a category, are ambiguous: each is refused (`LocalTree.clashes`
lists them) and nothing is guessed.

`scan_tree` also validates every `SKILL.md` with `validate_skill_md`, and refuses what
must never become a key: symlinks that leave the tree, symlink loops (each reported, the
scan goes on), paths that `VPath.parse` rejects or with unsafe segments, ids that are not
valid `SkillId`s, anything but a regular file (a FIFO, a device such as `/dev/zero`),
oversized files. `s3skills.transfer` pushes what it accepts; the CLI's `validate` command
prints what it found.

Files are opened without following a symlink (`O_NOFOLLOW`; an in-tree symlink is opened
at the target the scan resolved), checked with `fstat` to be a regular file, and read from
that descriptor, at most `limit + 1` bytes (`read_local`). A later read (a push hashing or
uploading a file) opens only the very file the scan saw: the same device and inode
(`LocalFile.identity`), so a symlink or another file swapped in meanwhile is refused, not
followed.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from s3skills.config import Limits
from s3skills.errors import InvalidPath, SkillError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import VPath, check_identity
from s3skills.skills.format.parse import validate_skill_md
from s3skills.transfer.duplicates import resolve_duplicates
from s3skills.transfer.localfiles import (
    Unreadable,
    check_file,
    file_md5,
    read_checked,
    read_local,
    resolved_link,
)

__all__ = [
    "GENERIC_CONTAINERS",
    "JUNK_NAMES",
    "MAX_FILE_BYTES",
    "Finding",
    "Item",
    "LocalFile",
    "LocalTree",
    "check_relative_path",
    "file_md5",
    "local_md5",
    "read_local",
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
"""File and folder names never pushed (nor are `*.pyc`, `*.pyo` and pull's `*.s3skills-backup` files)."""
GENERIC_CONTAINERS = frozenset(
    {
        "skills",
        "skill",
        "plugins",
        "plugin",
        "external_plugins",
        "external-plugins",
        "packages",
        "src",
        ".claude",
        ".claude-plugin",
        ".github",
        ".codex",
        ".agents",
        ".cursor",
    }
)
"""Folder names (compared case-insensitively) never taken as a category by the mapping rule."""
_JUNK_SUFFIXES = (".pyc", ".pyo", ".s3skills-backup", ".s3skills-tmp")


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

    local: Path  # the file itself (an in-tree symlink's target, as the scan resolved it)
    rel: str  # relative to the scanned folder, `/`-separated, NFC
    key_rel: str  # relative to the library prefix: `<skill id>/<path in the skill>`
    skill: str
    size: int
    identity: tuple[int, int] | None = None  # (st_dev, st_ino) the scan saw; a read checks it


@dataclass
class LocalTree:
    """What `scan_tree` found.

    Attributes:
        root: The scanned folder.
        skills: Skill id -> folder, for every valid skill id.
        mapping: Skill id -> its folder relative to `root` (`""` for `root` itself).
        nested: Skill folders found inside another skill folder, and the id each got.
        clashes: Why ambiguous mappings were refused (one line per clash).
        refused_ids: Folder -> the id of each skill refused for a clash (a `delete`
            push leaves those ids alone in the library).
        is_skill_folder: The scanned folder holds a `SKILL.md` itself (a `delete` push
            then mirrors only the skills found in it).
        files: The files inside those skills, in key order.
        problems: What `validate_skill_md` says of each `SKILL.md` (fatal ones block a push).
        skill_md: Skill id -> the bytes of its `SKILL.md` as the scan read them.
        refused: Files and folders that can never be pushed (unsafe paths, symlinks
            leaving the tree, invalid skill ids, oversized files), with the reason.
            Paths are relative to `root`; a folder's ends with `/`.
        ignored: Junk and files outside any skill, with the reason.
        duplicates: Skill folders left out as byte-identical copies of another folder
            that maps to the same id (`s3skills.transfer.duplicates`).
        renamed: Skill folders given the shortest distinguishing id because differing
            folders mapped to one id.
    """

    root: Path
    skills: dict[str, Path] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict)
    nested: list[Item] = field(default_factory=list)
    clashes: list[str] = field(default_factory=list)
    refused_ids: dict[str, str] = field(default_factory=dict)
    is_skill_folder: bool = False
    files: list[LocalFile] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    skill_md: dict[str, bytes] = field(default_factory=dict)
    refused: list[Item] = field(default_factory=list)
    ignored: list[Item] = field(default_factory=list)
    duplicates: list[Item] = field(default_factory=list)
    renamed: list[Item] = field(default_factory=list)

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


def scan_tree(
    source: Path,
    *,
    category: str | None = None,
    repository: str | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> LocalTree:
    """Read a local tree of skills (no network).

    Args:
        source: Any folder: every `SKILL.md` below it is a skill (see the mapping rule).
        category: Put every skill in this category instead of the one the rule picks.
        repository: Put every skill in the category `repository`, and folders that would
            share an id in `repository-<their distinguishing folder names>` (not with `category`).
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
    if category is not None and repository is not None:
        raise ValueError("give category or repository, not both")
    for what, value in (("category", category), ("repository category", repository)):
        if value is not None:
            try:
                check_identity(value, what)
            except ValueError as exc:
                raise SkillError(str(exc)) from exc
    tree = LocalTree(root=root)
    candidates: list[_Candidate] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            sub = here / name
            rel = sub.relative_to(root).as_posix()
            if name in JUNK_NAMES:
                tree.ignored.append(Item(rel + "/", "junk"))
            elif sub.is_symlink():
                target = resolved_link(sub)
                if target is None:
                    tree.refused.append(Item(rel + "/", "symlink loop"))
                elif target.is_relative_to(real):
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
            checked = check_file(path, real, max_file_bytes)
            why = checked if isinstance(checked, str) else check_relative_path(rel)
            if why is not None:
                tree.refused.append(Item(rel, why))
                continue
            assert not isinstance(checked, str)
            candidates.append((checked[0], rel, checked[1], checked[2]))
    _assign(tree, candidates, category or repository, max_file_bytes, renamed_under=repository)
    return tree


_Candidate = tuple[Path, str, int, tuple[int, int]]  # the file to open, its rel, size, identity


def local_md5(file: LocalFile, max_bytes: int) -> str:
    """The hex MD5 of a scanned file, read as `read_local` reads it (the same file or an error)."""
    return hashlib.md5(read_local(file.local, max_bytes, file.identity), usedforsecurity=False).hexdigest()


def _category_for(parts: list[str], skill_dirs: set[str]) -> str | None:
    """The category of the skill folder at `parts` (the mapping rule; see the module docstring)."""
    for depth in range(len(parts) - 1, 0, -1):
        ancestor = "/".join(parts[:depth])
        name = parts[depth - 1]
        if ancestor in skill_dirs or name.casefold() in GENERIC_CONTAINERS:
            continue
        return name
    return None


def _skill_id_for(tree: LocalTree, folder: str, skill_dirs: set[str], category: str | None) -> str:
    """The id a skill folder (`""` for the scanned folder itself) maps to."""
    parts = folder.split("/") if folder else []
    leaf = parts[-1] if parts else unicodedata.normalize("NFC", tree.root.resolve().name)
    chosen = category if category is not None else _category_for(parts, skill_dirs)
    return f"{chosen}/{leaf}" if chosen else leaf


def _assign(
    tree: LocalTree,
    candidates: list[_Candidate],
    category: str | None,
    max_file_bytes: int,
    *,
    renamed_under: str | None = None,
) -> None:
    """Find the skills among the files, map each to an id, validate them, give each file its skill.

    `renamed_under` (the repository category) lets folders that share an id in the forced
    category get distinguishing ids that stay under its name.
    """
    skill_md = {rel: (path, ident) for path, rel, _, ident in candidates if rel.rsplit("/", 1)[-1] == SKILL_FILE}
    skill_dirs = {rel.rsplit("/", 1)[0] if "/" in rel else "" for rel in skill_md}
    by_id: dict[str, list[str]] = {}
    blocked: set[str] = set()
    for folder in sorted(skill_dirs):
        rel = f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE
        skill_id = _skill_id_for(tree, folder, skill_dirs, category)
        try:
            normalised = str(SkillId.parse(skill_id))
        except InvalidPath as exc:
            normalised, reason = "", f"maps to the skill id {skill_id!r}, which is invalid: {exc}"
        else:
            reason = f"skill id {skill_id!r} would be read as {normalised!r}; rename the folder"
        if normalised != skill_id:
            tree.refused.append(Item(rel, reason))
            blocked.add(folder)
            continue
        by_id.setdefault(skill_id, []).append(folder)
        outer = [d for d in skill_dirs if d != folder and (d == "" or folder.startswith(d + "/"))]
        if outer:
            outer_folder = max(outer, key=len) or "."
            why = f"nested in the skill folder {outer_folder!r}: pushed as the separate skill {skill_id!r}"
            tree.nested.append(Item(rel, why))
    resolution = resolve_duplicates(
        by_id,
        lambda folder: [
            (rel[len(folder) + 1 :] if folder else rel, partial(read_local, path, max_file_bytes, ident))
            for path, rel, _, ident in candidates
            if _owning_folder(rel, skill_dirs) == folder
        ],
        rename=category is None or renamed_under is not None,
        category_prefix=renamed_under,
        generic=frozenset(n.casefold() for n in GENERIC_CONTAINERS),
    )
    by_id = resolution.by_id
    for folder, original in sorted(resolution.copies.items()):
        why = f"a byte-identical copy of {original or '.'}: pushed once, from there"
        tree.duplicates.append(Item(f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE, why))
        blocked.add(folder)
    for folder, (new, old) in sorted(resolution.renamed.items()):
        why = f"folders that differ all map to {old!r}: this one is pushed as {new!r} (the shortest distinguishing id)"
        tree.renamed.append(Item(f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE, why))
    categories: dict[str, list[str]] = {}
    for sid in by_id:
        if "/" in sid:
            categories.setdefault(sid.split("/", 1)[0], []).append(sid)
    clashes = _clashes(by_id, categories)
    for skill_id, folders in sorted(by_id.items()):
        if skill_id in clashes:
            for folder in folders:
                tree.refused.append(Item(f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE, clashes[skill_id]))
                tree.refused_ids[folder] = skill_id
                blocked.add(folder)
            tree.clashes.append(f"{skill_id}: {clashes[skill_id]}")
            continue
        folder = folders[0]
        rel = f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE
        path, ident = skill_md[rel]
        try:
            data = read_checked(path, max_file_bytes, ident)
        except Unreadable as exc:  # replaced since it was listed, or grew
            tree.refused.append(Item(rel, str(exc)))
            tree.refused_ids[folder] = skill_id
            blocked.add(folder)
            continue
        tree.skills[skill_id] = tree.root / folder if folder else tree.root
        tree.mapping[skill_id] = folder
        tree.skill_md[skill_id] = data
        for problem in validate_skill_md(data, folder=SkillId.parse(skill_id).leaf):
            tree.problems.append(Finding(rel, problem.level, problem.message, problem.fatal))
    tree.is_skill_folder = "" in skill_dirs
    owners = {folder: skill_id for skill_id, folder in tree.mapping.items()}
    for path, rel, size, ident in candidates:
        owner = _owning_folder(rel, skill_dirs)
        if owner is None:
            tree.ignored.append(Item(rel, "not inside a skill folder"))
            continue
        if owner in resolution.copies:
            tree.ignored.append(Item(rel, f"inside a copy of {resolution.copies[owner] or '.'}"))
            continue
        if owner in blocked:
            tree.ignored.append(Item(rel, "inside a refused skill"))
            continue
        skill_id = owners[owner]
        inner = rel[len(owner) + 1 :] if owner else rel
        tree.files.append(LocalFile(path, rel, f"{skill_id}/{inner}", skill_id, size, ident))
    tree.files.sort(key=lambda f: f.key_rel)


def _owning_folder(rel: str, skill_dirs: set[str]) -> str | None:
    """The deepest skill folder holding `rel` (a SKILL.md ends a skill: nested ones own their files)."""
    best: str | None = None
    for folder in skill_dirs:
        if (folder == "" or rel.startswith(folder + "/")) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def _clashes(by_id: dict[str, list[str]], categories: dict[str, list[str]]) -> dict[str, str]:
    """Skill id -> why it is ambiguous: two folders map to it, or it is also a category."""
    out: dict[str, str] = {}
    for skill_id, folders in by_id.items():
        if len(folders) > 1:
            out[skill_id] = (
                f"ambiguous: the folders {', '.join(f or '.' for f in folders)} all map to the skill id "
                f"{skill_id!r}; push them separately with --category, or rename one"
            )
    for name, inner in categories.items():
        if name in by_id:
            why = (
                f"ambiguous: {name!r} would be both a skill ({', '.join(f or '.' for f in by_id[name])}) and the "
                f"category of {', '.join(sorted(inner))}; rename one, or push them separately with --category"
            )
            for skill_id in (name, *inner):
                out.setdefault(skill_id, why)
    return out
