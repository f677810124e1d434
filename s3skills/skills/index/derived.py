"""Weighing decoded derived data (a library's manifest and digest book): a cache that may lie.

Whoever can write a library can write the objects under its `.s3skills/`, so their bytes
are input, not state. They are decoded by `s3skills.storage.documents.decode_document`
(caps on bytes and values, unknown fields refused before decoding) in the bounded pool of
`s3skills.storage.decoder`. What is left here: `weigh` measures a decoded value (its
estimated memory) and its depth without recursion, so each entry of a document can be
capped and each cache can count bytes.
"""

from __future__ import annotations

from s3skills.storage.documents import NODE_COST

__all__ = ["NODE_COST", "weigh"]


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
