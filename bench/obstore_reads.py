"""obstore (the Rust `object_store` crate) for the many-small-GETs paths, measured in the bench.

`ObstoreReads` is an `S3ObjectStore` whose ranged and whole reads (the cold index's ranged
GET of each `SKILL.md` head, the raw-transfer contender) go through obstore's `S3Store`;
every other operation (LIST, conditional PUT, versions) stays on aioboto3. It is a bench
contender, not part of the package: issue 21 asks to adopt obstore only if it is
>= 1.5x faster on the cold index and passes the store conformance and fault tests
(see bench/README.md for the figures that decided it).

Needs `pip install obstore` (not a dependency of s3skills).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import aioboto3

from s3skills.errors import NotFound, StoreUnavailable
from s3skills.storage import ObjectBody, S3ObjectStore


def obstore_store(url: str, bucket: str, keys: tuple[str, str], pool: int = 64) -> Any:
    """An obstore `S3Store` on a local endpoint (plain HTTP, path-style)."""
    from obstore.store import S3Store

    return S3Store(
        bucket,
        endpoint=url,
        access_key_id=keys[0],
        secret_access_key=keys[1],
        region="us-east-1",
        virtual_hosted_style_request=False,
        client_options={"allow_http": True, "pool_max_idle_per_host": str(pool), "timeout": timedelta(seconds=30)},
    )


class ObstoreReads(S3ObjectStore):
    """`S3ObjectStore` with `aget_range` and `aget` (unconditional) served by obstore."""

    def __init__(self, bucket: str, url: str, keys: tuple[str, str], session: aioboto3.Session) -> None:
        super().__init__(bucket, endpoint_url=url, region_name="us-east-1", session=session)
        self._fast = obstore_store(url, bucket, keys)

    async def aget_range(self, key: str, start: int, length: int) -> ObjectBody:
        import obstore

        try:
            result = await obstore.get_async(self._fast, key, options={"range": (start, start + length)})
            data = bytes(await result.bytes_async())
        except FileNotFoundError as exc:
            raise NotFound("get: the store answered NoSuchKey") from exc
        except Exception as exc:
            raise StoreUnavailable(f"get: {type(exc).__name__}") from exc
        meta = result.meta
        self._notify("GetObject")
        return ObjectBody(key, data, str(meta["e_tag"] or "").strip('"'), int(meta["size"]), meta["last_modified"])


async def raw_transfer(url: str, bucket: str, keys: tuple[str, str], skill_keys: list[str]) -> int:
    """obstore GETs of the objects, 64 in flight, no parsing; returns the bytes read."""
    import obstore

    store = obstore_store(url, bucket, keys)
    sem = asyncio.Semaphore(64)

    async def get(key: str) -> int:
        async with sem:
            result = await obstore.get_async(store, key)
            return len(await result.bytes_async())

    return sum(await asyncio.gather(*(get(k) for k in skill_keys)))
