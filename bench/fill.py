"""Write a bench's objects straight to the server, 64 PUTs in flight (no s3skills code)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import aioboto3
from botocore.config import Config as BotoConfig

IN_FLIGHT = 64


async def put_all(url: str, bucket: str, keys: tuple[str, str], objects: Iterable[tuple[str, bytes]]) -> None:
    """PUT every `(key, body)` of `objects` into `bucket`, `IN_FLIGHT` at a time."""
    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1])
    config = BotoConfig(max_pool_connections=IN_FLIGHT)
    async with session.client("s3", endpoint_url=url, region_name="us-east-1", config=config) as client:
        sem = asyncio.Semaphore(IN_FLIGHT)

        async def put(key: str, body: bytes) -> None:
            async with sem:
                await client.put_object(Bucket=bucket, Key=key, Body=body)

        await asyncio.gather(*(put(key, body) for key, body in objects))
