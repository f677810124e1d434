"""The object-store contract: the few operations everything else is built on.

`ObjectStore` is a Protocol: list (paginated, with or without a delimiter), get,
ranged get, head, conditional put and batch delete, plus request hooks (request
counts are a tested property of the library). `S3ObjectStore` implements it on
aioboto3; `s3skills.testing.MemoryObjectStore` implements it in memory for unit
tests. `StoreHelpers` derives `alist` and `aexists` from the contract once, for
every implementation. Errors leave a store only as the project's exceptions.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from s3skills.errors import NotFound

__all__ = ["ListPage", "ObjectBody", "ObjectInfo", "ObjectStore", "RequestCounter", "RequestHook", "StoreHelpers"]

RequestHook = Callable[[str], None]
"""Called with the S3 operation name (`GetObject`, `ListObjectsV2`...) once per API call."""


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
    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    """User metadata (`x-amz-meta-*`, names lower case without the prefix); `{}` for a ranged read."""


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

    async def aget(self, key: str, *, max_bytes: int | None = None) -> ObjectBody:
        """A whole object (1 request)."""
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

    async def aclose(self) -> None:
        """Release connections."""
        ...

    async def acreate_bucket(self) -> None:
        """Create the bucket if it does not exist (demo, tests, `push --create-bucket`)."""
        ...


class StoreHelpers:
    """What every store derives from the contract: `alist` and `aexists`."""

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
