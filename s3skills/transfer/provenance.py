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
the ETag of each pulled `SKILL.md`, by folder, with the bucket and library prefix it
came from. A push of a folder so recorded replaces the library's copy without a
conflict while that copy is still the one pulled (same ETag), so pull -> edit -> push
just works; a copy pushed by someone else since the pull is still a conflict.

The record is a local input that lifts a guard, so a push trusts it only when it is
where the pull wrote it and only the pushing user could have written it: in the pushed
folder itself (never a parent: a record planted in a shared folder such as the system
temporary folder proves nothing), a regular file owned by the current user and not
writable by group or others (`s3skills.paths.read_private_file`), and each entry only
for the bucket and library prefix being pushed to. Anything else is ignored: the push
then reports a conflict and asks for `--replace`, as without a record.

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

from s3skills.paths import read_private_file
from s3skills.skills import InvalidSkill, parse_skill_md, render_skill_md
from s3skills.storage.documents import INT, STR, Closed, DocumentKind, MapOf, decode_document

__all__ = [
    "PULL_RECORD",
    "PULL_RECORD_DOCUMENT",
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
PULL_RECORD_DOCUMENT = DocumentKind(
    "pull record",
    Closed({"version": INT, "skills": MapOf(Closed({"etag": STR, "prefix": STR, "bucket": STR}), 100_000)}),
    max_bytes=_MAX_RECORD_BYTES,
    max_nodes=200_000,
    cached=False,
)
"""What a pull record may hold: 20,000 pulled skills take 3 MB and 140,000 values (7 each)."""

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


def merge_pull_record(old: bytes | None, prefix: str, pulled: Mapping[str, str], *, bucket: str) -> bytes:
    """The pull record after a pull of `pulled` (folder relative to the destination -> ETag).

    Entries of an earlier pull (`old`, ignored when unreadable) are kept unless pulled
    again; each entry names the bucket and library prefix it was pulled from.
    """
    skills: dict[str, object] = {}
    if old is not None:
        try:
            parsed = decode_document(old, PULL_RECORD_DOCUMENT)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("skills"), dict):
            skills.update(parsed["skills"])
    for folder, etag in pulled.items():
        skills[folder] = {"etag": etag, "prefix": prefix, "bucket": bucket}
    return (json.dumps({"version": 1, "skills": dict(sorted(skills.items()))}, indent=2) + "\n").encode()


def pulled_etags(root: Path, folders: Mapping[str, str], *, prefix: str, bucket: str) -> dict[str, str]:
    """The ETag each skill folder was pulled at (skill id -> ETag), from the pushed folder's record.

    Only `root / PULL_RECORD` is read (the pushed folder itself, never a parent), and
    only when the current user owns it and group and others cannot write it; an entry
    counts only for this `bucket` and library `prefix` (records written before entries
    named their bucket count for none). Anything unreadable or refused counts as absent:
    the push then reports a conflict.

    Args:
        root: The pushed folder.
        folders: Skill id -> its folder relative to `root` (`LocalTree.mapping`).
        prefix: The library prefix pushed to.
        bucket: The bucket pushed to.
    """
    try:
        data = read_private_file(root / PULL_RECORD, max_bytes=_MAX_RECORD_BYTES, what="the pull record")
        parsed = decode_document(data, PULL_RECORD_DOCUMENT)
    except ValueError:  # absent, planted by someone else, writable by others, too large or not JSON
        return {}
    skills = parsed.get("skills") if isinstance(parsed, dict) else None
    if not isinstance(skills, dict):
        return {}
    out: dict[str, str] = {}
    for skill_id, folder in folders.items():
        entry = skills.get(folder) if folder else None
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("etag"), str)
            and entry.get("prefix") == prefix
            and entry.get("bucket") == bucket
        ):
            out[skill_id] = entry["etag"]
    return out
