"""Usage for the console: loads per skill per day, from the library's store and a usage log.

Agents count their loads in the library's own `.s3skills/usage/` documents
(`s3skills.skills.usage_store`); the console reads them there (`library_usage`), with no log
to ship. A deployment may also give a log: agents log each skill load, script run and
execution on the `s3skills.usage` logger (`s3skills.skills.usage`), and the console reads
those records as JSON lines (`--usage-log FILE`): one object per line with `event`, `skill`,
`outcome` and a time, either `time` (ISO 8601) or `created` (seconds since the epoch, a
`logging.LogRecord`'s). Lines that do not parse are counted and skipped; only the last
`MAX_LOG_BYTES` of the file are read. Both are added up.

The usage page's plot is an SVG drawn by matplotlib's SVG backend. The library page draws a
sparkline per skill row (`sparkline`): 50 matplotlib figures would cost about a second per
page, so it is a 30-point polyline written here from integers only (no text of the library
enters it), with the total beside it as text.
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

from markupsafe import Markup

from s3skills.console.source import ConsoleSource
from s3skills.errors import S3SkillsError
from s3skills.skills.usage_store import WINDOW_DAYS

__all__ = ["MAX_LOG_BYTES", "Usage", "library_usage", "loads_plot", "read_usage", "sparkline"]

MAX_LOG_BYTES = 64 * 1024 * 1024


@dataclass
class Usage:
    """What a usage log says about the last `WINDOW_DAYS` days.

    Attributes:
        days: The days of the window, oldest first.
        loads: skill id -> loads per day (aligned with `days`).
        failures: skill id -> failed loads, script runs and executions in the window.
        skipped: Lines that did not parse.
        refused: Usage documents of the store that did not check out, each with why.
    """

    days: list[date]
    loads: dict[str, list[int]] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    refused: list[str] = field(default_factory=list)

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


def library_usage(source: ConsoleSource, usage_log: Path | None) -> tuple[Usage, list[str]]:
    """The library's usage over the last `WINDOW_DAYS` days: its store's documents (read as
    `ConsoleSource.stored_usage` says), plus the log's records when a log is given; and
    what could not be read."""
    today = datetime.now(UTC).date()
    notes = []
    usage = Usage([today - timedelta(days=n) for n in range(WINDOW_DAYS - 1, -1, -1)])
    try:
        stored = source.stored_usage(today)
    except (S3SkillsError, ValueError) as exc:
        notes.append(f"cannot read the usage kept in the library: {exc}")
    else:
        usage.loads = {skill: list(days) for skill, days in stored.loads.items()}
        usage.failures.update(stored.failures)
        usage.refused = stored.refused
    if usage_log is not None:
        try:
            logged = read_usage(usage_log, today)
        except OSError as exc:
            notes.append(f"cannot read the usage log: {exc.strerror or exc}")
        else:
            for skill, days in logged.loads.items():
                mine = usage.loads.setdefault(skill, [0] * WINDOW_DAYS)
                usage.loads[skill] = [a + b for a, b in zip(mine, days, strict=True)]
            usage.failures.update(logged.failures)
            usage.skipped = logged.skipped
    if usage.refused:
        notes.append(f"{len(usage.refused)} usage document(s) of the library were refused: see the usage page")
    return usage, notes


SPARK_WIDTH = 90
SPARK_HEIGHT = 18


def sparkline(days: list[int] | None) -> Markup:
    """Loads per day as a small inline SVG (a polyline of integers; nothing else goes in).

    Hidden from screen readers: the row gives the total as text.
    """
    values = [max(0, int(v)) for v in (days or [0] * WINDOW_DAYS)]
    top = max(values) or 1
    step = (SPARK_WIDTH - 2) / max(1, len(values) - 1)
    points = " ".join(
        f"{1 + i * step:.1f},{SPARK_HEIGHT - 1 - (SPARK_HEIGHT - 2) * v / top:.1f}" for i, v in enumerate(values)
    )
    svg = (
        f'<svg class="spark" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" '
        f'aria-hidden="true" focusable="false"><polyline fill="none" stroke="currentColor" stroke-width="1.5" '
        f'points="{points}"/></svg>'
    )
    return Markup(svg)  # noqa: S704  # numbers formatted here and constants only: nothing to escape
