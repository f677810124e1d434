"""Prompt names every MCP host accepts, for skill ids that some hosts refuse.

A skill id may hold `/` (`escrituras/compraventa`), a leading `-` (`-2chat-automation`),
or `. @ + : ~`; hosts turn prompt names into slash commands (`/mcp__server__name`) and
refuse or mangle such characters. `prompt_names` gives each id a name made of ASCII
letters, digits, `_` and `-`, starting with a letter or a digit, at most `MAX_PROMPT_NAME`
characters, unique among the ids given. An id that already is such a name keeps it; the
others are folded (`/` becomes `__`, any other character `_`) and, when the fold is taken
or too long, get `-2`, `-3`, ... in id order. Names depend only on the set of ids, so
`prompts/list` and `prompts/get` agree as long as the library does not change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_PROMPT_NAME", "is_safe_prompt_name", "prompt_names"]

MAX_PROMPT_NAME = 64
"""The longest prompt name given (hosts cap command names near 64 characters)."""

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_-]")


def is_safe_prompt_name(name: str) -> bool:
    """Whether `name` is a prompt name every host accepts (see the module)."""
    return len(name) <= MAX_PROMPT_NAME and _SAFE.fullmatch(name) is not None


def _fold(skill_id: str) -> str:
    folded = _UNSAFE_CHAR.sub("_", skill_id.replace("/", "__"))
    folded = folded.lstrip("_-")
    return folded or "skill"


def prompt_names(skill_ids: Iterable[str]) -> dict[str, str]:
    """A safe, unique prompt name for each id (`{id: name}`); see the module for the rules."""
    ids = sorted(set(skill_ids))
    names: dict[str, str] = {i: i for i in ids if is_safe_prompt_name(i)}
    taken = set(names.values())
    for skill_id in ids:
        if skill_id in names:
            continue
        base = _fold(skill_id)[:MAX_PROMPT_NAME]
        name, n = base, 1
        while name in taken:
            n += 1
            suffix = f"-{n}"
            name = base[: MAX_PROMPT_NAME - len(suffix)] + suffix
        names[skill_id] = name
        taken.add(name)
    return names
