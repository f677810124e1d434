"""Where a pushed skill came from, and what a push keeps of the remote skill it replaces.

A push records on each `SKILL.md` it writes the user metadata `s3skills-source`
(`x-amz-meta-s3skills-source`): a short hash of the absolute path of the local skill
folder it came from. A later push that would replace a skill recorded with a different
source is a conflict (three `external_plugins/*/skills` folders pushed into one library
each holding `access`: the second push says so instead of silently replacing the first).
A remote `SKILL.md` with no recorded source (created with `s3skills create`, edited by
`disable` or by an agent) is replaced and reported. Replacing a copy pushed from another
folder takes `replace=True` (the CLI's `--replace`).

A pull records where each folder came from, in `PULL_RECORD` at the destination's root:
the ETag of each pulled `SKILL.md`, by folder. A push of a folder so recorded replaces
the library's copy without a conflict while that copy is still the one pulled (same
ETag), so pull -> edit -> push just works; a copy pushed by someone else since the pull
is still a conflict.

A remote `enabled: false` survives a push: the `SKILL.md` written is the local one with
`enabled: false`, rendered as `s3skills disable` renders it, so pushing an unchanged tree
after `disable` writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from s3skills.skills import InvalidSkill, parse_skill_md, render_skill_md

__all__ = [
    "PULL_RECORD",
    "SOURCE_KEY",
    "RemoteSkillMd",
    "keep_disabled",
    "merge_pull_record",
    "pulled_etags",
    "read_remote",
    "source_of",
    "with_enabled",
]

PULL_RECORD = ".s3skills-pulled.json"
"""The file a pull writes at its destination's root: the ETag of each `SKILL.md` pulled, by folder."""

_MAX_RECORD_BYTES = 4 * 1024 * 1024

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
    return with_enabled(local, leaf, False)


def with_enabled(local: bytes, leaf: str, enabled: bool) -> bytes:
    """The local `SKILL.md` with `enabled` set (`push --enable/--disable`), as `s3skills
    enable`/`disable` render it; unchanged when it already says so or cannot be parsed."""
    try:
        parsed = parse_skill_md(local, folder=leaf)
    except InvalidSkill:
        return local
    if parsed.metadata.enabled == enabled:
        return local
    meta = parsed.metadata.model_copy(update={"enabled": enabled})
    return render_skill_md(meta, parsed.body).encode("utf-8")


def merge_pull_record(old: bytes | None, prefix: str, pulled: Mapping[str, str]) -> bytes:
    """The pull record after a pull of `pulled` (folder relative to the destination -> ETag).

    Entries of an earlier pull (`old`, ignored when unreadable) are kept unless pulled again.
    """
    skills: dict[str, object] = {}
    if old is not None:
        try:
            parsed = json.loads(old)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("skills"), dict):
            skills.update(parsed["skills"])
    for folder, etag in pulled.items():
        skills[folder] = {"etag": etag, "prefix": prefix}
    return (json.dumps({"version": 1, "skills": dict(sorted(skills.items()))}, indent=2) + "\n").encode()


def pulled_etags(folders: Mapping[str, Path]) -> dict[str, str]:
    """The ETag each skill folder was pulled at (skill id -> ETag), from the nearest pull record.

    Each folder's ancestors are searched for `PULL_RECORD`; the nearest one that names
    the folder wins. Unreadable records count as absent (a push then reports a conflict).
    """
    records: dict[Path, dict[str, object] | None] = {}

    def record(at: Path) -> dict[str, object] | None:
        if at not in records:
            path = at / PULL_RECORD
            data: dict[str, object] | None = None
            try:
                if path.is_file() and not path.is_symlink() and path.stat().st_size <= _MAX_RECORD_BYTES:
                    parsed = json.loads(path.read_bytes())
                    if isinstance(parsed, dict) and isinstance(parsed.get("skills"), dict):
                        data = parsed["skills"]
            except (OSError, ValueError):
                data = None
            records[at] = data
        return records[at]

    out: dict[str, str] = {}
    for skill_id, folder in folders.items():
        real = folder.expanduser().resolve()
        for at in real.parents:
            skills = record(at)
            entry = skills.get(real.relative_to(at).as_posix()) if skills is not None else None
            if isinstance(entry, dict) and isinstance(entry.get("etag"), str):
                out[skill_id] = entry["etag"]
                break
    return out
