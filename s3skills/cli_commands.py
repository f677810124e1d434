"""The commands of `s3skills` (the parser and the error handling are in `s3skills.cli`).

Each `cmd_*` takes the `Context` and returns the exit status; failures raise
(`CliError`, `UsageError` or the library's exceptions) and `cli.main` turns them
into one line on stderr.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table
from rich.text import Text

from s3skills.skills.catalog import SkillCatalog
from s3skills.cli import CliError, Context, UsageError
from s3skills.cli_scaffold import write_local, write_remote
from s3skills.errors import Conflict, InvalidPath, SkillError
from s3skills.ids import SkillId
from s3skills.transfer.localtree import SKILL_FILE, Finding, check_relative_path, scan_tree
from s3skills.paths import check_identity
from s3skills.skills import InvalidSkill, parse_skill_md, render_skill_md, validate_skill_md
from s3skills.skills.model import MAX_SKILL_MD_BYTES
from s3skills.storage import ObjectInfo
from s3skills.transfer import Progress as ProgressFn
from s3skills.transfer import PushRefused, pull_tree, push_tree

__all__ = [
    "category_name",
    "cmd_create",
    "cmd_demo",
    "cmd_disable",
    "cmd_enable",
    "cmd_info",
    "cmd_list",
    "cmd_pull",
    "cmd_push",
    "cmd_rm",
    "cmd_validate",
    "human_size",
    "skill_name",
]

_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


# -- argument types -----------------------------------------------------------------------


def skill_name(value: str) -> str:
    """An Agent Skills name: lowercase letters, digits and single hyphens, 1-64 characters."""
    if len(value) > 64 or not _NAME_RE.match(value):
        raise argparse.ArgumentTypeError(
            f"invalid skill name {value!r}: use 1-64 lowercase letters, digits and single hyphens "
            "(not at the start or end)"
        )
    return value


def category_name(value: str) -> str:
    """A category folder name (the allow-list of key segments)."""
    try:
        return check_identity(value, "category")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


# -- helpers ------------------------------------------------------------------------------


def human_size(size: int) -> str:
    """`1.5 KiB` style sizes."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _skill_ids(objects: list[ObjectInfo], prefix: str) -> list[str]:
    ids = set()
    for obj in objects:
        parts = obj.key[len(prefix) :].split("/")
        if parts[-1] == SKILL_FILE and 2 <= len(parts) <= 3:
            ids.add("/".join(parts[:-1]))
    return sorted(ids)


def _unknown(name: str, ids: list[str]) -> CliError:
    leaves = {sid.rsplit("/", 1)[-1]: sid for sid in ids}
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.6)
    close += [leaves[leaf] for leaf in difflib.get_close_matches(name, list(leaves), n=3, cutoff=0.6)]
    suggestions = list(dict.fromkeys(close))[:3]
    hint = f" (did you mean: {', '.join(suggestions)}?)" if suggestions else ""
    return CliError(f"unknown skill '{name}'{hint}")


def resolve_skill(ctx: Context, name: str) -> tuple[str, list[ObjectInfo]]:
    """A skill id (exact, or the unique skill with that folder name) and its objects.

    Raises:
        CliError: No such skill (with the closest ids), or the folder name is ambiguous.
    """
    try:
        wanted = str(SkillId.parse(name))
    except InvalidPath as exc:
        raise CliError(str(exc)) from exc
    prefix = ctx.prefix
    objects, _ = ctx.run(ctx.store.alist(prefix + wanted + "/"))
    if any(o.key == f"{prefix}{wanted}/{SKILL_FILE}" for o in objects):
        return wanted, objects
    everything, _ = ctx.run(ctx.store.alist(prefix))
    ids = _skill_ids(everything, prefix)
    matches = [sid for sid in ids if sid.rsplit("/", 1)[-1] == wanted]
    if len(matches) > 1:
        raise CliError(f"'{name}' is ambiguous: {', '.join(matches)}; give the full id")
    if not matches:
        raise _unknown(name, ids)
    folder = prefix + matches[0] + "/"
    return matches[0], [o for o in everything if o.key.startswith(folder)]


@contextmanager
def _progress(ctx: Context, label: str) -> Iterator[ProgressFn | None]:
    """A progress bar on a terminal (never with --json or when piped)."""
    if ctx.json or not ctx.console.is_terminal:
        yield None
        return
    columns = (SpinnerColumn(), TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[path]}"))
    with Progress(*columns, console=ctx.console, transient=True) as bar:
        task = bar.add_task(label, total=None, path="")

        def update(path: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, path=path)

        yield update


