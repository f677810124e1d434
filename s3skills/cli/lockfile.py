"""The lockfile's format (`skills-lock.json`): read and checked, and turned into channel entries.

    {"schema": "s3skills.lock/1",
     "source": {"bucket": "...", "library": "shared/org/skills/", "channel": "latest"},
     "skills": {"pdf": {"version": "<content id>", "record": "<record id or null>",
                        "files": {"SKILL.md": {"sha256": "...", "version_id": "...", "etag": "...",
                                               "size": 120}}}}}

A lockfile is input (from git, from anyone): it is size- and depth-bounded and schema-checked
before use, and a channel made of it serves its files only through pinned reads that check
every ETag (`s3skills.skills.versions.channels`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from s3skills.cli.context import CliError
from s3skills.errors import InvalidPath, SkillError
from s3skills.ids import SkillId
from s3skills.skills.versions.channels import ChannelSkill
from s3skills.skills.versions.history import version_id_of
from s3skills.skills.versions.pinned import pinned_key
from s3skills.skills.versions.records import load_bounded
from s3skills.tenancy import PinnedFile

__all__ = ["LOCK_SCHEMA", "MAX_LOCK_BYTES", "channel_from_lock", "read_lock"]

LOCK_SCHEMA = "s3skills.lock/1"
MAX_LOCK_BYTES = 64 * 1024 * 1024


def read_lock(path: str) -> dict[str, Any]:
    """A lockfile, schema-checked (skills -> version and files with sha256, etag, size).

    Raises:
        CliError: Unreadable, too large, or not a lockfile.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read the lockfile {path}: {exc.strerror or exc}") from exc
    doc = load_bounded(data, MAX_LOCK_BYTES)
    bad = CliError(f"{path} is not an s3skills lockfile ({LOCK_SCHEMA})")
    if not isinstance(doc, dict) or doc.get("schema") != LOCK_SCHEMA or not isinstance(doc.get("skills"), dict):
        raise bad
    for sid, skill in doc["skills"].items():
        if not _entry_ok(sid, skill):
            raise CliError(f"{path}: the entry of {str(sid)[:80]!r} is malformed (not a lockfile entry s3skills wrote)")
    return doc


def _entry_ok(sid: object, skill: object) -> bool:
    """A lock entry: a canonical id, plain paths with a SKILL.md, and a version id that is its files'."""
    try:
        if str(SkillId.parse(sid)) != sid:
            return False
    except (InvalidPath, SkillError, TypeError, ValueError):
        return False
    if not isinstance(skill, dict) or not isinstance(skill.get("version"), str):
        return False
    files = skill.get("files")
    if not isinstance(files, dict) or "SKILL.md" not in files:
        return False
    for rel, f in files.items():
        try:
            pinned_key("x/", rel)
        except InvalidPath:
            return False
        if not isinstance(f, dict) or not isinstance(f.get("sha256"), str) or not isinstance(f.get("etag"), str):
            return False
        size, vid = f.get("size"), f.get("version_id")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return False
        if vid is not None and (not isinstance(vid, str) or not vid):
            return False
    record = skill.get("record")
    return (record is None or isinstance(record, str)) and skill["version"] == version_id_of(
        (p, f["etag"]) for p, f in files.items()
    )


def channel_from_lock(path: str) -> dict[str, ChannelSkill]:
    """The skills of a lockfile (`s3skills lock`), as channel entries.

    Raises:
        CliError: The file cannot be read or is not a lockfile; an entry names no VersionIds.
    """
    lock = read_lock(path)
    out: dict[str, ChannelSkill] = {}
    for sid, skill in lock["skills"].items():
        files = {p: PinnedFile(f["etag"], f.get("version_id")) for p, f in skill["files"].items()}
        out[sid] = ChannelSkill(
            skill["version"], skill.get("record"), files, {p: f["size"] for p, f in skill["files"].items()}
        )
    return out
