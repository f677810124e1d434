"""Approvals: a script of a shared skill runs only once someone approved its current content.

An approval record says "`actor` reviewed the `scripts/` folder of skill S whose digest is D,
and approves running these scripts of it" (`scripts`: paths below `scripts/`, or `["*"]` for
every one). The digest covers every file of the folder (`scripts_digest`: the SHA-256 of the
sorted lines `path NUL sha256(bytes)`), so a changed helper module the script imports is a
change too. It lives at

    {approvals prefix}{skill id}/{digest}.json

created with `IfNoneMatch="*"`. The prefix is by default beside the library
(`KeyLayout.approvals_prefix`), where anyone who can write the library can write it too;
a deployment that wants approvals to mean something gives its own prefix
(`Config.approvals_prefix`) and lets only its approvers write there (IAM), as
docs/THREAT_MODEL.md says.

A record is input: `afind_approval` accepts one only when its document names the skill and the
digest of its key, the digest is the one just computed from the staged bytes, and the script
is among those it approves. So an approval copied or forged for other content is ignored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from s3skills.errors import Conflict, NotFound, S3SkillsError
from s3skills.ids import SkillId
from s3skills.skills.versions.records import MAX_TEXT
from s3skills.storage import ObjectBody, ObjectStore
from s3skills.storage.decoder import default_decoder
from s3skills.storage.documents import STR, Closed, DocumentKind, ListOf, decode_document

__all__ = [
    "APPROVAL_DOCUMENT",
    "APPROVAL_SCHEMA",
    "MAX_APPROVAL_BYTES",
    "Approval",
    "afind_approval",
    "aread_approvals",
    "awrite_approval",
    "scripts_digest",
]

logger = logging.getLogger(__name__)

APPROVAL_SCHEMA = "s3skills.approval/1"
MAX_APPROVAL_SCRIPTS = 1_000
MAX_APPROVAL_BYTES = 64 * 1024
"""Largest approval read: one approving 1,000 scripts of 40-character paths takes 43 KB (1.5x that)."""
APPROVAL_DOCUMENT = DocumentKind(
    "approval",
    Closed(
        {
            "schema": STR,
            "skill": STR,
            "digest": STR,
            "scripts": ListOf(STR, MAX_APPROVAL_SCRIPTS),
            "actor": STR,
            "time": STR,
        }
    ),
    max_bytes=MAX_APPROVAL_BYTES,
    max_nodes=MAX_APPROVAL_SCRIPTS + 32,
)
"""What an approval may hold (any other field is refused before decoding)."""
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")


def scripts_digest(files: Mapping[str, bytes]) -> str:
    """The digest of a `scripts/` folder: paths (below `scripts/`) and the SHA-256 of each file."""
    lines = sorted(f"{path}\0{hashlib.sha256(data).hexdigest()}\n" for path, data in files.items())
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Approval:
    """One approval: who approved which scripts of a skill's `scripts/` folder at which digest, when."""

    skill_id: str
    digest: str
    scripts: tuple[str, ...]
    actor: str
    time: str

    def approves(self, script: str) -> bool:
        """Whether running `script` (a path below `scripts/`) is approved."""
        return "*" in self.scripts or script in self.scripts

    def to_bytes(self) -> bytes:
        """The record's document."""
        doc = {
            "schema": APPROVAL_SCHEMA,
            "skill": self.skill_id,
            "digest": self.digest,
            "scripts": list(self.scripts),
            "actor": self.actor,
            "time": self.time,
        }
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes, *, skill_id: str, digest: str) -> Approval | str:
        """The approval in `data`, or why it is ignored (never raises)."""
        try:
            doc = decode_document(data, APPROVAL_DOCUMENT)
        except ValueError as exc:
            return f"not an approval record ({exc})"
        return cls.of_document(doc, skill_id=skill_id, digest=digest)

    @classmethod
    def of_document(cls, doc: Any, *, skill_id: str, digest: str) -> Approval | str:
        """The approval a decoded document holds, or why it is ignored (see `decode`)."""
        if not isinstance(doc, dict) or doc.get("schema") != APPROVAL_SCHEMA:
            return "not an approval record"
        if doc.get("skill") != skill_id or doc.get("digest") != digest:
            return "it approves other content than its key names"
        scripts, actor, when = doc.get("scripts"), doc.get("actor"), doc.get("time")
        if not isinstance(scripts, list) or not scripts or len(scripts) > MAX_APPROVAL_SCRIPTS:
            return "its scripts are missing or too many"
        if not all(isinstance(s, str) and 0 < len(s) <= MAX_TEXT for s in scripts):
            return "a script is malformed"
        if not isinstance(actor, str) or not isinstance(when, str) or len(actor) > MAX_TEXT or len(when) > 64:
            return "its actor or time is malformed"
        return cls(skill_id, digest, tuple(scripts), actor, when)


