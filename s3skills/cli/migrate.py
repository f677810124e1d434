"""`s3skills migrate-layout`: copy a bucket from the seeds' key layout to the per-user one.

    {user}/skills/...      ->  users/{user}/skills/...
    {shared}/skills/...    ->  shared/{shared}/skills/...     (each --shared NAME)
    threads/{thread}/...   ->  users/{owner}/threads/{thread}/... (with --threads-owner-map)
    tickets/{ticket}/...       unchanged: both layouts keep tickets there

The seeds' layout keys a thread by its id only, so nothing in the bucket says whose it
is: threads move only with a JSON map `{"thread id": "user id"}`; the others are left
where they are and listed. Objects are copied, never moved: a target that exists is
never overwritten (a conditional create; one with the same ETag counts as done), and
the seeds' keys stay until you delete them. Within a skill, `SKILL.md` is copied last,
so an agent on the new layout never sees half a skill. `--dry-run` prints the plan.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from s3skills.aio import gather_limited
from s3skills.cli.context import CliError, Context, UsageError, global_options_except, pass_context
from s3skills.errors import Conflict, InvalidPath, NotFound
from s3skills.ids import SKILL_FILE
from s3skills.layout import KeyLayout
from s3skills.paths import check_identity

__all__ = ["MigrationPlan", "Move", "migrate_command", "plan_migration", "read_owner_map"]


@dataclass(frozen=True, slots=True)
class Move:
    """One object to copy (`target` set) or to leave (`reason` says why)."""

    source: str
    kind: str
    target: str | None = None
    reason: str | None = None


@dataclass
class MigrationPlan:
    """What `migrate-layout` copies and what it leaves.

    Attributes:
        copies: Objects to copy to the per-user layout.
        left: Objects that stay as they are, with the reason.
    """

    copies: list[Move] = field(default_factory=list)
    left: list[Move] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        """How many objects of each kind are copied or left."""
        counts: Counter[str] = Counter()
        for move in self.copies:
            counts[f"copy {move.kind}"] += 1
        for move in self.left:
            counts[f"leave {move.kind}"] += 1
        return dict(sorted(counts.items()))


def _ok(value: str, what: str) -> bool:
    try:
        check_identity(value, what)
    except ValueError:
        return False
    return True


def plan_migration(keys: list[str], *, shared: list[str], owners: dict[str, str]) -> MigrationPlan:
    """Sort the keys of a bucket in the seeds' layout into copies and objects left.

    Args:
        keys: Every key of the bucket.
        shared: Names of the organisation libraries (`{name}/skills/`).
        owners: Thread id -> the user who owns it.
    """
    target = KeyLayout()
    plan = MigrationPlan()
    shared_names = set(shared)
    for key in sorted(keys):
        parts = key.split("/")
        head = parts[0]
        if head == "tickets" and len(parts) > 2:
            plan.left.append(Move(key, "ticket", reason="tickets/ is the same in both layouts"))
        elif head == "threads" and len(parts) > 2:
            thread = parts[1]
            owner = owners.get(thread)
            if owner is None:
                reason = "the seeds' layout does not say whose thread it is: name its user in --threads-owner-map"
                plan.left.append(Move(key, "thread", reason=reason))
            elif not _ok(thread, "thread id"):
                plan.left.append(Move(key, "thread", reason=f"{thread!r} is not a valid thread id"))
            else:
                dest = target.workspace_prefix(owner, thread) + "/".join(parts[2:])
                plan.copies.append(Move(key, "thread", dest))
        elif len(parts) > 2 and parts[1] == "skills" and _ok(head, "library"):
            rest = "/".join(parts[2:])
            if head in shared_names:
                plan.copies.append(Move(key, "shared library", target.shared_prefix(head) + rest))
            else:
                plan.copies.append(Move(key, "user library", target.user_prefix(head) + rest))
        else:
            plan.left.append(Move(key, "other", reason="not a library, thread or ticket of the seeds' layout"))
    return plan


def read_owner_map(path: Path) -> dict[str, str]:
    """Read `{"thread id": "user id", ...}`, every id checked.

    Raises:
        UsageError: Not such a JSON object, or an id outside the allow-list.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the threads owner map {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f'{path}: expected a JSON object {{"thread id": "user id"}}')
    try:
        return {check_identity(t, "thread id"): check_identity(u, "user id") for t, u in data.items()}
    except InvalidPath as exc:
        raise UsageError(f"{path}: {exc}") from exc


