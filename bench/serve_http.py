"""The MCP server over HTTP under load: calls/s and latency at 50 clients, 1 and 2 workers.

SeaweedFS on loopback (no added latency) holds `--users` libraries of `--skills` skills
each (a `SKILL.md` and a `references/guide.md`, with their manifests, as after a push).
For each `--workers` value a server is started as a user does
(`python -m s3skills.serve.mcp --transport http --workers N --catalog-ttl 5`), warmed up
(every user loads and reads every skill twice, then 3 s of calls), then `--clients`
clients call it for `--duration` seconds: each client is one user (round robin over the
users), with its own keep-alive connection, and loops over `list_skills(query)`,
`load_skill(name)` and `read_skill_file(name, references/guide.md)` of a skill picked at
random (seeded). Each call is a stateless JSON-RPC `tools/call` POST, as an MCP client
sends it, from `http_load.py` (pre-encoded requests on one loop; every answer checked).

Reported per run: calls/s, p50/p99 of all calls and of each tool, failed calls (not a 200,
a JSON-RPC error, `isError`, or not the answer asked for), and the CPU seconds the server's
processes, SeaweedFS and this load generator used (from /proc), per call and as cores.
Every latency sample is written to the results file. `--catalog-ttl 0` serves as without
the option (every call asks S3).

    python bench/serve_http.py                          # workers 1 then 2, 50 clients, 20 s each
    python bench/serve_http.py --workers 1,2,1,2 --duration 15
    python bench/serve_http.py --trace                  # also the per-step table (bench/serve_trace.py)

`--trace` runs one more server (1 worker) with the step tracer of `serve_trace.py` and
prints where a call's time goes, per tool: wall time by step at `--clients` clients, and
CPU by step with one client (where a step's CPU is its own).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fill import put_all  # bench/fill.py: this script's directory is first on sys.path
from http_load import GUIDE_PATH, GUIDE_START, QUERIES, TOOLS, load, run, sweep

from s3skills._loop import run_sync
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.storage import S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import make_bucket

LAYOUT = KeyLayout()


def user_of(i: int) -> str:
    return f"user-{i:03d}"


def skill_md(name: str, index: int) -> bytes:
    body = "\n".join(f"Step {i}: do the {name} thing carefully, line {i}." for i in range(30))
    return (
        f"---\nname: {name}\ndescription: Skill {index}; use it when the user asks to "
        f"{QUERIES[index % len(QUERIES)]}.\n---\n\n# {name}\n\n{body}\n"
    ).encode()


def fill_bucket(url: str, keys: tuple[str, str], users: int, per_user: int) -> str:
    """A bucket with every user's library and its manifest."""
    bucket = make_bucket(url, f"bench-serve-{int(time.time())}", access_key=keys[0], secret_key=keys[1])
    objects: list[tuple[str, bytes]] = []
    for u in range(users):
        for s in range(per_user):
            home = f"{LAYOUT.user_prefix(user_of(u))}skill-{s:03d}/"
            objects.append((home + "SKILL.md", skill_md(f"skill-{s:03d}", s)))
            objects.append((home + GUIDE_PATH, GUIDE_START.encode() + b"\n\n" + b"More detail.\n" * 40))
    run_sync(put_all(url, bucket, keys, objects))
    import aioboto3

    session = aioboto3.Session(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")
    store = S3ObjectStore(bucket, endpoint_url=url, region_name="us-east-1", session=session)
    for u in range(users):  # the manifests, as after a push
        lib = SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda u=u: Tenant(user_id=user_of(u)))
        lib.index()
        lib.flush()
    run_sync(store.aclose_all())
    return bucket


def tree(pid: int) -> list[int]:
    """`pid` and its live descendants (from /proc)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            todo.extend(int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split())
    return found


def rss_mib(pid: int) -> float:
    """Resident memory of one process, MiB (0 when it is gone)."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and their live children (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    seen, todo, total = set(), list(pids), 0.0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        todo.extend(int(c) for c in children)
    return total


