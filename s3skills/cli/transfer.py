"""The commands that move or check whole trees of skills: `push`, `pull`, `validate`.

`s3skills.transfer` (push and pull) is imported inside the commands that use it: it pulls
in the backend's file helpers, and with them deepagents, which the other commands and
`s3skills --help` must not pay for.
"""

from __future__ import annotations

from pathlib import Path

import click

from s3skills.cli.context import CliError, Context, global_options, pass_context
from s3skills.cli.shared import human_size, problem_line, progress, resolve_skill
from s3skills.cli.versions import pushed_versions
from s3skills.errors import SkillError
from s3skills.ids import SKILL_FILE
from s3skills.skills import validate_skill_md
from s3skills.skills.model import MAX_SKILL_MD_BYTES
from s3skills.transfer.localtree import Finding, check_relative_path, scan_tree

__all__ = ["pull_command", "push_command", "validate_command"]


def _validate_local(path: Path) -> tuple[list[Finding], int]:
    if path.is_file():
        problems = validate_skill_md(path.read_bytes(), folder=path.resolve().parent.name)
        return [Finding("", p.level, p.message, p.fatal) for p in problems], 1
    tree = scan_tree(path)
    if not tree.skills and not tree.refused:
        raise CliError(f"{path}: no skills found (a skill is a folder with a SKILL.md, one or two levels down)")
    return tree.findings(), len(tree.skills)


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
        ctx.print(f"{count} skill(s) checked: {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


@click.command("push", short_help="Upload a local tree of skills.")
@global_options
@click.argument("directory", metavar="DIR")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--delete", is_flag=True, help="Mirror: delete remote files that are not in DIR.")
@click.option("--force", is_flag=True, help="Push invalid skills; leave unsafe files out.")
@click.option("--create-bucket", is_flag=True, help="Create the bucket if it does not exist.")
@pass_context
def push_command(ctx: Context, directory: str, dry_run: bool, delete: bool, force: bool, create_bucket: bool) -> int:
    """Upload a local tree of skills, only what changed (SKILL.md last).

    DIR is a folder of skills, of categories of skills, or one skill folder. Invalid
    skills refuse the push unless --force.
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
                delete=delete,
                dry_run=dry_run,
                force=force,
                progress=report_progress,
            )
    except PushRefused as exc:
        refused = exc.report
        if ctx.json:
            ctx.emit({"ok": False, **refused.to_dict()})
        for item in refused.refused:
            ctx.warn(problem_line(str(Path(directory) / item.path), "error", item.reason))
        for p in refused.problems:
            if p.fatal:
                ctx.warn(problem_line(str(Path(directory) / p.path), p.level, p.message))
        raise CliError(f"push refused: {exc} (see 's3skills validate {directory}')") from exc
    versions = pushed_versions(ctx, report.skills) if not dry_run and report.skills else {}
    if ctx.json:
        ctx.emit({"ok": True, **report.to_dict(), "versions": versions})
        return 0
    for item in report.refused:
        ctx.warn(f"left out {Path(directory) / item.path}: {item.reason}")
    verb, deleted = ("Would upload", "would delete") if dry_run else ("Uploaded", "deleted")
    ctx.print(
        f"{verb} {len(report.uploaded)} file(s) ({human_size(report.bytes_uploaded)}) of "
        f"{len(report.skills)} skill(s) to {ctx.location(prefix)}; {len(report.skipped)} unchanged, "
        f"{len(report.deleted)} {deleted}."
    )
    for skill_id, version in sorted(versions.items()):
        ctx.print(f"{skill_id}: version {version}")
    errors = sum(1 for p in report.problems if p.level == "error")
    if errors:
        ctx.warn(f"{errors} SKILL.md problem(s); see 's3skills validate {directory}'")
    return 0


@click.command("pull", short_help="Download the library or one skill.")
@global_options
@click.argument("directory", metavar="DIR")
@click.option("--skill", metavar="NAME", help="Only this skill (an id, or its folder name).")
@pass_context
def pull_command(ctx: Context, directory: str, skill: str | None) -> int:
    """Download the library, or one skill, below DIR (only what changed).

    The exit status is 1 when a remote key could not be written safely below DIR.
    """
    from s3skills.transfer import pull_tree

    skill_id = resolve_skill(ctx, skill)[0] if skill else None
    with progress(ctx, "pull") as report_progress:
        try:
            report = pull_tree(ctx.store, ctx.prefix, Path(directory), skill=skill_id, progress=report_progress)
        except SkillError as exc:  # removed between resolve and pull
            raise CliError(str(exc)) from exc
    if ctx.json:
        ctx.emit({"ok": not report.refused, **report.to_dict()})
    else:
        ctx.print(
            f"Downloaded {len(report.downloaded)} file(s) ({human_size(report.bytes_downloaded)}) to "
            f"{directory}; {len(report.skipped)} unchanged, {len(report.refused)} refused."
        )
    for item in report.refused:
        ctx.warn(f"refused {item.path}: {item.reason}")
    return 1 if report.refused else 0
