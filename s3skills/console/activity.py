"""The console's activity pages: the audit timeline and the usage of skills.

The audit is `s3skills audit --json` (records, channel events, approvals: the same rows,
the same actors), filtered by skill, actor, command and date. Usage comes from the
counts the agents keep in the library's `.s3skills/usage/`, plus a usage log when one is
given (`s3skills.usage` records shipped as JSON lines, `--usage-log FILE`): loads per skill
per day, plotted as SVG by matplotlib on the server, and the skills never loaded; skills
whose trigger evals fail come from `s3skills eval --all`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from s3skills.console.auth import Identity
from s3skills.console.source import ConsoleError
from s3skills.console.usage import Usage, library_usage, loads_plot
from s3skills.console.web import FILE_CSP, Console, reader

__all__ = ["ACTIVITY_ROUTES"]

MAX_AUDIT_ROWS = 500


def audit_page(request: Request, console: Console, who: Identity) -> Response:
    """Every recorded action, newest first, filtered by skill, actor, command and date."""
    params = request.query_params
    skill = params.get("skill", "").strip()[:300]
    actor = params.get("actor", "").strip()[:300]
    command = params.get("command", "").strip()[:64]
    since = params.get("since", "").strip()[:40]
    until = params.get("until", "").strip()[:40]
    args = ["audit"] + ([skill] if skill else []) + (["--since", since] if since else [])
    try:
        found = console.source.command(*args)
    except ConsoleError as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    rows = found.get("actions", [])
    commands = sorted({r.get("action", "") for r in rows})
    if actor:
        rows = [r for r in rows if actor.lower() in str(r.get("actor", "")).lower()]
    if command:
        rows = [r for r in rows if r.get("action") == command]
    if until:
        rows = [r for r in rows if str(r.get("time", ""))[: len(until)] <= until]
    return console.page(
        request,
        who,
        "audit.html",
        rows=rows[:MAX_AUDIT_ROWS],
        total=len(rows),
        ignored=found.get("ignored", []),
        skill=skill,
        actor=actor,
        command=command,
        since=since,
        until=until,
        commands=commands,
    )


PLOTTED = 10
"""Skills drawn on the usage plot (the most loaded)."""
MAX_REFUSED_SHOWN = 50
"""Refused usage documents named on the usage page (with why)."""


def _usage(console: Console) -> tuple[Usage, list[str]]:
    return library_usage(console.source, console.usage_log)


def usage_page(request: Request, console: Console, who: Identity) -> Response:
    """Loads per skill over the last 30 days, skills never loaded, skills whose triggers fail."""
    usage, notes = _usage(console)
    skills = [s.id for s in console.source.library.index() if s.source != "code"]
    ranked = sorted(skills, key=lambda s: -usage.total(s))
    evals: dict[str, Any] | None = None
    failing: list[dict[str, Any]] = []
    if request.query_params.get("evals") == "1":
        try:
            evals = console.source.command("eval", "--all")
        except ConsoleError as exc:
            evals = {"errors": [str(exc)], "skills": []}
        for report in evals.get("skills") or []:
            if (report.get("recall") or 0) < 1 or (report.get("false_trigger_rate") or 0) > 0:
                failing.append(report)
    return console.page(
        request,
        who,
        "usage.html",
        usage=usage,
        notes=notes,
        refused=usage.refused[:MAX_REFUSED_SHOWN],
        ranked=[(s, usage.total(s), usage.failures[s]) for s in ranked[:200]],
        never=[s for s in skills if usage.total(s) == 0],
        evals=evals,
        failing=failing,
    )


def usage_plot(request: Request, console: Console, who: Identity) -> Response:
    """The plot of the most loaded skills, an SVG shown as an image (nothing in it runs)."""
    usage, _ = _usage(console)
    top = sorted((s for s in usage.loads if usage.total(s)), key=lambda s: -usage.total(s))[:PLOTTED]
    headers = {"Content-Security-Policy": FILE_CSP}
    return Response(loads_plot(usage, top), media_type="image/svg+xml", headers=headers)


ACTIVITY_ROUTES = [
    Route("/audit", reader(audit_page)),
    Route("/usage", reader(usage_page)),
    Route("/usage.svg", reader(usage_plot)),
]
