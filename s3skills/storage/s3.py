"""`S3ObjectStore`: the `ObjectStore` contract on aioboto3.

Errors leave this module only as the project's exceptions (`s3skills.errors`),
through one table (`translate_error`). Retries are botocore's standard mode,
per instance. Each API call can be observed (`add_request_hook`).

The store's coroutines use a client bound to the running event loop (one client
per loop, created on first use). The backend and the catalog always run them on
the private I/O loop of `s3skills._loop`, so in practice there is one client.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import aioboto3
from botocore.config import Config

from s3skills._loop import close_at_exit
from s3skills.errors import FileTooLarge, NotFound, S3SkillsError, StoreUnavailable, translate_error
from s3skills.storage.protocol import (
    ListPage,
    NotModified,
    ObjectBody,
    ObjectInfo,
    ObjectVersion,
    RequestHook,
    StoreHelpers,
    VersioningStatus,
    sort_versions,
)
from s3skills.storage.tuning import tune_client

__all__ = ["S3ObjectStore"]


def _close_clients(clients: dict[asyncio.AbstractEventLoop, tuple[Any, Any]]) -> None:
    """Schedule the closing of each client on its own loop (safe from any thread)."""
    entries = list(clients.items())
    clients.clear()
    for loop, (cm, _) in entries:
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                asyncio.run_coroutine_threadsafe(cm.__aexit__(None, None, None), loop)


def _not_modified(exc: BaseException) -> bool:
    """Whether botocore reported a 304 (it raises a ClientError for it)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = str(response.get("Error", {}).get("Code", ""))
    return status == 304 or code in ("304", "NotModified")


def _etag(value: Any) -> str:
    return str(value or "").strip('"')


