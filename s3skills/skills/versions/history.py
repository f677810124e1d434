"""Skill versions: what a version of a skill is, its history, pinned reads, rollback and diff.

A skill's version is the set of its files' object versions. It is summarised as one
short id, the first 12 hex digits of a SHA-256 over the sorted `(path, ETag)` pairs
of its files (`version_id_of`): the id depends only on the content, so it can be
computed from any listing at no extra request, it is the same on a versioned and an
unversioned bucket, and a rollback brings the old id back.

Each file of a version listed by `ListObjectVersions` also has an S3 `VersionId`; a
thread that loaded the skill reads exactly those (`read_pinned`: 1 GET with
`VersionId`). `"null"` is a real VersionId: it names the object written while the
bucket's versioning was off (every bucket that had skills before `versioning enable`
starts so). It stays readable once versioning is on, but a write while versioning is
off or suspended replaces it in place; so a read of a `"null"` version checks the
ETag it was pinned with, and a replaced one raises `SkillChanged` (the agent is told
to reload), never serves other bytes. A plain listing has no VersionIds: such pins
are checked by ETag on the current object the same way.

`history` rebuilds the versions of a skill from `ListObjectVersions`: writes are
replayed in time order and a version ends at each `SKILL.md` write (a push writes it
last) or after a pause of `gap` seconds between writes. S3 reports write times to the
second, so writes of one second are ordered by their rank among their key's versions:
two pushes within one second that add different files can be told apart wrongly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from s3skills.errors import Conflict, NotFound, SkillError
from s3skills.ids import SKILL_FILE
from s3skills.storage import ObjectBody, ObjectInfo, ObjectStore, ObjectVersion
from s3skills.tenancy import PinnedFile, SkillPin

__all__ = [
    "NULL_VERSION",
    "VERSION_ID_CHARS",
    "FileVersion",
    "SkillChanged",
    "SkillVersion",
    "current_from_objects",
    "current_version",
    "find_version",
    "history",
    "read_pinned",
    "read_version",
    "restore",
    "version_from_listing",
    "version_id_of",
    "versions_by_skill",
]

VERSION_ID_CHARS = 12
"""Length of a short version id (hex digits of a SHA-256)."""

_EPOCH = datetime.min.replace(tzinfo=UTC)


class SkillChanged(SkillError):
    """A loaded skill changed in the store and the old version cannot be read (no versioning)."""


def version_id_of(files: Iterable[tuple[str, str]]) -> str:
    """The short id of a skill version from its `(path, etag)` pairs (order does not matter)."""
    digest = hashlib.sha256()
    for path, etag in sorted(files):
        digest.update(f"{path}\0{etag}\n".encode())
    return digest.hexdigest()[:VERSION_ID_CHARS]


@dataclass(frozen=True, slots=True)
class FileVersion:
    """One file of a skill version.

    Attributes:
        path: Relative to the skill folder (`SKILL.md`, `references/a.md`).
        etag: Its ETag.
        version_id: Its S3 VersionId, `"null"` included (written while versioning was
            off: readable by that id until a write with versioning off replaces it,
            which the ETag tells); None when it came from a plain listing.
        size: Bytes.
        last_modified: When it was written.
        key: The object key (opaque: for reads, never to show).
    """

    path: str
    etag: str
    version_id: str | None
    size: int
    last_modified: datetime | None
    key: str


@dataclass(frozen=True, slots=True)
class SkillVersion:
    """One version of a skill: its files, summarised by `id`.

    Attributes:
        skill_id: The skill.
        id: The short version id (`version_id_of`).
        files: Its files, by path.
        created: When it came to be (the last write that made it).
        latest: Whether it is the skill's current state.
        record: The id of the version record that describes it
            (`s3skills.skills.versions.records`); None when inferred or current.
        inferred: Rebuilt from write times (before records existed, or a write made
            outside s3skills), not from a record.
        actor: Who the record says wrote it.
        command: What the record says wrote it.
    """

    skill_id: str
    id: str
    files: tuple[FileVersion, ...]
    created: datetime | None
    latest: bool = False
    record: str | None = None
    inferred: bool = False
    actor: str | None = None
    command: str | None = None

    @property
    def size(self) -> int:
        """Bytes of all its files."""
        return sum(f.size for f in self.files)

    @property
    def versioned(self) -> bool:
        """Every file can be asked for by VersionId (a `"null"` one is then checked by ETag)."""
        return bool(self.files) and all(f.version_id for f in self.files)

    def file(self, path: str) -> FileVersion | None:
        """The file at `path`, if the version has it."""
        return next((f for f in self.files if f.path == path), None)

    def pin(self) -> SkillPin:
        """The pin a thread records when it loads this version."""
        return SkillPin(self.id, {f.path: PinnedFile(f.etag, f.version_id) for f in self.files})


NULL_VERSION = "null"
"""S3's VersionId of an object written while the bucket's versioning was off."""


def _version_id(v: ObjectVersion) -> str | None:
    return v.version_id or None


def version_from_listing(skill_id: str, prefix: str, objects: Iterable[ObjectInfo], owns: Callable[[str], bool]) -> str:
    """The version id of a skill from a plain listing (`ListObjectsV2`: no extra request)."""
    return version_id_of((o.key[len(prefix) :], o.etag) for o in objects if owns(o.key) and not o.key.endswith("/"))


def versions_by_skill(prefix: str, objects: Iterable[ObjectInfo], skill_ids: Iterable[str]) -> dict[str, str]:
    """The version id of every skill of a library, from one listing of the library.

    Each object belongs to the deepest skill folder holding it (a nested skill's files
    are its own), as `SkillLibrary` decides.
    """
    known = set(skill_ids)
    files: dict[str, list[tuple[str, str]]] = {sid: [] for sid in known}
    for obj in objects:
        rel = obj.key[len(prefix) :]
        if not obj.key.startswith(prefix) or rel.endswith("/"):
            continue
        parts = rel.split("/")
        owner = next(
            (sid for n in (2, 1) if len(parts) > n and (sid := "/".join(parts[:n])) in known),
            None,
        )
        if owner is not None:
            files[owner].append((rel[len(owner) + 1 :], obj.etag))
    return {sid: version_id_of(pairs) for sid, pairs in files.items()}


def current_version(
    skill_id: str, prefix: str, versions: Iterable[ObjectVersion], owns: Callable[[str], bool]
) -> SkillVersion:
    """The skill's current version from a `ListObjectVersions` of its folder."""
    files = tuple(
        FileVersion(v.key[len(prefix) :], v.etag, _version_id(v), v.size, v.last_modified, v.key)
        for v in versions
        if v.is_latest and not v.is_delete_marker and owns(v.key) and not v.key.endswith("/")
    )
    created = max((f.last_modified or _EPOCH for f in files), default=None)
    return SkillVersion(skill_id, version_id_of((f.path, f.etag) for f in files), files, created, latest=True)


