"""Exact version records: one small object per new version of a skill, written by every writer.

History inferred from `ListObjectVersions` (`s3skills.skills.versions.history.history`) orders
writes by time, and S3 keeps seconds: two pushes of one skill in one second can merge into one
version. So every write through s3skills (push, rm, enable/disable, create, rollback) ends by
writing a record of the skill's new state with a conditional create (`IfNoneMatch="*"`) at a
key unique per version:

    {library parent}/.s3skills/records/{skill id}/{record id}.json

The record id is the UTC write time to the microsecond and 8 random hex digits
(`20261127T052300123456Z-1a2b3c4d`), so keys sort by time and two writers never share one.
The record holds the files' paths, VersionIds (`"null"` on an unversioned bucket) and ETags as
`ListObjectVersions` gave them just after the write, the content id (`version_id_of`), the time,
the actor and the command.

Records are input, not state: anyone who can write the library can write them. Each one is
decoded within a byte and value budget, any field a record has not refused before decoding
(`RECORD_DOCUMENT`, `s3skills.storage.documents`; once per ETag in the process, in the
decoder's bounded pool: `adecode_record`), schema-checked, and then checked against the listing of the objects it
names (`check_record`): a record naming a VersionId the folder does not hold, or holding it with
another ETag, or a path outside the skill, or a content id that is not its files', is ignored and
reported, never trusted. A lying record therefore cannot make history, diff, rollback or a
channel serve bytes that were never a real version of the skill's own files; it can at most
claim a wrong actor, time or command (the audit trail is as trustworthy as the library's
writers: see docs/THREAT_MODEL.md).

`recorded_history` merges records with inference: versions older than the first valid record
are inferred (marked `inferred`), as is a current state no record describes (a write made
outside s3skills).
"""

from __future__ import annotations

import asyncio
import getpass
import json
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from s3skills.errors import AccessDenied, Conflict, InvalidPath, NotFound, S3SkillsError, StoreError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.skills.versions.history import (
    FileVersion,
    SkillVersion,
    current_from_objects,
    current_version,
    history,
    version_id_of,
)
from s3skills.skills.versions.pinned import pinned_key
from s3skills.storage import ObjectStore, ObjectVersion
from s3skills.storage.decoder import default_decoder
from s3skills.storage.documents import (
    INT,
    NULL,
    STR,
    Closed,
    DocumentKind,
    Either,
    ListOf,
    decode_document,
    load_bounded,
)

__all__ = [
    "MAX_RECORDS_READ",
    "MAX_RECORD_BYTES",
    "RECORD_DOCUMENT",
    "RECORD_ID_RE",
    "RECORD_SCHEMA",
    "IgnoredRecord",
    "RecordFile",
    "VersionRecord",
    "acaller",
    "acurrent",
    "adecode_record",
    "aread_records",
    "awrite_records",
    "check_record",
    "default_actor",
    "load_bounded",
    "new_record_id",
    "record_key",
    "recorded_history",
]

logger = logging.getLogger(__name__)

RECORD_SCHEMA = "s3skills.version/1"
MAX_RECORD_BYTES = 512 * 1024
"""Largest record decoded (a skill of a few thousand files)."""
MAX_RECORD_FILES = 5_000
MAX_RECORDS_READ = 1_000
"""Newest records of one skill read for its history (older versions are then inferred)."""
MAX_TEXT = 512
RECORD_DOCUMENT = DocumentKind(
    "version record",
    Closed(
        {
            **dict.fromkeys(("schema", "id", "skill", "content", "time", "actor", "command"), STR),
            "files": ListOf(
                Closed({"path": STR, "version_id": Either((STR, NULL)), "etag": STR, "size": INT}), MAX_RECORD_FILES
            ),
        }
    ),
    max_bytes=MAX_RECORD_BYTES,
    max_nodes=20 * MAX_RECORD_FILES,
)
"""What a record may hold: a file is 9 values (`{ : , : , : , : ,`), 5,000 files 45,000; 20 a file."""
RECORD_ID_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{8}$")
_WHEN = "%Y%m%dT%H%M%S"


def new_record_id(now: datetime | None = None) -> str:
    """A record id: the UTC time to the microsecond and 8 random hex digits (sorts by time)."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{now.strftime(_WHEN)}{now.microsecond:06d}Z-{secrets.token_hex(4)}"


def _time_of(record_id: str) -> datetime:
    return datetime.strptime(record_id[:15], _WHEN).replace(microsecond=int(record_id[15:21]), tzinfo=UTC)


def default_actor() -> str:
    """The OS user (`os:NAME`), when nothing better is known of who writes."""
    try:
        return "os:" + getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "os:unknown"


async def acaller(store: ObjectStore) -> str | None:
    """The store's AWS caller identity ARN, where it can be had (`S3ObjectStore.acaller_arn`)."""
    ask = getattr(store, "acaller_arn", None)
    if ask is None:
        return None
    try:
        arn = await ask()
    except Exception:  # best effort
        return None
    return arn if isinstance(arn, str) and arn else None


