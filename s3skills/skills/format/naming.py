"""Which skills the MCP skills extension (SEP-2640) can serve under their names, and why not.

The extension names a skill by the last segment of its `skill://` path and requires that
segment to equal the frontmatter `name`, and that name to follow the Agent Skills naming
rules: 1-64 characters, lowercase letters, digits and hyphens, no leading, trailing or
doubled hyphen. A library pushed as it is often breaks them (`capsule_crm-automation`,
`-21risk-automation`, a folder `pdf-tools` whose `name` is `pdf`). Such a skill still works
for the agent (and through the MCP tools face) but is not listed by `skills/list`.

`unservable_reason` is the one place this rule is written; the MCP server, `s3skills mcp
--check`, `s3skills validate` and `s3skills push` all ask it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from s3skills.skills.format.model import SkillInfo

__all__ = ["MAX_NAME_LENGTH", "NAME_PATTERN", "naming_problem", "unservable_reason", "unservable_skills"]

MAX_NAME_LENGTH = 64
"""The longest name the Agent Skills specification allows."""

NAME_PATTERN = re.compile(r"(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
"""A name that follows the Agent Skills naming rules (use `fullmatch`)."""


def naming_problem(name: object) -> str | None:
    """Why `name` breaks the Agent Skills naming rules, or None when it follows them."""
    if not isinstance(name, str) or name == "":
        return "the name is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"the name is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed"
    if name != name.lower():
        return "the name has uppercase letters; use lowercase"
    if name.startswith("-") or name.endswith("-"):
        return "the name starts or ends with a hyphen"
    if "--" in name:
        return "the name has two hyphens in a row"
    if NAME_PATTERN.fullmatch(name) is None:
        bad = sorted({c for c in name if not (c.isascii() and (c.isdigit() or c.islower() or c == "-"))})
        return f"the name has characters other than a-z, 0-9 and '-': {''.join(bad)!r}"
    return None


def unservable_reason(skill_id: str, name: object) -> str | None:
    """Why the MCP skills extension cannot serve a skill under its name, or None when it can.

    Args:
        skill_id: The skill's id, its folder path below `skills/` (`escrituras/compraventa`).
        name: The frontmatter `name` of its `SKILL.md`.

    Returns:
        A sentence for a person (what is wrong and what to rename), or None.
    """
    folder = skill_id.rsplit("/", 1)[-1]
    problem = naming_problem(folder)
    if problem is not None:
        return f"its folder {folder!r} is not a valid skill name ({problem}); rename the folder and its name"
    if name != folder:
        return f"its name {name!r} differs from its folder {folder!r}; the skills extension needs them equal"
    return None


def unservable_skills(skills: Iterable[SkillInfo]) -> list[tuple[str, str]]:
    """`(skill id, reason)` of each skill `unservable_reason` refuses, in the order given."""
    found = []
    for skill in skills:
        reason = unservable_reason(skill.id, skill.metadata.name)
        if reason is not None:
            found.append((skill.id, reason))
    return found
