"""What a push decides from the library's copy of each changed `SKILL.md`: where it came from
(a copy pushed from another folder is left out, or replaced with `replace`), whether it stays
disabled, and what `push --enable/--disable` writes instead of the local bytes."""

from __future__ import annotations

import asyncio
import functools

from s3skills._loop import gather_limited
from s3skills.errors import FileTooLarge, NotFound
from s3skills.ids import SKILL_FILE, SkillId
from s3skills.paths import join_key
from s3skills.skills.format.model import MAX_SKILL_MD_BYTES
from s3skills.storage import ObjectStore
from s3skills.transfer.localtree import Item, LocalFile, LocalTree, read_local
from s3skills.transfer.provenance import SOURCE_KEY, keep_disabled, pulled_etags, read_remote, source_of, with_enabled
from s3skills.transfer.reports import PushReport
from s3skills.transfer.repository import ORIGIN_KEY, origin_label, shown_origin

__all__ = ["KEEP_BOTH", "aplan_skill_md", "clash_reason", "skill_md_metadata", "with_flag"]

KEEP_BOTH = "--category-from-repo"
"""The flag that keeps both copies of a clashing skill (each repository under its own category)."""


def clash_reason(theirs: str | None, ours: str) -> str:
    """The one line a skill left out for a copy pushed from another folder gets: both sources, both ways out."""
    came = f"from {theirs}" if theirs else "pushed from another folder"
    return f"library copy {came}, this one from {ours}; keep both: {KEEP_BOTH}; take it over: --replace"


def skill_md_metadata(tree: LocalTree, skill: str) -> dict[str, str]:
    """The metadata a pushed `SKILL.md` carries: its source stamp and its readable origin."""
    return {SOURCE_KEY: source_of(tree.skills[skill]), ORIGIN_KEY: origin_label(tree.root, tree.mapping[skill])}


async def aplan_skill_md(
    store: ObjectStore,
    tree: LocalTree,
    prefix: str,
    candidates: list[LocalFile],
    report: PushReport,
    *,
    flag: bool | None,
    replace: bool,
) -> tuple[dict[str, bytes], set[str]]:
    """Read the remote `SKILL.md` of each changed skill: provenance and `enabled` (1 GET each).

    A copy pushed from another folder is a conflict (in `report.conflicts` and
    `report.replaceable`, with `clash_reason`) unless it is the copy this folder was pulled
    from (the pull record's ETag) or `replace` (then in `report.replaced`).

    Returns the bytes to write instead of a local `SKILL.md` (kept disabled), and the
    `SKILL.md` files whose remote copy already has exactly those bytes.
    """
    overrides: dict[str, bytes] = {}
    unchanged: set[str] = set()
    folders = {f.skill: tree.mapping[f.skill] for f in candidates}
    pulled = await asyncio.to_thread(pulled_etags, tree.root, folders, prefix=prefix, bucket=store.bucket)

    async def check(f: LocalFile) -> None:
        leaf = SkillId.parse(f.skill).leaf
        try:
            body = await store.aget(join_key(prefix, tuple(f.key_rel.split("/"))), max_bytes=MAX_SKILL_MD_BYTES)
        except NotFound:
            return
        except FileTooLarge:
            body = None
        remote = read_remote(body.data, body.metadata, leaf) if body is not None else None
        local = await asyncio.to_thread(read_local, f.local, MAX_SKILL_MD_BYTES, f.identity)
        ours = source_of(tree.skills[f.skill])
        was_pulled = body is not None and pulled.get(f.skill) == body.etag
        if remote is not None and remote.source is not None and remote.source != ours and not was_pulled:
            if replace:
                report.replaced.append(Item(f.skill, "the library's copy was pushed from another folder (--replace)"))
            else:
                assert body is not None
                theirs = shown_origin(body.metadata.get(ORIGIN_KEY))
                here = shown_origin(origin_label(tree.root, tree.mapping[f.skill]))
                if here is None or here == theirs:  # two folders of one name: say which one is ours
                    here = str(tree.root / tree.mapping[f.skill])
                report.replaceable.append(f.skill)
                report.conflicts.append(Item(f.skill, clash_reason(theirs, here)))
                return
        elif (remote is None or remote.source is None) and not was_pulled:
            report.replaced.append(Item(f.skill, "the library's copy has no recorded source (created or edited there)"))
        if flag is not None:  # push --enable/--disable: the bytes to write are already decided
            if remote is not None and remote.enabled != flag:
                report.switched.append(f.skill)
            return
        if remote is not None and not remote.enabled:
            report.disabled.append(f.skill)
            wanted = keep_disabled(local, leaf)
            if wanted != local:
                overrides[f.key_rel] = wanted
            if wanted == remote.data:
                unchanged.add(f.key_rel)

    await gather_limited([functools.partial(check, f) for f in candidates], 8)
    report.conflicts.sort(key=lambda i: i.path)
    report.replaceable.sort()
    report.replaced.sort(key=lambda i: i.path)
    report.disabled.sort()
    return overrides, unchanged


def with_flag(files: list[LocalFile], enabled: bool, max_bytes: int) -> tuple[dict[str, bytes], set[str]]:
    """Each `SKILL.md` that must change to say `enabled` (key_rel -> bytes), and the skills it is."""
    out: dict[str, bytes] = {}
    for f in files:
        if f.key_rel != f"{f.skill}/{SKILL_FILE}":
            continue
        local = read_local(f.local, max_bytes, f.identity)
        wanted = with_enabled(local, SkillId.parse(f.skill).leaf, enabled)
        if wanted != local:
            out[f.key_rel] = wanted
    return out, {k.removesuffix("/" + SKILL_FILE) for k in out}
