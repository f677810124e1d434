"""The usage log: one structured record per skill load, script run and skill execution.

Records go to the `s3skills.usage` logger with their fields in `extra`
(`event`, `skill`, `user_id`, `thread_id`, `duration_ms`, `outcome`;
`thread` is taken by `logging.LogRecord` itself), so any logging
setup can ship them. `usage_stats()` summarises the records this process has
seen, per skill (the seeds' analytics), from a bounded in-memory window.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["USAGE_LOGGER", "SkillUsage", "log_usage", "reset_usage", "usage_stats"]

USAGE_LOGGER = "s3skills.usage"

logger = logging.getLogger(USAGE_LOGGER)


@dataclass(frozen=True, slots=True)
class SkillUsage:
    """What the process has seen of one skill."""

    skill: str
    loads: int
    script_runs: int
    failures: int
    users: int
    avg_duration_ms: float
    executions: int = 0
    """`use_skill` runs, refused ones included (those count as failures too)."""


class _Recorder:
    """Keeps the last `capacity` usage records for `usage_stats`."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.records: deque[dict[str, Any]] = deque(maxlen=capacity)
        self.lock_ = threading.Lock()


_recorder = _Recorder()
# Not attached to the logger: the library configures no logging at import. `log_usage`
# keeps each record here and hands it to the logger, for whatever handlers the app set.


def log_usage(
    event: str,
    *,
    skill: str,
    user: str | None,
    thread: str | None,
    duration_ms: float,
    outcome: str,
    **extra: Any,
) -> None:
    """Emit one usage record.

    `event` is `skill_load`, `script_run` or `skill_execution` (a `use_skill` run);
    `outcome` is `ok` or what went wrong (`error`, `refused`, `timeout`...).
    """
    fields = {
        "event": event,
        "skill": skill,
        "user_id": user,
        "thread_id": thread,
        "duration_ms": round(duration_ms, 1),
        "outcome": outcome,
        **extra,
    }
    with _recorder.lock_:
        _recorder.records.append(fields)
    logger.info("%s %s %s (%s, %.0f ms)", event, skill, outcome, user, duration_ms, extra=fields)


def usage_stats() -> dict[str, SkillUsage]:
    """Per-skill summary of the usage records this process has kept."""
    with _recorder.lock_:
        records = list(_recorder.records)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("skill"):
            grouped.setdefault(str(rec["skill"]), []).append(rec)
    out = {}
    for skill, recs in sorted(grouped.items()):
        durations = [float(r["duration_ms"]) for r in recs if r.get("duration_ms") is not None]
        out[skill] = SkillUsage(
            skill=skill,
            loads=sum(1 for r in recs if r.get("event") == "skill_load" and r.get("outcome") == "ok"),
            script_runs=sum(1 for r in recs if r.get("event") == "script_run"),
            failures=sum(1 for r in recs if r.get("outcome") not in ("ok", None)),
            users=len({r.get("user_id") for r in recs if r.get("user_id")}),
            avg_duration_ms=round(sum(durations) / len(durations), 1) if durations else 0.0,
            executions=sum(1 for r in recs if r.get("event") == "skill_execution"),
        )
    return out


def reset_usage() -> None:
    """Forget the kept records (tests, or after shipping them elsewhere)."""
    with _recorder.lock_:
        _recorder.records.clear()
