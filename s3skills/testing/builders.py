"""Builders of test data: the one `skill_md` every test (of s3skills or of an app) can use."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_DESCRIPTION", "skill_md", "write_file"]

DEFAULT_DESCRIPTION = "Does a thing. Use it when a thing is needed."
"""A description that passes the Agent Skills rules (what and when)."""


def skill_md(name: str, description: str = DEFAULT_DESCRIPTION, *, body: str | None = None, **fields: object) -> str:
    """The text of a SKILL.md: `name`, `description`, then `fields` in order, then `body`.

    Args:
        name: The frontmatter `name`.
        description: The frontmatter `description`.
        body: The Markdown after the frontmatter (default: a heading and one line).
        **fields: More frontmatter fields, written as `key: value` (values as given,
            so `enabled="false"` writes `enabled: false`).

    Returns:
        The file's text; `.encode()` it for an object body.
    """
    lines = [f"name: {name}", f"description: {description}", *(f"{key}: {value}" for key, value in fields.items())]
    text = body if body is not None else f"\n# {name}\n\nInstructions.\n"
    return "---\n" + "\n".join(lines) + "\n---\n" + text


def write_file(root: Path, rel: str, content: str | bytes) -> Path:
    """Write `content` (text as UTF-8) at `root/rel`, creating folders; returns the path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path
