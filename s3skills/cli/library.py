"""The commands that read or change skills in the bucket: `list`, `info`, `enable`, `disable`, `rm`.

Each command returns its exit status; failures raise (`CliError`, `UsageError` or the
library's exceptions) and `s3skills.cli.app` turns them into one line on stderr. The
catalog (and through it aioboto3) is imported by `list` only, so `--help` stays fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from s3skills.cli.channels import channels_naming
from s3skills.cli.context import CliError, Context, UsageError, global_options, pass_context
from s3skills.cli.shared import edit_hint, human_size, is_placeholder, problem_line, resolve_skill
from s3skills.cli.tables import Column, print_table
from s3skills.errors import Conflict, InvalidPath, SkillError
from s3skills.ids import SKILL_FILE, SkillId, nested_in
from s3skills.lines import summarise
from s3skills.skills import InvalidSkill, parse_skill_md, validate_skill_md
from s3skills.skills.format.model import MAX_SKILL_MD_BYTES
from s3skills.skills.format.severity import Severity, Tally, severity_of, severity_of_skill_problem
from s3skills.skills.versions.history import version_from_listing

if TYPE_CHECKING:
    from s3skills.storage import ObjectInfo

__all__ = ["disable_command", "enable_command", "info_command", "list_command", "rm_command"]


@click.command("list")
@global_options
@click.option("--category", metavar="C", help="Only this category.")
@click.option("--all", "show_all", is_flag=True, help="Include disabled skills (marked 'no' in ON).")
@pass_context
def list_command(ctx: Context, category: str | None, show_all: bool) -> int:
    """List the skills of a user, their enabled state and problems.

    Disabled skills are hidden unless --all (the table says how many); problems are
    counted by severity (fatal, error, warning: the same table as `validate` and
    `push`), each count naming its skills.
    """
    every = ctx.library.index(category, include_disabled=True, refresh=True)
    skills = every if show_all else [s for s in every if s.metadata.enabled]
    hidden = sorted(s.id for s in every if not s.metadata.enabled) if not show_all else []
    problems = ctx.library.problems()
    tally = Tally.of((p.skill_id, severity_of_skill_problem(p)) for p in problems)
    if ctx.json:
        ctx.emit(
            {
                "skills": [
                    {
                        "id": s.id,
                        "name": s.metadata.name,
                        "description": s.metadata.description,
                        "category": s.category,
                        "enabled": s.metadata.enabled,
                        "version": s.metadata.version,
                        "version_id": s.version,
                        "tags": s.metadata.tags,
                        "source": s.source,
                        "warnings": list(s.warnings),
                    }
                    for s in skills
                ],
                "hidden_disabled": hidden,
                "counts": tally.to_dict(),
                "problems": [
                    {
                        "id": p.skill_id,
                        "severity": str(severity_of_skill_problem(p)),
                        "level": p.level,
                        "reason": p.reason,
                    }
                    for p in problems
                ],
            }
        )
        return 0
    if not skills:
        ctx.print(f"No skills in {ctx.location(ctx.prefix)}" + ("" if show_all else " (enabled)") + ".")
    else:
        shown_off = sum(1 for s in skills if not s.metadata.enabled)
        title = f"{len(skills)} skill(s) of {ctx.owner}"
        if shown_off:
            title += f", {shown_off} disabled"
        if hidden:
            title += f" ({len(hidden)} disabled hidden: --all shows them)"
        merged = ctx.shared is not None and not ctx.shared_only  # the user's skills over the shared ones
        columns = [
            Column("ID"),
            Column("ON", "fixed"),
            *([Column("SOURCE", "cut", cap=24)] if merged else []),
            Column("CATEGORY", "cut", cap=24),
            Column("DESCRIPTION", "cut"),
        ]
        rows = [
            [
                s.id,
                "yes" if s.metadata.enabled else Text("no", style="yellow"),
                *([s.source] if merged else []),
                s.category or "-",
                " ".join(s.metadata.description.split()),
            ]
            for s in skills
        ]
        print_table(ctx.console, title, columns, rows)
    if hidden:
        ctx.warn(f"{len(hidden)} disabled skill(s) not shown ({summarise(hidden)}); use --all")
    for p in problems:
        if severity_of_skill_problem(p) is Severity.FATAL:
            ctx.warn(f"skipped {p.skill_id}: {p.reason}")
    if tally.count(Severity.FATAL) or tally.count(Severity.ERROR):
        ctx.warn(f"problems: {tally.summary()}; see 's3skills validate NAME'")
    return 0


def _locate(ctx: Context, name: str) -> tuple[str, str, str, list[ObjectInfo]]:
    """`(prefix, source, skill id, its objects)` of the skill `name` stands for: an id or a
    folder name in the user's library, else in the shared one (what the user's agent sees),
    else a skill's frontmatter name as the agent's library resolves it (its index: no scan).
    """
    places = [(ctx.prefix, "shared" if ctx.shared_only else "user")]
    if ctx.shared_prefix is not None and not ctx.shared_only:
        places.append((ctx.shared_prefix, "shared"))  # what the user's agent sees: the shared copy
    missing = CliError(f"unknown skill {name!r}")
    for prefix, source in places:
        try:
            return (prefix, source, *resolve_skill(ctx, name, prefix))
        except CliError as exc:
            missing = exc
    try:  # perhaps the skill's name, as hosts call it
        skill_id = ctx.run(ctx.library.aresolve(name))
    except SkillError as exc:
        if "is the name of several skills" in str(exc):
            raise CliError(str(exc)) from None  # the candidates
        raise missing from None
    except InvalidPath:
        raise missing from None
    for prefix, source in places:
        try:
            return (prefix, source, *resolve_skill(ctx, skill_id, prefix))
        except CliError:
            continue
    raise missing


@click.command("info", short_help="Show a skill: metadata, files, problems.")
@global_options
@click.argument("name")
@pass_context
def info_command(ctx: Context, name: str) -> int:
    """Show a skill: metadata, files with sizes, total size, SKILL.md ETag, problems.

    NAME is a skill id (`pdf`, `category/skill`), or its folder name or its frontmatter
    name (`"Xero Automation"`, any case) when that is unique.
    """
    prefix, source, skill_id, objects = _locate(ctx, name)
    folder = prefix + skill_id + "/"
    key_md = folder + SKILL_FILE
    body = ctx.run(ctx.store.aget(key_md, max_bytes=MAX_SKILL_MD_BYTES))
    problems = validate_skill_md(body.data, folder=skill_id.rsplit("/", 1)[-1])
    try:
        meta: dict[str, Any] | None = parse_skill_md(body.data, folder=skill_id).metadata.model_dump(
            by_alias=True, exclude_none=True
        )
    except InvalidSkill:
        meta = None
    files = [(o.key[len(folder) :], o.size) for o in sorted(objects, key=lambda o: o.key)]
    total = sum(size for _, size in files)
    nested = [o.key[: -len(SKILL_FILE)] for o in objects if o.key.endswith("/" + SKILL_FILE) and o.key != key_md]
    version_id = version_from_listing(skill_id, folder, objects, lambda key: not any(key.startswith(n) for n in nested))
    if ctx.json:
        ctx.emit(
            {
                "id": skill_id,
                "source": source,
                "metadata": meta,
                "files": [{"path": path, "size": size} for path, size in files],
                "total_size": total,
                "etag": body.etag,
                "version_id": version_id,
                "problems": [
                    {"severity": str(severity_of(p)), "level": p.level, "message": p.message, "fatal": p.fatal}
                    for p in problems
                ],
            }
        )
        return 0
    table = Table(title=f"{skill_id}  ({ctx.location(folder)})", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in (meta or {}).items():
        if value not in ([], {}, None):
            shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            table.add_row("version (frontmatter)" if key == "version" else key, Text(shown))
    table.add_row("SKILL.md ETag", body.etag)
    table.add_row("content version", f"{version_id} (of its files; see 's3skills history')")
    table.add_row("total size", f"{human_size(total)} in {len(files)} file(s)")
    ctx.console.print(table)
    listing = Table(show_header=True)
    listing.add_column("FILE", overflow="fold")
    listing.add_column("SIZE", justify="right")
    for path, size in files:
        listing.add_row(Text(path), human_size(size))
    ctx.console.print(listing)
    for p in problems:
        ctx.print(problem_line(SKILL_FILE, str(severity_of(p)), p.message))
    return 0


def _set_enabled(ctx: Context, name: str, enabled: bool) -> int:
    """Set `enabled` in the skill's SKILL.md through the library (conditional PUT, manifest kept current)."""
    skill_id, _ = resolve_skill(ctx, name)
    word = "enabled" if enabled else "disabled"
    try:
        changed = ctx.library.set_enabled(skill_id, enabled)
    except InvalidSkill as exc:
        raise CliError(f"cannot edit '{skill_id}': its SKILL.md is invalid: {exc.reason}") from exc
    except Conflict as exc:
        raise CliError(f"SKILL.md of '{skill_id}' changed while it was being edited; run the command again") from exc
    except SkillError as exc:
        raise CliError(str(exc)) from exc
    naming, unreadable = channels_naming(ctx, skill_id)
    if ctx.json:
        ctx.emit(
            {
                "id": skill_id,
                "enabled": enabled,
                "changed": changed,
                "library": ctx.location(ctx.prefix),
                "channels": naming,
            }
        )
    else:
        ctx.print(f"{skill_id} {word} in {ctx.target}" if changed else f"{skill_id} is already {word} in {ctx.target}")
        if enabled:
            _say_channels(ctx, naming, f"serve {skill_id} again at the version each names")
        else:
            _say_channels(ctx, naming, f"stop serving {skill_id} within the catalog TTL ('s3skills enable' undoes it)")
    _say_unreadable(ctx, unreadable)
    if enabled:
        description = ctx.library.get(skill_id).metadata.description
        if is_placeholder(description):
            ctx.warn(
                f"warning: the description of {skill_id} is still a TODO placeholder, and agents choose "
                f"skills by their description; {edit_hint(skill_id)}"
            )
    return 0


