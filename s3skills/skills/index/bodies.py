"""Whole `SKILL.md` bodies, read by the ETag the index knows and kept in memory within a budget.

Shared by every tenant of a catalog: a body is keyed by its object key and ETag, never by
anything a client sent, and only a body whose ETag is the indexed one is kept.
"""

from __future__ import annotations

from collections import OrderedDict

from s3skills.config import Limits
from s3skills.skills.index.manifest import SkillEntry
from s3skills.storage import ObjectStore

__all__ = ["BodyCache"]


class BodyCache:
    """The bodies of `SKILL.md` files by (key, ETag), least recently used first out.

    Holds at most `limits.body_cache_bytes` of bodies; a body over a quarter of that is
    read but never kept.
    """

    def __init__(self, store: ObjectStore, limits: Limits) -> None:
        self.store = store
        self.limits = limits
        self._bodies: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()
        self._bytes = 0
        # (key, ETag) -> the VersionId that holds it, for a body served at an older version (a channel).
        self._version_ids: OrderedDict[tuple[str, str], str] = OrderedDict()

    def remember(self, key: str, etag: str, version_id: str, data: bytes) -> None:
        """Keep a body read by VersionId (and checked to carry `etag`): a miss later reads that version."""
        self._version_ids[(key, etag)] = version_id
        while len(self._version_ids) > 65_536:
            self._version_ids.popitem(last=False)
        self._keep((key, etag), data.decode("utf-8-sig", errors="replace"), len(data))

    async def aget(self, entry: SkillEntry) -> tuple[str, str]:
        """The text of a skill's `SKILL.md` and the ETag it was read with (1 GET on a miss).

        An ETag other than the entry's means the index (or manifest) was stale.

        Raises:
            NotFound: The `SKILL.md` is gone.
        """
        cache_key = (entry.key, entry.etag)
        hit = self._bodies.get(cache_key)
        if hit is not None:
            self._bodies.move_to_end(cache_key)
            return hit[0], entry.etag
        version_id = self._version_ids.get(cache_key)
        body = await self.store.aget(entry.key, max_bytes=self.limits.max_skill_md_bytes, version_id=version_id)
        text = body.data.decode("utf-8-sig", errors="replace")
        if body.etag != entry.etag:
            return text, body.etag
        self._keep(cache_key, text, len(body.data))
        return text, body.etag

    def _keep(self, cache_key: tuple[str, str], text: str, size: int) -> None:
        if size <= self.limits.body_cache_bytes // 4 and cache_key not in self._bodies:
            self._bodies[cache_key] = (text, size)
            self._bytes += size
            while self._bytes > self.limits.body_cache_bytes and self._bodies:
                _, (_, dropped) = self._bodies.popitem(last=False)
                self._bytes -= dropped

    @property
    def size(self) -> int:
        """Bytes of bodies held now."""
        return self._bytes
