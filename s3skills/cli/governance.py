"""`s3skills approve`, `approvals` and `audit`: who may run which scripts, and who did what.

`approve SKILL [--script PATH]` records that the actor reviewed the skill's `scripts/` folder as
it is now (its digest: `s3skills.skills.versions.approvals`); a script of the shared library
then runs (`run_skill_script`, with `Config.require_approval`) until any file of that folder
changes. `approvals` lists the skills whose current scripts no approval covers. `audit` lists
the version records (push, rm, enable, disable, create, rollback), channel changes and
approvals with their actor, newest first.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import click

from s3skills.cli.channels import EVENT_DOCUMENT, EVENT_SCHEMA, MAX_EVENT_BYTES, actor_of, since_filter
from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.shared import resolve_skill
from s3skills.cli.tables import Column, print_table
from s3skills.errors import Conflict, InvalidPath, S3SkillsError
from s3skills.ids import SkillId
from s3skills.skills.versions.approvals import afind_approval, aread_approvals, awrite_approval, scripts_digest
from s3skills.skills.versions.records import MAX_RECORD_BYTES, RECORD_ID_RE, adecode_record
from s3skills.storage.decoder import default_decoder

__all__ = ["approvals_command", "approve_command", "audit_command"]

_PREFIX_HELP = (
    "Where approvals live (env S3SKILLS_APPROVALS_PREFIX); default: beside the library, "
    "`.s3skills/approvals/`. Give the prefix your deployment's Config.approvals_prefix names."
)
MAX_AUDIT = 2_000


def _approvals_prefix(ctx: Context, given: str | None) -> str:
    prefix = given or os.environ.get("S3SKILLS_APPROVALS_PREFIX") or ""
    if prefix:
        if not prefix.endswith("/") or any(not p for p in prefix[:-1].split("/")):
            raise CliError(f"--approvals-prefix {prefix!r}: give a key prefix ending with '/'")
        return prefix
    try:
        return ctx.layout.approvals_prefix(ctx.prefix)
    except ValueError as exc:
        raise CliError(f"this key layout keeps no approvals for {ctx.prefix!r}: give --approvals-prefix") from exc


async def _scripts(ctx: Context, skill_id: str) -> dict[str, bytes]:
    """The skill's `scripts/` files as they are now (below `scripts/`), nested skills left out."""
    library = ctx.library
    files = [f.path for f in await library.afiles(skill_id) if f.path.startswith("scripts/")]
    bodies = await asyncio.gather(*(library.aopen(skill_id, p) for p in files))
    return {p[len("scripts/") :]: b.data for p, b in zip(files, bodies, strict=True)}


@click.command("approve", short_help="Approve a skill's scripts as they are now (run_skill_script runs them).")
@global_options
@click.argument("name")
@click.option("--script", "scripts", multiple=True, metavar="PATH", help="Approve only this script (repeatable).")
@click.option("--approvals-prefix", "prefix", metavar="PREFIX", help=_PREFIX_HELP)
@pass_context
def approve_command(ctx: Context, name: str, scripts: tuple[str, ...], prefix: str | None) -> int:
    """Record that you reviewed the scripts/ folder of NAME as it is now.

    Any later change to any file of that folder needs a new approval.
    """
    skill_id, _ = resolve_skill(ctx, name)
    files = ctx.run(_scripts(ctx, skill_id))
    if not files:
        raise CliError(f"{skill_id} has no scripts/ folder: nothing to approve")
    wanted = tuple(s.removeprefix("scripts/") for s in scripts) or ("*",)
    if missing := [s for s in wanted if s != "*" and s not in files]:
        raise CliError(f"{skill_id}: no script {', '.join(missing)} (its scripts: {', '.join(sorted(files))})")
    digest = scripts_digest(files)
    try:
        approval = ctx.run(
            awrite_approval(ctx.store, _approvals_prefix(ctx, prefix), skill_id, digest, wanted, actor=actor_of(ctx))
        )
    except (Conflict, InvalidPath, ValueError) as exc:
        raise CliError(f"{skill_id}: {exc}") from exc
    if ctx.json:
        ctx.emit({"id": skill_id, "digest": digest, "scripts": list(approval.scripts), "actor": approval.actor})
    else:
        what = "every script" if "*" in approval.scripts else ", ".join(approval.scripts)
        ctx.print(
            f"Approved {what} of {skill_id} in {ctx.target} at scripts digest {digest[:12]} (by {approval.actor})."
        )
    return 0


@click.command("approvals", short_help="List the skills whose current scripts are not approved.")
@global_options
@click.option("--approvals-prefix", "prefix", metavar="PREFIX", help=_PREFIX_HELP)
@pass_context
def approvals_command(ctx: Context, prefix: str | None) -> int:
    """List pending approvals: skills with a scripts/ folder no approval covers as it is now."""
    where = _approvals_prefix(ctx, prefix)
    skills = [s.id for s in ctx.library.index(include_disabled=False)]

    async def pending() -> list[dict[str, Any]]:
        out = []
        for sid in skills:
            files = await _scripts(ctx, sid)
            if not files:
                continue
            digest = scripts_digest(files)
            unapproved = [p for p in sorted(files) if await afind_approval(ctx.store, where, sid, digest, p) is None]
            runnable = [p for p in unapproved if p.endswith((".py", ".sh"))]
            if runnable:
                out.append({"id": sid, "digest": digest, "scripts": runnable})
        return out

    rows = ctx.run(pending())
    if ctx.json:
        ctx.emit({"pending": rows})
        return 0
    if rows:
        columns = [Column("SKILL"), Column("SCRIPTS DIGEST", "fixed"), Column("SCRIPTS")]
        table = [[row["id"], row["digest"][:12], ", ".join(row["scripts"])] for row in rows]
        print_table(ctx.console, f"{len(rows)} skill(s) with scripts waiting for approval:", columns, table)
    else:
        ctx.print("No approval pending.")
    return 0


