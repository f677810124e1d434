"""The commands that move or check whole trees of skills: `push`, `pull`, `validate`.

`s3skills.transfer` (push and pull) is imported inside the commands that use it: it pulls
in the backend's file helpers, and with them deepagents, which the other commands and
`s3skills --help` must not pay for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from s3skills.cli.context import CliError, Context, UsageError, global_options, pass_context
from s3skills.cli.push_output import (
    QUIET_OVER,
    by_skill,
    names,
    skill_lines,
    warn_left_out,
    warn_list,
    warn_notes,
    warn_problems,
)
from s3skills.cli.shared import human_size, is_placeholder, problem_line, progress, resolve_skill
from s3skills.cli.versions import pushed_versions
from s3skills.errors import SkillError
from s3skills.ids import SKILL_FILE
from s3skills.skills import InvalidSkill, parse_skill_md, validate_skill_md
from s3skills.skills.format.model import MAX_SKILL_MD_BYTES
from s3skills.skills.format.naming import unservable_reason
from s3skills.skills.format.severity import SEVERITIES, Tally, severity_of
from s3skills.transfer.localtree import Finding, check_relative_path, read_local, scan_tree

if TYPE_CHECKING:
    from s3skills.transfer import PushReport

__all__ = ["pull_command", "push_command", "validate_command"]


def _validate_local(path: Path) -> tuple[list[tuple[str, Finding]], int, dict[str, bytes]]:
    """`(skill, finding)` pairs of a local SKILL.md or tree, how many skills were checked, and
    each skill's `SKILL.md` bytes (as the scan read them) by id."""
    if path.is_file():
        data = path.read_bytes()
        leaf = path.resolve().parent.name
        problems = validate_skill_md(data, folder=leaf)
        found = [Finding("", p.level, p.message, p.fatal) for p in problems]
        return [(leaf, f) for f in found + _placeholder_findings("", data, leaf)], 1, {leaf: data}
    tree = scan_tree(path)
    if not tree.skills and not tree.refused:
        raise CliError(f"{path}: no skills found (a skill is a folder with a SKILL.md, at any depth)")
    findings = tree.findings()
    for skill_id, folder in tree.mapping.items():
        rel = f"{folder}/{SKILL_FILE}" if folder else SKILL_FILE
        findings += _placeholder_findings(rel, tree.skill_md[skill_id], skill_id)  # the bytes the scan read
    folders = sorted(tree.mapping.items(), key=lambda kv: -len(kv[1]))

    def owner(rel: str) -> str:
        for skill_id, folder in folders:
            if folder == "" or rel == folder or rel.startswith(folder + "/"):
                return skill_id
        return rel.removesuffix("/" + SKILL_FILE).rstrip("/") or "."

    skill_mds = {sid: tree.skill_md[sid] for sid in tree.mapping}
    return [(owner(f.path), f) for f in sorted(findings, key=lambda f: f.path)], len(tree.skills), skill_mds


def _pushed_skill_mds(root: Path, mapping: dict[str, str]) -> dict[str, bytes]:
    """The `SKILL.md` bytes of the skills a push mapped (`mapping`: id -> folder below `root`).

    Read again after the push only to name the skills MCP will not list: unreadable ones
    are left out (the push reported them already).
    """
    found = {}
    for skill_id, folder in mapping.items():
        path = root / folder / SKILL_FILE if folder not in ("", ".") else root / SKILL_FILE
        try:  # the scan's read: no symlink followed, a regular file, bounded
            found[skill_id] = read_local(path, MAX_SKILL_MD_BYTES)
        except SkillError:
            continue
    return found


def _mcp_unservable(skill_mds: dict[str, bytes]) -> list[tuple[str, str]]:
    """`(skill id, reason)` of each skill that `s3skills mcp` will not list (`naming.unservable_reason`).

    A `SKILL.md` that does not parse is left out: it is already reported as fatal.
    """
    found = []
    for skill_id, data in sorted(skill_mds.items()):
        try:
            name = parse_skill_md(data, folder=skill_id.rsplit("/", 1)[-1]).metadata.name
        except InvalidSkill:
            continue
        reason = unservable_reason(skill_id, name)
        if reason is not None:
            found.append((skill_id, reason))
    return found


