"""The one virtual-path type, and the allow-list for the identity parts of keys.

A path is parsed once, at the boundary, into a `VPath`; everything behind the
boundary works on `VPath` and never on raw strings. Parsing rejects, and never
resolves, `..`, `.`, empty segments, backslashes, NUL, control characters and lone
surrogates. Identity parts of keys (user, thread, ticket ids, skill id segments) must
match an allow-list in full (`check_identity`).

Local files that decide something (the MCP server's tokens file, a pull record that
lets a push replace a skill) are inputs too: `read_private_file` reads one only when it
is a regular file, reached without a symlink, owned by the user running the process and
not writable by group or others, so another local user cannot plant or rewrite it.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from s3skills.errors import InvalidPath

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_SEGMENT_BYTES",
    "VPath",
    "ascii_fold",
    "check_identity",
    "join_key",
    "read_private_file",
]

MAX_SEGMENT_BYTES = 255
"""Longest path segment accepted, in UTF-8 bytes."""

MAX_KEY_BYTES = 1024
"""S3's limit on the length of a key, in UTF-8 bytes."""

_IDENTITY_RE = re.compile(r"[A-Za-z0-9._@+:~-]+")


def _reject(raw: str, why: str) -> InvalidPath:
    shown = raw if len(raw) <= 80 else raw[:77] + "..."
    return InvalidPath(f"Invalid path {shown!r}: {why}")


def _is_control(ch: str) -> bool:
    # Cs: lone surrogates, which cannot be encoded into a key.
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


@dataclass(frozen=True, slots=True)
class VPath:
    """An absolute, normalised virtual path such as `/workspace/notes/a.md`.

    `parts` holds the segments (`("workspace", "notes", "a.md")`); the root is
    `VPath(())`. Build one with `VPath.parse`, never from an unchecked tuple.
    """

    parts: tuple[str, ...]

    @classmethod
    def parse(cls, raw: object) -> VPath:
        """Parse user input into a path, or raise `InvalidPath` saying why.

        A trailing `/` is dropped (`/a/` is `/a`); the path must be absolute.
        """
        if not isinstance(raw, str):
            raise InvalidPath(f"Invalid path: expected a string, got {type(raw).__name__}")
        if raw == "":
            raise _reject(raw, "the path is empty")
        if "\\" in raw:
            raise _reject(raw, "backslashes are not allowed; use '/'")
        if any(_is_control(ch) for ch in raw):
            raise _reject(raw, "control characters and lone surrogates are not allowed")
        if not raw.startswith("/"):
            raise _reject(raw, "the path must be absolute (start with '/')")
        if "//" in raw:
            raise _reject(raw, "empty path segments ('//') are not allowed")
        body = raw[1:]
        if body.endswith("/"):
            body = body[:-1]
        if body == "":
            return cls(())
        parts = tuple(body.split("/"))
        for part in parts:
            if part == "":
                raise _reject(raw, "empty path segments ('//') are not allowed")
            if part in (".", ".."):
                raise _reject(raw, f"'{part}' segments are not allowed")
            if len(part.encode("utf-8")) > MAX_SEGMENT_BYTES:
                raise _reject(raw, f"a segment is longer than {MAX_SEGMENT_BYTES} bytes")
        if len(raw.encode("utf-8")) > MAX_KEY_BYTES:
            raise _reject(raw, f"the path is longer than {MAX_KEY_BYTES} bytes")
        return cls(parts)

    @property
    def is_root(self) -> bool:
        """True for `/`."""
        return not self.parts

    @property
    def name(self) -> str:
        """The last segment (`""` for the root)."""
        return self.parts[-1] if self.parts else ""

    @property
    def suffix(self) -> str:
        """The extension of the last segment, with its dot (`.md`), or `""`."""
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot > 0 else ""

    def child(self, *segments: str) -> VPath:
        """Append segments (each is checked again; an empty one is refused)."""
        if not segments or any(seg == "" for seg in segments):
            raise InvalidPath(f"Invalid path: an empty segment below {self}")
        return VPath.parse(str(self).rstrip("/") + "/" + "/".join(segments))

    def relative_to(self, base: VPath) -> tuple[str, ...] | None:
        """The segments below `base`, or None when this path is not under it."""
        n = len(base.parts)
        if self.parts[:n] != base.parts:
            return None
        return self.parts[n:]

    def __str__(self) -> str:
        return "/" + "/".join(self.parts)

    def as_dir(self) -> str:
        """The path with a trailing `/`, as listings show directories."""
        text = str(self)
        return text if text.endswith("/") else text + "/"


