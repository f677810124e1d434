"""Usage kept in the library's own bucket: loads per skill per day, counted by the agents.

The console plots each skill's loads over the last 30 days. A deployment running agents on
several replicas should not have to ship logs to the console's host for that, so every
process that loads skills counts them (`UsageRecorder`) and writes the counts next to the
library they were loaded from:

    {library parent}/.s3skills/usage/{YYYY-MM-DD}/{writer}.json

`writer` is random per recorder (one per process in practice), so two writers never write
one key; a writer's document of a day holds its cumulative counts of that day and is
overwritten at each flush (one PUT per library with new counts per `Config.usage_flush_interval`,
and at `SkillLibrary.aflush`). What a document holds: per skill id, `loads` (successful
loads), `failures` (loads and runs that failed or were refused), `script_runs` and
`executions`. No user id, thread id or argument is stored: only counts per skill.

Counting never fails or slows a load: `count` updates a dictionary under a lock (no I/O),
the writes run on the I/O loop in the background, an error is logged once and swallowed
(read-only credentials for a shared library are normal: after a 403 that library is not
written again by this recorder), and memory is bounded (`MAX_PENDING` skill-days; more are
dropped and said once in the log).

`UsageReader` reads a library's last days for the console: one LIST per day (a day older
than yesterday is final, so its listing is kept), one GET per document it has not decoded
at that ETag, every document decoded by the one bounded decoder (`USAGE_DOCUMENT`); a
document that does not check out is refused with its reason and the others still count.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import secrets
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

from s3skills._loop import gather_limited, io_loop
from s3skills.errors import AccessDenied, S3SkillsError
from s3skills.ids import SkillId
from s3skills.layout import KeyLayout
from s3skills.storage import ObjectStore
from s3skills.storage.decoder import default_decoder
from s3skills.storage.documents import INT, STR, Closed, DocumentKind, MapOf

__all__ = [
    "COUNTED",
    "MAX_PENDING",
    "MAX_USAGE_BYTES",
    "MAX_USAGE_SKILLS",
    "USAGE_DOCUMENT",
    "USAGE_SCHEMA",
    "WINDOW_DAYS",
    "StoredUsage",
    "UsageReader",
    "UsageRecorder",
    "decode_usage",
    "discard_pending_usage",
]

logger = logging.getLogger(__name__)

USAGE_SCHEMA = "s3skills.usage/1"
COUNTED = ("loads", "failures", "script_runs", "executions")
"""The counts a document holds per skill, in the order `UsageRecorder` keeps them."""
WINDOW_DAYS = 30
MAX_USAGE_SKILLS = 20_000
"""Skills one document may count: a library indexes at most `Limits.max_skills_per_library`."""
MAX_USAGE_BYTES = 4 * 1024 * 1024
"""Largest document read: 20,000 skills with 40-character ids and every count at 10^9 take 2.8 MB."""
MAX_COUNT = 10**12
MAX_PENDING = 100_000
"""Skill-days one recorder keeps in memory (all libraries together); new ones past it are dropped."""
MAX_WRITERS_PER_DAY = 500
"""Documents read per day of a library (a writer per process that loaded a skill that day)."""
MAX_READ_BYTES = 64 * 1024 * 1024
"""Bytes of documents one read of a library's window takes in (newest days first); the rest is
refused unread, so whoever writes the library cannot make the console hold more than this."""
READ_CONCURRENCY = 8
WRITE_CONCURRENCY = 8
"""Documents one flush writes at once (a server serving many users' libraries has many)."""
_JSON = "application/json"

USAGE_DOCUMENT = DocumentKind(
    "usage document",
    Closed(
        {
            "schema": STR,
            "day": STR,
            "writer": STR,
            "skills": MapOf(Closed(dict.fromkeys(COUNTED, INT)), MAX_USAGE_SKILLS),
        }
    ),
    max_bytes=MAX_USAGE_BYTES,
    max_nodes=MAX_USAGE_SKILLS * 10 + 16,  # per skill: its `:`, `{`, four `:`, three `,` and one between
)
"""What a usage document may hold (any other field is refused before decoding)."""

_WRITER_RE = re.compile(r"^[0-9a-z]{8,32}$")
_DAY_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")

Entries = tuple[tuple[str, tuple[int, ...]], ...]
"""A decoded document: (skill id, counts in `COUNTED` order) for each skill it counts."""


def decode_usage(doc: Any, *, day: str, writer: str) -> Entries:
    """The counts of a decoded usage document found at `day`/`writer`.

    Raises:
        ValueError: It names another day or writer than its key, a skill id that is not
            valid, or a count that is not an integer from 0 to 10^12 (the message says which).
    """
    if not isinstance(doc, dict) or doc.get("schema") != USAGE_SCHEMA:
        raise ValueError(f"it is not a usage document (no schema {USAGE_SCHEMA!r})")
    if doc.get("day") != day or doc.get("writer") != writer:
        raise ValueError("it names another day or writer than its key")
    skills = doc.get("skills")
    if not isinstance(skills, dict):
        raise ValueError("it has no skills")
    out = []
    for skill_id, counts in skills.items():
        try:
            SkillId.parse(skill_id)
        except ValueError:
            raise ValueError(f"it counts {skill_id[:60]!r}, which is not a skill id") from None
        values = tuple(counts.get(name, 0) for name in COUNTED)
        if not all(type(v) is int and 0 <= v <= MAX_COUNT for v in values):
            raise ValueError(f"a count of {skill_id[:60]!r} is not an integer from 0 to {MAX_COUNT}")
        out.append((skill_id, values))
    return tuple(out)


def _today() -> date:
    return datetime.now(UTC).date()


_Slot = tuple[str, date]  # (usage prefix, day)


class UsageRecorder:
    """Counts skill uses per library and day, and writes them to the store in the background.

    Args:
        store: Where the libraries are.
        layout: Where each library's `.s3skills/usage/` is.
        interval: Seconds between two writes (`Config.usage_flush_interval`).
        enabled: False: `count` does nothing (`Config.usage_store`).
        clock: Today's date (UTC), for tests.
    """

    def __init__(
        self,
        store: ObjectStore,
        layout: KeyLayout,
        *,
        interval: float = 60.0,
        enabled: bool = True,
        clock: Callable[[], date] = _today,
    ) -> None:
        self.store = store
        self.layout = layout
        self.interval = interval
        self.enabled = enabled
        self.clock = clock
        self.writer = secrets.token_hex(8)
        self.dropped = 0
        """Counts not kept because `MAX_PENDING` skill-days were already kept."""
        self.writes = 0
        """Documents written."""
        self._lock = threading.Lock()
        self._counts: dict[_Slot, dict[str, list[int]]] = {}
        self._pending = 0
        self._dirty: set[_Slot] = set()
        self._read_only: set[str] = set()
        self._logged: set[str] = set()
        self._armed = False
        self._task: asyncio.Task[None] | None = None  # the timer (held: a loop keeps only weak references)
        self._flight: concurrent.futures.Future[None] | None = None
        _RECORDERS.add(self)

    def count(self, library_prefix: str, skill_id: str, event: str, outcome: str) -> None:
        """Count one use of `skill_id` of the library at `library_prefix` (no I/O; never raises).

        `event` and `outcome` are a usage record's (`s3skills.skills.usage.log_usage`):
        a `skill_load` with outcome `ok` is a load; any other outcome is a failure.
        """
        if not self.enabled:
            return
        try:
            prefix = self.layout.usage_prefix(library_prefix)
            if prefix in self._read_only:
                return
            slot = (prefix, self.clock())
            with self._lock:
                skills = self._counts.get(slot)
                counts = skills.get(skill_id) if skills is not None else None
                if counts is None:
                    if self._pending >= MAX_PENDING:
                        self.dropped += 1
                        self._log_once("full", "usage counts: %d skill-days kept; new ones are dropped", MAX_PENDING)
                        return
                    counts = self._counts.setdefault(slot, {})[skill_id] = [0] * len(COUNTED)
                    self._pending += 1
                if event == "skill_load" and outcome == "ok":
                    counts[0] += 1
                elif outcome != "ok":
                    counts[1] += 1
                if event == "script_run":
                    counts[2] += 1
                elif event == "skill_execution":
                    counts[3] += 1
                self._dirty.add(slot)
                arm = not self._armed
                self._armed = True
            if arm:
                io_loop().call_soon_threadsafe(self._start)
        except Exception as exc:  # counting is never worth failing a load
            self._log_once(type(exc).__name__, "usage counts: %s", exc)

    def _log_once(self, what: str, message: str, *args: object) -> None:
        if what not in self._logged:
            self._logged.add(what)
            logger.warning(message, *args)

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._periodic())

    async def _periodic(self) -> None:
        """Write every `interval` seconds while there are counts to write, then stop."""
        try:
            while True:
                await asyncio.sleep(self.interval)
                await self.aflush()
                with self._lock:
                    if not self._dirty:  # `count` arms it again (it reads the flag under this lock)
                        self._armed = False
                        return
        except asyncio.CancelledError:  # its loop is closing: `aflush` at close writes the rest
            with self._lock:
                self._armed = False
            raise

    async def aflush(self) -> None:
        """Write the documents with new counts now (one PUT each); never raises.

        Two flushes never write at once (the later waits), so a document's newer counts are
        never overwritten by older ones.
        """
        while True:
            with self._lock:
                running = self._flight
                if running is None:
                    flight = self._flight = concurrent.futures.Future()
                    break
            await asyncio.wrap_future(running)
        try:
            await self._write()
        except Exception as exc:
            self._log_once(type(exc).__name__, "usage counts not written: %s", exc)
        finally:
            with self._lock:
                self._flight = None
            flight.set_result(None)

    async def _write(self) -> None:
        today = self.clock()
        with self._lock:
            slots = sorted(self._dirty)
            self._dirty.clear()
            docs = {slot: self._document(slot) for slot in slots}
        jobs = [partial(self._write_one, slot, data, today) for slot, data in docs.items()]
        await gather_limited(jobs, WRITE_CONCURRENCY)

    async def _write_one(self, slot: _Slot, data: bytes, today: date) -> None:
        """One document written (never raises: a failure is logged once and tried again later)."""
        prefix, day = slot
        ok = False
        try:
            await self.store.aput(f"{prefix}{day.isoformat()}/{self.writer}.json", data, content_type=_JSON)
            ok = True
            self.writes += 1
        except AccessDenied as exc:
            if len(self._read_only) < MAX_PENDING:
                self._read_only.add(prefix)
            self._log_once("denied", "usage counts of %s are not written (read-only?): %s", prefix, exc)
        except Exception as exc:  # a store error, or anything else: never the load's problem
            self._log_once(type(exc).__name__, "usage counts not written: %s", exc)
        with self._lock:
            # A past day's last write makes its document final; a failed one is tried again
            # while the day is recent and the library writable.
            final = day < today if ok else prefix in self._read_only or day < today - timedelta(days=1)
            if final:
                self._forget(slot)
            elif not ok:
                self._dirty.add(slot)  # the next flush writes it again (its counts are cumulative)

    def discard(self) -> None:
        """Forget the counts not written yet (nothing is written for them)."""
        with self._lock:
            self._counts.clear()
            self._dirty.clear()
            self._pending = 0

    def _forget(self, slot: _Slot) -> None:
        self._dirty.discard(slot)
        self._pending -= len(self._counts.pop(slot, {}))

    def _document(self, slot: _Slot) -> bytes:
        skills = {
            skill_id: {name: value for name, value in zip(COUNTED, counts, strict=True) if value}
            for skill_id, counts in sorted(self._counts.get(slot, {}).items())
        }
        doc = {"schema": USAGE_SCHEMA, "day": slot[1].isoformat(), "writer": self.writer, "skills": skills}
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")


