"""The console's read pages: the library, a skill, its files, a diff of two versions.

Each page reads through `ConsoleSource`: the library page through `SkillLibrary` (the
index: 1 GET when the manifest is fresh) and the stored channels; a skill's versions and
diffs through the CLI's `history` and `diff` (`--json`), so a page costs what the command
costs. Nothing read from the library reaches the page unescaped except Markdown, which is
sanitized (`render.markdown_html`).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from s3skills.aio import run_sync
from s3skills.console.auth import Identity
from s3skills.console.render import file_kind, highlight_file, markdown_html, served_type, side_by_side
from s3skills.console.source import ConsoleError
from s3skills.console.usage import library_usage, sparkline
from s3skills.console.web import FILE_CSP, Console, reader
from s3skills.errors import InvalidPath, NotFound, S3SkillsError
from s3skills.ids import SkillId
from s3skills.skills import SkillInfo
from s3skills.skills.versions.channels import Channel
from s3skills.skills.versions.records import MAX_RECORD_BYTES, RECORD_ID_RE, VersionRecord

__all__ = ["PAGE_ROUTES", "LastChange", "Shown", "shown_details"]

MAX_SHOWN_BYTES = 2 * 1024 * 1024
"""Larger files are offered as downloads, not shown."""
TRIGGERS_FILE = "evals/triggers.json"
APPROVALS_PAGE = 10
"""Skills of the approvals queue shown a page, each with its diffs (a `history` and a `diff` each)."""


@dataclass(frozen=True, slots=True)
class LastChange:
    """The newest version record of a skill: when, who, which command."""

    time: str
    actor: str
    command: str


@dataclass(frozen=True, slots=True)
class Shown:
    """What the library page shows of one skill beyond its index entry."""

    version: str | None
    change: LastChange | None


def shown_details(console: Console, skills: Sequence[SkillInfo]) -> dict[str, Shown]:
    """The version and the newest record of each skill of a page (who, when, which command).

    Both come from the skill's newest version record (its content id is the version): 1 LIST
    and 1 GET per skill, all skills of the page at once, kept by the console for
    `Console.details_ttl` seconds while the skill's `SKILL.md` keeps its ETag (a change made
    through the console forgets them at once). A skill without a record shows the version
    its index entry has, if any; records that do not decode are left out.
    """
    source = console.source
    try:
        base = source.layout.records_prefix(source.prefix)
    except ValueError:
        return {s.id: Shown(s.version, None) for s in skills}
    store = source.store
    now = time.monotonic()
    known = console.details.get(now, {s.id: s.etag for s in skills})
    wanted = [s for s in skills if s.id not in known and s.source != "code"]

    async def one(skill: SkillInfo) -> tuple[str, Shown]:
        sid, nothing = skill.id, Shown(skill.version, None)
        objects, _ = await store.alist(f"{base}{sid}/")
        ids = [o.key.rsplit("/", 1)[-1].removesuffix(".json") for o in objects if o.size <= MAX_RECORD_BYTES]
        ids = sorted(i for i in ids if RECORD_ID_RE.match(i))
        if not ids:
            return sid, nothing
        try:
            body = await store.aget(f"{base}{sid}/{ids[-1]}.json", max_bytes=MAX_RECORD_BYTES)
        except S3SkillsError:
            return sid, nothing
        got = VersionRecord.decode(body.data, skill_id=sid, record_id=ids[-1])
        if isinstance(got, str):
            return sid, nothing
        change = LastChange(got.time.strftime("%Y-%m-%d %H:%M"), got.actor, got.command)
        return sid, Shown(got.content or skill.version, change)

    async def every() -> dict[str, Shown]:
        return dict(await asyncio.gather(*(one(s) for s in wanted)))

    found = run_sync(every()) if wanted else {}
    etags = {s.id: s.etag for s in skills}
    console.details.put(now, {sid: (etags[sid], shown) for sid, shown in found.items()})
    return {**known, **found}


def _served(channels: Sequence[Channel], skill: SkillInfo, version: str | None) -> list[dict[str, Any]]:
    out = []
    for channel in channels:
        entry = channel.skills.get(skill.id)
        if entry is not None:
            out.append({"name": channel.name, "version": entry.version, "current": entry.version == version})
    return out


def _page_number(request: Request) -> int:
    try:
        return max(1, min(int(request.query_params.get("page", "1")), 1_000_000))
    except ValueError:
        return 1


def library_page(request: Request, console: Console, who: Identity) -> Response:
    """Every skill: enabled state, problems, channels and their versions, last change; search, filters."""
    params = request.query_params
    query = params.get("q", "").strip()[:500]
    state = params.get("state", "all")
    with_problems = params.get("problems") == "1"
    category = params.get("category", "")
    view = console.views.of(console.source.library)
    problems = view.problems
    channels, channel_errors = console.source.channels()
    matched: dict[str, dict[str, Any]] = {}
    error = None
    categories: Sequence[str] = view.categories
    if query:  # the ranker's answer (at most 100 skills), filtered here
        try:
            found = console.source.command("find", "--limit", "100", "--", query)
        except ConsoleError as exc:
            found, error = {"results": []}, str(exc)
        matched = {r["id"]: r for r in found.get("results", [])}
        ranked = [view.by_id[i] for i in matched if i in view.by_id]
        categories = sorted({c for s in ranked if (c := view.category[s.id])})
        skills: Sequence[SkillInfo] = [s for s in ranked if view.matches(s, state, with_problems, category)]
    else:
        skills = view.filtered(state, with_problems, category)
    total = len(skills)
    pages = max(1, -(-total // console.page_size))
    page = min(_page_number(request), pages)
    shown = skills[(page - 1) * console.page_size : page * console.page_size]
    details = shown_details(console, shown)
    none = Shown(None, None)
    usage, usage_notes = library_usage(console.source, console.usage_log)
    channel_errors.extend(usage_notes)
    rows = [
        {
            "skill": s,
            "problems": problems.get(s.id, []),
            "channels": _served(channels, s, details.get(s.id, none).version),
            "change": details.get(s.id, none).change,
            "version": details.get(s.id, none).version,
            "matched": matched.get(s.id),
            "loads": usage.total(s.id),
            "spark": sparkline(usage.loads.get(s.id)),
        }
        for s in shown
    ]
    keep = {k: v for k, v in (("q", query), ("state", state), ("category", category)) if v and v != "all"}
    if with_problems:
        keep["problems"] = "1"
    return console.page(
        request,
        who,
        "library.html",
        rows=rows,
        total=total,
        page=page,
        pages=pages,
        query=query,
        state=state,
        category=category,
        with_problems=with_problems,
        categories=categories,
        channels=[c.name for c in channels],
        notes=channel_errors + ([error] if error else []),
        keep=keep,
        library_problems=problems.get("*", []),
    )


def _skill_id(request: Request) -> str:
    return str(SkillId.parse(request.query_params.get("id", "")))


def _any_skill(console: Console, sid: str) -> SkillInfo:
    """The skill `sid`, disabled or not (the index, already read: no request when fresh)."""
    for skill in console.source.library.index(include_disabled=True):
        if skill.id == sid:
            return skill
    return console.source.library.get(sid)  # by name, or the library's own "not found"


def skill_page(request: Request, console: Console, who: Identity) -> Response:
    """A skill: SKILL.md rendered, its files, versions (who, which command), channels, trigger evals."""
    try:
        sid = _skill_id(request)
        skill = _any_skill(console, sid)
    except (InvalidPath, NotFound, S3SkillsError) as exc:
        return console.page(request, who, "error.html", 404, message=f"no such skill: {exc}")
    body = ""
    files: list[dict[str, Any]] = []
    notes: list[str] = []
    if skill.metadata.enabled:
        try:
            body = markdown_html(console.source.library.instructions(sid))
            files = [
                {"path": f.path, "size": f.size, "kind": file_kind(f.path)} for f in console.source.library.files(sid)
            ]
        except S3SkillsError as exc:
            notes.append(f"cannot read the skill: {exc}")
    else:
        notes.append("This skill is disabled: agents do not see it, and its files are not served. Enable it to view.")
    versions: list[dict[str, Any]] = []
    try:
        history = console.source.command("history", sid) if skill.source != "code" else {}
        versions = history.get("versions", [])
        if history and not history.get("versioning", True):
            notes.append("The bucket's versioning is off: only the current version is kept.")
    except ConsoleError as exc:
        notes.append(str(exc))
    channels, channel_errors = console.source.channels()
    serving: dict[str, list[str]] = {}
    for channel in channels:
        if (entry := channel.skills.get(sid)) is not None:
            serving.setdefault(entry.version, []).append(channel.name)
    evals = _trigger_evals(console, sid, files) if request.query_params.get("evals") == "1" else None
    return console.page(
        request,
        who,
        "skill.html",
        skill=skill,
        body=body,
        files=files,
        versions=versions,
        serving=serving,
        notes=notes + channel_errors,
        evals=evals,
        has_triggers=any(f["path"] == TRIGGERS_FILE for f in files),
        channel_names=[c.name for c in channels],
    )


def _trigger_evals(console: Console, sid: str, files: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`s3skills eval SKILL --queries` on the skill's own triggers file, or None without one."""
    if not any(f["path"] == TRIGGERS_FILE for f in files):
        return None
    try:
        data = console.source.library.open(sid, TRIGGERS_FILE).data
    except S3SkillsError as exc:
        return {"error": str(exc)}
    fd, name = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        report = console.source.command("eval", sid, "--queries", name)
    except ConsoleError as exc:
        return {"error": str(exc)}
    finally:
        os.unlink(name)
    skills = report.get("skills") or [{}]
    return {"report": skills[0], "errors": report.get("errors", [])}


