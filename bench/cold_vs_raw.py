"""The cold index of a library with no manifest against the raw transfer, paired in one process.

On a shared machine a single timed run moves by tens of percent, so the contenders run
alternately on the same bucket, each repeat in the same minute: the raw transfer
(aioboto3, and obstore when installed), then a new `SkillLibrary` indexing the library
with its manifest deleted (reads 2 x `Limits.concurrency` in flight, and 32 for
comparison), and the same with obstore serving the ranged reads. Wall time and the
process's CPU time are printed for every sample, then medians and ratios to the raw
transfer: of the medians, and the median of each sample's ratio to the raw transfer of
the same repeat ("paired", the load of the same minute). A cold sample times the
answer (`SkillLibrary.index()` returning every skill); the manifest it rebuilt is
written after the answer (issue 21: "the manifest it writes does not delay the
answer"), and that write is awaited and reported apart, before the next sample starts,
so it never overlaps another contender.

The raw transfer's client gets the same tuning as the store's client
(`s3skills.storage.tuning.tune_client`); `--stock-reference` adds a stock aioboto3 client's
raw transfer as one more contender. Every sample goes to a results file
(`bench/record.py`: `bench/results/cold_vs_raw-<time>.json`, or `--out`) with the commit,
the machine, the load average and the command line; the printed summary is the median and
min-max of all of them.

The proxy that adds the round trip runs in a process of its own (`--proxy process`, the
default), as the network it stands for would: in this process (`--proxy thread`, as
before), its CPU (about as much per request as the client's) is charged to whichever
contender runs, and both are then measured mostly as the proxy's CPU under the GIL.

    python bench/cold_vs_raw.py --skills 1000 --repeat 3
    python bench/cold_vs_raw.py --skills 10000 --repeat 3 --proxy thread
    python bench/cold_vs_raw.py --skills 1000 --repeat 5 --stock-reference
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aioboto3
import index as ib  # bench/index.py: this script's directory is first on sys.path
import record  # bench/record.py
import upstream  # bench/upstream.py

from s3skills._loop import run_sync
from s3skills.config import Config, Limits
from s3skills.skills import SkillLibrary
from s3skills.storage import ObjectStore, S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import FaultProxy, make_bucket

_PROXY_CHILD = """
import sys
from s3skills.testing import FaultProxy
with FaultProxy(sys.argv[1], latency=float(sys.argv[2])) as proxy:
    print(proxy.url, flush=True)
    sys.stdin.read()  # until the bench closes our stdin
