"""`FileView`: what a tenant sees of the store, file by file (the read side of `S3Backend`).

It resolves virtual paths through the mounts, lists folders and search areas (only the
keys a mount owns, and for a loaded skill only the files of the version the thread
pinned), reads objects (a loaded skill's file as pinned), and says where a write may go.
It raises the project's exceptions; `S3Backend` turns them into `error=` strings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from deepagents.backends.protocol import FileInfo

from s3skills.config import Config
from s3skills.errors import InvalidPath, LimitExceeded, NotFound, ReadOnly
from s3skills.fs import fileops
from s3skills.fs.mounts import Location, Mounts, RootDir, SkillsDir, loaded_skill_of, mounts_of
from s3skills.ids import SkillId
from s3skills.paths import VPath
from s3skills.skills import anested_now
from s3skills.skills.versions.pinned import VerifiedKey, read_verified
from s3skills.storage import ObjectBody, ObjectInfo, ObjectStore
from s3skills.tenancy import Tenant

__all__ = ["FileView"]


class FileView:
    """The files a tenant may see, and where its writes go.

    Args:
        store: The object store.
        config: Limits and layout.
        mounts: The mount table.
    """

    def __init__(self, store: ObjectStore, config: Config, mounts: Mounts) -> None:
        self.store = store
        self.config = config
        self.mounts = mounts

    # -- listing -------------------------------------------------------------------------------

    async def entries(self, tenant: Tenant, vpath: VPath) -> list[FileInfo]:
        """The entries of one folder (1 LIST per 1,000 keys), at most `Limits.max_ls_entries`.

        Raises:
            LimitExceeded: The folder holds more entries than one listing returns.
        """
        target = await self.mounts.resolve(tenant, vpath)
        if isinstance(target, RootDir):
            return [fileops.file_info(f"/{name}/", is_dir=True) for name in mounts_of(tenant)]
        if isinstance(target, SkillsDir):
            leaves = sorted({SkillId.parse(s).leaf for s in await self.mounts.mounted(tenant)})
            return [fileops.file_info(f"/skills/{leaf}/", is_dir=True) for leaf in leaves]
        limit = self.config.limits.max_ls_entries
        objects: list[ObjectInfo] = []
        prefixes: list[str] = []
        async for page in self.store.alist_pages(target.dir_prefix, delimiter="/"):
            objects.extend(page.objects)
            prefixes.extend(page.prefixes)
            if len(objects) + len(prefixes) > limit + 1:  # +1: the folder's own marker
                raise LimitExceeded(
                    f"'{vpath}' holds more than {limit} entries, the most one listing shows. List one of its "
                    f"subfolders, or find files with glob and a pattern (e.g. glob('*.md', path='{vpath}'))."
                )
        shown = self.in_pinned_version(tenant, target)
        entries = [
            fileops.file_info(target.vpath(o.key), is_dir=False, size=o.size, modified=o.last_modified)
            for o in objects
            if o.key != target.dir_prefix and not o.key.endswith("/") and target.owns(o.key) and shown(o.key)
        ]
        entries.extend(fileops.file_info(target.vpath(p), is_dir=True) for p in prefixes if target.owns(p))
        entries.sort(key=lambda e: e["path"])
        return entries

    async def located(self, tenant: Tenant, vpath: VPath) -> list[tuple[str, ObjectInfo, Location]]:
        """Every file a grep/glob of `vpath` covers: (virtual path, object, its location)."""
        roots = await self.mounts.search_roots(tenant, vpath)
        listings = await asyncio.gather(*(self.mounts.objects_under(loc) for loc in roots))
        shown = [self.in_pinned_version(tenant, loc) for loc in roots]
        return [
            (loc.vpath(o.key), o, loc.with_rel(tuple(o.key[len(loc.prefix) :].split("/"))))
            for loc, objs, keep in zip(roots, listings, shown, strict=True)
            for o in objs
            if keep(o.key)
        ]

    @staticmethod
    def in_pinned_version(tenant: Tenant, loc: Location) -> Callable[[str], bool]:
        """Which keys of `loc` exist in the version of its skill the thread reads.

        Only a versioned pin knows (a file added since the load is not part of it);
        otherwise every key is shown, and reading a changed one asks for a reload.
        """
        skill_id = loaded_skill_of(tenant, loc)
        pin = tenant.skill_versions.get(skill_id) if skill_id is not None else None
        if pin is None or not pin.versioned:
            return lambda _key: True
        return lambda key: key[len(loc.prefix) :] in pin.files

    @staticmethod
    def relative(vpath: VPath, file_path: str) -> str:
        """`file_path` relative to the searched folder `vpath` (what glob patterns match)."""
        base = str(vpath).rstrip("/")
        if file_path == base:
            return file_path.rsplit("/", 1)[-1]
        return file_path[len(base) + 1 :]

    # -- reading -------------------------------------------------------------------------------

    async def read_object(self, tenant: Tenant, target: Location, max_bytes: int) -> ObjectBody:
        """GET one object (1 request); a loaded skill's file as the thread loaded it (its pin)."""
        skill_id = loaded_skill_of(tenant, target)
        pin = tenant.skill_versions.get(skill_id) if skill_id is not None else None
        if pin is None:
            read = self.store.aget(target.key, max_bytes=max_bytes)
        else:  # the pin comes from graph state (client input): the answer is checked against it
            read = _body(read_verified(self.store, target.prefix, "/".join(target.rel), pin, max_bytes=max_bytes))
        if target.mount != "skills":
            return await read
        # A folder of the skill that holds a SKILL.md now is another skill's (the one rule of
        # `anested_now`), even when the index that built `target` predates it.
        body, nested = await asyncio.gather(read, anested_now(self.store, target.prefix, target.rel))
        if nested:
            raise NotFound(target.vpath(target.key))
        return body

    async def get_file(self, tenant: Tenant, vpath: VPath) -> tuple[Location, bytes, str, datetime | None]:
        """A file's location, bytes, ETag and time (the seeds' `.md` fallback included).

        Raises:
            NotFound: No such file (a folder is not a file).
        """
        target = await self.mounts.resolve(tenant, vpath)
        if not isinstance(target, Location) or not target.rel:
            raise NotFound(str(vpath))
        limit = self.config.limits.max_file_bytes
        try:
            body = await self.read_object(tenant, target, limit)
        except NotFound:
            if vpath.suffix:
                raise
            # The seeds' convention: `/skills/pdf/forms` means `forms.md`.
            target = target.with_rel((*target.rel[:-1], target.rel[-1] + ".md"))
            body = await self.read_object(tenant, target, limit)
        return target, body.data, body.etag, body.last_modified

    # -- writing -------------------------------------------------------------------------------

    async def writable(self, tenant: Tenant, vpath: VPath) -> Location:
        """Where a write of `vpath` goes.

        Raises:
            ReadOnly: `/skills`, `/ticket` (unless writable) and the virtual folders.
            InvalidPath: Outside every mount, or a folder.
        """
        try:
            target = await self.mounts.resolve(tenant, vpath)
        except NotFound:
            if vpath.parts and vpath.parts[0] in ("skills", "ticket"):
                raise ReadOnly(str(vpath)) from None
            raise InvalidPath(f"Cannot write '{vpath}': files can only be written under /workspace.") from None
        if not isinstance(target, Location):
            raise ReadOnly(str(vpath))
        if not target.writable:
            raise ReadOnly(str(vpath))
        if not target.rel:
            raise InvalidPath(f"Cannot write '{vpath}': it is a folder; give a file name.")
        return target


async def _body(read: Awaitable[tuple[ObjectBody, VerifiedKey | None]]) -> ObjectBody:
    return (await read)[0]
