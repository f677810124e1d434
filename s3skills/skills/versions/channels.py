"""Channels: a named map of a library's skills to one version each (staged rollout).

A channel is one object beside the library (`KeyLayout.channels_prefix`, `{name}.json`):

    {"schema": "s3skills.channel/1", "name": "production",
     "skills": {"pdf": {"version": "<content id>", "record": "<record id or null>",
                        "files": {"SKILL.md": {"version_id": "...", "etag": "...", "size": 120}}}}}

`latest` is built in (the libraries as they are now) and is never stored. A channel changes
only with a conditional PUT (`If-Match` on the ETag read, `IfNoneMatch="*"` to create), so two
concurrent changes never lose one. A channel is input like every `.s3skills/` object: it is
decoded within a budget and schema-checked (`Channel.decode`, `CHANNEL_DOCUMENT`: a field a channel
has not is refused before anything is decoded; reads share one decode per ETag through
`s3skills.storage.decoder`), and what it names is served only
through pinned reads, which check every file's ETag against what the store returns
(`s3skills.skills.versions.pinned.read_verified`): a channel that lies serves nothing that was
never a version of that skill's own files.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from s3skills.errors import Conflict, FileTooLarge, InvalidPath, NotFound, SkillError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import check_identity
from s3skills.skills.versions.history import SkillVersion, current_version, version_id_of
from s3skills.skills.versions.pinned import pinned_key
from s3skills.skills.versions.records import MAX_TEXT, RECORD_ID_RE
from s3skills.storage import ObjectStore, ObjectVersion
from s3skills.storage.decoder import default_decoder
from s3skills.storage.documents import INT, NULL, STR, Closed, DocumentKind, Either, MapOf, decode_document
from s3skills.tenancy import PinnedFile, SkillPin

__all__ = [
    "CHANNEL_DOCUMENT",
    "CHANNEL_SCHEMA",
    "LATEST",
    "MAX_CHANNEL_BYTES",
    "MAX_CHANNEL_NODES",
    "MAX_CHANNEL_SKILLS",
    "Channel",
    "ChannelSkill",
    "acurrent_skills",
    "adecode_channel",
    "aread_channel",
    "awrite_channel",
    "channel_key",
    "check_channel_name",
]

CHANNEL_SCHEMA = "s3skills.channel/1"
LATEST = "latest"
MAX_CHANNEL_BYTES = 16 * 1024 * 1024
"""Largest channel read. Measured on the real corpus (`python bench/document_sizes.py`): a channel
takes 590 bytes a skill on average, 1,221 in the repository of the most files a skill; 10,000
such skills take 12.2 MB (20,000 average ones 11.8 MB): 1.3x that."""

MAX_CHANNEL_NODES = 1_200_000
"""Most JSON values (`{ [ , :`) a channel may hold: 41.5 a skill on average, 83 at most in the
corpus, so 10,000 skills of the heaviest kind hold 830,000: 1.45x that."""

MAX_CHANNEL_SKILLS = 20_000
"""Most skills a channel names (20,000 skills of one file each take 4.6 MB)."""

_PIN = Closed({"version_id": Either((STR, NULL)), "etag": STR, "size": INT})
_ENTRY = Closed({"version": STR, "record": Either((STR, NULL)), "files": MapOf(_PIN, 256)})
CHANNEL_DOCUMENT = DocumentKind(
    "channel",
    Closed(
        {
            "schema": STR,
            "name": STR,
            "updated": Either((STR, NULL)),
            "actor": Either((STR, NULL)),
            "skills": MapOf(_ENTRY, MAX_CHANNEL_SKILLS),
        }
    ),
    max_bytes=MAX_CHANNEL_BYTES,
    max_nodes=MAX_CHANNEL_NODES,
)
"""What a channel may hold (any other field, at any level, is refused before decoding)."""


def check_channel_name(name: str) -> str:
    """A channel name (an identity part: letters, digits, `. _ @ + : ~ -`).

    Raises:
        InvalidPath: Not a safe name.
    """
    return check_identity(name, "channel name")


def channel_key(channels_prefix: str, name: str) -> str:
    """The key of a channel (`latest` has none)."""
    if check_channel_name(name) == LATEST:
        raise SkillError("'latest' is built in: it is the libraries as they are now, and cannot be stored")
    return f"{channels_prefix}{name}.json"


@dataclass(frozen=True, slots=True)
class ChannelSkill:
    """The version a channel serves of one skill: its content id, record id and files' pins."""

    version: str
    record: str | None
    files: Mapping[str, PinnedFile]
    sizes: Mapping[str, int] = field(default_factory=dict)

    def pin(self) -> SkillPin:
        """The pin reads of this skill use (as a thread's own pin does)."""
        return SkillPin(self.version, dict(self.files))

    @classmethod
    def of(cls, version: SkillVersion) -> ChannelSkill:
        """The channel entry of a version (from history or the current listing)."""
        return cls(
            version.id,
            version.record,
            {f.path: PinnedFile(f.etag, f.version_id) for f in version.files},
            {f.path: f.size for f in version.files},
        )


