"""The object-store contract: the few operations everything else is built on.

`ObjectStore` is a Protocol: list (paginated, with or without a delimiter), get,
ranged get, head, conditional put and batch delete, plus request hooks (request
counts are a tested property of the library), and object versions: a listing of
every version under a prefix, a GET of one version, and the bucket's versioning
status (`ObjectVersion`, `VersioningStatus`). `S3ObjectStore` implements it on
aioboto3; `s3skills.testing.MemoryObjectStore` implements it in memory for unit
tests. `StoreHelpers` derives `alist` and `aexists` from the contract once, for
every implementation. Errors leave a store only as the project's exceptions.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from s3skills.errors import NotFound, S3SkillsError

__all__ = [
    "ListPage",
    "NotModified",
    "ObjectBody",
    "ObjectInfo",
    "ObjectStore",
    "ObjectVersion",
    "RequestCounter",
    "RequestHook",
    "StoreHelpers",
    "VersioningStatus",
    "sort_versions",
]

VersioningStatus = str
"""A bucket's versioning status as S3 reports it: `Enabled`, `Suspended`, or `""` (never enabled)."""

RequestHook = Callable[[str], None]
"""Called with the S3 operation name (`GetObject`, `ListObjectsV2`...) once per API call."""


class NotModified(S3SkillsError):
    """A conditional GET found the object unchanged (HTTP 304): no body was sent.

    Attributes:
        etag: The ETag the caller already holds.
    """

    def __init__(self, key: str, etag: str) -> None:
        super().__init__(f"get: {key} is unchanged (ETag {etag})")
        self.key = key
        self.etag = etag


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object as a listing or a HEAD describes it."""

    key: str
    size: int
    etag: str
    last_modified: datetime | None = None


@dataclass(frozen=True, slots=True)
class ObjectBody:
    """The bytes of an object (or of a range of it) and its metadata.

    `size` is the size of the whole object, also for a ranged read.
    """

    key: str
    data: bytes
    etag: str
    size: int
    last_modified: datetime | None = None
    content_type: str | None = None
    version_id: str | None = None
    """The object version read (`"null"` for an object written without versioning; None if unknown)."""

    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    """User metadata (`x-amz-meta-*`, names lower case without the prefix); `{}` for a ranged read."""


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One version of an object, as `ListObjectVersions` describes it.

    Attributes:
        key: The object key.
        version_id: S3's `VersionId`; `"null"` for an object written while the
            bucket's versioning was off (such a version is overwritten in place).
        etag: The version's ETag (empty for a delete marker).
        size: Its size in bytes (0 for a delete marker).
        last_modified: When it was written.
        is_latest: Whether it is the current version of its key.
        is_delete_marker: A delete marker: the key was deleted at this point.
    """

    key: str
    version_id: str
    etag: str
    size: int
    last_modified: datetime | None
    is_latest: bool
    is_delete_marker: bool = False


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a listing: objects and, with a delimiter, common prefixes."""

    objects: tuple[ObjectInfo, ...]
    prefixes: tuple[str, ...]


class RequestCounter:
    """Counts S3 API calls per operation name (`GetObject`, `ListObjectsV2`...).

    Install it with `store.add_request_hook(counter)`. A retried call counts once.
    Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def __call__(self, operation: str) -> None:
        with self._lock:
            self._counts[operation] += 1

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of the counts."""
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        """All calls counted so far."""
        with self._lock:
            return sum(self._counts.values())

    def __getitem__(self, operation: str) -> int:
        with self._lock:
            return self._counts[operation]

    def reset(self) -> None:
        """Forget the counts."""
        with self._lock:
            self._counts.clear()


@runtime_checkable
class ObjectStore(Protocol):
    """One bucket seen through the operations the library needs.

    Every coroutine raises only `s3skills.errors` exceptions: `NotFound` for a
    missing key (never for a 403, which is `AccessDenied`), `Conflict` when a
    condition of `aput` does not hold, `FileTooLarge` past `max_bytes`.
    """

    bucket: str

    def add_request_hook(self, hook: RequestHook) -> None:
        """Call `hook(operation)` once per API call (a retried call counts once)."""
        ...

    def remove_request_hook(self, hook: RequestHook) -> None:
        """Undo `add_request_hook`."""
        ...

    def alist_pages(
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        """Listing pages of the keys under `prefix`, in key order (1 request per page)."""
        ...

    async def alist(self, prefix: str, *, delimiter: str | None = None) -> tuple[list[ObjectInfo], list[str]]:
        """Every object and common prefix under `prefix` (all pages)."""
        ...

    async def aget(
        self,
        key: str,
        *,
        max_bytes: int | None = None,
        version_id: str | None = None,
        if_none_match: str | None = None,
    ) -> ObjectBody:
        """A whole object, or one version of it with `version_id` (1 request).

        With `if_none_match` (an ETag the caller holds), an unchanged object raises
        `NotModified` instead of sending its body (still 1 request).
        """
        ...

    async def alist_versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under `prefix`: by key, newest first within a key.

        Costs 1 request per 1,000 versions. On a bucket that never had versioning
        each key has one version, `"null"`.
        """
        ...

    async def aget_versioning(self) -> VersioningStatus:
        """The bucket's versioning status (1 request)."""
        ...

    async def aput_versioning(self, enabled: bool) -> None:
        """Enable (or suspend) versioning on the bucket (1 request)."""
        ...

    async def aget_range(self, key: str, start: int, length: int) -> ObjectBody:
        """`length` bytes from `start`; `size` is the whole object's (1 request)."""
        ...

    async def ahead(self, key: str) -> ObjectInfo:
        """Describe one object (1 request)."""
        ...

    async def aexists(self, key: str) -> bool:
        """Whether the key exists (1 HEAD). A 403 raises; it is not a "no"."""
        ...

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
        """Write a whole object and return its ETag (1 request).

        `metadata` becomes the object's user metadata (`x-amz-meta-<name>`: ASCII names and
        values), replacing any it had; `aget` returns it in `ObjectBody.metadata`.
        """
        ...

    async def adelete_many(self, keys: Iterable[str]) -> list[str]:
        """Delete keys (1 request per 1,000); returns the keys that failed."""
        ...

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete one key (1 request); with `if_match`, only while its ETag is that one.

        Raises:
            Conflict: The object's ETag is another (a 412; SeaweedFS also answers 412 for a
                deleted object).
            NotFound: `if_match` was given and the object is gone.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...

    async def acreate_bucket(self) -> None:
        """Create the bucket if it does not exist (demo, tests, `push --create-bucket`)."""
        ...


