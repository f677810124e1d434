"""The cold index of a library with no manifest against the raw transfer, paired in one process.

On a shared machine a single timed run moves by tens of percent, so the contenders run
alternately on the same bucket, each repeat in the same minute: the raw transfer
(aioboto3, and obstore when installed), then a new `SkillLibrary` indexing the library
with its manifest deleted (reads 2 x `Limits.concurrency` in flight, and 32 for
comparison), and the same with obstore serving the ranged reads. Wall time and the
process's CPU time are printed for every sample, then medians and ratios to the raw
transfer.

    python bench/cold_vs_raw.py --skills 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import aioboto3
import index as ib  # bench/index.py: this script's directory is first on sys.path
import run as br  # bench/run.py

from s3skills._loop import run_sync
from s3skills.config import Config, Limits
from s3skills.skills import SkillLibrary
from s3skills.storage import ObjectStore, S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import FaultProxy, make_bucket


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--server", choices=("moto", "moto-thread", "seaweedfs"), default="seaweedfs")
    args = parser.parse_args(argv)
    size = args.skills
    with br.start_upstream(args.server) as up, FaultProxy(up.url, latency=args.latency_ms / 1000) as proxy:
        keys = (up.access_key, up.secret_key)
        bucket = make_bucket(up.url, f"cold-{size}-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
        skill_keys = run_sync(ib.fill(up.url, bucket, keys, size))
        session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
        store = S3ObjectStore(bucket, endpoint_url=proxy.url, region_name="us-east-1", session=session)
        ana = Tenant(user_id=ib.USER)
        samples: dict[str, list[tuple[float, float]]] = {}

        def timed(name: str, fn: Callable[[], object]) -> None:
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            sample = (time.perf_counter() - wall, time.process_time() - cpu)
            samples.setdefault(name, []).append(sample)
            print(f"{name:<28} wall {sample[0]:7.3f} s  cpu {sample[1]:7.3f} s", flush=True)

        def cold(on: ObjectStore, concurrency: int) -> None:
            lib = SkillLibrary(on, Config(layout=ib.LAYOUT, limits=Limits(concurrency=concurrency)), tenant=lambda: ana)
            found = len(lib.index())
            lib.flush()
            if found != size:
                raise SystemExit(f"indexed {found} of {size} skills")

        def drop() -> None:
            run_sync(store.adelete_many([ib.LAYOUT.manifest_key(ib.PREFIX)]))

        contenders: list[tuple[str, Callable[[], object]]] = [
            ("raw transfer", lambda: run_sync(ib.raw_transfer(proxy.url, bucket, keys, skill_keys))),
            ("cold, 64 reads in flight", lambda: cold(store, 32)),  # 2 x Limits.concurrency
            ("cold, 32 reads in flight", lambda: cold(store, 16)),
        ]
        if ib.have_obstore():
            import obstore_reads  # bench/obstore_reads.py

            fast = obstore_reads.ObstoreReads(bucket, proxy.url, keys, session)
            contenders.insert(
                1,
                (
                    "raw transfer, obstore",
                    lambda: run_sync(obstore_reads.raw_transfer(proxy.url, bucket, keys, skill_keys)),
                ),
            )
            contenders.append(("cold, obstore reads", lambda: cold(fast, 32)))
        run_sync(ib.raw_transfer(proxy.url, bucket, keys, skill_keys))  # warm-up: clients, pools
        for _ in range(args.repeat):
            for name, fn in contenders:
                if name.startswith("cold"):
                    drop()
                timed(name, fn)
        raw = statistics.median(w for w, _ in samples["raw transfer"])
        print(f"\n{size} skills, +{args.latency_ms} ms, {args.server}, median of {args.repeat}")
        for name, rows in samples.items():
            wall = statistics.median(w for w, _ in rows)
            cpu = statistics.median(c for _, c in rows)
            print(f"{name:<28} wall {wall:7.3f} s ({wall / raw:.2f}x raw)  cpu {cpu:7.3f} s")
        run_sync(store.aclose_all())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
