"""The manifest of a library: its index in one object, so indexing costs one request.

A manifest sits next to a library's `skills/` folder (`KeyLayout.manifest_key`:
`users/ana/.s3skills/manifest.json`), never inside it. It holds, for every
`SKILL.md` of the library, its key, ETag, size and parsed metadata (or the problem
found), plus a schema version, when it was built and when a full LIST last
confirmed it (`verified_at`).

It is derived data: a cache that may lie (whoever writes the library can write it).
A manifest that is missing, unreadable, of another schema, over its caps (`MANIFEST_DOCUMENT`:
bytes and values), nested past the recursion limit, holding a field a manifest or an entry
has not (`ENTRY_FIELDS`) or a value of the wrong type (refused before anything is decoded:
`s3skills.storage.documents`) or damaged means "rebuild from a LIST", never an error shown
to an agent. An entry is kept only if it describes a `SKILL.md` inside the manifest's own
library prefix with a well-formed id, each value within its cap, and valid metadata;
anything else is dropped (and the manifest is reconciled, which reads that `SKILL.md`
again). Decoding runs in the decoder's bounded pool (`s3skills.storage.decoder`), once per
(key, ETag) for concurrent readers.
Loading a skill always reads its real `SKILL.md`, so a forged entry cannot make a
skill's files readable (`SkillLibrary.aload`).

Writers update it with a conditional PUT (`if_match` on the ETag read,
`if_none_match` to create) and, on a conflict, re-read, merge and retry a bounded
number of times (`aupdate_manifest`). A writer that finds no manifest (or a damaged
one) builds it whole from a listing, so the first reader after any write pays one
request. A writer that gives up deletes the manifest, so the next reader rebuilds
it rather than trusting a stale one.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from s3skills.errors import Conflict, FileTooLarge, NotFound, S3SkillsError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.skills.format.model import MAX_FRONTMATTER_BYTES, SkillInfo, SkillMetadata
from s3skills.skills.index.derived import weigh
from s3skills.skills.ranking.sketch import MAX_SKETCH_CHARS
from s3skills.storage import NotModified, ObjectStore
from s3skills.storage import documents as shapes
from s3skills.storage.decoder import default_decoder

__all__ = [
    "ENTRY_FIELDS",
    "MANIFEST_DOCUMENT",
    "MANIFEST_SCHEMA",
    "MAX_ENTRY_WEIGHT",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_NODES",
    "Manifest",
    "SkillEntry",
    "aread_manifest",
    "aupdate_manifest",
    "awrite_manifest",
    "decode_manifest",
    "encode_manifest",
]

MANIFEST_SCHEMA = "s3skills.manifest/1"
"""The schema this code reads and writes; any other value means "rebuild"."""

MAX_MANIFEST_BYTES = 48 * 1024 * 1024
"""A larger manifest is not read (it is rebuilt from a LIST): see `MANIFEST_DOCUMENT` for the sizing."""

MAX_MANIFEST_NODES = 1_000_000
"""A manifest holding more JSON values is not decoded (it is rebuilt)."""

MAX_ENTRY_WEIGHT = 96 * MAX_FRONTMATTER_BYTES
"""Largest estimated decoded size of one entry: anything a valid frontmatter makes fits."""

MAX_ENTRY_DEPTH = 72
"""Deepest entry (a frontmatter nests at most 64 levels, below 3 of the entry's own)."""

MAX_MARKS = 32
"""Writers a manifest may record as writing at once (a manifest with more is rebuilt)."""
_MARK_ID_CHARS = 64
_MAX_ETAG_CHARS = 1024
_MAX_TEXT_CHARS = 4096  # a problem, or one warning
_MAX_WARNINGS = 256

_ENTRY_SHAPE = shapes.Closed(
    {
        "key": shapes.STR,
        "etag": shapes.STR,
        "size": shapes.INT,
        "metadata": shapes.ANY,
        "warnings": shapes.ListOf(shapes.STR, _MAX_WARNINGS),
        "problem": shapes.STR,
        "sketch": shapes.STR,
    }
)
ENTRY_FIELDS = frozenset(_ENTRY_SHAPE.fields)
"""The fields an entry may have; a manifest with an entry of any other is rebuilt."""
MANIFEST_DOCUMENT = shapes.DocumentKind(
    "manifest",
    shapes.Closed(
        {
            "schema": shapes.STR,
            "prefix": shapes.STR,
            "built_at": shapes.NUM,
            "verified_at": shapes.Either((shapes.NUM, shapes.NULL)),
            "skills": shapes.MapOf(_ENTRY_SHAPE, 1 << 20),
            "ends": shapes.ListOf(shapes.STR, 1 << 20),
            "writing": shapes.MapOf(shapes.NUM, MAX_MARKS),
        }
    ),
    max_bytes=MAX_MANIFEST_BYTES,
    max_nodes=MAX_MANIFEST_NODES,
    cached=False,  # the catalog keeps the index it makes of it
)
"""What a manifest may hold. Sized for 20,000 skills (`Limits.max_skills_per_library`, the most an
index keeps): on the real corpus (`python bench/document_sizes.py`) a manifest takes 1,514 bytes
and 26 values a skill on average, at most 1,710 and 33 (one repository's mean), so 20,000 take
34 MB and 665,000 values: the caps are 1.4x and 1.5x that."""

MAX_WRITE_ATTEMPTS = 10
"""Conditional PUTs a writer tries before it gives up (and deletes the manifest)."""

_CLOCK_SKEW = 60.0


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """One `SKILL.md` of a library: its parsed skill, or why it was skipped.

    The info's `sketch` is a bounded summary of the body (at most `MAX_SKETCH_CHARS`);
    `weight` estimates the bytes the entry holds in memory (for byte-bounded caches);
    `checked` is True when this process parsed it from the `SKILL.md` itself (False: it
    came from a manifest, a cache that may lie).
    """

    skill_id: str
    key: str
    etag: str
    size: int
    info: SkillInfo | None
    problem: str | None
    weight: int = field(default=0, compare=False)
    checked: bool = field(default=False, compare=False)


@dataclass
class Manifest:
    """A library's manifest as read (or about to be written).

    Attributes:
        prefix: The library prefix it describes.
        entries: Skill id -> entry (only entries inside `prefix`).
        built_at: Clock time it was written.
        verified_at: Clock time a full LIST last confirmed every entry (None: never).
        etag: The ETag of the object it was read from (None: not stored yet).
        dropped: Entries of the object that were ignored (forged, damaged, outside the prefix).
        valid: False for an object that exists but must be rebuilt (foreign schema,
            damaged, oversized): its ETag is kept so a rebuild can replace it.
        ends: Folders (relative to `prefix`, ending with `/`) holding a `SKILL.md` key that
            is no entry (deeper than an id, or a folder no id can name): each still ends the
            skill it is in.
        writing: Writers writing the library now, by mark id, with the (writer's clock) time
            each last renewed its mark: while one is live, the entries may lag the bucket and
            a reader indexes from a listing (see `s3skills.skills.index.marks`).
    """

    prefix: str
    entries: dict[str, SkillEntry] = field(default_factory=dict)
    built_at: float = 0.0
    verified_at: float | None = None
    etag: str | None = None
    dropped: int = 0
    valid: bool = True
    ends: frozenset[str] = frozenset()
    writing: dict[str, float] = field(default_factory=dict)

    def verified_within(self, now: float, interval: float) -> bool:
        """Whether a LIST confirmed it less than `interval` ago (a future time does not count)."""
        return self.verified_at is not None and now - interval < self.verified_at <= now + _CLOCK_SKEW


# -- encoding ---------------------------------------------------------------------------------


def encode_manifest(manifest: Manifest) -> bytes:
    """The JSON bytes of a manifest (entries sorted by id)."""
    skills: dict[str, Any] = {}
    for skill_id, entry in sorted(manifest.entries.items()):
        item: dict[str, Any] = {"key": entry.key, "etag": entry.etag, "size": entry.size}
        if entry.info is not None:
            item["metadata"] = entry.info.metadata.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            if entry.info.warnings:
                item["warnings"] = [w[:_MAX_TEXT_CHARS] for w in entry.info.warnings[:_MAX_WARNINGS]]
            if entry.info.sketch and len(entry.info.sketch) <= MAX_SKETCH_CHARS:
                item["sketch"] = entry.info.sketch
        else:
            item["problem"] = (entry.problem or "unknown problem")[:_MAX_TEXT_CHARS]
        skills[skill_id] = item
    doc: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "prefix": manifest.prefix,
        "built_at": manifest.built_at,
        "verified_at": manifest.verified_at,
        "skills": skills,
    }
    ends = sorted(f for f in manifest.ends if f[:-1] not in manifest.entries)
    if ends:
        doc["ends"] = ends
    if manifest.writing:
        doc["writing"] = dict(sorted(manifest.writing.items()))
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_manifest(data: bytes, prefix: str, source: str, *, max_entries: int) -> Manifest | None:
    """Parse a manifest object; None when it must be rebuilt (never raises).

    Bytes over the caps of `MANIFEST_DOCUMENT`, deeply nested or damaged, and a document
    with a field a manifest or an entry has not or a value of the wrong type, give None.
    Entries naming a key outside `prefix`, a malformed id, a value over its cap, or
    metadata the model refuses are dropped and counted in `Manifest.dropped`. CPU work:
    `aread_manifest` runs it in the decoder's pool.
    """
    try:
        doc = shapes.decode_document(data, MANIFEST_DOCUMENT)
    except ValueError:
        return None
    return _manifest_of(doc, prefix, source, max_entries=max_entries)


