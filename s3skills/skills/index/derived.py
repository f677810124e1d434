"""Decoding derived data (a library's manifest and digest book): a cache that may lie.

Whoever can write a library can write the objects under its `.s3skills/`, so their bytes
are input, not state: they may be damaged, inflated or built to cost memory. Decoding
them here is bounded before any work is done:

- `decode_cost` estimates, at C speed (byte counts and two regex searches), the memory
  `json.loads` would take for the text and the values it builds. A document over the
  budget is not decoded at all (the caller rebuilds it from the `SKILL.md` files).
- `load_json` decodes within a byte and cost budget; a document nested past the
  interpreter's recursion limit (`RecursionError`) and every other decode error give None.
- `weigh` measures a decoded value (its estimated memory) and its depth without
  recursion, so each entry of a document can be capped and each cache can count bytes.

These functions run in a worker thread (`asyncio.to_thread`), never on the event loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["NODE_COST", "decode_cost", "load_json", "weigh"]

NODE_COST = 80
"""Estimated bytes one JSON container or scalar costs once decoded (object header, slot)."""

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
    nodes = data.count(b"{") + data.count(b"[") + data.count(b",") + data.count(b":") + 1
    return len(data) * (text_width + value_width) + NODE_COST * nodes


def load_json(data: bytes, *, max_bytes: int, max_cost: int) -> Any:
    """`json.loads(data)`, or None when it is over a budget or does not decode (never raises).

    Args:
        data: The object's bytes.
        max_bytes: Largest document decoded.
        max_cost: Largest `decode_cost` decoded.
    """
    if len(data) > max_bytes or decode_cost(data) > max_cost:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None


def weigh(value: object, *, max_depth: int, limit: int) -> int | None:
    """The estimated memory of a decoded JSON value, or None when it is deeper or heavier.

    Args:
        value: What `json.loads` returned (dicts, lists, strings, numbers, None).
        max_depth: Containers nested deeper than this make it refused.
        limit: Estimates over this make it refused (the walk stops there).
    """
    total = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        total += NODE_COST
        if isinstance(item, str):
            total += len(item) * (4 if item and not item.isascii() else 1)
        elif isinstance(item, dict | list):
            if depth > max_depth or total + NODE_COST * len(item) > limit:
                return None
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        if total > limit:
            return None
    return total