def _say_unservable(ctx: Context, unservable: list[tuple[str, str]], *, verbose: bool = True) -> None:
    """Tell which skills MCP's `skills/list` leaves out (they still work for agents and MCP tools)."""
    if not unservable:
        return
    warn_list(
        ctx,
        f"s3skills mcp will not list {_plural(len(unservable), 'skill')} in skills/list "
        "(agents and the MCP tools still use them):",
        [f"{skill_id}: {reason}" for skill_id, reason in unservable],
        verbose=verbose,
    )


def _placeholder_findings(rel: str, data: bytes, skill_id: str) -> list[Finding]:
    """A warning when the description is still a template placeholder (`TODO: ...`)."""
    try:
        description = parse_skill_md(data, folder=skill_id.rsplit("/", 1)[-1]).metadata.description
    except InvalidSkill:
        return []
    if not is_placeholder(description):
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
    lines: list[tuple[str, str, Finding]]  # (shown path, skill, finding)
    unservable: list[tuple[str, str]] = []
    if path.exists():
        findings, count, skill_mds = _validate_local(path)
        lines = [(str(path / f.path) if f.path else str(path), skill, f) for skill, f in findings]
        unservable = _mcp_unservable(skill_mds)
    elif ctx.has_library:
        skill_id, objects = resolve_skill(ctx, target)
        folder = ctx.prefix + skill_id + "/"
        body = ctx.run(ctx.store.aget(folder + SKILL_FILE, max_bytes=MAX_SKILL_MD_BYTES))
        shown = ctx.location(folder + SKILL_FILE)
        problems = validate_skill_md(body.data, folder=skill_id.rsplit("/", 1)[-1])
        lines = [(shown, skill_id, Finding(SKILL_FILE, p.level, p.message, p.fatal)) for p in problems]
        unservable = _mcp_unservable({skill_id: body.data})
        lines += [(shown, skill_id, f) for f in _placeholder_findings(SKILL_FILE, body.data, skill_id)]
        for obj in objects:
            why = check_relative_path(obj.key[len(ctx.prefix) :])
            if why is not None:
                lines.append((ctx.location(obj.key), skill_id, Finding(obj.key, "error", why, True)))
        count = 1
    else:
        raise CliError(f"'{target}' is not a local path, and without --bucket/--user it cannot be a skill id")
    tally = Tally.of((skill, severity_of(f)) for _, skill, f in lines)
    if ctx.json:
        ctx.emit(
            {
                "ok": not tally.failing_validate,
                "skills": count,
                "counts": tally.to_dict(),
                "problems": [
                    {
                        "path": shown,
                        "skill": skill,
                        "severity": str(severity_of(f)),
                        "level": f.level,
                        "message": f.message,
                        "fatal": f.fatal,
                    }
                    for shown, skill, f in lines
                ],
                "mcp_unlisted": [{"skill": sid, "reason": why} for sid, why in unservable],
            }
        )
    else:
        for shown, _, f in lines:
            ctx.print(problem_line(shown, str(severity_of(f)), f.message))
        ctx.print(f"{_plural(count, 'skill')} checked: {tally.summary(zeros=True)}")
        if tally.refused_by_strict:
            ctx.print(
                "push stores skills with errors (hosts load them) and leaves out fatal ones; push --strict refuses both"
            )
        _say_unservable(ctx, unservable)
    return 1 if tally.failing_validate else 0


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


