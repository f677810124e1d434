"""The frontmatter-stall scenario: another tenant's `ls` while a library of big frontmatters is indexed.

300 skills whose frontmatters are ~56 KB each (issue 22's finding) are indexed in one
process on a `MemoryObjectStore`, while another tenant lists its workspace in a loop.
Reported: the index's wall time, how many `ls` calls completed meanwhile, and their p50,
p99 and maximum latency. `--loader python` forces PyYAML's pure-Python loader (what the
catalog used before libyaml's parser was used), for comparison.

    python bench/frontmatter_stall.py --repeat 3
    python bench/frontmatter_stall.py --loader python

Every sample (each run's index time and every `ls` latency) goes to a results file
(`bench/record.py`: `bench/results/frontmatter_stall-<time>.json`, or `--out`) with the
commit, the machine, the load average and the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import record  # bench/record.py (this script's directory is first on sys.path)

from s3skills import S3Backend
from s3skills.skills.format import parse
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore


def fat(i: int, words: int) -> bytes:
    return f"---\nname: s{i:03d}\ndescription: Skill {i}.\nnotes: {'word ' * words}\n---\nBody {i}\n".encode()


async def run(skills: int, words: int) -> dict[str, Any]:
    store = MemoryObjectStore()
    for i in range(skills):
        store.put_object(f"users/ana/skills/s{i:03d}/SKILL.md", fat(i, words))
    store.put_object("users/bob/threads/t9/note.md", b"bob")
    ana = S3Backend("memory", store=store, user_id="ana")
    bob = S3Backend("memory", store=store, user_id="bob", thread_id="t9")
    latencies: list[float] = []
    started = time.perf_counter()
    task = asyncio.ensure_future(ana.skills.aindex(tenant=Tenant(user_id="ana")))
    while not task.done():
        t = time.perf_counter()
        await bob.als("/workspace")
        latencies.append(time.perf_counter() - t)
    assert len(await task) == skills
    latencies.sort()
    return {
        "index_s": time.perf_counter() - started,
        "ls_calls": len(latencies),
        "ls_p50_ms": statistics.median(latencies) * 1000,
        "ls_p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "ls_max_ms": latencies[-1] * 1000,
        "ls_latencies_ms": [round(x * 1000, 3) for x in latencies],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--skills", type=int, default=300)
    parser.add_argument("--words", type=int, default=11_000, help="words of frontmatter per skill (~5 bytes each)")
    parser.add_argument("--loader", choices=("auto", "python"), default="auto")
    parser.add_argument("--repeat", type=int, default=1, help="runs, each in a new event loop")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/frontmatter_stall-<time>.json)")
    args = parser.parse_args(argv)
    log = record.Run("frontmatter_stall", argv)
    if args.loader == "python":
        parse._FastLoader = None  # the comparison this scenario exists for
    for _ in range(args.repeat):
        result = asyncio.run(run(args.skills, args.words))
        log.sample(args.loader, **result)
        print(" ".join(f"{k}={v:.1f}" for k, v in result.items() if k != "ls_latencies_ms"), f"loader={args.loader}")
    for field in ("index_s", "ls_calls", "ls_p50_ms", "ls_p99_ms", "ls_max_ms"):
        print(f"{field:<10} {record.describe(log.values(args.loader, field), '{:.1f}')}")
    extra = {"skills": args.skills, "words": args.words, "loader": args.loader, "repeat": args.repeat}
    print(f"samples: {log.write(args.out, extra)}")


if __name__ == "__main__":
    main()
