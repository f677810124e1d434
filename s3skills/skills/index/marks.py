"""Writers mark a library as being written, so a writer that dies leaves no stale index.

A push writes many objects, then updates the library's manifest last. Killed in between
(SIGKILL, a lost machine), it used to leave the manifest from before the push, and every
fresh reader trusted it until the verify interval ran out: skills pushed were missing, skills
deleted still listed. Now a writer, before its first write, records a mark in the manifest
(a conditional write; the manifest is created holding only the mark when there is none), renews it
while it writes, and clears it in the manifest update it makes last. A reader that meets a live
mark indexes from a listing (entries it holds are reused by ETag, so it reads only what
changed) and keeps the mark when it rewrites the manifest; a mark not renewed within
`WRITE_LEASE` seconds belongs to a writer that died, and the next reader's rewrite drops it.
A manifest without a mark costs a reader nothing more: its one conditional GET.

Marks come from anyone who can write the library: they can only make readers list (what a
reader does without a manifest); they are bounded (`MAX_MARKS`) and schema-checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable

from s3skills.errors import Conflict, S3SkillsError
from s3skills.skills.index.manifest import (
    MAX_MARKS,
    MAX_WRITE_ATTEMPTS,
    LibraryBuilder,
    Manifest,
    SkillEntry,
    aread_manifest,
    awrite_manifest,
)
from s3skills.storage import ObjectStore

__all__ = ["WRITE_LEASE", "amark", "amerge_write", "live_marks", "marking"]

WRITE_LEASE = 300.0
"""Seconds a mark stays live without renewal (a writer renews it every quarter of this)."""

_CLOCK_SKEW = 60.0


def live_marks(manifest: Manifest | None, now: float) -> dict[str, float]:
    """The marks of writers still writing (renewed within the lease; a future time counts too)."""
    if manifest is None:
        return {}
    return {m: t for m, t in manifest.writing.items() if now - WRITE_LEASE < t or t > now + _CLOCK_SKEW}


async def amark(
    store: ObjectStore,
    key: str,
    prefix: str,
    mark: str,
    build: LibraryBuilder,
    *,
    clock: Callable[[], float] = time.time,
) -> bool:
    """Record (or renew) `mark` in the manifest at `key` (1 GET and 1 conditional PUT, more on conflicts).

    With no manifest (or a damaged one) it is first built whole with `build` (a listing), so a
    marked manifest always describes the whole library as of its writing.

    Returns:
        False when it could not be recorded; the manifest is then removed, so no reader trusts it.
    """
    built: dict[str, SkillEntry] | None = None
    for attempt in range(MAX_WRITE_ATTEMPTS):
        found = await aread_manifest(store, key, prefix, "user", max_entries=1 << 30)
        if found is not None and found.valid:
            manifest = found
        else:
            built = built if built is not None else await build()
            manifest = Manifest(prefix, dict(built), built_at=clock(), verified_at=clock())
            manifest.etag = found.etag if found is not None else None
        now = clock()
        manifest.writing = {**live_marks(manifest, now), mark: now}
        if len(manifest.writing) > MAX_MARKS:  # too many writers at once: readers list anyway
            break
        try:
            await awrite_manifest(store, key, manifest)
            return True
        except Conflict:
            await asyncio.sleep(0.005 * (attempt + 1))
    with contextlib.suppress(S3SkillsError):
        await store.adelete_many([key])
    return False


@contextlib.asynccontextmanager
async def marking(
    store: ObjectStore,
    key: str | None,
    prefix: str,
    build: LibraryBuilder,
    *,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[str | None]:
    """Mark the library at `prefix` as being written for the duration of the block.

    Yields the mark id, for the writer's last manifest update (`anote_changed(mark=...)`),
    which clears it; None when the layout keeps no manifest (readers list anyway). The
    mark is renewed every `WRITE_LEASE / 4` seconds while the block runs. A block that
    raises leaves the mark: readers list until it expires, which is what they must do
    after a write cut short.
    """
    if key is None:
        yield None
        return
    mark = secrets.token_hex(8)
    await amark(store, key, prefix, mark, build, clock=clock)

    async def renew() -> None:
        while True:
            await asyncio.sleep(WRITE_LEASE / 4)
            with contextlib.suppress(S3SkillsError):
                await amark(store, key, prefix, mark, build, clock=clock)

    task = asyncio.ensure_future(renew())
    try:
        yield mark
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def amerge_write(
    store: ObjectStore,
    key: str,
    ours: Manifest,
    base: dict[str, str],
    *,
    source: str,
    max_entries: int,
    now: float,
) -> bool | None:
    """Store a reader's rebuilt manifest, merging what writers recorded meanwhile (3 tries).

    Args:
        ours: The manifest rebuilt from a listing (its `etag`: the one it replaces).
        base: Skill id -> ETag of the manifest the rebuild started from: an entry another
            writer changed since is taken from theirs, one they removed is removed.
        now: The reader's clock, for which marks are still live (those are kept).

    Returns:
        True when `ours` was stored (its `etag` is then the new one); False when another
        writer kept winning (the next refresh reads whatever won); None when the bucket
        refused the write (a read-only bucket: the manifest stays as it is).
    """
    for _ in range(3):
        try:
            await awrite_manifest(store, key, ours)
            return True
        except Conflict:
            latest = await aread_manifest(store, key, ours.prefix, source, max_entries=max_entries)
        except S3SkillsError:
            return None
        if latest is None:
            ours.etag = None
            continue
        ours.etag = latest.etag
        ours.writing = live_marks(latest, now)
        if latest.valid:  # keep what other writers recorded since our manifest was read
            for sid, entry in latest.entries.items():
                if base.get(sid) != entry.etag:
                    ours.entries[sid] = entry
            for sid in set(base) - set(latest.entries):
                ours.entries.pop(sid, None)
    return False
