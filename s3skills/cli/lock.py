"""`s3skills lock` and `s3skills verify --lock`: what a deployment runs, checkable in CI.

`lock` writes `skills-lock.json`: for the library (or a channel), each skill's version id,
record id and, per file, its SHA-256, VersionId, ETag and size, with the source (bucket,
library prefix, channel). `verify --lock FILE` compares the source now with the file and
exits 1 naming every difference (a skill added or gone, a file added, gone or changed).
Verify compares content by content: every file is read and its SHA-256 compared, and its
VersionId too. An ETag is never taken as proof: a single-part upload's ETag is its MD5,
and two different files with one MD5 are easy to make.
`channel create NAME --from-lock FILE` makes a channel of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import click

from s3skills.cli.channels import load_channel
from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.lockfile import LOCK_SCHEMA, read_lock
from s3skills.paths import join_key
from s3skills.skills.versions.channels import LATEST, ChannelSkill

__all__ = ["lock_command", "verify_command"]


async def _hashes(ctx: Context, skills: dict[str, ChannelSkill]) -> dict[str, dict[str, str]]:
    """SHA-256 of every file of every skill at its pinned version (1 GET each, 16 at a time)."""
    sem = asyncio.Semaphore(16)
    out: dict[str, dict[str, str]] = {sid: {} for sid in skills}

    async def one(sid: str, path: str) -> None:
        pin = skills[sid].files[path]
        key = join_key(ctx.prefix + sid + "/", tuple(path.split("/")))
        async with sem:
            body = await ctx.store.aget(key, version_id=pin.version_id)
        if body.etag != pin.etag:
            raise CliError(f"{sid}/{path}: the version named has another ETag ({pin.version_id or 'current'})")
        out[sid][path] = hashlib.sha256(body.data).hexdigest()

    await asyncio.gather(*(one(sid, p) for sid, s in skills.items() for p in s.files))
    return out


def _document(ctx: Context, channel: str, skills: dict[str, ChannelSkill]) -> dict[str, Any]:
    hashes = ctx.run(_hashes(ctx, skills))
    return {
        "schema": LOCK_SCHEMA,
        "source": {"bucket": ctx.bucket, "library": ctx.prefix, "channel": channel},
        "skills": {
            sid: {
                "version": s.version,
                "record": s.record,
                "files": {
                    p: {"sha256": hashes[sid][p], "version_id": f.version_id, "etag": f.etag, "size": s.sizes.get(p, 0)}
                    for p, f in sorted(s.files.items())
                },
            }
            for sid, s in sorted(skills.items())
        },
    }


@click.command("lock", short_help="Write skills-lock.json: each skill's version and files' SHA-256.")
@global_options
@click.option("--channel", "channel", default=LATEST, show_default=True, help="Lock this channel.")
@click.option("--output", "-o", default="skills-lock.json", show_default=True, type=click.Path(dir_okay=False))
@pass_context
def lock_command(ctx: Context, channel: str, output: str) -> int:
    """Record what the library (or a channel) serves now, to review and check in CI.

    Reads every file once (1 GET each) to hash it.
    """
    doc = _document(ctx, channel, load_channel(ctx, channel).skills)
    Path(output).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if ctx.json:
        ctx.emit({"lock": output, "channel": channel, "skills": len(doc["skills"])})
    else:
        ctx.print(f"Wrote {output}: {len(doc['skills'])} skill(s) of {channel}.")
    return 0


def differences(locked: dict[str, Any], now: dict[str, ChannelSkill], hashes: dict[str, dict[str, str]]) -> list[str]:
    """Every difference between a lock's skills and the skills now (each one line).

    `hashes` holds the SHA-256 of every file both name; a file is changed when its SHA-256
    differs, and another version of the same bytes when only its VersionId does (a lock
    with no VersionId, written on an unversioned bucket, is checked by SHA-256 alone).
    """
    out: list[str] = []
    for sid in sorted(set(locked) | set(now)):
        if sid not in now:
            out.append(f"{sid}: in the lock, not served")
            continue
        if sid not in locked:
            out.append(f"{sid}: served, not in the lock")
            continue
        want, have = locked[sid]["files"], now[sid].files
        for path in sorted(set(want) | set(have)):
            if path not in have:
                out.append(f"{sid}/{path}: in the lock, missing")
            elif path not in want:
                out.append(f"{sid}/{path}: not in the lock")
            elif hashes[sid][path] != want[path]["sha256"]:
                out.append(f"{sid}/{path}: changed (sha256 differs)")
            elif want[path].get("version_id") not in (None, have[path].version_id):
                out.append(f"{sid}/{path}: another version of the same bytes (VersionId differs)")
    return out


@click.command("verify", short_help="Check the library (or a channel) against a lockfile; exit 1 on any difference.")
@global_options
@click.option("--lock", "lock", required=True, type=click.Path(dir_okay=False), help="The lockfile.")
@click.option("--channel", "channel", help="The channel to check (default: the lock's).")
@pass_context
def verify_command(ctx: Context, lock: str, channel: str | None) -> int:
    """Exit 0 when the source serves exactly the locked files, else 1 naming every difference.

    Every file is read (1 GET each) and compared by SHA-256 and VersionId, never by ETag.
    """
    doc = read_lock(lock)
    raw = doc.get("source")
    source: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if source.get("library") not in (None, ctx.prefix) or source.get("bucket") not in (None, ctx.bucket):
        ctx.warn(
            f"warning: {lock} locks s3://{source.get('bucket')}/{source.get('library')}, not {ctx.location(ctx.prefix)}"
        )
    name = channel or str(source.get("channel") or LATEST)
    now = load_channel(ctx, name).skills
    locked: dict[str, Any] = doc["skills"]
    both = {
        sid: ChannelSkill(s.version, s.record, {p: f for p, f in s.files.items() if p in locked[sid]["files"]}, s.sizes)
        for sid, s in now.items()
        if sid in locked
    }
    found = differences(locked, now, ctx.run(_hashes(ctx, both)))
    if ctx.json:
        ctx.emit({"lock": lock, "channel": name, "ok": not found, "differences": found})
    else:
        for line in found:
            ctx.print(line)
        ctx.print(f"{name} matches {lock}." if not found else f"{len(found)} difference(s) from {lock}.")
    return 1 if found else 0