@click.command("enable")
@global_options
@click.argument("name")
@pass_context
def enable_command(ctx: Context, name: str) -> int:
    """Enable a skill (sets `enabled: true` in its SKILL.md).

    NAME is a skill id or its folder name when that is unique. Agents serving a channel
    that names it serve it again, at the channel's version.
    """
    return _set_enabled(ctx, name, True)


@click.command("disable")
@global_options
@click.argument("name")
@pass_context
def disable_command(ctx: Context, name: str) -> int:
    """Disable a skill (sets `enabled: false` in its SKILL.md).

    NAME is a skill id or its folder name when that is unique. Agents serving a channel
    stop serving it too, within the catalog TTL, whatever version the channel names: the
    library's channels that name it are printed.
    """
    return _set_enabled(ctx, name, False)


@click.command("rm")
@global_options
@click.argument("name")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_context
def rm_command(ctx: Context, name: str, yes: bool) -> int:
    """Delete a skill: its whole folder, its SKILL.md first.

    NAME is a skill id or its folder name when that is unique. Without --yes, a
    terminal is asked for confirmation; anything else is refused. Agents serving a
    channel stop serving it too, within the catalog TTL: the library's channels that
    name it are printed.
    """
    skill_id, objects = resolve_skill(ctx, name)
    objects, nested = _own_objects(ctx.prefix, skill_id, objects)
    folder = ctx.location(ctx.prefix + skill_id + "/")
    if nested:
        ctx.warn(f"kept the nested skill(s) {summarise(nested)}: a skill is one folder; remove them by name")
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"rm would delete {len(objects)} file(s) of '{skill_id}'; pass --yes to confirm")
        answer = input(f"Delete skill '{skill_id}' ({len(objects)} file(s) in {folder})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            ctx.print("Nothing deleted.")
            return 1
    try:
        deleted = ctx.library.remove(skill_id)
    except SkillError as exc:
        raise CliError(str(exc)) from exc
    naming, unreadable = channels_naming(ctx, skill_id)
    if ctx.json:
        ctx.emit({"deleted": skill_id, "files": deleted, "library": ctx.location(ctx.prefix), "channels": naming})
    else:
        ctx.print(f"Deleted skill '{skill_id}' ({deleted} file(s)) from {ctx.target}.")
        _say_channels(ctx, naming, f"stop serving {skill_id} within the catalog TTL (a push of it serves them again)")
    _say_unreadable(ctx, unreadable)
    return 0


def _say_channels(ctx: Context, naming: list[str], what: str) -> None:
    """Which channels of the library named the skill, and what their agents do now."""
    if naming:
        where = ctx.location(ctx.prefix)
        ctx.print(f"Channel(s) of the library {where} naming it: {summarise(naming)}; agents serving them {what}.")


def _say_unreadable(ctx: Context, unreadable: list[str]) -> None:
    if unreadable:
        ctx.warn(f"warning: channel(s) that could not be read (damaged or refused): {summarise(unreadable)}")


def _own_objects(prefix: str, skill_id: str, objects: list[ObjectInfo]) -> tuple[list[ObjectInfo], list[str]]:
    """The objects of `skill_id` itself, and the ids of the skills nested in its folder.

    A folder holding its own `SKILL.md` is another skill, never part of the outer one:
    `rm escrituras` leaves `escrituras/compraventa` alone.
    """
    ids = [str(sid) for o in objects if (sid := SkillId.from_key(o.key, prefix)) is not None]
    nested = nested_in(skill_id, ids)
    cut = tuple(f"{prefix}{sid}/" for sid in nested)
    return [o for o in objects if not o.key.startswith(cut)], nested
