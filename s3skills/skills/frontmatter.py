"""A `SKILL.md`'s frontmatter as written, as a JSON object (what the MCP skills extension lists).

Unlike `s3skills.skills.parse`, which validates a skill's metadata into `SkillMetadata`,
this keeps every field with the types a YAML parser reads, so a host that parses the file
itself finds the same values. The digest book keeps it beside each `SKILL.md`'s digest.
"""

from __future__ import annotations

import base64
import re
from datetime import date, datetime
from typing import Any

import yaml

__all__ = ["frontmatter_json"]

_OPEN_RE = re.compile(r"\A(?:\ufeff)?(?:[ \t]*\r?\n)*---[ \t]*\r?\n")
_CLOSE_RE = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (nothing can expand)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not allowed in a skill's frontmatter")
        return super().compose_node(parent, index)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and value != value:  # NaN has no JSON form
        return None
    return value


def frontmatter_json(data: bytes) -> dict[str, Any]:
    """The YAML frontmatter of a `SKILL.md`, as written, as a JSON object.

    YAML types are kept as a YAML parser reads them (`version: 1.0` is the number 1.0),
    so a host that parses the file itself finds the same values; dates become ISO text.

    Raises:
        ValueError: No frontmatter, YAML that does not parse or is not a mapping, or no
            text `name` and `description`.
    """
    text = data.decode("utf-8")
    opening = _OPEN_RE.match(text)
    if opening is None:
        raise ValueError("SKILL.md has no frontmatter")
    closing = _CLOSE_RE.search(text, opening.end())
    if closing is None:
        raise ValueError("SKILL.md's frontmatter is not closed")
    try:
        loaded = yaml.load(text[opening.end() : closing.start()], Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValueError(f"SKILL.md's frontmatter is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ValueError("SKILL.md's frontmatter is not a mapping")
    out: dict[str, Any] = _jsonable(loaded)
    for field in ("name", "description"):
        if not isinstance(out.get(field), str) or not out[field].strip():
            raise ValueError(f"SKILL.md's frontmatter has no text '{field}'")
    return out
