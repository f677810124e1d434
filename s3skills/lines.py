"""Output a person can read: lines of at most `MAX_LINE` characters, long lists summarised.

The CLI's messages and the servers' logs go through these: `summarise` names the first
items of a list and counts the rest (`a, b, c … and 12 more`), `wrap` cuts a long line
into lines of at most `MAX_LINE` characters at spaces (a word longer than that is cut),
the continuation lines indented. An id is never split unless it alone is longer than a line.
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Sequence

__all__ = ["MAX_LINE", "SUMMARY_LIMIT", "WrappingFormatter", "summarise", "wrap"]

MAX_LINE = 200
"""The longest line the CLI prints or a server logs."""

SUMMARY_LIMIT = 10
"""How many items a summarised list names before "… and K more"."""


def summarise(items: Sequence[str], limit: int = SUMMARY_LIMIT, *, sep: str = ", ") -> str:
    """`items` joined by `sep`, the first `limit` only, then `… and K more` when there are more."""
    shown = sep.join(items[:limit])
    rest = len(items) - limit
    return f"{shown} … and {rest} more" if rest > 0 else shown


def wrap(text: str, width: int = MAX_LINE, indent: str = "  ") -> list[str]:
    """The lines of `text`, each at most `width` characters (continuations start with `indent`)."""
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
