"""Bounded decoding of the JSON documents kept under `.s3skills/` (one path for every kind).

Whoever can write a library can write its `.s3skills/` objects, so their bytes are input,
not state. Every kind of document (a channel, a version record, an approval, a manifest...)
is described once, as a `DocumentKind`: its `Shape` (the fields each object may have), its
largest size in bytes and its most nodes (`{ [ , :`, counted at C speed: an upper bound on
the values decoding builds). `decode_document` refuses, before building anything:

- a document over its byte or node cap (one `len` and four `bytes.count`);
- a field its shape does not name, at any level: objects are read key by key and an
  unknown key is refused before its value is looked at; the parts of a shape that hold
  no free-form value are matched by one regular expression each (at C speed, nothing
  built), so a 39 MB array of three-letter strings in an extra field costs a scan that
  stops at its key;
- a value of the wrong type where the shape says string, number, null or boolean.

Only then is each value decoded (by the C decoder of `json`). Large collections are read
item by item, so one decode holds the interpreter lock in short steps and other tenants'
requests keep their turn. `DocumentDecoder` runs decodes in a bounded pool of its own (not
one thread per core), one at a time per library (its key up to `/.s3skills/`), so a tenant's
documents queue behind their own; one decode per (kind, key, ETag) is in flight at a time,
shared by every caller, and results are kept by ETag within a byte budget.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

__all__ = [
    "ANY",
    "BOOL",
    "INT",
    "NODE_COST",
    "NULL",
    "NUM",
    "STR",
    "WALK_ITEMS",
    "Closed",
    "DocumentKind",
    "Either",
    "ListOf",
    "MapOf",
    "Shape",
    "count_nodes",
    "decode_cost",
    "decode_document",
    "load_bounded",
]

NODE_COST = 80
"""Estimated bytes one JSON container or scalar costs once decoded (object header, slot)."""

WALK_ITEMS = 256
"""Collections that may hold more items than this are read item by item (short C steps)."""


@dataclass(frozen=True)
class _Leaf:
    name: str
    pattern: str


_STRING = r'"[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+"'
STR = _Leaf("a string", _STRING)
INT = _Leaf("an integer", r"-?(?:0|[1-9][0-9]*+)(?![.eE0-9])")
NUM = _Leaf("a number", r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?")
NULL = _Leaf("null", r"null")
BOOL = _Leaf("a boolean", r"(?:true|false)")


@dataclass(frozen=True)
class _Any:
    """Any JSON value (a frontmatter): decoded whole, bounded by the document's caps."""


ANY = _Any()


@dataclass(frozen=True)
class Closed:
    """An object that may have only these fields (each optional; the reader checks presence)."""

    fields: dict[str, Shape]


@dataclass(frozen=True)
class MapOf:
    """An object of free keys (skill ids, paths), each value of one shape, at most `max_items`."""

    values: Shape
    max_items: int


@dataclass(frozen=True)
class ListOf:
    """An array of one shape, at most `max_items`."""

    items: Shape
    max_items: int


@dataclass(frozen=True)
class Either:
    """One of these shapes (e.g. `Either((STR, NULL))`)."""

    options: tuple[Shape, ...]


Shape = _Leaf | _Any | Closed | MapOf | ListOf | Either


@dataclass(frozen=True)
class DocumentKind:
    """One kind of document: its shape and caps.

    Attributes:
        name: What it is, for messages and counters (`channel`, `version record`...).
        shape: What the document may hold; anything else is refused before decoding.
        max_bytes: Largest document decoded (sized to a real one of its kind, with headroom).
        max_nodes: Most `{ [ , :` it may hold (bounds the values decoding builds).
        max_depth: Deepest nesting of the whole document (None: what its shape allows, and
            for a free-form value the interpreter's recursion limit).
        cached: Whether `DocumentDecoder` keeps its results by (key, ETag).
    """

    name: str
    shape: Shape
    max_bytes: int
    max_nodes: int
    max_depth: int | None = None
    cached: bool = True
    _plans: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)

    def max_cost(self) -> int:
        """The most memory a decode of this kind may build (the cache weighs results by it)."""
        return self.max_bytes * 8 + self.max_nodes * NODE_COST


def count_nodes(data: bytes) -> int:
    """An upper bound on the JSON values `data` decodes to (counted at C speed)."""
    return data.count(b"{") + data.count(b"[") + data.count(b",") + data.count(b":") + 1


_WIDE4 = re.compile(rb"[\xf0-\xf4]")
_WIDE2 = re.compile(rb"[\xe0-\xef]")


