"""Read objects while their listing is still arriving: the cold index at the transfer limit.

A cold index of a library with no manifest (written by another tool) must LIST it and
read the head of every `SKILL.md`. Done one after the other, the reads wait for the
whole listing, and parsing waits for every read. `read_as_listed` overlaps the three:
each listing page's objects are handed to `concurrency` readers as soon as the page
arrives, and the results are parsed while the reads go on. So the index costs about one
round trip (the first page) more than reading the same objects with no listing at all;
that first page is small (`first_page_small`): a server answers 100 keys in about a
round trip, 1,000 in several.

Parsing runs on the event loop, a few objects at a time (`slice_size`), yielding to the
reads between slices, not in a worker thread: a thread busy parsing holds the GIL for up
to the interpreter's switch interval (5 ms) each time the loop gives it up for a socket
call, and that convoy slowed every read of a 10,000-skill index (bench/README.md, issue
21). A slice stalls the loop no longer than a worker thread holding the GIL would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from s3skills.storage import ListPage, ObjectInfo, ObjectStore

__all__ = ["FIRST_PAGE", "first_page_small", "read_as_listed"]

H = TypeVar("H")
R = TypeVar("R")


async def read_as_listed(
    pages: AsyncIterator[ListPage],
    wanted: Callable[[ObjectInfo], str | None],
    read: Callable[[ObjectInfo], Awaitable[H]],
    parse: Callable[[list[tuple[str, ObjectInfo, H]]], list[R]],
    *,
    concurrency: int,
    slice_size: int = 8,
    weight: Callable[[H], int] | None = None,
    slice_weight: int = 32_768,
    limit: int | None = None,
) -> tuple[list[ObjectInfo], list[R]]:
    """List, read and parse at once.

    Args:
        pages: The listing (`ObjectStore.alist_pages`).
        wanted: The name to read an object under (a skill id), or None to skip it.
        read: Reads one object (runs on the loop, `concurrency` at a time).
        parse: Turns a batch of `(name, object, read result)` into results (CPU work, run
            on the loop one slice at a time).
        concurrency: Reads in flight.
        slice_size: Results parsed before the loop serves the reads again.
        weight: The parsing cost of one read result (bytes to parse); a slice also ends
            once it holds `slice_weight`, so big frontmatters are parsed one at a time
            and never stall other tenants' requests for long.
        slice_weight: The most weight parsed before the loop serves the reads again.
        limit: Read at most this many objects (the rest are listed, not read).

    Returns:
        Every listed object, and the parsed results (in no particular order).

    Raises:
        Whatever the listing or a read raised first; nothing it started outlives the call.
    """
    objects: list[ObjectInfo] = []
    queue: asyncio.Queue[tuple[str, ObjectInfo] | None] = asyncio.Queue()
    done: list[tuple[str, ObjectInfo, H]] = []
    results: list[R] = []
    ready = asyncio.Event()

    async def parser() -> None:
        while True:
            await ready.wait()
            ready.clear()
            while done:
                size, load = 0, 0
                while size < min(slice_size, len(done)) and (size == 0 or load < slice_weight):
                    load += weight(done[size][2]) if weight is not None else 0
                    size += 1
                chunk = done[:size]
                del done[:size]
                results.extend(parse(chunk))
                await asyncio.sleep(0)  # the reads go on between slices
            if finished.is_set() and not done:
                return

    async def reader() -> None:
        while (item := await queue.get()) is not None:
            name, obj = item
            done.append((name, obj, await read(obj)))
            ready.set()

    finished = asyncio.Event()
    sent = 0
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            parsing = group.create_task(parser())
            readers = [group.create_task(reader()) for _ in range(max(1, concurrency))]
            async for page in pages:
                objects.extend(page.objects)
                for obj in page.objects:
                    name = wanted(obj)
                    if name is not None and (limit is None or sent < limit):
                        queue.put_nowait((name, obj))
                        sent += 1
            for _ in readers:
                queue.put_nowait(None)
            await asyncio.gather(*readers)
            finished.set()
            ready.set()
            await parsing
    except BaseExceptionGroup as group_failure:
        failed = group_failure.exceptions[0]
    if failed is not None:  # raised as it was (its cause says why: a missing profile...)
        raise failed
    return objects, results


FIRST_PAGE = 100
"""Keys in the first listing page of a cold index: it comes back in about one round trip."""


async def first_page_small(store: ObjectStore, prefix: str) -> AsyncIterator[ListPage]:
    """The listing of `prefix`, its first page small, so the reads start a round trip in.

    A server lists 1,000 keys in several round trips' time (SeaweedFS: 0.1-0.25 s against
    0.035 s for 100), and a cold index reads nothing until its first page arrives. A
    library of `FIRST_PAGE` keys or more is then listed whole, in pages of 1,000, its
    first keys left out (1 LIST more than pages of 1,000 alone; key order not relied on).
    """
    seen: set[str] = set()
    first = store.alist_pages(prefix, page_size=FIRST_PAGE)
    try:
        async for page in first:
            yield page
            if len(page.objects) + len(page.prefixes) < FIRST_PAGE:
                return
            seen.update(obj.key for obj in page.objects)
            break
    finally:
        await _close(first)
    rest = store.alist_pages(prefix)
    try:
        async for page in rest:
            yield ListPage(tuple(obj for obj in page.objects if obj.key not in seen), page.prefixes)
    finally:
        await _close(rest)


async def _close(pages: AsyncIterator[ListPage]) -> None:
    """Close a listing left before its end (an async generator's pending request is dropped)."""
    aclose = getattr(pages, "aclose", None)
    if aclose is not None:
        await aclose()
