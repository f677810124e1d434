"""A cache of values computed from one list of `SkillInfo` objects, recognised by identity.

The catalog hands out the very same `SkillInfo` objects while a library is unchanged, so
what is derived from a library (its BM25 index, its skills sorted by id, its category
counts, its embedding matrix) can be found again by the identities of the list's objects:
a fraction of a millisecond at 10,000 skills, where comparing contents would cost more
than the value saves. The list is kept with its value so its objects stay alive and their
identities cannot be reused by other objects meanwhile.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from s3skills.skills.format.model import SkillInfo

__all__ = ["IdentityCache"]

T = TypeVar("T")


class IdentityCache(Generic[T]):
    """The last `size` values computed from lists of skills, thread-safe.

    Args:
        size: How many lists (library versions) are remembered.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: OrderedDict[tuple[int, ...], tuple[tuple[SkillInfo, ...], T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, skills: Sequence[SkillInfo]) -> T | None:
        """The value remembered for this very list of objects, or None."""
        identity = tuple(map(id, skills))
        with self._lock:
            hit = self._items.get(identity)
            if hit is None:
                return None
            self._items.move_to_end(identity)
            return hit[1]

    def put(self, skills: Sequence[SkillInfo], value: T) -> T:
        """Remember `value` for `skills` (the least recently used list goes first); returns it."""
        kept = tuple(skills)
        with self._lock:
            self._items[tuple(map(id, kept))] = (kept, value)
            self._items.move_to_end(tuple(map(id, kept)))
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def get_or_build(self, skills: Sequence[SkillInfo], build: Callable[[], T]) -> T:
        """The remembered value, or `build()` remembered (built outside the lock)."""
        found = self.get(skills)
        return found if found is not None else self.put(skills, build())