@dataclass(frozen=True, slots=True)
class RecordFile:
    """One file a record names: its path in the skill folder, VersionId (None: unversioned), ETag, size."""

    path: str
    version_id: str | None
    etag: str
    size: int


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One recorded version of a skill (or its removal: no files).

    Attributes:
        id: The record id (`new_record_id`), also its key's name.
        skill_id: The skill.
        content: The content id of its files (`version_id_of`; "" when removed).
        files: The files.
        time: When it was written (from the id).
        actor: Who wrote it, as the writer said (not proven: see the module docstring).
        command: What wrote it (`push`, `rm`, `rollback`...).
    """

    id: str
    skill_id: str
    content: str
    files: tuple[RecordFile, ...]
    time: datetime
    actor: str
    command: str

    @property
    def removed(self) -> bool:
        """The skill was removed (no `SKILL.md`)."""
        return not any(f.path == SKILL_FILE for f in self.files)

    def to_json(self) -> dict[str, Any]:
        """The record's document."""
        return {
            "schema": RECORD_SCHEMA,
            "id": self.id,
            "skill": self.skill_id,
            "content": self.content,
            "time": self.time.isoformat(),
            "actor": self.actor,
            "command": self.command,
            "files": [{"path": f.path, "version_id": f.version_id, "etag": f.etag, "size": f.size} for f in self.files],
        }

    @classmethod
    def decode(cls, data: bytes, *, skill_id: str, record_id: str) -> VersionRecord | str:
        """The record in `data`, or the reason it is refused (never raises).

        The document must be this schema, name `skill_id` and `record_id` (those of its
        key), hold at most `MAX_RECORD_FILES` plain relative paths once each, and its
        content id must be that of its files.
        """
        try:
            doc = decode_document(data, RECORD_DOCUMENT)
        except ValueError as exc:
            return f"not a bounded JSON document ({exc})"
        return cls.of_document(doc, skill_id=skill_id, record_id=record_id)

    @classmethod
    def of_document(cls, doc: Any, *, skill_id: str, record_id: str) -> VersionRecord | str:
        """The record a decoded document holds, or why it is refused (see `decode`)."""
        if not isinstance(doc, dict) or doc.get("schema") != RECORD_SCHEMA:
            return "not a version record"
        if doc.get("skill") != skill_id or doc.get("id") != record_id:
            return "names another skill or id than its key"
        actor, command, content, files = doc.get("actor"), doc.get("command"), doc.get("content"), doc.get("files")
        if not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in (actor, command, content)):
            return "actor, command or content missing or too long"
        if not isinstance(files, list) or len(files) > MAX_RECORD_FILES:
            return "files missing or too many"
        out: list[RecordFile] = []
        for f in files:
            if not isinstance(f, dict):
                return "a file is not an object"
            path, vid, etag, size = f.get("path"), f.get("version_id"), f.get("etag"), f.get("size")
            if not isinstance(path, str) or not isinstance(etag, str) or len(etag) > MAX_TEXT:
                return "a file has no path or ETag"
            if vid is not None and (not isinstance(vid, str) or not vid or len(vid) > MAX_TEXT):
                return "a file's VersionId is malformed"
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                return "a file's size is malformed"
            try:
                pinned_key("x/", path)
            except InvalidPath:
                return f"the path {path[:80]!r} is not plainly inside the skill"
            out.append(RecordFile(path, vid, etag, size))
        if len({f.path for f in out}) != len(out):
            return "a path appears twice"
        if out and not any(f.path == SKILL_FILE for f in out):
            return f"it names files but no {SKILL_FILE}"
        if content != (version_id_of((f.path, f.etag) for f in out) if out else ""):
            return "its content id is not that of its files"
        assert isinstance(actor, str)
        assert isinstance(command, str)
        assert isinstance(content, str)
        return cls(record_id, skill_id, content, tuple(out), _time_of(record_id), actor, command)


async def adecode_record(
    data: bytes, *, key: str, etag: str | None, skill_id: str, record_id: str
) -> VersionRecord | str:
    """`VersionRecord.decode` in the decoder's bounded pool, once per (key, ETag) in the process."""

    def convert(doc: Any) -> VersionRecord | str:
        return VersionRecord.of_document(doc, skill_id=skill_id, record_id=record_id)

    try:
        return await default_decoder().adecode(
            RECORD_DOCUMENT, data, key=key, etag=etag, convert=convert, variant=(skill_id, record_id)
        )
    except ValueError as exc:
        return f"not a bounded JSON document ({exc})"