@dataclass
class Channel:
    """A channel's skills, with the ETag it was read at (None: not stored yet)."""

    name: str
    skills: dict[str, ChannelSkill] = field(default_factory=dict)
    etag: str | None = None
    updated: str | None = None
    actor: str | None = None

    def to_bytes(self) -> bytes:
        """The channel's document."""
        doc: dict[str, Any] = {
            "schema": CHANNEL_SCHEMA,
            "name": self.name,
            "updated": self.updated,
            "actor": self.actor,
            "skills": {
                sid: {
                    "version": s.version,
                    "record": s.record,
                    "files": {
                        p: {"version_id": f.version_id, "etag": f.etag, "size": s.sizes.get(p, 0)}
                        for p, f in sorted(s.files.items())
                    },
                }
                for sid, s in sorted(self.skills.items())
            },
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes, *, name: str) -> Channel:
        """The channel in `data`, schema-checked (CPU work: `aread_channel` runs it in the decoder's pool).

        Raises:
            SkillError: Not a bounded document of this schema for `name` (`CHANNEL_DOCUMENT`),
                or an entry is malformed (a bad skill id or path, a content id that is not its files').
        """
        try:
            doc = decode_document(data, CHANNEL_DOCUMENT)
        except ValueError as exc:
            raise SkillError(f"The channel '{name}' is damaged ({exc}): set it again") from None
        return cls.of_document(doc, name=name)

    def copy(self) -> Channel:
        """A channel of its own (what decoding gives is shared: never change it)."""
        return Channel(self.name, dict(self.skills), self.etag, self.updated, self.actor)

    @classmethod
    def of_document(cls, doc: Any, *, name: str) -> Channel:
        """The channel a decoded document holds, schema-checked (see `decode`)."""
        if not isinstance(doc, dict) or doc.get("schema") != CHANNEL_SCHEMA or doc.get("name") != name:
            raise SkillError(f"The channel '{name}' is damaged (not a channel document for it): set it again")
        skills = doc.get("skills")
        if not isinstance(skills, dict) or len(skills) > MAX_CHANNEL_SKILLS:
            raise SkillError(f"The channel '{name}' is damaged (its skills are missing or too many)")
        out: dict[str, ChannelSkill] = {}
        for sid, raw in skills.items():
            out[_checked_id(sid, name)] = _entry(raw, sid, name)
        actor, updated = doc.get("actor"), doc.get("updated")
        return cls(
            name,
            out,
            updated=updated if isinstance(updated, str) and len(updated) <= MAX_TEXT else None,
            actor=actor if isinstance(actor, str) and len(actor) <= MAX_TEXT else None,
        )


@functools.lru_cache(maxsize=4096)
def _plain(path: object) -> bool:
    """A plain relative path inside a skill (cached: a channel repeats a few paths many times)."""
    try:
        pinned_key("x/", path)  # type: ignore[arg-type]
    except (InvalidPath, TypeError):
        return False
    return True


def _checked_id(sid: object, name: str) -> str:
    try:
        canonical = str(SkillId.parse(sid))
    except (InvalidPath, SkillError, TypeError, ValueError):
        canonical = None
    if canonical is None or canonical != sid:
        raise SkillError(f"The channel '{name}' is damaged (it names an invalid skill id)")
    return canonical


def _entry(raw: object, sid: str, name: str) -> ChannelSkill:
    bad = SkillError(f"The channel '{name}' is damaged (its entry for '{sid}' is malformed)")
    if not isinstance(raw, dict):
        raise bad
    version, record, files = raw.get("version"), raw.get("record"), raw.get("files")
    if not isinstance(version, str) or not isinstance(files, dict) or SKILL_FILE not in files:
        raise bad
    if record is not None and (not isinstance(record, str) or not RECORD_ID_RE.match(record)):
        raise bad
    pins: dict[str, PinnedFile] = {}
    sizes: dict[str, int] = {}
    for path, f in files.items():
        if not _plain(path):
            raise bad
        if not isinstance(f, dict):
            raise bad
        etag, vid, size = f.get("etag"), f.get("version_id"), f.get("size", 0)
        if not isinstance(etag, str) or not etag or len(etag) > MAX_TEXT:
            raise bad
        if vid is not None and (not isinstance(vid, str) or not vid or len(vid) > MAX_TEXT):
            raise bad
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise bad
        pins[path] = PinnedFile(etag, vid)
        sizes[path] = size
    if version != version_id_of((p, f.etag) for p, f in pins.items()):
        raise bad
    return ChannelSkill(version, record, pins, sizes)


