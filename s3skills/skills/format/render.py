"""Skill indexes for a system prompt (YAML, grouped list, XML), each within a character budget.

`format_ranked` is what the prompt middleware uses: the plain format when the whole
library fits, else the best skills for the request with descriptions, more ids, and the
rest counted by category with how to find them (see its docstring). The plain formats
below degrade as follows.

Every format lists the skills in a stable order and never returns more than
`budget_chars` characters. When the full index does not fit it degrades, visibly and
always the same way, in stages:

1. descriptions are shortened to a common length (cut at a word, ending in `…`);
2. only names/ids are listed;
3. skills are dropped from the end and a last line says how many were left out and
   that the `list_skills` tool lists them all.

If not even one skill fits, the result is the single line `N skills available; call
the list_skills tool to see them.`, cut to the budget. An empty library gives `""`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from xml.sax.saxutils import escape

from s3skills.skills.format.model import SkillInfo

__all__ = ["FIND_HINT", "format_grouped", "format_ranked", "format_xml", "format_yaml", "one_line", "shorten"]

ELLIPSIS = "…"
_MIN_DESCRIPTION_CHARS = 32  # Shorter than this, a description says nothing: list names instead.
_PLAIN_YAML_RE = re.compile(r"[A-Za-z][\w./-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "true", "false", "on", "off", "null"}
_XML_QUOTES = {'"': "&quot;", "'": "&apos;"}

# An entry is a skill and its description as it will be shown; None lists the name only.
_Entry = tuple[SkillInfo, str | None]
# Builds the text from the entries and the line about omitted skills (None if there are none).
_Assemble = Callable[[list[_Entry], str | None], str]


_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _clean(text: str) -> str:
    """One line: whitespace runs become one space, control characters are dropped."""
    return " ".join(_CONTROL_RE.sub("", text).split())


def _shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, never inside a word, ending in `…`.

    A first word longer than the limit leaves only `…`.
    """
    if len(text) <= limit:
        return text
    if limit < 1:
        return ""
    cut = text[: limit - 1]
    if text[limit - 1] != " ":  # the cut falls inside a word: drop that word
        space = cut.rfind(" ")
        cut = cut[:space] if space >= 0 else ""
    return cut.rstrip(" ,;:.-") + ELLIPSIS


