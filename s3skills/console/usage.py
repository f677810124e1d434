"""Usage for the console: loads per skill per day, from a usage log of JSON lines.

Agents log each skill load, script run and execution on the `s3skills.usage` logger
(`s3skills.skills.usage`); a deployment ships those records where it likes. The console
reads them as JSON lines (`--usage-log FILE`): one object per line with `event`, `skill`,
`outcome` and a time, either `time` (ISO 8601) or `created` (seconds since the epoch, a
`logging.LogRecord`'s). Lines that do not parse are counted and skipped; only the last
`MAX_LOG_BYTES` of the file are read. The plot is an SVG drawn by matplotlib's SVG backend.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

__all__ = ["MAX_LOG_BYTES", "Usage", "loads_plot", "read_usage"]

MAX_LOG_BYTES = 64 * 1024 * 1024
WINDOW_DAYS = 30


@dataclass
class Usage:
    """What a usage log says about the last `WINDOW_DAYS` days.

    Attributes:
        days: The days of the window, oldest first.
        loads: skill id -> loads per day (aligned with `days`).
        failures: skill id -> failed loads, script runs and executions in the window.
        skipped: Lines that did not parse.
    """

    days: list[date]
    loads: dict[str, list[int]] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    skipped: int = 0

    def total(self, skill: str) -> int:
        """Loads of `skill` in the window."""
        return sum(self.loads.get(skill, ()))


_cache: dict[Path, tuple[tuple[int, int, date], Usage]] = {}
_lock = threading.Lock()


def _when(doc: dict[str, object]) -> date | None:
    value = doc.get("time")
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return None
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).date()
    created = doc.get("created")
    if isinstance(created, int | float) and 0 < created < 1e11:
        return datetime.fromtimestamp(created, UTC).date()
    return None


def read_usage(path: Path, today: date | None = None) -> Usage:
    """The usage of the last `WINDOW_DAYS` days in the log at `path` (cached by size and mtime).

    Raises:
        OSError: The file cannot be read.
    """
    today = today or datetime.now(UTC).date()
    info = os.stat(path)
    stamp = (info.st_size, info.st_mtime_ns, today)
    with _lock:
        hit = _cache.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    days = [today - timedelta(days=n) for n in range(WINDOW_DAYS - 1, -1, -1)]
    position = {d: i for i, d in enumerate(days)}
    usage = Usage(days)
    with open(path, "rb") as f:
        if info.st_size > MAX_LOG_BYTES:
            f.seek(info.st_size - MAX_LOG_BYTES)
            f.readline()  # a partial line
        for raw in f:
            try:
                doc = json.loads(raw)
            except ValueError:
                usage.skipped += 1
                continue
            if not isinstance(doc, dict) or not isinstance(doc.get("skill"), str) or len(doc["skill"]) > 512:
                usage.skipped += 1
                continue
            day = _when(doc)
            if day is None:
                usage.skipped += 1
                continue
            if day not in position:
                continue
            skill = doc["skill"]
            if doc.get("outcome") not in ("ok", None):
                usage.failures[skill] += 1
            elif doc.get("event") == "skill_load":
                usage.loads.setdefault(skill, [0] * WINDOW_DAYS)[position[day]] += 1
    with _lock:
        _cache[path] = (stamp, usage)
    return usage


def loads_plot(usage: Usage, skills: list[str]) -> str:
    """Loads per day of `skills` as an SVG document (matplotlib's SVG backend)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.2))
    axes = figure.add_subplot()
    days = [datetime(d.year, d.month, d.day, tzinfo=UTC) for d in usage.days]
    for skill in skills:
        axes.plot(days, usage.loads.get(skill, [0] * len(days)), label=skill[:60], linewidth=1.5)  # type: ignore[arg-type]
    axes.set_ylabel("loads per day")
    axes.grid(alpha=0.3)
    if skills:
        axes.legend(fontsize=7, loc="upper left", ncols=2)
    figure.autofmt_xdate()
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return out.getvalue()
