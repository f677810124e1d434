"""Pinned reads, checked: a pin from graph state is a claim, the store's answer is the fact.

A thread's `skill_versions` (`s3skills.tenancy.SkillPin`) says which version of each file
of a loaded skill it reads: an ETag, and a VersionId on a versioned bucket. The state is
client input (a LangGraph Server client can write it), so a pin may name any VersionId
with any ETag. `read_verified` is the one pinned read every front end and adapter uses
(the prompt's SKILL.md, the filesystem, the skill tools, the script runner):

- the key is built from the skill's own folder prefix and a checked relative path, and
  must lie under that prefix;
- the object the store returns must carry the ETag the pin names (a GET by VersionId
  returns that version's own ETag, whatever the client claimed); otherwise the read is
  refused with `PinMismatch` (a `SkillChanged`: the agent is asked to reload the skill).

A cache of pinned bodies must be keyed by what this check verified (`VerifiedKey`: the key,
the VersionId read and the ETag the store returned), never by the pin's claim alone.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from s3skills.errors import InvalidPath
from s3skills.paths import VPath, join_key
from s3skills.skills.versions.history import SkillChanged, read_pinned
from s3skills.storage import ObjectBody, ObjectStore
from s3skills.tenancy import SkillPin

__all__ = ["PinMismatch", "PinnedTexts", "VerifiedKey", "pinned_key", "read_verified", "verified_key"]

logger = logging.getLogger(__name__)


class PinMismatch(SkillChanged):
    """The store's object does not have the ETag the thread's pin names (a stale or forged pin)."""


@dataclass(frozen=True, slots=True)
class VerifiedKey:
    """What a pinned read verified: the object key, the VersionId read (None: current), its ETag."""

    key: str
    version_id: str | None
    etag: str


def pinned_key(prefix: str, path: str) -> str:
    """The key of `path` (relative to a skill folder) under the folder's `prefix`, checked.

    Raises:
        InvalidPath: `path` is not a plain relative path, or the key leaves `prefix`.
    """
    parts = VPath.parse("/" + path).parts if isinstance(path, str) else ()
    if not parts or "/".join(parts) != path:
        raise InvalidPath(f"Invalid path {path!r} inside a skill")
    key = join_key(prefix, parts)
    if not prefix.endswith("/") or not key.startswith(prefix):
        raise InvalidPath(f"Invalid path {path!r} inside a skill")
    return key


def verified_key(prefix: str, path: str, pin: SkillPin | None) -> VerifiedKey | None:
    """The cache key a verified read of `path` under `pin` would have (None: not pinned)."""
    pinned = pin.files.get(path) if pin is not None else None
    if pinned is None:
        return None
    return VerifiedKey(pinned_key(prefix, path), pinned.version_id, pinned.etag)


async def read_verified(
    store: ObjectStore, prefix: str, path: str, pin: SkillPin | None, *, max_bytes: int | None = None
) -> tuple[ObjectBody, VerifiedKey | None]:
    """Read one file of a skill folder as the thread's pin says, and check the answer (1 GET).

    Args:
        store: The store.
        prefix: The skill folder's key prefix (ends with `/`).
        path: The file's path relative to the folder (the pin's key).
        pin: The version the thread loaded; None reads the current object.
        max_bytes: Largest object read.

    Returns:
        The body, and what was verified (None when the pin does not name the file).

    Raises:
        InvalidPath: `path` is not plainly inside the folder.
        PinMismatch: The object read does not carry the pinned ETag.
        NotFound, SkillChanged: See `s3skills.skills.versions.history.read_pinned`.
    """
    key = pinned_key(prefix, path)
    body = await read_pinned(store, key, path, pin, max_bytes=max_bytes)
    pinned = pin.files.get(path) if pin is not None else None
    if pinned is None:
        return body, None
    if body.etag != pinned.etag:
        logger.warning("refused a pinned read: the object's ETag is not the one the thread's pin names")
        raise PinMismatch(
            f"The version of {path} this thread loaded cannot be read any more (the pin does not match "
            "the stored file): reload the skill with cargar_habilidad to read its current version."
        )
    return body, VerifiedKey(key, pinned.version_id, body.etag)


class PinnedTexts:
    """Older `SKILL.md` instructions read by VersionId, keyed by what the read verified.

    A version is immutable, so a text read by VersionId that returned the pinned ETag may be
    reused by any tenant whose pin names that exact key, VersionId and ETag. At most 256 are
    kept, within `budget` characters (the oldest go first; the newest always stays).
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._texts: OrderedDict[VerifiedKey, str] = OrderedDict()

    def get(self, prefix: str, pin: SkillPin | None) -> str | None:
        """The text a verified read of the pin's `SKILL.md` version gave before, if kept."""
        pinned = pin.files.get("SKILL.md") if pin is not None else None
        claimed = verified_key(prefix, "SKILL.md", pin) if pinned is not None and pinned.version_id else None
        text = self._texts.get(claimed) if claimed is not None else None
        if claimed is not None and text is not None:
            self._texts.move_to_end(claimed)
        return text

    def put(self, verified: VerifiedKey | None, text: str) -> None:
        """Keep `text` if its read was by VersionId (a current read may change)."""
        if verified is None or verified.version_id is None:
            return
        self._texts[verified] = text
        while len(self._texts) > 256 or (len(self._texts) > 1 and sum(map(len, self._texts.values())) > self.budget):
            self._texts.popitem(last=False)
