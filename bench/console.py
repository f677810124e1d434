"""The console's library page at 10,000 skills, through the latency proxy: p50 and p95.

    python bench/console.py                              # 10,000 skills, SeaweedFS, +20 ms, 60 pages
    python bench/console.py --skills 2000 --runs 20 --server moto

A shared library `org` of `--skills` skills (ten categories, a script each) on a local S3
server, written as a push leaves it but faster (64 PUTs in flight, `fill.py`): the files, one
version record per skill (`VersionRecord`, its content id the files' version), the manifest
(one index built and flushed); then two channels (staging, production, `s3skills channel
create`); the console (`s3skills.console.create_app`, in process,
driven by Starlette's TestClient) reads it through `FaultProxy`, which adds `--latency-ms`
to every request. Timed: the library page (`GET /`, its first page of 50 skills), a page
in the middle (`?page=100`), a search (`?q=...`), and the library page of a console that
keeps no skill's version and last change (`details_ttl=0`: 50 records read at every view),
and that of a console that keeps no view of the library (`library_views=0`: every skill's
category, the problems and the filters at every view), `--runs` times each after one warm-up;
reported: p50, p95 and max of every sample, the CPU time of this process per view (median:
`time.process_time`, every thread of it, the proxy's included), and the requests the proxy
saw per page. The
target (issue 38): the library page's p95 within 300 ms at 10,000 skills.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fill  # bench/fill.py: PUTs straight to the server
import record  # bench/record.py: the results file
import upstream  # bench/upstream.py: the servers

from s3skills._loop import run_sync
from s3skills.cli import Settings, main
from s3skills.console import ConsoleSource, TokenRoles, create_app
from s3skills.layout import KeyLayout
from s3skills.skills.versions.history import version_id_of
from s3skills.skills.versions.records import RecordFile, VersionRecord, new_record_id
from s3skills.testing import FaultProxy, builders, make_bucket

PAGES = {
    "library": "/",
    "page 100": "/?page=100",
    "search": "/?q=extract+tables+from+reports",
    "library, nothing kept": "/",
    "library, no view kept": "/",
}
"""The pages timed; `nothing kept` with `details_ttl=0` (each view reads every shown skill's
record), `no view kept` with `library_views=0` (each view sorts, derives and filters every skill)."""


def objects(prefix: str, records: str, count: int) -> list[tuple[str, bytes]]:
    """Every object of the library: each skill's SKILL.md and script, and its version record."""
    out: list[tuple[str, bytes]] = []
    when = datetime.now(UTC)
    for i in range(count):
        sid = f"cat{i % 10}/skill-{i:05d}"
        text = f"Skill number {i} extracts tables from reports of kind {i % 97}"
        files = {
            "SKILL.md": builders.skill_md(f"skill-{i:05d}", text).encode(),
            "scripts/run.py": f"print({i})\n".encode(),
        }
        out += [(f"{prefix}{sid}/{path}", body) for path, body in files.items()]
        etags = {path: hashlib.md5(body, usedforsecurity=False).hexdigest() for path, body in files.items()}
        rid = new_record_id(when + timedelta(microseconds=i))
        record = VersionRecord(
            rid,
            sid,
            version_id_of(etags.items()),
            tuple(RecordFile(path, None, etag, len(files[path])) for path, etag in etags.items()),
            when,
            "author",
            "push",
        )
        out.append((f"{records}{sid}/{rid}.json", json.dumps(record.to_json()).encode()))
    return out


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def measure(up: Any, skills: int, runs: int, latency_ms: float) -> dict[str, Any]:
    keys = {"access_key": up.access_key, "secret_key": up.secret_key}
    bucket = make_bucket(up.url, f"bench-console-{int(time.time())}", **keys)
    os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = up.access_key, up.secret_key
    base = ["--bucket", bucket, "--shared", "org", "--endpoint-url", up.url]
    layout = KeyLayout()
    prefix = layout.shared_prefix("org")
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        main([*base, "versioning", "enable"])
        run_sync(
            fill.put_all(
                up.url, bucket, (up.access_key, up.secret_key), objects(prefix, layout.records_prefix(prefix), skills)
            )
        )
        with contextlib.redirect_stdout(io.StringIO()):
            main([*base, "list"])  # the index, built from a LIST, and its manifest stored
        for channel in ("staging", "production"):
            main([*base, "channel", "create", channel, "--from", "latest"])
        filled = time.perf_counter() - began
        tokens = Path(tmp) / "tokens.json"
        tokens.write_text(json.dumps({"bench-token": "bench"}))
        tokens.chmod(0o600)
        from starlette.testclient import TestClient

        rows: dict[str, Any] = {}
        with FaultProxy(up.url, latency=latency_ms / 1000) as proxy:
            source = ConsoleSource(Settings(bucket=bucket, shared="org", endpoint_url=proxy.url))
            auth = {"Authorization": "Bearer bench-token"}
            kept = TestClient(create_app(source, TokenRoles(tokens)), headers=auth)
            clients = {
                "library, nothing kept": TestClient(
                    create_app(source, TokenRoles(tokens), details_ttl=0), headers=auth
                ),
                "library, no view kept": TestClient(
                    create_app(source, TokenRoles(tokens), library_views=0), headers=auth
                ),
            }
            for name, path in PAGES.items():
                client = clients.get(name, kept)
                assert client.get(path).status_code == 200  # warm-up: the index, clients
                times: list[float] = []
                cpu: list[float] = []
                requests = 0
                for _ in range(runs):
                    proxy.reset_counts()
                    started, used = time.perf_counter(), time.process_time()
                    page = client.get(path)
                    times.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - used)
                    assert page.status_code == 200, page.text[:300]
                    requests = proxy.total_requests
                rows[name] = {
                    "path": path,
                    "samples_ms": [round(t * 1000, 1) for t in times],
                    "p50_ms": round(statistics.median(times) * 1000, 1),
                    "p95_ms": round(p95(times) * 1000, 1),
                    "max_ms": round(max(times) * 1000, 1),
                    "cpu_samples_ms": [round(t * 1000, 1) for t in cpu],
                    "cpu_p50_ms": round(statistics.median(cpu) * 1000, 1),
                    "requests_per_page": requests,
                    "requests_by_kind": dict(sorted(proxy.requests.items())),
                }
    return {"skills": skills, "latency_ms": latency_ms, "runs": runs, "fill_seconds": round(filled, 1), "pages": rows}


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("moto", "moto-thread", "seaweedfs"), default="seaweedfs")
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/console-<time>.json)")
    args = parser.parse_args(argv)
    run = record.Run("console", argv)
    with upstream.start_upstream(args.server) as up:
        report = measure(up, args.skills, max(2, args.runs), args.latency_ms)
    report["server"] = args.server
    for name, row in report["pages"].items():
        print(
            f"{name:<22} p50 {row['p50_ms']:>7.1f} ms  p95 {row['p95_ms']:>7.1f} ms  max {row['max_ms']:>7.1f} ms  "
            f"CPU p50 {row['cpu_p50_ms']:>6.1f} ms  "
            f"{row['requests_per_page']} requests {row['requests_by_kind']}"
        )
    library, unkept = report["pages"]["library"], report["pages"]["library, no view kept"]
    print(f"CPU a view, no view kept / views kept: {unkept['cpu_p50_ms'] / max(library['cpu_p50_ms'], 0.1):.2f}x")
    print(f"samples: {run.write(args.out, extra=report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())
