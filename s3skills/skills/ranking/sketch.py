"""The body sketch: a bounded summary of a `SKILL.md` body that ranking can read.

A skill's body is where it says what it is for in the words users use, but reading
every body on every model call would cost a request per skill. So writers (the
library's writes, `push`, a manifest rebuild) store a sketch of each body in the
library's manifest (`SkillInfo.sketch`), and ranking reads that: no request per call.

`make_sketch` is pure and deterministic: the body's headings first (in order, without
`#`), then its distinct words, most frequent first (ties in order of appearance),
stop words, numbers and fenced code left out, never more than `MAX_SKETCH_CHARS`
characters. The words are stored as written (folded to lower case), not stemmed, so a
later stemmer reads old sketches as well as new ones.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal, get_args

__all__ = ["MAX_SKETCH_CHARS", "SKETCH_MODES", "SketchMode", "make_sketch"]

MAX_SKETCH_CHARS = 1024
"""The longest sketch a manifest entry may carry."""

SketchMode = Literal["words", "headings", "when", "first", "lead", "none"]
"""What a sketch holds: `words` (the default: headings, then the body's frequent words),
`headings` (headings only), `when` (headings, then the "When to use" section, or the first
paragraph when there is none), `first` (headings, then the first paragraph), `lead` (headings,
the first paragraph and the "When to use" section), `none` (nothing). The modes other than
`words` are the variants the findability benches compared (bench/README.md)."""

SKETCH_MODES: tuple[str, ...] = get_args(SketchMode)

_HEADINGS_SHARE = 2 / 5  # at most this share of the sketch goes to headings
_FENCE_RE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
# A heading line: up to 3 spaces, 1-6 `#`, blanks, text. Written so that no two parts can
# match the same characters: matching is linear in the text (the closing `#`s are cut in
# Python, `_heading_title`). A pattern with a lazy title before `\s*#*\s*$` took seconds
# for one line of a few thousand blanks, and a body is written by whoever pushes it.
_HEADING_RE = re.compile(r"^[^\S\n]{0,3}#{1,6}[^\S\n]+(\S.*)$", re.MULTILINE)
_WORD_RE = re.compile(r"[^\W\d_][\w'-]*[^\W_]|[^\W\d_]{2}")
_ASCII_WORD_RE = re.compile(_WORD_RE.pattern, re.ASCII)  # for ASCII text: the same matches
_SKIP = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "more",
        "most",
        "must",
        "no",
        "not",
        "of",
        "on",
        "one",
        "or",
        "our",
        "should",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "use",
        "used",
        "uses",
        "using",
        "via",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "will",
        "with",
        "without",
        "you",
        "your",
        "al",
        "con",
        "de",
        "del",
        "el",
        "en",
        "es",
        "esta",
        "este",
        "la",
        "las",
        "lo",
        "los",
        "para",
        "por",
        "que",
        "se",
        "si",
        "sin",
        "su",
        "sus",
        "un",
        "una",
        "y",
        "o",
    ]
)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _heading_title(line_rest: str) -> str:
    """A heading's text without the closing `#`s and blanks (`## Setup ##` -> `Setup`)."""
    text = line_rest.rstrip()
    return text.rstrip("#").rstrip() or text[:1]


def _plain(text: str) -> str:
    return " ".join(_CONTROL_RE.sub(" ", re.sub(r"[*_`>|\[\]()]+", " ", text)).split())


_WHEN_RE = re.compile(r"^\s{0,3}#{1,6}\s+when\b[^\n]*$", re.IGNORECASE | re.MULTILINE)
_NEXT_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s", re.MULTILINE)


def _first_paragraph(text: str) -> str:
    """The first paragraph of prose (not a heading, a list or a table), plain."""
    for block in re.split(r"\n\s*\n", _HEADING_RE.sub("\n\n", text)):
        plain = _plain(block)
        if plain and not block.lstrip().startswith(("-", "*", "|", "<", "1.")):
            return plain
    return ""


def _when_section(text: str) -> str:
    """The text of the first "When ..." section (`## When to Use This Skill`), plain."""
    found = _WHEN_RE.search(text)
    if found is None:
        return ""
    rest = text[found.end() :]
    end = _NEXT_HEADING_RE.search(rest)
    return _plain((rest[: end.start()] if end else rest).replace("\n", " "))


def _clip(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    return text[: max(room, 0)].rsplit(" ", 1)[0] if room > 0 else ""


def make_sketch(body: str, *, limit: int = MAX_SKETCH_CHARS, mode: SketchMode = "words") -> str:
    """A sketch of a `SKILL.md` body (the text after the frontmatter), at most `limit` chars.

    Args:
        body: The body, Markdown.
        limit: The most characters of the result (`MAX_SKETCH_CHARS` by default).
        mode: What the sketch holds (`SketchMode`); the writers use the default.

    Returns:
        `heading; heading | word word ...`, or "" for an empty body.
    """
    if mode == "none":
        return ""
    text = _FENCE_RE.sub(" ", body)
    headings: list[str] = []
    used = 0
    for match in _HEADING_RE.finditer(text):
        heading = _plain(_heading_title(match.group(1)))
        if heading and heading.casefold() not in (h.casefold() for h in headings):
            if used + len(heading) + 3 > limit * _HEADINGS_SHARE:
                break
            headings.append(heading)
            used += len(heading) + 3
    if mode != "words":
        out = "; ".join(headings)
        parts = {
            "headings": [],
            "first": [_first_paragraph(text)],
            "when": [_when_section(text) or _first_paragraph(text)],
            "lead": [_first_paragraph(text), _when_section(text)],
        }[mode]
        for part in filter(None, parts):
            room = limit - len(out) - (3 if out else 0)
            clipped = _clip(part, room)
            if clipped:
                out = f"{out} | {clipped}" if out else clipped
        return out[:limit]
    # The cold index sketches every body, so this is its hot loop: the words as written are
    # counted in C, then each distinct one is folded once. A Counter keeps its keys in order
    # of first appearance (of the first form folding to a word: that word's first
    # appearance), and the stable sort below keeps that order among equal counts.
    counts: Counter[str] = Counter()
    rest = _HEADING_RE.sub(" ", text)
    finder = _ASCII_WORD_RE if rest.isascii() else _WORD_RE  # the same words, found faster
    for written, n in Counter(finder.findall(rest)).items():
        word = written.casefold().strip("'-")
        if len(word) >= 3 and word not in _SKIP:
            counts[word] += n
    in_headings = {w.casefold() for h in headings for w in _WORD_RE.findall(h)}
    words = sorted((w for w in counts if w not in in_headings), key=counts.__getitem__, reverse=True)
    out = "; ".join(headings)
    room = limit - len(out) - (3 if out else 0)
    chosen: list[str] = []
    size = -1
    for word in words:
        if size + 1 + len(word) > room:
            break
        chosen.append(word)
        size += 1 + len(word)
    if not chosen:
        return out
    return f"{out} | {' '.join(chosen)}" if out else " ".join(chosen)
