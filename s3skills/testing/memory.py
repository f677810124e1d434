"""`MemoryObjectStore`: the `ObjectStore` contract in memory, for unit tests without a server.

It behaves like S3 where the library depends on it: keys listed in order, pages of
at most `page_size`, common prefixes with a delimiter, ETags that are the MD5 of the
body (as S3's single-part ETags), `IfMatch`/`IfNoneMatch` conditions checked
atomically, ranged reads, `NotFound` for a missing key. Request hooks see the same
operation names as on S3 (`ListObjectsV2`, `GetObject`, `HeadObject`, `PutObject`,
`DeleteObjects`), so request counts can be asserted on either store.

`fail_next(operation, error)` makes the next call of an operation raise, for fault tests.

Versioning behaves as on S3: `MemoryObjectStore(versioning=True)` (or
`aput_versioning(True)`) keeps every overwritten or deleted object as an older
version (`alist_versions`, `aget(..., version_id=...)`); without it each key has
one `"null"` version, replaced in place.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from s3skills.errors import Conflict, FileTooLarge, NotFound, S3SkillsError
from s3skills.storage.protocol import (
    ListPage,
    NotModified,
    ObjectBody,
    ObjectInfo,
    ObjectVersion,
    RequestHook,
    StoreHelpers,
    VersioningStatus,
)

__all__ = ["MemoryObjectStore"]


@dataclass(frozen=True, slots=True)
class _Object:
    data: bytes
    etag: str
    modified: datetime
    content_type: str | None
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class _Version:
    version_id: str
    obj: _Object | None  # None: a delete marker
    modified: datetime


class MemoryObjectStore(StoreHelpers):
    """One bucket in memory. Thread-safe.

    Args:
        bucket: The bucket name (only reported).
        versioning: Start with versioning enabled.
    """

    def __init__(self, bucket: str = "memory", *, versioning: bool = False) -> None:
        self.bucket = bucket
        self._objects: dict[str, _Object] = {}
        self._history: dict[str, list[_Version]] = {}  # oldest first
        self._versioning: VersioningStatus = "Enabled" if versioning else ""
        self._version_ids = itertools.count(1)
        self._last_write = datetime.min.replace(tzinfo=UTC)
        self._lock = threading.Lock()
        self._hooks: list[RequestHook] = []
        self._faults: dict[str, list[S3SkillsError]] = {}

    def __repr__(self) -> str:
        return f"MemoryObjectStore(bucket={self.bucket!r}, objects={len(self._objects)})"

    # -- observation and faults ---------------------------------------------------------

    def fail_next(self, operation: str, error: S3SkillsError) -> None:
        """Make the next call of `operation` (`GetObject`, `PutObject`...) raise `error`."""
        self._faults.setdefault(operation, []).append(error)

    def _call(self, operation: str) -> None:
        self._notify(operation)
        pending = self._faults.get(operation)
        if pending:
            raise pending.pop(0)

    # -- direct access for arranging tests ------------------------------------------------

    def put_object(self, key: str, data: bytes | str, content_type: str | None = None) -> str:
        """Write an object without a request hook (arranging a test); returns its ETag."""
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        etag = hashlib.md5(body, usedforsecurity=False).hexdigest()
        with self._lock:
            self._store(key, _Object(body, etag, datetime.now(UTC), content_type))
        return etag

    def _store(self, key: str, obj: _Object | None) -> str:
        """Make `obj` (None: a delete marker) the current state of `key`; call with the lock held."""
        # Write times strictly increase, so versions replay in write order (S3 has seconds only).
        now = max(datetime.now(UTC), self._last_write + timedelta(microseconds=1))
        self._last_write = now
        if obj is not None:
            obj = replace(obj, modified=now)
        if obj is None:
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
        history = self._history.setdefault(key, [])
        if self._versioning == "Enabled":
            version_id = f"{next(self._version_ids):016x}"
        else:  # unversioned or suspended: the "null" version is replaced in place
            version_id = "null"
            history[:] = [v for v in history if v.version_id != "null"]
            if obj is None and not self._versioning:
                history.clear()
        if obj is not None or self._versioning:
            history.append(_Version(version_id, obj, now))
        if not history:
            del self._history[key]
        return version_id

    def keys(self) -> list[str]:
        """Every key, in order."""
        with self._lock:
            return sorted(self._objects)

    # -- the contract -----------------------------------------------------------------------

    async def alist_pages(
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        """Listing pages in key order (one hook call per page)."""
        with self._lock:
            items = sorted((k, o) for k, o in self._objects.items() if k.startswith(prefix))
        entries: list[ObjectInfo | str] = []
        seen: set[str] = set()
        for key, obj in items:
            if delimiter:
                cut = key.find(delimiter, len(prefix))
                if cut >= 0:
                    common = key[: cut + len(delimiter)]
                    if common not in seen:
                        seen.add(common)
                        entries.append(common)
                    continue
            entries.append(ObjectInfo(key, len(obj.data), obj.etag, obj.modified))
        start = 0
        while True:
            self._call("ListObjectsV2")
            chunk = entries[start : start + page_size]
            objects = tuple(e for e in chunk if isinstance(e, ObjectInfo))
            prefixes = tuple(e for e in chunk if isinstance(e, str))
            yield ListPage(objects, prefixes)
            start += page_size
            if start >= len(entries):
                return

    def _get(self, key: str) -> _Object:
        with self._lock:
            obj = self._objects.get(key)
        if obj is None:
            raise NotFound("get: the store answered NoSuchKey")
        return obj

    def _get_version(self, key: str, version_id: str | None) -> tuple[_Object, str]:
        with self._lock:
            history = list(self._history.get(key, ()))
        if version_id is None:
            if not history or history[-1].obj is None:
                raise NotFound("get: the store answered NoSuchKey")
            return history[-1].obj, history[-1].version_id
        for version in history:
            if version.version_id == version_id:
                if version.obj is None:
                    raise NotFound("get: the store answered MethodNotAllowed (a delete marker)")
                return version.obj, version_id
        raise NotFound("get: the store answered NoSuchVersion")

    async def aget(
        self,
        key: str,
        *,
        max_bytes: int | None = None,
        version_id: str | None = None,
        if_none_match: str | None = None,
    ) -> ObjectBody:
        """A whole object, or one version of it; `NotModified` when its ETag is `if_none_match`."""
        self._call("GetObject")
        obj, vid = self._get_version(key, version_id)
        if if_none_match is not None and obj.etag == if_none_match:
            raise NotModified(key, if_none_match)
        if max_bytes is not None and len(obj.data) > max_bytes:
            raise FileTooLarge(f"get: the object is {len(obj.data)} bytes; the limit is {max_bytes}")
        return ObjectBody(
            key, obj.data, obj.etag, len(obj.data), obj.modified, obj.content_type, vid, dict(obj.metadata)
        )

    async def alist_versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version under `prefix`, by key, newest first (one hook call per 1,000)."""
        with self._lock:
            items = sorted((k, list(h)) for k, h in self._history.items() if k.startswith(prefix))
        out: list[ObjectVersion] = []
        for key, history in items:
            for i, v in enumerate(reversed(history)):
                if v.obj is None:
                    out.append(ObjectVersion(key, v.version_id, "", 0, v.modified, i == 0, True))
                else:
                    out.append(ObjectVersion(key, v.version_id, v.obj.etag, len(v.obj.data), v.modified, i == 0))
        for _ in range(max(1, -(-len(out) // 1000))):
            self._call("ListObjectVersions")
        return out

    async def aget_versioning(self) -> VersioningStatus:
        """`Enabled`, `Suspended` or `""`."""
        self._call("GetBucketVersioning")
        return self._versioning

    async def aput_versioning(self, enabled: bool) -> None:
        """Enable or suspend versioning."""
        self._call("PutBucketVersioning")
        with self._lock:
            self._versioning = "Enabled" if enabled else "Suspended"

    async def aget_range(self, key: str, start: int, length: int) -> ObjectBody:
        """`length` bytes from `start` (what exists of them)."""
        self._call("GetObject")
        obj = self._get(key)
        data = obj.data[start : start + length]
        return ObjectBody(key, data, obj.etag, len(obj.data), obj.modified, obj.content_type)

    async def ahead(self, key: str) -> ObjectInfo:
        """Describe one object."""
        self._call("HeadObject")
        obj = self._get(key)
        return ObjectInfo(key, len(obj.data), obj.etag, obj.modified)

    async def aput(
        self,
        key: str,
        data: bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        content_type: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> str:
        """Write an object (with its user `metadata`, replacing any); conditions are checked atomically."""
        self._call("PutObject")
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        with self._lock:
            current = self._objects.get(key)
            if if_none_match and current is not None:
                raise Conflict("put: the store answered PreconditionFailed")
            if if_match is not None and (current is None or current.etag != if_match):
                if current is None:
                    raise NotFound("put: the store answered NoSuchKey")
                raise Conflict("put: the store answered PreconditionFailed")
            meta = tuple(sorted((k.lower(), v) for k, v in (metadata or {}).items()))
            self._store(key, _Object(bytes(data), etag, datetime.now(UTC), content_type, meta))
        return etag

    async def adelete_many(self, keys: Iterable[str]) -> list[str]:
        """Delete keys (one hook call per 1,000)."""
        pending = list(dict.fromkeys(keys))
        for start in range(0, len(pending), 1000):
            self._call("DeleteObjects")
            with self._lock:
                for key in pending[start : start + 1000]:
                    if key in self._objects:
                        self._store(key, None)
        return []

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete one key (one `DeleteObject` hook call); `if_match` checked atomically."""
        self._call("DeleteObject")
        with self._lock:
            current = self._objects.get(key)
            if if_match is not None:
                if current is None:
                    raise NotFound(key)
                if current.etag != if_match.strip('"'):
                    raise Conflict("delete: the store answered PreconditionFailed")
            if current is not None:
                self._store(key, None)

    async def aclose(self) -> None:
        """Nothing to release."""

    async def acreate_bucket(self) -> None:
        """The bucket always exists."""