def _problem_line(path: str, level: str, message: str) -> str:
    return f"{path}: {level}: {message}"


# -- list / info --------------------------------------------------------------------------


def cmd_list(ctx: Context) -> int:
    """`list [--category C] [--all]`: the user's skills, enabled state and problems."""
    catalog = SkillCatalog(ctx.store)
    every = catalog.skills(ctx.user, category=ctx.args.category, include_disabled=True, refresh=True)
    skills = every if ctx.args.all else [s for s in every if s.metadata.enabled]
    problems = catalog.problems(ctx.user)
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
                        "tags": s.metadata.tags,
                        "warnings": list(s.warnings),
                    }
                    for s in skills
                ],
                "problems": [{"id": p.skill_id, "level": p.level, "reason": p.reason} for p in problems],
            }
        )
        return 0
    if not skills:
        ctx.print(f"No skills in {ctx.location(ctx.prefix)}" + ("" if ctx.args.all else " (enabled)") + ".")
    else:
        table = Table(title=f"{len(skills)} skill(s) of {ctx.user}", title_justify="left")
        for column in ("ID", "ON", "CATEGORY", "DESCRIPTION"):
            table.add_column(column, overflow="fold")
        for s in skills:
            flag = "yes" if s.metadata.enabled else "no"
            desc = s.metadata.description
            table.add_row(
                Text(s.id), flag, Text(s.category or "-"), Text(desc if len(desc) <= 80 else desc[:77] + "...")
            )
        ctx.console.print(table)
    if len(every) > len(skills):
        ctx.warn(f"{len(every) - len(skills)} disabled skill(s) not shown; use --all")
    errors = [p for p in problems if p.level == "error"]
    for p in errors:
        ctx.warn(f"skipped {p.skill_id}: {p.reason}")
    if len(problems) > len(errors):
        ctx.warn(f"{len(problems) - len(errors)} warning(s); see 's3skills validate NAME'")
    return 0


