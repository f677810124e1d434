"""Helpers the command modules share: finding a skill by name, sizes, problem lines, progress."""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Column

from s3skills.cli.context import CliError, Context
from s3skills.cli.tables import terminal_width
from s3skills.errors import InvalidPath, S3SkillsError, SkillError
from s3skills.ids import SKILL_FILE, SkillId

if TYPE_CHECKING:
    from s3skills.storage import ObjectInfo

__all__ = [
    "ProgressFn",
    "edit_hint",
    "human_size",
    "is_placeholder",
    "problem_line",
    "progress",
    "resolve_skill",
]

ProgressFn = Callable[[str, int, int], None]
"""Called with (path, done, total) as files are transferred (`s3skills.transfer.Progress`)."""


def human_size(size: int) -> str:
    """`1.5 KiB` style sizes."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


_PLACEHOLDER_RE = re.compile(r"^\s*TODO\b|\bTODO:", re.IGNORECASE)


def is_placeholder(description: str) -> bool:
    """Whether a description is still the template's placeholder (`TODO: ...`)."""
    return _PLACEHOLDER_RE.search(description) is not None


def edit_hint(skill_id: str) -> str:
    """How to edit a skill of the bucket: pull it, edit the SKILL.md, push it back."""
    return (
        f"to edit it: s3skills pull ./edit --skill {skill_id} (with the same --bucket/--user options), "
        f"edit ./edit/{skill_id}/SKILL.md, then s3skills push ./edit"
    )


def problem_line(path: str, level: str, message: str) -> str:
    """`path: level: message`, the format of every reported problem."""
    return f"{path}: {level}: {message}"


def _skill_ids(objects: list[ObjectInfo], prefix: str) -> list[str]:
    ids = set()
    for obj in objects:
        parts = obj.key[len(prefix) :].split("/")
        if parts[-1] == SKILL_FILE and 2 <= len(parts) <= 3:
            ids.add("/".join(parts[:-1]))
    return sorted(ids)


_SUGGESTED = re.compile(r"Did you mean: (.+?)\?")


def _unknown(ctx: Context, name: str, ids: list[str]) -> CliError:
    """The error for a skill no id or folder name matches, with the closest ids.

    The closest ids are those the agent's and MCP's `load_skill` suggest (the library's
    lookup, which weighs spelling and related words: `xero` -> `xero-automation`), then
    spelling-close ids of disabled skills too.
    """
    close: list[str] = []
    with contextlib.suppress(S3SkillsError, ValueError):
        try:
            ctx.library.get(name)
        except SkillError as exc:
            found = _SUGGESTED.search(str(exc))
            close += [s.strip() for s in found.group(1).split(",")] if found else []
    leaves = {sid.rsplit("/", 1)[-1]: sid for sid in ids}
    close += difflib.get_close_matches(name, ids, n=3, cutoff=0.6)
    close += [leaves[leaf] for leaf in difflib.get_close_matches(name, list(leaves), n=3, cutoff=0.6)]
    suggestions = [s for s in dict.fromkeys(close) if s in ids][:3]
    hint = f" (did you mean: {', '.join(suggestions)}?)" if suggestions else ""
    return CliError(f"unknown skill '{name}'{hint}")


def resolve_skill(ctx: Context, name: str, prefix: str | None = None) -> tuple[str, list[ObjectInfo]]:
    """A skill id (exact, or the unique skill with that folder name) and its objects.

    Args:
        ctx: The run.
        name: A skill id or folder name.
        prefix: The library to look in (default: the one the command acts on, `ctx.prefix`).

    Raises:
        CliError: No such skill (with the closest ids), or the folder name is ambiguous.
    """
    try:
        wanted = str(SkillId.parse(name))
    except InvalidPath as exc:
        raise CliError(str(exc)) from exc
    prefix = ctx.prefix if prefix is None else prefix
    objects, _ = ctx.run(ctx.store.alist(prefix + wanted + "/"))
    if any(o.key == f"{prefix}{wanted}/{SKILL_FILE}" for o in objects):
        return wanted, objects
    everything, _ = ctx.run(ctx.store.alist(prefix))
    ids = _skill_ids(everything, prefix)
    matches = [sid for sid in ids if sid.rsplit("/", 1)[-1] == wanted]
    if len(matches) > 1:
        raise CliError(f"'{name}' is ambiguous: {', '.join(matches)}; give the full id")
    if not matches:
        raise _unknown(ctx, name, ids)
    folder = prefix + matches[0] + "/"
    return matches[0], [o for o in everything if o.key.startswith(folder)]


@contextmanager
def progress(ctx: Context, label: str) -> Iterator[ProgressFn | None]:
    """A progress bar on stderr when stderr is a terminal (never with --json, never when piped):
    it is drawn over itself and erased at the end, so stdout (the report) is never mixed with it."""
    try:  # the stream itself, not rich's guess: FORCE_COLOR in a CI log must not draw a bar there
        tty = ctx.stderr.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    if ctx.json or not tty:
        yield None
        return
    console = Console(file=ctx.stderr, width=terminal_width(ctx.stderr), force_terminal=True, highlight=False)
    columns = (
        SpinnerColumn(),
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        # A path is data, not markup; a long one is cut at the end, so the bar keeps to one line.
        TextColumn("{task.fields[path]}", markup=False, table_column=Column(no_wrap=True, overflow="ellipsis")),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        # Until the first file, say what is going on (scanning, comparing) instead of a bare 0/?.
        task = bar.add_task(label, total=None, path="scanning and comparing...")

        def update(path: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, path=path)

        yield update
