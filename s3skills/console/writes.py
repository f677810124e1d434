"""The console's changes: enable, disable, approve, set a channel's version, promote.

Each is the CLI command itself (`ConsoleSource.command`) run with `--actor` set to the
signed-in user, so the record, the channel change, the approval and the audit event are
exactly what `s3skills enable|disable|approve|channel set|channel promote` write, naming
that user. Only a curator reaches these handlers, with the CSRF token of their session
(`app.curator`).
"""

from __future__ import annotations

import asyncio
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
from s3skills.errors import InvalidPath, S3SkillsError
from s3skills.ids import SkillId
from s3skills.skills.versions.approvals import Approval, aread_approvals, scripts_digest
from s3skills.skills.versions.channels import check_channel_name
from s3skills.skills.versions.history import FileVersion, SkillVersion, read_version

__all__ = ["WRITE_ROUTES", "approval_diffs", "approvals_of", "approved_version"]

MAX_SCANNED = 50
"""Versions of a skill searched, newest first, for the one an approval vouches for."""
MAX_SCRIPT_BYTES = 16 * 1024 * 1024
"""Largest script version read to compute an older version's scripts digest."""


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
    """The scripts of `sid` now against the version its last approval vouches for.

    That version is the newest one whose `scripts/` folder has the digest the last approval
    of the skill names (`approved_version`), whatever came between; its diff to the latest
    version (`s3skills diff`) is shown for `scripts/` only. With no approval every script is
    new; when no version has the approved digest (the bytes are gone, or the record names
    content this skill never had) the note says so and nothing is diffed.
    """
    mine = sorted((a for a in (approvals if approvals is not None else approvals_of(console)) if a.skill_id == sid),
                  key=lambda a: a.time)  # fmt: skip
    if not mine:
        return {"approved": None, "files": [], "note": "never approved: every script is new"}
    last = mine[-1]
    try:
        versions = console.source.versions(sid)
        base = approved_version(console, versions, last.digest)
    except ConsoleError as exc:
        return {"approved": last, "files": [], "note": str(exc)}
    if base is None:
        note = (f"none of the {min(len(versions), MAX_SCANNED)} newest versions of {sid} has the scripts this "
                f"approval vouches for (digest {last.digest[:12]}): nothing to diff against")  # fmt: skip
        return {"approved": last, "files": [], "note": note}
    if base.id == versions[0].id:
        note = f"the approved scripts (digest {last.digest[:12]}) are the current ones: the approval covers only some"
        return {"approved": last, "files": [], "note": note, "from": base.id}
    try:
        found = console.source.command("diff", sid, "--from", base.id, "--to", versions[0].id)
    except ConsoleError as exc:
        return {"approved": last, "files": [], "note": str(exc)}
    files: list[DiffFile] = [f for f in side_by_side(found.get("diff", "")) if f.path.startswith("scripts/")]
    return {"approved": last, "files": files, "note": None, "from": base.id}


def approved_version(console: Console, versions: list[SkillVersion], digest: str) -> SkillVersion | None:
    """The newest of `versions` (newest first, at most `MAX_SCANNED`) whose `scripts/` folder
    has `digest` (`scripts_digest`), or None.

    Each script file version is read once (1 GET by its VersionId), only until the digest
    is found; versions whose scripts are the same objects share one digest.

    Raises:
        ConsoleError: A script version could not be read (gone, or larger than `MAX_SCRIPT_BYTES`).
    """
    store = console.source.store
    read: dict[tuple[str, str | None, str], bytes] = {}

    async def one(f: FileVersion) -> tuple[tuple[str, str | None, str], bytes]:
        return (f.key, f.version_id, f.etag), (await read_version(store, f, max_bytes=MAX_SCRIPT_BYTES)).data

    async def find() -> SkillVersion | None:
        seen: dict[tuple[tuple[str, str | None, str], ...], str] = {}
        for version in versions[:MAX_SCANNED]:
            scripts = {f.path.removeprefix("scripts/"): (f.key, f.version_id, f.etag) for f in version.files
                       if f.path.startswith("scripts/")}  # fmt: skip
            state = tuple(sorted(scripts.values()))
            if state not in seen:
                missing = [
                    f
                    for f in version.files
                    if f.path.startswith("scripts/") and (f.key, f.version_id, f.etag) not in read
                ]
                read.update(await asyncio.gather(*(one(f) for f in missing)))
                seen[state] = scripts_digest({path: read[key] for path, key in scripts.items()})
            if scripts and seen[state] == digest:
                return version
        return None

    try:
        return run_sync(find())
    except S3SkillsError as exc:
        raise ConsoleError(f"cannot read a script's older version: {' '.join(str(exc).split())}") from exc


WRITE_ROUTES = [
    Route("/enable", curator(set_enabled), methods=["POST"]),
    Route("/disable", curator(set_enabled), methods=["POST"]),
    Route("/approve", curator(approve), methods=["POST"]),
    Route("/channels/set", curator(channel_set), methods=["POST"]),
    Route("/channels/promote", reader(promote_page), methods=["GET"]),
    Route("/channels/promote", curator(promote), methods=["POST"]),
]