def decode_cost(data: bytes) -> int:
    """An upper estimate of the memory `json.loads(data)` takes, without decoding it.

    The decoded text and its string values cost up to 1, 2 or 4 bytes a character
    (Python stores a string at the width of its widest character; a `\\u` escape may
    widen a value); every `{`, `[`, `,` and `:` may start one more object.
    """
    text_width = 4 if _WIDE4.search(data) else 2 if _WIDE2.search(data) else 1
    value_width = 4 if b"\\u" in data else text_width
    return len(data) * (text_width + value_width) + NODE_COST * count_nodes(data)


# -- the plan of a shape: a regular expression where the shape allows one --------------------

_WS = r"[ \t\n\r]*+"
_WS_RE = re.compile(_WS)


def _pattern(shape: Shape) -> str | None:
    """A pattern every JSON text of `shape` matches (commas loosely: `json` checks them), or None.

    None when the shape holds a free-form value (`ANY`) or a large collection (read item by item).
    Only the names a `Closed` lists, written plainly, are accepted as its keys; a value the
    pattern does not match (a refusal, or a key written with escapes) is walked instead.
    """
    if isinstance(shape, _Leaf):
        return shape.pattern
    if isinstance(shape, _Any):
        return None
    if isinstance(shape, Either):
        parts = [_pattern(o) for o in shape.options]
        return None if any(p is None for p in parts) else "(?:" + "|".join(p for p in parts if p) + ")"
    if isinstance(shape, ListOf | MapOf) and shape.max_items > WALK_ITEMS:
        return None
    if isinstance(shape, ListOf):
        item = _pattern(shape.items)
        return None if item is None else rf"\[{_WS}(?>(?:{item}){_WS},?{_WS}){{0,{shape.max_items}}}+\]"
    if isinstance(shape, MapOf):
        value = _pattern(shape.values)
        return (
            None
            if value is None
            else rf"\{{{_WS}(?>{_STRING}{_WS}:{_WS}(?:{value}){_WS},?{_WS}){{0,{shape.max_items}}}+\}}"
        )
    pairs = []
    for name, sub in shape.fields.items():
        value = _pattern(sub)
        if value is None:
            return None
        pairs.append(rf'"{re.escape(name)}"{_WS}:{_WS}(?:{value})')
    return rf"\{{{_WS}(?>(?:{'|'.join(pairs)}){_WS},?{_WS})*+\}}" if pairs else rf"\{{{_WS}\}}"


def _plan(kind: DocumentKind, shape: Shape) -> re.Pattern[str] | None:
    key = id(shape)
    if key not in kind._plans:
        pattern = _pattern(shape)
        kind._plans[key] = None if pattern is None else re.compile(pattern)
    plan: re.Pattern[str] | None = kind._plans[key]
    return plan


# -- decoding -----------------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_scanstring = cast(Callable[[str, int, bool], tuple[str, int]], json.decoder.scanstring)  # type: ignore[attr-defined]
_Scanner = Callable[[str, int], tuple[Any, int]]