class S3ObjectStore(StoreHelpers):
    """An S3 bucket on aioboto3, with botocore retries and one error table.

    Args:
        bucket: The bucket name.
        endpoint_url: An S3-compatible endpoint (moto, SeaweedFS, LocalStack);
            None for AWS. With an endpoint, path-style addressing is used.
        region_name: The AWS region.
        session: An `aioboto3.Session` (credentials, profile); a default one otherwise.
        max_attempts: Total attempts per request in botocore's `standard`
            retry mode (throttling, 5xx and connection errors are retried).
        body_attempts: Total reads of an object whose body arrives cut short (a
            connection broken mid-response; botocore retries requests, not the reading
            of their bodies). More than `max_attempts` by default (8): a cold index reads
            thousands of bodies, and one read failing fails that library's index (measured:
            with 20 % of responses cut short, 4 attempts failed a 1,100-read index in most
            runs; 8 leave about 1 chance in 350).
        connect_timeout: Seconds to wait for a connection.
        read_timeout: Seconds to wait for a response.
        max_pool_connections: Connections kept per client; bounds concurrency.
        config: A botocore `Config` merged over the defaults above.
    """

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        session: aioboto3.Session | None = None,
        max_attempts: int = 4,
        body_attempts: int = 8,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_pool_connections: int = 64,
        config: Config | None = None,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ValueError("bucket must be a non-empty string")
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self.region_name = region_name
        self.max_attempts = max(1, max_attempts)
        self.body_attempts = max(1, body_attempts)
        self._session = session or aioboto3.Session()
        base = Config(
            # total_max_attempts counts the first attempt too (max_attempts counts retries only).
            retries={"total_max_attempts": max_attempts, "mode": "standard"},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_pool_connections=max_pool_connections,
            # Third-party S3 servers vary in their support of the newer default checksums.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            s3={"addressing_style": "path" if endpoint_url else "auto"},
        )
        self._config = base.merge(config) if config is not None else base
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Any, Any]] = {}
        # Closes the clients when the store is garbage-collected (no unclosed sessions).
        weakref.finalize(self, _close_clients, self._clients)
        self._client_lock = threading.Lock()
        self._hooks: list[RequestHook] = []
        self._events: list[tuple[str, Callable[..., Any]]] = []
        self._caller: str | None = None
        close_at_exit(self)

    def __repr__(self) -> str:
        return f"S3ObjectStore(bucket={self.bucket!r}, endpoint_url={self.endpoint_url!r})"

    # -- observation -----------------------------------------------------------------

    def register_event(self, event_name: str, handler: Callable[..., Any]) -> None:
        """Register a botocore event handler on every client, present and future.

        Tests use `before-send.s3` to inject faults.
        """
        self._events.append((event_name, handler))
        for _, client in list(self._clients.values()):
            client.meta.events.register(event_name, handler)

    def _on_call(self, model: Any = None, **_: Any) -> None:
        self._notify(getattr(model, "name", "unknown"))

    # -- clients ---------------------------------------------------------------------

    async def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is not None:
            return entry[1]
        cm = self._session.client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region_name, config=self._config
        )
        try:
            client = await cm.__aenter__()
        except Exception as exc:
            raise translate_error(exc, "connect") from exc
        with self._client_lock:
            if loop in self._clients:  # another task won the race
                await cm.__aexit__(None, None, None)
                return self._clients[loop][1]
            tune_client(client)  # botocore's wasted CPU per request (see s3skills.storage.tuning)
            client.meta.events.register("before-call.s3", self._on_call)
            for event_name, handler in self._events:
                client.meta.events.register(event_name, handler)
            self._clients[loop] = (cm, client)
        return client

    async def aclose(self) -> None:
        """Close the client of the running loop (others are closed by `close`)."""
        entry = self._clients.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[0].__aexit__(None, None, None)

    async def aclose_all(self) -> None:
        """Close the clients of every loop (call it from the I/O loop at exit)."""
        current = asyncio.get_running_loop()
        entry = self._clients.pop(current, None)
        _close_clients(self._clients)
        if entry is not None:
            await entry[0].__aexit__(None, None, None)

    # -- the contract ----------------------------------------------------------------

    async def alist_pages(
        self, prefix: str, *, delimiter: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ListPage]:
        """Yield listing pages of the keys under `prefix` (1 request per page)."""
        client = await self._client()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": page_size}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        while True:
            try:
                resp = await client.list_objects_v2(**kwargs)
            except Exception as exc:
                raise translate_error(exc, "list") from exc
            objects = tuple(
                ObjectInfo(
                    key=o["Key"],
                    size=int(o.get("Size", 0)),
                    etag=_etag(o.get("ETag")),
                    last_modified=o.get("LastModified"),
                )
                for o in resp.get("Contents", []) or []
            )
            prefixes = tuple(p["Prefix"] for p in resp.get("CommonPrefixes", []) or [])
            yield ListPage(objects, prefixes)
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return
            kwargs["ContinuationToken"] = token

    async def aget(
        self,
        key: str,
        *,
        max_bytes: int | None = None,
        version_id: str | None = None,
        if_none_match: str | None = None,
    ) -> ObjectBody:
        """Read a whole object, or one version of it (1 GetObject; again only if the body arrives cut short).

        Args:
            key: The key.
            max_bytes: Refuse a larger object without reading it.
            if_none_match: An ETag the caller holds: an unchanged object answers 304
                (`NotModified`) with no body.

        Raises:
            NotModified: `if_none_match` matched.
            NotFound: No such key (or no such version). AccessDenied is never reported as NotFound.
            FileTooLarge: The object is larger than `max_bytes` (nothing is read).
        """
        client = await self._client()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if version_id is not None:
            kwargs["VersionId"] = version_id
        if if_none_match is not None:
            kwargs["IfNoneMatch"] = f'"{if_none_match}"'
        for attempt in range(1, self.body_attempts + 1):
            try:
                resp = await client.get_object(**kwargs)
            except Exception as exc:
                if if_none_match is not None and _not_modified(exc):
                    raise NotModified(key, if_none_match) from None
                err = translate_error(exc, "get")
                if version_id is not None and ("NoSuchVersion" in str(err) or "InvalidArgument" in str(err)):
                    raise NotFound("get: the store answered NoSuchVersion") from exc
                raise err from exc
            try:
                return await self._body(key, resp, max_bytes=max_bytes, total=None)
            except StoreUnavailable:
                # botocore retries the request, not the reading of the body: a body cut
                # short (connection reset mid-stream) is read again here (`body_attempts`).
                if attempt == self.body_attempts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def aget_range(self, key: str, start: int, length: int) -> ObjectBody:
        """Read `length` bytes from offset `start` (1 ranged GetObject; again only if the body arrives cut short).

        Reading past the end returns what exists; an empty object returns b"". A body cut
        short is read again (`body_attempts`), as `aget` does.
        """
        client = await self._client()
        for attempt in range(1, self.body_attempts + 1):
            try:
                resp = await client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
            except Exception as exc:
                err = translate_error(exc, "get")
                if "InvalidRange" in str(err):  # empty object, or start past the end
                    head = await self.ahead(key)
                    return ObjectBody(key, b"", head.etag, head.size, head.last_modified)
                raise err from exc
            total = None
            content_range = str(resp.get("ContentRange") or "")
            if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
                total = int(content_range.rsplit("/", 1)[1])
            try:
                return await self._body(key, resp, max_bytes=None, total=total)
            except StoreUnavailable:
                if attempt == self.body_attempts:  # botocore retries requests, not the reading of a body
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _body(self, key: str, resp: dict[str, Any], *, max_bytes: int | None, total: int | None) -> ObjectBody:
        stream = resp["Body"]
        length = int(resp.get("ContentLength", 0) or 0)
        try:
            if max_bytes is not None and length > max_bytes:
                raise FileTooLarge(f"get: the object is {length} bytes; the limit is {max_bytes}")
            async with stream as body:
                data: bytes = await body.read()
            if len(data) != length:
                raise StoreUnavailable(f"get: the body was cut short ({len(data)} of {length} bytes)")
        except S3SkillsError:
            stream.close()
            raise
        except Exception as exc:
            stream.close()
            raise translate_error(exc, "get") from exc
        return ObjectBody(
            key=key,
            data=data,
            etag=_etag(resp.get("ETag")),
            size=total if total is not None else length,
            last_modified=resp.get("LastModified"),
            content_type=resp.get("ContentType"),
            version_id=resp.get("VersionId"),
            metadata={str(k).lower(): str(v) for k, v in (resp.get("Metadata") or {}).items()},
        )

    async def ahead(self, key: str) -> ObjectInfo:
        """Describe one object (1 HeadObject). Raises `NotFound` when absent."""
        client = await self._client()
        try:
            resp = await client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise translate_error(exc, "head") from exc
        return ObjectInfo(key, int(resp.get("ContentLength", 0)), _etag(resp.get("ETag")), resp.get("LastModified"))

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
        """Write an object in one PutObject and return its new ETag.

        Args:
            key: The key.
            data: The whole body (S3 replaces objects atomically: no partial object).
            if_match: Only overwrite when the current ETag is this one.
            if_none_match: Only create: fail when the key exists.
            content_type: The object's Content-Type.
            metadata: User metadata (`x-amz-meta-*`), ASCII names and values.

        Raises:
            Conflict: A condition did not hold.
        """
        client = await self._client()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": data}
        if if_match is not None:
            kwargs["IfMatch"] = f'"{if_match}"'
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if content_type:
            kwargs["ContentType"] = content_type
        if metadata:
            kwargs["Metadata"] = dict(metadata)
        try:
            resp = await client.put_object(**kwargs)
        except Exception as exc:
            raise translate_error(exc, "put") from exc
        return _etag(resp.get("ETag"))

    async def adelete_many(self, keys: Iterable[str]) -> list[str]:
        """Delete keys in batches of 1,000 (1 DeleteObjects per batch).

        Returns:
            The keys that could not be deleted (empty when all went).
        """
        client = await self._client()
        pending = list(dict.fromkeys(keys))
        failed: list[str] = []
        for start in range(0, len(pending), 1000):
            batch = pending[start : start + 1000]
            try:
                resp = await client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            except Exception as exc:
                raise translate_error(exc, "delete") from exc
            failed.extend(e["Key"] for e in resp.get("Errors", []) or [])
        return failed

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete one key (1 DeleteObject); `if_match` sends `If-Match` (S3 conditional delete).

        Raises:
            Conflict: The ETag is another. NotFound: `if_match` given and the key is gone.
        """
        client = await self._client()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if if_match is not None:
            kwargs["IfMatch"] = f'"{if_match.strip(chr(34))}"'
        try:
            await client.delete_object(**kwargs)
        except Exception as exc:
            raise translate_error(exc, f"delete {key}") from exc

    async def alist_versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under `prefix` (1 ListObjectVersions per 1,000).

        Sorted by key, newest first within a key (S3's own order).
        """
        client = await self._client()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": 1000}
        out: list[ObjectVersion] = []
        while True:
            try:
                resp = await client.list_object_versions(**kwargs)
            except Exception as exc:
                raise translate_error(exc, "list versions") from exc
            page = [
                ObjectVersion(
                    key=v["Key"],
                    version_id=str(v.get("VersionId") or "null"),
                    etag=_etag(v.get("ETag")),
                    size=int(v.get("Size", 0) or 0),
                    last_modified=v.get("LastModified"),
                    is_latest=bool(v.get("IsLatest")),
                )
                for v in resp.get("Versions", []) or []
            ]
            page += [
                ObjectVersion(
                    key=m["Key"],
                    version_id=str(m.get("VersionId") or "null"),
                    etag="",
                    size=0,
                    last_modified=m.get("LastModified"),
                    is_latest=bool(m.get("IsLatest")),
                    is_delete_marker=True,
                )
                for m in resp.get("DeleteMarkers", []) or []
            ]
            out.extend(page)
            if not resp.get("IsTruncated"):
                break
            kwargs["KeyMarker"] = resp.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = resp.get("NextVersionIdMarker")
        return sort_versions(out)

    async def aget_versioning(self) -> VersioningStatus:
        """`Enabled`, `Suspended`, or `""` when versioning was never enabled (1 GetBucketVersioning)."""
        client = await self._client()
        try:
            resp = await client.get_bucket_versioning(Bucket=self.bucket)
        except Exception as exc:
            raise translate_error(exc, "get versioning") from exc
        return str(resp.get("Status") or "")

    async def aput_versioning(self, enabled: bool) -> None:
        """Enable (or suspend) the bucket's versioning (1 PutBucketVersioning)."""
        client = await self._client()
        status = "Enabled" if enabled else "Suspended"
        try:
            await client.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": status})
        except Exception as exc:
            raise translate_error(exc, "put versioning") from exc

    async def acaller_arn(self) -> str | None:
        """The credentials' AWS identity ARN (STS GetCallerIdentity at the store's endpoint, else STS;
        once per store, 1 attempt), or None when it cannot be had (no STS there, no credentials)."""
        if self._caller is not None:
            return self._caller or None
        try:
            config = Config(retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=5)
            region = self.region_name or "us-east-1"
            async with self._session.client(
                "sts", endpoint_url=self.endpoint_url, region_name=region, config=config
            ) as sts:
                arn = str((await sts.get_caller_identity()).get("Arn") or "")
        except Exception:  # best effort: the caller falls back to the OS user
            arn = ""
        self._caller = arn
        return arn or None

    async def acreate_bucket(self) -> None:
        """Create the bucket if it does not exist (demo, tests, CLI)."""
        client = await self._client()
        try:
            await client.head_bucket(Bucket=self.bucket)
            return
        except Exception as exc:
            err = translate_error(exc, "head bucket")
            if not isinstance(err, NotFound):
                raise err from exc
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.region_name and self.region_name != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region_name}
        try:
            await client.create_bucket(**kwargs)
        except Exception as exc:
            raise translate_error(exc, "create bucket") from exc
