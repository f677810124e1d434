"""The S3 server behind a bench's latency proxy: moto (in a subprocess or a thread) or SeaweedFS.

Shared by `run.py`, `tenants.py` and `cold_vs_raw.py` (which import this module, never each other).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import aioboto3
from botocore.config import Config

from s3skills.testing import LOOPBACK, MotoServer, SeaweedServer, free_port, make_client

__all__ = ["Upstream", "calibrate", "start_upstream"]


@dataclass(frozen=True)
class Upstream:
    """The S3 server behind the proxy."""

    kind: str
    url: str
    access_key: str
    secret_key: str


@contextlib.contextmanager
def start_upstream(kind: str) -> Iterator[Upstream]:
    """A local S3 server on a free loopback port.

    `moto` runs in a subprocess (so its request handling does not compete for this
    process's GIL with the client under test and the proxy), `moto-thread` in this process,
    `seaweedfs` as `weed mini` (a Go server that serves requests in parallel).
    """
    if kind == "moto-thread":
        with MotoServer() as server:
            yield Upstream(kind, server.endpoint_url, "bench", "bench")
        return
    if kind == "seaweedfs":
        with SeaweedServer() as weed:
            yield Upstream(kind, weed.endpoint_url, weed.access_key, weed.secret_key)
        return
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited with code {process.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start within 30 s") from None
                time.sleep(0.05)
        yield Upstream(kind, url, "bench", "bench")  # moto accepts any credentials
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def calibrate(up: Upstream, bucket: str, keys: list[str], concurrency: int) -> dict[str, float]:
    """The server's own service time per GET, without the proxy: sequential, and under load.

    Under load, the time per request bounds any concurrent client: moto spends several ms of
    Python CPU time per request, so it caps what concurrency can win.
    """
    client = make_client(up.url, access_key=up.access_key, secret_key=up.secret_key)
    client.get_object(Bucket=bucket, Key=keys[0])["Body"].read()
    started = time.perf_counter()
    for key in keys:
        client.get_object(Bucket=bucket, Key=key)["Body"].read()
    sequential = (time.perf_counter() - started) / len(keys)

    async def concurrent() -> float:
        session = aioboto3.Session(aws_access_key_id=up.access_key, aws_secret_access_key=up.secret_key)
        config = Config(max_pool_connections=concurrency)
        async with session.client("s3", endpoint_url=up.url, region_name="us-east-1", config=config) as aclient:
            sem = asyncio.Semaphore(concurrency)

            async def one(key: str) -> None:
                async with sem:
                    response = await aclient.get_object(Bucket=bucket, Key=key)
                    await response["Body"].read()

            await one(keys[0])
            began = time.perf_counter()
            await asyncio.gather(*(one(k) for k in keys))
            return (time.perf_counter() - began) / len(keys)

    return {
        "sequential_ms_per_get": round(sequential * 1000, 2),
        "concurrent_ms_per_get": round(asyncio.run(concurrent()) * 1000, 2),
    }
