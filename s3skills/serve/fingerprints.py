"""`Fingerprinter`: the digest (and, for a `SKILL.md`, the frontmatter) of each listed file version.

A fingerprint comes from the first of these that knows it:

1. the in-memory `DigestCache`, by (file identity, ETag);
2. a `SkillFile.sha256` the source listed (never for a `SKILL.md`, whose frontmatter is needed);
3. the source's records of earlier reads (`SkillSource.recall`, one call for all misses);
4. one read of the file, after which the source is asked to keep it (`SkillSource.remember`).

A record is used only for the exact version listed (its ETag and size), so a fingerprint
is never one of another version of the file.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial

from s3skills.aio import gather_limited
from s3skills.errors import NotFound, S3SkillsError
from s3skills.ids import SKILL_FILE
from s3skills.serve.entries import DigestCache, Fingerprint
from s3skills.serve.source import SkillFile, SkillSource
from s3skills.skills.index.digests import Record, record_of

__all__ = ["Fingerprinter", "fingerprint_from", "fingerprint_of"]

logger = logging.getLogger(__name__)


def fingerprint_of(data: bytes, *, skill_md: bool) -> Fingerprint:
    """The fingerprint of some bytes; for a `SKILL.md`, with its frontmatter or why it has none."""
    return fingerprint_from(record_of(SKILL_FILE if skill_md else "", data, etag=""))


def fingerprint_from(record: Record) -> Fingerprint:
    """The fingerprint a digest-book record holds (for the version the record names)."""
    return Fingerprint("sha256:" + record.sha256, record.size, record.frontmatter, record.problem)


class Fingerprinter:
    """Fingerprints of listed files for one server: cached, recalled from the source, or read.

    Args:
        source: Where files are read, and fingerprints recalled and remembered.
        digests: The in-memory cache (shared between servers if the caller wants).
        concurrency: Files read at once.
    """

    def __init__(self, source: SkillSource, digests: DigestCache, concurrency: int = 8) -> None:
        self.source = source
        self.digests = digests
        self.concurrency = concurrency

    @staticmethod
    def identity(user: str, skill_id: str, f: SkillFile) -> str:
        """The cache identity of a file: its storage key, else the user, skill and path."""
        return f.key or f"{user}\0{skill_id}\0{f.path}"

    async def fingerprints(
        self, user: str, wanted: list[tuple[str, SkillFile]]
    ) -> dict[tuple[str, str], tuple[SkillFile, Fingerprint]]:
        """Fingerprints of listed files by (skill id, path), with the version each describes.

        A file deleted since it was listed is left out; a file changed since then is
        described as read (its `SkillFile` carries the ETag and size of what was read).
        """
        found: dict[tuple[str, str], tuple[SkillFile, Fingerprint]] = {}
        missing: list[tuple[str, SkillFile]] = []
        for skill_id, f in wanted:
            known = self.digests.get(self.identity(user, skill_id, f), f.etag)
            if known is None and f.sha256 is not None and f.path != SKILL_FILE:
                known = Fingerprint("sha256:" + f.sha256.lower(), f.size)
                self.digests.put(self.identity(user, skill_id, f), f.etag, known)
            if known is None:
                missing.append((skill_id, f))
            else:
                found[(skill_id, f.path)] = (f, known)
        if not missing:
            return found
        recalled = await self._recall(user, [f for _, f in missing])
        unread: list[tuple[str, SkillFile]] = []
        for skill_id, f in missing:
            known = recalled.get(f.key) if f.key else None
            if known is not None and known.size == f.size and (f.path != SKILL_FILE or known.describes_skill_md):
                self.digests.put(self.identity(user, skill_id, f), f.etag, known)
                found[(skill_id, f.path)] = (f, known)
            else:
                unread.append((skill_id, f))
        jobs = [partial(self._read, user, skill_id, f) for skill_id, f in unread]
        fresh: list[tuple[SkillFile, Fingerprint]] = []
        for (skill_id, f), pair in zip(unread, await gather_limited(jobs, self.concurrency), strict=True):
            if pair is not None:
                found[(skill_id, f.path)] = pair
                fresh.append(pair)
        if fresh:
            try:
                await self.source.remember(user, fresh)
            except S3SkillsError as exc:
                logger.info("digests not recorded: %s", exc)
        return found

    def note_read(self, user: str, skill_id: str, f: SkillFile, data: bytes) -> None:
        """Cache the fingerprint of bytes read for a client (`f` names the version read)."""
        identity = self.identity(user, skill_id, f)
        if self.digests.get(identity, f.etag) is None:
            self.digests.put(identity, f.etag, fingerprint_of(data, skill_md=f.path == SKILL_FILE))

    async def _recall(self, user: str, files: list[SkillFile]) -> dict[str, Fingerprint]:
        try:
            recalled: dict[str, Fingerprint] = await self.source.recall(user, files)
        except S3SkillsError as exc:
            logger.info("digests not recalled: %s", exc)
            return {}
        return recalled

    async def _read(self, user: str, skill_id: str, f: SkillFile) -> tuple[SkillFile, Fingerprint] | None:
        """Read a file and fingerprint the version read; None when it was deleted since it was listed."""
        try:
            data, etag = await self.source.read(user, skill_id, f.path)
        except NotFound:
            return None
        known = fingerprint_of(data, skill_md=f.path == SKILL_FILE)
        self.digests.put(self.identity(user, skill_id, f), etag, known)
        return replace(f, etag=etag, size=len(data)), known
