"""`DocumentDecoder`: where every `.s3skills/` document is decoded, off the event loop, within bounds.

`s3skills.storage.documents.decode_document` bounds one decode (bytes, values, fields). This
module bounds how many a tenant can make the process run:

- a pool of its own, `workers` threads (`DECODE_WORKERS`, not a count of cores: a 16-core
  host runs as many decodes at once as a 2-core one, so the memory they take is the same);
- at most `per_library` decodes at once per library (the key up to `/.s3skills/`): the
  next documents of that library wait in its own queue, so one tenant never holds more than
  that many of the pool's threads and the others' documents keep being decoded;
- one decode per (kind, key, ETag, variant) in flight at a time, shared by every caller that
  asks while it runs (single flight), across event loops and threads;
- results (and refusals) of the kinds that are `cached` kept by (kind, key, ETag, variant)
  within `max_cached_bytes` (each weighed by the memory its decode may build), so a document
  read again, by any caller, is not decoded again.

One `DocumentDecoder` serves the whole process (`default_decoder()`); its counters
(`decodes`, `joined`, `hits`, `peak_active`, `peak_by_library`) are what tests pin.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from s3skills.storage.documents import DocumentKind, decode_cost, decode_document

__all__ = [
    "DECODE_WORKERS",
    "MAX_CACHED_BYTES",
    "DocumentDecoder",
    "default_decoder",
    "library_of",
    "set_default_decoder",
]

T = TypeVar("T")

DECODE_WORKERS = 2
"""Threads decoding documents at once in a process, whatever its number of cores."""

MAX_CACHED_BYTES = 64 * 1024 * 1024
"""Estimated memory of the decoded documents `DocumentDecoder` keeps (oldest dropped first)."""

_REFUSAL_WEIGHT = 512


def library_of(key: str) -> str:
    """The library a `.s3skills/` key belongs to (its key up to `/.s3skills/`), its fairness group."""
    head, found, _ = key.partition("/.s3skills/")
    return head if found else key.rpartition("/")[0]


_Key = tuple[str, str, str, Hashable]
_Job = Callable[[], None]


class DocumentDecoder:
    """Decodes documents in a bounded pool, one flight per (kind, key, ETag), fair per library.

    Args:
        workers: Threads of its pool (the most decodes at once in the process).
        per_library: Decodes of one library at once; its others wait for them.
        max_cached_bytes: Estimated memory of the results kept.
    """

    def __init__(
        self, *, workers: int = DECODE_WORKERS, per_library: int = 1, max_cached_bytes: int = MAX_CACHED_BYTES
    ) -> None:
        if workers < 1 or per_library < 1:
            raise ValueError("workers and per_library must be at least 1")
        self.workers = workers
        self.per_library = per_library
        self.max_cached_bytes = max_cached_bytes
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._flights: dict[_Key, concurrent.futures.Future[tuple[bool, Any]]] = {}
        self._cache: OrderedDict[_Key, tuple[int, bool, Any]] = OrderedDict()
        self._cached_bytes = 0
        self._waiting: dict[str, deque[_Job]] = {}
        self._admitted: dict[str, int] = {}
        self._active: dict[str, int] = {}
        self.decodes = 0
        """Decodes run (each document, each time it was not in flight nor kept)."""
        self.joined = 0
        """Callers that shared a decode already in flight."""
        self.hits = 0
        """Callers answered from the results kept."""
        self.peak_active = 0
        """Most decodes that ran at once."""
        self.peak_by_library: dict[str, int] = {}
        """Most decodes of each library that ran at once."""

    @property
    def cached_bytes(self) -> int:
        """Estimated memory of the results kept."""
        return self._cached_bytes

    async def adecode(
        self,
        kind: DocumentKind,
        data: bytes,
        *,
        key: str,
        etag: str | None,
        convert: Callable[[Any], T],
        variant: Hashable = None,
    ) -> T:
        """`convert(decode_document(data, kind))`, run in the pool; shared and kept by (key, ETag).

        Args:
            kind: What the document is (its shape and caps).
            data: Its bytes, as read at `etag`.
            key: Its key (its library is its fairness group).
            etag: The ETag it was read at (None: neither shared nor kept).
            convert: Checks the decoded document and builds what the caller needs. It must
                depend only on the document, `key` and `variant`, and its result must not be
                changed by callers (others may share it). It raises `ValueError` to refuse.
            variant: What else `convert` depends on (a prefix, a limit).

        Raises:
            ValueError: The document is refused (its message says why).
        """
        token: _Key | None = (kind.name, key, etag, variant) if etag else None
        with self._lock:
            kept = self._cache.get(token) if token is not None else None
            if kept is not None:
                assert token is not None
                self._cache.move_to_end(token)
                self.hits += 1
                return cast(T, _answer(kept[1], kept[2]))
            flight = self._flights.get(token) if token is not None else None
            if flight is None:
                flight = concurrent.futures.Future()
                if token is not None:
                    self._flights[token] = flight
                job = self._job(flight, token, kind, data, convert)
                self._admit(library_of(key), job)
            else:
                self.joined += 1
        ok, value = await asyncio.shield(asyncio.wrap_future(flight))
        return cast(T, _answer(ok, value))

    def _job(
        self,
        flight: concurrent.futures.Future[tuple[bool, Any]],
        token: _Key | None,
        kind: DocumentKind,
        data: bytes,
        convert: Callable[[Any], Any],
    ) -> _Job:
        def run() -> None:
            try:
                try:
                    outcome: tuple[bool, Any] = (True, convert(decode_document(data, kind)))
                    weight = min(decode_cost(data), kind.max_cost())
                except ValueError as exc:
                    outcome, weight = (False, str(exc)), _REFUSAL_WEIGHT
            except BaseException as exc:  # a bug in convert: every waiter sees it, nothing is kept
                with self._lock:
                    if token is not None:
                        self._flights.pop(token, None)
                flight.set_exception(exc)
                return
            with self._lock:
                if token is not None:
                    self._flights.pop(token, None)
                    if kind.cached:
                        self._keep(token, weight, outcome)
            flight.set_result(outcome)

        return run

    def _keep(self, token: _Key, weight: int, outcome: tuple[bool, Any]) -> None:
        if weight > self.max_cached_bytes // 4:
            return
        self._cache[token] = (weight, *outcome)
        self._cached_bytes += weight
        while self._cached_bytes > self.max_cached_bytes:
            _, (gone, _ok, _value) = self._cache.popitem(last=False)
            self._cached_bytes -= gone

    def _admit(self, library: str, job: _Job) -> None:
        """Start `job` if its library has a free slot, else queue it behind the library's own (lock held)."""
        if self._admitted.get(library, 0) < self.per_library:
            self._admitted[library] = self._admitted.get(library, 0) + 1
            self._executor().submit(self._run, library, job)
        else:
            self._waiting.setdefault(library, deque()).append(job)

    def _run(self, library: str, job: _Job) -> None:
        with self._lock:
            self.decodes += 1
            self._active[library] = self._active.get(library, 0) + 1
            self.peak_by_library[library] = max(self.peak_by_library.get(library, 0), self._active[library])
            self.peak_active = max(self.peak_active, sum(self._active.values()))
        try:
            job()
        finally:
            with self._lock:
                self._active[library] -= 1
                if not self._active[library]:
                    del self._active[library]
                queue = self._waiting.get(library)
                if queue:  # the library's next document goes to the back of the pool's queue
                    self._executor().submit(self._run, library, queue.popleft())
                    if not queue:
                        del self._waiting[library]
                else:
                    self._admitted[library] -= 1
                    if not self._admitted[library]:
                        del self._admitted[library]

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="s3skills-decode")
        return self._pool


def _answer(ok: bool, value: Any) -> Any:
    if not ok:
        raise ValueError(value)
    return value


_DEFAULT = [DocumentDecoder()]


def default_decoder() -> DocumentDecoder:
    """The process's decoder: every reader of `.s3skills/` documents shares its pool and results."""
    return _DEFAULT[0]


def set_default_decoder(decoder: DocumentDecoder) -> DocumentDecoder:
    """Make `decoder` the process's decoder (for tests that count its work); returns the one it replaces."""
    previous, _DEFAULT[0] = _DEFAULT[0], decoder
    return previous