def record_key(records_prefix: str, skill_id: str, record_id: str) -> str:
    """The key of a record (the skill id is checked canonical)."""
    return f"{records_prefix}{SkillId.parse(skill_id)}/{record_id}.json"


def _owned(folder: str, keys: Iterable[str]) -> Callable[[str], bool]:
    """Whether a key is the skill's own (not in a skill nested in its folder)."""
    nested = tuple(
        k[: -len(SKILL_FILE)]
        for k in keys
        if k.startswith(folder) and k.endswith("/" + SKILL_FILE) and k != folder + SKILL_FILE
    )
    return lambda key: key.startswith(folder) and not key.startswith(nested)


async def acurrent(store: ObjectStore, folder: str, skill_id: str) -> tuple[SkillVersion, list[ObjectVersion] | None]:
    """The skill's current state: 1 ListObjectVersions (a plain LIST without the permission)."""
    try:
        listed = await store.alist_versions(folder)
    except (AccessDenied, StoreError):
        objects, _ = await store.alist(folder)
        return current_from_objects(skill_id, folder, objects, _owned(folder, [o.key for o in objects])), None
    live = [v.key for v in listed if v.is_latest and not v.is_delete_marker]
    return current_version(skill_id, folder, listed, _owned(folder, live)), listed


async def awrite_records(
    store: ObjectStore,
    library_prefix: str,
    records_prefix: str,
    skill_ids: Iterable[str],
    *,
    actor: str | None,
    command: str,
    concurrency: int = 8,
) -> list[VersionRecord]:
    """Record the current state of each skill, just written (1 ListObjectVersions + 1 PUT each).

    Each record is created with `IfNoneMatch="*"`; a taken key (another writer in the same
    microsecond with the same random digits) is retried under a new id. A failure is logged
    and never fails the write that called it.

    Returns:
        The records written.
    """
    who = (actor or await acaller(store) or default_actor())[:MAX_TEXT]
    what = command[:MAX_TEXT]
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(sid: str) -> VersionRecord | None:
        async with sem:
            folder = library_prefix + sid + "/"
            try:
                state, _ = await acurrent(store, folder, sid)
                files = tuple(RecordFile(f.path, f.version_id, f.etag, f.size) for f in state.files)
                content = state.id if any(f.path == SKILL_FILE for f in files) else ""
                if not content:
                    files = ()
                for _ in range(3):
                    rid = new_record_id()
                    record = VersionRecord(rid, sid, content, files, _time_of(rid), who, what)
                    body = _dump(record)
                    try:
                        await store.aput(
                            record_key(records_prefix, sid, rid),
                            body,
                            if_none_match=True,
                            content_type="application/json",
                        )
                    except Conflict:
                        continue
                    return record
            except (S3SkillsError, ValueError) as exc:
                logger.warning("could not write the version record of %s: %s", sid, exc)
            return None

    ids = sorted({str(SkillId.parse(s)) for s in skill_ids})
    done = await asyncio.gather(*(one(s) for s in ids))
    return [r for r in done if r is not None]


