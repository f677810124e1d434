"""Push a local tree of skills to a user's library, and pull a library back.

`apush_tree` scans the tree (`s3skills.transfer.localtree.scan_tree`: junk dropped, every
`SKILL.md` validated, unsafe files refused), compares it with one listing of the
library and uploads only what changed (the local MD5 against the ETag of single-part
objects), each skill's `SKILL.md` last so that an agent never sees a half-uploaded
skill. With `delete` it mirrors. `apull_tree` writes a library (or one skill) below a
folder and never outside it. Both run on the private I/O loop; `push_tree` and
`pull_tree` are their generated sync twins.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from s3skills._loop import gather_limited, io_bound, sync_method
from s3skills.errors import InvalidPath, S3SkillsError, SkillError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.media import content_type_for
from s3skills.paths import join_key
from s3skills.skills.writers import anote_changed
from s3skills.storage import ObjectInfo, ObjectStore
from s3skills.transfer.localtree import (
    MAX_FILE_BYTES,
    Finding,
    Item,
    LocalFile,
    check_relative_path,
    file_md5,
    scan_tree,
    skill_of,
)

__all__ = [
    "MAX_FILE_BYTES",
    "Finding",
    "Item",
    "Progress",
    "PullReport",
    "PushRefused",
    "PushReport",
    "apull_tree",
    "apush_tree",
    "pull_tree",
    "push_tree",
    "scan_tree",
]

Progress = Callable[[str, int, int], None]
"""`progress(path, done, total)`, called from the I/O loop after each file."""


class PushRefused(S3SkillsError, ValueError):
    """The tree holds invalid skills or unsafe files; nothing was written.

    Attributes:
        report: What the scan found (`refused` and `problems` say why).
    """

    def __init__(self, message: str, report: PushReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class PushReport:
    """The outcome (or, with `dry_run`, the plan) of a push.

    Attributes:
        skills: The ids of the skills pushed.
        uploaded: Files written (`new` or `changed`); with `dry_run`, to be written.
        skipped: Files already up to date.
        deleted: Remote files removed by `delete` (or to be removed).
        refused: Local files (or skills) left out, with the reason.
        ignored: Junk and files outside any skill.
        problems: `SKILL.md` problems of the pushed skills.
        dry_run: Nothing was written.
    """

    skills: list[str] = field(default_factory=list)
    uploaded: list[Item] = field(default_factory=list)
    skipped: list[Item] = field(default_factory=list)
    deleted: list[Item] = field(default_factory=list)
    refused: list[Item] = field(default_factory=list)
    ignored: list[Item] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    dry_run: bool = False

    @property
    def bytes_uploaded(self) -> int:
        """Bytes in `uploaded`."""
        return sum(item.size for item in self.uploaded)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "bytes_uploaded": self.bytes_uploaded}


@dataclass
class PullReport:
    """The outcome of a pull.

    Attributes:
        downloaded: Files written below the destination.
        skipped: Files already there with the same content.
        refused: Keys not written (unsafe path, too large, in the way of a folder).
    """

    downloaded: list[Item] = field(default_factory=list)
    skipped: list[Item] = field(default_factory=list)
    refused: list[Item] = field(default_factory=list)

    @property
    def bytes_downloaded(self) -> int:
        """Bytes in `downloaded`."""
        return sum(item.size for item in self.downloaded)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "bytes_downloaded": self.bytes_downloaded}


# -- push ---------------------------------------------------------------------------------


def _content_type(rel: str) -> str:
    guessed, _ = mimetypes.guess_type(PurePosixPath(rel).name)
    if rel.endswith(".md") or (guessed or "").startswith("text/"):
        return content_type_for(rel)
    return guessed or "application/octet-stream"


def _protected(base: str, refused: str) -> str:
    """The key-relative path (or folder, ending in `/`) that a refusal keeps from `delete`."""
    if refused == SKILL_FILE or refused.endswith("/" + SKILL_FILE):
        return base + refused[: -len(SKILL_FILE)]
    return base + refused


def _covers(protected: str, rel: str) -> bool:
    return rel.startswith(protected) if protected.endswith("/") else rel == protected


def _remote_skills(objects: Iterable[ObjectInfo], prefix: str) -> set[str]:
    return {str(sid) for o in objects if (sid := SkillId.from_key(o.key, prefix)) is not None}


@io_bound
async def apush_tree(
    store: ObjectStore,
    source: Path,
    prefix: str,
    *,
    delete: bool = False,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    concurrency: int = 16,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> PushReport:
    """Upload a local tree of skills to the library at `prefix`.

    Args:
        store: The bucket.
        source: A folder of skills, of categories of skills, or one skill folder.
        prefix: The library prefix, ending with `/` (`alice/skills/`).
        delete: Mirror: also remove remote files of the pushed skills that are not
            in the tree, and the remote skills that are not in the tree. With a single
            skill folder, only that skill is mirrored.
        dry_run: Compute the report, write nothing.
        force: Push skills whose `SKILL.md` has fatal problems, and leave out unsafe
            files instead of refusing the whole tree.
        progress: Called as `progress(path, done, total)` after each upload/deletion.
        concurrency: Uploads in flight.
        max_file_bytes: Larger files are refused.

    Returns:
        What was uploaded, skipped, deleted, refused and ignored.

    Raises:
        PushRefused: Invalid skills or unsafe files, and not `force` (nothing written).
        SkillError: `source` is not a folder or holds no skill.
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError("prefix must end with '/'")
    tree = await asyncio.to_thread(scan_tree, Path(source), max_file_bytes=max_file_bytes)
    report = PushReport(dry_run=dry_run, refused=list(tree.refused), ignored=list(tree.ignored))
    report.problems = list(tree.problems)
    blocking = len(tree.refused) + sum(1 for p in tree.problems if p.fatal)
    if blocking and not force:
        raise PushRefused(f"{source}: {blocking} problem(s) block the push; fix them or use force", report)
    if not tree.skills:
        raise SkillError(f"{source}: no skills found (a skill is a folder with a SKILL.md, one or two levels down)")
    report.skills = sorted(tree.skills)
    protected = [_protected(tree.base, item.path) for item in tree.refused]
    listed = prefix + tree.base
    objects, _ = await store.alist(listed)
    remote = {obj.key: obj for obj in objects}
    keys = {f.key_rel: join_key(prefix, tuple(f.key_rel.split("/"))) for f in tree.files}
    compare = [f for f in tree.files if keys[f.key_rel] in remote and "-" not in remote[keys[f.key_rel]].etag]
    digests = await asyncio.to_thread(lambda: {f.key_rel: file_md5(f.local) for f in compare})
    uploads: list[LocalFile] = []
    for f in tree.files:
        obj = remote.get(keys[f.key_rel])
        if obj is not None and digests.get(f.key_rel) == obj.etag:
            report.skipped.append(Item(f.key_rel, "unchanged", f.size))
        else:
            uploads.append(f)
            report.uploaded.append(Item(f.key_rel, "new" if obj is None else "changed", f.size))
    deletions: list[str] = []
    if delete:
        mirrored = set(tree.skills) | _remote_skills(objects, prefix)
        local_keys = set(keys.values())
        for key in sorted(remote):
            rel = key[len(prefix) :]
            if key in local_keys or any(_covers(p, rel) for p in protected) or skill_of(rel, mirrored) is None:
                continue
            deletions.append(key)
            report.deleted.append(Item(rel, "not in the local tree", remote[key].size))
    if dry_run:
        return report
    total, done = len(uploads) + len(deletions), 0

    def upload(f: LocalFile) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal done
            data = await asyncio.to_thread(f.local.read_bytes)
            if len(data) > max_file_bytes:  # it grew after the scan
                raise SkillError(f"{f.rel}: the file is over {max_file_bytes} bytes")
            await store.aput(keys[f.key_rel], data, content_type=_content_type(f.key_rel))
            done += 1
            if progress is not None:
                progress(f.key_rel, done, total)

        return run

    # Everything else first, then each SKILL.md: a skill appears only once complete.
    is_skill_md = [f.key_rel.endswith("/" + SKILL_FILE) for f in uploads]
    await gather_limited([upload(f) for f, last in zip(uploads, is_skill_md, strict=True) if not last], concurrency)
    await gather_limited([upload(f) for f, last in zip(uploads, is_skill_md, strict=True) if last], concurrency)
    # Deleting SKILL.md first makes a removed skill vanish from the index at once.
    for batch in (
        [k for k in deletions if k.endswith("/" + SKILL_FILE)],
        [k for k in deletions if not k.endswith("/" + SKILL_FILE)],
    ):
        if not batch:
            continue
        failed = await store.adelete_many(batch)
        if failed:
            raise S3SkillsError(f"delete: {len(failed)} object(s) could not be deleted")
        done += len(batch)
        if progress is not None:
            progress(batch[-1][len(prefix) :], done, total)
    # The library's manifest (its one-request index) records the pushed and removed skills.
    written = [keys[f.key_rel] for f in uploads if f.key_rel.endswith("/" + SKILL_FILE)]
    touched = {str(sid) for k in [*written, *deletions] if (sid := SkillId.from_key(k, prefix)) is not None}
    await anote_changed(store, prefix, touched)
    return report


