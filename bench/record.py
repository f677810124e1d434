"""Every sample of a bench run, written to one JSON results file (shared by the benches).

A figure quoted in bench/README.md is the median and the spread of *all* the samples of
one command, so each bench keeps every sample, not only its median, and writes them with
what is needed to judge them: the commit, the machine (platform, Python, CPUs), the load
average before and after the run (the benches run on shared machines) and the command
line. Files go to `bench/results/` (gitignored) unless the bench is given `--out`.

    run = record.Run("cold_vs_raw")
    run.sample("raw transfer", wall=1.9, cpu=1.6)
    path = run.write(extra={"skills": 1000})
    print(record.spread([1.0, 2.0, 3.0]))   # {'n': 3, 'median': 2.0, 'min': 1.0, ...}
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["DIR", "Run", "describe", "machine", "spread"]

DIR = Path(__file__).resolve().parent / "results"


def _commit() -> str:
    try:
        found = subprocess.run(
            ["git", "-C", str(DIR.parent), "describe", "--always", "--dirty", "--abbrev=40"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return found.stdout.strip()


def machine() -> dict[str, Any]:
    """The commit (with `-dirty` when the tree has changes), platform, Python and CPU count."""
    return {
        "commit": _commit(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
    }


def spread(values: Iterable[float]) -> dict[str, float]:
    """n, median, min, max, p10 and p90 of `values` (all of them; empty: n = 0 only)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return {"n": 0}
    if len(xs) == 1:
        p10 = p90 = xs[0]
    else:
        deciles = statistics.quantiles(xs, n=10, method="inclusive")
        p10, p90 = deciles[0], deciles[-1]
    return {"n": len(xs), "median": statistics.median(xs), "min": xs[0], "max": xs[-1], "p10": p10, "p90": p90}


def describe(values: Iterable[float], fmt: str = "{:.3f}", unit: str = "") -> str:
    """`median [min-max] (n)` of `values`, for a printed table."""
    s = spread(values)
    if not s["n"]:
        return "-"
    return f"{fmt.format(s['median'])}{unit} [{fmt.format(s['min'])}-{fmt.format(s['max'])}{unit}] (n={int(s['n'])})"


class Run:
    """One run of a bench: its samples, grouped by name, and where and how it ran."""

    def __init__(self, bench: str, argv: list[str] | None = None) -> None:
        self.bench = bench
        script = Path(sys.argv[0]).name if argv is None else f"{bench}.py"
        self.command = [script, *(sys.argv[1:] if argv is None else argv)]
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.load_before = list(os.getloadavg())
        self.samples: dict[str, list[dict[str, Any]]] = {}

    def sample(self, name: str, **fields: Any) -> None:
        """Record one sample of `name` (its fields: seconds, counts, ...)."""
        self.samples.setdefault(name, []).append(fields)

    def values(self, name: str, field: str) -> list[float]:
        """The `field` of every sample of `name`."""
        return [float(s[field]) for s in self.samples.get(name, [])]

    def report(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The results document: machine, load averages, command, every sample, and `extra`."""
        return {
            "bench": self.bench,
            "command": self.command,
            "machine": machine(),
            "started": self.started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average_before": self.load_before,
            "load_average_after": list(os.getloadavg()),
            **(dict(extra) if extra else {}),
            **({"samples": self.samples} if self.samples else {}),  # else the samples are in `extra`
        }

    def write(self, out: Path | None = None, extra: Mapping[str, Any] | None = None) -> Path:
        """Write the results document to `out` (default `bench/results/<bench>-<time>.json`)."""
        path = out if out is not None else DIR / f"{self.bench}-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.report(extra), indent=1, default=str) + "\n", encoding="utf-8")
        return path