class _Reader:
    """One decode of one document: the text, its kind and the C scanner."""

    def __init__(self, text: str, kind: DocumentKind) -> None:
        self.text = text
        self.kind = kind
        self.scan = cast(_Scanner, json.scanner.make_scanner(_DECODER))  # type: ignore[arg-type]  # typeshed: the C scanner takes a decoder

    def ws(self, i: int) -> int:
        m = _WS_RE.match(self.text, i)
        assert m is not None  # the pattern matches the empty string
        return m.end()

    def value(self, i: int, shape: Shape, where: str) -> tuple[Any, int]:
        plan = _plan(self.kind, shape)
        if plan is not None:  # at C speed; a value it does not match is walked to say why
            m = plan.match(self.text, i)
            if m is not None:
                return self.decoded(i, m.end(), where)
            if isinstance(shape, _Leaf):
                raise ValueError(f"{where} is not {shape.name}")
        if isinstance(shape, _Any):
            return self.decoded(i, None, where)
        if isinstance(shape, Either):
            for option in shape.options:
                try:
                    return self.value(i, option, where)
                except ValueError:
                    continue
            raise ValueError(f"{where} is none of the values it may be")
        if isinstance(shape, ListOf):
            return self.array(i, shape, where)
        assert isinstance(shape, Closed | MapOf)
        return self.object(i, shape, where)

    def decoded(self, i: int, end: int | None, where: str) -> tuple[Any, int]:
        try:
            got, stop = self.scan(self.text, i)
        except StopIteration:
            raise ValueError(f"{where} is not JSON") from None
        except RecursionError:
            raise ValueError(f"{where} is nested too deeply") from None
        if end is not None and stop != end:
            raise ValueError(f"{where} is not JSON")
        return got, stop

    def after_item(self, i: int, close: str, where: str) -> tuple[int, bool]:
        """Past the `,` after an item (False), or past the `close` that ends its collection (True)."""
        i = self.ws(i)
        sep = self.text[i : i + 1]
        if sep == close:
            return i + 1, True
        if sep != ",":
            raise ValueError(f"{where} is not JSON")
        return self.ws(i + 1), False

    def array(self, i: int, shape: ListOf, where: str) -> tuple[list[Any], int]:
        text = self.text
        out: list[Any] = []
        if text[i : i + 1] != "[":
            raise ValueError(f"{where} is not an array")
        i = self.ws(i + 1)
        if text[i : i + 1] == "]":
            return out, i + 1
        while True:
            if len(out) >= shape.max_items:
                raise ValueError(f"{where} holds more than {shape.max_items} items")
            item, i = self.value(i, shape.items, f"{where}[{len(out)}]")
            out.append(item)
            i, ended = self.after_item(i, "]", where)
            if ended:
                return out, i

    def object(self, i: int, shape: Closed | MapOf, where: str) -> tuple[dict[str, Any], int]:
        text = self.text
        out: dict[str, Any] = {}
        if text[i : i + 1] != "{":
            raise ValueError(f"{where} is not an object")
        i = self.ws(i + 1)
        if text[i : i + 1] == "}":
            return out, i + 1
        while True:
            if text[i : i + 1] != '"':
                raise ValueError(f"{where} is not JSON")
            key, i = _scanstring(text, i + 1, True)
            if isinstance(shape, Closed):
                sub = shape.fields.get(key)
                if sub is None:  # refused before its value is even looked at
                    raise ValueError(f"{where} has a field {key[:40]!r} that a {self.kind.name} has not")
            else:
                sub = shape.values
                if len(out) >= shape.max_items:
                    raise ValueError(f"{where} holds more than {shape.max_items} entries")
            if key in out:
                raise ValueError(f"{where} names {key[:40]!r} twice")
            i = self.ws(i)
            if text[i : i + 1] != ":":
                raise ValueError(f"{where} is not JSON")
            out[key], i = self.value(self.ws(i + 1), sub, f"{where}.{key[:40]}")
            i, ended = self.after_item(i, "}", where)
            if ended:
                return out, i


def decode_document(data: bytes, kind: DocumentKind) -> Any:
    """The document in `data`, checked against its kind before anything is decoded.

    CPU work on untrusted bytes: `DocumentDecoder` runs it in its bounded pool.

    Raises:
        ValueError: Over a cap, not UTF-8 JSON, or holding anything its shape does not
            allow; the message says what (never the bulk of the document).
    """
    if len(data) > kind.max_bytes:
        raise ValueError(f"the {kind.name} is {len(data)} bytes; the limit is {kind.max_bytes}")
    nodes = count_nodes(data)
    if nodes > kind.max_nodes:
        raise ValueError(f"the {kind.name} holds up to {nodes} values; the limit is {kind.max_nodes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"the {kind.name} is not UTF-8") from None
    reader = _Reader(text, kind)
    try:
        doc, end = reader.value(reader.ws(0), kind.shape, "the document")
    except (json.JSONDecodeError, MemoryError) as exc:
        raise ValueError(f"the {kind.name} is not JSON ({type(exc).__name__})") from None
    if reader.ws(end) != len(text):
        raise ValueError(f"the {kind.name} has more after its end")
    if kind.max_depth is not None and _depth_over(doc, kind.max_depth):
        raise ValueError(f"the {kind.name} is nested deeper than {kind.max_depth} levels")
    return doc


def _depth_over(doc: Any, limit: int) -> bool:
    """Whether containers nest deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def load_bounded(data: bytes, max_bytes: int, max_depth: int = 6) -> Any:
    """Any JSON document of at most `max_bytes` and `max_depth` levels, else None (never raises).

    For documents without a `DocumentKind` of their own (a lockfile): the same decoder
    (`decode_document`), with at most one value per 4 bytes.
    """
    kind = _ANY_KINDS.get((max_bytes, max_depth))
    if kind is None:
        kind = _ANY_KINDS[(max_bytes, max_depth)] = DocumentKind(
            "document", ANY, max_bytes=max_bytes, max_nodes=max_bytes // 4 + 1, max_depth=max_depth
        )
    try:
        return decode_document(data, kind)
    except ValueError:
        return None


_ANY_KINDS: dict[tuple[int, int], DocumentKind] = {}
