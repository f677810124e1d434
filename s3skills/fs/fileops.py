"""Pure helpers of the file operations: classification, decoding, listing, grep.

No I/O here; `S3Backend` feeds these functions with what the store returned.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import PurePosixPath

from deepagents.backends.protocol import FileData, FileInfo, GrepMatch

from s3skills.errors import BinaryFile
from s3skills.media import content_type_for

__all__ = [
    "binary_file_data",
    "content_type_for",
    "decode_text",
    "file_info",
    "grep_lines",
    "is_searchable_path",
    "is_text_path",
    "text_file_data",
]

try:  # deepagents' own classification, so that read_file renders what we return
    from deepagents.backends.utils import _get_backend_read_file_type as _file_type
except ImportError:  # pragma: no cover - a later deepagents renamed it
    from deepagents.backends.utils import _get_file_type as _file_type


_BINARY_SUFFIXES = frozenset(
    {
        ".ttf",
        ".otf",
        ".woff",
        ".woff2",
        ".eot",
        ".zip",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".zst",
        ".7z",
        ".rar",
        ".tar",
        ".jar",
        ".whl",
        ".exe",
        ".dll",
        ".so",
        ".dylib",
        ".bin",
        ".dat",
        ".db",
        ".sqlite",
        ".pyc",
        ".class",
        ".o",
        ".a",
        ".iso",
        ".dmg",
        ".ico",
        ".bmp",
        ".tif",
        ".tiff",
        ".psd",
        ".doc",
        ".docx",
        ".xls",
        ".xlsx",
        ".odt",
        ".ods",
        ".odp",
        ".key",
        ".numbers",
        ".pages",
        ".mkv",
    }
)


def is_text_path(path: str) -> bool:
    """False for paths deepagents reads as multimodal content (images, PDF, audio, video)."""
    return _file_type(path) == "text"


def is_searchable_path(path: str) -> bool:
    """False for files grep should not even fetch: multimodal content and known binary formats."""
    return is_text_path(path) and PurePosixPath(path).suffix.lower() not in _BINARY_SUFFIXES


def decode_text(data: bytes, path: str) -> str:
    """Decode UTF-8 text (a BOM is dropped).

    Raises:
        BinaryFile: The bytes hold a NUL or are not UTF-8.
    """
    if b"\x00" in data[:8192]:
        raise BinaryFile(f"File '{path}' is a binary file and cannot be read as text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BinaryFile(f"File '{path}' is a binary file and cannot be read as text") from None


def _iso(ts: datetime | None) -> str:
    if ts is None:
        return ""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.isoformat()


def text_file_data(content: str, modified: datetime | None) -> FileData:
    """A `FileData` holding text."""
    stamp = _iso(modified)
    data = FileData(content=content, encoding="utf-8")
    if stamp:
        data["modified_at"] = stamp
    return data


def binary_file_data(raw: bytes, modified: datetime | None) -> FileData:
    """A `FileData` holding base64, as deepagents 0.7 expects for images, PDF, audio, video."""
    stamp = _iso(modified)
    data = FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
    if stamp:
        data["modified_at"] = stamp
    return data


def file_info(path: str, *, is_dir: bool, size: int = 0, modified: datetime | None = None) -> FileInfo:
    """A listing entry; directories end with `/`."""
    if is_dir:
        return FileInfo(path=path if path.endswith("/") else path + "/", is_dir=True, size=0, modified_at="")
    return FileInfo(path=path, is_dir=False, size=int(size), modified_at=_iso(modified))


def grep_lines(path: str, text: str, pattern: str) -> Iterable[GrepMatch]:
    """Literal (not regex) matches of `pattern` in `text`, one per matching line."""
    for number, line in enumerate(text.split("\n"), 1):
        if pattern in line:
            yield GrepMatch(path=path, line=number, text=line.rstrip("\r"))