def ascii_fold(value: str) -> str:
    """`value` with accents removed and spaces as `-` (`cálculos` -> `calculos`), other
    non-ASCII characters dropped: the id to suggest for a folder name people write naturally."""
    decomposed = unicodedata.normalize("NFKD", value)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return "-".join(plain.split()).encode("ascii", "ignore").decode("ascii")


def check_identity(value: object, what: str) -> str:
    """Return `value` when it is a safe identity part (user, thread, ticket id).

    Only `[A-Za-z0-9._@+:~-]+` is admitted, and never `.` or `..`, so an id can
    not add a level to a key or escape a prefix.

    Raises:
        InvalidPath: When the value is not a string of the allowed characters.
    """
    if not isinstance(value, str) or not _IDENTITY_RE.fullmatch(value) or value in (".", ".."):
        folded = ascii_fold(value) if isinstance(value, str) else None
        hint = f" (try {folded!r})" if folded and folded != value and _IDENTITY_RE.fullmatch(folded) else ""
        raise InvalidPath(f"Invalid {what} {value!r}: use only ASCII letters, digits and . _ @ + : ~ -{hint}")
    if len(value.encode("utf-8")) > 128:
        raise InvalidPath(f"Invalid {what}: longer than 128 characters")
    return value


def join_key(prefix: str, rel: tuple[str, ...]) -> str:
    """Join a tenant prefix (ending in `/`, or empty) and checked segments into a key.

    Raises:
        InvalidPath: If the key would not start with `prefix` or is too long.
    """
    key = prefix + "/".join(rel)
    if not key.startswith(prefix):  # pragma: no cover - structural guard
        raise InvalidPath("Invalid path: it escapes its mount")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidPath(f"Invalid path: the resulting key is longer than {MAX_KEY_BYTES} bytes")
    return key


def read_private_file(path: str | Path, *, max_bytes: int, what: str) -> bytes:
    """The bytes of a local file that only the user running this process could have written.

    The file is opened without following a symlink and checked on that descriptor
    (`fstat`): a regular file, owned by the effective user, not writable by group or
    others, at most `max_bytes` long. Where a file lets whoever wrote it act for someone
    (a token map, a record that lifts a guard), a file another local user owns or may
    write is refused rather than trusted.

    Args:
        path: The file.
        max_bytes: Larger files are refused (at most `max_bytes + 1` bytes are read).
        what: How messages name the file (`the tokens file`).

    Raises:
        ValueError: Unreadable, a symlink, not a regular file, owned by another user,
            writable by group or others, or too large (the message says which and how
            to fix it).
    """
    shown = f"{what} {str(path)!r}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ValueError(f"Cannot read {shown}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{shown[0].upper()}{shown[1:]} is not a regular file")
        owner = os.geteuid() if hasattr(os, "geteuid") else info.st_uid
        if info.st_uid != owner:
            raise ValueError(
                f"{shown[0].upper()}{shown[1:]} is owned by uid {info.st_uid}, not by this process's user "
                f"(uid {owner}), so that user could rewrite it: keep only a copy you own"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ValueError(
                f"{shown[0].upper()}{shown[1:]} can be written by group or others (mode "
                f"{stat.S_IMODE(info.st_mode):o}), so anyone could rewrite it: run chmod 600 on it"
            )
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0 and (chunk := f.read(min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise ValueError(f"{shown[0].upper()}{shown[1:]} is larger than {max_bytes} bytes")
    return data