@contextlib.contextmanager
def server(
    bucket: str, endpoint: str, keys: tuple[str, str], tokens: Path, workers: int, *extra: str, launcher: str = ""
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A server process (`--workers N`) on a free port; yields its /mcp URL; SIGTERM at the end."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID=keys[0], AWS_SECRET_ACCESS_KEY=keys[1], AWS_REGION="us-east-1")
    args = [
        *([launcher] if launcher else ["-m", "s3skills.serve.mcp"]),
        *("--bucket", bucket, "--endpoint-url", endpoint, "--transport", "http", "--port", "0"),
        *("--tokens", str(tokens)),
        *("--workers", str(workers)),
        *extra,
    ]
    proc = subprocess.Popen([sys.executable, *args], env=env, stderr=subprocess.PIPE)
    lines: list[str] = []
    listening = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            if line.startswith("listening on http://"):
                listening.set()
        listening.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not listening.wait(120) or proc.poll() is not None:
            raise RuntimeError("server did not start: " + "".join(lines)[-2000:])
        url = next(ln for ln in lines if ln.startswith("listening on")).removeprefix("listening on ").strip()
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        problems = [ln for ln in lines if "Traceback" in ln or "error" in ln.lower()]
        if problems:
            print("server stderr:", "".join(problems[:10]), file=sys.stderr)


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    samples = result["samples"]
    lat = [s[2] for s in samples]
    row: dict[str, Any] = {
        "calls": len(samples),
        "calls_per_second": round(len(samples) / result["wall"], 1),
        "p50_ms": round(1000 * statistics.median(lat), 1),
        "p99_ms": round(1000 * percentile(lat, 0.99), 1),
        "failed": sum(1 for s in samples if s[3] is not None),
        "first_failures": [s[3] for s in samples if s[3] is not None][:3],
    }
    for tool in TOOLS:
        mine = [s[2] for s in samples if s[0] == tool]
        row[tool] = {
            "p50_ms": round(1000 * statistics.median(mine), 1),
            "p99_ms": round(1000 * percentile(mine, 0.99), 1),
        }
    return row


def run_level(
    url: str, proc: subprocess.Popen[bytes], weed_pid: int | None, tokens: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    run(sweep(url, tokens, args.skills, args.clients))  # warm-up: every user loads and reads every skill
    run(load(url, tokens, len(tokens), 3.0, args.skills, warm_up=True))  # then every user, each tool
    pids = [proc.pid]
    cpu0 = cpu_seconds(pids), cpu_seconds([weed_pid]) if weed_pid else 0.0, time.process_time()
    result = run(load(url, tokens, args.clients, args.duration, args.skills))
    cpu1 = cpu_seconds(pids), cpu_seconds([weed_pid]) if weed_pid else 0.0, time.process_time()
    row = summarise(result)
    wall, calls = result["wall"], max(1, row["calls"])
    for name, a, b in zip(("server", "seaweedfs", "load_generator"), cpu0, cpu1, strict=True):
        row[f"{name}_cores"] = round((b - a) / wall, 2)
        row[f"{name}_cpu_ms_per_call"] = round(1000 * (b - a) / calls, 2)
    row["rss_mib_by_process"] = {  # after the load: the parent (with --workers N > 1) and each worker
        _name(p): round(rss_mib(p), 1) for p in tree(proc.pid) if "resource_tracker" not in _cmdline(p)
    }
    row["latencies_ms"] = [round(1000 * s[2], 2) for s in result["samples"]]
    return row


def main(argv: list[str] | None = None) -> int:
    import record  # bench/record.py: the results file
    import upstream  # bench/upstream.py: the servers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to run, in order (one run each)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per run")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--skills", type=int, default=20, help="skills per user")
    parser.add_argument(
        "--catalog-ttl",
        default="5",
        help="the server's --catalog-ttl in seconds (default 5, as the shared library's default TTL: a write "
        "shows within 5 s; 0: every call asks S3, as without the option)",
    )
    parser.add_argument("--trace", action="store_true", help="also trace a call's steps (bench/serve_trace.py)")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/serve_http-<time>.json)")
    args = parser.parse_args(argv)
    args.server_options = ["--catalog-ttl", args.catalog_ttl]
    run = record.Run("serve_http", argv)
    rows: list[dict[str, Any]] = []
    traced: dict[str, Any] | None = None
    with upstream.start_upstream("seaweedfs") as up, tempfile.TemporaryDirectory() as tmp:
        keys = (up.access_key, up.secret_key)
        bucket = fill_bucket(up.url, keys, args.users, args.skills)
        tokens = {f"tok-{user_of(u)}": user_of(u) for u in range(args.users)}
        tokens_file = Path(tmp) / "tokens.json"
        tokens_file.write_text(json.dumps(tokens))
        tokens_file.chmod(0o600)
        weed_pid = _weed_pid()
        for workers in (int(w) for w in args.workers.split(",") if w.strip()):
            with server(bucket, up.url, keys, tokens_file, workers, *args.server_options) as (url, proc):
                row = {
                    "workers": workers,
                    "load_before": os.getloadavg(),
                    **run_level(url, proc, weed_pid, tokens, args),
                }
            rows.append(row)
            print(_line(row), flush=True)
        if args.trace:
            import serve_trace  # bench/serve_trace.py

            traced = serve_trace.trace(bucket, up.url, keys, tokens_file, tokens, args, server, load)
            serve_trace.print_table(traced)
    report = {
        "users": args.users,
        "skills_per_user": args.skills,
        "clients": args.clients,
        "catalog_ttl": args.catalog_ttl,
        "runs": rows,
    }
    if traced is not None:
        report["trace"] = traced
    print(f"samples: {run.write(args.out, extra=report)}")
    return 1 if any(r["failed"] for r in rows) else 0


def _line(row: dict[str, Any]) -> str:
    tools = " ".join(f"{t} p50/p99 {row[t]['p50_ms']}/{row[t]['p99_ms']}" for t in TOOLS)
    return (
        f"workers={row['workers']} calls={row['calls']} calls/s={row['calls_per_second']} p50={row['p50_ms']} ms "
        f"p99={row['p99_ms']} ms failed={row['failed']} server={row['server_cores']} cores "
        f"({row['server_cpu_ms_per_call']} ms/call) seaweedfs={row['seaweedfs_cores']} "
        f"loadgen={row['load_generator_cores']} load_before={[round(x, 2) for x in row['load_before']]}\n  {tools}"
        f"\n  RSS MiB: {row['rss_mib_by_process']}"
    )


def _cmdline(pid: int) -> str:
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return ""


def _name(pid: int) -> str:
    return f"{'worker' if 'multiprocessing' in _cmdline(pid) else 'server'} {pid}"


def _weed_pid() -> int | None:
    """The `weed` process this bench started (a child of this process)."""
    me = os.getpid()
    children = Path(f"/proc/{me}/task/{me}/children").read_text().split()
    for pid in children:
        with contextlib.suppress(FileNotFoundError):
            if "weed" in Path(f"/proc/{pid}/cmdline").read_text():
                return int(pid)
    return None


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