_RECORDERS: weakref.WeakSet[UsageRecorder] = weakref.WeakSet()


def discard_pending_usage() -> None:
    """Forget the counts every recorder of the process has not written yet.

    For test suites: a test's counts must not land, a flush interval later, in the bucket of
    a test that runs after it (the store of a test is reset between tests).
    """
    for recorder in list(_RECORDERS):
        recorder.discard()


@dataclass
class StoredUsage:
    """What a library's usage documents say about the last `WINDOW_DAYS` days.

    Attributes:
        days: The days of the window, oldest first.
        loads: skill id -> loads per day (aligned with `days`).
        failures: skill id -> failed loads and runs in the window.
        refused: Why each document that did not check out was left out (key and reason).
    """

    days: list[date]
    loads: dict[str, list[int]] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)


class UsageReader:
    """Reads a library's usage documents, keeping what it decoded by (key, ETag).

    Args:
        store: Where the library is.
        cache: Keep decoded documents and the listings of final days (False: read
            everything again each time; for comparison in tests).
    """

    def __init__(self, store: ObjectStore, *, cache: bool = True) -> None:
        self.store = store
        self.cache = cache
        self._lock = threading.Lock()
        self._docs: dict[str, tuple[str, Entries | str]] = {}  # key -> (ETag, entries or why refused)
        self._final: dict[tuple[str, date], tuple[list[tuple[str, str, int]], list[str]]] = {}  # final days

    async def aread(self, usage_prefix: str, today: date | None = None) -> StoredUsage:
        """The usage of the `WINDOW_DAYS` days up to `today` under `usage_prefix`.

        Costs one LIST per day (none for a day older than yesterday listed before) and one
        GET per document not decoded before at its ETag.

        Raises:
            S3SkillsError: A listing failed (a document that cannot be read is refused instead).
        """
        today = today or _today()
        days = [today - timedelta(days=n) for n in range(WINDOW_DAYS - 1, -1, -1)]
        usage = StoredUsage(days)
        listings = await gather_limited(
            [partial(self._listing, usage_prefix, day, today, usage) for day in days], READ_CONCURRENCY
        )
        wanted = []
        budget = MAX_READ_BYTES
        for i in range(len(days) - 1, -1, -1):  # newest first: the recent days are the ones kept
            for key, etag, size in listings[i]:
                if size > MAX_USAGE_BYTES or size <= budget:  # (over its own cap: refused unread)
                    budget -= size if size <= MAX_USAGE_BYTES else 0
                    wanted.append((i, key, etag, size))
                else:
                    usage.refused.append(f"{key}: not read, the window's documents are over {MAX_READ_BYTES} bytes")
        with self._lock:
            known = {key: hit for _, key, etag, _ in wanted if (hit := self._docs.get(key)) and hit[0] == etag}
        stale = [(key, etag, size) for _, key, etag, size in wanted if key not in known]
        got = await gather_limited([partial(self._document, *item) for item in stale], READ_CONCURRENCY)
        found = {**known, **dict(zip((key for key, _, _ in stale), got, strict=True))}
        if self.cache:
            window = {key for _, key, _, _ in wanted}
            with self._lock:
                self._docs = {k: v for k, v in {**self._docs, **found}.items() if k in window}
                self._final = {k: v for k, v in self._final.items() if k[1] >= days[0]}
        for i, key, _, _ in wanted:
            entries = found[key][1]
            if isinstance(entries, str):
                usage.refused.append(f"{key}: {entries}")
                continue
            for skill_id, counts in entries:
                if counts[0]:
                    usage.loads.setdefault(skill_id, [0] * WINDOW_DAYS)[i] += counts[0]
                if counts[1]:
                    usage.failures[skill_id] += counts[1]
        return usage

    async def _listing(self, prefix: str, day: date, today: date, usage: StoredUsage) -> list[tuple[str, str, int]]:
        """(key, ETag, size) of the documents of `day` (kept once the day is final)."""
        final = day < today - timedelta(days=1)
        with self._lock:
            kept = self._final.get((prefix, day)) if self.cache and final else None
        if kept is None:
            folder = f"{prefix}{day.isoformat()}/"
            objects, _ = await self.store.alist(folder)
            out: list[tuple[str, str, int]] = []
            notes = []
            for o in sorted(objects, key=lambda o: o.key):
                name = o.key[len(folder) :] if o.key.startswith(folder) else ""
                if not (name.endswith(".json") and _WRITER_RE.match(name[:-5])):
                    notes.append(f"{o.key[:300]}: not a usage document's key ({folder}<writer>.json)")
                elif len(out) < MAX_WRITERS_PER_DAY:
                    out.append((o.key, o.etag, o.size))
                elif len(notes) < MAX_WRITERS_PER_DAY:
                    notes.append(f"{o.key[:300]}: more than {MAX_WRITERS_PER_DAY} documents that day; not read")
            kept = (out, notes[:MAX_WRITERS_PER_DAY])
            if self.cache and final:
                with self._lock:
                    self._final[(prefix, day)] = kept
        usage.refused.extend(kept[1])
        return kept[0]

    async def _document(self, key: str, etag: str, size: int) -> tuple[str, Entries | str]:
        """(ETag, entries) of the document at `key`, or (ETag, why it is refused)."""
        if size > MAX_USAGE_BYTES:
            return etag, f"the usage document is {size} bytes; the limit is {MAX_USAGE_BYTES}"
        try:
            body = await self.store.aget(key, max_bytes=MAX_USAGE_BYTES)
        except S3SkillsError as exc:
            return etag, f"cannot be read ({exc})"
        day, _, name = key.rpartition("/")
        day = day.rpartition("/")[2]
        if not _DAY_RE.match(day):
            return body.etag, "not under a day's folder"
        convert = partial(decode_usage, day=day, writer=name.removesuffix(".json"))
        try:
            return body.etag, await default_decoder().adecode(
                USAGE_DOCUMENT, body.data, key=key, etag=body.etag, convert=convert
            )
        except ValueError as exc:
            return body.etag, str(exc)