"""


@contextlib.contextmanager
def proxy_url(upstream: str, latency: float, where: str) -> Iterator[str]:
    """The URL of a `FaultProxy` adding `latency` seconds, in a child process or in this one."""
    if where == "thread":
        with FaultProxy(upstream, latency=latency) as proxy:
            yield proxy.url
        return
    child = subprocess.Popen(
        [sys.executable, "-c", _PROXY_CHILD, upstream, str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit(f"the proxy process did not start: {url!r}")
        yield url
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--server", choices=("moto", "moto-thread", "seaweedfs"), default="seaweedfs")
    parser.add_argument("--proxy", choices=("process", "thread"), default="process", help="where the proxy runs")
    parser.add_argument("--stock-reference", action="store_true", help="also time a stock aioboto3 client's transfer")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/cold_vs_raw-<time>.json)")
    args = parser.parse_args(argv)
    run = record.Run("cold_vs_raw", argv)
    size = args.skills
    with upstream.start_upstream(args.server) as up, proxy_url(up.url, args.latency_ms / 1000, args.proxy) as url:
        keys = (up.access_key, up.secret_key)
        bucket = make_bucket(up.url, f"cold-{size}-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
        skill_keys = run_sync(ib.fill(up.url, bucket, keys, size))
        session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
        store = S3ObjectStore(bucket, endpoint_url=url, region_name="us-east-1", session=session)
        ana = Tenant(user_id=ib.USER)
        samples: dict[str, list[tuple[float, float]]] = {}

        def timed(name: str, fn: Callable[[], object], repeat: int) -> None:
            wall, cpu = time.perf_counter(), time.process_time()
            after = fn()
            sample = (time.perf_counter() - wall, time.process_time() - cpu)
            samples.setdefault(name, []).append(sample)
            line = f"{name:<28} wall {sample[0]:7.3f} s  cpu {sample[1]:7.3f} s"
            fields = {"repeat": repeat, "wall_s": sample[0], "cpu_s": sample[1], "load_average": os.getloadavg()[0]}
            if callable(after):  # the manifest write the answer left behind, timed apart
                began = time.perf_counter()
                after()
                fields["manifest_write_s"] = time.perf_counter() - began
                line += f"  (then its manifest written in {fields['manifest_write_s']:.3f} s)"
            run.sample(name, **fields)
            print(line, flush=True)

        def cold(on: ObjectStore, concurrency: int) -> Callable[[], None]:
            """The answer of a cold index (timed); returns the wait for its manifest write (not timed)."""
            lib = SkillLibrary(on, Config(layout=ib.LAYOUT, limits=Limits(concurrency=concurrency)), tenant=lambda: ana)
            found = len(lib.index())
            if found != size:
                raise SystemExit(f"indexed {found} of {size} skills")
            return lib.flush

        def drop() -> None:
            run_sync(store.adelete_many([ib.LAYOUT.manifest_key(ib.PREFIX)]))

        contenders: list[tuple[str, Callable[[], object]]] = [
            ("raw transfer", lambda: run_sync(ib.raw_transfer(url, bucket, keys, skill_keys))),
            ("cold, 64 reads in flight", lambda: cold(store, 32)),  # 2 x Limits.concurrency
            ("cold, 32 reads in flight", lambda: cold(store, 16)),
        ]
        if args.stock_reference:
            contenders.insert(
                1,
                (
                    "raw transfer, stock client",
                    lambda: run_sync(ib.raw_transfer(url, bucket, keys, skill_keys, tuned=False)),
                ),
            )
        if ib.have_obstore():
            import obstore_reads  # bench/obstore_reads.py

            fast = obstore_reads.ObstoreReads(bucket, url, keys, session)
            contenders.insert(
                1,
                (
                    "raw transfer, obstore",
                    lambda: run_sync(obstore_reads.raw_transfer(url, bucket, keys, skill_keys)),
                ),
            )
            contenders.append(("cold, obstore reads", lambda: cold(fast, 32)))
        run_sync(ib.raw_transfer(url, bucket, keys, skill_keys))  # warm-up: clients, pools
        for repeat in range(args.repeat):
            for name, fn in contenders:
                if name.startswith("cold"):
                    drop()
                timed(name, fn, repeat)
        where = f"proxy in a {args.proxy}, all {args.repeat} samples: median [min-max]"
        print(f"\n{size} skills, +{args.latency_ms} ms, {args.server}, {where}")
        raws = samples["raw transfer"]
        summary: dict[str, object] = {}
        for name, rows in samples.items():
            # Each sample against the raw transfer of the same repeat (the same minute's load).
            paired = [w / r for (w, _), (r, _) in zip(rows, raws, strict=True)]
            cpus = [c / r for (_, c), (_, r) in zip(rows, raws, strict=True)]
            summary[name] = {
                "wall_s": record.spread(w for w, _ in rows),
                "cpu_s": record.spread(c for _, c in rows),
                "paired_wall_ratio": record.spread(paired),
                "paired_cpu_ratio": record.spread(cpus),
            }
            print(
                f"{name:<28} wall {record.describe([w for w, _ in rows], unit=' s')}  "
                f"cpu {record.describe([c for _, c in rows], unit=' s')}  "
                f"paired: wall {record.describe(paired, '{:.2f}', 'x')}, cpu {record.describe(cpus, '{:.2f}', 'x')}"
            )
        extra = {
            "skills": size,
            "latency_ms": args.latency_ms,
            "server": args.server,
            "proxy": args.proxy,
            "repeat": args.repeat,
            "reference_client": "tuned (s3skills.storage.tuning.tune_client)",
            "summary": summary,
        }
        print(f"samples: {run.write(args.out, extra)}")
        run_sync(store.aclose_all())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