def current_from_objects(
    skill_id: str, prefix: str, objects: Iterable[ObjectInfo], owns: Callable[[str], bool]
) -> SkillVersion:
    """The current version from a plain listing (no VersionIds: reads are checked by ETag)."""
    files = tuple(
        FileVersion(o.key[len(prefix) :], o.etag, None, o.size, o.last_modified, o.key)
        for o in objects
        if owns(o.key) and not o.key.endswith("/")
    )
    created = max((f.last_modified or _EPOCH for f in files), default=None)
    return SkillVersion(skill_id, version_id_of((f.path, f.etag) for f in files), files, created, latest=True)


def history(
    skill_id: str,
    prefix: str,
    versions: Iterable[ObjectVersion],
    owns: Callable[[str], bool],
    *,
    gap: float = 10.0,
) -> list[SkillVersion]:
    """The versions of a skill, newest first, from a `ListObjectVersions` of its folder.

    Writes are replayed oldest first; a version ends at each `SKILL.md` write and
    after a pause longer than `gap` seconds. States without a `SKILL.md` (the skill
    did not exist) are left out, and consecutive identical states are shown once.
    """
    mine = [v for v in versions if owns(v.key) and not v.key.endswith("/")]
    # Within a key the listing is newest first: number each key's versions oldest first,
    # so writes of one instant (S3 keeps seconds) still replay in a sensible order.
    ordinal: dict[str, int] = {}
    counts: dict[str, int] = {}
    for v in mine:
        counts[v.key] = counts.get(v.key, 0) + 1
    events: list[tuple[datetime, int, bool, ObjectVersion]] = []
    for v in mine:
        ordinal[v.key] = ordinal.get(v.key, 0) + 1
        events.append((v.last_modified or _EPOCH, counts[v.key] - ordinal[v.key], v.key == prefix + SKILL_FILE, v))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    state: dict[str, FileVersion] = {}
    out: list[SkillVersion] = []
    skill_md = prefix + SKILL_FILE

    def close(at: datetime) -> None:
        if skill_md not in {f.key for f in state.values()}:
            return
        files = tuple(sorted(state.values(), key=lambda f: f.path))
        vid = version_id_of((f.path, f.etag) for f in files)
        if out and out[-1].id == vid and [f.version_id for f in out[-1].files] == [f.version_id for f in files]:
            return
        out.append(SkillVersion(skill_id, vid, files, at))

    for i, (when, _, _, v) in enumerate(events):
        path = v.key[len(prefix) :]
        if v.is_delete_marker:
            state.pop(path, None)
        else:
            state[path] = FileVersion(path, v.etag, _version_id(v), v.size, v.last_modified, v.key)
        nxt = events[i + 1][0] if i + 1 < len(events) else None
        if v.key == skill_md or nxt is None or (nxt - when).total_seconds() > gap:
            close(when)
    if out:
        last = out[-1]
        out[-1] = SkillVersion(last.skill_id, last.id, last.files, last.created, latest=True)
    return list(reversed(out))