def sort_versions(versions: Iterable[ObjectVersion]) -> list[ObjectVersion]:
    """Versions by key, newest first within a key, the order every store returns.

    S3 lists versions and delete markers apart, with times to the second: a marker and
    a version of one second are ordered marker first (newer) unless the version is the
    latest, so `put, delete, put` within a second replays as written. Each input list
    is already newest first and keeps its order (the sort is stable).
    """
    epoch = datetime.min.replace(tzinfo=UTC)
    by_time = sorted(versions, key=lambda v: (v.is_latest, v.last_modified or epoch, v.is_delete_marker), reverse=True)
    return sorted(by_time, key=lambda v: v.key)


class StoreHelpers:
    """What every store derives from the contract: request hooks, `alist` and `aexists`.

    An implementation sets `self._hooks = []` and calls `self._notify(operation)` once
    per API call.
    """

    _hooks: list[RequestHook]

    def add_request_hook(self, hook: RequestHook) -> None:
        """Call `hook(operation)` once per API call, with S3's operation names (not per retry)."""
        self._hooks.append(hook)

    def remove_request_hook(self, hook: RequestHook) -> None:
        """Undo `add_request_hook`."""
        self._hooks.remove(hook)

    def _notify(self, operation: str) -> None:
        for hook in list(self._hooks):
            hook(operation)

    def alist_pages(
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        raise NotImplementedError

    async def ahead(self, key: str) -> ObjectInfo:
        raise NotImplementedError

    async def alist(self, prefix: str, *, delimiter: str | None = None) -> tuple[list[ObjectInfo], list[str]]:
        """All objects and common prefixes under `prefix`, every page read."""
        objects: list[ObjectInfo] = []
        prefixes: list[str] = []
        async for page in self.alist_pages(prefix, delimiter=delimiter):
            objects.extend(page.objects)
            prefixes.extend(page.prefixes)
        return objects, prefixes

    async def aexists(self, key: str) -> bool:
        """True when the key exists. A 403 raises `AccessDenied`; it is not a "no"."""
        try:
            await self.ahead(key)
        except NotFound:
            return False
        return True
