"""The usage log: one structured record per skill load, script run and skill execution.

Records go to the `s3skills.usage` logger with their fields in `extra`
(`event`, `skill`, `version`, `user_id`, `thread_id`, `duration_ms`, `outcome`;
`thread` is taken by `logging.LogRecord` itself), so any logging
setup can ship them. `usage_stats()` summarises the records this process has
seen, per skill or per skill version (the seeds' analytics), from a bounded
in-memory window; `skill_uses(user_id)` counts one user's successful uses in that window
(kept as records come and go), which the skill ranking uses as a prior.

When `opentelemetry-api` is installed (the `otel` extra), each record is also a
span named `s3skills.<event>` (back-dated by its duration, with the fields as
`s3skills.*` attributes), so loads and script runs show in the app's traces. With
no tracer provider configured the API's no-op tracer makes that free.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["USAGE_LOGGER", "SkillUsage", "log_usage", "reset_usage", "skill_uses", "usage_stats"]

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
    version: str | None = None
    """The skill version (with `usage_stats(by="version")`; None when grouped by skill)."""


class _Recorder:
    """Keeps the last `capacity` usage records for `usage_stats`."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.records: deque[dict[str, Any]] = deque(maxlen=capacity)
        self.lock_ = threading.Lock()
        # user id -> skill -> successful uses among `records` (kept in step with the window,
        # so the ranking's prior costs a lookup per model call, not a scan).
        self.uses: dict[str, Counter[str]] = {}

    def add(self, fields: dict[str, Any]) -> None:
        """Keep `fields` (the caller holds `lock_`), forgetting the oldest record when full."""
        if self.records.maxlen is not None and len(self.records) == self.records.maxlen:
            self._count(self.records[0], -1)
        self.records.append(fields)
        self._count(fields, 1)

    def _count(self, fields: dict[str, Any], step: int) -> None:
        user, skill = fields.get("user_id"), fields.get("skill")
        if not user or not skill or fields.get("outcome") != "ok":
            return
        counts = self.uses.setdefault(str(user), Counter())
        counts[str(skill)] += step
        if counts[str(skill)] <= 0:
            del counts[str(skill)]
            if not counts:
                del self.uses[str(user)]


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
    version: str | None = None,
    **extra: Any,
) -> None:
    """Emit one usage record.

    `event` is `skill_load`, `script_run` or `skill_execution` (a `use_skill` run);
    `outcome` is `ok` or what went wrong (`error`, `refused`, `timeout`...);
    `version` is the skill version loaded or run (None when unknown).
    """
    fields = {
        "event": event,
        "skill": skill,
        "version": version,
        "user_id": user,
        "thread_id": thread,
        "duration_ms": round(duration_ms, 1),
        "outcome": outcome,
        **extra,
    }
    with _recorder.lock_:
        _recorder.add(fields)
    logger.info("%s %s %s (%s, %.0f ms)", event, skill, outcome, user, duration_ms, extra=fields)
    _emit_span(fields)


def _emit_span(fields: dict[str, Any]) -> None:
    """The record as an OpenTelemetry span, when `opentelemetry-api` is installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return
    end = time.time_ns()
    start = end - int(float(fields.get("duration_ms") or 0.0) * 1_000_000)
    attributes = {
        f"s3skills.{name}": value if isinstance(value, bool | int | float | str) else str(value)
        for name, value in fields.items()
        if value is not None
    }
    tracer = trace.get_tracer("s3skills")
    span = tracer.start_span(f"s3skills.{fields['event']}", start_time=start, attributes=attributes)
    if fields.get("outcome") not in ("ok", None):
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(fields["outcome"])))
    span.end(end_time=end)


def usage_stats(by: Literal["skill", "version"] = "skill") -> dict[str, SkillUsage]:
    """Summary of the usage records this process has kept.

    Args:
        by: `skill` (keys are skill ids) or `version` (keys are `skill@version`;
            records without a version are grouped under `skill@unknown`).
    """
    if by not in ("skill", "version"):
        raise ValueError("by must be 'skill' or 'version'")
    with _recorder.lock_:
        records = list(_recorder.records)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("skill"):
            key = str(rec["skill"]) if by == "skill" else f"{rec['skill']}@{rec.get('version') or 'unknown'}"
            grouped.setdefault(key, []).append(rec)
    out = {}
    for key, recs in sorted(grouped.items()):
        skill = str(recs[0]["skill"])
        durations = [float(r["duration_ms"]) for r in recs if r.get("duration_ms") is not None]
        out[key] = SkillUsage(
            skill=skill,
            loads=sum(1 for r in recs if r.get("event") == "skill_load" and r.get("outcome") == "ok"),
            script_runs=sum(1 for r in recs if r.get("event") == "script_run"),
            failures=sum(1 for r in recs if r.get("outcome") not in ("ok", None)),
            users=len({r.get("user_id") for r in recs if r.get("user_id")}),
            avg_duration_ms=round(sum(durations) / len(durations), 1) if durations else 0.0,
            executions=sum(1 for r in recs if r.get("event") == "skill_execution"),
            version=(recs[0].get("version") or None) if by == "version" else None,
        )
    return out


def skill_uses(user_id: str | None) -> dict[str, int]:
    """How often `user_id` used each skill successfully (loads, script runs, executions)
    among the records this process keeps; {} for no user. The prompt index ranks a
    user's skills higher with it (`s3skills.skills.ranking.rankers.prior_for`)."""
    if not user_id:
        return {}
    with _recorder.lock_:
        counts = _recorder.uses.get(user_id)
        return dict(counts) if counts else {}


def reset_usage() -> None:
    """Forget the kept records (tests, or after shipping them elsewhere)."""
    with _recorder.lock_:
        _recorder.records.clear()
        _recorder.uses.clear()