def find_version(versions: Sequence[SkillVersion], wanted: str) -> SkillVersion:
    """The newest version whose id (or record id) is `wanted` or starts with it (at least 4 characters).

    Raises:
        SkillError: No such version, or the prefix names several.
    """
    wanted = wanted.strip().lower()
    if len(wanted) < 4:
        raise SkillError(f"'{wanted}' is too short for a version id: give at least 4 characters")
    hits = [v for v in versions if v.id.startswith(wanted)]
    if not hits:
        hits = [v for v in versions if v.record is not None and v.record.lower().startswith(wanted)]
    if len({v.id for v in hits}) > 1:
        raise SkillError(f"'{wanted}' names several versions: {', '.join(sorted({v.id for v in hits}))}")
    if not hits:
        known = ", ".join(dict.fromkeys(v.id for v in versions)) or "none"
        raise SkillError(f"No version '{wanted}' of this skill (its versions: {known})")
    return hits[0]


async def read_pinned(
    store: ObjectStore, key: str, path: str, pin: SkillPin | None, *, max_bytes: int | None = None
) -> ObjectBody:
    """Read one file of a skill as the thread loaded it (1 GET, whatever happens).

    A file pinned with a VersionId is read by it; a `"null"` one (or one pinned
    without a VersionId) must still have the ETag it was loaded with.

    Args:
        store: The store.
        key: The file's key.
        path: Its path relative to the skill folder (the pin's key).
        pin: The version the thread loaded; None reads the current object.
        max_bytes: Largest object read.

    Raises:
        NotFound: The file was not part of the pinned version.
        SkillChanged: The file changed or disappeared since the load, and the bucket
            keeps no old versions.
    """
    if pin is None:
        return await store.aget(key, max_bytes=max_bytes)
    pinned = pin.files.get(path)
    versioned = pin.versioned
    if pinned is not None and pinned.version_id and pinned.version_id != NULL_VERSION:
        return await store.aget(key, max_bytes=max_bytes, version_id=pinned.version_id)
    by_id = pinned.version_id if pinned is not None else None
    try:
        body = await store.aget(key, max_bytes=max_bytes, version_id=by_id)
    except NotFound:
        if pinned is None:
            raise
        raise SkillChanged(_changed(path, "was deleted" if by_id is None else "was replaced")) from None
    if pinned is None:
        if versioned:
            raise NotFound(path)  # added after the version the thread reads
        raise SkillChanged(_changed(path, "was added"))
    if body.etag != pinned.etag:
        raise SkillChanged(_changed(path, "changed"))
    return body


