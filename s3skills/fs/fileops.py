"""Pure helpers of the file operations: classification, decoding, listing, grep.

No I/O here; `S3Backend` feeds these functions with what the store returned.
"""

from __future__ import annotations

import base64
import io
import re
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Literal

from deepagents.backends.protocol import FileData, FileInfo

from s3skills.errors import BinaryFile, InvalidPath, S3SkillsError
from s3skills.media import content_type_for, file_kind

__all__ = [
    "ALL_PAGES",
    "PdfMode",
    "binary_file_data",
    "content_type_for",
    "decode_text",
    "file_info",
    "is_searchable_path",
    "is_text_path",
    "pdf_request",
    "pdf_text",
    "text_file_data",
]

PdfMode = Literal["file", "text"]
"""How `read` returns a PDF: the file block (vision models) or its text."""
ALL_PAGES = (1, 0)
"""`pdf_request`'s page range for every page (`0` as the last page: up to the end)."""
_PAGES_RE = re.compile(r"#pages=(\d+)(?:-(\d+))?$")

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
    """False for paths deepagents reads as multimodal content (images, PDF, audio, video): the
    name alone decides those (`s3skills.media.MEDIA_EXTENSIONS`, deepagents 0.7's map)."""
    return not file_kind(path, b"").media


def is_searchable_path(path: str) -> bool:
    """False for files grep should not even fetch: multimodal content and known binary formats."""
    return is_text_path(path) and PurePosixPath(path).suffix.lower() not in _BINARY_SUFFIXES


def decode_text(data: bytes, path: str) -> str:
    """Decode a text file (a UTF-8 BOM is dropped); text or binary is `s3skills.media.file_kind`'s
    rule, decided on these bytes (no other request).

    Raises:
        BinaryFile: The rule says binary (a NUL, a binary signature, not UTF-8, or a media name).
    """
    if not file_kind(path, data).text:
        raise BinaryFile(f"File '{path}' is a binary file and cannot be read as text")
    return data.decode("utf-8-sig")


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


def pdf_request(path: str, mode: PdfMode) -> tuple[str, tuple[int, int] | None]:
    """The object path of a read and, when a PDF is to be read as text, its page range.

    `x.pdf#text` asks for every page, `x.pdf#pages=2-4` (or `#pages=3`) for some, and a
    plain `x.pdf` for every page when `mode` is `text`. Pages count from 1; a last page
    of 0 means "to the end".

    Raises:
        InvalidPath: A page range that is not `N` or `N-M` with 1 <= N <= M.
    """
    base, sep, fragment = path.rpartition("#")
    if sep and base.lower().endswith(".pdf"):
        if fragment == "text":
            return base, ALL_PAGES
        found = _PAGES_RE.fullmatch("#" + fragment)
        if found is None:
            raise InvalidPath(f"Invalid PDF page request {'#' + fragment!r}: use '#text', '#pages=3' or '#pages=2-4'")
        first = int(found.group(1))
        last = int(found.group(2) or first)
        if not 1 <= first <= last:
            raise InvalidPath(f"Invalid page range {first}-{last}: pages count from 1, first <= last")
        return base, (first, last)
    if mode == "text" and path.lower().endswith(".pdf"):
        return path, ALL_PAGES
    return path, None


def pdf_text(data: bytes, pages: tuple[int, int], path: str) -> str:
    """The text of pages `pages` of a PDF, each after a `[page N of M]` line.

    Raises:
        S3SkillsError: pypdf is not installed (the `pdf` extra), or the PDF cannot be read.
        InvalidPath: The first page is past the end.
    """
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise S3SkillsError(
            f"Cannot read '{path}' as text: PDF text needs pypdf (pip install 's3skills[pdf]'). "
            "Read it without '#text' to get the file itself."
        ) from None
    try:
        reader = PdfReader(io.BytesIO(data))
        total = len(reader.pages)
        first, last = pages
        last = total if last == 0 else min(last, total)
        if first > total:
            raise InvalidPath(f"'{path}' has {total} page(s); page {first} does not exist")
        blocks = []
        for number in range(first, last + 1):
            text = reader.pages[number - 1].extract_text() or ""
            blocks.append(f"[page {number} of {total}]\n{text.strip() or '(no text on this page)'}")
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, InvalidPath):
            raise
        raise S3SkillsError(f"Cannot read '{path}' as text: {exc}") from exc
    return "\n\n".join(blocks) + "\n"
