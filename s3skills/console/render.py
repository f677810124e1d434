"""Turning a library's content into safe HTML: Markdown, highlighted files, side-by-side diffs.

Everything here is input from whoever can write the library. Markdown is rendered by
markdown-it-py and the result sanitized by nh3 (ammonia): no script, event handler,
`javascript:` URL, `<iframe>`, `<style>` or `<svg>` survives. Files are highlighted by
Pygments, which escapes them. Nothing is ever returned unescaped from another path; the
templates autoescape the rest.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from s3skills.media import file_kind as media_kind
from s3skills.media import type_by_name

__all__ = [
    "DiffFile",
    "DiffRow",
    "file_kind",
    "highlight_css",
    "highlight_file",
    "markdown_html",
    "served_type",
    "side_by_side",
]

MAX_HIGHLIGHT_BYTES = 512 * 1024
"""Larger text files are shown plain (Pygments' cost grows with the text)."""

_ALLOWED_TAGS = {
    *("a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em"),
    *("h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span"),
    *("strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"),
}
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "td": {"align"}, "th": {"align"}}


@functools.cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table").enable("strikethrough")


def markdown_html(text: str) -> str:
    """Markdown as sanitized HTML (safe to insert in a page as is)."""
    raw = _markdown().render(text)
    return nh3.clean(
        raw,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


_RASTER = ("image/png", "image/jpeg", "image/gif", "image/webp")


def file_kind(path: str, data: bytes | None = None) -> str:
    """How the console shows a file: `text`, `image` (a raster image) or `binary`.

    With its bytes, the project's one rule decides (`s3skills.media.file_kind`: UTF-8 is
    text whatever the name, binary by content). Without them (a listing), the name is a
    hint only: a name that says nothing is listed as text, and its page decides.
    """
    if data is not None:
        kind = media_kind(path, data)
        if kind.text:
            return "text"
        return "image" if kind.mime in _RASTER else "binary"
    named = type_by_name(path)
    if named in _RASTER:
        return "image"
    if named is None or named.startswith("text/") or named in ("application/json", "application/xml"):
        return "text"
    return "binary"


def served_type(path: str, data: bytes) -> tuple[str, bool]:
    """(Content-Type, as an attachment) for serving a file of a skill: never HTML.

    Text (HTML, SVG source and scripts included) is `text/plain`, shown in the browser; a
    raster image keeps its type (for `<img>`) but is an attachment when opened; anything
    else is an attachment (`application/octet-stream` when the type is not an image).
    """
    kind = file_kind(path, data)
    if kind == "text":
        return "text/plain; charset=utf-8", False
    if kind == "image":
        return media_kind(path, data).mime, True
    return "application/octet-stream", True


_LEXERS = {
    **dict.fromkeys(("py", "pyi"), "python"),
    **dict.fromkeys(("sh", "bash", "zsh"), "bash"),
    **dict.fromkeys(("js", "mjs", "cjs"), "javascript"),
    **dict.fromkeys(("ts", "tsx"), "typescript"),
    **dict.fromkeys(("yaml", "yml"), "yaml"),
    **dict.fromkeys(("xml", "svg", "xsd"), "xml"),
    **dict.fromkeys(("cpp", "cc", "hpp"), "cpp"),
    **dict.fromkeys(("c", "h"), "c"),
    **dict.fromkeys(("html", "htm"), "html"),
    "json": "json",
    "md": "markdown",
    "css": "css",
    "toml": "toml",
    "ini": "ini",
    "cfg": "ini",
    "rb": "ruby",
    "go": "go",
    "rs": "rust",
    "java": "java",
    "sql": "sql",
    "ps1": "powershell",
    "r": "r",
    "csv": "text",
}
"""Pygments lexers by file extension, looked up by name: Pygments' own lookup by file name
scans every installed package's entry points (seconds, the first time)."""


@functools.cache
def _formatter() -> HtmlFormatter[str]:
    return HtmlFormatter(cssclass="hl", linenos="table", wrapcode=True)


def highlight_file(path: str, text: str) -> str:
    """A text file as highlighted HTML (escaped by Pygments), plain when too large."""
    name = _LEXERS.get(path.rsplit(".", 1)[-1].lower()) if "." in path.rsplit("/", 1)[-1] else None
    lexer = TextLexer()
    if name is not None and len(text) <= MAX_HIGHLIGHT_BYTES:
        with contextlib.suppress(ClassNotFound):
            lexer = get_lexer_by_name(name, stripnl=False)
    return str(highlight(text, lexer, _formatter()))


@functools.cache
def highlight_css() -> str:
    """The stylesheet of the highlighted files (Pygments' default style)."""
    return str(_formatter().get_style_defs(".hl"))


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One row of a side-by-side diff: the old line and the new one (None: no line there).

    `kind` is `same`, `changed`, `removed`, `added` or `gap` (a skipped stretch).
    """

    kind: str
    left_no: int | None = None
    left: str | None = None
    right_no: int | None = None
    right: str | None = None


@dataclass(slots=True)
class DiffFile:
    """One file of a diff: its path, whether it is binary, its rows."""

    path: str
    binary: bool = False
    rows: list[DiffRow] = field(default_factory=list)


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def side_by_side(unified: str) -> list[DiffFile]:
    """The files of a unified diff (`s3skills diff --json`'s `diff`) as side-by-side rows.

    A run of removed lines followed by added ones is paired line by line (`changed`);
    the rest is `removed`, `added` or `same`.
    """
    files: list[DiffFile] = []
    current: DiffFile | None = None
    old_no = new_no = 0
    minus: list[tuple[int, str]] = []
    plus: list[tuple[int, str]] = []
    old_name = ""

    def flush() -> None:
        if current is None:
            return
        for i in range(max(len(minus), len(plus))):
            a = minus[i] if i < len(minus) else None
            b = plus[i] if i < len(plus) else None
            kind = "changed" if a and b else ("removed" if a else "added")
            current.rows.append(
                DiffRow(kind, a[0] if a else None, a[1] if a else None, b[0] if b else None, b[1] if b else None)
            )
        minus.clear()
        plus.clear()

    for line in unified.splitlines():
        if line.startswith("Binary file ") and line.endswith(" differs"):
            flush()
            current = DiffFile(line[len("Binary file ") : -len(" differs")], binary=True)
            files.append(current)
        elif line.startswith("--- "):
            flush()
            current, old_name = None, line[4:].split("\t")[0]
        elif line.startswith("+++ ") and current is None:
            name = line[4:].split("\t")[0]
            name = old_name if name == "/dev/null" else name
            current = DiffFile(name.split("/", 1)[1] if "/" in name else name)
            files.append(current)
        elif current is not None and (m := _HUNK.match(line)):
            flush()
            if current.rows:
                current.rows.append(DiffRow("gap"))
            old_no, new_no = int(m.group(1)), int(m.group(2))
        elif current is not None and line.startswith("-"):
            minus.append((old_no, line[1:]))
            old_no += 1
        elif current is not None and line.startswith("+"):
            plus.append((new_no, line[1:]))
            new_no += 1
        elif current is not None and line.startswith(" "):
            flush()
            current.rows.append(DiffRow("same", old_no, line[1:], new_no, line[1:]))
            old_no += 1
            new_no += 1
    flush()
    return files