def _manifest_of(doc: Any, prefix: str, source: str, *, max_entries: int) -> Manifest | None:
    """The manifest a decoded document holds, checked as `decode_manifest` says; None: rebuild it."""
    if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA or doc.get("prefix") != prefix:
        return None
    skills = doc.get("skills")
    built_at, verified_at = doc.get("built_at"), doc.get("verified_at")
    if not isinstance(skills, dict) or not isinstance(built_at, int | float) or not _is_time(built_at):
        return None
    if verified_at is not None and not (isinstance(verified_at, int | float) and _is_time(verified_at)):
        return None
    manifest = Manifest(
        prefix, built_at=float(built_at), verified_at=None if verified_at is None else float(verified_at)
    )
    ends = doc.get("ends", [])
    if not isinstance(ends, list) or len(ends) > max_entries:
        return None
    manifest.ends = frozenset(f for f in ends if _text(f, 1024) and f.endswith("/") and not f.startswith("/"))
    writing = doc.get("writing", {})
    if not isinstance(writing, dict) or len(writing) > MAX_MARKS:
        return None
    if not all(_text(m, _MARK_ID_CHARS) and _is_time(t) for m, t in writing.items()):
        return None
    manifest.writing = {str(m): float(t) for m, t in writing.items()}
    for skill_id, item in skills.items():
        entry = _entry(prefix, source, skill_id, item) if len(manifest.entries) < max_entries else None
        if entry is None:
            manifest.dropped += 1
        else:
            manifest.entries[entry.skill_id] = entry
    return manifest