def _dump(record: VersionRecord) -> bytes:
    return json.dumps(record.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


async def aread_records(
    store: ObjectStore, records_prefix: str, skill_id: str, *, limit: int = MAX_RECORDS_READ, concurrency: int = 16
) -> tuple[list[VersionRecord], list[str]]:
    """The decodable records of a skill, oldest first, and what was refused (with the key's name).

    Costs 1 LIST per 1,000 records and 1 GET per record read (the newest `limit`).
    """
    prefix = f"{records_prefix}{SkillId.parse(skill_id)}/"
    try:
        objects, _ = await store.alist(prefix)
    except NotFound:
        return [], []
    problems: list[str] = []
    names: list[str] = []
    for obj in objects:
        name = obj.key[len(prefix) :]
        rid = name.removesuffix(".json")
        if not name.endswith(".json") or not RECORD_ID_RE.match(rid):
            problems.append(f"{name[:80]}: not a record's name")
        elif obj.size > MAX_RECORD_BYTES:
            problems.append(f"{name}: over {MAX_RECORD_BYTES} bytes")
        else:
            names.append(rid)
    names.sort()
    if len(names) > limit:
        problems.append(f"only the newest {limit} of {len(names)} records were read")
        names = names[-limit:]
    sem = asyncio.Semaphore(max(1, concurrency))

    async def read(rid: str) -> VersionRecord | str:
        async with sem:
            key = f"{prefix}{rid}.json"
            try:
                body = await store.aget(key, max_bytes=MAX_RECORD_BYTES)
            except S3SkillsError as exc:
                return f"unreadable ({type(exc).__name__})"
            return await adecode_record(body.data, key=key, etag=body.etag, skill_id=skill_id, record_id=rid)

    out: list[VersionRecord] = []
    for rid, got in zip(names, await asyncio.gather(*(read(r) for r in names)), strict=True):
        if isinstance(got, str):
            problems.append(f"{rid}: {got}")
        else:
            out.append(got)
    return out, problems


def check_record(
    record: VersionRecord, folder: str, listed: Sequence[ObjectVersion], owns: Callable[[str], bool]
) -> tuple[FileVersion, ...] | str:
    """The record's files as the listing of `folder` has them, or why the record is a lie.

    Each file's key is built from the skill's folder and its checked path; the listing must
    hold that key at that VersionId (not a delete marker) with that ETag, and the key must
    be the skill's own (not a nested skill's). A file without a VersionId must be the key's
    current version with that ETag.
    """
    by_version = {(v.key, v.version_id): v for v in listed if not v.is_delete_marker}
    latest = {v.key: v for v in listed if v.is_latest and not v.is_delete_marker}
    out: list[FileVersion] = []
    for f in record.files:
        try:
            key = pinned_key(folder, f.path)
        except InvalidPath:
            return f"{f.path[:80]!r} is not inside the skill"
        if not owns(key):
            return f"{f.path} belongs to a nested skill"
        v = by_version.get((key, f.version_id)) if f.version_id else latest.get(key)
        if v is None:
            return f"{f.path}: the bucket holds no such version ({f.version_id or 'current'})"
        if v.etag != f.etag:
            return f"{f.path}: the version {f.version_id or 'current'} has another ETag than the record says"
        out.append(FileVersion(f.path, v.etag, f.version_id, v.size, v.last_modified, key))
    return tuple(sorted(out, key=lambda x: x.path))


def _state(files: Iterable[FileVersion]) -> tuple[tuple[str, str, str | None], ...]:
    return tuple(sorted((f.path, f.etag, f.version_id) for f in files))


def _before(version: SkillVersion, first: VersionRecord, folder: str, listed: Sequence[ObjectVersion]) -> bool:
    """Whether an inferred version was written before the first valid record.

    Told by the order S3 keeps of the `SKILL.md` key's versions (exact, whatever the clocks),
    never by times: a state whose `SKILL.md` is that of the first record or later is a
    recorded version or a step inside one.
    """
    order = [v.version_id for v in listed if v.key == folder + SKILL_FILE]  # newest first
    mine = version.file(SKILL_FILE)
    theirs = next((f for f in first.files if f.path == SKILL_FILE), None)
    if mine is None or theirs is None or mine.version_id not in order or theirs.version_id not in order:
        return version.created is not None and version.created < first.time.replace(microsecond=0)
    return order.index(mine.version_id) > order.index(theirs.version_id)


@dataclass(frozen=True)
class IgnoredRecord:
    """A record that decoded but that history does not use: the bucket refutes it (`check_record`)."""

    record: str
    reason: str

    def __str__(self) -> str:
        return f"record {self.record} ignored: {self.reason}"


def recorded_history(
    skill_id: str,
    folder: str,
    listed: Sequence[ObjectVersion],
    owns: Callable[[str], bool],
    records: Sequence[VersionRecord],
    *,
    gap: float = 10.0,
) -> tuple[list[SkillVersion], list[IgnoredRecord]]:
    """The versions of a skill, newest first, from its records and (before them) inference.

    Args:
        skill_id: The skill.
        folder: Its folder's prefix.
        listed: A `ListObjectVersions` of the folder.
        owns: Whether a key is the skill's own (nested skills excluded).
        records: Its records (`aread_records`), any order.
        gap: See `history` (for the inferred part).

    Returns:
        The versions (`record` set for recorded ones, `inferred` for the others), and
        each record ignored with the reason.
    """
    problems: list[IgnoredRecord] = []
    recorded: list[SkillVersion] = []
    first: VersionRecord | None = None
    for r in sorted(records, key=lambda r: r.id):
        if r.removed:
            continue
        checked = check_record(r, folder, listed, owns)
        if isinstance(checked, str):
            problems.append(IgnoredRecord(r.id, checked))
            continue
        first = first or r
        if recorded and _state(recorded[-1].files) == _state(checked):
            continue
        recorded.append(
            SkillVersion(skill_id, r.content, checked, r.time, record=r.id, actor=r.actor, command=r.command)
        )
    inferred = [
        replace(v, inferred=True, latest=False) for v in reversed(history(skill_id, folder, listed, owns, gap=gap))
    ]
    older = inferred if first is None else [v for v in inferred if _before(v, first, folder, listed)]
    out = older + recorded
    live = [v.key for v in listed if v.is_latest and not v.is_delete_marker]
    current = current_version(skill_id, folder, listed, _owned(folder, live))
    if current.files and any(f.path == SKILL_FILE for f in current.files):
        if not out or _state(out[-1].files) != _state(current.files):
            out.append(replace(current, inferred=True, latest=False))
        out[-1] = replace(out[-1], latest=True)
    return list(reversed(out)), problems