async def acurrent_skills(
    store: ObjectStore, prefix: str, records_prefix: str | None = None
) -> dict[str, ChannelSkill]:
    """Every skill of the library at `prefix` at its current version, as channel entries.

    Costs 1 ListObjectVersions per 1,000 versions of the library and, with `records_prefix`,
    1 LIST per 1,000 records for each skill's newest record id (not read: a hint).
    """
    listed = await store.alist_versions(prefix)
    live = [v for v in listed if v.is_latest and not v.is_delete_marker]
    ids = sorted({str(s) for v in live if v.key.endswith("/" + SKILL_FILE) and (s := SkillId.from_key(v.key, prefix))})
    newest: dict[str, str] = {}
    if records_prefix is not None:
        objects, _ = await store.alist(records_prefix)
        for obj in objects:
            sid, _, name = obj.key[len(records_prefix) :].rpartition("/")
            rid = name.removesuffix(".json")
            if sid and RECORD_ID_RE.match(rid) and rid > newest.get(sid, ""):
                newest[sid] = rid
    folders = {sid: prefix + sid + "/" for sid in ids}
    by_folder: dict[str, list[ObjectVersion]] = {f: [] for f in folders.values()}
    for v in live:
        parts = v.key[len(prefix) :].split("/")
        for n in (2, 1):  # the deepest skill folder holding it (a nested skill's files are its own)
            folder = prefix + "/".join(parts[:n]) + "/"
            if len(parts) > n and folder in by_folder:
                by_folder[folder].append(v)
                break
    out: dict[str, ChannelSkill] = {}
    for sid, folder in folders.items():
        entry = ChannelSkill.of(current_version(sid, folder, by_folder[folder], lambda _k: True))
        out[sid] = ChannelSkill(entry.version, newest.get(sid), entry.files, entry.sizes)
    return out


async def adecode_channel(data: bytes, *, key: str, etag: str | None, name: str) -> Channel:
    """The channel in `data` read at `etag`, decoded once per (key, ETag) in the process.

    Decoded in the bounded pool of `s3skills.storage.decoder` (one decode at a time per
    library, shared by concurrent callers, the result kept by ETag); the channel returned
    is the caller's own.

    Raises:
        SkillError: It is damaged (see `Channel.decode`).
    """

    def convert(doc: Any) -> Channel:
        try:
            return Channel.of_document(doc, name=name)
        except SkillError as exc:
            raise ValueError(str(exc)) from None

    try:
        shared = await default_decoder().adecode(
            CHANNEL_DOCUMENT, data, key=key, etag=etag, convert=convert, variant=name
        )
    except ValueError as exc:
        message = str(exc)
        if not message.startswith("The channel"):
            message = f"The channel '{name}' is damaged ({message}): set it again"
        raise SkillError(message) from None
    channel = shared.copy()
    channel.etag = etag
    return channel


async def aread_channel(store: ObjectStore, channels_prefix: str, name: str) -> Channel:
    """Read a channel (1 GET), decoded as `adecode_channel` says.

    Raises:
        SkillError: No such channel, or it is damaged or over `MAX_CHANNEL_BYTES`.
    """
    key = channel_key(channels_prefix, name)
    try:
        body = await store.aget(key, max_bytes=MAX_CHANNEL_BYTES)
    except NotFound:
        raise SkillError(
            f"No channel '{name}' (create it with: s3skills channel create {name} --from latest)"
        ) from None
    except FileTooLarge:
        raise SkillError(f"The channel '{name}' is damaged (over {MAX_CHANNEL_BYTES} bytes): set it again") from None
    return await adecode_channel(body.data, key=key, etag=body.etag, name=name)


async def awrite_channel(store: ObjectStore, channels_prefix: str, channel: Channel, *, actor: str) -> str:
    """Store a channel conditionally: created only if absent, else only over the ETag it was read at.

    Returns:
        Its new ETag.

    Raises:
        Conflict: It was created or changed by someone else since it was read (a create,
            `channel.etag` None, finds it exists: the message says so).
    """
    key = channel_key(channels_prefix, channel.name)
    channel.updated = datetime.now(UTC).isoformat()
    channel.actor = actor[:MAX_TEXT]
    data = channel.to_bytes()
    try:
        if channel.etag is None:
            etag = await store.aput(key, data, if_none_match=True, content_type="application/json")
        else:
            etag = await store.aput(key, data, if_match=channel.etag, content_type="application/json")
    except (Conflict, NotFound) as exc:
        if channel.etag is None:  # a create: the conditional put found one there
            raise Conflict(f"The channel '{channel.name}' already exists") from exc
        raise Conflict(
            f"The channel '{channel.name}' changed while it was being edited: run the command again"
        ) from exc
    channel.etag = etag
    return etag
