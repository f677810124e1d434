"""Output a person can read: lines of at most `MAX_LINE` characters, long lists summarised.

The CLI's messages and the servers' logs go through these: `summarise` names the first
items of a list and counts the rest (`a, b, c … and 12 more`), `listing` gives a list one
line per item under a heading (the first `SUMMARY_LIMIT`, then "… and N more; X lists them
all"), `wrap` breaks a long line into lines of at most `MAX_LINE` characters at spaces,
the continuation lines indented, and `fit` does so for one message (its newlines become spaces).
Nothing is ever cut: every word of a message is printed. An id is never split unless it alone
is longer than a line (then it continues on the next line, every character kept).
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Sequence

__all__ = ["MAX_LINE", "SUMMARY_LIMIT", "WrappingFormatter", "fit", "listing", "summarise", "wrap"]

MAX_LINE = 200
"""The longest line the CLI prints or a server logs."""

SUMMARY_LIMIT = 10
"""How many items a summarised list names before "… and K more"."""


def summarise(items: Sequence[str], limit: int = SUMMARY_LIMIT, *, sep: str = ", ") -> str:
    """`items` joined by `sep`, the first `limit` only, then `… and K more` when there are more."""
    shown = sep.join(items[:limit])
    rest = len(items) - limit
    return f"{shown} … and {rest} more" if rest > 0 else shown


def fit(message: str, width: int = MAX_LINE, indent: str = "  ") -> str:
    """One message as lines of at most `width` characters: its newlines become spaces, then it
    is wrapped (`wrap`, continuations starting with `indent`); nothing is cut."""
    return "\n".join(wrap(" ".join(message.splitlines()), width, indent))


def listing(head: str, items: Sequence[str], more: str, limit: int = SUMMARY_LIMIT) -> list[str]:
    """`head`, then one indented line per item (the first `limit`), then, when there are more,
    `  … and N more; {more} lists them all`: every line at most `MAX_LINE` characters (a long
    item continues on the next lines, indented deeper than the items)."""
    lines = [fit(head)] + [fit("  " + item, indent="    ") for item in items[:limit]]
    if len(items) > limit:
        lines.append(fit(f"  … and {len(items) - limit} more; {more} lists them all"))
    return lines


def wrap(text: str, width: int = MAX_LINE, indent: str = "  ") -> list[str]:
    """The lines of `text`, each at most `width` characters (continuations start with `indent`).

    Lines break at spaces; a word longer than a line is broken across lines, every character
    kept. Only runs of spaces where a line breaks are dropped.
    """
    out: list[str] = []
    for line in text.splitlines() or [""]:
        if len(line) <= width:
            out.append(line)
            continue
        out.extend(
            textwrap.wrap(
                line,
                width=width,
                subsequent_indent=indent,
                break_long_words=True,
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            or [line[:width]]
        )
    return out


class WrappingFormatter(logging.Formatter):
    """A logging formatter whose records are lines of at most `MAX_LINE` characters."""

    def format(self, record: logging.LogRecord) -> str:
        return "\n".join(wrap(super().format(record)))