def _changed(path: str, what: str) -> str:
    return (
        f"The skill changed since it was loaded ({path} {what}), and the bucket no longer keeps "
        "the version loaded: reload it with cargar_habilidad to read the new version, then follow "
        "its new instructions."
    )


async def restore(store: ObjectStore, target: SkillVersion, current: SkillVersion) -> list[str]:
    """Make `target`'s content the newest version of each file (rollback), conditionally.

    Files the target lacks are deleted first, each with a delete conditioned on its
    current ETag (`If-Match`: a delete marker, history keeps them). Each file that
    differs (another ETag, or another VersionId: one ETag can be two contents, since a
    single-part upload's ETag is its MD5) is then copied from its old version (GET by VersionId) as a new version with
    a PUT conditioned on the current ETag (`IfMatch`, or `IfNoneMatch` when absent).
    So a push in between is reported rather than overwritten or deleted. `SKILL.md` goes
    last, as with a push. Later versions stay in the history.

    Returns:
        The paths written or deleted.

    Raises:
        SkillError: The target's files were not listed with VersionIds (a plain listing),
            or a `"null"` version of one was since replaced in place.
        Conflict: A file changed since `current` was listed; nothing after it is written.
    """
    if not target.versioned:
        raise SkillError(
            f"Version {target.id} cannot be restored: its files were listed without VersionIds "
            "(list them with ListObjectVersions)."
        )
    now = {f.path: f for f in current.files}
    changed = [
        f for f in target.files if (c := now.get(f.path)) is None or c.etag != f.etag or c.version_id != f.version_id
    ]
    gone = [f for f in current.files if target.file(f.path) is None]
    done: list[str] = []
    bodies = {f.path: await read_version(store, f) for f in changed}  # all readable before any write
    for f in gone:  # first: the SKILL.md write that ends the rollback must see the target's files only
        try:
            await store.adelete(f.key, if_match=f.etag)
        except (Conflict, NotFound) as exc:
            raise Conflict(f"{f.path} changed while the rollback ran; run it again") from exc
        done.append(f.path)
    for f in sorted(changed, key=lambda f: f.path == SKILL_FILE):
        body = bodies[f.path]
        was = now.get(f.path)
        try:
            if was is None:
                await store.aput(f.key, body.data, if_none_match=True, content_type=body.content_type)
            else:
                await store.aput(f.key, body.data, if_match=was.etag, content_type=body.content_type)
        except (Conflict, NotFound) as exc:
            raise Conflict(f"{f.path} changed while the rollback ran; run it again") from exc
        done.append(f.path)
    return done


async def read_version(store: ObjectStore, file: FileVersion, *, max_bytes: int | None = None) -> ObjectBody:
    """The bytes of one file version (1 GET by its VersionId; the current object without one).

    Raises:
        SkillError: The version is gone: a `"null"` version replaced in place by a write
            while versioning was off or suspended (its ETag differs), or deleted.
    """
    try:
        body = await store.aget(file.key, max_bytes=max_bytes, version_id=file.version_id)
    except NotFound:
        raise SkillError(f"{file.path}: the version listed ({file.version_id or 'current'}) no longer exists") from None
    if body.etag != file.etag:
        raise SkillError(
            f"{file.path}: the version listed ({file.version_id or 'current'}) was replaced in place "
            "(written while versioning was off or suspended); its old bytes are gone"
        )
    return body
