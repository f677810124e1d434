"""What a skill is, as the rest of the library sees it: metadata and identity (no I/O, no YAML).

`SkillMetadata` is the Agent Skills frontmatter (plus the seeds' `version`,
`tags`, `tools_required`, `enabled`, `category`, `icon`); `SkillInfo` is a
skill as a catalog knows it; `SkillProblem` is a skill that was skipped or
loaded with a remark. Parsing lives in `s3skills.skills.format.parse`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from s3skills.errors import S3SkillsError
from s3skills.ids import SkillId

__all__ = [
    "COMPATIBILITY_MAX_CHARS",
    "DESCRIPTION_MAX_CHARS",
    "MAX_FRONTMATTER_BYTES",
    "MAX_SKILL_MD_BYTES",
    "NAME_MAX_CHARS",
    "InvalidSkill",
    "ParsedSkill",
    "Problem",
    "SkillInfo",
    "SkillMetadata",
    "SkillProblem",
    "split_tools",
]

MAX_SKILL_MD_BYTES = 10 * 1024 * 1024
"""Largest SKILL.md accepted, in bytes; larger input is refused without being parsed."""
MAX_FRONTMATTER_BYTES = 64 * 1024
"""Largest frontmatter block accepted, in UTF-8 bytes."""
MAX_FRONTMATTER_NODES = 1000
"""Most YAML values (scalars, lists, mappings) a frontmatter may hold; more is refused unread.

Real frontmatters hold a few dozen (at most 33 in the 682 skills of the real-skills corpus):
the bound keeps a crafted one (a flow list of 30,000 tiny values, under the byte cap) from
holding a core for a fifth of a second each time a library is indexed."""
FRONTMATTER_PARSE_SECONDS = 0.05
"""CPU seconds a frontmatter's YAML may take to read before it is refused (a backstop to the
node bound: what the bound admits reads in about a millisecond)."""
NAME_MAX_CHARS = 64
DESCRIPTION_MAX_CHARS = 1024
COMPATIBILITY_MAX_CHARS = 500


class InvalidSkill(S3SkillsError, ValueError):
    """The SKILL.md cannot be loaded; `reason` says why, for logs and the `validate` command."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _as_text(value: object) -> object:
    """Scalars to `str` (booleans as YAML writes them); anything else unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def split_tools(text: str) -> list[str]:
    """Split `allowed-tools` on spaces and commas, but not inside `Bash(git add:*)`."""
    tools: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")" and depth > 0)
        if depth == 0 and (ch.isspace() or ch == ","):
            tools.append("".join(current))
            current = []
        else:
            current.append(ch)
    tools.append("".join(current))
    return [tool for tool in tools if tool]


class SkillMetadata(BaseModel):
    """The frontmatter of a SKILL.md.

    The model enforces only what loading needs (text fields, a non-blank `name` and
    `description`); the specification's limits (name rules, lengths) are reported by
    `parse_skill_md` as warnings and by `validate_skill_md` as problems. Unknown fields
    are kept in `model_extra` and written back by `render_skill_md`.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    allowed_tools: list[str] = Field(
        default_factory=list,
        # Not `alias=`: type checkers would then only accept `allowed-tools` as the keyword.
        validation_alias=AliasChoices("allowed-tools", "allowed_tools"),
        serialization_alias="allowed-tools",
    )
    version: str | None = None
    tags: list[str] = Field(default_factory=list)
    tools_required: list[str] = Field(default_factory=list)
    enabled: bool = True
    category: str | None = None
    icon: str | None = None

    @field_validator("name", "description", "license", "compatibility", "version", "category", "icon", mode="before")
    @classmethod
    def _scalar_to_text(cls, value: object) -> object:
        return _as_text(value)

    @field_validator("name", "description")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_text(cls, value: object) -> object:
        if value is None:
            return {}
        if isinstance(value, dict):
            return {str(key): _as_text(item) for key, item in value.items() if item is not None}
        return value

    @field_validator("allowed_tools", "tags", "tools_required", mode="before")
    @classmethod
    def _text_list(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return []
        if isinstance(value, list | tuple):
            return [_as_text(item) for item in value]
        if not isinstance(value, str):
            return value
        if info.field_name == "allowed_tools":
            return split_tools(value)
        separators = "," if info.field_name == "tags" else r"[\s,]"
        return [part.strip() for part in re.split(separators, value) if part.strip()]


@dataclass(frozen=True)
class ParsedSkill:
    """A loaded SKILL.md: its metadata, its Markdown body, and what was tolerated."""

    metadata: SkillMetadata
    body: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    """One finding of `validate_skill_md`.

    Attributes:
        level: `error` breaks the specification (the loader tolerates it with a warning
            unless `fatal`); `warning` is advice the loader does not record.
        message: One human-readable line.
        fatal: True when the loader skips the skill because of it.
    """

    level: Literal["error", "warning"]
    message: str
    fatal: bool = False


@dataclass(frozen=True)
class SkillInfo:
    """A skill as the catalog knows it.

    Attributes:
        id: The path below `skills/`: `pdf` or `escrituras/compraventa`.
        metadata: The parsed frontmatter.
        source: Where it comes from: `user`, `shared` or `code`.
        etag: The ETag of the SKILL.md it was read from, if any.
        warnings: What the loader tolerated (see `parse_skill_md`).
        version: The short id of the skill's current version (all its files; see
            `s3skills.skills.versions.history`), from the index's listing; None for a code
            skill. Not part of equality.
        sketch: A bounded summary of the SKILL.md body (`s3skills.skills.ranking.sketch`),
            stored in the manifest so ranking reads the body at no request; "" when
            unknown (a code skill, or a manifest written before sketches).
    """

    id: str
    metadata: SkillMetadata
    source: str = "user"
    etag: str = ""
    warnings: tuple[str, ...] = ()
    version: str | None = field(default=None, compare=False)
    sketch: str = ""

    @property
    def leaf(self) -> str:
        """The last segment of the id (the skill's folder name)."""
        return SkillId.parse(self.id).leaf

    @property
    def category(self) -> str | None:
        """`metadata.category`, else the id's first segment when it has several, else None."""
        if self.metadata.category:
            return self.metadata.category
        return SkillId.parse(self.id).category


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A skill that was skipped (`level="error"`) or loaded with a remark (`"warning"`)."""

    skill_id: str
    source: str
    level: str
    reason: str
