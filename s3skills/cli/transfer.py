"""The commands that move or check whole trees of skills: `push`, `pull`, `validate`.

`s3skills.transfer` (push and pull) is imported inside the commands that use it: it pulls
in the backend's file helpers, and with them deepagents, which the other commands and
`s3skills --help` must not pay for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.shared import human_size, problem_line, progress, resolve_skill
from s3skills.cli.versions import pushed_versions
from s3skills.errors import SkillError
from s3skills.ids import SKILL_FILE
from s3skills.skills import InvalidSkill, parse_skill_md, validate_skill_md
from s3skills.skills.model import MAX_SKILL_MD_BYTES
from s3skills.transfer.localtree import Finding, check_relative_path, scan_tree

if TYPE_CHECKING:
    from s3skills.transfer import PushReport

__all__ = ["pull_command", "push_command", "validate_command"]

_PLACEHOLDER_RE = re.compile(r"^\s*TODO\b|\bTODO:", re.IGNORECASE)


def _validate_local(path: Path) -> tuple[list[Finding], int]:
    if path.is_file():
        data = path.read_bytes()
        problems = validate_skill_md(data, folder=path.resolve().parent.name)
        found = [Finding("", p.level, p.message, p.fatal) for p in problems]
        return found + _placeholder_findings("", data, path.resolve().parent.name), 1
    tree = scan_tree(path)
    if not tree.skills and not tree.refused:
        raise CliError(f"{path}: no skills found (a skill is a folder with a SKILL.md, at any depth)")
    findings = tree.findings()
    for skill_id, folder in tree.mapping.items():
        rel = f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE
        findings += _placeholder_findings(rel, tree.skill_md[skill_id], skill_id)  # the bytes the scan read
    return sorted(findings, key=lambda f: f.path), len(tree.skills)


def _placeholder_findings(rel: str, data: bytes, skill_id: str) -> list[Finding]:
    """A warning when the description is still a template placeholder (`TODO: ...`)."""
    try:
        description = parse_skill_md(data, folder=skill_id.rsplit("/", 1)[-1]).metadata.description
    except InvalidSkill:
        return []
    if not _PLACEHOLDER_RE.search(description):
        return []
    return [Finding(rel, "warning", "the description is a placeholder (TODO): say what the skill does and when")]


@click.command("validate")
@global_options
@click.argument("target", metavar="PATH|NAME")
@pass_context
def validate_command(ctx: Context, target: str) -> int:
    """Check a local skill or tree of skills, or a skill in the bucket.

    PATH is a local folder or SKILL.md; anything else is a skill id in the user's
    library. One line per problem; the exit status is 1 when there is an error.
    """
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
        lines += [(shown, f) for f in _placeholder_findings(SKILL_FILE, body.data, skill_id)]
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
            ctx.print(problem_line(shown, f.level, f.message))
        ctx.print(f"{_plural(count, 'skill')} checked: {_plural(errors, 'error')}, {_plural(warnings, 'warning')}")
    return 1 if errors else 0


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _print_plan(ctx: Context, report: PushReport, directory: str) -> None:
    """The dry run's detail: the id of each skill folder, and every file by name."""
    ctx.print(f"Skills found in {directory} (id <- folder):")
    for skill_id, folder in report.mapping.items():
        ctx.print(f"  {skill_id} <- {folder}")
    if report.uploaded:
        ctx.print(f"Would upload {_plural(len(report.uploaded), 'file')}:")
        for item in report.uploaded:
            ctx.print(f"  + {item.path} ({item.reason}, {human_size(item.size)})")
    if report.deleted:
        ctx.print(f"Would delete {_plural(len(report.deleted), 'file')}:")
        for item in report.deleted:
            ctx.print(f"  - {item.path}")
    if report.ignored:
        ctx.print(f"Ignored {_plural(len(report.ignored), 'file')}:")
        for item in report.ignored:
            ctx.print(f"  {item.path}: {item.reason}")


def _warn_notes(ctx: Context, report: PushReport, directory: str) -> None:
    would = "would be" if report.dry_run else "were"
    for item in report.refused:
        ctx.warn(f"left out {Path(directory) / item.path}: {item.reason}")
    for item in report.nested:
        ctx.warn(f"note: {Path(directory) / item.path}: {item.reason}")
    for item in report.conflicts:
        ctx.warn(f"conflict: {item.path}: {item.reason}")
    for item in report.replaced:
        ctx.warn(f"note: {item.path} {would} replaced: {item.reason}")
    if report.disabled:
        ctx.warn(f"kept disabled (use --enable to enable): {', '.join(report.disabled)}")