def shorten(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs and control characters folded), cut to at
    most `limit` characters at a word boundary with `…` when longer."""
    return _shorten(_clean(text), limit)


def one_line(text: str) -> str:
    """`text` on one line: whitespace runs become one space, control characters are dropped."""
    return _clean(text)


def _note(omitted: int, total: int) -> str:
    if omitted == total:
        noun = "skill" if total == 1 else "skills"
        return f"{total} {noun} available; call the list_skills tool to see them."
    noun = "skill was" if omitted == 1 else "skills were"
    return f"{omitted} more {noun} left out; call the list_skills tool to see them all."


def _fit(skills: Sequence[SkillInfo], budget: int, assemble: _Assemble) -> str:
    """The degradation shared by every format. `skills` is already in display order."""
    if not skills:
        return ""
    total = len(skills)
    descriptions = [_clean(skill.metadata.description) for skill in skills]

    def attempt(entries: list[_Entry], note: str | None = None) -> str | None:
        text = assemble(entries, note)
        return text if len(text) <= budget else None

    text = attempt(list(zip(skills, descriptions, strict=True)))
    if text is not None:
        return text
    # Stage 1: the longest common description length that fits (output grows with it).
    low, high, best = _MIN_DESCRIPTION_CHARS, max(map(len, descriptions)) - 1, None
    if attempt([(s, _shorten(d, low)) for s, d in zip(skills, descriptions, strict=True)]) is None:
        high = low - 1  # Not even the shortest descriptions fit.
    while low <= high:
        mid = (low + high) // 2
        shortened: list[_Entry] = [(s, _shorten(d, mid)) for s, d in zip(skills, descriptions, strict=True)]
        text = attempt(shortened)
        if text is None:
            high = mid - 1
        else:
            best, low = text, mid + 1
    if best is not None:
        return best
    # Stage 2: names only.
    names: list[_Entry] = [(skill, None) for skill in skills]
    text = attempt(names)
    if text is not None:
        return text
    # Stage 3: the most leading skills that fit with the note about the rest.
    low, high, best = 1, total - 1, None
    while low <= high:
        mid = (low + high) // 2
        text = attempt(names[:mid], _note(total - mid, total))
        if text is None:
            high = mid - 1
        else:
            best, low = text, mid + 1
    return best if best is not None else _shorten(_note(total, total), budget)


def _by_id(skills: Sequence[SkillInfo]) -> list[SkillInfo]:
    return sorted(skills, key=lambda skill: skill.id)


def _yaml_scalar(value: str) -> str:
    value = _clean(value)
    if _PLAIN_YAML_RE.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


def _json(value: str) -> str:
    """A JSON string, which is also a YAML double-quoted scalar."""
    return json.dumps(_clean(value), ensure_ascii=False)


def _assemble_yaml(entries: list[_Entry], note: str | None) -> str:
    blocks = []
    for skill, description in entries:
        lines = ["---", f"name: {_yaml_scalar(skill.metadata.name)}", f"id: {_yaml_scalar(skill.id)}"]
        if description is not None:
            lines.append(f"description: {_yaml_scalar(description)}")
            if skill.category:
                lines.append(f"category: {_yaml_scalar(skill.category)}")
            if skill.metadata.tags:
                tags = ", ".join(_json(tag) for tag in skill.metadata.tags)
                lines.append(f"tags: [{tags}]")
            if skill.metadata.version:
                lines.append(f"version: {_json(skill.metadata.version)}")
        lines.append("---")
        blocks.append("\n".join(lines))
    if note is not None:
        blocks.append(f"# {note}")
    return "\n\n".join(blocks)


def format_yaml(skills: Sequence[SkillInfo], budget_chars: int) -> str:
    """One YAML frontmatter block per skill (`name`, `id`, `description`, then `category`,
    `tags` and `version` when present), separated by blank lines, sorted by id.

    Args:
        skills: The skills to list.
        budget_chars: The most characters the result may have.

    Returns:
        The index, degraded as the module docstring describes when it does not fit.
    """
    return _fit(_by_id(skills), budget_chars, _assemble_yaml)


def _assemble_grouped(entries: list[_Entry], note: str | None) -> str:
    lines: list[str] = []
    group: object = object()  # Matches no category, so the first entry opens a group.
    for skill, description in entries:
        if skill.category != group:
            group = skill.category
            if lines:
                lines.append("")
            if group is not None or lines:
                lines.append(f"{_clean(group or 'other')}:")
        item = f"- {_clean(skill.id)}"
        lines.append(item if description is None else f"{item}: {description}")
    if note is not None:
        lines.extend(["", note])
    return "\n".join(lines)


def format_grouped(skills: Sequence[SkillInfo], budget_chars: int) -> str:
    """A list grouped by category, one `- <id>: <description>` line per skill.

    Categories are sorted by name and skills by id within them; uncategorised skills
    come last, under `other:` (with no heading when no skill has a category).

    Args:
        skills: The skills to list.
        budget_chars: The most characters the result may have.

    Returns:
        The index, degraded as the module docstring describes when it does not fit.
    """
    ordered = sorted(skills, key=lambda s: (s.category is None, s.category or "", s.id))
    return _fit(ordered, budget_chars, _assemble_grouped)


def _xml(value: str) -> str:
    return escape(_clean(value), _XML_QUOTES)


def format_xml(
    skills: Sequence[SkillInfo],
    budget_chars: int,
    *,
    location: Callable[[SkillInfo], str] | None = None,
) -> str:
    """The `<available_skills>` block: per skill its name, description and location.

    Every value is XML-escaped (`&`, `<`, `>` and both quotes); skills are sorted by id.
    A note about omitted skills follows the closing tag.

    Args:
        skills: The skills to list.
        budget_chars: The most characters the result may have.
        location: What to put in `<location>`; the skill id by default.

    Returns:
        The index, degraded as the module docstring describes when it does not fit.
    """
    return _fit(_by_id(skills), budget_chars, _xml_assembler(location))


def _xml_assembler(location: Callable[[SkillInfo], str] | None = None) -> _Assemble:
    where = location or (lambda skill: skill.id)

    def assemble(entries: list[_Entry], note: str | None) -> str:
        lines = ["<available_skills>"]
        for skill, description in entries:
            lines += ["  <skill>", f"    <name>{_xml(skill.metadata.name)}</name>"]
            if description is not None:
                lines.append(f"    <description>{_xml(description)}</description>")
            lines += [f"    <location>{_xml(where(skill))}</location>", "  </skill>"]
        lines.append("</available_skills>")
        if note is not None:
            lines.append(note)
        return "\n".join(lines)

    return assemble


FIND_HINT = 'find any skill with list_skills(query="words of the task"), or list_skills(category="...")'
"""How the ranked index tells the model to reach the skills it does not show."""
_RANKED_DESCRIPTION_CHARS = 160
_MAX_CATEGORIES_NAMED = 12
_ASSEMBLERS: dict[str, _Assemble] = {
    "xml": _xml_assembler(),
    "yaml": _assemble_yaml,
    "grouped": _assemble_grouped,
}


def _category(skill: SkillInfo) -> str:
    """`skill.category` without re-parsing the id (ids in an index are already checked)."""
    if skill.metadata.category:
        return skill.metadata.category
    return skill.id.split("/", 1)[0] if "/" in skill.id else "(no category)"


def _summary(rest: Counter[str], names: Sequence[SkillInfo]) -> str | None:
    """The lines after the described skills: more matches by id, the rest (their
    category counts) counted by category."""
    lines = []
    if names:
        lines.append("Also relevant (ids only): " + ", ".join(_clean(s.id) for s in names) + ".")
    left = sum(rest.values())
    if left:
        named = sorted(((c, n) for c, n in rest.items() if n > 0), key=lambda cn: (-cn[1], cn[0]))
        listed = ", ".join(f"{_clean(c)} ({n})" for c, n in named[:_MAX_CATEGORIES_NAMED])
        more = len(named) - _MAX_CATEGORIES_NAMED
        listed += f", and {more} more categories" if more > 0 else ""
        noun = "skill is" if left == 1 else "skills are"
        lines.append(f"{left} more {noun} not shown, by category: {listed}. To use one, {FIND_HINT}.")
    return "\n".join(lines) if lines else None


def format_ranked(
    skills: Sequence[SkillInfo],
    budget_chars: int,
    *,
    index_format: str = "xml",
    description_chars: int = _RANKED_DESCRIPTION_CHARS,
    category_counts: Mapping[str, int] | None = None,
) -> str:
    """An index of a library in relevance order: the whole library when it fits, else
    the best skills with their descriptions, more ids, and the rest summarised.

    When every skill fits with its whole description, this is exactly the plain
    format (`format_xml`, `format_yaml` or `format_grouped`, sorted by id). Otherwise
    the leading skills of `skills` (ranked for the request by the caller) are shown, in
    that order (`grouped`: by category), with their descriptions cut at a word to
    `description_chars` (the per-entry cap), as many as fit in about three quarters of
    the budget; then, under pressure, the next ones lose their descriptions and are
    named by id in the rest of the budget; only then are the others left out, counted
    by category with how to find them (`FIND_HINT`). No description is ever cut inside
    a word, and the result never exceeds `budget_chars`. The work is proportional to
    what is shown, not to the library: a 10,000-skill index costs a few milliseconds.

    Args:
        skills: The skills to index, best first.
        budget_chars: The most characters the result may have.
        index_format: `xml`, `yaml` or `grouped`.
        description_chars: The longest description shown when not all fit.
        category_counts: How many of `skills` each category holds, when the caller
            has them at hand (`s3skills.skills.ranking.rankers.category_counts`); else counted.
    """
    if index_format not in _ASSEMBLERS:
        raise ValueError(f"index_format must be one of {sorted(_ASSEMBLERS)}")
    if not skills:
        return ""
    assemble = _ASSEMBLERS[index_format]
    ordered = list(skills)
    # Each shown entry takes more than 10 characters: no need to look past budget/10.
    most = min(len(ordered), max(budget_chars // 10, 0))
    if len(ordered) <= most:  # else the whole index cannot fit
        cleaned = [_clean(s.metadata.description) for s in ordered]
        if sum(len(d) for d in cleaned) <= budget_chars:
            by_id = dict(zip((s.id for s in ordered), cleaned, strict=True))
            everything: list[_Entry] = [(s, by_id[s.id]) for s in _display(ordered, index_format)]
            whole = assemble(everything, None)
            if len(whole) <= budget_chars:
                return whole
    entries: list[_Entry] = []  # filled as far as the searches below look

    def entry(position: int) -> _Entry:
        while len(entries) <= position:
            skill = ordered[len(entries)]
            entries.append((skill, _shorten(_clean(skill.metadata.description), description_chars)))
        return entries[position]

    categories: list[str] = []
    total = Counter(category_counts) if category_counts is not None else Counter(map(_category, ordered))

    def rest(shown: int) -> Counter[str]:
        categories.extend(_category(s) for s in ordered[len(categories) : shown])
        left = total.copy()
        left.subtract(categories[:shown])
        return +left

    def text(described: int, named: int) -> str:
        chosen = [entry(k) for k in range(described)]  # best first; `grouped` regroups them by category
        if index_format == "grouped":
            chosen.sort(key=lambda e: _display_key(e[0], index_format))
        names = ordered[described : described + named]
        return assemble(chosen, _summary(rest(described + named), names))

    described = _most(lambda k: len(text(k, 0)) <= budget_chars * 3 // 4, most)
    # the ids of the next ones take the rest of the budget
    named = _most(lambda k: len(text(described, k)) <= budget_chars, min(len(ordered) - described, most))
    result = text(described, named)
    if len(result) <= budget_chars:
        return result
    return _shorten(_summary(total, []) or "", budget_chars)


def _most(fits: Callable[[int], bool], high: int) -> int:
    """The largest k in [0, high] with fits(k), assuming fits is monotone (0 if none).

    Galloping (1, 2, 4, ...) then bisecting: the cost follows the answer, not `high`.
    """
    low, step = 0, 1
    while low + step <= high and fits(low + step):
        low, step = low + step, step * 2
    top = min(high, low + step - 1)
    while low < top:
        mid = (low + top + 1) // 2
        if fits(mid):
            low = mid
        else:
            top = mid - 1
    return low


def _display_key(skill: SkillInfo, index_format: str) -> tuple[object, ...]:
    if index_format == "grouped":
        return (skill.category is None, skill.category or "", skill.id)
    return (skill.id,)


def _display(skills: Sequence[SkillInfo], index_format: str) -> list[SkillInfo]:
    return sorted(skills, key=lambda s: _display_key(s, index_format))
