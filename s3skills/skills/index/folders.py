"""Skill folders' listings and their files' bytes, trusted as long as the library's index is.

With a catalog TTL (`Config.catalog_ttl`, `s3skills mcp --catalog-ttl`; the shared
library's `Config.shared_catalog_ttl`, 5 s by default), a library's index is trusted
without a request for the TTL: the deployment accepted that a write shows within it (the
kill switch and a disabled skill reach readers within the same TTL). A skill folder is read
under the same promise: its LIST answers the folder's files and the nested-skill check for
the TTL of its library (from when it was sent), and a file's bytes are kept by its key and
the ETag a listing names. So `load_skill` and `read_skill_file` cost no request while the
listing is fresh. An invalidation of the library (`SkillLibrary.invalidate`, which the
library's own writers call) ends every listing taken before it, and a body is only served
for the ETag a fresh listing names: nothing is served that is older than the TTL promises.

A small library is listed whole: on a miss in a library of at most `WHOLE_LIBRARY_SKILLS`
skill folders whose files fit one LIST page (`MAX_LISTED`), one LIST of the library's prefix
gives every skill folder its listing, with the same stamp (so `load_skill` across 20 skills
costs 1 LIST per TTL, not 20), and concurrent misses of that library share the one LIST. A
larger library is listed folder by folder, as a library found over one page is for the rest
of its index's generation (its second page, read once, says so).

Without a TTL the library's index is refreshed by every call, and `SkillReads.aopen` reads
the bucket as before (no listing is kept); reads pinned to a version (a thread's or a
channel's) never use this cache.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Callable

from s3skills.config import Limits
from s3skills.errors import FileTooLarge, NotFound
from s3skills.ids import SKILL_FILE
from s3skills.skills.index.catalog import LibraryIndex
from s3skills.storage import ObjectBody, ObjectInfo, ObjectStore

__all__ = ["MAX_FOLDERS", "MAX_LISTED", "WHOLE_LIBRARY_SKILLS", "FolderCache", "FolderStamp"]

MAX_FOLDERS = 4096
"""Listings kept at most (least recently used out first)."""

MAX_LISTED = 1000
"""A folder listing more objects than this (more than one LIST page) is not kept."""

WHOLE_LIBRARY_SKILLS = 100
"""A library with at most this many skill folders is listed whole on a miss (0: never)."""

FolderStamp = tuple["weakref.ref[LibraryIndex]", int, float]
"""When a listing was sent: its library's index, that index's generation, the catalog clock."""


class FolderCache:
    """Listings of skill folders by key prefix, and file bodies by (key, ETag), within budgets.

    Shared by every tenant of a library: keyed by object keys and ETags, never by anything a
    client sent. Bodies take at most `limits.body_cache_bytes`; one over a quarter of that is
    served but never kept.

    Args:
        store: The store the folders are in.
        limits: `body_cache_bytes` bounds the bodies.
        ttl_of: Seconds an index of a `user` or `shared` library is trusted (`SkillCatalog.ttl_of`).
        clock: The catalog's clock (`SkillCatalog.clock`; tests move it).
    """

    def __init__(
        self, store: ObjectStore, limits: Limits, ttl_of: Callable[[str], float | None], clock: Callable[[], float]
    ) -> None:
        self.store = store
        self.limits = limits
        self.ttl_of = ttl_of
        self.clock = clock
        self._listings: OrderedDict[str, tuple[FolderStamp, dict[str, ObjectInfo]]] = OrderedDict()
        self._bodies: OrderedDict[tuple[str, str], ObjectBody] = OrderedDict()
        self._bytes = 0
        self._flights: dict[tuple[str, asyncio.AbstractEventLoop], asyncio.Future[bool]] = {}
        self._too_big: OrderedDict[str, tuple[weakref.ref[LibraryIndex], int]] = OrderedDict()

    async def alist(self, library: LibraryIndex, folder: str) -> dict[str, ObjectInfo]:
        """The objects under a skill folder of `library` by key: kept, or listed (then kept).

        A miss costs 1 LIST of the folder, or, in a small library, a share of 1 LIST of the
        whole library that answers every skill folder of it.
        """
        listed = self.listing(library, folder)
        if listed is None and self._whole_worth(library) and await self._alist_library(library):
            listed = self.listing(library, folder)
        if listed is None:
            stamp = self.stamp(library)  # before the LIST: its age counts from when it was sent
            objects, _ = await self.store.alist(folder)
            listed = self.keep_listing(stamp, folder, objects)
        return listed

    def _whole_worth(self, library: LibraryIndex) -> bool:
        """Whether a miss in `library` lists it whole: small, and not found over a page."""
        big = self._too_big.get(library.prefix)
        if big is not None and big[0]() is library and big[1] == library.generation:
            return False
        return len(library.entries) <= WHOLE_LIBRARY_SKILLS and len(library.skill_folders()) <= WHOLE_LIBRARY_SKILLS

    async def _alist_library(self, library: LibraryIndex) -> bool:
        """Share (or send) the one LIST of `library` in flight on this loop; False if too big."""
        key = (library.prefix, asyncio.get_running_loop())
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._list_library(library))
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._flights.pop(key) if self._flights.get(key) is done else None)
        return await asyncio.shield(flight)

    async def _list_library(self, library: LibraryIndex) -> bool:
        """List `library` whole in one page and keep every skill folder's listing from it."""
        stamp = self.stamp(library)
        pages = self.store.alist_pages(library.prefix, page_size=MAX_LISTED)
        try:
            first = await anext(pages, None)
            more = first is not None and await anext(pages, None) is not None
        finally:
            await pages.aclose()  # type: ignore[attr-defined]
        if more:
            self._too_big[library.prefix] = (weakref.ref(library), library.generation)
            while len(self._too_big) > MAX_FOLDERS:  # one per library: bounded like the listings
                self._too_big.popitem(last=False)
            return False
        folders = library.skill_folders()
        owned: dict[str, list[ObjectInfo]] = {f: [] for f in folders}
        start = len(library.prefix)
        for info in first.objects if first is not None else ():
            if not info.key.startswith(library.prefix):
                continue  # the store answered a key outside the prefix asked: never any folder's
            cut = info.key.find("/", start)
            while cut >= 0:  # every skill folder above the key, nested ones included
                held = owned.get(info.key[start : cut + 1])
                if held is not None:
                    held.append(info)
                cut = info.key.find("/", cut + 1)
        for folder, objects in owned.items():
            self.keep_listing(stamp, library.prefix + folder, objects)
        return True

    async def aopen(self, library: LibraryIndex, folder: str, key: str, above: list[str], max_bytes: int) -> ObjectBody:
        """One file of a skill folder of `library`, as its listing names it (no request when kept).

        Args:
            library: The index of the skill's library (one with a TTL).
            folder: The skill folder's key prefix (ends with `/`).
            key: The file's key (below `folder`).
            above: The folders (relative to `folder`, each ending with `/`) between the skill
                folder and the file: one holding a `SKILL.md` makes the file a nested skill's.
            max_bytes: Largest file read.

        Raises:
            NotFound: The listing has no such file, or it belongs to a nested skill.
            FileTooLarge: The file is over `max_bytes`.
        """
        listed = await self.alist(library, folder)
        info = listed.get(key)
        if info is None or any(folder + f + SKILL_FILE in listed for f in above):
            raise NotFound(key[len(folder) :])
        if info.size > max_bytes:
            raise FileTooLarge(f"get: the object is {info.size} bytes; the limit is {max_bytes}")
        body = self.body(info.key, info.etag)
        if body is None:
            body = await self.store.aget(info.key, max_bytes=max_bytes)
            if body.etag == info.etag:  # changed since the listing: served, not kept
                self.keep_body(body)
        return body

    def stamp(self, library: LibraryIndex) -> FolderStamp:
        """What a listing sent now is valid for (take it before the LIST)."""
        return weakref.ref(library), library.generation, self.clock()

    def listing(self, library: LibraryIndex, folder: str) -> dict[str, ObjectInfo] | None:
        """The objects under `folder` by key, if listed within the TTL of `library` (no request)."""
        kept = self._listings.get(folder)
        if kept is None:
            return None
        (index, generation, sent), listed = kept
        ttl = self.ttl_of(library.source)
        if index() is not library or generation != library.generation or not ttl or not 0 <= self.clock() - sent < ttl:
            del self._listings[folder]  # too old, or the library was invalidated since: trusted no more
            return None
        self._listings.move_to_end(folder)
        return listed

    def keep_listing(self, stamp: FolderStamp, folder: str, objects: list[ObjectInfo]) -> dict[str, ObjectInfo]:
        """Keep a listing of `folder` taken after the refresh `stamp` names; its objects by key."""
        listed = {o.key: o for o in objects}
        if len(listed) <= MAX_LISTED:
            self._listings[folder] = (stamp, listed)
            self._listings.move_to_end(folder)
            while len(self._listings) > MAX_FOLDERS:
                self._listings.popitem(last=False)
        return listed

    def body(self, key: str, etag: str) -> ObjectBody | None:
        """The body of `key` at `etag`, if kept (no request)."""
        body = self._bodies.get((key, etag))
        if body is not None:
            self._bodies.move_to_end((key, etag))
        return body

    def keep_body(self, body: ObjectBody) -> None:
        """Keep a body read whole (by its key and the ETag the store returned with it)."""
        size, cache_key = len(body.data), (body.key, body.etag)
        if size > self.limits.body_cache_bytes // 4 or cache_key in self._bodies or size != body.size:
            return
        self._bodies[cache_key] = body
        self._bytes += size
        while self._bytes > self.limits.body_cache_bytes and self._bodies:
            _, dropped = self._bodies.popitem(last=False)
            self._bytes -= len(dropped.data)

    @property
    def size(self) -> int:
        """Bytes of file bodies held now."""
        return self._bytes
