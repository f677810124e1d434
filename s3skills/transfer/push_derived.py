"""What a push records besides the objects: the library's derived data (digest book and manifest,
at the layout's own keys, the writer's mark cleared) and one version record per changed skill."""

from __future__ import annotations

from s3skills.ids import SkillId
from s3skills.layout import KeyLayout
from s3skills.skills.index.digests import DigestBooks, Record
from s3skills.skills.index.writers import anote_changed
from s3skills.skills.versions.records import awrite_records
from s3skills.storage import ObjectStore

__all__ = ["anote_derived", "arecord_versions", "manifest_key_of"]


def manifest_key_of(layout: KeyLayout, prefix: str) -> str | None:
    try:
        return layout.manifest_key(prefix)
    except ValueError:  # this layout keeps no derived data for the prefix: readers list it
        return None


async def anote_derived(
    store: ObjectStore,
    prefix: str,
    layout: KeyLayout,
    records: dict[str, Record],
    skill_mds: dict[str, tuple[bytes, str]],
    written: list[str],
    deletions: list[str],
    mark: str | None,
) -> None:
    """Record a push in the library's derived data, at `layout`'s keys (none where it has none)."""
    manifest_key = manifest_key_of(layout, prefix)
    if manifest_key is None:
        return
    # The digest book records what was written, so an MCP server never reads it back to hash it.
    await DigestBooks(store, layout).aremember(prefix, records)
    # The library's manifest (its one-request index) records the pushed and removed skills,
    # from the bytes just written (created from a listing if the library had none).
    touched = {str(sid) for k in [*written, *deletions] if (sid := SkillId.from_key(k, prefix)) is not None}
    if touched or mark is not None:
        await anote_changed(store, prefix, touched, manifest_key=manifest_key, written=skill_mds, mark=mark)


async def arecord_versions(
    store: ObjectStore, prefix: str, layout: KeyLayout, skills: set[str], actor: str | None, command: str
) -> None:
    """One version record per skill the push changed (any file: not only its `SKILL.md`)."""
    try:
        records = layout.records_prefix(prefix)
    except ValueError:  # this layout keeps no derived data for the prefix
        return
    await awrite_records(store, prefix, records, skills, actor=actor, command=command)
