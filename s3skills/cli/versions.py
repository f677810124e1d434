"""The version commands: `history`, `rollback`, `diff`, `versioning enable|status`.

A skill's version is the set of its files' object versions, shown as a short id
(`s3skills.skills.versions.history`). History and rollback need the bucket's versioning on
(`s3skills versioning enable`); without it only the current version exists. Objects
written before versioning was enabled (S3's VersionId `"null"`) are versions like any
other: the first push of an existing bucket can be compared with and rolled back to.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
from datetime import datetime

import click

from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.shared import human_size, resolve_skill
from s3skills.cli.tables import Column, print_table
from s3skills.errors import Conflict, SkillError
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.skills.versions.history import (
    FileVersion,
    SkillVersion,
    current_version,
    find_version,
    history,
    read_version,
    restore,
    versions_by_skill,
)
from s3skills.skills.versions.records import aread_records, recorded_history
from s3skills.storage import ObjectInfo, ObjectVersion

__all__ = [
    "VERSIONING_COST",
    "diff_command",
    "history_command",
    "pick_version",
    "pushed_versions",
    "rollback_command",
    "same_bytes",
    "versioning_group",
]

VERSIONING_COST = (
    "With versioning on, every overwrite or delete keeps the old object as a noncurrent version, "
    "and S3 bills the storage of every version kept. Add a lifecycle rule "
    "(NoncurrentVersionExpiration) to expire old versions after some days if that matters."
)


def _owner(folder: str, keys: list[str]) -> frozenset[str]:
    """Folders of skills nested in the skill at `folder` (their files are not the skill's)."""
    return frozenset(
        k[: -len(SKILL_FILE)]
        for k in keys
        if k.startswith(folder) and k.endswith("/" + SKILL_FILE) and k != folder + SKILL_FILE
    )


def _versions(ctx: Context, name: str) -> tuple[str, str, list[ObjectVersion], list[SkillVersion]]:
    """`(skill_id, folder, object versions, skill versions newest first)` of a skill of the user's library."""
    return _recorded(ctx, name)[:4]


def _recorded(
    ctx: Context, name: str
) -> tuple[str, str, list[ObjectVersion], list[SkillVersion], list[dict[str, str | None]]]:
    """As `_versions`, and every record history left out with the reason (each also warned).

    A record the bucket refutes names its id (`record`); one that could not be read or
    decoded names its object (`object`) when it has one.
    """
    skill_id, _ = resolve_skill(ctx, name)
    folder = ctx.prefix + skill_id + "/"
    objects = ctx.run(ctx.store.alist_versions(folder))
    nested = _owner(folder, [v.key for v in objects])

    def owns(key: str) -> bool:
        return key.startswith(folder) and not any(key.startswith(n) for n in nested)

    try:
        records_prefix = ctx.layout.records_prefix(ctx.prefix)
    except ValueError:  # no derived data in this layout: inferred history only
        return skill_id, folder, objects, history(skill_id, folder, objects, owns), []
    records, problems = ctx.run(aread_records(ctx.store, records_prefix, skill_id))
    versions, ignored = recorded_history(skill_id, folder, objects, owns, records)
    for line in [*problems, *map(str, ignored)]:
        ctx.warn(f"warning: {skill_id}: {line}")
    left_out: list[dict[str, str | None]] = [{"record": i.record, "object": None, "reason": i.reason} for i in ignored]
    for line in problems:  # `NAME: reason` for one object, or a sentence about the listing
        where, sep, reason = line.partition(": ")
        left_out.append({"record": None, "object": where if sep else None, "reason": reason if sep else line})
    return skill_id, folder, objects, versions, left_out


def same_bytes(ctx: Context, first: SkillVersion, second: SkillVersion) -> bool:
    """Whether two versions with one content id hold the same bytes.

    A content id is made of the files' ETags, and a single-part upload's ETag is its MD5:
    two different files can share one. Each file whose VersionIds differ is read in both
    versions (1 GET each) and its SHA-256 compared.
    """
    if first.id != second.id:
        return False
    theirs = {f.path: f for f in second.files}
    pairs = [(f, theirs[f.path]) for f in first.files if f.version_id != theirs[f.path].version_id]

    async def digest(f: FileVersion) -> bytes:
        return hashlib.sha256((await ctx.store.aget(f.key, version_id=f.version_id)).data).digest()

    async def every() -> list[bytes]:
        return await asyncio.gather(*(digest(f) for pair in pairs for f in pair))

    digests = ctx.run(every()) if pairs else []
    return all(a == b for a, b in zip(digests[::2], digests[1::2], strict=True))


def pick_version(ctx: Context, skill_id: str, versions: list[SkillVersion], wanted: str) -> SkillVersion:
    """`find_version`, refusing a content id that names versions with different bytes.

    Several versions share a content id when the same bytes were written again (a rollback)
    or when a file was replaced by one with the same MD5 (a collision): the newest would
    then be the forged one. A record id names one version and is taken as it is.

    Raises:
        CliError: No such version, or the content id names versions that hold other bytes.
    """
    try:
        chosen = find_version(versions, wanted)
    except SkillError as exc:
        raise CliError(f"{skill_id}: {exc}") from exc
    if not chosen.id.startswith(wanted.strip().lower()):
        return chosen  # named by its record id
    for twin in versions:
        if twin is not chosen and twin.id == chosen.id and not same_bytes(ctx, chosen, twin):
            records = ", ".join(v.record or "(inferred)" for v in versions if v.id == chosen.id)
            raise CliError(
                f"{skill_id}: version {chosen.id} names versions whose files have the same ETags but other bytes "
                f"(a file replaced by one with the same MD5?): give the record id of the one you mean ({records})"
            )
    return chosen


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _changes(new: SkillVersion, old: SkillVersion | None) -> str:
    if old is None:
        return f"{len(new.files)} file(s)"
    before = {f.path: f.etag for f in old.files}
    after = {f.path: f.etag for f in new.files}
    added = len(after.keys() - before.keys())
    removed = len(before.keys() - after.keys())
    changed = sum(1 for p in after.keys() & before.keys() if after[p] != before[p])
    return f"+{added} ~{changed} -{removed}"


def _versioning_note(ctx: Context) -> str | None:
    status = ctx.run(ctx.store.aget_versioning())
    if status == "Enabled":
        return None
    return (
        f"versioning is {'suspended' if status else 'off'} on bucket '{ctx.bucket}': overwrites are not kept "
        "(run 's3skills versioning enable')"
    )


@click.command("history", short_help="List the versions of a skill, newest first.")
@global_options
@click.argument("name")
@pass_context
def history_command(ctx: Context, name: str) -> int:
    """List the versions of a skill, newest first, with their time, size and changes.

    NAME is a skill id or its folder name when that is unique. Needs the bucket's
    versioning on to show more than the current version. Records left out (forged,
    damaged, refuted by the bucket) are warned on stderr and, with --json, listed in
    `ignored` with the reason.
    """
    skill_id, _, _, versions, ignored = _recorded(ctx, name)
    note = _versioning_note(ctx)
    if ctx.json:
        ctx.emit(
            {
                "id": skill_id,
                "versioning": note is None,
                "ignored": ignored,
                "versions": [
                    {
                        "version": v.id,
                        "created": v.created.isoformat() if v.created else None,
                        "size": v.size,
                        "files": len(v.files),
                        "latest": v.latest,
                        "record": v.record,
                        "inferred": v.inferred,
                        "actor": v.actor,
                        "command": v.command,
                    }
                    for v in versions
                ],
            }
        )
        return 0
    rows = []
    for i, v in enumerate(versions):
        older = versions[i + 1] if i + 1 < len(versions) else None
        marks = " ".join(m for m, on in (("latest", v.latest), ("inferred", v.inferred)) if on)
        by = f"{v.actor} ({v.command})" if v.actor else "-"
        rows.append([v.id, _when(v.created), human_size(v.size), _changes(v, older), by, marks])
    columns = [
        Column("VERSION"),
        Column("TIME (UTC)", "fixed"),
        Column("SIZE", "fixed"),
        Column("CHANGES", "cut"),
        Column("BY"),
        Column("MARK", "fixed"),
    ]
    print_table(ctx.console, f"{len(versions)} version(s) of {skill_id}", columns, rows)
    if note:
        ctx.warn(note)
    return 0


@click.command("rollback", short_help="Make an old version of a skill the newest.")
@global_options
@click.argument("name")
@click.option("--to", "to", metavar="VERSION", required=True, help="The version id (or its first characters).")
@pass_context
def rollback_command(ctx: Context, name: str, to: str) -> int:
    """Restore a version of a skill by copying its files as the newest versions.

    Each differing file is copied from the old version with a PUT conditioned on the
    current ETag, so a concurrent push is reported, never overwritten; files the old
    version lacks are deleted (history keeps them). Later versions stay in the history.
    """
    skill_id, folder, objects, versions = _versions(ctx, name)
    target = pick_version(ctx, skill_id, versions, to)
    nested = _owner(folder, [v.key for v in objects])
    current = current_version(skill_id, folder, objects, lambda k: not any(k.startswith(n) for n in nested))
    if same_bytes(ctx, current, target):
        if ctx.json:
            ctx.emit({"id": skill_id, "version": current.id, "previous": current.id, "changed": []})
        else:
            ctx.print(f"{skill_id} is already at version {current.id}")
        return 0
    try:
        changed = ctx.run(restore(ctx.store, target, current))
    except Conflict as exc:
        raise CliError(f"{skill_id}: {exc}") from exc
    except SkillError as exc:
        raise CliError(f"{skill_id}: {exc}") from exc
    if changed:  # the manifest records the restored SKILL.md: the next index is still one GET
        ctx.library.note_changed([skill_id], command="rollback")
    if ctx.json:
        ctx.emit(
            {
                "id": skill_id,
                "version": target.id,
                "previous": current.id,
                "changed": changed,
                "library": ctx.location(ctx.prefix),
            }
        )
    else:
        ctx.print(
            f"Rolled back {skill_id} to version {target.id} in {ctx.target} ({len(changed)} file(s) restored); "
            f"version {current.id} stays in its history."
        )
    return 0


def _text(data: bytes) -> list[str] | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text.splitlines(keepends=True)


@click.command("diff", short_help="Show what changed between two versions of a skill.")
@global_options
@click.argument("name")
@click.option("--from", "from_", metavar="VERSION", help="The older version (default: the one before --to).")
@click.option("--to", "to", metavar="VERSION", help="The newer version (default: the latest).")
@pass_context
def diff_command(ctx: Context, name: str, from_: str | None, to: str | None) -> int:
    """A unified diff of the text files of two versions of a skill; binary files are named.

    Exits 0 whether or not they differ.
    """
    skill_id, _, _, versions = _versions(ctx, name)
    if not versions:
        raise CliError(f"{skill_id}: no versions")
    new = pick_version(ctx, skill_id, versions, to) if to else versions[0]
    rest = versions[versions.index(new) + 1 :]
    old = pick_version(ctx, skill_id, versions, from_) if from_ else (rest[0] if rest else None)
    if old is None:
        raise CliError(f"{skill_id} has one version only ({new.id}): nothing to compare")
    paths = sorted({f.path for f in old.files} | {f.path for f in new.files})
    out: list[str] = []
    for path in paths:
        a, b = old.file(path), new.file(path)
        if a is not None and b is not None and a.etag == b.etag:
            continue
        try:
            before, after = _read(ctx, a), _read(ctx, b)
        except SkillError as exc:
            raise CliError(f"{skill_id}: {exc}") from exc
        if before is None or after is None:
            out.append(f"Binary file {path} differs\n")
            continue
        out.extend(
            difflib.unified_diff(
                before,
                after,
                fromfile=f"{old.id}/{path}" if a else "/dev/null",
                tofile=f"{new.id}/{path}" if b else "/dev/null",
            )
        )
    if ctx.json:
        ctx.emit({"id": skill_id, "from": old.id, "to": new.id, "diff": "".join(out)})
    elif not out:
        ctx.print(f"No differences: {skill_id} is the same in versions {old.id} and {new.id}.")
    else:
        for line in out:
            ctx.stdout.write(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return 0


def _read(ctx: Context, file: FileVersion | None) -> list[str] | None:
    if file is None:
        return []
    return _text(ctx.run(read_version(ctx.store, file)).data)


@click.group("versioning", short_help="Turn on (or check) the bucket's versioning.")
@global_options
def versioning_group() -> None:
    """The bucket's versioning, which skill history and rollback need."""


@versioning_group.command("enable")
@global_options
@pass_context
def versioning_enable_command(ctx: Context) -> int:
    """Turn on versioning on the bucket, and say what it costs."""
    was = ctx.run(ctx.store.aget_versioning())
    if was != "Enabled":
        ctx.run(ctx.store.aput_versioning(True))
    if ctx.json:
        ctx.emit({"bucket": ctx.bucket, "versioning": "Enabled", "changed": was != "Enabled", "cost": VERSIONING_COST})
        return 0
    ctx.print(f"Versioning is {'already ' if was == 'Enabled' else ''}on for bucket '{ctx.bucket}'.")
    ctx.print(VERSIONING_COST)
    return 0


@versioning_group.command("status")
@global_options
@pass_context
def versioning_status_command(ctx: Context) -> int:
    """Show whether the bucket keeps old versions."""
    status = ctx.run(ctx.store.aget_versioning()) or "Off"
    if ctx.json:
        ctx.emit({"bucket": ctx.bucket, "versioning": status})
    else:
        ctx.print(f"Versioning of bucket '{ctx.bucket}': {status}")
    return 0


def pushed_versions(ctx: Context, skills: list[str]) -> dict[str, str]:
    """The version id of each pushed skill after a push (1 LIST of the library)."""
    objects: list[ObjectInfo]
    objects, _ = ctx.run(ctx.store.alist(ctx.prefix))
    ids = [str(sid) for o in objects if (sid := SkillId.from_key(o.key, ctx.prefix)) is not None]
    versions = versions_by_skill(ctx.prefix, objects, ids)
    return {sid: versions[sid] for sid in skills if sid in versions}
