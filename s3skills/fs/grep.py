"""grep, bounded per call: stream through the candidates and stop once the answer is known.

`S3Backend.agrep` lists the area and hands the candidates here, in path order. Files
are fetched a few at a time (`Limits.concurrency` requests and at most
`Limits.max_grep_file_bytes` bytes in flight) and searched as they arrive; the search
stops at the match cap, at `Limits.max_grep_scan_bytes` bytes fetched, and skips
files over `Limits.max_grep_file_bytes`, saying so in the result. Matching scans the
text with `str.find`, in a worker thread for large texts, off the shared I/O loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from deepagents.backends.protocol import GrepMatch, GrepResult

from s3skills._loop import offload
from s3skills.config import Limits
from s3skills.errors import BinaryFile, FileTooLarge, NotFound
from s3skills.fs import fileops
from s3skills.storage import ObjectInfo

__all__ = ["grep_files", "grep_text"]

_OFFLOAD_BYTES = 256 * 1024
"""Texts larger than this are searched in a worker thread, off the shared I/O loop."""


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n // 1024} KiB" if n >= 1024 else f"{n} bytes"


def grep_text(path: str, data: bytes, pattern: str, limit: int) -> list[GrepMatch]:
    """The first `limit` lines of `data` holding `pattern` literally (none for binary data).

    Scans with `str.find` rather than splitting the text, so a file of a million short
    lines costs no million strings when only the first few matches are wanted.
    """
    try:
        text = fileops.decode_text(data, path)
    except BinaryFile:
        return []
    if "\n" in pattern:
        return []  # lines never hold a newline
    out: list[GrepMatch] = []
    pos = counted = 0
    line = 1
    while len(out) < limit:
        hit = text.find(pattern, pos)
        if hit < 0:
            break
        start = text.rfind("\n", 0, hit) + 1
        end = text.find("\n", hit)
        end = len(text) if end < 0 else end
        line += text.count("\n", counted, start)
        counted = start
        out.append(GrepMatch(path=path, line=line, text=text[start:end].rstrip("\r")))
        pos = end + 1
    return out


Fetch = Callable[[str, ObjectInfo, int], Awaitable[bytes]]
"""`fetch(virtual path, object, max_bytes)`: the bytes to search (the caller decides which
version of the object: a loaded skill's file as the thread pinned it). Raises `NotFound` or
`FileTooLarge` when the object is gone or grew since the listing."""


async def grep_files(
    fetch: Fetch, limits: Limits, pattern: str, files: list[tuple[str, ObjectInfo]], max_count: int | None
) -> GrepResult:
    """Search `files` (virtual path, object; in the order to search) within `limits`.

    See `S3Backend.agrep` for what comes back when a limit cuts the search.
    """
    cap = limits.max_grep_matches if max_count is None else max(0, min(max_count, limits.max_grep_matches))
    too_big = [p for p, o in files if o.size > limits.max_grep_file_bytes]
    planned: list[tuple[str, ObjectInfo]] = []
    budget = limits.max_grep_scan_bytes
    for item in (f for f in files if f[1].size <= limits.max_grep_file_bytes):
        if item[1].size > budget:
            break
        budget -= item[1].size
        planned.append(item)
    unscanned = [p for p, o in files if o.size <= limits.max_grep_file_bytes][len(planned) :]
    found, searched, more = await _scan(fetch, limits, pattern, planned, cap)
    notes: list[str] = []
    if more and cap < (max_count if max_count is not None else cap + 1):
        notes.append(
            f"The search stopped at {cap} matches, the most one search returns. "
            "Use a more specific pattern, a narrower path or a glob."
        )
    if unscanned and not more:
        notes.append(
            f"The search stopped after {_size(limits.max_grep_scan_bytes - budget)} of file contents "
            f"(the limit per search): {len(unscanned)} file(s) were not searched, from '{unscanned[0]}' on. "
            "Search a narrower path or pass a glob (e.g. glob='*.md')."
        )
    if too_big:
        shown = ", ".join(f"'{p}'" for p in too_big[:3]) + (" ..." if len(too_big) > 3 else "")
        notes.append(
            f"{len(too_big)} file(s) over {_size(limits.max_grep_file_bytes)} were not searched ({shown}): "
            "read them with read_file, a window of lines at a time (offset, limit)."
        )
    truncated = more or bool(unscanned) or bool(too_big)
    if not notes:
        return GrepResult(matches=found, truncated=truncated)
    if not found:
        notes.insert(0, f"No matches in the {searched} file(s) searched.")
    return GrepResult(matches=found, truncated=True, error=" ".join(notes))


async def _scan(
    fetch_object: Fetch, limits: Limits, pattern: str, files: list[tuple[str, ObjectInfo]], cap: int
) -> tuple[list[GrepMatch], int, bool]:
    """Fetch and search `files` in order until `cap` matches are known to be exceeded.

    Fetches run ahead of the search within `Limits.concurrency` requests and
    `Limits.max_grep_file_bytes` bytes in flight (always at least one), so a search
    that stops early has fetched little past the point where it stopped. Large texts
    are searched off the I/O loop.

    Returns:
        The matches (at most `cap`), how many files were searched, and whether a
        match past `cap` exists.
    """
    window = limits.max_grep_file_bytes

    async def fetch(file_path: str, obj: ObjectInfo) -> bytes | None:
        try:
            return await fetch_object(file_path, obj, limits.max_grep_file_bytes)
        except (NotFound, FileTooLarge):
            return None  # deleted or grown since the listing

    found: list[GrepMatch] = []
    inflight: deque[tuple[str, int, asyncio.Task[bytes | None]]] = deque()
    inflight_bytes = searched = 0
    position = 0
    try:
        while position < len(files) or inflight:
            while position < len(files) and len(inflight) < limits.concurrency:
                file_path, obj = files[position]
                if inflight and inflight_bytes + obj.size > window:
                    break
                inflight.append((file_path, obj.size, asyncio.ensure_future(fetch(file_path, obj))))
                inflight_bytes += obj.size
                position += 1
            head = inflight[0][2]
            # Results are used in path order, but a fetch that fails fails the search at once
            # (the others are cancelled below), whichever file it was.
            while not head.done():
                done, _ = await asyncio.wait([t for _, _, t in inflight], return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    failure = None if finished.cancelled() else finished.exception()
                    if failure is not None:
                        raise failure
            file_path, size, task = inflight.popleft()
            data = task.result()
            inflight_bytes -= size
            searched += 1
            if data is None:
                continue
            want = cap - len(found) + 1
            if len(data) > _OFFLOAD_BYTES:
                found.extend(await offload(grep_text, file_path, data, pattern, want))
            else:
                found.extend(grep_text(file_path, data, pattern, want))
            if len(found) > cap:
                return found[:cap], searched, True
        return found, searched, False
    finally:
        for _, _, pending in inflight:
            pending.cancel()
        await asyncio.gather(*(t for _, _, t in inflight), return_exceptions=True)