@click.command("push", short_help="Upload a local tree of skills.")
@global_options
@click.argument("directory", metavar="DIR")
@click.option("--dry-run", is_flag=True, help="Show the skills, files and conflicts; write nothing.")
@click.option("--delete", is_flag=True, help="Mirror: delete remote files that are not in DIR.")
@click.option("--force", is_flag=True, help="Push invalid skills, leave unsafe files out, replace conflicting skills.")
@click.option("--category", metavar="C", help="Put every skill in category C (instead of the rule's choice).")
@click.option("--enable", is_flag=True, help="Enable skills that are disabled in the library.")
@click.option("--create-bucket", is_flag=True, help="Create the bucket if it does not exist.")
@pass_context
def push_command(
    ctx: Context,
    directory: str,
    dry_run: bool,
    delete: bool,
    force: bool,
    category: str | None,
    enable: bool,
    create_bucket: bool,
) -> int:
    """Upload a local tree of skills, only what changed (SKILL.md last).

    Every SKILL.md below DIR, at any depth, is a skill. Its id is its folder name,
    in the category of the nearest folder above it that is neither a generic container
    (skills, plugins, packages, src, .claude...) nor a skill: plugins/x/skills/y -> x/y,
    skills/.curated/y -> .curated/y, pdf -> pdf. --category C puts them all in C. Two
    folders with one id are refused, listed. --dry-run shows each id and file.

    Not without --force: invalid skills, unsafe files, or replacing a skill that was
    pushed from another folder. A skill disabled in the library stays disabled unless
    --enable.
    """
    from s3skills.transfer import PushRefused, push_tree

    store, prefix = ctx.store, ctx.prefix
    if create_bucket and not dry_run:
        ctx.run(store.acreate_bucket())
    try:
        with progress(ctx, "push") as report_progress:
            report = push_tree(
                store,
                Path(directory),
                prefix,
                category=category,
                delete=delete,
                dry_run=dry_run,
                force=force,
                enable=enable,
                bucket_may_be_missing=create_bucket,
                progress=report_progress,
            )
    except PushRefused as exc:
        refused = exc.report
        if ctx.json:
            ctx.emit({"ok": False, "error": str(exc), **refused.to_dict()})
        for item in refused.refused:
            ctx.warn(problem_line(str(Path(directory) / item.path), "error", item.reason))
        for p in refused.problems:
            if p.fatal:
                ctx.warn(problem_line(str(Path(directory) / p.path), p.level, p.message))
        for item in refused.conflicts:
            ctx.warn(f"conflict: {item.path}: {item.reason}")
        raise CliError(f"push refused: {exc} (see 's3skills validate {directory}')") from exc
    blocked = bool(report.conflicts) and not force  # only a dry run gets here with conflicts
    versions = pushed_versions(ctx, report.skills) if not dry_run and report.skills else {}
    if ctx.json:
        ctx.emit({"ok": not blocked, **report.to_dict(), "versions": versions})
        return 1 if blocked else 0
    if dry_run:
        _print_plan(ctx, report, directory)
    _warn_notes(ctx, report, directory)
    if blocked:
        ctx.warn(f"the push would be refused: {_plural(len(report.conflicts), 'conflict')} (use --force to replace)")
    verb, deleted = ("Would upload", "would delete") if dry_run else ("Uploaded", "deleted")
    ctx.print(
        f"{verb} {_plural(len(report.uploaded), 'file')} ({human_size(report.bytes_uploaded)}) of "
        f"{_plural(len(report.skills), 'skill')} to {ctx.location(prefix)}; {len(report.skipped)} unchanged, "
        f"{len(report.deleted)} {deleted}."
    )
    for skill_id, version in sorted(versions.items()):
        ctx.print(f"{skill_id}: version {version}")
    errors = sum(1 for p in report.problems if p.level == "error")
    if errors:
        ctx.warn(f"{_plural(errors, 'SKILL.md problem')}; see 's3skills validate {directory}'")
    return 1 if blocked else 0


@click.command("pull", short_help="Download the library or one skill.")
@global_options
@click.argument("directory", metavar="DIR")
@click.option("--skill", metavar="NAME", help="Only this skill (an id, or its folder name).")
@click.option("--force", is_flag=True, help="Overwrite local files that differ from the library.")
@click.option("--backup", is_flag=True, help="Move such files to NAME.s3skills-backup, then write.")
@pass_context
def pull_command(ctx: Context, directory: str, skill: str | None, force: bool, backup: bool) -> int:
    """Download the library, or one skill, below DIR (only what changed).

    A local file that differs from the library's copy is kept and reported, unless
    --force (overwrite) or --backup (move it aside first). The exit status is 1 when
    a file was kept or a remote key could not be written safely below DIR.
    """
    from s3skills.transfer import pull_tree

    skill_id = resolve_skill(ctx, skill)[0] if skill else None
    with progress(ctx, "pull") as report_progress:
        try:
            report = pull_tree(
                ctx.store,
                ctx.prefix,
                Path(directory),
                skill=skill_id,
                force=force,
                backup=backup,
                progress=report_progress,
            )
        except SkillError as exc:  # removed between resolve and pull
            raise CliError(str(exc)) from exc
    failed = bool(report.refused or report.kept)
    if ctx.json:
        ctx.emit({"ok": not failed, **report.to_dict()})
    else:
        ctx.print(
            f"Downloaded {_plural(len(report.downloaded), 'file')} ({human_size(report.bytes_downloaded)}) to "
            f"{directory}; {len(report.skipped)} unchanged, {len(report.kept)} kept, {len(report.refused)} refused."
        )
    for item in report.kept:
        ctx.warn(f"kept {Path(directory) / item.path}: it differs from the library (use --force or --backup)")
    for item in report.backups:
        ctx.warn(f"backed up {Path(directory) / item.path} as {item.reason}")
    for item in report.refused:
        ctx.warn(f"refused {item.path}: {item.reason}")
    return 1 if failed else 0