async def _records(ctx: Context, skill: str | None, since: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Version records as audit rows (the newest `MAX_AUDIT`), and what was ignored."""
    try:
        base = ctx.layout.records_prefix(ctx.prefix)
    except ValueError:
        return [], []
    prefix = base + (f"{SkillId.parse(skill)}/" if skill else "")
    objects, _ = await ctx.store.alist(prefix)
    wanted = []
    problems = []
    for obj in objects:
        sid, _, name = obj.key[len(base) :].rpartition("/")
        rid = name.removesuffix(".json")
        if not RECORD_ID_RE.match(rid) or obj.size > MAX_RECORD_BYTES:
            problems.append(f"{obj.key[len(base) :][:80]}: not a record")
        elif rid >= since:
            wanted.append((rid, sid, obj.key))
    wanted = sorted(wanted)[-MAX_AUDIT:]
    sem = asyncio.Semaphore(16)

    async def read(rid: str, sid: str, key: str) -> dict[str, Any] | str:
        async with sem:
            try:
                body = await ctx.store.aget(key, max_bytes=MAX_RECORD_BYTES)
                got = await adecode_record(body.data, key=key, etag=body.etag, skill_id=sid, record_id=rid)
            except (S3SkillsError, InvalidPath) as exc:
                return f"{sid}/{rid}: unreadable ({type(exc).__name__})"
        if isinstance(got, str):
            return f"{sid}/{rid}: {got}"
        return {
            "time": got.time.isoformat(),
            "actor": got.actor,
            "action": got.command,
            "skill": sid,
            "version": got.content or None,
            "record": rid,
        }

    rows = []
    for got in await asyncio.gather(*(read(*w) for w in wanted)):
        (problems.append(got) if isinstance(got, str) else rows.append(got))
    return rows, problems


async def _events(ctx: Context, skill: str | None, since: str) -> list[dict[str, Any]]:
    """Channel changes as audit rows (those naming SKILL, when given)."""
    try:
        prefix = ctx.layout.events_prefix(ctx.prefix)
    except ValueError:
        return []
    objects, _ = await ctx.store.alist(prefix)
    rows = []
    for obj in sorted(objects, key=lambda o: o.key)[-MAX_AUDIT:]:
        rid = obj.key[len(prefix) :].removesuffix(".json")
        if not RECORD_ID_RE.match(rid) or rid < since or obj.size > MAX_EVENT_BYTES:
            continue
        body = await ctx.store.aget(obj.key, max_bytes=MAX_EVENT_BYTES)
        try:
            doc = await default_decoder().adecode(EVENT_DOCUMENT, body.data, key=obj.key, etag=body.etag, convert=dict)
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("schema") != EVENT_SCHEMA or doc.get("id") != rid:
            continue
        named = doc.get("skill")
        if skill and named not in (None, skill) and skill not in (doc.get("changed") or []):
            continue
        detail = {k: v for k, v in doc.items() if k not in ("schema", "id", "actor", "action")}
        rows.append(
            {
                "time": f"{rid[0:4]}-{rid[4:6]}-{rid[6:8]}T{rid[9:11]}:{rid[11:13]}:{rid[13:15]}+00:00",
                "actor": str(doc.get("actor"))[:512],
                "action": str(doc.get("action"))[:64],
                "skill": named if isinstance(named, str) else None,
                "detail": json.dumps(detail, sort_keys=True)[:300],
            }
        )
    return rows


@click.command("audit", short_help="Who did what: pushes, removals, rollbacks, channel changes, approvals.")
@global_options
@click.argument("name", required=False)
@click.option("--since", metavar="WHEN", help="Only since then: an ISO date or time, or 3d / 12h ago.")
@click.option("--approvals-prefix", "prefix", metavar="PREFIX", help=_PREFIX_HELP)
@pass_context
def audit_command(ctx: Context, name: str | None, since: str | None, prefix: str | None) -> int:
    """List the library's recorded actions with their actor, newest first.

    The actor is what the writer's record says (`--actor`, the AWS caller ARN, the OS user):
    as trustworthy as the library's writers (see docs/THREAT_MODEL.md).
    """
    bound = since_filter(since)
    skill = str(SkillId.parse(name)) if name else None
    rows, problems = ctx.run(_records(ctx, skill, bound))
    rows += ctx.run(_events(ctx, skill, bound))
    approvals, ignored = ctx.run(aread_approvals(ctx.store, _approvals_prefix(ctx, prefix)))
    for a in approvals:
        if (skill is None or a.skill_id == skill) and a.time.replace("-", "").replace(":", "")[:15] >= bound[:15]:
            rows.append(
                {"time": a.time, "actor": a.actor, "action": "approve", "skill": a.skill_id, "version": a.digest[:12]}
            )
    rows.sort(key=lambda r: r["time"], reverse=True)
    if ctx.json:
        ctx.emit({"actions": rows, "ignored": problems + ignored})
        return 0
    # The time is never cut; a long actor (an ARN) or skill id wraps within its cell.
    columns = [
        Column("TIME (UTC)", "fixed"),
        Column("ACTOR"),
        Column("ACTION", "fixed"),
        Column("SKILL"),
        Column("DETAIL", "cut"),
    ]
    table = [
        [r["time"][:19], r["actor"], r["action"], r.get("skill") or "-", r.get("version") or r.get("detail") or ""]
        for r in rows
    ]
    print_table(ctx.console, f"{len(rows)} action(s)", columns, table)
    for line in problems + ignored:
        ctx.warn(f"warning: ignored {line}")
    return 0
