"""Serving a channel (`Config(channel=...)`): each library's index, `SKILL.md` and files at the
versions the channel names, and no skill it does not name.

`ChannelServer` keeps, per library, the channel object (`s3skills.skills.versions.channels`)
as last read, asked again with a conditional GET once the library's catalog TTL has passed
(`Config.catalog_ttl`, `Config.shared_catalog_ttl`; None: every query, 1 request, 304 when
unchanged), so a channel change reaches every reader within the TTL, with no restart.

What it serves of a library, from the library's index (the manifest: 1 GET) and the channel
(1 GET):

- a skill the channel names at the `SKILL.md` the index holds: the index's entry (no request);
- one the channel names at another `SKILL.md`: an entry built from that version, read by its
  VersionId and checked to carry the ETag the channel names (1 GET, then kept by VersionId:
  a version never changes);
- a skill the channel does not name: nothing;
- a skill the library now holds disabled (`enabled: false`) or no longer holds (removed): nothing,
  whatever version the channel names (`killed`: the kill switch reaches every channel, within
  the TTL of the library's index). `enable` brings it back at the channel's version. A current
  `SKILL.md` that does not parse stops nothing: the channel's version is still served.

Reads of a served skill use the channel's pin (`pin_of`) unless the thread pinned its own
version when it loaded the skill (per-thread pins keep working inside a channel). Every pinned
read checks the store's ETag (`read_verified`), so a channel that lies serves nothing that was
never a version of that skill's own files.

A shared library without the channel serves no skill (a production agent never falls back to
the latest push); a user's own library without it is served as it is now.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from s3skills.config import Config
from s3skills.errors import FileTooLarge, NotFound, S3SkillsError, SkillError
from s3skills.ids import SKILL_FILE
from s3skills.skills.index.catalog import LibraryIndex, SkillCatalog
from s3skills.skills.index.manifest import SkillEntry
from s3skills.skills.versions.channels import (
    LATEST,
    MAX_CHANNEL_BYTES,
    Channel,
    ChannelSkill,
    adecode_channel,
    channel_key,
)
from s3skills.skills.versions.history import FileVersion, SkillVersion
from s3skills.skills.versions.pinned import pinned_key
from s3skills.storage import NotModified, ObjectStore
from s3skills.tenancy import SkillPin

__all__ = ["ChannelServer", "ServedLibrary", "killed"]

logger = logging.getLogger(__name__)

_ENTRIES = 65_536
"""Entries of older `SKILL.md` versions kept (by key, VersionId and ETag)."""


def killed(index: LibraryIndex, skill_id: str) -> bool:
    """The library now holds the skill disabled, or no longer holds it: no channel serves it.

    Removed means no `SKILL.md` of that id in a complete index (entries and the last LIST's
    markers); an index cut at `Limits.max_skills_per_library` cannot tell, so it stops nothing.
    A current `SKILL.md` that does not parse (`info` None) stops nothing either: a broken push
    to the library never takes a skill out of production.
    """
    entry = index.entries.get(skill_id)
    if entry is None:
        return not index.truncated and skill_id + "/" not in index.markers
    return entry.info is not None and not entry.info.metadata.enabled


def _own_files(served: ChannelSkill, skill_id: str, folders: set[str]) -> ChannelSkill:
    """The entry without the files that lie in a skill nested in its folder.

    A channel is written by whoever can write the library: a forged entry may name a nested
    skill's files as its parent's, which would list them under the parent (their contents
    are refused anyway). `folders`: the library's skill folders (`LibraryIndex.skill_folders`).
    """

    def nested(path: str) -> bool:
        parts = path.split("/")[:-1]
        return any(f"{skill_id}/{'/'.join(parts[: n + 1])}/" in folders for n in range(len(parts)))

    kept = {p: f for p, f in served.files.items() if not nested(p)}
    if len(kept) == len(served.files):
        return served
    logger.warning("a channel lists files of a skill nested in %s: not served as its own", skill_id)
    sizes = {p: size for p, size in served.sizes.items() if p in kept}
    return ChannelSkill(served.version, served.record, kept, sizes)


@dataclass(frozen=True)
class ServedLibrary:
    """What a channel serves of one library: entries by skill id and their pins (None: all, as is)."""

    entries: dict[str, SkillEntry]
    pins: dict[str, SkillPin]


@dataclass
class _Held:
    channel: Channel | None
    etag: str | None
    read_at: float


class ChannelServer:
    """The channel `config.channel` of each library, cached within the catalog TTL."""

    def __init__(self, store: ObjectStore, config: Config, catalog: SkillCatalog) -> None:
        self.store = store
        self.config = config
        self.catalog = catalog
        self.name = config.channel if config.channel not in (None, LATEST) else None
        self._held: dict[str, _Held] = {}
        self._reading: dict[str, asyncio.Future[Channel | None]] = {}  # the read in flight per library
        self._entries: OrderedDict[tuple[str, str, str], SkillEntry] = OrderedDict()
        self._pins: dict[str, dict[str, SkillPin]] = {}
        self._skills: dict[str, dict[str, ChannelSkill]] = {}
        self._served: dict[str, tuple[tuple[object, ...], ServedLibrary]] = {}
        self._holders: dict[str, tuple[object, ...]] = {}  # keeps the objects whose ids key `_served` alive

    @property
    def active(self) -> bool:
        """A channel other than `latest` is served."""
        return self.name is not None

    def invalidate(self, library_prefix: str | None = None) -> None:
        """Forget the age of the channel read for a library (all with None): the next query asks."""
        for prefix, held in self._held.items():
            if library_prefix is None or prefix == library_prefix:
                held.read_at = -math.inf

    def pin_of(self, library_prefix: str, skill_id: str) -> SkillPin | None:
        """The pin the channel serves of a skill of that library (None: none, or not served)."""
        return self._pins.get(library_prefix, {}).get(skill_id)

    def version_of(self, library_prefix: str, skill_id: str) -> SkillVersion | None:
        """The version the channel serves of a skill, as a load records it (None: not served)."""
        served = self._skills.get(library_prefix, {}).get(skill_id)
        if served is None:
            return None
        folder = library_prefix + skill_id + "/"
        files = tuple(
            FileVersion(p, f.etag, f.version_id, served.sizes.get(p, 0), None, pinned_key(folder, p))
            for p, f in sorted(served.files.items())
        )
        return SkillVersion(skill_id, served.version, files, None, record=served.record)

    async def _channel(self, source: str, prefix: str) -> Channel | None:
        """The channel of a library: held within the TTL, else read by one caller for all who ask meanwhile."""
        ttl = self.config.catalog_ttl if source == "user" else self.config.shared_catalog_ttl
        held = self._held.get(prefix)
        if held is not None and ttl is not None and time.monotonic() - held.read_at < ttl:
            return held.channel
        reading = self._reading.get(prefix)
        if reading is None:  # single flight: who asks while a read is in flight shares its answer
            reading = asyncio.ensure_future(self._read_channel(source, prefix))
            self._reading[prefix] = reading
            reading.add_done_callback(
                lambda done: self._reading.pop(prefix) if self._reading.get(prefix) is done else None
            )
        return await asyncio.shield(reading)

    def _forget_read(self, prefix: str, done: asyncio.Future[Channel | None]) -> None:
        if self._reading.get(prefix) is done:
            del self._reading[prefix]

    async def _read_channel(self, source: str, prefix: str) -> Channel | None:
        assert self.name is not None
        held = self._held.get(prefix)
        now = time.monotonic()
        try:
            key = channel_key(self.config.layout.channels_prefix(prefix), self.name)
        except ValueError:
            return None
        body = None
        try:
            # Conditional on the version held, a refused one too: a channel refused once (too
            # large, damaged) costs a 304 at each later read, not its bytes again.
            body = await self.store.aget(
                key, max_bytes=MAX_CHANNEL_BYTES, if_none_match=held.etag if held is not None else None
            )
            # Input: decoded in the bounded pool, once per ETag in the process, never on the I/O loop.
            channel = await adecode_channel(body.data, key=key, etag=body.etag, name=self.name)
        except NotModified:
            assert held is not None
            held.read_at = now
            return held.channel
        except (NotFound, SkillError, FileTooLarge) as exc:
            if (held is None or held.channel is not None) and (source != "user" or not isinstance(exc, NotFound)):
                logger.warning("channel %s of a %s library is not served: %s", self.name, source, exc)
            refused = body.etag if body is not None else await self._etag_of(key, exc)
            self._held[prefix] = _Held(None, refused, now)
            return None
        except S3SkillsError as exc:  # the store failed: keep serving what was read (never the latest push)
            logger.warning("could not read channel %s of a %s library: %s", self.name, source, type(exc).__name__)
            if held is not None:
                held.read_at = now
                return held.channel
            if source == "user":
                raise
            return None
        self._held[prefix] = _Held(channel, channel.etag, now)
        return channel

    async def _etag_of(self, key: str, exc: Exception) -> str | None:
        """The ETag of a channel refused for its size (1 HEAD), so that later reads are conditional."""
        if not isinstance(exc, FileTooLarge):
            return None
        try:
            return (await self.store.ahead(key)).etag
        except S3SkillsError:
            return None

    async def aserve(self, source: str, prefix: str, index: LibraryIndex) -> ServedLibrary | None:
        """What the channel serves of the library at `prefix` (None: the library as it is).

        Costs the channel's conditional GET (within the TTL: none) and 1 GET per served
        `SKILL.md` version that is neither the indexed one nor read before.
        """
        if self.name is None:
            return None
        channel = await self._channel(source, prefix)
        if channel is None:
            if source == "user":
                self._pins.pop(prefix, None)
                self._skills.pop(prefix, None)
                return None
            self._pins[prefix], self._skills[prefix] = {}, {}
            return ServedLibrary({}, {})
        # The same channel over the same index serves the same thing: the caller's merged view stays.
        key = (id(channel), id(index), tuple(map(id, index.entries.values())))
        kept = self._served.get(prefix)
        if kept is not None and kept[0] == key:
            return kept[1]
        entries: dict[str, SkillEntry] = {}
        pins: dict[str, SkillPin] = {}
        skills: dict[str, ChannelSkill] = {}
        folders = index.skill_folders()
        for sid, named in channel.skills.items():
            md = named.files.get(SKILL_FILE)
            if md is None or killed(index, sid):
                continue
            served = _own_files(named, sid, folders)
            indexed = index.entries.get(sid)
            entry = indexed if indexed is not None and indexed.etag == md.etag else None
            if entry is None:
                entry = await self._older(source, prefix, sid, md.etag, md.version_id)
            if entry is None:
                continue
            entries[sid] = entry
            pins[sid] = served.pin()
            skills[sid] = served
        self._pins[prefix] = pins
        self._skills[prefix] = skills
        out = ServedLibrary(entries, pins)
        self._served[prefix] = (key, out)
        self._holders[prefix] = (channel, index, tuple(index.entries.values()))
        return out

    async def _older(self, source: str, prefix: str, sid: str, etag: str, version_id: str | None) -> SkillEntry | None:
        """The entry of an older `SKILL.md` version (1 GET by VersionId, ETag checked; then kept)."""
        key = prefix + sid + "/" + SKILL_FILE
        cache_key = (key, version_id or "", etag)
        hit = self._entries.get(cache_key)
        if hit is not None:
            self._entries.move_to_end(cache_key)
            return hit
        if not version_id:
            return None  # an unversioned older state cannot be read any more
        try:
            body = await self.store.aget(key, version_id=version_id, max_bytes=self.config.limits.max_skill_md_bytes)
        except (NotFound, S3SkillsError) as exc:
            logger.warning("a channel names a SKILL.md version that cannot be read (%s)", type(exc).__name__)
            return None
        if body.etag != etag:
            logger.warning("a channel names a SKILL.md version whose ETag is another: not served")
            return None
        made = await self.catalog.heads.aentries_of(source, prefix, {sid: (body.data, etag)})
        entry = made.get(sid)
        if entry is None:
            return None
        self.catalog.bodies.remember(entry.key, etag, version_id, body.data)
        self._entries[cache_key] = entry
        while len(self._entries) > _ENTRIES:
            self._entries.popitem(last=False)
        return entry
