"""The console's activity pages: the audit timeline and the usage of skills.

The audit is `s3skills audit --json` (records, channel events, approvals: the same rows,
the same actors), filtered by skill, actor, command and date. Usage comes from the
usage log the agents' processes write (`s3skills.usage` records shipped as JSON lines,
`--usage-log FILE`): loads per skill per day, plotted as SVG by matplotlib on the server,
and the skills never loaded; skills whose trigger evals fail come from `s3skills eval --all`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from s3skills.console.auth import Identity
from s3skills.console.source import ConsoleError
from s3skills.console.web import Console, reader

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


ACTIVITY_ROUTES = [Route("/audit", reader(audit_page))]
