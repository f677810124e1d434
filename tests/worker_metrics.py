"""Watching `s3skills mcp --workers N --metrics` from tests: its worker processes (through /proc)
and the calls each one counted (the Prometheus client's multiprocess files, one set per pid)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from s3skills.serve.metrics import _SizedFiles


def cmdline(pid: int) -> str:
    """The command line of `pid`, spaces between its arguments ("" once it has ended)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def worker_pids(manager: int) -> set[int]:
    """The pids of the worker processes of the manager `manager` (its children running the server)."""
    found: set[int] = set()
    for task in Path(f"/proc/{manager}/task").glob("*"):
        with contextlib.suppress(OSError):
            found |= {int(p) for p in (task / "children").read_text().split()}
    return {p for p in found if "spawn_main" in cmdline(p)}


def families(text: str) -> dict[str, Any]:
    """The metric families of a `/metrics` text, by name (parsed by the client's own parser)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def calls_of(by_name: dict[str, Any]) -> dict[str, float]:
    """`s3skills_mcp_calls_total` of tools/call, by tool; every one must have ended ok. Empty when
    no call was counted (a process that answered none writes no sample of the family)."""
    counted: dict[str, float] = {}
    family = by_name.get("s3skills_mcp_calls")
    for sample in family.samples if family is not None else []:
        if sample.name == "s3skills_mcp_calls_total" and sample.labels["method"] == "tools/call":
            assert sample.labels["status"] == "ok", sample
            tool = sample.labels["tool"]
            counted[tool] = counted.get(tool, 0.0) + sample.value
    return counted


def per_worker(run_dir: Path, pid: int, scratch: Path) -> dict[str, float]:
    """The calls counted by one worker (`calls_of`): its own files of the run's metrics directory
    alone, copied to `scratch`/pid (which must not exist) and merged by the client's collector."""
    own = scratch / str(pid)
    own.mkdir(parents=True)
    for file in run_dir.glob(f"*_{pid}.db"):
        shutil.copy(file, own / file.name)
    registry = CollectorRegistry()
    registry.register(_SizedFiles(str(own)))  # the server's own merge: a file still being created is left out
    return calls_of(families(generate_latest(registry).decode()))
