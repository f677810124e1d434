"""The digest book: the SHA-256 of each file version of a library, kept in the bucket.

The MCP skills extension describes every file of a skill by its SHA-256, and S3 lists no
checksum values, so a digest otherwise costs one read of the file. Each library has a
digest book, one JSON object next to its manifest (`users/ana/.s3skills/digests.json`,
`KeyLayout.manifest_key` with `digests` for `manifest`), mapping each file (its key
relative to the library) to the version it describes: ETag, size, SHA-256, and for a
`SKILL.md` its frontmatter as JSON. A push records every file it writes
(`s3skills.transfer`); the MCP server records what it had to read itself. A server that
starts cold reads the book (1 GET, conditional once it holds a copy) and reads no file
whose listed ETag and size match a record.

The book is derived data, written with the same trust as the library: whoever can
write the files can write the book. It is never an authority on which files exist
(the listing is), and a record counts only for the exact version the listing names
(its ETag and size). A book that is missing, damaged, over its caps (`BOOK_DOCUMENT`:
bytes and values), nested past the recursion limit, of another schema, or holding a field
a book or a record has not (`RECORD_FIELDS`) or a value of the wrong type (refused before
anything is decoded: `s3skills.storage.documents`) is read as empty; records with a value
over its cap, or that do not parse, are dropped. Decoding runs in the decoder's bounded
pool (`s3skills.storage.decoder`), and the books held in memory are bounded in bytes
(`DigestBooks(max_bytes=...)`) as well as in number. A writer merges its records
into the version it read and writes with a condition (`if_match`, or create-only);
after a few conflicts it gives up, which only costs a later server some reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from s3skills.errors import Conflict, FileTooLarge, NotFound, S3SkillsError
from s3skills.ids import SKILL_FILE
from s3skills.layout import KeyLayout
from s3skills.skills.format.frontmatter import frontmatter_json
from s3skills.skills.format.model import MAX_FRONTMATTER_BYTES
from s3skills.skills.index.derived import weigh
from s3skills.storage import NotModified, ObjectStore
from s3skills.storage.decoder import default_decoder
from s3skills.storage.documents import ANY, INT, NODE_COST, STR, Closed, DocumentKind, MapOf, decode_document

__all__ = [
    "BOOK_DOCUMENT",
    "BOOK_SCHEMA",
    "MAX_BOOK_BYTES",
    "MAX_BOOK_NODES",
    "MAX_RECORDS",
    "RECORD_FIELDS",
    "DigestBooks",
    "Record",
    "book_key",
    "decode_book",
    "encode_book",
    "record_of",
]

logger = logging.getLogger(__name__)

BOOK_SCHEMA = "s3skills.digests/2"  # 2: frontmatter read as YAML 1.2 (1 held YAML 1.1 values)
"""The schema this code reads and writes; any other value reads as an empty book."""

MAX_BOOK_BYTES = 32 * 1024 * 1024
"""A larger book is not read (it is replaced by the next write)."""

MAX_RECORDS = 100_000
"""Records kept per book; past it the records not just written are dropped first."""

MAX_BOOK_NODES = 1_600_000
"""A book holding more JSON values is read as empty (see `BOOK_DOCUMENT`)."""

RECORD_FIELDS = frozenset({"etag", "size", "sha256", "frontmatter", "problem"})
"""The fields a record may have; a record with any other is dropped."""

_MAX_FRONTMATTER_WEIGHT = 96 * MAX_FRONTMATTER_BYTES  # anything a valid frontmatter makes fits
_MAX_DEPTH = 72
_MAX_ETAG_CHARS = 1024
_MAX_PROBLEM_CHARS = 4096
_MAX_KEY_CHARS = 1024  # an S3 key is at most 1,024 bytes

BOOK_DOCUMENT = DocumentKind(
    "digest book",
    Closed(
        {
            "schema": STR,
            "files": MapOf(
                Closed({"etag": STR, "size": INT, "sha256": STR, "frontmatter": ANY, "problem": STR}), MAX_RECORDS
            ),
        }
    ),
    max_bytes=MAX_BOOK_BYTES,
    max_nodes=MAX_BOOK_NODES,
    cached=False,  # `DigestBooks` keeps the records it makes of it
)
"""What a book may hold. On the real corpus (`python bench/document_sizes.py`) a book takes 1,143
bytes and 48 values a skill on average, at most 2,186 and 96: 10,000 skills of the heaviest kind
take 22 MB and 960,000 values, within `MAX_BOOK_BYTES` and `MAX_BOOK_NODES` (1.6x)."""

_WRITE_ATTEMPTS = 3
_HEX64 = re.compile(r"\A[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class Record:
    """What the server knows of one version of a file.

    Attributes:
        etag: The version (the ETag it was read with).
        size: Its size in bytes.
        sha256: The lowercase hex SHA-256 of its bytes.
        frontmatter: For a `SKILL.md`, its frontmatter as JSON (None: not a
            `SKILL.md`, or one whose frontmatter does not parse: see `problem`).
        problem: For a `SKILL.md`, why its frontmatter does not parse.
    """

    etag: str
    size: int
    sha256: str
    frontmatter: dict[str, Any] | None = None
    problem: str | None = None

    def matches(self, etag: str, size: int) -> bool:
        """Whether this record describes the listed version (ETag and size)."""
        return self.etag == etag and self.size == size


def record_of(path: str, data: bytes, etag: str) -> Record:
    """The record of bytes just written or read as version `etag` of the file at `path`."""
    sha = hashlib.sha256(data).hexdigest()
    if path.rpartition("/")[2] != SKILL_FILE:
        return Record(etag, len(data), sha)
    try:
        return Record(etag, len(data), sha, frontmatter=frontmatter_json(data))
    except (ValueError, UnicodeDecodeError) as exc:
        return Record(etag, len(data), sha, problem=str(exc))


def book_key(layout: KeyLayout, library_prefix: str) -> str:
    """The key of a library's digest book: its manifest's key with `digests` for `manifest`."""
    folder, _, name = layout.manifest_key(library_prefix).rpartition("/")
    return folder + "/" + "digests" + name.removeprefix("manifest")


def _record(item: object) -> tuple[Record, int] | None:
    """A record and its estimated weight, or None when it is forged, damaged or over a cap."""
    if not isinstance(item, dict) or not set(item) <= RECORD_FIELDS:
        return None
    etag, size, sha = item.get("etag"), item.get("size"), item.get("sha256")
    if not isinstance(etag, str) or not etag or len(etag) > _MAX_ETAG_CHARS:
        return None
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 2**63:
        return None
    if not isinstance(sha, str) or not _HEX64.match(sha):
        return None
    frontmatter, problem = item.get("frontmatter"), item.get("problem")
    if frontmatter is not None and not (
        isinstance(frontmatter, dict)
        and isinstance(frontmatter.get("name"), str)
        and isinstance(frontmatter.get("description"), str)
    ):
        return None
    if problem is not None and not (isinstance(problem, str) and len(problem) <= _MAX_PROBLEM_CHARS):
        return None
    weight = weigh(item, max_depth=_MAX_DEPTH, limit=_MAX_FRONTMATTER_WEIGHT)
    if weight is None:
        return None
    return Record(etag, size, sha, frontmatter, problem), weight


def decode_book(data: bytes) -> dict[str, Record]:
    """The records of a book object by key relative to its library (never raises).

    CPU work on untrusted bytes: run it in a thread (`DigestBooks` does).
    """
    return _decode(data)[0]


def _decode(data: bytes) -> tuple[dict[str, Record], int]:
    """The records of a book and their estimated weight in bytes."""
    try:
        doc = decode_document(data, BOOK_DOCUMENT)
    except ValueError:
        return {}, 0
    return _records_of(doc)


def _records_of(doc: Any) -> tuple[dict[str, Record], int]:
    """The records a decoded book holds and their estimated weight (nothing when it is not a book)."""
    if (
        not isinstance(doc, dict)
        or not set(doc) <= {"schema", "files"}
        or doc.get("schema") != BOOK_SCHEMA
        or not isinstance(doc.get("files"), dict)
    ):
        return {}, 0
    records: dict[str, Record] = {}
    total = 0
    for rel, item in doc["files"].items():
        if len(records) >= MAX_RECORDS:
            break
        found = _record(item)
        if isinstance(rel, str) and rel and len(rel) <= _MAX_KEY_CHARS and found is not None:
            records[rel] = found[0]
            total += found[1] + len(rel) + NODE_COST
    return records, total


def encode_book(records: Mapping[str, Record]) -> bytes:
    """The JSON bytes of a book (records sorted by key)."""
    files: dict[str, Any] = {}
    for rel, r in sorted(records.items()):
        item: dict[str, Any] = {"etag": r.etag, "size": r.size, "sha256": r.sha256}
        if r.frontmatter is not None:
            item["frontmatter"] = r.frontmatter
        if r.problem is not None:
            item["problem"] = r.problem
        files[rel] = item
    return json.dumps({"schema": BOOK_SCHEMA, "files": files}, ensure_ascii=False, separators=(",", ":")).encode()


def _weight(record: Record) -> int:
    """The estimated bytes a record holds (what `_decode` counts for it)."""
    base = NODE_COST * 4 + len(record.etag) + len(record.sha256) + len(record.problem or "")
    if record.frontmatter is None:
        return base
    return base + (weigh(record.frontmatter, max_depth=1 << 16, limit=1 << 40) or 0)


@dataclass(slots=True)
class _Copy:
    etag: str | None  # None: the book did not exist when read
    records: dict[str, Record]
    weight: int = 0  # estimated bytes the records hold


class DigestBooks:
    """Reads and writes the digest books of a store's libraries, holding recent copies by ETag.

    Args:
        store: The store holding the libraries.
        layout: Where each library's book lives (`book_key`).
        max_held: Books held in memory (least recently used out first): a server for
            many tenants keeps the books of the libraries it served last, not all of them.
        max_bytes: Estimated bytes of decoded records all held books may take (least
            recently used out first; the book just read always stays).
    """

    def __init__(
        self, store: ObjectStore, layout: KeyLayout, *, max_held: int = 64, max_bytes: int = 128 * 1024 * 1024
    ) -> None:
        self.store = store
        self.layout = layout
        self.max_held = max(1, max_held)
        self.max_bytes = max_bytes
        self._copies: OrderedDict[str, _Copy] = OrderedDict()

    @property
    def held(self) -> list[str]:
        """The libraries whose books are held in memory, least recently used first."""
        return list(self._copies)

    def _hold(self, library: str, copy: _Copy) -> _Copy:
        self._copies[library] = copy
        self._copies.move_to_end(library)
        total = self.held_bytes
        while len(self._copies) > 1 and (len(self._copies) > self.max_held or total > self.max_bytes):
            _, gone = self._copies.popitem(last=False)
            total -= gone.weight
        return copy

    @property
    def held_bytes(self) -> int:
        """Estimated bytes of the records of the books held in memory."""
        return sum(c.weight for c in self._copies.values())

    async def _read(self, library: str) -> _Copy:
        """The book as stored now (1 GET, conditional when a copy is held).

        Raises:
            ValueError: `library` has no book (not a library prefix of the layout).
        """
        key = book_key(self.layout, library)
        held = self._copies.get(library)
        try:
            body = await self.store.aget(
                key, max_bytes=MAX_BOOK_BYTES, if_none_match=held.etag if held is not None else None
            )
        except NotModified:
            assert held is not None
            return self._hold(library, held)
        except NotFound:
            copy = _Copy(None, {})
        except FileTooLarge:
            logger.warning("digest book %s is over %d bytes: read as empty", key, MAX_BOOK_BYTES)
            copy = _Copy(await self._etag_of(key), {})
        else:
            try:  # in the decoder's bounded pool, never on the event loop
                records, weight = await default_decoder().adecode(
                    BOOK_DOCUMENT, body.data, key=key, etag=body.etag, convert=_records_of
                )
            except ValueError:
                records, weight = {}, 0
            copy = _Copy(body.etag, dict(records), weight)
        return self._hold(library, copy)

    async def _etag_of(self, key: str) -> str | None:
        try:
            return (await self.store.ahead(key)).etag
        except NotFound:
            return None

    async def arecall(self, library: str) -> dict[str, Record]:
        """The records of a library's book by key relative to the library (1 GET).

        Raises:
            S3SkillsError: The store failed (the caller hashes the files instead).
        """
        try:
            return (await self._read(library)).records
        except ValueError:  # not a library prefix: no book
            return {}

    async def aremember(self, library: str, records: Mapping[str, Record]) -> bool:
        """Merge `records` into a library's book (a record replaces the one of its key).

        Returns whether the book holds them. A store failure or repeated conflicts leave
        the book as it was (logged): the records are only a saving. Records of deleted
        files stay until `MAX_RECORDS` pushes them out; they are never used, as no
        listing names their version.
        """
        if not records:
            return True
        try:
            book_key(self.layout, library)
        except ValueError:  # not a library prefix: no book
            return False
        for _ in range(_WRITE_ATTEMPTS):
            try:
                # The copy held (from the recall that came before) is tried first; a conflict re-reads.
                copy = self._copies.get(library) or await self._read(library)
                merged = dict(copy.records)
                merged.update(records)
                if merged == copy.records:
                    return True
                if len(merged) > MAX_RECORDS:
                    keep = [rel for rel in merged if rel not in records][: MAX_RECORDS - len(records)]
                    merged = {rel: merged[rel] for rel in [*keep, *records]}
                data = encode_book(merged)
                if len(data) > MAX_BOOK_BYTES:
                    logger.warning("digest book of %s would exceed %d bytes: not written", library, MAX_BOOK_BYTES)
                    return False
                key = book_key(self.layout, library)
                if copy.etag is None:
                    etag = await self.store.aput(key, data, if_none_match=True, content_type="application/json")
                else:
                    etag = await self.store.aput(key, data, if_match=copy.etag, content_type="application/json")
            except (Conflict, NotFound):  # changed, or deleted, since the copy was read
                self._copies.pop(library, None)
                continue
            except S3SkillsError as exc:
                logger.warning("digest book of %s not written: %s", library, exc)
                return False
            # Only the new records are weighed (no walk of the whole book on the event loop).
            weight = copy.weight + sum(_weight(r) + len(rel) + NODE_COST for rel, r in records.items())
            self._hold(library, _Copy(etag, merged, weight))
            return True
        logger.info("digest book of %s not written: it kept changing under us", library)
        return False
