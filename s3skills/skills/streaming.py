"""Read objects while their listing is still arriving: the cold index at the transfer limit.

A cold index of a library with no manifest (written by another tool) must LIST it and
read the head of every `SKILL.md`. Done one after the other, the reads wait for the
whole listing, and parsing waits for every read. `read_as_listed` overlaps the three:
each listing page's objects are handed to `concurrency` readers as soon as the page
arrives, and every `batch` results are parsed in a worker thread while the reads go on.
So the index costs about one round trip (the first page) more than reading the same
objects with no listing at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from s3skills.storage import ListPage, ObjectInfo

__all__ = ["read_as_listed"]

H = TypeVar("H")
R = TypeVar("R")


async def read_as_listed(
    pages: AsyncIterator[ListPage],
    wanted: Callable[[ObjectInfo], str | None],
    read: Callable[[ObjectInfo], Awaitable[H]],
    parse: Callable[[list[tuple[str, ObjectInfo, H]]], list[R]],
    *,
    concurrency: int,
    batch: int = 64,
    limit: int | None = None,
) -> tuple[list[ObjectInfo], list[R]]:
    """List, read and parse at once.

    Args:
        pages: The listing (`ObjectStore.alist_pages`).
        wanted: The name to read an object under (a skill id), or None to skip it.
        read: Reads one object (runs on the loop, `concurrency` at a time).
        parse: Turns a batch of `(name, object, read result)` into results (runs in a
            worker thread: CPU work).
        concurrency: Reads in flight.
        batch: Results parsed per thread call.
        limit: Read at most this many objects (the rest are listed, not read).

    Returns:
        Every listed object, and the parsed results (in no particular order).

    Raises:
        Whatever the listing or a read raised first; nothing it started outlives the call.
    """
    objects: list[ObjectInfo] = []
    queue: asyncio.Queue[tuple[str, ObjectInfo] | None] = asyncio.Queue()
    done: list[tuple[str, ObjectInfo, H]] = []
    parsing: list[asyncio.Future[list[R]]] = []

    def hand_over() -> None:
        if done:
            parsing.append(asyncio.ensure_future(asyncio.to_thread(parse, list(done))))
            done.clear()

    async def reader() -> None:
        while (item := await queue.get()) is not None:
            name, obj = item
            done.append((name, obj, await read(obj)))
            if len(done) >= batch:
                hand_over()

    sent = 0
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
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
    except BaseExceptionGroup as group_failure:
        failed = group_failure.exceptions[0]
    if failed is not None:  # raised as it was (its cause says why: a missing profile...)
        await asyncio.gather(*parsing, return_exceptions=True)
        raise failed
    hand_over()
    results: list[R] = []
    for chunk in await asyncio.gather(*parsing):
        results.extend(chunk)
    return objects, results
