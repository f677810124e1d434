"""Many tenants at once: scripted agent runs of many users over one `S3Backend`.

One local S3 server (SeaweedFS by default) behind `FaultProxy` adding `--latency-ms` (20)
to every request. `--users` users each own a library of `--skills-per-user` skills and a
workspace of a few files; every user also sees one shared library (`--shared-skills`).
Every library has its manifest (as after a push). One `S3Backend` (one store, one
catalog) serves every run, as a server process does; each run is a LangGraph run whose
context names its user, so the backend resolves the tenant the way it does in an agent.

A scripted run is what an agent turn costs the backend, with no model: the skills index
(what the prompt middleware asks before each model call), load a skill and read its
`SKILL.md`, read a workspace file, write a file and read it back, grep the run's folder,
with the index asked again between steps (four model calls). For each level of `--concurrency` (10, 50, 200 runs in
flight), `2 x level` runs (at least 50) are timed after an untimed warm-up of one run per
user. Reported: runs/s, p50/p95 run latency, requests per run (seen by the proxy) and
runs with an error.

    python bench/run.py --scenario tenants               # the same, from the bench's runner
    python bench/tenants.py                              # 50 users, 10/50/200 in flight
    python bench/tenants.py --catalog-ttl 5 --concurrency 200
    python bench/tenants.py --shared-catalog-ttl none     # the shared library asked every time
    PYTHONPATH=/tmp/base python bench/tenants.py          # another tree (only public names)

The script uses only names that exist in older trees too, so a base commit can be
measured with the same script (`git archive BASE | tar -x -C /tmp/base`).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import aioboto3
from fill import put_all  # bench/fill.py: this script's directory is first on sys.path
from langgraph.graph import END, START, StateGraph

from s3skills import S3Backend
from s3skills._loop import run_sync
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.storage import S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import FaultProxy, make_bucket

LAYOUT = KeyLayout()
SHARED = "company"
THREAD = "t0"
NEEDLE = "needle-7f3a"
LEVELS = (10, 50, 200)


def skill_md(name: str, index: int) -> bytes:
    body = "\n".join(f"Step {i}: do the {name} thing carefully, line {i}." for i in range(30))
    return (
        f"---\nname: {name}\ndescription: Skill {index}; use it when the user asks for {name.replace('-', ' ')}.\n"
        f"version: 1.0.0\n---\n\n# {name}\n\n{body}\n"
    ).encode()


def user_of(i: int) -> str:
    return f"user-{i:03d}"


async def fill(url: str, bucket: str, keys: tuple[str, str], users: int, per_user: int, shared: int) -> None:
    """The libraries and workspaces, 64 PUTs in flight, straight to the server."""
    objects: list[tuple[str, bytes]] = []
    for s in range(shared):
        home = f"{LAYOUT.shared_prefix(SHARED)}common/shared-{s:03d}/"
        objects.append((home + "SKILL.md", skill_md(f"shared-{s:03d}", s)))
    for u in range(users):
        user = user_of(u)
        for s in range(per_user):
            home = f"{LAYOUT.user_prefix(user)}mine/skill-{s:03d}/"
            objects.append((home + "SKILL.md", skill_md(f"skill-{s:03d}", s)))
            objects.append((home + "references/guide.md", b"# Guide\n\nMore detail.\n"))
        ws = LAYOUT.workspace_prefix(user, THREAD)
        for f in range(5):
            text = "\n".join(f"line {i} of file {f}" + (f" {NEEDLE}" if i == 7 else "") for i in range(40))
            objects.append((f"{ws}notes/file-{f}.md", text.encode()))
    await put_all(url, bucket, keys, objects)


class RunState(TypedDict, total=False):
    run: int
    errors: list[str]


class RunContext(TypedDict, total=False):
    user_id: str


def script(backend: S3Backend, per_user: int) -> Any:
    """The compiled one-node graph whose node is one scripted agent run."""

    async def node(state: RunState) -> RunState:
        run = state["run"]
        errors: list[str] = []

        async def index() -> None:  # what the prompt middleware asks before a model call
            if not await backend.skills.aindex():
                errors.append("empty index")

        await index()
        wanted = f"mine/skill-{run % per_user:03d}"
        loaded = await backend.aload_skill(wanted)  # what cargar_habilidad does, then its SKILL.md
        text = await backend.aload_skill_content(wanted)
        if loaded != wanted or text is None or "Step 1" not in text:
            errors.append(f"load: {loaded} {(text or '')[:60]!r}")
        await index()
        read = await backend.aread(f"/workspace/notes/file-{run % 5}.md")
        if read.error:
            errors.append("read: " + read.error)
        wrote = await backend.awrite(f"/workspace/runs/{run}/out.md", f"run {run} {NEEDLE}\n")
        if wrote.error:
            errors.append("write: " + wrote.error)
        await index()
        again = await backend.aread(f"/workspace/runs/{run}/out.md")
        if again.error:
            errors.append("re-read: " + again.error)
        found = await backend.agrep(NEEDLE, f"/workspace/runs/{run}/")
        if getattr(found, "error", None):
            errors.append("grep: " + str(found.error))
        await index()
        return {"errors": errors}

    graph = StateGraph(RunState, context_schema=RunContext)
    graph.add_node("run", node)
    graph.add_edge(START, "run")
    graph.add_edge("run", END)
    return graph.compile()


async def level(graph: Any, users: int, in_flight: int, runs: int, first: int) -> dict[str, Any]:
    """`runs` runs, `in_flight` at a time; returns wall time, latencies, errors."""
    sem = asyncio.Semaphore(in_flight)
    latencies: list[float] = []
    failed: list[str] = []

    async def one(n: int) -> None:
        async with sem:
            started = time.perf_counter()
            try:
                out = await graph.ainvoke(
                    {"run": n},
                    config={"configurable": {"thread_id": THREAD}},
                    context={"user_id": user_of(n % users)},
                )
                failed.extend(out.get("errors", []))
            except Exception as exc:  # counted and reported, never hidden
                failed.append(f"{type(exc).__name__}: {exc}")
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(one(first + n) for n in range(runs)))
    return {"wall": time.perf_counter() - began, "latencies": latencies, "errors": failed}


def run_tenants(
    up: Any,
    *,
    latency_ms: float = 20.0,
    users: int = 50,
    per_user: int = 20,
    shared: int = 100,
    levels: tuple[int, ...] = LEVELS,
    catalog_ttl: float | None = None,
    shared_catalog_ttl: float | str | None = "default",
    gather_delay: float | None = None,
    min_runs: int = 50,
    manifests: bool = True,
    truncate_ranged: float = 0.0,
) -> dict[str, Any]:
    """The scenario on one server; returns the report (one row per level).

    `manifests=False` leaves the libraries as another tool writes them (no manifest: the
    warm-up's first index of each library reads every `SKILL.md` head with ranged GETs);
    `truncate_ranged` cuts that share of the ranged responses short (`FaultProxy`), picked
    at random with a fixed seed.
    """
    keys = (up.access_key, up.secret_key)
    bucket = make_bucket(up.url, f"bench-tenants-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
    run_sync(fill(up.url, bucket, keys, users, per_user, shared))
    direct = S3ObjectStore(bucket, endpoint_url=up.url, region_name="us-east-1", session=session)
    for u in range(users if manifests else 0):  # every library has its manifest, as after a push
        lib = SkillLibrary(
            direct, Config(layout=LAYOUT, shared_library=SHARED), tenant=lambda u=u: Tenant(user_id=user_of(u))
        )
        lib.index()
        flush: Callable[[], None] | None = getattr(lib, "flush", None)
        if flush is not None:
            flush()
    run_sync(direct.aclose_all())
    rows = []
    with FaultProxy(up.url, latency=latency_ms / 1000) as proxy:
        backend = S3Backend(
            bucket,
            endpoint_url=proxy.url,
            region_name="us-east-1",
            session=session,
            layout=LAYOUT,
            shared_prefix=SHARED,
            **({"catalog_ttl": catalog_ttl} if catalog_ttl is not None else {}),
            **({"shared_catalog_ttl": shared_catalog_ttl} if shared_catalog_ttl != "default" else {}),
        )
        if gather_delay is not None:  # an experiment on the catalog's own setting (newer trees only)
            backend.skills.catalog.gather_delay = gather_delay
        graph = script(backend, per_user)
        truncated = None
        if truncate_ranged > 0:
            pick = random.Random(7)

            def ranged(request: Any) -> bool:
                return bool(request.method == "GET" and request.header("Range") and pick.random() < truncate_ranged)

            truncated = proxy.inject("truncate", count=None, match=ranged)
        counter = 0
        warm = run_sync(level(graph, users, min(users, 50), users, counter))  # warm-up: clients, caches
        counter += users
        for n in levels:
            runs = max(2 * n, min_runs)
            proxy.reset_counts()
            result = run_sync(level(graph, users, n, runs, counter))
            counter += runs
            requests = dict(sorted(proxy.requests.items()))
            lat = sorted(result["latencies"])
            rows.append(
                {
                    "concurrency": n,
                    "runs": runs,
                    "runs_per_second": round(runs / result["wall"], 2),
                    "p50_seconds": round(statistics.median(lat), 3),
                    "p95_seconds": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3),
                    "requests_per_run": round(sum(requests.values()) / runs, 2),
                    "requests": requests,
                    "errors": len(result["errors"]),
                    "first_errors": result["errors"][:3],
                    "latencies_seconds": [round(x, 4) for x in lat],  # every run's, for the results file
                }
            )
        backend.close()
    return {
        "manifests": manifests,
        "truncate_ranged": truncate_ranged,
        "truncated_responses": truncated.fired if truncated is not None else 0,
        "warmup_runs": users,
        "warmup_errors": len(warm["errors"]),
        "warmup_first_errors": warm["errors"][:3],
        "server": up.kind,
        "latency_ms": latency_ms,
        "users": users,
        "skills_per_user": per_user,
        "shared_skills": shared,
        "catalog_ttl": catalog_ttl,
        "shared_catalog_ttl": shared_catalog_ttl,
        "gather_delay": gather_delay,
        "levels": rows,
    }


def print_tenants_report(report: dict[str, Any]) -> None:
    ttl, shared_ttl = report["catalog_ttl"], report.get("shared_catalog_ttl", "default")
    print(
        f"\ntenants ({report['server']}, +{report['latency_ms']} ms, {report['users']} users, "
        f"shared library of {report['shared_skills']}, catalog_ttl={'default' if ttl is None else ttl}, "
        f"shared_catalog_ttl={shared_ttl}, gather_delay={_or_default(report.get('gather_delay'))})"
    )
    if not report.get("manifests", True) or report.get("truncate_ranged"):
        print(
            f"no manifests: {not report['manifests']}, {report['truncated_responses']} ranged responses truncated "
            f"({report['truncate_ranged']:.0%} of them); warm-up: {report['warmup_runs']} runs, "
            f"{report['warmup_errors']} errors {report['warmup_first_errors']}"
        )
    print(f"{'in flight':>10} {'runs':>6} {'runs/s':>8} {'p50 s':>8} {'p95 s':>8} {'req/run':>8} {'errors':>7}")
    for r in report["levels"]:
        print(
            f"{r['concurrency']:>10} {r['runs']:>6} {r['runs_per_second']:>8} {r['p50_seconds']:>8} "
            f"{r['p95_seconds']:>8} {r['requests_per_run']:>8} {r['errors']:>7}"
        )


def _or_default(value: object) -> object:
    return "default" if value is None else value


def _shared_ttl(text: str) -> float | str | None:
    return None if text == "none" else text if text == "default" else float(text)


def main(argv: list[str] | None = None) -> int:
    import record  # bench/record.py: the results file
    import upstream  # bench/upstream.py: the servers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("moto", "moto-thread", "seaweedfs"), default="seaweedfs")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--skills-per-user", type=int, default=20)
    parser.add_argument("--shared-skills", type=int, default=100)
    parser.add_argument("--concurrency", default=",".join(map(str, LEVELS)), help="levels of runs in flight")
    parser.add_argument("--catalog-ttl", type=float, help="S3Backend(catalog_ttl=...); default: the tree's default")
    parser.add_argument(
        "--shared-catalog-ttl",
        default="default",
        help="S3Backend(shared_catalog_ttl=...): seconds, 'none', or 'default' (the tree's default)",
    )
    parser.add_argument("--gather-delay", type=float, help="the catalog's gather_delay (default: the tree's)")
    parser.add_argument("--no-manifest", action="store_true", help="libraries as another tool writes them: no manifest")
    parser.add_argument(
        "--truncate-ranged", type=float, default=0.0, help="share of ranged GET responses cut short (0.2: 20 %%)"
    )
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/tenants-<time>.json)")
    args = parser.parse_args(argv)
    run = record.Run("tenants", argv)
    levels = tuple(int(x) for x in args.concurrency.split(",") if x.strip())
    with upstream.start_upstream(args.server) as up:
        report = run_tenants(
            up,
            latency_ms=args.latency_ms,
            users=args.users,
            per_user=args.skills_per_user,
            shared=args.shared_skills,
            levels=levels,
            catalog_ttl=args.catalog_ttl,
            shared_catalog_ttl=_shared_ttl(args.shared_catalog_ttl),
            gather_delay=args.gather_delay,
            manifests=not args.no_manifest,
            truncate_ranged=args.truncate_ranged,
        )
    import s3skills

    report["s3skills_from"] = str(Path(s3skills.__file__).parent)
    print_tenants_report(report)
    print(f"samples: {run.write(args.out, extra=report)}")
    return 1 if report["warmup_errors"] or any(r["errors"] for r in report["levels"]) else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