async def adecode_approval(body: ObjectBody, *, key: str, skill_id: str, digest: str) -> Approval | str:
    """`Approval.decode` in the decoder's bounded pool, once per (key, ETag) in the process."""

    def convert(doc: Any) -> Approval | str:
        return Approval.of_document(doc, skill_id=skill_id, digest=digest)

    try:
        return await default_decoder().adecode(
            APPROVAL_DOCUMENT, body.data, key=key, etag=body.etag, convert=convert, variant=(skill_id, digest)
        )
    except ValueError as exc:
        return f"not an approval record ({exc})"


def approval_key(prefix: str, skill_id: str, digest: str) -> str:
    """The key of an approval (checked skill id and digest)."""
    if not _DIGEST_RE.match(digest):
        raise ValueError("not a SHA-256 digest")
    return f"{prefix}{SkillId.parse(skill_id)}/{digest}.json"


async def afind_approval(store: ObjectStore, prefix: str, skill_id: str, digest: str, script: str) -> Approval | None:
    """The approval of running `script` of the skill at `digest` (1 GET), or None.

    A record that is damaged, names other content, or does not approve this script is
    ignored (and logged).
    """
    key = approval_key(prefix, skill_id, digest)
    try:
        body = await store.aget(key, max_bytes=MAX_APPROVAL_BYTES)
    except NotFound:
        return None
    except S3SkillsError as exc:
        logger.warning("could not read the approval of a script of %s: %s", skill_id, type(exc).__name__)
        return None
    got = await adecode_approval(body, key=key, skill_id=str(SkillId.parse(skill_id)), digest=digest)
    if isinstance(got, str):
        logger.warning("ignored an approval record of %s: %s", skill_id, got)
        return None
    return got if got.approves(script) else None


async def awrite_approval(
    store: ObjectStore, prefix: str, skill_id: str, digest: str, scripts: tuple[str, ...], *, actor: str
) -> Approval:
    """Record an approval (created conditionally; an existing valid one for these scripts is kept).

    Raises:
        Conflict: A record for that digest exists and does not approve these scripts, or is damaged:
            it is never overwritten (remove it first).
    """
    sid = str(SkillId.parse(skill_id))
    approval = Approval(sid, digest, scripts, actor[:MAX_TEXT], datetime.now(UTC).isoformat())
    key = approval_key(prefix, sid, digest)
    try:
        await store.aput(key, approval.to_bytes(), if_none_match=True, content_type="application/json")
        return approval
    except Conflict:
        body = await store.aget(key, max_bytes=MAX_APPROVAL_BYTES)
        old = await adecode_approval(body, key=key, skill_id=sid, digest=digest)
        if isinstance(old, Approval) and all(old.approves(s) for s in scripts):
            return old
        raise Conflict(f"An approval record for this content of '{sid}' already exists and differs") from None


async def aread_approvals(store: ObjectStore, prefix: str) -> tuple[list[Approval], list[str]]:
    """Every decodable approval under `prefix`, and what was ignored (1 LIST per 1,000, 1 GET each)."""
    objects, _ = await store.alist(prefix)
    out: list[Approval] = []
    problems: list[str] = []
    for obj in objects:
        sid, _, name = obj.key[len(prefix) :].rpartition("/")
        digest = name.removesuffix(".json")
        if not sid or not _DIGEST_RE.match(digest) or obj.size > MAX_APPROVAL_BYTES:
            problems.append(f"{obj.key[len(prefix) :][:80]}: not an approval's name")
            continue
        try:
            body = await store.aget(obj.key, max_bytes=MAX_APPROVAL_BYTES)
        except S3SkillsError as exc:
            problems.append(f"{sid}/{digest[:12]}: unreadable ({type(exc).__name__})")
            continue
        got = await adecode_approval(body, key=obj.key, skill_id=sid, digest=digest)
        if isinstance(got, str):
            problems.append(f"{sid}/{digest[:12]}: {got}")
        else:
            out.append(got)
    return out, problems