async def _copy_all(ctx: Context, moves: list[Move]) -> dict[str, list[str]]:
    store = ctx.store
    outcome: dict[str, list[str]] = {"copied": [], "already": [], "conflict": [], "vanished": []}

    def job(move: Move) -> Any:
        async def run() -> None:
            assert move.target is not None
            try:
                body = await store.aget(move.source)
            except NotFound:
                outcome["vanished"].append(move.source)
                return
            try:
                await store.aput(move.target, body.data, if_none_match=True, content_type=body.content_type)
            except Conflict:
                info = await store.ahead(move.target)
                same = info.etag == hashlib.md5(body.data, usedforsecurity=False).hexdigest()
                outcome["already" if same else "conflict"].append(move.target)
                return
            outcome["copied"].append(move.target)

        return run

    # Everything else first, then each SKILL.md: a skill appears only once complete.
    last = [m for m in moves if m.kind.endswith("library") and m.source.endswith("/" + SKILL_FILE)]
    first = [m for m in moves if m not in set(last)]
    for batch in (first, last):
        await gather_limited([job(m) for m in batch], 16)
    return {k: sorted(v) for k, v in outcome.items()}


@click.command("migrate-layout", short_help="Copy a bucket from the seeds' layout to the per-user one.")
@global_options_except("shared")
@click.option("--shared", "shared", multiple=True, metavar="NAME", help="An organisation library (repeatable).")
@click.option(
    "--threads-owner-map",
    "owner_map",
    type=click.Path(dir_okay=False, path_type=Path),
    help='JSON {"thread id": "user id"}: the threads to move, and whose they are.',
)
@click.option("--dry-run", is_flag=True, help="Print the plan; copy nothing.")
@click.option("-y", "--yes", is_flag=True, help="Copy (required unless --dry-run).")
@pass_context
def migrate_command(ctx: Context, shared: tuple[str, ...], owner_map: Path | None, dry_run: bool, yes: bool) -> int:
    """Copy the seeds' layout ({user}/skills/, threads/{id}/) to the per-user layout.

    Users' libraries go to users/{user}/skills/, each --shared library to
    shared/{name}/skills/, and the threads named in --threads-owner-map to
    users/{owner}/threads/{id}/. Other threads are left and listed: the seeds' layout
    does not say whose they are. Nothing is overwritten and nothing is deleted.
    """
    if not dry_run and not yes:
        raise UsageError("migrate-layout copies objects: pass --dry-run to see the plan, or --yes to copy")
    names = []
    for name in shared:
        try:
            names.append(check_identity(name, "shared library name"))
        except InvalidPath as exc:
            raise UsageError(str(exc)) from exc
    owners = read_owner_map(owner_map) if owner_map is not None else {}
    objects, _ = ctx.run(ctx.store.alist(""))
    plan = plan_migration([o.key for o in objects if not o.key.endswith("/")], shared=names, owners=owners)
    unowned = sorted({m.source.split("/")[1] for m in plan.left if m.kind == "thread"})
    result: dict[str, Any] = {
        "dry_run": dry_run,
        "summary": plan.summary(),
        "copies": [{"from": m.source, "to": m.target} for m in plan.copies],
        "left": [{"key": m.source, "reason": m.reason} for m in plan.left],
        "threads_without_owner": unowned,
    }
    if not dry_run:
        result.update(ctx.run(_copy_all(ctx, plan.copies)))
    if ctx.json:
        ctx.emit(result)
    else:
        _print(ctx, result)
    if result.get("conflict"):
        raise CliError(f"{len(result['conflict'])} target(s) already hold other content and were not overwritten")
    return 0


def _print(ctx: Context, result: dict[str, Any]) -> None:
    verb = "would copy" if result["dry_run"] else "copy"
    for move in result["copies"]:
        ctx.print(f"{verb} {ctx.location(move['from'])} -> {move['to']}")
    would = "would leave" if result["dry_run"] else "left"
    for item in result["left"]:
        ctx.print(f"{would} {ctx.location(item['key'])}: {item['reason']}")
    for what, count in result["summary"].items():
        ctx.print(f"{count:>6}  {what}")
    if result["threads_without_owner"]:
        shown = ", ".join(result["threads_without_owner"][:10])
        more = " ..." if len(result["threads_without_owner"]) > 10 else ""
        ctx.warn(
            f"{len(result['threads_without_owner'])} thread(s) left in threads/ ({shown}{more}): the seeds' layout "
            "does not say whose they are; name their users in --threads-owner-map FILE to move them"
        )
    if not result["dry_run"]:
        ctx.print(
            f"copied {len(result['copied'])}, already there {len(result['already'])}, "
            f"not overwritten {len(result['conflict'])}, gone meanwhile {len(result['vanished'])}. "
            "The seeds' keys are still there: delete them once the service runs on the per-user layout."
        )
