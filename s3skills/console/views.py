"""The library page's views of the whole library, built once per version of the index.

At 10,000 skills what costs the library page CPU is not its 50 rows but the library: each
skill's category, the problems of every entry, the categories offered, the filters. A
`LibraryView` holds all of that for one version of the library, and each filtered list
(state, with problems, category) once asked for, so a view of the page does Python work
only for the rows it shows.

The version is what the library's catalog verified: the very index objects it holds and
their entries (a changed `SKILL.md`, a refresh that found a change or a rebuilt manifest
makes new ones), and the `SkillInfo` objects the index gave. Those objects are kept with the
view, so their identities cannot be reused while it is cached. Nothing a client sends takes
part in the key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from s3skills.skills import SkillInfo, SkillLibrary

__all__ = ["LIBRARY_VIEWS", "LibraryView", "LibraryViews", "category_of"]

LIBRARY_VIEWS = 4
"""Versions of the library whose views the console keeps (a version is replaced at each change)."""
MAX_FILTERS = 64
"""Filtered lists kept per view (3 states x with problems or not x the categories asked for)."""


def category_of(skill: SkillInfo) -> str | None:
    """`SkillInfo.category` without parsing the id again (it is checked): at 10,000 skills the
    parse cost 200 ms a view."""
    return skill.metadata.category or (skill.id.split("/", 1)[0] if "/" in skill.id else None)


@dataclass
class LibraryView:
    """One version of the library as the library page needs it.

    Attributes:
        skills: Every skill, disabled ones too, sorted by id (the index's order).
        problems: Skill id ("*" for the library) -> its problems, `level: reason`.
        categories: The categories of `skills`, sorted.
        category: Skill id -> its category.
        by_id: Skill id -> its `SkillInfo`.
        keep: The objects whose identities make the key (kept alive with the view).
    """

    skills: tuple[SkillInfo, ...]
    problems: dict[str, list[str]]
    categories: tuple[str, ...]
    category: dict[str, str | None]
    by_id: dict[str, SkillInfo]
    keep: tuple[object, ...] = ()
    _filtered: OrderedDict[tuple[str, bool, str], tuple[SkillInfo, ...]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def matches(self, skill: SkillInfo, state: str, with_problems: bool, category: str) -> bool:
        """Whether `skill` passes the filters (see `filtered`)."""
        if state in ("enabled", "disabled") and skill.metadata.enabled != (state == "enabled"):
            return False
        if with_problems and skill.id not in self.problems:
            return False
        return not category or self.category.get(skill.id) == category

    def filtered(self, state: str, with_problems: bool, category: str) -> tuple[SkillInfo, ...]:
        """The skills in `state` (`enabled`, `disabled`, anything else: all), with problems only
        if asked, of `category` ("" for every one); computed once per view and filter."""
        key = (state if state in ("enabled", "disabled") else "all", with_problems, category)
        with self._lock:
            hit = self._filtered.get(key)
        if hit is not None:
            return hit
        found = tuple(s for s in self.skills if self.matches(s, *key))
        with self._lock:
            self._filtered[key] = found
            while len(self._filtered) > MAX_FILTERS:
                self._filtered.popitem(last=False)
        return found


class LibraryViews:
    """The `LibraryView` of each recent version of one library (at most `size`; 0 keeps none).

    Attributes:
        builds: Views built so far (each costs work over every skill of the library).
    """

    def __init__(self, size: int = LIBRARY_VIEWS) -> None:
        self.size = size
        self.builds = 0
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], LibraryView] = OrderedDict()

    def of(self, library: SkillLibrary) -> LibraryView:
        """The view of the library as its catalog holds it now (its index read first: 1 GET
        when the manifest is fresh, none within its TTL)."""
        skills = library.index(include_disabled=True)
        indexes = [library.catalog.cached(prefix) for _, prefix in library.libraries(library.tenant())]
        entries = tuple(tuple(i.entries.values()) if i is not None else () for i in indexes)
        key = (
            tuple(map(id, skills)),
            tuple(map(id, indexes)),
            tuple(i.truncated if i is not None else 0 for i in indexes),
            tuple(tuple(map(id, e)) for e in entries),
        )
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None:
                self._kept.move_to_end(key)
                return hit
        view = self._build(library, skills, (skills, indexes, entries))
        if self.size > 0:
            with self._lock:
                self._kept[key] = view
                while len(self._kept) > self.size:
                    self._kept.popitem(last=False)
        return view

    def _build(self, library: SkillLibrary, skills: list[SkillInfo], keep: tuple[object, ...]) -> LibraryView:
        with self._lock:
            self.builds += 1
        problems: dict[str, list[str]] = {}
        for p in library.problems():
            problems.setdefault(p.skill_id, []).append(f"{p.level}: {p.reason}")
        category = {s.id: category_of(s) for s in skills}
        categories = tuple(sorted({c for c in category.values() if c}))
        return LibraryView(tuple(skills), problems, categories, category, {s.id: s for s in skills}, keep)

    def clear(self) -> None:
        """Forget every view (the next one is built again)."""
        with self._lock:
            self._kept.clear()
