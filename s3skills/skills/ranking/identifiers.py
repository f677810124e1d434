"""Identifiers as code and paths write them, found in a text in linear time.

`canonicalize_url`, `sc.pp.neighbors`, `codec.py`, `parseHeaders`, `HTTPServer`: their
parts are words already; with `s3skills.skills.ranking.matching.IDENTIFIERS` on, the whole of
a dotted or underscored one and the camelCase parts of each are words too.

Every identifier lies inside one run of letters and digits joined by single `.` or `_`,
and runs are found in linear time. The identifier pattern backtracks over a run
quadratically (one 4,000-letter query word cost 0.8 s of CPU), and a query or a skill's text
is written by anyone, so it only reads runs of at most `MAX_IDENTIFIER_CHARS` that could
hold one (an upper-case letter, a `.` or a `_`).
"""

from __future__ import annotations

import re

__all__ = ["MAX_IDENTIFIER_CHARS", "identifier_parts"]

MAX_IDENTIFIER_CHARS = 128
"""The longest run of word characters read for identifiers; a longer one gives its plain words only."""

_IDENT_RE = re.compile(r"[^\W_]+(?:[._][^\W_]+)+|[^\W\d_]*[a-z][A-Z][^\W_]*|[A-Z]{2,}[a-z][^\W_]*")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_RUN_RE = re.compile(r"[^\W_]+(?:[._][^\W_]+)*")
_MAY_BE_IDENTIFIER_RE = re.compile(r"[A-Z._]")


def identifier_parts(text: str) -> list[str]:
    """The identifiers in `text` as written: each dotted or underscored one whole, then its camelCase parts."""
    out: list[str] = []
    for run in _RUN_RE.findall(text):
        if len(run) <= MAX_IDENTIFIER_CHARS and _MAY_BE_IDENTIFIER_RE.search(run):
            for ident in _IDENT_RE.findall(run):
                if "." in ident or "_" in ident:  # a camelCase word is whole already
                    out.append(ident)
                if not ident.islower():
                    out.extend(part for part in _CAMEL_RE.findall(ident) if part)
    return out