def cmd_info(ctx: Context) -> int:
    """`info NAME`: metadata, files with sizes, total size, SKILL.md ETag, problems."""
    skill_id, objects = resolve_skill(ctx, ctx.args.name)
    folder = ctx.prefix + skill_id + "/"
    body = ctx.run(ctx.store.aget(folder + SKILL_FILE, max_bytes=MAX_SKILL_MD_BYTES))
    problems = validate_skill_md(body.data, folder=skill_id.rsplit("/", 1)[-1])
    try:
        meta: dict[str, Any] | None = parse_skill_md(body.data, folder=skill_id).metadata.model_dump(
            by_alias=True, exclude_none=True
        )
    except InvalidSkill:
        meta = None
    files = [(o.key[len(folder) :], o.size) for o in sorted(objects, key=lambda o: o.key)]
    total = sum(size for _, size in files)
    if ctx.json:
        ctx.emit(
            {
                "id": skill_id,
                "metadata": meta,
                "files": [{"path": path, "size": size} for path, size in files],
                "total_size": total,
                "etag": body.etag,
                "problems": [{"level": p.level, "message": p.message, "fatal": p.fatal} for p in problems],
            }
        )
        return 0
    table = Table(title=f"{skill_id}  ({ctx.location(folder)})", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in (meta or {}).items():
        if value not in ([], {}, None):
            shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            table.add_row(key, Text(shown))
    table.add_row("SKILL.md ETag", body.etag)
    table.add_row("total size", f"{human_size(total)} in {len(files)} file(s)")
    ctx.console.print(table)
    listing = Table(show_header=True)
    listing.add_column("FILE", overflow="fold")
    listing.add_column("SIZE", justify="right")
    for path, size in files:
        listing.add_row(Text(path), human_size(size))
    ctx.console.print(listing)
    for p in problems:
        ctx.print(_problem_line(SKILL_FILE, p.level, p.message))
    return 0


# -- create / enable / disable ------------------------------------------------------------


def cmd_create(ctx: Context) -> int:
    """`create NAME [--category C] [-d DESC] [--code] [--local DIR]`: a new skill, never overwriting."""
    a = ctx.args
    if a.local:
        written = write_local(Path(a.local), a.name, a.category, a.description, code=a.code)
        where = str(written)
    else:
        skill_id = f"{a.category}/{a.name}" if a.category else a.name
        folder = ctx.prefix + skill_id + "/"
        existing, _ = ctx.run(ctx.store.alist(folder))
        if existing:
            raise CliError(f"skill '{skill_id}' already exists in {ctx.location(folder)}")
        try:
            ctx.run(write_remote(ctx.store, folder, a.name, a.description, code=a.code))
        except Conflict as exc:
            raise CliError(f"skill '{skill_id}' already exists in {ctx.location(folder)}") from exc
        where = ctx.location(folder)
    if ctx.json:
        ctx.emit({"created": where, "name": a.name, "category": a.category, "code": a.code})
    else:
        ctx.print(f"Created skill '{a.name}' in {where}")
        ctx.print("Edit its SKILL.md: the description says when an agent should use it.")
    return 0


def _set_enabled(ctx: Context, enabled: bool) -> int:
    skill_id, _ = resolve_skill(ctx, ctx.args.name)
    key = f"{ctx.prefix}{skill_id}/{SKILL_FILE}"
    body = ctx.run(ctx.store.aget(key, max_bytes=MAX_SKILL_MD_BYTES))
    word = "enabled" if enabled else "disabled"
    try:
        parsed = parse_skill_md(body.data, folder=skill_id)
    except InvalidSkill as exc:
        raise CliError(f"cannot edit '{skill_id}': its SKILL.md is invalid: {exc.reason}") from exc
    changed = parsed.metadata.enabled != enabled
    if changed:
        meta = parsed.metadata.model_copy(update={"enabled": enabled})
        text = render_skill_md(meta, parsed.body)
        try:
            ctx.run(
                ctx.store.aput(
                    key, text.encode("utf-8"), if_match=body.etag, content_type="text/markdown; charset=utf-8"
                )
            )
        except Conflict as exc:
            raise CliError(
                f"SKILL.md of '{skill_id}' changed while it was being edited; run the command again"
            ) from exc
    if ctx.json:
        ctx.emit({"id": skill_id, "enabled": enabled, "changed": changed})
    else:
        ctx.print(f"{skill_id} {word}" if changed else f"{skill_id} is already {word}")
    return 0


def cmd_enable(ctx: Context) -> int:
    """`enable NAME`: set `enabled: true` with a conditional PUT."""
    return _set_enabled(ctx, True)


def cmd_disable(ctx: Context) -> int:
    """`disable NAME`: set `enabled: false` with a conditional PUT."""
    return _set_enabled(ctx, False)


# -- validate -----------------------------------------------------------------------------


def _validate_local(path: Path) -> tuple[list[Finding], int]:
    if path.is_file():
        problems = validate_skill_md(path.read_bytes(), folder=path.resolve().parent.name)
        return [Finding("", p.level, p.message, p.fatal) for p in problems], 1
    tree = scan_tree(path)
    if not tree.skills and not tree.refused:
        raise CliError(f"{path}: no skills found (a skill is a folder with a SKILL.md, one or two levels down)")
    return tree.findings(), len(tree.skills)


def cmd_validate(ctx: Context) -> int:
    """`validate PATH|NAME`: one line per problem; exit status 1 when there is an error."""
    target = ctx.args.target
    path = Path(target).expanduser()
    if path.exists():
        findings, count = _validate_local(path)
        lines = [(str(path / f.path) if f.path else str(path), f) for f in findings]
    elif ctx.has_library:
        skill_id, objects = resolve_skill(ctx, target)
        folder = ctx.prefix + skill_id + "/"
        body = ctx.run(ctx.store.aget(folder + SKILL_FILE, max_bytes=MAX_SKILL_MD_BYTES))
        shown = ctx.location(folder + SKILL_FILE)
        problems = validate_skill_md(body.data, folder=skill_id.rsplit("/", 1)[-1])
        lines = [(shown, Finding(SKILL_FILE, p.level, p.message, p.fatal)) for p in problems]
        for obj in objects:
            why = check_relative_path(obj.key[len(ctx.prefix) :])
            if why is not None:
                lines.append((ctx.location(obj.key), Finding(obj.key, "error", why, True)))
        count = 1
    else:
        raise CliError(f"'{target}' is not a local path, and without --bucket/--user it cannot be a skill id")
    errors = sum(1 for _, f in lines if f.level == "error")
    warnings = len(lines) - errors
    if ctx.json:
        ctx.emit(
            {
                "ok": errors == 0,
                "skills": count,
                "problems": [
                    {"path": shown, "level": f.level, "message": f.message, "fatal": f.fatal} for shown, f in lines
                ],
            }
        )
    else:
        for shown, f in lines:
            ctx.print(_problem_line(shown, f.level, f.message))
        ctx.print(f"{count} skill(s) checked: {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


# -- push / pull / rm ---------------------------------------------------------------------


def cmd_push(ctx: Context) -> int:
    """`push DIR [--dry-run] [--delete] [--force] [--create-bucket]`."""
    a = ctx.args
    store, prefix = ctx.store, ctx.prefix
    if a.create_bucket and not a.dry_run:
        ctx.run(store.acreate_bucket())
    try:
        with _progress(ctx, "push") as progress:
            report = push_tree(
                store, Path(a.dir), prefix, delete=a.delete, dry_run=a.dry_run, force=a.force, progress=progress
            )
    except PushRefused as exc:
        refused = exc.report
        if ctx.json:
            ctx.emit({"ok": False, **refused.to_dict()})
        for item in refused.refused:
            ctx.warn(_problem_line(str(Path(a.dir) / item.path), "error", item.reason))
        for p in refused.problems:
            if p.fatal:
                ctx.warn(_problem_line(str(Path(a.dir) / p.path), p.level, p.message))
        raise CliError(f"push refused: {exc} (see 's3skills validate {a.dir}')") from exc
    if ctx.json:
        ctx.emit({"ok": True, **report.to_dict()})
        return 0
    for item in report.refused:
        ctx.warn(f"left out {Path(a.dir) / item.path}: {item.reason}")
    verb, deleted = ("Would upload", "would delete") if a.dry_run else ("Uploaded", "deleted")
    ctx.print(
        f"{verb} {len(report.uploaded)} file(s) ({human_size(report.bytes_uploaded)}) of "
        f"{len(report.skills)} skill(s) to {ctx.location(prefix)}; {len(report.skipped)} unchanged, "
        f"{len(report.deleted)} {deleted}."
    )
    errors = sum(1 for p in report.problems if p.level == "error")
    if errors:
        ctx.warn(f"{errors} SKILL.md problem(s); see 's3skills validate {a.dir}'")
    return 0


def cmd_pull(ctx: Context) -> int:
    """`pull DIR [--skill NAME]`: download the library, or one skill, below DIR."""
    skill = resolve_skill(ctx, ctx.args.skill)[0] if ctx.args.skill else None
    with _progress(ctx, "pull") as progress:
        try:
            report = pull_tree(ctx.store, ctx.prefix, Path(ctx.args.dir), skill=skill, progress=progress)
        except SkillError as exc:  # removed between resolve and pull
            raise CliError(str(exc)) from exc
    if ctx.json:
        ctx.emit({"ok": not report.refused, **report.to_dict()})
    else:
        ctx.print(
            f"Downloaded {len(report.downloaded)} file(s) ({human_size(report.bytes_downloaded)}) to "
            f"{ctx.args.dir}; {len(report.skipped)} unchanged, {len(report.refused)} refused."
        )
    for item in report.refused:
        ctx.warn(f"refused {item.path}: {item.reason}")
    return 1 if report.refused else 0


def cmd_rm(ctx: Context) -> int:
    """`rm NAME [--yes]`: delete the skill's whole folder (its SKILL.md first)."""
    skill_id, objects = resolve_skill(ctx, ctx.args.name)
    folder = ctx.location(ctx.prefix + skill_id + "/")
    if not ctx.args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"rm would delete {len(objects)} file(s) of '{skill_id}'; pass --yes to confirm")
        answer = input(f"Delete skill '{skill_id}' ({len(objects)} file(s) in {folder})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            ctx.print("Nothing deleted.")
            return 1
    keys = sorted((o.key for o in objects), key=lambda k: (not k.endswith("/" + SKILL_FILE), k))
    skill_md = [k for k in keys if k.endswith("/" + SKILL_FILE)]
    failed = ctx.run(ctx.store.adelete_many(skill_md))
    failed += ctx.run(ctx.store.adelete_many([k for k in keys if k not in set(skill_md)]))
    if failed:
        raise CliError(f"{len(failed)} file(s) of '{skill_id}' could not be deleted")
    if ctx.json:
        ctx.emit({"deleted": skill_id, "files": len(keys)})
    else:
        ctx.print(f"Deleted skill '{skill_id}' ({len(keys)} file(s)).")
    return 0


def cmd_demo(ctx: Context) -> int:
    """`demo ...`: hand over to `s3skills.demo.main` (imported only now)."""
    try:
        demo = importlib.import_module("s3skills.demo")
    except ModuleNotFoundError as exc:
        if exc.name != "s3skills.demo":
            raise
        raise CliError("the demo is not available in this installation") from exc
    status: int = demo.main(list(ctx.args.demo_args))
    return status
