"""What `s3skills push` prints: short lines, one per skill or file, summarised beyond 10.

The severity policy (`s3skills.skills.format.severity`) decides what a push stores and
leaves out; these functions say it. Each item gets one line (a long id or reason
continues on the next lines: `Context.warn` wraps at `s3skills.lines.MAX_LINE`, nothing is
cut); over `QUIET_OVER` of a kind, the
first ones and "… and N more; `s3skills validate` lists them all" (`-v`: every line).
Paths are relative to the pushed folder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from s3skills.cli.context import Context
from s3skills.ids import SKILL_FILE
from s3skills.lines import fit
from s3skills.skills.format.severity import SEVERITIES, severity_of
from s3skills.transfer.localtree import Finding
from s3skills.transfer.reports import names_line

if TYPE_CHECKING:
    from s3skills.transfer import PushReport

__all__ = [
    "QUIET_OVER",
    "by_skill",
    "names",
    "skill_lines",
    "warn_left_out",
    "warn_list",
    "warn_notes",
    "warn_problems",
]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


QUIET_OVER = 10
"""A push names each skill (and each note) up to this many; over it, a summary unless -v."""


def names(items: list[str]) -> str:
    """`a, b, +N more`: the names that fit in a short line (`names_line`)."""
    return names_line(items, 100)


def warn_list(
    ctx: Context, head: str, lines: list[str], *, verbose: bool = False, more: str = "`s3skills validate`"
) -> None:
    """`head`, then one line per item (wrapped when long), the first `QUIET_OVER` unless
    `verbose`; `more` names what lists them all."""
    if not lines:
        return
    ctx.warn(head)
    shown = lines if verbose or len(lines) <= QUIET_OVER else lines[:QUIET_OVER]
    for line in shown:
        ctx.warn(fit("  " + line, indent="    "))  # a long one continues indented under it
    if len(shown) < len(lines):
        ctx.warn(f"  … and {len(lines) - len(shown)} more; {more} lists them all")


def warn_notes(ctx: Context, report: PushReport, *, verbose: bool = False) -> None:
    """What the scan decided besides the problems: files left out, nested, collapsed and renamed
    folders, conflicts. Paths are relative to the pushed folder."""
    would = "would be" if report.dry_run else "were"
    warn_list(
        ctx,
        f"left out {_plural(len(report.refused), 'file')} that cannot be pushed safely:",
        [f"{item.path}: {item.reason}" for item in report.refused],
        verbose=verbose,
    )
    ids = {folder: sid for sid, folder in report.mapping.items()}
    renamed = [
        f"{folder} -> {ids.get(folder, '?')}"
        for item in report.renamed
        if (folder := item.path.removesuffix(SKILL_FILE).rstrip("/") or ".")
    ]
    for head, lines in (
        ("note: skill folders nested in another skill, pushed as their own skills:", [i.path for i in report.nested]),
        ("note: byte-identical copies, pushed once:", [f"{i.path}: {i.reason}" for i in report.duplicates]),
        ("note: differing folders that mapped to one id, pushed under distinct ids:", renamed),
    ):
        warn_list(ctx, head, lines, verbose=verbose, more="push -v")
    left = [c for c in report.conflicts if c.path in report.left_out]
    copies = [f"{c.path}: {c.reason}" for c in left if c.path in report.replaceable]
    clashes = [f"{c.path}: {c.reason}" for c in left if c.path not in report.replaceable]
    warn_list(
        ctx,
        f"left out {_plural(len(copies), 'skill')} whose library copy was pushed from another folder (kept):",
        copies,
        verbose=verbose,
        more="push -v",
    )
    warn_list(
        ctx,
        f"left out {_plural(len(clashes), 'skill')} whose id clashes with the library (its copy is kept):",
        clashes,
        verbose=verbose,
    )
    for item in report.blocking:
        ctx.warn(f"conflict: {item.path}: {item.reason}")
    for item in report.replaced:
        ctx.warn(f"note: {item.path} {would} replaced: {item.reason}")
    if report.disabled:
        ctx.warn(f"kept disabled (use --enable to enable): {names(report.disabled)}")
    if report.kept_nested:
        kept = "would keep" if report.dry_run else "kept"
        ctx.warn(f"{kept} the nested skill(s) {names(report.kept_nested)}: a skill is one folder; remove them by name")


def by_skill(report: PushReport, findings: list[Finding]) -> dict[str, list[str]]:
    """Skill id -> its problem messages, in order (a `SKILL.md` path maps to its skill's id)."""
    ids = {folder: sid for sid, folder in report.mapping.items()}
    out: dict[str, list[str]] = {}
    for p in findings:
        folder = p.path.removesuffix(SKILL_FILE).rstrip("/") or "."
        out.setdefault(ids.get(folder, folder), []).append(p.message)
    return dict(sorted(out.items()))


def skill_lines(problems: dict[str, list[str]]) -> list[str]:
    """`id: first reason (+N more)`, one line per skill."""
    return [f"{sid}: {ms[0]}" + (f" (+{len(ms) - 1} more)" if len(ms) > 1 else "") for sid, ms in problems.items()]


def warn_left_out(ctx: Context, report: PushReport, *, verbose: bool) -> None:
    """The skills the severity policy leaves out (no host reads them), one line each."""
    left = by_skill(report, [p for p in report.problems if not SEVERITIES[severity_of(p)].pushed])
    warn_list(
        ctx,
        f"left out {_plural(len(left), 'skill')} no host can read (fix them; a library copy is kept):",
        skill_lines(left),
        verbose=verbose,
    )


def warn_problems(ctx: Context, report: PushReport, *, verbose: bool) -> None:
    """The severity policy's words on the skills a push wrote: those stored with errors (one
    line each), the advice (counted)."""
    written = {sid for sid in report.skills if any(i.path.startswith(sid + "/") for i in report.uploaded)}
    rules = {p: SEVERITIES[severity_of(p)] for p in report.problems}
    named = {
        sid: ms
        for sid, ms in by_skill(report, [p for p, r in rules.items() if r.pushed and r.named_by_push]).items()
        if sid in written
    }
    stored = "would store" if report.dry_run else "stored"
    warn_list(
        ctx,
        f"{stored} {_plural(len(named), 'skill')} that break the Agent Skills specification "
        "(hosts load them; --strict refuses them):",
        skill_lines(named),
        verbose=verbose,
    )
    advice = {
        sid: ms
        for sid, ms in by_skill(report, [p for p, r in rules.items() if not r.named_by_push]).items()
        if sid in written
    }
    if advice:
        count = sum(len(ms) for ms in advice.values())
        skills = _plural(len(advice), "skill")
        ctx.warn(f"note: {_plural(count, 'warning')} (advice) in {skills}; `s3skills validate` lists them")
