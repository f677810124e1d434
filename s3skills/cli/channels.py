"""The channel commands: `channel create|set|promote|show|diff`, and the library's current versions.

A channel maps each skill of the library to one version (`s3skills.skills.versions.channels`);
`latest` is built in. Agents served with `--channel NAME` (or `Config(channel=...)`) read
those versions only. Every change is a conditional PUT and leaves an audit event naming
`--actor` (`s3skills audit`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.lockfile import channel_from_lock
from s3skills.cli.tables import Column, print_table
from s3skills.cli.versions import _versions, pick_version
from s3skills.errors import Conflict, S3SkillsError, SkillError
from s3skills.ids import SkillId
from s3skills.skills.versions.channels import (
    LATEST,
    MAX_CHANNEL_SKILLS,
    Channel,
    ChannelSkill,
    acurrent_skills,
    aread_channel,
    awrite_channel,
)
from s3skills.skills.versions.records import MAX_TEXT, acaller, default_actor, new_record_id
from s3skills.storage.documents import INT, NULL, STR, Closed, DocumentKind, Either, ListOf

__all__ = [
    "EVENT_DOCUMENT",
    "EVENT_SCHEMA",
    "MAX_EVENT_BYTES",
    "actor_of",
    "channel_group",
    "channels_naming",
    "current_skills",
    "load_channel",
    "write_event",
]

EVENT_SCHEMA = "s3skills.event/1"
MAX_EVENT_BYTES = 1024 * 1024
"""Largest audit event read: a promote of 20,000 skills names them in 800 KB (ids of 40 characters)."""
EVENT_DOCUMENT = DocumentKind(
    "channel event",
    Closed(
        {
            "schema": STR,
            "id": STR,
            "action": STR,
            "actor": STR,
            "channel": STR,
            "skill": Either((STR, NULL)),
            "version": Either((STR, NULL)),
            "record": Either((STR, NULL)),
            "from": Either((STR, NULL)),
            "changed": ListOf(STR, MAX_CHANNEL_SKILLS),
            "skills": INT,
        }
    ),
    max_bytes=MAX_EVENT_BYTES,
    max_nodes=2 * MAX_CHANNEL_SKILLS + 64,
    cached=False,  # read once, by `s3skills audit`
)
"""What an audit event (`write_event`) may hold; any other field is refused before decoding."""


def actor_of(ctx: Context) -> str:
    """Who this command acts as: `--actor`, else the AWS caller ARN, else the OS user."""
    return ctx.settings.actor or ctx.run(acaller(ctx.store)) or default_actor()


def current_skills(ctx: Context) -> dict[str, ChannelSkill]:
    """Every skill of the library at its current version (see `acurrent_skills`)."""
    try:
        records: str | None = ctx.layout.records_prefix(ctx.prefix)
    except ValueError:
        records = None
    return ctx.run(acurrent_skills(ctx.store, ctx.prefix, records))


def _channels_prefix(ctx: Context) -> str:
    try:
        return ctx.layout.channels_prefix(ctx.prefix)
    except ValueError as exc:
        raise CliError(f"this key layout keeps no channels for {ctx.prefix!r}: {exc}") from exc


def load_channel(ctx: Context, name: str) -> Channel:
    """A stored channel, or `latest` built from the library now."""
    if name == LATEST:
        return Channel(LATEST, current_skills(ctx))
    try:
        return ctx.run(aread_channel(ctx.store, _channels_prefix(ctx), name))
    except SkillError as exc:
        raise CliError(str(exc)) from exc


def channels_naming(ctx: Context, skill_id: str) -> tuple[list[str], list[str]]:
    """The stored channels of the library that name `skill_id`, and those that could not be read.

    Costs 1 LIST of the library's channels and 1 GET per channel; a key layout that keeps no
    channels for the library has none.
    """
    try:
        prefix = ctx.layout.channels_prefix(ctx.prefix)
    except ValueError:
        return [], []
    objects, _ = ctx.run(ctx.store.alist(prefix))
    naming: list[str] = []
    unreadable: list[str] = []
    for obj in sorted(objects, key=lambda o: o.key):
        name = obj.key[len(prefix) :].removesuffix(".json")
        if "/" in name or not obj.key.endswith(".json"):
            continue  # not a channel this layout writes
        try:
            channel = ctx.run(aread_channel(ctx.store, prefix, name))
        except S3SkillsError:  # damaged, too large, a bad name, or the store refused: said, not fatal
            unreadable.append(name)
            continue
        if skill_id in channel.skills:
            naming.append(name)
    return naming, unreadable


def write_event(ctx: Context, action: str, details: Mapping[str, Any]) -> None:
    """Leave an audit event (`{events prefix}{id}.json`, created conditionally)."""
    try:
        prefix = ctx.layout.events_prefix(ctx.prefix)
    except ValueError:
        return
    rid = new_record_id()
    doc = {"schema": EVENT_SCHEMA, "id": rid, "action": action, "actor": actor_of(ctx)[:MAX_TEXT], **details}
    ctx.run(ctx.store.aput(f"{prefix}{rid}.json", json.dumps(doc).encode(), if_none_match=True))


def _save(ctx: Context, channel: Channel, action: str, details: Mapping[str, Any]) -> None:
    creating = channel.etag is None
    try:
        ctx.run(awrite_channel(ctx.store, _channels_prefix(ctx), channel, actor=actor_of(ctx)))
    except Conflict as exc:
        if not creating:
            raise CliError(str(exc)) from exc
        raise CliError(
            f"{exc} in {ctx.target}: change it with `s3skills channel promote SOURCE {channel.name}` or "
            f"`s3skills channel set {channel.name} SKILL --version V`; `s3skills channel show {channel.name}` shows it"
        ) from exc
    write_event(ctx, action, {"channel": channel.name, **details})


@click.group("channel", short_help="Channels: which version of each skill agents serve.")
@global_options
def channel_group() -> None:
    """Channels map each skill of the library to one version (`latest` is built in).

    Serve one with `s3skills mcp --channel NAME`, `S3Backend(channel=NAME)` or
    `Config(channel=NAME)`: agents then read those versions only.
    """


@channel_group.command("create")
@global_options
@click.argument("name")
@click.option("--from", "source", metavar="CHANNEL", help="Copy this channel (`latest`: the library now).")
@click.option("--from-lock", "lock", metavar="FILE", type=click.Path(dir_okay=False), help="Make it of a lockfile.")
@pass_context
def channel_create_command(ctx: Context, name: str, source: str | None, lock: str | None) -> int:
    """Create channel NAME from another channel or a lockfile (refused if it exists)."""
    if (source is None) == (lock is None):
        raise CliError("give exactly one of --from CHANNEL and --from-lock FILE")
    skills = channel_from_lock(lock) if lock is not None else load_channel(ctx, source or LATEST).skills
    channel = Channel(name, dict(skills))
    try:
        _save(
            ctx, channel, "channel create", {"from": source or f"lock:{Path(lock or '').name}", "skills": len(skills)}
        )
    except SkillError as exc:
        raise CliError(str(exc)) from exc
    _done(ctx, channel, f"Created channel {name} with {len(skills)} skill(s).")
    return 0


@channel_group.command("set")
@global_options
@click.argument("name")
@click.argument("skill")
@click.option("--version", "version", metavar="VERSION", help="A version id or record id (or its first characters).")
@click.option("--remove", is_flag=True, help="Take the skill out of the channel (it is then not served).")
@pass_context
def channel_set_command(ctx: Context, name: str, skill: str, version: str | None, remove: bool) -> int:
    """Serve VERSION of SKILL in channel NAME (a version from `s3skills history SKILL`)."""
    channel = load_channel(ctx, name)
    if name == LATEST:
        raise CliError("'latest' is built in: it always serves the newest version")
    if remove:
        sid = str(SkillId.parse(skill))
        if channel.skills.pop(sid, None) is None:
            raise CliError(f"channel {name} does not serve '{sid}'")
        _save(ctx, channel, "channel set", {"skill": sid, "version": None})
        _done(ctx, channel, f"Channel {name} no longer serves {sid}.")
        return 0
    if version is None:
        raise CliError("give --version VERSION (or --remove)")
    sid, _, _, versions = _versions(ctx, skill)
    target = pick_version(ctx, sid, versions, version)
    if not target.versioned:
        raise CliError(f"{sid}: version {target.id} was listed without VersionIds: turn versioning on")
    channel.skills[sid] = ChannelSkill.of(target)
    _save(ctx, channel, "channel set", {"skill": sid, "version": target.id, "record": target.record})
    _done(ctx, channel, f"Channel {name} serves {sid} at version {target.id}.")
    return 0


@channel_group.command("promote")
@global_options
@click.argument("source")
@click.argument("target")
@pass_context
def channel_promote_command(ctx: Context, source: str, target: str) -> int:
    """Make channel TARGET serve what SOURCE serves (`latest` included); created if absent."""
    if target == LATEST:
        raise CliError("'latest' is built in: push to change it")
    skills = load_channel(ctx, source).skills
    try:
        channel = ctx.run(aread_channel(ctx.store, _channels_prefix(ctx), target))
    except SkillError:
        channel = Channel(target)
    before = dict(channel.skills)
    channel.skills = dict(skills)
    changed = sorted(
        s for s in set(before) | set(skills) if (before.get(s) or _NONE).version != (skills.get(s) or _NONE).version
    )
    _save(ctx, channel, "channel promote", {"from": source, "changed": changed})
    _done(ctx, channel, f"Promoted {source} to {target}: {len(changed)} skill(s) changed.")
    return 0


_NONE = ChannelSkill("", None, {})


@channel_group.command("show")
@global_options
@click.argument("name")
@pass_context
def channel_show_command(ctx: Context, name: str) -> int:
    """List the skills channel NAME serves, with their versions."""
    channel = load_channel(ctx, name)
    _done(ctx, channel, None)
    return 0


@channel_group.command("diff")
@global_options
@click.argument("first")
@click.argument("second")
@pass_context
def channel_diff_command(ctx: Context, first: str, second: str) -> int:
    """The skills whose version differs between two channels. Exits 0 either way."""
    a, b = load_channel(ctx, first).skills, load_channel(ctx, second).skills
    rows = [
        {"skill": s, first: (a.get(s) or _NONE).version or None, second: (b.get(s) or _NONE).version or None}
        for s in sorted(set(a) | set(b))
        if (a.get(s) or _NONE).version != (b.get(s) or _NONE).version
    ]
    if ctx.json:
        ctx.emit({"from": first, "to": second, "differences": rows})
        return 0
    for row in rows:
        ctx.print(f"{row['skill']}: {row[first] or '-'} -> {row[second] or '-'}")
    if not rows:
        ctx.print(f"{first} and {second} serve the same versions.")
    return 0


def _done(ctx: Context, channel: Channel, message: str | None) -> None:
    skills = {sid: {"version": s.version, "record": s.record} for sid, s in sorted(channel.skills.items())}
    if ctx.json:
        library = ctx.location(ctx.prefix)
        ctx.emit(
            {
                "channel": channel.name,
                "library": library,
                "updated": channel.updated,
                "actor": channel.actor,
                "skills": skills,
            }
        )
        return
    if message is not None:
        ctx.print(message.removesuffix(".") + f" in {ctx.target}.")
        return
    columns = [Column("SKILL"), Column("VERSION"), Column("RECORD")]
    rows = [[sid, s["version"] or "-", s["record"] or "-"] for sid, s in skills.items()]
    print_table(ctx.console, f"channel {channel.name}: {len(skills)} skill(s)", columns, rows)
    if channel.updated:
        ctx.print(f"updated {channel.updated} by {channel.actor or '-'}")


def since_filter(value: str | None) -> str:
    """A record-id lower bound from `--since` (ISO date or time, or `Nd`/`Nh` ago)."""
    if not value:
        return ""
    now = datetime.now(UTC)
    try:
        if value[-1] in "dh" and value[:-1].isdigit():
            from datetime import timedelta

            n = int(value[:-1])
            when = now - (timedelta(days=n) if value[-1] == "d" else timedelta(hours=n))
        else:
            when = datetime.fromisoformat(value)
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
    except ValueError as exc:
        raise CliError(f"--since {value!r}: give an ISO date or time, or 3d / 12h") from exc
    return when.astimezone(UTC).strftime("%Y%m%dT%H%M%S")