def _say_switched(ctx: Context, report: PushReport, state: str) -> None:
    """What `push --enable/--disable` changed (the flag wins over the SKILL.md frontmatter)."""
    flag = "--enable" if state == "enabled" else "--disable"
    if report.switched:
        would = "would be" if report.dry_run else ""
        ctx.print(
            f"{_plural(len(report.switched), 'skill')} {would or 'now'} {state} ({flag} wins over the SKILL.md "
            f"frontmatter): {names(report.switched)}"
        )
    else:
        ctx.print(f"Every pushed skill was already {state} ({flag}).")


def _repository_category(directory: Path) -> str:
    """The category `--category-from-repo` names (`s3skills.transfer.repository.repository_name`)."""
    from s3skills.transfer.repository import repository_name

    if not directory.is_dir():
        raise CliError(f"{directory}: not a folder")
    return repository_name(directory)


@click.command("push", short_help="Upload a local tree of skills.")
@global_options
@click.argument("directory", metavar="DIR")
@click.option("--dry-run", is_flag=True, help="Show the skills, files and conflicts; write nothing.")
@click.option("--delete", is_flag=True, help="Mirror: delete remote files that are not in DIR.")
@click.option("--strict", is_flag=True, help="Refuse the push on any error, unsafe file or clashing id (for CI).")
@click.option("--force", "gone_force", is_flag=True, hidden=True)
@click.option("--replace", is_flag=True, help="Replace library skills that were pushed from another folder.")
@click.option("--category", metavar="C", help="Put every skill in category C (instead of the rule's choice).")
@click.option(
    "--category-from-repo",
    "from_repo",
    is_flag=True,
    help="Put every skill in a category named for the repository (its git origin, else its folder).",
)
@click.option(
    "--enable", is_flag=True, help="Store every pushed skill enabled, whatever its SKILL.md or the library says."
)
@click.option("--disable", is_flag=True, help="Store every pushed skill disabled (enabled: false).")
@click.option("--create-bucket", is_flag=True, help="Create the bucket if it does not exist.")
@click.option("-v", "--verbose", is_flag=True, help="One line per changed skill and per note, however many.")
@pass_context
def push_command(
    ctx: Context,
    directory: str,
    dry_run: bool,
    delete: bool,
    strict: bool,
    gone_force: bool,
    replace: bool,
    category: str | None,
    from_repo: bool,
    enable: bool,
    disable: bool,
    create_bucket: bool,
    verbose: bool,
) -> int:
    """Upload a local tree of skills, only what changed (SKILL.md last).

    Every SKILL.md below DIR, at any depth, is a skill. Its id is its folder name,
    in the category of the nearest folder above it that is neither a generic container
    (skills, plugins, packages, src, .claude...) nor a skill: plugins/x/skills/y -> x/y,
    skills/.curated/y -> .curated/y, pdf -> pdf. --category C puts them all in C;
    --category-from-repo in a category named for the repository (getsentry-skills/y),
    so that several repositories share one library without clashing.
    Folders with one id: byte-identical copies are pushed once, differing ones get the
    shortest distinguishing id (cli-examples/y, code-examples/y); both are reported.
    --dry-run shows each id and file. Over 10 changed skills, the output is a summary
    (-v: one line each); a push that changes nothing prints one line.

    What Claude Code and other hosts load is stored, even when it breaks the Agent Skills
    specification (a name that is not its folder's, a long description): one warning line
    per skill. Left out, each named, the library's copy kept: a SKILL.md no host can read,
    unsafe files, an id clashing with the library's folders, and a skill whose library
    copy was pushed from another folder (another repository): its line names both
    sources; keep both with --category-from-repo, or take it over with --replace (a
    folder made by `s3skills pull` replaces the copy it was pulled from without it).
    --strict refuses the whole push instead (exit 1), for a curated library's CI;
    `s3skills validate` lists every problem. The exit status is 1 only when every skill
    of DIR was left out. A skill disabled in the library stays disabled unless --enable. --enable and --disable win
    over the SKILL.md frontmatter (a pulled skill says `enabled: false`); the output names
    the skills whose state they change.
    """
    if enable and disable:
        raise UsageError("give --enable or --disable, not both")
    from s3skills.transfer import PushRefused, push_tree

    if gone_force:
        raise UsageError(
            "push has no --force: it stores what hosts load and leaves out, naming each, what it cannot; "
            "--strict refuses instead (s3skills push --help)"
        )
    if category is not None and from_repo:
        raise UsageError("give --category C or --category-from-repo, not both")
    repository = _repository_category(Path(directory)) if from_repo else None
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
                repository=repository,
                delete=delete,
                dry_run=dry_run,
                strict=strict,
                replace=replace,
                enable=enable,
                disable=disable,
                bucket_may_be_missing=create_bucket,
                progress=report_progress,
                layout=ctx.layout,
                actor=ctx.settings.actor,
            )
    except PushRefused as exc:
        refused = exc.report
        if ctx.json:
            ctx.emit({"ok": False, "error": str(exc), **refused.to_dict()})
        strict_ones = [p for p in refused.problems if SEVERITIES[severity_of(p)].strict_refuses]
        warn_list(ctx, "skills with errors:", skill_lines(by_skill(refused, strict_ones)))
        warn_list(ctx, "unsafe or ambiguous files:", [f"{i.path}: {i.reason}" for i in refused.refused])
        warn_list(ctx, "conflicts:", [f"{i.path}: {i.reason}" for i in refused.conflicts])
        raise CliError(f"push refused: {exc}") from exc
    blocked = bool(report.blocking)  # only a dry run gets here with blocking conflicts
    versions = pushed_versions(ctx, report.skills) if not dry_run and report.skills else {}
    pushed = {sid: folder for sid, folder in report.mapping.items() if sid in report.skills}
    unservable = _mcp_unservable(_pushed_skill_mds(Path(directory), pushed))
    if ctx.json:
        failed = blocked or bool(report.left_out and not report.skills)  # nothing of DIR could be pushed
        mcp_unlisted = [{"skill": sid, "reason": why} for sid, why in unservable]
        ctx.emit({"ok": not failed, **report.to_dict(), "versions": versions, "mcp_unlisted": mcp_unlisted})
        return 1 if failed else 0
    if dry_run:
        _print_plan(ctx, report, directory)
    if repository is not None:
        ctx.warn(f"note: the skills of {directory} go in the category {repository!r} (--category-from-repo)")
    warn_notes(ctx, report, verbose=verbose)
    warn_left_out(ctx, report, verbose=verbose)
    if blocked:
        ctx.warn(f"the push would be refused: {report.blocking_summary()}")
    if report.left_out and not report.skills:
        ctx.warn(f"nothing pushed: every skill of {directory} was left out")
        return 1
    changed = sorted(
        sid for sid in report.skills if any(i.path.startswith(sid + "/") for i in (*report.uploaded, *report.deleted))
    )
    if enable or disable:
        _say_switched(ctx, report, "enabled" if enable else "disabled")
    if not dry_run and not report.uploaded and not report.deleted:
        are = "is" if len(report.skills) == 1 else "are"
        ctx.print(
            f"Nothing to push: {_plural(len(report.skills), 'skill')} in {ctx.location(prefix)} {are} up to date."
        )
        return 1 if blocked else 0
    verb, deleted = ("Would upload", "would delete") if dry_run else ("Uploaded", "deleted")
    ctx.print(
        f"{verb} {_plural(len(report.uploaded), 'file')} ({human_size(report.bytes_uploaded)}) of "
        f"{_plural(len(changed), 'skill')} to {ctx.location(prefix)}; {len(report.skipped)} file(s) unchanged, "
        f"{len(report.deleted)} {deleted}."
    )
    if verbose or len(changed) <= QUIET_OVER:
        for skill_id in changed:
            if skill_id in versions:
                ctx.print(f"{skill_id}: version {versions[skill_id]}")
    else:
        ctx.print(f"Changed: {names(changed)} (-v lists each skill with its version)")
    warn_problems(ctx, report, verbose=verbose)
    _say_unservable(ctx, unservable, verbose=verbose)
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
