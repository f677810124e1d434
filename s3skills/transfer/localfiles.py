"""Local files read safely: never through a symlink, never a FIFO or device, never another file
than the one a scan saw, and never more than a limit.

`check_file` is the scan's verdict on one file (why it is refused, or what to open);
`read_local` reads it; `file_md5` hashes a file as S3 reports a single-part upload's ETag.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from s3skills.errors import SkillError

__all__ = ["Unreadable", "check_file", "file_md5", "mib", "read_checked", "read_local", "resolved_link"]


def mib(size: int) -> str:
    """`60.0 MiB`, `1.0 KiB` or `12 B`."""
    if size >= 2**20:
        return f"{size / 2**20:.1f} MiB"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


def resolved_link(path: Path) -> Path | None:
    """Where a symlink leads (resolved all the way), or None for a symlink loop.

    A broken link leads to the missing path it names. The strict resolution tells a loop
    apart on every Python: 3.11 raises RuntimeError, 3.13 OSError (ELOOP), while 3.13's
    non-strict `resolve()` hands a looping link back unresolved, as if it led somewhere.
    """
    try:
        return path.resolve(strict=True)
    except RuntimeError:  # Python < 3.13: a loop
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # Python >= 3.13: a loop
            return None
    try:  # missing (a broken link) or unreadable on the way: where it points, for the caller's checks
        return path.resolve()
    except (RuntimeError, OSError):
        return None


def check_file(path: Path, real_root: Path, max_file_bytes: int) -> str | tuple[Path, int, tuple[int, int]]:
    """Why a file is refused, or the path to open, its size and identity (one `fstat`)."""
    target = path
    if path.is_symlink():
        resolved = resolved_link(path)
        if resolved is None:
            return "symlink loop"
        if not resolved.is_relative_to(real_root):
            return "symlink to a file outside the tree"
        target = resolved
    try:
        fd = _open_nofollow(target)
    except OSError as exc:
        return "broken symlink" if target is not path else _why_not_opened(exc)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > max_file_bytes:
        size = info.st_size
        return f"too large: the file is {mib(size)} ({size} bytes); the limit is {mib(max_file_bytes)}"
    return target, info.st_size, (info.st_dev, info.st_ino)


def _why_not_opened(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return "symlink: not followed"
    return f"cannot be read: {exc.strerror or exc}"


def _open_nofollow(path: Path) -> int:
    """A read-only descriptor of `path` itself: never through a symlink; a FIFO does not block."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags)


def read_local(path: Path, max_bytes: int, identity: tuple[int, int] | None = None) -> bytes:
    """The bytes of a local file, read from one descriptor opened without following a symlink.

    Args:
        path: The file (a symlink there is refused, not followed).
        max_bytes: Larger files are refused; at most `max_bytes + 1` bytes are read.
        identity: `(st_dev, st_ino)` the file must still have (what a scan saw).

    Raises:
        SkillError: A symlink, not a regular file (a FIFO, `/dev/zero`), another file
            than the one scanned, or over `max_bytes`.
    """
    try:
        return read_checked(path, max_bytes, identity)
    except Unreadable as exc:
        raise SkillError(f"{path}: {exc}") from None


class Unreadable(Exception):
    """Why a local file is not read (for a report line)."""


def read_checked(path: Path, max_bytes: int, identity: tuple[int, int] | None) -> bytes:
    try:
        fd = _open_nofollow(path)
    except OSError as exc:
        raise Unreadable(_why_not_opened(exc)) from None
    with os.fdopen(fd, "rb", buffering=0) as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a regular file")
        if identity is not None and (info.st_dev, info.st_ino) != identity:
            raise Unreadable("replaced after the scan (scan again)")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0 and (chunk := handle.read(min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise Unreadable(f"the file is over {max_bytes} bytes")
    return data


def file_md5(path: Path) -> str:
    """The hex MD5 of a file (what S3 reports as the ETag of a single-part upload)."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
