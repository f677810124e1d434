"""Pull a library (or one skill) of S3 skills into a local folder, never writing outside it.

`apull_tree` walks the destination one directory handle at a time (no symlink below it is
ever followed), writes each file atomically, and keeps local files that changed since the
last pull unless asked (`force`, or `backup` to move them aside). It runs on the private
I/O loop; `pull_tree` is its generated sync twin. It notes where each folder came from
(`s3skills.transfer.provenance.PULL_RECORD`), so pushing the folder back replaces the
copy it was pulled from without a conflict.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

from s3skills._loop import gather_limited, io_bound, sync_method
from s3skills.errors import InvalidPath, SkillError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.storage import ObjectInfo, ObjectStore
from s3skills.transfer.localtree import MAX_FILE_BYTES, Item, check_relative_path, file_md5
from s3skills.transfer.provenance import PULL_RECORD, merge_pull_record
from s3skills.transfer.push import Progress
from s3skills.transfer.reports import PullReport

__all__ = ["BACKUP_SUFFIX", "apull_tree", "pull_tree"]

BACKUP_SUFFIX = ".s3skills-backup"
"""Appended to the name of a local file that `pull(backup=True)` moves aside."""


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


def _write_atomic(dest: Path, rel: str, data: bytes, mode: int = 0o666) -> None:
    """Write `dest/rel` through a fresh, unpredictable temporary name, then rename it
    (created with `mode`, less the umask)."""
    *folders, name = rel.split("/")
    fd = _open_dir(dest, folders, create=True)
    try:
        _check_leaf(fd, name)
        tmp = f".{name}.{secrets.token_hex(8)}.s3skills-tmp"
        out = os.open(tmp, _TMP_FLAGS, mode, dir_fd=fd)
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
    force: bool = False,
    backup: bool = False,
    progress: Progress | None = None,
    concurrency: int = 16,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> PullReport:
    """Download the library at `prefix` (or one skill of it) below `dest`.

    Files land at `dest/<skill id>/<path>`, so pushing `dest` again gives the same
    library. Unchanged files (same MD5 as the ETag) are not downloaded again. A local
    file that differs from the library's is never overwritten silently: it is kept and
    reported (`PullReport.kept`) unless `force` (overwrite) or `backup` (move it to
    `<name>.s3skills-backup`, then write).

    Args:
        store: The bucket.
        prefix: The library prefix, ending with `/`.
        dest: The local folder (created if needed). Nothing is written outside it.
        skill: Only this skill (`pdf` or `category/skill`).
        force: Overwrite local files that differ from the library.
        backup: Move such local files aside first (`<name>.s3skills-backup`, replaced
            if it exists), then write the library's version.
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
            continue
        if await asyncio.to_thread(target.is_file) and not force:
            if not backup:
                report.kept.append(Item(rel, "changed locally: kept (use --force or --backup)", obj.size))
                continue
            moved = target.with_name(target.name + BACKUP_SUFFIX)
            await asyncio.to_thread(os.replace, target, moved)
            report.backups.append(Item(rel, moved.name, obj.size))
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
    await asyncio.to_thread(_record_pull, real, prefix, store.bucket, objects, report)
    return report


def _record_pull(dest: Path, prefix: str, bucket: str, objects: list[ObjectInfo], report: PullReport) -> None:
    """Note in `PULL_RECORD` the ETag of each `SKILL.md` now in `dest` as the library has it.

    Written never group- or other-writable (0o644 whatever the umask), as a push trusts it
    only then (`s3skills.transfer.provenance.pulled_etags`).
    """
    now_local = {item.path for item in (*report.downloaded, *report.skipped)}
    pulled = {
        str(sid): obj.etag
        for obj in objects
        if (sid := SkillId.from_key(obj.key, prefix)) is not None and obj.key[len(prefix) :] in now_local
    }
    if not pulled:
        return
    old: bytes | None = None
    try:
        fd = _open_dir(dest, [], create=False)
        try:
            with os.fdopen(os.open(PULL_RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd), "rb") as f:
                old = f.read()
        finally:
            os.close(fd)
    except OSError:
        old = None
    try:
        _write_atomic(dest, PULL_RECORD, merge_pull_record(old, prefix, pulled, bucket=bucket), 0o644)
    except (InvalidPath, OSError) as exc:
        report.refused.append(Item(PULL_RECORD, f"the pull record was not written: {exc}"))


def _same_file(target: Path, obj: ObjectInfo) -> bool:
    if target.is_symlink() or not target.is_file():
        return False
    return target.stat().st_size == obj.size and file_md5(target) == obj.etag


pull_tree = sync_method(apull_tree)
