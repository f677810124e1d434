"""Benchmark s3skills against a naive baseline, over moto behind a latency proxy.

Everything runs locally: a moto S3 server on a loopback port, and `FaultProxy` in front of
it adding a fixed delay to every request, which is what makes S3 slow (a round trip of
tens of milliseconds) and what moto alone does not imitate. Both contenders talk to the
proxy, so both pay the same price per request.

The baseline is implemented here (`NaiveS3`): what the seed scripts did, sequential boto3
calls, one GET per file. Reported for each scenario: median wall time over `--repeat` runs
(after one untimed warm-up), requests seen by the proxy per HTTP method, and the ratios.
A table of request counts per `S3Backend` operation follows.

A start-up scenario (`startup.py` beside this file) times `s3skills --help` and counts
the modules `import s3skills.cli` loads, for this tree and for a previous git ref.

    python bench/run.py --quick                # 50 skills, 50 files: about 30 s
    python bench/run.py                        # 200 skills, 200 files: about 2 minutes
    python bench/run.py --server seaweedfs     # a server that handles requests in parallel
    python bench/run.py --scenario startup     # start-up only, vs --startup-ref (1921cb8)
    python bench/run.py --smoke --out DIR      # everything, tiny: seconds, for a test
    python bench/run.py --scenario index       # the index at 100, 1,000, 10,000 skills (bench/index.py)
    python bench/run.py --scenario tenants     # many users at once, 10/50/200 runs in flight (bench/tenants.py)

Results are printed and written as JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aioboto3
import index as index_bench  # bench/index.py
import record  # bench/record.py
import startup  # bench/startup.py and bench/workload.py: this script's directory is first on sys.path
import tenants as tenants_bench  # bench/tenants.py
from upstream import calibrate, start_upstream  # bench/upstream.py
from workload import CATEGORIES, LAYOUT, NEEDLE, SKILLS_PREFIX, THREAD, USER, WS_PREFIX, NaiveS3, seed

from s3skills import RequestCounter, S3Backend
from s3skills.testing import FaultProxy, make_bucket, make_client

ROOT = Path(__file__).resolve().parent.parent


# -- measurement -------------------------------------------------------------------------------


@dataclass
class Scenario:
    """One comparison: the same work done by S3Backend and by the baseline."""

    name: str
    backend_seconds: float
    baseline_seconds: float
    backend_requests: dict[str, int]
    baseline_requests: dict[str, int]
    check: str
    notes: str = ""
    speedup: float = field(init=False)
    request_ratio: float = field(init=False)

    def __post_init__(self) -> None:
        self.speedup = round(self.baseline_seconds / self.backend_seconds, 2) if self.backend_seconds else 0.0
        backend_total = sum(self.backend_requests.values())
        self.request_ratio = round(sum(self.baseline_requests.values()) / backend_total, 2) if backend_total else 0.0


class Meter:
    """Times a callable and reads the proxy's request counts around it."""

    def __init__(self, proxy: FaultProxy, repeat: int) -> None:
        self.proxy = proxy
        self.repeat = repeat
        self.samples: list[dict[str, Any]] = []  # every timed run, for the results file

    def requests_of(self, fn: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
        self.proxy.reset_counts()
        result = fn()
        return result, dict(sorted(self.proxy.requests.items()))

    def time(self, fn: Callable[[], Any], *, setup: Callable[[], Any] | None = None) -> float:
        samples = []
        for _ in range(self.repeat):
            if setup is not None:
                setup()
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
        self.samples.append({"what": getattr(fn, "__name__", repr(fn)), "seconds": samples})
        return statistics.median(samples)


def total(counts: dict[str, int]) -> int:
    return sum(counts.values())


def run_scenarios(backend: S3Backend, naive: NaiveS3, meter: Meter, bucket: str) -> list[Scenario]:
    scenarios = []

    # grep over the whole workspace
    def backend_grep() -> Any:
        result = backend.grep(NEEDLE, "/workspace")
        assert result.error is None, result.error
        return sorted(m["path"] for m in result.matches or [])

    def naive_grep() -> Any:
        return sorted("/workspace/" + k[len(WS_PREFIX) :] for k, _ in naive.grep(WS_PREFIX, NEEDLE))

    backend_grep(), naive_grep()  # warm-up: clients, connection pools, service models
    got, backend_counts = meter.requests_of(backend_grep)
    expected, naive_counts = meter.requests_of(naive_grep)
    assert got == expected, "backend and baseline disagree on the grep result"
    scenarios.append(
        Scenario(
            "grep /workspace",
            meter.time(backend_grep),
            meter.time(naive_grep),
            backend_counts,
            naive_counts,
            f"{len(got)} matching files, same result",
            "LIST, then concurrent GETs (S3Backend concurrency) vs sequential GETs",
        )
    )

    # the skills index: cold (first load) and warm (the cache is keyed by ETag)
    def backend_index() -> int:
        return backend.load_skills_frontmatter(budget_chars=10**8).count("name: ")

    def naive_index() -> int:
        return len(naive.skills_index(SKILLS_PREFIX))

    naive_index()
    naive_index_seconds = meter.time(naive_index)
    backend.skills.invalidate()
    cold_count, backend_cold = meter.requests_of(backend_index)
    naive_count, naive_counts = meter.requests_of(naive_index)
    assert cold_count == naive_count, f"index sizes differ: {cold_count} vs {naive_count}"
    scenarios.append(
        Scenario(
            "skills index, cold",
            meter.time(backend_index, setup=backend.skills.invalidate),
            naive_index_seconds,
            backend_cold,
            naive_counts,
            f"{cold_count} skills indexed by both",
            "LIST + concurrent ranged GETs of SKILL.md heads vs LIST + sequential GETs",
        )
    )
    warm_count, backend_warm = meter.requests_of(backend_index)
    assert warm_count == cold_count
    scenarios.append(
        Scenario(
            "skills index, warm",
            meter.time(backend_index),
            naive_index_seconds,
            backend_warm,
            naive_counts,
            f"{warm_count} skills; nothing changed since the last load",
            "one LIST, no GET (ETag-keyed cache) vs the baseline's full reload",
        )
    )

    # read one file
    key = f"{WS_PREFIX}file-0001.md"

    def backend_read() -> str:
        result = backend.read("/workspace/file-0001.md", limit=10**6)
        assert result.error is None, result.error
        return str(result.file_data["content"])

    def naive_read() -> str:
        return naive.read(key)

    text, backend_counts = meter.requests_of(backend_read)
    naive_text, naive_counts = meter.requests_of(naive_read)
    assert text == naive_text
    scenarios.append(
        Scenario(
            "read one file",
            meter.time(backend_read),
            meter.time(naive_read),
            backend_counts,
            naive_counts,
            f"read = {total(backend_counts)} request(s)",
        )
    )
    return scenarios


def operation_counts(backend: S3Backend, meter: Meter) -> list[dict[str, Any]]:
    """Requests per S3Backend operation: what the proxy saw, and the S3 API calls behind it."""
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    skill_id = f"{CATEGORIES[1]}/skill-0001"
    operations: list[tuple[str, Callable[[], Any]]] = [
        ("ls /workspace", lambda: backend.ls("/workspace")),
        ("read file", lambda: backend.read("/workspace/file-0002.md")),
        ("read missing, no extension (.md retry)", lambda: backend.read("/workspace/missing")),
        ("write", lambda: backend.write("/workspace/out/new.md", "hello\n")),
        ("edit", lambda: backend.edit("/workspace/out/new.md", "hello", "bye")),
        ("glob **/*.md", lambda: backend.glob("**/*.md", "/workspace")),
        ("grep /workspace", lambda: backend.grep(NEEDLE, "/workspace")),
        ("upload_files x5", lambda: backend.upload_files([(f"/workspace/up/{i}.txt", b"x") for i in range(5)])),
        ("download_files x5", lambda: backend.download_files([f"/workspace/file-{i:04d}.md" for i in (1, 2, 4, 5, 7)])),
        ("delete folder (/workspace/up)", lambda: backend.delete("/workspace/up")),
        ("exists (a file)", lambda: backend.exists("/workspace/file-0004.md")),
        ("exists (a folder)", lambda: backend.exists("/workspace/notes")),
        ("load_skill", lambda: backend.load_skill(skill_id)),
        ("ls /skills/<loaded>", lambda: backend.ls("/skills/skill-0001")),
        ("read /skills/<loaded>/SKILL.md", lambda: backend.read("/skills/skill-0001/SKILL.md")),
        ("load_skill_content", lambda: backend.load_skill_content(skill_id)),
        ("load_skills_frontmatter (warm)", lambda: backend.load_skills_frontmatter()),
    ]
    rows = []
    for name, fn in operations:
        counter.reset()
        result, by_method = meter.requests_of(fn)
        error = getattr(result, "error", None)
        if isinstance(result, list):
            error = next((getattr(r, "error", None) for r in result if getattr(r, "error", None)), None)
        if name.startswith("read missing"):
            error = None if error and "not found" in error else f"unexpected: {error!r}"
        rows.append(
            {
                "operation": name,
                "requests": total(by_method),
                "by_method": by_method,
                "s3_calls": dict(sorted(counter.counts.items())),
                "error": error,
            }
        )
    backend.store.remove_request_hook(counter)
    return rows


# -- output ------------------------------------------------------------------------------------


def fmt_counts(counts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in counts.items()) or "-"


def print_report(report: dict[str, Any]) -> None:
    if "scenarios" in report:
        print_s3_report(report)
    if "startup" in report:
        print("\n" + startup.format_report(report["startup"]))
    print(f"\nTotal time {report['elapsed_seconds']:.1f}s; results in {report['output']}")


def print_s3_report(report: dict[str, Any]) -> None:
    cfg = report["config"]
    cal = report["calibration"]
    moto = str(cfg["server"]).startswith("moto")
    print(
        f"\ns3skills bench: {cfg['server']} behind a {cfg['latency_ms']:.0f} ms/request proxy; {cfg['skills']} skills, "
        f"{cfg['workspace_files']} workspace files; median of {cfg['repeat']} run(s) after a warm-up.\n"
        f"Server alone (no proxy): {cal['sequential_ms_per_get']} ms per GET in sequence, "
        f"{cal['concurrent_ms_per_get']} ms per GET under {cfg['concurrency']}-way concurrency"
        + (" (moto is a Python server: its CPU time per request bounds what concurrency can win)" if moto else "")
        + ".\n"
    )
    header = f"{'scenario':<22} {'s3skills':>10} {'baseline':>10} {'speedup':>8}  requests (s3skills | baseline)"
    print(header)
    print("-" * len(header))
    for s in report["scenarios"]:
        requests = f"{fmt_counts(s['backend_requests'])} | {fmt_counts(s['baseline_requests'])}"
        print(
            f"{s['name']:<22} {s['backend_seconds'] * 1000:>8.0f}ms {s['baseline_seconds'] * 1000:>8.0f}ms "
            f"{s['speedup']:>7.1f}x  {requests}"
        )
    print("\nRequests per S3Backend operation (as the proxy saw them):\n")
    header = f"{'operation':<40} {'requests':>8}  {'HTTP':<18} S3 API calls"
    print(header)
    print("-" * (len(header) + 20))
    for row in report["operations"]:
        flag = f"  ERROR: {row['error']}" if row["error"] else ""
        print(
            f"{row['operation']:<40} {row['requests']:>8}  {fmt_counts(row['by_method']):<18} "
            f"{fmt_counts(row['s3_calls'])}{flag}"
        )


def run_s3(server: str, skills: int, files: int, repeat: int, latency_ms: float) -> dict[str, Any]:
    """The S3 scenarios and the request counts per operation, on a fresh local server."""
    with start_upstream(server) as up, FaultProxy(up.url, latency=latency_ms / 1000) as proxy:
        bucket = make_bucket(up.url, "s3skills-bench", access_key=up.access_key, secret_key=up.secret_key)
        direct = make_client(up.url, access_key=up.access_key, secret_key=up.secret_key)
        seeded = seed(direct, bucket, skills, files)
        session = aioboto3.Session(aws_access_key_id=up.access_key, aws_secret_access_key=up.secret_key)
        backend = S3Backend(
            bucket,
            user_id=USER,
            thread_id=THREAD,
            endpoint_url=proxy.url,
            region_name="us-east-1",
            session=session,
            layout=LAYOUT,
        )
        workspace_keys = [o["Key"] for o in direct.list_objects_v2(Bucket=bucket, Prefix=WS_PREFIX)["Contents"]]
        calibration = calibrate(up, bucket, workspace_keys, backend.config.limits.concurrency)
        naive = NaiveS3(proxy.url, bucket, up.access_key, up.secret_key)
        meter = Meter(proxy, repeat)
        try:
            scenarios = run_scenarios(backend, naive, meter, bucket)
            operations = operation_counts(backend, meter)
        finally:
            backend.close()
    return {
        "config": {"concurrency": backend.config.limits.concurrency, **seeded},
        "calibration": calibration,
        "scenarios": [asdict(s) for s in scenarios],
        "operations": operations,
        "samples": meter.samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small run (50 skills, 50 files, 3 repeats)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a run of seconds that checks every scenario works (10 skills, 10 files, moto in a thread, "
        "1 repeat, 1 start-up run without warm-up); its numbers mean nothing",
    )
    parser.add_argument("--skills", type=int, help="skills in the user library (default 200; quick 50)")
    parser.add_argument("--files", type=int, help="files in the workspace (default 200; quick 50)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per scenario, median kept (default 3)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added per request (default 20)")
    parser.add_argument(
        "--server",
        choices=("moto", "moto-thread", "seaweedfs"),
        default="moto",
        help="the S3 server behind the proxy (default: moto in a subprocess)",
    )
    parser.add_argument(
        "--scenario",
        choices=("all", "s3", "startup", "index", "tenants"),
        default="all",
        help="what to run (default: all; `index` and `tenants` are long and run only when named, or in smoke mode)",
    )
    parser.add_argument("--users", type=int, default=50, help="users of the tenants scenario (default 50)")
    parser.add_argument(
        "--tenant-levels", default="10,50,200", help="runs in flight in the tenants scenario (default 10,50,200)"
    )
    parser.add_argument("--catalog-ttl", type=float, help="catalog_ttl of the tenants scenario (default: the default)")
    parser.add_argument(
        "--index-server",
        choices=("moto", "moto-thread", "seaweedfs"),
        default="seaweedfs",
        help="the S3 server of the index scenario (default: seaweedfs)",
    )
    parser.add_argument("--sizes", default="100,1000,10000", help="library sizes of the index scenario")
    parser.add_argument(
        "--baseline-max", type=int, default=1000, help="largest size the seeds' way and deepagents run at"
    )
    parser.add_argument("--push-skills", type=int, default=1000, help="skills pushed in the push scenario")
    parser.add_argument(
        "--startup-ref",
        default=startup.DEFAULT_REF,
        help=f"previous version for the start-up comparison, a git ref (default {startup.DEFAULT_REF}); "
        "'none' measures this tree only",
    )
    parser.add_argument("--startup-runs", type=int, default=5, help="timed runs of s3skills --help (default 5)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="directory for the JSON")
    args = parser.parse_args(argv)
    if args.smoke:
        args.quick, args.repeat, args.latency_ms, args.server, args.startup_runs = True, 1, 1.0, "moto-thread", 1
        args.index_server, args.sizes, args.push_skills = "moto-thread", "20,60", 20
        args.users, args.tenant_levels = 4, "2,4"
    size = 10 if args.smoke else 50 if args.quick else 200
    skills = args.skills if args.skills is not None else size
    files = args.files if args.files is not None else size
    ref = None if args.startup_ref.lower() == "none" else args.startup_ref
    run = record.Run("run", argv)
    started = time.perf_counter()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report: dict[str, Any] = {
        "config": {
            "scenario": args.scenario,
            "server": args.server,
            "latency_ms": args.latency_ms,
            "repeat": args.repeat,
            "quick": args.quick,
            "smoke": args.smoke,
        },
        "environment": {"python": platform.python_version(), "platform": platform.platform()},
        "started_at": stamp,
    }
    if args.scenario in ("all", "startup"):
        try:
            report["startup"] = startup.compare(ref, args.startup_runs, warmup=not args.smoke)
        except ValueError as exc:
            parser.error(str(exc))
    if args.scenario in ("all", "s3"):
        s3 = run_s3(args.server, skills, files, args.repeat, args.latency_ms)
        report["config"].update(s3.pop("config"))
        report.update(s3)
    if args.scenario == "index" or (args.scenario == "all" and args.smoke):
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        with start_upstream(args.index_server) as up:
            plot_path = args.out / f"index-{stamp}{'-smoke' if args.smoke else ''}.png"
            report["index"] = index_bench.run_index(
                up,
                sizes,
                args.repeat,
                args.latency_ms,
                args.baseline_max,
                args.push_skills,
                plot_path,
                smoke=args.smoke,
            )
    if args.scenario == "tenants":
        levels = tuple(int(x) for x in args.tenant_levels.split(",") if x.strip())
        with start_upstream(args.index_server) as up:
            report["tenants"] = tenants_bench.run_tenants(
                up,
                latency_ms=args.latency_ms,
                users=args.users,
                per_user=5 if args.smoke else 20,
                shared=10 if args.smoke else 100,
                levels=levels,
                catalog_ttl=args.catalog_ttl,
                min_runs=4 if args.smoke else 50,
            )

    args.out.mkdir(parents=True, exist_ok=True)
    kind = "smoke" if args.smoke else "quick" if args.quick else ""
    server = args.index_server if args.scenario in ("index", "tenants") else args.server
    name = "-".join(part for part in ("bench", stamp, args.scenario, server, kind) if part)
    output = args.out / f"{name}.json"
    report["elapsed_seconds"] = round(time.perf_counter() - started, 2)
    report["output"] = str(output.relative_to(ROOT) if output.is_relative_to(ROOT) else output)
    # The commit, machine, load averages and command line of bench/record.py; samples stay in place.
    report.update((k, v) for k, v in run.report().items() if k != "samples")
    output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print_report(report)
    if "index" in report:
        index_bench.print_index_report(report["index"])
    if "tenants" in report:
        tenants_bench.print_tenants_report(report["tenants"])
    failed = [row["operation"] for row in report.get("operations", []) if row["error"]]
    failed += [
        f"tenants at {row['concurrency']}" for row in report.get("tenants", {}).get("levels", []) if row["errors"]
    ]
    missed = [t["target"] for t in report.get("index", {}).get("targets", []) if not t["ok"]]
    return 1 if failed or missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