def _file_of(request: Request, console: Console) -> tuple[str, str, bytes]:
    sid = _skill_id(request)
    path = request.query_params.get("path", "")
    body = console.source.library.open(sid, path, max_bytes=MAX_SHOWN_BYTES)
    return sid, path, body.data


def file_page(request: Request, console: Console, who: Identity) -> Response:
    """One file of a skill: text highlighted, a raster image shown, anything else a download."""
    try:
        sid, path, data = _file_of(request, console)
    except (InvalidPath, NotFound, S3SkillsError) as exc:
        return console.page(request, who, "error.html", 404, message=f"cannot open that file: {exc}")
    kind = file_kind(path, data)
    html = ""
    if kind == "text":
        try:
            html = highlight_file(path, data.decode("utf-8"))
        except UnicodeDecodeError:
            kind = "binary"
    return console.page(request, who, "file.html", sid=sid, path=path, kind=kind, html=html, size=len(data))


def raw_file(request: Request, console: Console, who: Identity) -> Response:
    """A file's bytes, never as HTML: text as text/plain, the rest as an attachment, sandboxed."""
    try:
        _, path, data = _file_of(request, console)
    except (InvalidPath, NotFound, S3SkillsError) as exc:
        return PlainTextResponse(f"cannot open that file: {exc}", status_code=404)
    media, attachment = served_type(path, data)
    name = path.rsplit("/", 1)[-1]
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:100] or "file"
    headers = {"Content-Security-Policy": FILE_CSP, "X-Content-Type-Options": "nosniff"}
    if attachment:
        headers["Content-Disposition"] = f'attachment; filename="{safe}"'
    return Response(data, media_type=media, headers=headers)


