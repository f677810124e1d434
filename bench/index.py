"""The skills index at 100, 1,000 and 10,000 skills: the manifest against every baseline.

One local S3 server (SeaweedFS by default, moto as an option) behind `FaultProxy`, which
adds `--latency-ms` to every request (an S3 round trip). For each library size a fresh
bucket is filled with generated skills (categories of ~1,000, ~3 KB SKILL.md each, plus
one reference file per skill) with concurrent PUTs straight to the server. Then, on the
same server and data, in the same run:

- `manifest cold`: a new catalog (a new process) indexing from the manifest (1 GET);
- `manifest warm`: the same catalog again (1 conditional GET answered 304);
- `within TTL`: with `catalog_ttl` set (no request);
- `no manifest cold`: `Config(manifest=False)`: LIST pages and one ranged GET per skill;
- `seeds' way`: LIST and sequential GETs with parsing, every call (`workload.NaiveS3`);
- `raw transfer`: aioboto3 GETs of exactly the same SKILL.md objects, 64 in flight,
  no LIST and no parsing (the transfer limit of any per-object index);
- `deepagents SkillsMiddleware`: deepagents' own middleware over
  `S3Backend(skills_mode="library")` (its `abefore_agent`, which reads the library).

Also: the middleware's cost per model call (a warm index: what `SkillsPromptMiddleware`
asks for), `load` + the SKILL.md read, a push of 1,000 skills (`apush_tree`), and the MCP
server's `skills/list` of the whole library up to `--baseline-max` skills (`mcp_list.py`).
Reported: median wall time, requests seen by the proxy, peak RSS of this process.
The slow baselines run only up to `--baseline-max` skills (they take minutes beyond).

Targets (the exit status is 1 when one fails; not checked in smoke mode):
cold with a current manifest at >= 1,000 skills within 3 round trips plus parsing;
>= 100x faster than the seeds' way at 1,000; >= 5x faster than raw transfer at 10,000;
warm = 1 conditional GET; within the TTL = 0 requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aioboto3
import mcp_list  # bench/mcp_list.py
from botocore.config import Config as BotoConfig
from fill import put_all
from workload import NaiveS3

from s3skills import S3Backend
from s3skills._loop import run_sync
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.index.manifest import decode_manifest
from s3skills.storage import S3ObjectStore
from s3skills.storage.tuning import tune_client
from s3skills.tenancy import Tenant
from s3skills.testing import FaultProxy, make_bucket
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()
USER = "bench-user"
PREFIX = LAYOUT.user_prefix(USER)
CONTENDERS = (
    "manifest cold",
    "manifest warm",
    "within TTL",
    "no manifest cold",
    "no manifest cold, builds it",
    "seeds' way",
    "raw transfer",
    "deepagents SkillsMiddleware",
)
OBSTORE_CONTENDERS = ("raw transfer (obstore)", "no manifest cold (obstore reads)")


def have_obstore() -> bool:
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


def skill_md(category: str, name: str, index: int) -> bytes:
    """A ~3 KB SKILL.md."""
    body = "\n".join(f"Step {i}: do the {name} thing carefully and check the result, line {i}." for i in range(38))
    return (
        f"---\nname: {name}\ndescription: Skill number {index} of the {category} category; use it when the user "
        f"asks for {name.replace('-', ' ')}.\nversion: 1.0.0\ntags: [{category}, bench]\n---\n\n# {name}\n\n{body}\n"
    ).encode()


def layout_of(size: int) -> list[tuple[str, str, int]]:
    """(category, name, index) of each skill: categories of ~1,000."""
    categories = max(2, round(size / 1000))
    return [(f"cat{i % categories:02d}", f"skill-{i:05d}", i) for i in range(size)]


async def fill(url: str, bucket: str, keys: tuple[str, str], size: int) -> list[str]:
    """Write the library with 64 PUTs in flight; returns the SKILL.md keys."""
    skill_keys: list[str] = []
    objects: list[tuple[str, bytes]] = []
    for category, name, i in layout_of(size):
        home = f"{PREFIX}{category}/{name}/"
        skill_keys.append(home + "SKILL.md")
        objects.append((home + "SKILL.md", skill_md(category, name, i)))
        objects.append((home + "references/guide.md", b"# Guide\n\nMore detail.\n"))
    await put_all(url, bucket, keys, objects)
    return skill_keys


async def raw_transfer(
    url: str, bucket: str, keys: tuple[str, str], skill_keys: list[str], *, tuned: bool = True
) -> int:
    """aioboto3 GETs of the objects, 64 in flight, no parsing; returns the bytes read.

    The client gets the same tuning as `S3ObjectStore`'s own (`s3skills.storage.tuning.
    tune_client`: endpoint cache, User-Agent cache, fast timestamps), so that a cold index
    is compared with a transfer by an equally cheap client; `tuned=False` is a stock client.
    """
    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1])
    config = BotoConfig(max_pool_connections=64)
    async with session.client("s3", endpoint_url=url, region_name="us-east-1", config=config) as client:
        if tuned and not tune_client(client):
            raise SystemExit("tune_client could not tune the reference client (botocore moved)")
        sem = asyncio.Semaphore(64)

        async def get(key: str) -> int:
            async with sem:
                response = await client.get_object(Bucket=bucket, Key=key)
                return len(await response["Body"].read())

        return sum(await asyncio.gather(*(get(k) for k in skill_keys)))


class Meter:
    def __init__(self, proxy: FaultProxy, repeat: int) -> None:
        self.proxy, self.repeat = proxy, repeat

    def run(
        self, fn: Callable[[], Any], *, setup: Callable[[], Any] | None = None, repeat: int | None = None
    ) -> dict[str, Any]:
        """Median seconds over the repeats (and every sample), and the proxy's request counts of the last run."""
        samples = []
        for _ in range(repeat or self.repeat):
            if setup is not None:
                setup()
            self.proxy.reset_counts()
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
        counts = dict(sorted(self.proxy.requests.items()))
        return {
            "seconds": round(statistics.median(samples), 5),
            "samples": [round(x, 5) for x in samples],  # every run, for the results file
            "requests": counts,
            "total": sum(counts.values()),
        }


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def round_trip(meter: Meter, store: S3ObjectStore) -> float:
    """The time of one small request through the proxy (median of 5)."""
    return float(meter.run(lambda: run_sync(store.aexists(PREFIX + "none")), repeat=5)["seconds"])


def deepagents_index(backend: S3Backend) -> int:
    from deepagents.middleware.skills import SkillsMiddleware
    from langgraph.runtime import Runtime

    middleware = SkillsMiddleware(backend=backend, sources=["/skills/"])
    update = run_sync(middleware.abefore_agent({"messages": []}, Runtime(), {}))  # type: ignore[arg-type]
    return len((update or {}).get("skills_metadata", []))


def one_size(up: Any, proxy: FaultProxy, size: int, repeat: int, baseline_max: int) -> dict[str, Any]:
    keys = (up.access_key, up.secret_key)
    bucket = make_bucket(up.url, f"bench-index-{size}-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
    began = time.perf_counter()
    skill_keys = run_sync(fill(up.url, bucket, keys, size))
    fill_seconds = time.perf_counter() - began
    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
    store = S3ObjectStore(bucket, endpoint_url=proxy.url, region_name="us-east-1", session=session)
    meter = Meter(proxy, repeat)
    ana = Tenant(user_id=USER)

    def lib(**config: Any) -> SkillLibrary:
        return SkillLibrary(store, Config(layout=LAYOUT, **config), tenant=lambda: ana)

    first = lib()
    first.index()  # builds the manifest: what the first reader or writer pays once
    first.flush()  # ... and writes it after answering
    rtt = round_trip(meter, store)
    rows: dict[str, Any] = {}
    rows["manifest cold"] = meter.run(lambda: lib().index())
    warm = lib()
    warm.index()
    warm.flush()
    rows["manifest warm"] = meter.run(lambda: warm.index())
    ttl = lib(catalog_ttl=3600)
    ttl.index()
    rows["within TTL"] = meter.run(lambda: ttl.index())
    rows["no manifest cold"] = meter.run(lambda: lib(manifest=False).index(), repeat=1 if size > 1000 else None)
    builder: list[SkillLibrary] = []

    def drop_manifest() -> None:  # a library written by another tool: no manifest yet
        for done in builder:
            done.flush()  # the previous run's manifest, written after its answer
        run_sync(store.adelete_many([LAYOUT.manifest_key(PREFIX)]))

    def build() -> None:
        builder.append(lib())
        builder[-1].index()

    rows["no manifest cold, builds it"] = meter.run(build, setup=drop_manifest, repeat=1 if size > 1000 else None)
    drop_manifest()
    again = lib()
    again.index()  # the manifest again, for the contenders below
    again.flush()
    data = run_sync(store.aget(LAYOUT.manifest_key(PREFIX)))
    started = time.perf_counter()
    decode_manifest(data.data, PREFIX, "user", max_entries=20_000)
    parse_seconds = time.perf_counter() - started
    rows["raw transfer"] = meter.run(lambda: run_sync(raw_transfer(proxy.url, bucket, keys, skill_keys)))
    if have_obstore():
        import obstore_reads  # bench/obstore_reads.py

        rows["raw transfer (obstore)"] = meter.run(
            lambda: run_sync(obstore_reads.raw_transfer(proxy.url, bucket, keys, skill_keys))
        )
        fast = obstore_reads.ObstoreReads(bucket, proxy.url, keys, session)
        rows["no manifest cold (obstore reads)"] = meter.run(
            lambda: SkillLibrary(fast, Config(layout=LAYOUT, manifest=False), tenant=lambda: ana).index(),
            repeat=1 if size > 1000 else None,
        )
        run_sync(fast.aclose_all())
    if size <= baseline_max:
        naive = NaiveS3(proxy.url, bucket, keys[0], keys[1])
        rows["seeds' way"] = meter.run(lambda: naive.skills_index(PREFIX), repeat=1)
        backend = S3Backend(
            bucket,
            user_id=USER,
            endpoint_url=proxy.url,
            region_name="us-east-1",
            session=session,
            layout=LAYOUT,
            skills_mode="library",
        )
        try:
            rows["deepagents SkillsMiddleware"] = meter.run(lambda: deepagents_index(backend), repeat=1)
        except Exception as exc:  # reported in the JSON, not hidden
            rows["deepagents SkillsMiddleware"] = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            backend.close()
    extra: dict[str, Any] = {}
    extra["middleware per model call (warm index)"] = meter.run(lambda: warm.index(refresh=False))
    first = f"{layout_of(size)[0][0]}/{layout_of(size)[0][1]}"
    loader = lib()
    loader.index()
    extra["load + SKILL.md read"] = meter.run(lambda: (loader.load(first), loader.skill_md(first)))
    mcp: dict[str, Any] = {}
    if size <= baseline_max:
        from s3skills.skills.index.digests import book_key

        mcp = mcp_list.measure(lib, USER, book_key(LAYOUT, PREFIX), meter)
    run_sync(store.aclose_all())
    return {
        "size": size,
        "fill_seconds": round(fill_seconds, 2),
        "round_trip_seconds": round(rtt, 5),
        "manifest_bytes": len(data.data),
        "manifest_parse_seconds": round(parse_seconds, 5),
        "index": rows,
        "other": extra,
        "mcp": mcp,
        "peak_rss_mib": peak_rss_mib(),
    }


def after_push(up: Any, proxy: FaultProxy, size: int, repeat: int) -> dict[str, Any]:
    """Push `size` skills (a SKILL.md each) to a fresh bucket, then a new process's first index and MCP page."""
    keys = (up.access_key, up.secret_key)
    bucket = make_bucket(up.url, f"bench-after-push-{size}-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
    store = S3ObjectStore(bucket, endpoint_url=proxy.url, region_name="us-east-1", session=session)
    meter = Meter(proxy, repeat)
    ana = Tenant(user_id=USER)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for category, name, i in layout_of(size):
            (root / category / name).mkdir(parents=True)
            (root / category / name / "SKILL.md").write_bytes(skill_md(category, name, i))
        pushed = meter.run(lambda: run_sync(apush_tree(store, root, PREFIX, concurrency=64)), repeat=1)

    def lib() -> SkillLibrary:
        return SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda: ana)

    first = meter.run(lambda: lib().index())
    page = mcp_list.measure_first_page(lib, USER, meter)
    run_sync(store.aclose_all())
    return {"skills": size, "push": pushed, "first index": first, "first MCP skills/list page": page}


def push_thousand(up: Any, proxy: FaultProxy, count: int) -> dict[str, Any]:
    keys = (up.access_key, up.secret_key)
    bucket = make_bucket(up.url, f"bench-push-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
    store = S3ObjectStore(bucket, endpoint_url=proxy.url, region_name="us-east-1", session=session)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for category, name, i in layout_of(count):
            (root / category / name).mkdir(parents=True)
            (root / category / name / "SKILL.md").write_bytes(skill_md(category, name, i))
        meter = Meter(proxy, 1)
        result = meter.run(lambda: run_sync(apush_tree(store, root, PREFIX, concurrency=64)))
    run_sync(store.aclose_all())
    return {"skills": count, **result}


def check_targets(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets, each with its measured value and verdict."""
    out = []
    for row in sizes:
        size, index = row["size"], row["index"]
        cold = index["manifest cold"]["seconds"]
        out.append(
            {
                "target": f"warm = 1 conditional GET ({size})",
                "value": index["manifest warm"]["requests"],
                "ok": index["manifest warm"]["total"] == 1,
            }
        )
        out.append(
            {
                "target": f"within TTL = 0 requests ({size})",
                "value": index["within TTL"]["total"],
                "ok": index["within TTL"]["total"] == 0,
            }
        )
        if size >= 1000:
            bound = 3 * row["round_trip_seconds"] + row["manifest_parse_seconds"]
            out.append(
                {
                    "target": f"cold <= 3 round trips + parsing ({size})",
                    "value": f"{cold:.4f} s <= {bound:.4f} s",
                    "ok": cold <= bound,
                }
            )
        if size >= 1000:
            ratio = index["no manifest cold, builds it"]["seconds"] / index["raw transfer"]["seconds"]
            out.append(
                {
                    "target": f"no manifest cold <= 1.15x raw transfer ({size})",
                    "value": f"{ratio:.2f}x",
                    "ok": ratio <= 1.15,
                }
            )
        if size == 1000 and "seeds' way" in index:
            ratio = index["seeds' way"]["seconds"] / cold
            out.append(
                {"target": ">= 100x faster than the seeds' way (1000)", "value": round(ratio, 1), "ok": ratio >= 100}
            )
        if size == 10000:
            ratio = index["raw transfer"]["seconds"] / cold
            out.append({"target": ">= 5x faster than raw transfer (10000)", "value": round(ratio, 1), "ok": ratio >= 5})
    return out


def plot(sizes: list[dict[str, Any]], path: Path) -> None:
    """Index latency vs library size, log-log, one line per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name in CONTENDERS:
        points = [(r["size"], r["index"][name]["seconds"]) for r in sizes if "seconds" in r["index"].get(name, {})]
        points = [(x, max(y, 1e-5)) for x, y in points]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("skills in the library")
    ax.set_ylabel("index time (s, median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def print_index_report(report: dict[str, Any]) -> None:
    print(f"\nskills index ({report['server']}, +{report['latency_ms']} ms per request)")
    print(f"{'contender':<42}" + "".join(f"{r['size']:>22}" for r in report["sizes"]))
    for name in (*CONTENDERS, "middleware per model call (warm index)", "load + SKILL.md read"):
        cells = []
        for r in report["sizes"]:
            row = r["index"].get(name) or r["other"].get(name)
            cells.append(
                "-"
                if row is None
                else row.get("error", "error")[:20]
                if "seconds" not in row
                else f"{row['seconds']:.4f}s/{row['total']}req"
            )
        print(f"{name:<42}" + "".join(f"{c:>22}" for c in cells))
    for name in mcp_list.CONTENDERS:
        cells = []
        for r in report["sizes"]:
            row = r.get("mcp", {}).get(name)
            cells.append("-" if row is None else f"{row['seconds']:.4f}s/{row['total']}req")
        print(f"{'MCP skills/list, ' + name:<42}" + "".join(f"{c:>22}" for c in cells))
    for name in OBSTORE_CONTENDERS:
        cells = []
        for r in report["sizes"]:
            row = r["index"].get(name)
            cells.append("-" if row is None else f"{row['seconds']:.4f}s/{row['total']}req")
        print(f"{name:<42}" + "".join(f"{c:>22}" for c in cells))
    for row in report.get("after_push", []):
        first, page = row["first index"], row["first MCP skills/list page"]
        print(
            f"after a push of {row['skills']} skills ({row['push']['seconds']:.1f} s, {row['push']['total']} req): "
            f"first index {first['seconds']:.4f}s/{first['total']}req {first['requests']}, "
            f"first MCP page {page['seconds']:.4f}s/{page['total']}req {page['requests']}"
        )
    if report.get("push"):
        p = report["push"]
        print(f"push of {p['skills']} skills: {p['seconds']:.2f} s, {p['total']} requests {p['requests']}")
    for t in report["targets"]:
        print(f"  [{'ok' if t['ok'] else 'FAIL'}] {t['target']}: {t['value']}")


@contextlib.contextmanager
def proxied(up: Any, latency_ms: float) -> Iterator[FaultProxy]:
    with FaultProxy(up.url, latency=latency_ms / 1000) as proxy:
        yield proxy


def push_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        size, first, page = row["skills"], row["first index"], row["first MCP skills/list page"]
        out.append(
            {
                "target": f"first index after a push <= 3 requests ({size})",
                "value": first["total"],
                "ok": first["total"] <= 3,
            }
        )
        out.append(
            {
                "target": f"first MCP page after a push <= 5 requests ({size})",
                "value": page["total"],
                "ok": page["total"] <= 5,
            }
        )
    return out


def run_index(
    up: Any, sizes: list[int], repeat: int, latency_ms: float, baseline_max: int, push: int, out: Path, *, smoke: bool
) -> dict[str, Any]:
    """Every size on one server; writes the PNG next to the JSON; returns the report."""
    with proxied(up, latency_ms) as proxy:
        results = [one_size(up, proxy, size, repeat, baseline_max) for size in sizes]
        pushed = push_thousand(up, proxy, push) if push else None
        after = [after_push(up, proxy, size, repeat) for size in sizes if size >= 1000 or smoke]
    report = {
        "server": up.kind,
        "latency_ms": latency_ms,
        "sizes": results,
        "push": pushed,
        "after_push": after,
        "targets": [] if smoke else [*check_targets(results), *push_targets(after)],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, out)
    report["plot"] = str(out)
    return report
