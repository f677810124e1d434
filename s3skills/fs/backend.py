"""`S3Backend`: deepagents' file protocol over S3, with mounts, tenancy and skill gating.

The virtual filesystem an agent sees (keys in the default layout, `KeyLayout()`):

| path                        | storage                                          | access     |
|-----------------------------|--------------------------------------------------|------------|
| `/workspace/...`            | `users/{user_id}/threads/{thread_id}/...`        | read-write |
| `/ticket/...`               | `tickets/{ticket_id}/...`                        | read-only  |
| `/skills/<leaf>/...`        | the loaded skill's folder (as the thread pinned) | read-only  |
| `/large_tool_results/...`,  | the thread's `large_tool_results/` and           | read-write |
| `/conversation_history/...` | `conversation_history/`                          |            |

The last two are where deepagents offloads big tool results and summarised
history; they live inside the thread's prefix (so they are also visible as
`/workspace/large_tool_results/...`) and are not listed in `ls("/")`. Resolving
paths and reading is `s3skills.fs.view.FileView`; the agent-facing error messages
are `s3skills.fs.messages`; grep is `s3skills.fs.grep`.

Every public method is `async` first (`als`, `aread`, ...); the sync methods are
generated from them. No method raises for an operational error: a missing key,
a rejected path, a read-only mount or an S3 fault after retries comes back in
the result's `error`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TypeVar

import aioboto3
from botocore.config import Config as BotoConfig
from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.utils import (
    InvalidGlobPatternError,
    compile_grep_include_glob,
    perform_string_replacement,
    slice_read_response,
)

from s3skills._loop import gather_limited, offload, on_io_loop, run_sync, sync_method
from s3skills.config import SHARED_CATALOG_TTL, Config, Limits, SkillsMode
from s3skills.errors import (
    BinaryFile,
    Conflict,
    FileTooLarge,
    InvalidPath,
    NotFound,
    UserNotResolved,
)
from s3skills.fs import fileops
from s3skills.fs.grep import grep_files
from s3skills.fs.messages import message, op_error
from s3skills.fs.mounts import Location, Mounts
from s3skills.fs.seeds_api import SeedsAPI
from s3skills.fs.view import FileView
from s3skills.layout import KeyLayout
from s3skills.paths import VPath
from s3skills.skills import SkillLibrary, SkillRegistry
from s3skills.storage import ObjectInfo, ObjectStore, S3ObjectStore
from s3skills.tenancy import Identity, Tenant, TenantResolver, context_identity, resolve_tenant

__all__ = ["S3Backend"]

T = TypeVar("T")


class S3Backend(SeedsAPI, BackendProtocol):
    """A deepagents backend whose files live in one S3 bucket, for many tenants.

    Args:
        bucket: The bucket.
        user_id: Fix the user for every call. Otherwise the `resolver` finds it
            (by default in the run's context: `context={"user_id": ...}`).
        thread_id: Fix the thread. Otherwise `config["configurable"]["thread_id"]`.
        ticket_id: Fix the ticket. Otherwise the run's context `ticket_id`.
        resolver: Who a call is for when not fixed: `context_identity` (default),
            `LangGraphAuthIdentity()` for LangGraph Server, or your own callable.
        endpoint_url: An S3-compatible endpoint; None for AWS.
        region_name: The region.
        session: An `aioboto3.Session` (credentials, profile).
        shared_prefix: The organisation library's name (`shared/{name}/skills/`),
            below the user's library in precedence.
        layout: Key templates: `KeyLayout()` (per-user, the default) or `KeyLayout.seeds()`.
        ticket_writable: Let agents write under /ticket.
        max_read_bytes: Largest object `read`/`edit`/`write` handle (`Limits.max_file_bytes`).
        max_grep_bytes: Larger files are skipped by `grep`.
        concurrency: Requests in flight for grep and batch operations.
        limits: All limits at once (overrides the three above).
        store: An `ObjectStore` to use instead of building one.
        retry_attempts: Attempts per request (botocore standard retry mode).
        botocore_config: Extra botocore `Config` merged over the defaults.
        catalog_ttl: Seconds the skill index is trusted without a request (None: ask on
            every query, so edits to a library show at once).
        shared_catalog_ttl: Seconds the shared library's index is trusted without a
            request, when longer than `catalog_ttl` (default `SHARED_CATALOG_TTL`, 5 s:
            edits made to it outside this process show within that; None: as
            `catalog_ttl`). See `Config.shared_catalog_ttl`.
        skills_mode: `gated` (default): /skills shows only the loaded skills.
            `library`: /skills shows the user's whole library read-only, as
            `/skills/<name>/`, so deepagents' own `SkillsMiddleware(sources=["/skills/"])`
            can read it (no progressive gating then).
        registry: Code skills, indexed with the S3 ones.
        config: A whole `Config` (overrides layout, shared_prefix, ttl, mode, limits).
        pdf_mode: How `read` returns a PDF: `file` (default), the file block that
            vision models read; `text`, its text extracted page by page (needs the
            `pdf` extra, pypdf), for models without vision. Either way a path ending
            in `#text` or `#pages=2-4` asks for the text of all or some pages.
        allow_anonymous: Let agent runs whose user cannot be resolved go on, with no
            skill library (and no `/workspace` in the per-user layout). By default such a
            run raises `UserNotResolved` (a `TenantError`) before the model is called:
            a missing user is an application bug, not a user with no skills.
        channel: Serve this channel of the libraries (`s3skills channel`): each skill at the
            version it names, none it does not (`Config.channel`; overrides `config`'s).
    """

    def __init__(
        self,
        bucket: str,
        *,
        user_id: str | None = None,
        thread_id: str | None = None,
        ticket_id: str | None = None,
        resolver: TenantResolver = context_identity,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        session: aioboto3.Session | None = None,
        shared_prefix: str | None = None,
        layout: KeyLayout | None = None,
        ticket_writable: bool = False,
        max_read_bytes: int | None = None,
        max_grep_bytes: int | None = None,
        concurrency: int | None = None,
        limits: Limits | None = None,
        store: ObjectStore | None = None,
        retry_attempts: int = 4,
        botocore_config: BotoConfig | None = None,
        catalog_ttl: float | None = None,
        shared_catalog_ttl: float | None = SHARED_CATALOG_TTL,
        skills_mode: SkillsMode = "gated",
        registry: SkillRegistry | None = None,
        config: Config | None = None,
        pdf_mode: fileops.PdfMode = "file",
        allow_anonymous: bool = False,
        channel: str | None = None,
    ) -> None:
        if pdf_mode not in ("file", "text"):
            raise ValueError("pdf_mode must be 'file' or 'text'")
        self.pdf_mode: fileops.PdfMode = pdf_mode
        self.allow_anonymous = allow_anonymous
        if config is None:
            base = limits or Limits()
            limits = replace(
                base,
                max_file_bytes=max_read_bytes or base.max_file_bytes,
                max_grep_file_bytes=max_grep_bytes or base.max_grep_file_bytes,
                concurrency=max(1, concurrency or base.concurrency),
            )
            config = Config(
                layout=layout or KeyLayout(),
                shared_library=shared_prefix,
                catalog_ttl=catalog_ttl,
                shared_catalog_ttl=shared_catalog_ttl,
                skills_mode=skills_mode,
                ticket_writable=ticket_writable,
                limits=limits,
            )
        if channel is not None:
            config = replace(config, channel=channel)
        self.config = config
        self.store: ObjectStore = store or S3ObjectStore(
            bucket,
            endpoint_url=endpoint_url,
            region_name=region_name,
            session=session,
            max_attempts=retry_attempts,
            max_pool_connections=max(config.limits.concurrency * 2, 10),
            config=botocore_config,
        )
        self._explicit = Identity(user_id, thread_id, ticket_id)
        self._resolver = resolver
        self._instance_skills: dict[str | None, list[str]] = {}
        # Checked now, so a bad value fails at construction rather than per call.
        resolve_tenant(self._explicit, resolver=lambda _c, _k: Identity())
        self.skills = SkillLibrary(self.store, config, registry=registry, tenant=self.tenant)
        self.mounts = Mounts(self.store, config, self.skills, self.tenant)
        self.view = FileView(self.store, config, self.mounts)

    @property
    def bucket(self) -> str:
        """The bucket name."""
        return self.store.bucket

    @property
    def layout(self) -> KeyLayout:
        """The key layout."""
        return self.config.layout

    def __repr__(self) -> str:
        return f"S3Backend(bucket={self.bucket!r}, user_id={self._explicit.user_id!r})"

    # -- tenancy ---------------------------------------------------------------------------

    def tenant(self) -> Tenant:
        """The identity of the current call (explicit values, else the resolver's)."""
        tenant = resolve_tenant(self._explicit, resolver=self._resolver, instance_skills=self._instance_skills)
        return self.config.check_tenant(tenant)

    def require_user(self) -> Tenant:
        """The current call's tenant, refused when it has no user (unless `allow_anonymous`).

        Agent front ends call it before the model runs (`SkillsPromptMiddleware`).

        Raises:
            UserNotResolved: No user id, and the backend was not built with `allow_anonymous=True`.
            TenantError, InvalidPath: Ids the layout or the allow-list refuses.
        """
        tenant = self.tenant()
        if tenant.user_id is None and not self.allow_anonymous:
            raise UserNotResolved(
                "This run has no user: pass it in the run's context (context={'user_id': ...}), check "
                "the backend's resolver (on LangGraph Server, the auth handler), or build the backend "
                "with S3Backend(..., allow_anonymous=True) to allow runs with no skill library."
            )
        return tenant

    # -- ls -------------------------------------------------------------------------------

    async def als(self, path: str) -> LsResult:
        """List a folder (non-recursive). Folders end with `/` and have `is_dir=True`."""

        async def run() -> LsResult:
            return LsResult(entries=await self.view.entries(await self.mounts.visible(), VPath.parse(path)))

        return await self._guard(run(), path, "list", lambda m: LsResult(error=m))

    # -- read -----------------------------------------------------------------------------

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Read a window of lines (1 GET). Images/PDF/audio/video come back base64.

        A PDF comes back as text instead (`[page N of M]` before each page, then the
        usual line window) with `pdf_mode="text"`, or when the path ends in `#text`
        (every page) or `#pages=2-4` (pages 2 to 4; `#pages=3` for one).
        """

        async def run() -> ReadResult:
            real_path, pages = fileops.pdf_request(file_path, self.pdf_mode)
            vpath = VPath.parse(real_path)
            _, data, _, modified = await self.view.get_file(await self.mounts.visible(), vpath)
            if pages is not None:
                text = await offload(fileops.pdf_text, data, pages, real_path)
                return slice_read_response(fileops.text_file_data(text, modified), offset, limit)
            if not fileops.is_text_path(file_path):
                return ReadResult(file_data=fileops.binary_file_data(data, modified))
            text = fileops.decode_text(data, file_path)
            return slice_read_response(fileops.text_file_data(text, modified), offset, limit)

        return await self._guard(run(), file_path, "read", lambda m: ReadResult(error=m))

    # -- grep / glob ------------------------------------------------------------------------

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        """Literal search, bounded per call. Lists the area, then fetches text candidates in
        path order and stops as soon as the answer is known.

        At most `max_count` (and `Limits.max_grep_matches`) matches come back; files over
        `Limits.max_grep_file_bytes` are skipped and at most `Limits.max_grep_scan_bytes`
        are fetched. Whenever a limit cuts the search the result has `truncated=True`,
        and a limit of the library (not the caller's `max_count`) also sets `error` to a
        message saying what was left out and how to narrow the search (deepagents'
        grep tool shows it above the partial matches).
        """

        async def run() -> GrepResult:
            if not isinstance(pattern, str) or pattern == "":
                return GrepResult(error="The search pattern is empty.")
            vpath = VPath.parse(path or "/")
            tenant = await self.mounts.visible()
            files = await self.view.located(tenant, vpath)
            if glob:
                match = compile_grep_include_glob(glob)
                files = [(p, o, loc) for p, o, loc in files if match(self.view.relative(vpath, p))]
            where = {p: loc for p, _, loc in files}

            async def fetch(file_path: str, obj: ObjectInfo, max_bytes: int) -> bytes:
                return (await self.view.read_object(tenant, where[file_path], max_bytes)).data

            searchable = sorted(((p, o) for p, o, _ in files if fileops.is_searchable_path(p)), key=lambda f: f[0])
            return await grep_files(fetch, self.config.limits, pattern, searchable, max_count)

        return await self._guard(run(), path or "/", "search", lambda m: GrepResult(error=m))

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Find files by glob (deepagents' shared matcher). Only LISTs, no GETs."""

        async def run() -> GlobResult:
            vpath = VPath.parse(path or "/")
            match = compile_grep_include_glob(pattern)
            files = await self.view.located(await self.mounts.visible(), vpath)
            infos = [
                fileops.file_info(p, is_dir=False, size=o.size, modified=o.last_modified)
                for p, o, _ in files
                if match(self.view.relative(vpath, p))
            ]
            infos.sort(key=lambda i: (i.get("modified_at", ""), i["path"]), reverse=True)
            limit = self.config.limits.max_glob_results
            if len(infos) > limit:
                # deepagents' glob tool adds its note: the paths are valid but incomplete.
                return GlobResult(matches=infos[:limit], truncated=True, truncation_reason="budget")
            return GlobResult(matches=infos)

        return await self._guard(run(), path or "/", "search", lambda m: GlobResult(error=m))

    # -- write / edit / delete ----------------------------------------------------------------

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """Create or overwrite a file (1 PUT; S3 replaces objects atomically)."""

        async def run() -> WriteResult:
            if not isinstance(content, str):
                raise InvalidPath("Content must be a string.")
            vpath = VPath.parse(file_path)
            target = await self.view.writable(await self.mounts.visible(), vpath)
            data = self._within_limit(content.encode("utf-8"))
            await self.store.aput(target.key, data, content_type=fileops.content_type_for(file_path, data))
            return WriteResult(path=str(vpath))

        return await self._guard(run(), file_path, "write", lambda m: WriteResult(error="Error: " + m))

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Replace text in a file: 1 GET (with its ETag), 1 PUT with `IfMatch`.

        A concurrent change between the two is reported, never overwritten.
        """

        async def run() -> EditResult:
            vpath = VPath.parse(file_path)
            target = await self.view.writable(await self.mounts.visible(), vpath)
            body = await self.store.aget(target.key, max_bytes=self.config.limits.max_file_bytes)
            if not fileops.is_text_path(file_path):
                return EditResult(error="Error: Cannot edit binary files with text replacements.")
            try:
                text = fileops.decode_text(body.data, file_path)
            except BinaryFile:
                return EditResult(error="Error: Cannot edit binary files with text replacements.")
            replaced = perform_string_replacement(text, old_string, new_string, replace_all)
            if isinstance(replaced, str):
                return EditResult(error=replaced)
            new_text, occurrences = replaced
            data = self._within_limit(new_text.encode("utf-8"))
            try:
                await self.store.aput(
                    target.key, data, if_match=body.etag, content_type=fileops.content_type_for(file_path, data)
                )
            except Conflict:
                # A retried PUT whose first attempt landed gets 412 too: our own write
                # is what changed the ETag. Single-part ETags are the body's MD5.
                if not await self._holds(target.key, data):
                    raise
            return EditResult(path=str(vpath), occurrences=int(occurrences))

        return await self._guard(run(), file_path, "edit", lambda m: EditResult(error="Error: " + m))

    def _within_limit(self, data: bytes) -> bytes:
        """The one size policy: what cannot be read back is not written."""
        limit = self.config.limits.max_file_bytes
        if len(data) > limit:
            raise FileTooLarge(f"{len(data)} bytes; files are limited to {limit} bytes")
        return data

    async def _holds(self, key: str, data: bytes) -> bool:
        """Whether the object at `key` is exactly `data` (by its single-part ETag)."""
        try:
            info = await self.store.ahead(key)
        except NotFound:
            return False
        return info.etag == hashlib.md5(data, usedforsecurity=False).hexdigest()

    async def adelete(self, file_path: str) -> DeleteResult:
        """Delete a file, or a folder and everything under it (LIST + batch DELETE)."""

        async def run() -> DeleteResult:
            vpath = VPath.parse(file_path)
            target = await self.view.writable(await self.mounts.visible(), vpath)
            keys = [o.key for o in await self.mounts.objects_under(target)]
            if not keys:
                raise NotFound(str(vpath))
            failed = await self.store.adelete_many(keys)
            if failed:
                return DeleteResult(
                    error=f"Error: {len(failed)} of {len(keys)} objects under '{vpath}' could not be deleted."
                )
            return DeleteResult(path=str(vpath))

        return await self._guard(run(), file_path, "delete", lambda m: DeleteResult(error="Error: " + m))

    # -- upload / download ---------------------------------------------------------------------

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write several files (1 PUT each, concurrently); one response per input, in order."""

        async def one(path: str, data: bytes) -> FileUploadResponse:
            try:
                if not isinstance(data, bytes | bytearray):
                    raise InvalidPath("content must be bytes")
                target = await self.view.writable(await self.mounts.visible(), VPath.parse(path))
                body = self._within_limit(bytes(data))
                await self.store.aput(target.key, body, content_type=fileops.content_type_for(path, body))
            except Exception as exc:
                return FileUploadResponse(path=path, error=op_error(exc, str(path), "upload"))
            return FileUploadResponse(path=path)

        return await on_io_loop(gather_limited([partial(one, p, d) for p, d in files], self.config.limits.concurrency))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read several files as bytes (1 GET each, concurrently), in order."""

        async def one(path: str) -> FileDownloadResponse:
            try:
                vpath = VPath.parse(path)
                tenant = await self.mounts.visible()
                target = await self.mounts.resolve(tenant, vpath)
                if not isinstance(target, Location) or not target.rel:
                    return FileDownloadResponse(path=path, error="is_directory")
                body = await self.view.read_object(tenant, target, self.config.limits.max_file_bytes)
            except Exception as exc:
                return FileDownloadResponse(path=path, error=op_error(exc, str(path), "download"))
            return FileDownloadResponse(path=path, content=body.data)

        return await on_io_loop(gather_limited([partial(one, p) for p in paths], self.config.limits.concurrency))

    # -- the boundary ---------------------------------------------------------------------------

    async def _guard(self, coro: Awaitable[T], path: str, op: str, on_error: Callable[[str], T]) -> T:
        """Run an operation on the I/O loop; turn any exception into `error=`."""

        async def body() -> T:
            return await coro

        try:
            return await on_io_loop(body())
        except InvalidGlobPatternError as exc:
            return on_error(str(exc))
        except Exception as exc:
            return on_error(message(exc, str(path), op))

    # -- sync API, generated ----------------------------------------------------------------------

    # Built in two steps: assigned directly, mypy would type each twin from the protocol's
    # declaration (self: BackendProtocol) instead of from our method.
    _sync_ls = sync_method(als)
    _sync_read = sync_method(aread)
    _sync_grep = sync_method(agrep)
    _sync_glob = sync_method(aglob)
    _sync_write = sync_method(awrite)
    _sync_edit = sync_method(aedit)
    _sync_delete = sync_method(adelete)
    _sync_upload_files = sync_method(aupload_files)
    _sync_download_files = sync_method(adownload_files)
    ls = _sync_ls
    read = _sync_read
    grep = _sync_grep
    glob = _sync_glob
    write = _sync_write
    edit = _sync_edit
    delete = _sync_delete
    upload_files = _sync_upload_files
    download_files = _sync_download_files

    def close(self) -> None:
        """Close the S3 client, once the manifest writes an index left in the background are done."""
        self.skills.flush()
        run_sync(self.store.aclose())
