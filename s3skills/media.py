"""The one rule for file types: text or binary, and the MIME type (pure; no I/O).

Push's Content-Type (`content_type_for`), the MCP server's tools and resources and the
agent's reads (`s3skills.fs`) all ask `file_kind`, so a file is text or binary the same way
everywhere:

- **media by name**: images, PDF, slides, audio and video (`MEDIA_EXTENSIONS`, the
  extensions deepagents 0.7 renders as multimodal blocks) are binary with their type,
  whatever the bytes: deepagents decides by the name and MCP hosts expect `image/*`;
- **binary by content**: bytes with a NUL, a known binary signature (zip, gzip, ELF, …)
  or that are not UTF-8 are binary (`application/octet-stream` unless the name names a
  non-text type);
- **everything else is UTF-8 text**, whatever its name (`.yar`, `.hcl`, `Dockerfile`,
  `LICENSE`, `.go`, `.sol`, …): its type is the name's when that is a text type
  (`text/markdown`, `application/json`, …), else `text/plain`.

Deciding by content needs the bytes: every caller already holds them (push reads the local
file, the server and the agent the object they fetched), so the rule costs no request, only a
check of at most `SNIFF_BYTES` for NUL and signatures and one UTF-8 decode. `type_by_name` is
for listings, which have no bytes.
"""

from __future__ import annotations

import codecs
import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["MEDIA_EXTENSIONS", "SNIFF_BYTES", "FileKind", "content_type_for", "file_kind", "type_by_name"]

MEDIA_EXTENSIONS: dict[str, str] = {
    ".png": "image/png",
    ".jpeg": "image/jpeg",
    ".jpg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".heic": "image/heic",
    ".heif": "image/heif",
    ".mp4": "video/mp4",
    ".mpeg": "video/mpeg",
    ".mov": "video/quicktime",
    ".avi": "video/x-msvideo",
    ".flv": "video/x-flv",
    ".mpg": "video/mpeg",
    ".webm": "video/webm",
    ".wmv": "video/x-ms-wmv",
    ".mkv": "video/x-matroska",
    ".3gpp": "video/3gpp",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".aiff": "audio/aiff",
    ".aac": "audio/aac",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
    ".pdf": "application/pdf",
    ".ppt": "application/vnd.ms-powerpoint",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
"""Extension -> type of the files read as multimodal content (deepagents 0.7's map, plus `.mkv`)."""

SNIFF_BYTES = 8192
"""How much of the start of a file is searched for a NUL byte or a binary signature."""

_TEXT_NAMES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".py": "text/x-python",
    ".sh": "text/x-shellscript",
}
_TEXT_APPLICATION = frozenset(
    {"application/json", "application/xml", "application/yaml", "application/toml", "application/javascript"}
)
_SIGNATURES = (
    b"PK\x03\x04",  # zip (and docx, xlsx, jar, whl)
    b"PK\x05\x06",  # an empty zip
    b"\x1f\x8b",  # gzip
    b"BZh",  # bzip2
    b"\xfd7zXZ\x00",  # xz
    b"(\xb5/\xfd",  # zstandard
    b"7z\xbc\xaf\x27\x1c",  # 7-zip
    b"Rar!\x1a\x07",  # rar
    b"\x7fELF",  # ELF executables and libraries
    b"MZ\x90\x00",  # Windows executables
    b"\xca\xfe\xba\xbe",  # Java classes, Mach-O universal
    b"\xcf\xfa\xed\xfe",  # Mach-O 64
    b"SQLite format 3\x00",
    b"%PDF-",  # a PDF under another name
    b"\x89PNG\r\n\x1a\n",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",  # JPEG
    b"\x00\x00\x01\x00",  # ICO
    b"wOFF",
    b"wOF2",
)


@dataclass(frozen=True, slots=True)
class FileKind:
    """What `file_kind` decided: the MIME type (no parameters) and whether it is served as text."""

    mime: str
    text: bool

    @property
    def content_type(self) -> str:
        """The Content-Type to store: the MIME type, with `; charset=utf-8` for text."""
        return f"{self.mime}; charset=utf-8" if self.text else self.mime

    @property
    def media(self) -> bool:
        """An image, PDF, slides, audio or video file: read as a multimodal block."""
        return not self.text and self.mime in _MEDIA_TYPES


_MEDIA_TYPES = frozenset(MEDIA_EXTENSIONS.values())


def _suffix(path: str) -> str:
    return PurePosixPath(path.rsplit("/", 1)[-1]).suffix.lower()


def type_by_name(path: str) -> str | None:
    """The MIME type a file's name suggests (None when the name says nothing): for listings,
    which have no bytes. `file_kind` decides what a file is served as."""
    ext = _suffix(path)
    if ext in MEDIA_EXTENSIONS:
        return MEDIA_EXTENSIONS[ext]
    if ext in _TEXT_NAMES:
        return _TEXT_NAMES[ext]
    guessed, _ = mimetypes.guess_type("x" + ext) if ext else (None, None)
    return guessed


def _is_text_type(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_APPLICATION or mime.endswith(("+xml", "+json"))


def _is_utf8(data: bytes, *, complete: bool) -> bool:
    """The bytes are UTF-8 (a character cut by the end of a partial read is allowed)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return False
    return True


def file_kind(path: str, data: bytes, *, complete: bool = True) -> FileKind:
    """Whether a file is text or binary, and its MIME type: the one rule (see the module).

    Args:
        path: The file's path or name (only its last segment counts).
        data: The file's bytes, or its first bytes with `complete=False` (a ranged read).
        complete: `data` is the whole file; else a multi-byte character cut at its end is
            not taken as a sign of binary content.
    """
    ext = _suffix(path)
    if ext in MEDIA_EXTENSIONS:
        return FileKind(MEDIA_EXTENSIONS[ext], text=False)
    named = type_by_name(path)
    head = data[:SNIFF_BYTES]
    if b"\x00" in head or head.startswith(_SIGNATURES) or not _is_utf8(data, complete=complete):
        return FileKind(named if named and not _is_text_type(named) else "application/octet-stream", text=False)
    return FileKind(named if named and _is_text_type(named) else "text/plain", text=True)


def content_type_for(path: str, data: bytes) -> str:
    """The Content-Type to store a file under (`file_kind(path, data).content_type`)."""
    return file_kind(path, data).content_type
