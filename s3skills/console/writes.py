"""The console's changes: enable, disable, approve, set a channel's version, promote.

Each is the CLI command itself (`ConsoleSource.command`) run with `--actor` set to the
signed-in user, so the record, the channel change, the approval and the audit event are
exactly what `s3skills enable|disable|approve|channel set|channel promote` write, naming
that user. Only a curator reaches these handlers, with the CSRF token of their session
(`app.curator`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from s3skills.aio import run_sync
from s3skills.console.auth import Identity
from s3skills.console.render import DiffFile, side_by_side
from s3skills.console.source import ConsoleError
from s3skills.console.web import Console, curator, reader
from s3skills.errors import InvalidPath
from s3skills.ids import SkillId
from s3skills.skills.versions.approvals import Approval, aread_approvals
from s3skills.skills.versions.channels import check_channel_name

__all__ = ["WRITE_ROUTES", "approval_diffs", "approvals_of"]


def _done(message: str, back: str) -> Response:
    return RedirectResponse(f"{back}{'&' if '?' in back else '?'}{urlencode({'done': message[:300]})}", 303)


def _run(request: Request, console: Console, who: Identity, back: str, *args: str) -> Response:
    try:
        console.source.command(*args, actor=who.user)
    except ConsoleError as exc:
        console.details.clear()
        return console.page(request, who, "error.html", 400, message=str(exc))
    console.details.clear()
    return _done(f"{' '.join(args[:2])}: done (recorded as {who.user})", back)


def _skill(form: dict[str, str]) -> str:
    return str(SkillId.parse(form.get("id", "")))


def set_enabled(request: Request, console: Console, who: Identity, form: dict[str, str]) -> Response:
    """`s3skills enable|disable SKILL` as the console user."""
    try:
        sid = _skill(form)
    except InvalidPath as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    command = "enable" if request.url.path.endswith("/enable") else "disable"
    return _run(request, console, who, f"/skill?{urlencode({'id': sid})}", command, sid)


def approve(request: Request, console: Console, who: Identity, form: dict[str, str]) -> Response:
    """`s3skills approve SKILL` as the console user (every script of its folder as it is now)."""
    try:
        sid = _skill(form)
    except InvalidPath as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    return _run(request, console, who, "/approvals", "approve", sid)


def channel_set(request: Request, console: Console, who: Identity, form: dict[str, str]) -> Response:
    """`s3skills channel set CHANNEL SKILL --version V` as the console user."""
    try:
        sid, channel = _skill(form), check_channel_name(form.get("channel", ""))
    except InvalidPath as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    version = form.get("version", "").strip()[:200]
    if not version:
        return console.page(request, who, "error.html", 400, message="give a version")
    return _run(request, console, who, f"/skill?{urlencode({'id': sid})}", "channel", "set", channel, sid,
                "--version", version)  # fmt: skip


def _promotion(console: Console, source: str, target: str) -> list[dict[str, Any]]:
    """What promoting SOURCE to TARGET changes (`s3skills channel diff TARGET SOURCE`)."""
    try:
        shown = console.source.command("channel", "show", target)
        current = {sid: s["version"] for sid, s in shown.get("skills", {}).items()}
    except ConsoleError:  # a target that does not exist yet: promoting creates it
        current = {}
    wanted = {sid: s["version"] for sid, s in console.source.command("channel", "show", source)["skills"].items()}
    return [
        {"skill": s, "from": current.get(s), "to": wanted.get(s)}
        for s in sorted(set(current) | set(wanted))
        if current.get(s) != wanted.get(s)
    ]


def promote_page(request: Request, console: Console, who: Identity) -> Response:
    """The confirmation of a promotion: every skill whose version would change, with its diff."""
    try:
        source = check_channel_name(request.query_params.get("source", ""))
        target = check_channel_name(request.query_params.get("target", ""))
        changes = _promotion(console, source, target)
    except (InvalidPath, ConsoleError) as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    for change in changes[:20]:  # the first ones side by side; the rest link to their diff
        if change["from"] and change["to"]:
            try:
                found = console.source.command("diff", change["skill"], "--from", change["from"], "--to", change["to"])
                change["files"] = side_by_side(found.get("diff", ""))
            except ConsoleError as exc:
                change["error"] = str(exc)
    return console.page(request, who, "promote.html", source=source, target=target, changes=changes)


def promote(request: Request, console: Console, who: Identity, form: dict[str, str]) -> Response:
    """`s3skills channel promote SOURCE TARGET` as the console user, once confirmed."""
    try:
        source, target = check_channel_name(form.get("source", "")), check_channel_name(form.get("target", ""))
    except InvalidPath as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    if form.get("confirm") != "yes":
        return console.page(request, who, "error.html", 400, message="confirm the promotion on its page first")
    return _run(request, console, who, "/channels", "channel", "promote", source, target)


def approvals_of(console: Console) -> list[Approval]:
    """Every approval of the library (`s3skills audit` reads them the same way)."""
    try:
        prefix = console.source.layout.approvals_prefix(console.source.prefix)
    except ValueError:
        return []
    return run_sync(aread_approvals(console.source.store, prefix))[0]


def approval_diffs(console: Console, sid: str, approvals: list[Approval] | None = None) -> dict[str, Any]:
    """The scripts of `sid` against the version its last approval covered.

    That version is the newest one written at or before the last approval; its diff to
    the latest version (`s3skills diff`) is shown for `scripts/` only. With no approval,
    every script is new.
    """
    mine = sorted((a for a in (approvals if approvals is not None else approvals_of(console)) if a.skill_id == sid),
                  key=lambda a: a.time)  # fmt: skip
    if not mine:
        return {"approved": None, "files": [], "note": "never approved: every script is new"}
    last = mine[-1]
    try:
        versions = console.source.command("history", sid).get("versions", [])
    except ConsoleError as exc:
        return {"approved": last, "files": [], "note": str(exc)}
    older = [v for v in versions if v.get("created") and v["created"] <= last.time]
    if not older or older[0]["version"] == versions[0]["version"]:
        return {"approved": last, "files": [], "note": "no version after the approval is recorded"}
    try:
        found = console.source.command("diff", sid, "--from", older[0]["version"], "--to", versions[0]["version"])
    except ConsoleError as exc:
        return {"approved": last, "files": [], "note": str(exc)}
    files: list[DiffFile] = [f for f in side_by_side(found.get("diff", "")) if f.path.startswith("scripts/")]
    return {"approved": last, "files": files, "note": None, "from": older[0]["version"]}


WRITE_ROUTES = [
    Route("/enable", curator(set_enabled), methods=["POST"]),
    Route("/disable", curator(set_enabled), methods=["POST"]),
    Route("/approve", curator(approve), methods=["POST"]),
    Route("/channels/set", curator(channel_set), methods=["POST"]),
    Route("/channels/promote", reader(promote_page), methods=["GET"]),
    Route("/channels/promote", curator(promote), methods=["POST"]),
]
