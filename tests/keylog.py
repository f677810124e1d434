"""`KeyLogStore`: a `MemoryObjectStore` that records the key or prefix of every request.

The security tests assert from this log which keys a call asked the store for (not
only what came back), and how many bytes it fetched.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any

from s3skills.storage import ListPage, ObjectBody, ObjectInfo, ObjectVersion
from s3skills.testing import MemoryObjectStore


class KeyLogStore(MemoryObjectStore):
    """Records `(operation, key or prefix)` per request and the bytes GETs returned."""

    def __init__(self, bucket: str = "memory") -> None:
        super().__init__(bucket)
        self._log_lock = threading.Lock()
        self.log: list[tuple[str, str]] = []
        self.bytes_fetched = 0

    def _record(self, operation: str, key: str, size: int = 0) -> None:
        with self._log_lock:
            self.log.append((operation, key))
            self.bytes_fetched += size

    def take(self) -> list[tuple[str, str]]:
        """The log so far, emptied."""
        with self._log_lock:
            log, self.log = self.log, []
            self.bytes_fetched = 0
        return log

    async def alist_pages(
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        self._record("ListObjectsV2", prefix)
        async for page in super().alist_pages(prefix, delimiter=delimiter, page_size=page_size):
            yield page

    async def aget(self, key: str, **options: Any) -> ObjectBody:
        self._record("GetObject", key)
        body = await super().aget(key, **options)
        self._record("GetObject.bytes", key, len(body.data))
        return body

    async def aget_range(self, key: str, start: int, length: int) -> ObjectBody:
        self._record("GetRange", key)  # the index reads the head of each SKILL.md this way
        body = await super().aget_range(key, start, length)
        self._record("GetObject.bytes", key, len(body.data))
        return body

    async def ahead(self, key: str) -> ObjectInfo:
        self._record("HeadObject", key)
        return await super().ahead(key)

    async def aput(self, key: str, data: bytes, **options: Any) -> str:
        self._record("PutObject", key)
        return await super().aput(key, data, **options)

    async def alist_versions(self, prefix: str) -> list[ObjectVersion]:
        self._record("ListObjectVersions", prefix)
        return await super().alist_versions(prefix)

    async def adelete_many(self, keys: Iterable[str]) -> list[str]:
        keys = list(keys)
        for key in keys:
            self._record("DeleteObjects", key)
        return await super().adelete_many(keys)

    def keys_requested(self) -> list[str]:
        """The keys and prefixes of the log (without the byte records)."""
        with self._log_lock:
            return [k for op, k in self.log if op != "GetObject.bytes"]
