"""Tables that fit the terminal: `list`, `audit`, `history`, `approvals`.

`terminal_width` is how wide the output may be: `COLUMNS` when set, else the width of the
terminal the output (or stdin, or stderr) is on, else 80; never over `MAX_LINE`. `print_table`
gives each column a width (`fit_widths`) and lets rich lay the rows out:

- a **whole** column (ids, actors) is never cut: it gets its full width when the line has
  room, else its long values wrap within the cell (every character kept);
- a **fixed** column (times, sizes, yes/no) always gets its full width;
- a **cut** column (descriptions, details) takes the room left and is cut at the end with `…`.

Cut columns give up room first, then whole columns (widest first); fixed ones never do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from s3skills.lines import MAX_LINE

__all__ = ["Column", "fit_widths", "print_table", "terminal_width"]

Kind = Literal["whole", "fixed", "cut"]

DEFAULT_WIDTH = 80
"""The width when neither `COLUMNS` nor a terminal says one (output piped or captured)."""
_GAP = 2
"""Characters between two columns (one of padding on each side; no borders)."""
_MIN_CUT = 12
"""A cut column keeps at least this much (or its header's width) while whole columns have more."""
_MIN_WHOLE = 12
"""A whole column wraps down to this width at most (narrower terminals get longer lines)."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column of `print_table`: its header, kind (see the module) and, for a cut column, a cap."""

    header: str
    kind: Kind = "whole"
    cap: int | None = None


def terminal_width(stream: TextIO | None = None) -> int:
    """The width to lay output out in: `COLUMNS`, else the terminal's (of `stream`, stdout,
    stdin or stderr, the first that is one), else `DEFAULT_WIDTH`; at most `MAX_LINE`."""
    columns = os.environ.get("COLUMNS", "").strip()
    width = int(columns) if columns.isdigit() and int(columns) > 0 else None
    for candidate in (stream, sys.stdout, sys.stdin, sys.stderr):
        if width is not None:
            break
        try:
            width = os.get_terminal_size(candidate.fileno()).columns or None  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # not a terminal, or a stream without a file
            continue
    return min(width or DEFAULT_WIDTH, MAX_LINE)


def _shrink(widths: list[int], floors: list[int], which: list[int], excess: int) -> int:
    """Take up to `excess` characters from the columns `which`, widest first, none below its floor."""
    while excess > 0:
        room = [i for i in which if widths[i] > floors[i]]
        if not room:
            break
        widest = max(room, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return excess


def fit_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """The width of each column so that a row fits in `width` characters (see the module).

    Each column wants its widest value (or header; a cut column at most its `cap`). When
    they do not fit, cut columns shrink to `_MIN_CUT`, then whole columns (widest first) to
    `_MIN_WHOLE`, then cut columns to their header; fixed columns never shrink.
    """
    wanted = []
    for i, col in enumerate(columns):
        longest = max([len(col.header), *(len(line) for row in rows for line in row[i].splitlines() or [""])])
        wanted.append(min(longest, col.cap) if col.kind == "cut" and col.cap else longest)
    widths = list(wanted)
    excess = sum(widths) + _GAP * (len(columns) - 1) - width
    cut = [i for i, c in enumerate(columns) if c.kind == "cut"]
    whole = [i for i, c in enumerate(columns) if c.kind == "whole"]
    headers = [len(c.header) for c in columns]
    excess = _shrink(widths, [max(h, min(_MIN_CUT, w)) for h, w in zip(headers, wanted, strict=True)], cut, excess)
    excess = _shrink(widths, [max(h, min(_MIN_WHOLE, w)) for h, w in zip(headers, wanted, strict=True)], whole, excess)
    _shrink(widths, [max(1, h) for h in headers], cut, excess)
    return widths


def _printable(cell: str | Text) -> str | Text:
    """A cell with no control character: skill data is untrusted, and an escape sequence in a
    description must not reach the terminal (each one is shown as `?`)."""
    if isinstance(cell, Text):
        return cell
    return cell if cell.isprintable() else "".join(c if c.isprintable() else "?" for c in cell)


def print_table(
    console: Console, title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]]
) -> None:
    """Print `rows` under `columns`, fitted to `console.width` (`fit_widths`); values are plain
    text (never markup; control characters shown as `?`), or `Text` for a styled one (the
    caller's, trusted)."""
    rows = [[_printable(cell) for cell in row] for row in rows]
    plain = [[cell.plain if isinstance(cell, Text) else cell for cell in row] for row in rows]
    widths = fit_widths(columns, plain, console.width)
    table = Table(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold")
    for col, w in zip(columns, widths, strict=True):
        if col.kind == "cut":
            table.add_column(col.header, width=w, no_wrap=True, overflow="ellipsis")
        else:
            table.add_column(col.header, width=w, overflow="fold")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    console.print(table)
