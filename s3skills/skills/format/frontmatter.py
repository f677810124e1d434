"""A `SKILL.md`'s frontmatter as written, as a JSON object (what the MCP skills extension lists).

Unlike `s3skills.skills.format.parse`, which validates a skill's metadata into `SkillMetadata`,
this keeps every field with the types a YAML parser reads, so a host that parses the file
itself finds the same values. The digest book keeps it beside each `SKILL.md`'s digest.
"""

from __future__ import annotations

import base64
import re
from datetime import date, datetime
from typing import Any

import yaml

from s3skills.skills.format.parse import over_budget
from s3skills.skills.format.yaml12 import Yaml12SafeLoader, mend_surrogates

__all__ = ["frontmatter_json"]

_OPEN_RE = re.compile(r"\A(?:\ufeff)?(?:[ \t]*\r?\n)*---[ \t]*\r?\n")
_CLOSE_RE = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)


class _NoAliasLoader(Yaml12SafeLoader):
    """A safe loader with YAML 1.2 scalar types, refusing aliases (nothing can expand)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not allowed in a skill's frontmatter")
        return super().compose_node(parent, index)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None  # NaN and infinities have no JSON form
    return value


def _key(key: Any) -> str:
    """A mapping key as JSON text, spelled as a YAML 1.2 parser's JSON output spells it."""
    if isinstance(key, bool) or key is None:
        return "null" if key is None else str(key).lower()
    return str(key)


def frontmatter_json(data: bytes) -> dict[str, Any]:
    """The YAML frontmatter of a `SKILL.md`, as written, as a JSON object.

    YAML types are kept as a YAML 1.2 parser reads them (`version: 1.0` is the number
    1.0; `yes`, `2024-01-02` and `12:30` stay text; `0755` is 755), so a host that parses
    the file itself finds the same values.

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
    block = text[opening.end() : closing.start()]
    refused = over_budget(block)  # the same bounds as parsing: never seconds of pure-Python YAML
    if refused is not None:
        raise ValueError(f"SKILL.md's {refused}")
    try:
        loaded = yaml.load(block, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValueError(f"SKILL.md's frontmatter is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ValueError("SKILL.md's frontmatter is not a mapping")
    out: dict[str, Any] = _jsonable(mend_surrogates(loaded))
    for field in ("name", "description"):
        if not isinstance(out.get(field), str) or not out[field].strip():
            raise ValueError(f"SKILL.md's frontmatter has no text '{field}'")
    return out