def diff_page(request: Request, console: Console, who: Identity) -> Response:
    """Two versions of a skill side by side, every file (`s3skills diff --json`)."""
    try:
        sid = _skill_id(request)
    except InvalidPath as exc:
        return console.page(request, who, "error.html", 404, message=str(exc))
    args = ["diff", sid]
    for name in ("from", "to"):
        if value := request.query_params.get(name, "").strip()[:200]:
            args += [f"--{name}", value]
    try:
        found = console.source.command(*args)
        versions = console.source.command("history", sid).get("versions", [])
    except ConsoleError as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    return console.page(
        request,
        who,
        "diff.html",
        sid=sid,
        old=found.get("from"),
        new=found.get("to"),
        files=side_by_side(found.get("diff", "")),
        versions=versions,
    )


def channels_page(request: Request, console: Console, who: Identity) -> Response:
    """Each channel against latest: which skills promoting latest would change."""
    channels, notes = console.source.channels()
    try:
        latest = console.source.command("channel", "show", "latest").get("skills", {})
    except ConsoleError as exc:
        latest, notes = {}, [*notes, str(exc)]
    rows = []
    for channel in channels:
        served = {sid: s.version for sid, s in channel.skills.items()}
        differs = sorted(s for s in set(served) | set(latest) if served.get(s) != (latest.get(s) or {}).get("version"))
        rows.append(
            {
                "channel": channel,
                "differs": [
                    {"skill": s, "served": served.get(s), "latest": (latest.get(s) or {}).get("version")}
                    for s in differs[:500]
                ],
                "count": len(differs),
            }
        )
    return console.page(request, who, "channels.html", rows=rows, notes=notes, names=[c.name for c in channels])


def approvals_page(request: Request, console: Console, who: Identity) -> Response:
    """The scripts waiting for approval, each with its diff against the last approved version."""
    from s3skills.console.writes import approval_diffs, approvals_of

    try:
        pending = console.source.command("approvals").get("pending", [])
    except ConsoleError as exc:
        return console.page(request, who, "error.html", 400, message=str(exc))
    pages = max(1, -(-len(pending) // APPROVALS_PAGE))
    page = min(_page_number(request), pages)
    shown = pending[(page - 1) * APPROVALS_PAGE : page * APPROVALS_PAGE]
    approvals = approvals_of(console) if shown else []
    rows = [{"pending": p, "diff": approval_diffs(console, p["id"], approvals)} for p in shown]
    return console.page(request, who, "approvals.html", rows=rows, total=len(pending), page=page, pages=pages, keep={})


def api_skills(request: Request, console: Console, who: Identity) -> Response:
    """The library as JSON (`s3skills list --json`'s fields that the library page shows), for scripts."""
    skills = console.source.library.index(include_disabled=True)
    doc = [{"id": s.id, "enabled": s.metadata.enabled, "version": s.version, "source": s.source} for s in skills]
    return Response(json.dumps({"skills": doc}), media_type="application/json")


PAGE_ROUTES = [
    Route("/", reader(library_page)),
    Route("/skill", reader(skill_page)),
    Route("/file", reader(file_page)),
    Route("/raw", reader(raw_file)),
    Route("/diff", reader(diff_page)),
    Route("/channels", reader(channels_page)),
    Route("/approvals", reader(approvals_page)),
    Route("/api/skills", reader(api_skills)),
]
