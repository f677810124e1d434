"""The pure parts of the MCP skills server: URIs, cursors, frontmatter, digests, content.

Nothing here does I/O. `skill://` URIs are built and parsed here only:

    skill://<skill-id segments>/<file path>      e.g. skill://escrituras/compraventa/SKILL.md

Each segment is percent-encoded when built and decoded when parsed; a decoded segment is
checked with `VPath`'s rules (no `..`, `.`, empty segment, `/`, backslash, NUL, control
characters), so a URI can never name anything outside the skill it resolves to.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from s3skills.errors import InvalidPath
from s3skills.media import file_kind, type_by_name
from s3skills.paths import VPath

__all__ = [
    "SCHEME",
    "DigestCache",
    "Fingerprint",
    "decode_cursor",
    "encode_cursor",
    "mime_type",
    "parse_uri",
    "served",
    "uri_of",
]

SCHEME = "skill://"
_SAFE = "-._~!$&'()*+,;=:@"


def uri_of(segments: tuple[str, ...] | list[str]) -> str:
    """The `skill://` URI of a path (skill id segments, then file segments)."""
    return SCHEME + "/".join(quote(seg, safe=_SAFE) for seg in segments)


def parse_uri(uri: object) -> tuple[str, ...]:
    """The decoded segments of a `skill://` URI.

    Raises:
        InvalidPath: Not a `skill://` URI, a segment that does not decode to UTF-8, or a
            segment that is not allowed (the server answers `-32602 Invalid skill URI`).
    """
    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise InvalidPath(f"Invalid skill URI {uri!r}: it must start with skill://")
    body = uri[len(SCHEME) :]
    if body == "" or body.endswith("/") or "?" in body or "#" in body:
        raise InvalidPath(f"Invalid skill URI {uri!r}: write it without a trailing '/', query or fragment")
    try:
        segments = tuple(unquote(seg, errors="strict") for seg in body.split("/"))
    except UnicodeDecodeError:  # %C0%AE, a lone surrogate: bytes that are not UTF-8
        raise InvalidPath(f"Invalid skill URI {uri!r}: a percent-encoded segment is not UTF-8") from None
    if any(seg == "" or "/" in seg for seg in segments):
        raise InvalidPath(f"Invalid skill URI {uri!r}: empty or encoded '/' segments are not allowed")
    try:
        parsed = VPath.parse("/" + "/".join(segments))
    except InvalidPath as exc:
        raise InvalidPath(f"Invalid skill URI {uri!r}: {exc}") from None
    return parsed.parts


def encode_cursor(after: str) -> str:
    """An opaque cursor meaning "the items whose key sorts after `after`"."""
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The key a cursor from `encode_cursor` continues after (None: from the start).

    Raises:
        ValueError: A cursor this server did not issue.
    """
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)["after"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise ValueError("Invalid cursor: pass back the nextCursor of the previous page unchanged") from None
    if not isinstance(value, str):
        raise ValueError("Invalid cursor: pass back the nextCursor of the previous page unchanged")
    return value


def mime_type(path: str) -> str | None:
    """The MIME type a listing gives a file: its name's (`s3skills.media.type_by_name`; None
    when the name says nothing). A read says what the file is (`served`)."""
    return type_by_name(path)


def served(path: str, data: bytes) -> tuple[str, str | None]:
    """`(MIME type, text)` of a file read: the text when `s3skills.media.file_kind` says text
    (decided on these bytes, no other request), else None (send a blob).

    The text encodes back to exactly the same bytes (a BOM is kept), so a digest of the UTF-8
    encoding of the text equals the digest of the file.
    """
    kind = file_kind(path, data)
    return kind.mime, data.decode("utf-8") if kind.text else None


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the server knows about one version of a file: its digest and size.

    `frontmatter` is set for a `SKILL.md` (None when it does not parse; `problem` says why).
    """

    digest: str
    size: int
    frontmatter: dict[str, Any] | None = None
    problem: str | None = None

    @property
    def describes_skill_md(self) -> bool:
        """Whether it holds what a `SKILL.md` needs: its frontmatter, or why it has none."""
        return self.frontmatter is not None or self.problem is not None


class DigestCache:
    """Fingerprints by (file identity, ETag), least recently used first out.

    An ETag names one version of the bytes, so an entry never goes stale: a changed file
    has another ETag and misses.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], Fingerprint] = OrderedDict()

    def get(self, identity: str, etag: str) -> Fingerprint | None:
        """The fingerprint of that version, if known."""
        hit = self._entries.get((identity, etag))
        if hit is not None:
            self._entries.move_to_end((identity, etag))
        return hit

    def put(self, identity: str, etag: str, value: Fingerprint) -> None:
        """Remember the fingerprint of a version."""
        self._entries[(identity, etag)] = value
        self._entries.move_to_end((identity, etag))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