def _is_time(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _text(value: object, cap: int) -> bool:
    return isinstance(value, str) and len(value) <= cap


def _entry(prefix: str, source: str, skill_id: object, item: object) -> SkillEntry | None:
    """One entry, or None when it is forged, damaged or over a cap."""
    if not isinstance(skill_id, str) or not isinstance(item, dict) or not set(item) <= ENTRY_FIELDS:
        return None
    weight = weigh(item, max_depth=MAX_ENTRY_DEPTH, limit=MAX_ENTRY_WEIGHT)
    sketch = item.get("sketch")
    if weight is None or (sketch is not None and not _text(sketch, MAX_SKETCH_CHARS)):
        return None
    key = prefix + skill_id + "/" + SKILL_FILE
    if (
        item.get("key") != key
        or SkillId.from_key(key, prefix) is None
        or str(SkillId.from_key(key, prefix)) != skill_id
    ):
        return None
    etag, size = item.get("etag"), item.get("size")
    if not _text(etag, _MAX_ETAG_CHARS) or not etag or not isinstance(size, int) or isinstance(size, bool):
        return None
    if not 0 <= size < 2**63:
        return None
    problem = item.get("problem")
    if problem is not None:
        if not _text(problem, _MAX_TEXT_CHARS) or "metadata" in item or "warnings" in item:
            return None
        return SkillEntry(skill_id, key, etag, size, None, str(problem), weight)
    warnings = item.get("warnings", [])
    if not isinstance(warnings, list) or len(warnings) > _MAX_WARNINGS:
        return None
    if not all(_text(w, _MAX_TEXT_CHARS) for w in warnings):
        return None
    try:
        metadata = SkillMetadata.model_validate(item.get("metadata"))
    except (ValidationError, RecursionError):
        return None
    info = SkillInfo(
        id=skill_id, metadata=metadata, source=source, etag=etag, warnings=tuple(warnings), sketch=sketch or ""
    )
    return SkillEntry(skill_id, key, etag, size, info, None, weight)


# -- reading and writing -----------------------------------------------------------------------


async def aread_manifest(
    store: ObjectStore,
    key: str,
    prefix: str,
    source: str,
    *,
    etag: str | None = None,
    max_entries: int = 20_000,
) -> Manifest | None:
    """Read a manifest with a conditional GET (1 request).

    Args:
        store: The bucket.
        key: The manifest's key.
        prefix: The library it must describe.
        source: Recorded on each `SkillInfo` (`user` or `shared`).
        etag: The ETag already held: an unchanged manifest raises `NotModified`.
        max_entries: Entries past this are dropped.

    Returns:
        The manifest; None when it is missing or unreadable; one with `valid=False`
        when it exists but must be rebuilt.

    Raises:
        NotModified: `etag` is still current.
    """
    try:
        body = await store.aget(key, max_bytes=MAX_MANIFEST_BYTES, if_none_match=etag)
    except NotModified:
        raise
    except FileTooLarge:
        try:
            return Manifest(prefix, etag=(await store.ahead(key)).etag, valid=False)
        except S3SkillsError:
            return None
    except S3SkillsError:
        return None  # missing or unreadable: derived data, rebuilt by the caller

    def convert(doc: Any) -> Manifest:
        manifest = _manifest_of(doc, prefix, source, max_entries=max_entries)
        if manifest is None:
            raise ValueError("not a manifest of this library")
        return manifest

    try:
        shared = await default_decoder().adecode(
            MANIFEST_DOCUMENT,
            body.data,
            key=key,
            etag=body.etag,
            convert=convert,
            variant=(prefix, source, max_entries),
        )
    except ValueError:
        return Manifest(prefix, etag=body.etag, valid=False)
    # The readers that shared the decode share its result: each gets a manifest of its own.
    return replace(shared, entries=dict(shared.entries), writing=dict(shared.writing), etag=body.etag)


async def awrite_manifest(store: ObjectStore, key: str, manifest: Manifest) -> str:
    """Store a manifest with a conditional PUT: `if_match` its ETag, or create only.

    Returns:
        The new ETag (also set on `manifest.etag`).

    Raises:
        Conflict: Another writer changed (or created) it first.
    """
    data = await asyncio.to_thread(encode_manifest, manifest)
    try:
        if manifest.etag is None:
            etag = await store.aput(key, data, if_none_match=True, content_type="application/json")
        else:
            etag = await store.aput(key, data, if_match=manifest.etag, content_type="application/json")
    except NotFound as exc:  # deleted since it was read
        raise Conflict("put: the manifest was removed meanwhile") from exc
    manifest.etag = etag
    return etag


EntryReader = Callable[[list[str]], Awaitable[dict[str, SkillEntry | None]]]
"""Reads the current entries of skill ids (None: its SKILL.md is gone)."""

LibraryBuilder = Callable[[], Awaitable[dict[str, SkillEntry]]]
"""Reads the entries of every skill of a library, from a listing of it (a whole build)."""


async def aupdate_manifest(
    store: ObjectStore,
    key: str,
    prefix: str,
    skill_ids: Iterable[str],
    read_entries: EntryReader,
    *,
    source: str = "user",
    max_entries: int = 20_000,
    attempts: int = MAX_WRITE_ATTEMPTS,
    clock: Callable[[], float] = time.time,
    build: LibraryBuilder | None = None,
    clear_mark: str | None = None,
) -> bool:
    """Record the current state of some skills in the library's manifest (a writer's update).

    With `clear_mark`, the writer's mark (`s3skills.skills.index.marks`) leaves the manifest
    in the same conditional write: the manifest is then again what the bucket holds.

    A missing (or damaged) manifest is created whole with `build` (a listing of the
    library: `verified_at` is then now), with `if_none_match` (or `if_match` on the
    damaged object), so the next reader's index is one GET; without `build` it is
    left for the next reader to rebuild. On a conflict the manifest is re-read and
    the entries merged again; skills whose entry another writer changed meanwhile are
    read again. After `attempts` conflicts the manifest is deleted.

    Returns:
        True when the manifest now records the skills (or there is none to update).
    """
    wanted = sorted(set(skill_ids))
    if not wanted and clear_mark is None:
        return True
    try:
        current: dict[str, SkillEntry | None] | None = None
        built: tuple[float, dict[str, SkillEntry]] | None = None
        for attempt in range(attempts):
            manifest = await aread_manifest(store, key, prefix, source, max_entries=max_entries)
            if manifest is None or not manifest.valid:
                if build is None:
                    return True
                built = built or (clock(), await build())  # one listing, whatever the retries
                if await _acreate(store, key, prefix, manifest, *built):
                    return True
                await asyncio.sleep(random.uniform(0.005, 0.05) * (attempt + 1))  # noqa: S311 - jitter
                continue
            if current is None:
                current = await read_entries(wanted)
            stale = [sid for sid in wanted if _differs(manifest.entries.get(sid), current[sid], since=attempt > 0)]
            if stale:
                current.update(await read_entries(stale))
            marked = clear_mark is not None and clear_mark in manifest.writing
            if not marked and all(_same(manifest.entries.get(sid), current[sid]) for sid in wanted):
                return True
            if clear_mark is not None:
                manifest.writing.pop(clear_mark, None)
            for sid in wanted:
                entry = current[sid]
                if entry is None:
                    manifest.entries.pop(sid, None)
                else:
                    manifest.entries[sid] = entry
            manifest.built_at = clock()
            try:
                await awrite_manifest(store, key, manifest)
                return True
            except Conflict:
                await asyncio.sleep(random.uniform(0.005, 0.05) * (attempt + 1))  # noqa: S311 - jitter
        await store.adelete_many([key])
    except S3SkillsError:
        # The skills were written; the manifest is derived. Drop it so no reader trusts it.
        try:
            await store.adelete_many([key])
        except S3SkillsError:
            return False
    return False


async def _acreate(
    store: ObjectStore, key: str, prefix: str, found: Manifest | None, now: float, entries: dict[str, SkillEntry]
) -> bool:
    """Write a whole manifest where none (or a damaged one) is; False: another writer was first."""
    manifest = Manifest(prefix, dict(entries), built_at=now, verified_at=now, etag=found.etag if found else None)
    try:
        await awrite_manifest(store, key, manifest)
    except Conflict:
        return False
    return True


def _same(a: SkillEntry | None, b: SkillEntry | None) -> bool:
    return a == b  # the whole entry: a forged description or `enabled` with a true ETag is not "the same"


def _differs(in_manifest: SkillEntry | None, ours: SkillEntry | None, *, since: bool) -> bool:
    """After a conflict: another writer recorded this skill differently, so read it again."""
    return since and in_manifest is not None and not _same(in_manifest, ours)
