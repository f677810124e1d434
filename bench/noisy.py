"""Noisy neighbours: one tenant sends hostile input while others make ordinary calls, in one process.

Victims: ana lists her workspace through `S3Backend.als` (the agent's `ls`), bob calls the MCP
tools face's `list_skills` with a short query, each in a loop of `--calls` calls, one every
`--interval` seconds at most (so the attack runs for the whole window, however fast the
victims are answered: seconds, not the fraction of one it took when they were fast). The attacker,
eve, runs one scenario at a time, in the same process, for as long as the victims call:

- `quiet`: nothing (the reference);
- `frontmatters`: eve's library holds 300 skills whose frontmatter is a flow list of ~30,000
  tiny values (under the 64 KiB cap), indexed again and again by a new catalog each time (as
  every new process meets it: its manifest read, 300 problems decoded);
- `frontmatters-cold`: the same, with eve deleting her manifest before each index (she may
  write her own `.s3skills/`), so every index lists her library and parses all 300 heads;
- `query`: mia (an ordinary library) calls `list_skills` with 2.4 MB of distinct words, four at a time;
- `word`: mia calls `list_skills` with one 3.5 MB word, four at a time;
- `prompt`: mia's agent builds its prompt (the skills index ranked for the conversation) for a
  1.2 MB user message, two at a time;
- `http-quiet`, `http-busy`, `channel-flood`, `channel-rewrite` (`bench/noisy_http.py`): a real
  MCP server process over HTTP (`--shared org --channel production`) on moto, eve's channel file
  ordinary (`http-busy`), the 39 MB one of issue 34, or one under every cap rewritten before
  each call, six eve calls at a time; bob's `list_skills` every `--http-interval` seconds and
  the server's RSS growth are reported.

Reported per scenario: the victims' p50, p99 and maximum latency (ms), the ratio of p99 to the
quiet run's, and how many hostile calls eve completed. Every sample goes to a JSON results file
(with the commit, the machine and the load average). The store is in memory: what is measured is
what one tenant's CPU does to the others' calls, not S3's round trips.

    python bench/noisy.py                      # every scenario, 300 calls per victim
    python bench/noisy.py --scenario query --calls 100
    python bench/noisy.py --scenario channel-flood --calls 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.client.client import Client

from s3skills import S3Backend
from s3skills.config import Config
from s3skills.errors import NotFound
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md

try:
    from noisy_http import HTTP_SCENARIOS, RSS_TARGET_MB, run_http_scenario
except ImportError:  # imported as bench.noisy
    from bench.noisy_http import HTTP_SCENARIOS, RSS_TARGET_MB, run_http_scenario

IN_PROCESS = ("quiet", "frontmatters", "frontmatters-cold", "query", "word", "prompt")
SCENARIOS = (*IN_PROCESS, *HTTP_SCENARIOS)
ROOT = Path(__file__).resolve().parent
P99_TARGET_MS = 150.0


def _library(store: MemoryObjectStore) -> None:
    for name in ("pdf-forms", "deploy", "docs-writer", "spreadsheets", "invoices"):
        store.put_object(f"users/bob/skills/{name}/SKILL.md", skill_md(name, f"Works with {name.replace('-', ' ')}."))
        store.put_object(f"users/mia/skills/{name}/SKILL.md", skill_md(name, f"Mia's {name.replace('-', ' ')}."))
    store.put_object("users/ana/threads/t1/notes.md", "ana's notes")
    flood = ",".join(["a"] * 30_000)
    for i in range(300):
        store.put_object(
            f"users/eve/skills/flood{i:03d}/SKILL.md",
            f"---\nname: flood{i:03d}\ndescription: d\ntags: [{flood}]\n---\n",
        )


def _words(total_chars: int, seed: int) -> str:
    rng = random.Random(seed)
    out, size = [], 0
    while size < total_chars:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10)))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


@contextlib.asynccontextmanager
async def _client(library: SkillLibrary, user: str, limiter: Any) -> AsyncIterator[Client]:
    server = SkillsServer(LibrarySkillSource(library), user_id=user, tools=True, limiter=limiter)
    async with Client(server.server, mode="legacy") as client:
        yield client


async def _victim(call: Callable[[], Awaitable[Any]], calls: int, interval: float) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        took = time.perf_counter() - started
        samples.append(took * 1000)
        await asyncio.sleep(max(0.0, interval - took))
    return samples


async def _attacker(scenario: str, store: MemoryObjectStore, eve: Client, stop: asyncio.Event) -> int:
    done = 0
    if scenario == "quiet":
        await stop.wait()
        return 0
    if scenario.startswith("frontmatters"):
        manifest = Config().layout.manifest_key("users/eve/skills/")
        while not stop.is_set():
            if scenario == "frontmatters-cold":
                with contextlib.suppress(NotFound):
                    await store.adelete(manifest)
            library = SkillLibrary(store, Config())  # a new process's catalog
            await library.aindex(tenant=Tenant("eve", "t1"))
            done += 1
        return done
    if scenario == "prompt":
        from langchain_core.messages import HumanMessage

        from s3skills.middleware import SkillsPromptMiddleware

        middleware = SkillsPromptMiddleware(S3Backend("memory", store=store, user_id="mia", thread_id="t1"))
        state = {"messages": [HumanMessage(_words(1_200_000, 2) + " please fill my pdf forms")]}

        async def build() -> None:
            nonlocal done
            while not stop.is_set():
                await middleware.build_prompt(state)
                done += 1

        await asyncio.gather(build(), build())
        return done
    query = _words(2_400_000, 1) if scenario == "query" else "x" * 3_500_000

    async def one() -> None:
        nonlocal done
        while not stop.is_set():
            await eve.call_tool("list_skills", {"query": query})
            done += 1

    await asyncio.gather(*(one() for _ in range(4)))
    return done


async def run_scenario(scenario: str, calls: int, interval: float = 0.01) -> dict[str, Any]:
    from s3skills.serve.fairshare import TenantLimiter

    store = MemoryObjectStore()
    _library(store)
    library = SkillLibrary(store, Config())
    limiter = TenantLimiter()
    ana = S3Backend("memory", store=store, user_id="ana", thread_id="t1")
    attacker = (
        "eve" if scenario.startswith("frontmatters") else "mia"
    )  # mia's library is ordinary: only her queries are hostile
    async with _client(library, "bob", limiter) as bob, _client(library, attacker, limiter) as eve:
        await bob.call_tool("list_skills", {"query": "fill pdf forms"})  # warm: the victims' indexes
        await ana.als("/workspace")
        stop = asyncio.Event()
        attack = asyncio.ensure_future(_attacker(scenario, store, eve, stop))
        await asyncio.sleep(0.2)  # let the attack start before the victims measure
        ls, listing = await asyncio.gather(
            _victim(lambda: ana.als("/workspace"), calls, interval),
            _victim(lambda: bob.call_tool("list_skills", {"query": "fill pdf forms"}), calls, interval),
        )
        stop.set()
        hostile = await attack
    return {"scenario": scenario, "ls_ms": ls, "list_skills_ms": listing, "hostile_calls": hostile}


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _summary(result: dict[str, Any], quiet: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": result["scenario"], "hostile_calls": result["hostile_calls"]}
    for victim in ("ls_ms", "list_skills_ms"):
        samples = result[victim]
        out[victim] = {
            "p50": round(statistics.median(samples), 2),
            "p99": round(_p(samples, 0.99), 2),
            "max": round(max(samples), 2),
            "p99_vs_quiet": round(_p(samples, 0.99) / _p(quiet[victim], 0.99), 2) if quiet else 1.0,
        }
    return out


def _machine() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "commit": commit,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }


def _http_summary(result: dict[str, Any], quiet: dict[str, Any] | None) -> dict[str, Any]:
    samples = result["list_skills_ms"]
    return {
        "scenario": result["scenario"],
        "hostile_calls": result["hostile_calls"],
        "rss_baseline_mb": result["rss_baseline_mb"],
        "rss_peak_mb": result["rss_peak_mb"],
        "rss_growth_mb": round(result["rss_peak_mb"] - result["rss_baseline_mb"], 1),
        "server_cpu_s": result["server_cpu_s"],
        "s3_cpu_s": result["s3_cpu_s"],
        "list_skills_ms": {
            "p50": round(statistics.median(samples), 2),
            "p99": round(_p(samples, 0.99), 2),
            "max": round(max(samples), 2),
            "p99_vs_quiet": round(_p(samples, 0.99) / _p(quiet["list_skills_ms"], 0.99), 2) if quiet else 1.0,
        },
    }


def _print_in_process(summaries: list[dict[str, Any]]) -> list[str]:
    print(f"{'scenario':<13} {'victim':<12} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'p99/quiet':>9} {'hostile':>8}")
    for s in summaries:
        for victim in ("ls_ms", "list_skills_ms"):
            v = s[victim]
            row = f"{s['scenario']:<13} {victim[:-3]:<12} {v['p50']:>8} {v['p99']:>8} {v['max']:>8}"
            print(f"{row} {v['p99_vs_quiet']:>9} {s['hostile_calls']:>8}")
    return [
        f"{s['scenario']}/{v[:-3]}"
        for s in summaries
        for v in ("ls_ms", "list_skills_ms")
        if s[v]["p99"] > P99_TARGET_MS
    ]


def _print_http(summaries: list[dict[str, Any]]) -> list[str]:
    head = f"{'scenario':<16} {'bob p50':>8} {'p99 ms':>8} {'max ms':>8} {'RSS MB':>7} {'growth':>7}"
    print(f"{head} {'CPU s':>6} {'S3 CPU':>6} {'hostile':>8}")
    over = []
    for s in summaries:
        v = s["list_skills_ms"]
        row = f"{s['scenario']:<16} {v['p50']:>8} {v['p99']:>8} {v['max']:>8} {s['rss_baseline_mb']:>7}"
        print(f"{row} {s['rss_growth_mb']:>7} {s['server_cpu_s']:>6} {s['s3_cpu_s']:>6} {s['hostile_calls']:>8}")
        if v["p99"] > P99_TARGET_MS:
            over.append(f"{s['scenario']}/list_skills")
        if s["rss_growth_mb"] > RSS_TARGET_MB:
            over.append(f"{s['scenario']}/rss")
    return over


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scenario", choices=SCENARIOS, action="append", help="repeatable; default: all")
    parser.add_argument("--calls", type=int, default=300, help="calls per victim per scenario")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds from a victim call's start to its next")
    parser.add_argument("--http-interval", type=float, default=0.05, help="the same for bob in the HTTP scenarios")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/noisy-<time>.json)")
    args = parser.parse_args(argv)
    chosen = args.scenario or list(SCENARIOS)
    local = [s for s in chosen if s in IN_PROCESS]
    http = [s for s in chosen if s in HTTP_SCENARIOS]
    if local and "quiet" not in local:
        local.insert(0, "quiet")
    if http and "http-quiet" not in http:
        http.insert(0, "http-quiet")
    results = [asyncio.run(run_scenario(s, args.calls, args.interval)) for s in local]
    http_results = [asyncio.run(run_http_scenario(s, args.calls, args.http_interval)) for s in http]
    summaries = [_summary(r, results[0]) for r in results]
    http_summaries = [_http_summary(r, http_results[0]) for r in http_results]
    over = _print_in_process(summaries) if summaries else []
    over += _print_http(http_summaries) if http_summaries else []
    targets = f"victims' p99 over {P99_TARGET_MS:.0f} ms or RSS growth over {RSS_TARGET_MB:.0f} MB"
    print(f"{targets}: {', '.join(over) or 'none'}")
    out = args.out or ROOT / "results" / f"noisy-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "machine": _machine(),
        "command": ["noisy.py", *(argv if argv is not None else sys.argv[1:])],
        "calls": args.calls,
        "interval": args.interval,
        "http_interval": args.http_interval,
        "summaries": summaries + http_summaries,
    }
    out.write_text(json.dumps({**record, "runs": results + http_results}))
    print(f"samples: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
