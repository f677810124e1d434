"""Where a pushed skill came from, and what a push keeps of the remote skill it replaces.

A push records on each `SKILL.md` it writes the user metadata `s3skills-source`
(`x-amz-meta-s3skills-source`): a short hash of the absolute path of the local skill
folder it came from. A later push that would replace a skill recorded with a different
source is a conflict (three `external_plugins/*/skills` folders pushed into one library
each holding `access`: the second push says so instead of silently replacing the first).
A remote `SKILL.md` with no recorded source (created with `s3skills create`, edited by
`disable` or by an agent) is replaced and reported.

A remote `enabled: false` survives a push: the `SKILL.md` written is the local one with
`enabled: false`, rendered as `s3skills disable` renders it, so pushing an unchanged tree
after `disable` writes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from s3skills.skills import InvalidSkill, parse_skill_md, render_skill_md

__all__ = ["SOURCE_KEY", "RemoteSkillMd", "keep_disabled", "read_remote", "source_of"]

SOURCE_KEY = "s3skills-source"
"""The user-metadata name (`x-amz-meta-s3skills-source`) of a pushed `SKILL.md`."""


def source_of(folder: Path) -> str:
    """The source stamp of a local skill folder: 16 hex digits of its absolute path's SHA-256."""
    text = str(folder.expanduser().resolve())
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RemoteSkillMd:
    """What a push needs to know of a remote `SKILL.md`."""

    data: bytes
    source: str | None
    enabled: bool


def read_remote(data: bytes, metadata: dict[str, str], leaf: str) -> RemoteSkillMd:
    """Describe a remote `SKILL.md` (an unparsable one counts as enabled)."""
    try:
        enabled = parse_skill_md(data, folder=leaf).metadata.enabled
    except InvalidSkill:
        enabled = True
    return RemoteSkillMd(data, metadata.get(SOURCE_KEY), enabled)


def keep_disabled(local: bytes, leaf: str) -> bytes:
    """The local `SKILL.md` with `enabled: false` (unchanged when it cannot be parsed)."""
    try:
        parsed = parse_skill_md(local, folder=leaf)
    except InvalidSkill:
        return local
    if not parsed.metadata.enabled:
        return local
    meta = parsed.metadata.model_copy(update={"enabled": False})
    return render_skill_md(meta, parsed.body).encode("utf-8")