# -- pull ---------------------------------------------------------------------------------


def _prepare_dest(dest: Path) -> Path:
    root = dest.expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(dest: Path, parts: list[str], *, create: bool) -> int:
    """A descriptor of the folder `dest/parts...`, walked one segment at a time.

    No symlink is ever followed below `dest` (`O_NOFOLLOW` on every segment, relative to
    the parent's descriptor, so a link swapped in meanwhile is refused too) and a
    folder is created only inside one already opened this way.

    Raises:
        InvalidPath: A segment is a symlink or a file.
        FileNotFoundError: A folder is missing and not `create`.
    """
    fd = os.open(dest, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # a concurrent download made it
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # ELOOP: a symlink; ENOTDIR: a file or a link to one
                why = f"'{part}' is a symlink or a file, not a folder: nothing is written through it"
                raise InvalidPath(why) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_atomic(dest: Path, rel: str, data: bytes) -> None:
    """Write `dest/rel` through a fresh, unpredictable temporary name, then rename it."""
    *folders, name = rel.split("/")
    fd = _open_dir(dest, folders, create=True)
    try:
        _check_leaf(fd, name)
        tmp = f".{name}.{secrets.token_hex(8)}.s3skills-tmp"
        out = os.open(tmp, _TMP_FLAGS, 0o666, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(data)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
    finally:
        os.close(fd)


def _check_leaf(fd: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise InvalidPath("a symlink is in the way: nothing is written through it")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidPath("a folder or a special file is in the way")


def _local_target(dest: Path, rel: str) -> Path:
    """The local path of a key's relative path, checked to stay inside `dest`.

    Only checks (nothing is created): the path is plain, and no existing component
    below `dest` is a symlink or in the way.

    Raises:
        InvalidPath: The path is unsafe, would leave `dest`, or crosses a symlink.
    """
    why = check_relative_path(rel)
    if why is not None:
        raise InvalidPath(why)
    *folders, name = rel.split("/")
    try:
        fd = _open_dir(dest, folders, create=False)
    except FileNotFoundError:
        return dest.joinpath(*rel.split("/"))  # created, symlink-free, when written
    try:
        _check_leaf(fd, name)
    finally:
        os.close(fd)
    return dest.joinpath(*rel.split("/"))


@io_bound
async def apull_tree(
    store: ObjectStore,
    prefix: str,
    dest: Path,
    *,
    skill: str | None = None,
    progress: Progress | None = None,
    concurrency: int = 16,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> PullReport:
    """Download the library at `prefix` (or one skill of it) below `dest`.

    Files land at `dest/<skill id>/<path>`, so pushing `dest` again gives the same
    library. Unchanged files (same MD5 as the ETag) are not downloaded again.

    Args:
        store: The bucket.
        prefix: The library prefix, ending with `/`.
        dest: The local folder (created if needed). Nothing is written outside it.
        skill: Only this skill (`pdf` or `category/skill`).
        progress: Called as `progress(path, done, total)` after each file.
        concurrency: Downloads in flight.
        max_file_bytes: Larger objects are refused.

    Raises:
        SkillError: `skill` is not in the library.
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError("prefix must end with '/'")
    listed = prefix
    if skill is not None:
        skill = str(SkillId.parse(skill))
        listed = prefix + skill + "/"
    objects, _ = await store.alist(listed)
    if skill is not None and not any(o.key == listed + SKILL_FILE for o in objects):
        raise SkillError(f"Skill '{skill}' not found")
    real = await asyncio.to_thread(_prepare_dest, Path(dest))
    report = PullReport()
    wanted: list[tuple[ObjectInfo, Path]] = []
    for obj in objects:
        rel = obj.key[len(prefix) :]
        if rel.endswith("/"):
            continue  # a folder marker
        if obj.size > max_file_bytes:
            report.refused.append(Item(rel, f"the object is {obj.size} bytes; the limit is {max_file_bytes}", obj.size))
            continue
        try:
            target = await asyncio.to_thread(_local_target, real, rel)
        except (InvalidPath, OSError) as exc:
            report.refused.append(Item(rel, str(exc), obj.size))
            continue
        if "-" not in obj.etag and await asyncio.to_thread(_same_file, target, obj):
            report.skipped.append(Item(rel, "unchanged", obj.size))
        else:
            wanted.append((obj, target))
    done = 0

    def download(obj: ObjectInfo, target: Path) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal done
            body = await store.aget(obj.key, max_bytes=max_file_bytes)
            rel = obj.key[len(prefix) :]
            try:
                await asyncio.to_thread(_write_atomic, real, rel, body.data)
            except (InvalidPath, OSError) as exc:  # something appeared in the way since the check
                report.refused.append(Item(rel, str(exc), obj.size))
                return
            report.downloaded.append(Item(rel, "downloaded", len(body.data)))
            done += 1
            if progress is not None:
                progress(rel, done, len(wanted))

        return run

    await gather_limited([download(obj, target) for obj, target in wanted], concurrency)
    report.downloaded.sort(key=lambda item: item.path)
    return report


def _same_file(target: Path, obj: ObjectInfo) -> bool:
    if target.is_symlink() or not target.is_file():
        return False
    return target.stat().st_size == obj.size and file_md5(target) == obj.etag


push_tree = sync_method(apush_tree)
pull_tree = sync_method(apull_tree)
push_tree.__qualname__ = "push_tree"
pull_tree.__qualname__ = "pull_tree"
