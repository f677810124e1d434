"""Push a local tree of skills to a user's library.

`apush_tree` scans the tree (`s3skills.transfer.localtree.scan_tree`: junk dropped, every
`SKILL.md` validated, unsafe files refused), leaves out what the severity policy
(`s3skills.skills.format.severity`) does not store, or with `strict` refuses the whole
push, compares the rest with one listing of the library and uploads only what changed
(the local MD5 against the ETag of single-part objects), each skill's `SKILL.md` last so
that an agent never sees a half-uploaded skill, then records the files written in the
library's digest book and manifest. With `delete` it mirrors. It runs on the private I/O
loop; `push_tree` is its generated sync twin.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from s3skills._loop import gather_limited, io_bound, sync_method
from s3skills.errors import BucketNotFound, S3SkillsError, SkillError
from s3skills.ids import SKILL_FILE, SkillId, nested_in
from s3skills.layout import KeyLayout
from s3skills.media import content_type_for
from s3skills.paths import join_key
from s3skills.skills.format.severity import SEVERITIES, severity_of
from s3skills.skills.index.digests import Record, record_of
from s3skills.skills.index.marks import marking
from s3skills.skills.index.writers import library_builder
from s3skills.storage import ObjectInfo, ObjectStore
from s3skills.transfer.localtree import (
    MAX_FILE_BYTES,
    Item,
    LocalFile,
    LocalTree,
    local_md5,
    read_local,
    scan_tree,
    skill_of,
)
from s3skills.transfer.push_derived import anote_derived, arecord_versions, manifest_key_of
from s3skills.transfer.push_plan import aplan_skill_md, skill_md_metadata, with_flag
from s3skills.transfer.reports import PushRefused, PushReport, names_line

__all__ = ["MAX_FILE_BYTES", "Progress", "apush_tree", "push_tree"]

Progress = Callable[[str, int, int], None]
"""`progress(path, done, total)`, called from the I/O loop after each file."""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _protected(tree: LocalTree, refused: str) -> str | None:
    """The key-relative path (or folder, ending in `/`) that a refusal keeps from `delete`."""
    folder, _, name = refused.rpartition("/")
    if name == SKILL_FILE:  # a refused skill: its remote folder is left alone
        skill_id = tree.refused_ids.get(folder)
        return skill_id + "/" if skill_id else None  # an invalid id names no remote folder
    for skill_id, local in sorted(tree.mapping.items(), key=lambda kv: -len(kv[1])):
        if local == "" or refused.startswith(local + "/"):
            return f"{skill_id}/{refused[len(local) + 1 :] if local else refused}"
    return None


def _covers(protected: str, rel: str) -> bool:
    return rel.startswith(protected) if protected.endswith("/") else rel == protected


def _remote_skills(objects: Iterable[ObjectInfo], prefix: str) -> set[str]:
    return {str(sid) for o in objects if (sid := SkillId.from_key(o.key, prefix)) is not None}


def _nested_kept(remote_ids: set[str], pushed: set[str]) -> set[str]:
    """The library's skills nested in another skill's folder that a mirror keeps.

    The rule of `rm` (`s3skills.ids.nested_in`): a `SKILL.md` ends a skill, so a folder
    inside a skill that holds its own `SKILL.md` is another skill, never a file of the
    outer one; `delete` mirrors the pushed skills and leaves those alone (unless the
    nested skill is itself one of the pushed skills).
    """
    by_outer: dict[str, list[str]] = {}
    for sid in remote_ids:
        if "/" in sid:  # ids have at most two segments: only a top-level skill can hold another
            by_outer.setdefault(sid.split("/", 1)[0], []).append(sid)
    skills = remote_ids | pushed
    kept = {n for outer, ids in by_outer.items() if outer in skills for n in nested_in(outer, ids)}
    return kept - pushed


def _layout_conflicts(local: Iterable[str], remote: set[str]) -> list[Item]:
    """Local skills whose id would nest in, or swallow, a remote skill's folder."""
    out = []
    for skill_id in sorted(local):
        if skill_id in remote:
            continue
        parent = skill_id.split("/", 1)[0] if "/" in skill_id else None
        inner = sorted(r for r in remote if r.startswith(skill_id + "/"))
        if parent is not None and parent in remote:
            out.append(Item(skill_id, f"its category {parent!r} is a skill in the library; rename one"))
        elif inner:
            out.append(Item(skill_id, f"it is a category in the library ({', '.join(inner[:3])}); rename one"))
    return out


def _unreadable(tree: LocalTree) -> dict[str, str]:
    """Skill id -> its folder, for the skills whose `SKILL.md` no host can load (`pushed=False`)."""
    folders = {folder: sid for sid, folder in tree.mapping.items()}
    out = {}
    for p in tree.problems:
        if not SEVERITIES[severity_of(p)].pushed:
            folder = p.path.removesuffix(SKILL_FILE).rstrip("/")
            if folder in folders:
                out[folders[folder]] = folder
    return out


def _strict_refusal(source: Path, tree: LocalTree, conflicts: list[Item]) -> str | None:
    """Why `strict` refuses the push (one short line), or None: what the policy calls an error,
    unsafe or ambiguous files, ids that clash with the library."""
    ids = {folder: sid for sid, folder in tree.mapping.items()}
    bad = sorted(
        {
            ids.get(p.path.removesuffix(SKILL_FILE).rstrip("/"), p.path)
            for p in tree.problems
            if SEVERITIES[severity_of(p)].strict_refuses
        }
    )
    what = []
    if bad:
        what.append(f"{_count(len(bad), 'skill')} with errors ({names_line(bad, 60)})")
    if tree.refused:
        what.append(_count(len(tree.refused), "unsafe or ambiguous file"))
    if conflicts:
        what.append(f"{_count(len(conflicts), 'id')} clashing with the library")
    if not what:
        return None
    return f"{source.name or source}: --strict refuses {' and '.join(what)}; fix them, or push without --strict"


@io_bound
async def apush_tree(
    store: ObjectStore,
    source: Path,
    prefix: str,
    *,
    category: str | None = None,
    repository: str | None = None,
    delete: bool = False,
    dry_run: bool = False,
    strict: bool = False,
    replace: bool = False,
    enable: bool = False,
    disable: bool = False,
    bucket_may_be_missing: bool = False,
    progress: Progress | None = None,
    concurrency: int = 16,
    max_file_bytes: int = MAX_FILE_BYTES,
    layout: KeyLayout | None = None,
    actor: str | None = None,
    command: str = "push",
) -> PushReport:
    """Upload a local tree of skills to the library at `prefix`.

    Every `SKILL.md` below `source` is a skill; `s3skills.transfer.localtree` documents
    the rule that maps its folder to an id (`report.mapping` shows the result).

    Args:
        store: The bucket.
        source: Any folder holding skills (at any depth), or one skill folder.
        prefix: The library prefix, ending with `/` (`alice/skills/`).
        category: Put every skill in this category instead of the one the rule picks.
        repository: Put every skill in the category `repository` (the CLI's
            `--category-from-repo` gives `s3skills.transfer.repository.repository_name`);
            folders that would then share an id get distinguishing categories under it.
        delete: Mirror: also remove remote files of the pushed skills that are not
            in the tree, and the remote skills that are not in the tree. When `source`
            is itself a skill folder, only the pushed skills are mirrored. A skill
            nested in another skill's folder in the library (`pdf/inner/SKILL.md`) is a
            separate skill, as for `rm`: never deleted, listed in `report.kept_nested`.
        dry_run: Compute the report, write nothing (the remote `SKILL.md` of changed
            skills is still read, to report conflicts and disabled skills; conflicts are
            listed in the report instead of raising).
        strict: Refuse the whole push (nothing written) when a skill has a problem the
            severity table (`s3skills.skills.format.severity`) has `strict_refuses`, a
            file is unsafe or ambiguous, or an id clashes with the library's folders.
            Without it, the push stores what the hosts load and leaves out (listed in
            `report.left_out`) the skills no host can read, the unsafe files and the
            ids that would nest in, or swallow, a library skill's folder; the remote
            copies of left-out skills are kept, even with `delete`.
        replace: Replace remote skills pushed from another folder (a folder pulled
            from the library replaces the copy it was pulled from without it). Without
            it such a skill is left out (in `report.conflicts` with both sources and
            `report.left_out`; the library's copy kept) and the rest is pushed; with
            `strict` the push is refused.
        enable: Store every pushed skill enabled, whatever its local `SKILL.md` says (a
            pulled one may say `enabled: false`); by default a skill disabled in the
            library stays disabled and a new one is stored as its `SKILL.md` says.
        disable: Store every pushed skill disabled (`enabled: false`). The skills whose
            state this changes are in `report.switched`.
        bucket_may_be_missing: With `dry_run`, plan a first push when the bucket does
            not exist yet (`push --dry-run --create-bucket`) instead of raising.
        progress: Called as `progress(path, done, total)` after each upload/deletion.
        concurrency: Uploads in flight.
        max_file_bytes: Larger files are refused.
        layout: The key layout `prefix` belongs to (`KeyLayout()` by default): the
            library's derived data (manifest, digest book) is written at this layout's
            keys (`KeyLayout.manifest_key`), and not at all where it has none.
        actor: Who the version records of the pushed skills name (None: the OS user).
        command: What they say wrote them.

    Returns:
        What was uploaded, skipped, deleted, refused and ignored, and the conflicts.

    Raises:
        PushRefused: With `strict`, what it refuses (above), copies pushed from another
            folder included unless `replace` (nothing written; `report` says what and why).
        SkillError: `source` is not a folder or holds no skill.
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError("prefix must end with '/'")
    if enable and disable:
        raise ValueError("give enable or disable, not both")
    flag = True if enable else False if disable else None
    tree = await asyncio.to_thread(
        scan_tree, Path(source), category=category, repository=repository, max_file_bytes=max_file_bytes
    )
    report = PushReport(dry_run=dry_run, refused=list(tree.refused), ignored=list(tree.ignored))
    report.problems = list(tree.problems)
    report.nested = list(tree.nested)
    report.duplicates = list(tree.duplicates)
    report.renamed = list(tree.renamed)
    report.mapping = {sid: folder or "." for sid, folder in sorted(tree.mapping.items())}
    if strict and (why := _strict_refusal(Path(source), tree, [])) is not None:
        raise PushRefused(why, report)  # before any request
    if not tree.skills:
        left = [f"{item.path}: {item.reason}" for item in tree.refused if item.path.endswith(SKILL_FILE)]
        if left:  # every skill was left out: say why, not "none found"
            more = f" (and {len(left) - 3} more)" if len(left) > 3 else ""
            raise SkillError(f"{source}: every skill was left out: {'; '.join(left[:3])}{more}")
        raise SkillError(f"{source}: no skills found (a skill is a folder with a SKILL.md, at any depth)")
    try:
        objects, _ = await store.alist(prefix)
    except BucketNotFound:
        if not (dry_run and bucket_may_be_missing):
            raise
        objects = []  # the bucket would be created: everything is new
    remote = {obj.key: obj for obj in objects}
    remote_ids = _remote_skills(objects, prefix)
    unreadable = _unreadable(tree)
    report.conflicts = _layout_conflicts(set(tree.skills) - set(unreadable), remote_ids)
    if strict and report.conflicts:
        raise PushRefused(str(_strict_refusal(Path(source), tree, report.conflicts)), report)
    excluded = {item.path for item in report.conflicts} | set(unreadable)
    report.left_out = sorted(excluded)
    report.skills = sorted(set(tree.skills) - excluded)
    protected = [p for item in tree.refused if (p := _protected(tree, item.path)) is not None]
    protected += [sid + "/" for sid in sorted(excluded)]  # a left-out skill's library copy stays
    files = [f for f in tree.files if f.skill not in excluded]
    keys = {f.key_rel: join_key(prefix, tuple(f.key_rel.split("/"))) for f in files}
    compare = [f for f in files if keys[f.key_rel] in remote and "-" not in remote[keys[f.key_rel]].etag]
    digests = await asyncio.to_thread(lambda: {f.key_rel: local_md5(f, max_file_bytes) for f in compare})
    forced: dict[str, bytes] = {}
    if flag is not None:  # the flag wins over each SKILL.md's frontmatter: compare what will be written
        forced, disagree = await asyncio.to_thread(with_flag, files, flag, max_file_bytes)
        digests |= {k: hashlib.md5(v, usedforsecurity=False).hexdigest() for k, v in forced.items() if k in digests}
        report.switched = sorted(sid for sid in disagree if keys[f"{sid}/{SKILL_FILE}"] not in remote)
    changed = [f for f in files if (o := remote.get(keys[f.key_rel])) is None or digests.get(f.key_rel) != o.etag]
    changed_md = [f for f in changed if f.key_rel == f"{f.skill}/{SKILL_FILE}" and keys[f.key_rel] in remote]
    overrides, unchanged = await aplan_skill_md(store, tree, prefix, changed_md, report, flag=flag, replace=replace)
    overrides = {**forced, **overrides}
    if not strict and (clashing := set(report.replaceable)):  # left out, the library's copy kept
        report.left_out = sorted(excluded | clashing)
        report.skills = [sid for sid in report.skills if sid not in clashing]
        report.switched = [sid for sid in report.switched if sid not in clashing]
        protected += [sid + "/" for sid in sorted(clashing)]
        files = [f for f in files if f.skill not in clashing]
        changed = [f for f in changed if f.skill not in clashing]
    report.switched.sort()
    if report.blocking and not dry_run:  # a dry run lists them
        raise PushRefused(f"{source}: {report.blocking_summary()}", report)
    uploads: list[LocalFile] = []
    changed_keys = {f.key_rel for f in changed}
    for f in files:
        obj = remote.get(keys[f.key_rel])
        if f.key_rel not in changed_keys or f.key_rel in unchanged:
            why = "unchanged (kept disabled)" if f.key_rel in unchanged else "unchanged"
            report.skipped.append(Item(f.key_rel, why, f.size))
        else:
            uploads.append(f)
            size = len(overrides[f.key_rel]) if f.key_rel in overrides else f.size
            report.uploaded.append(Item(f.key_rel, "new" if obj is None else "changed", size))
    deletions: list[str] = []
    if delete:
        mirrored = set(report.skills) | (set() if tree.is_skill_folder else remote_ids)
        kept = _nested_kept(remote_ids, set(report.skills))
        local_keys = set(keys.values())
        for key in sorted(remote):
            rel = key[len(prefix) :]
            if key in local_keys or any(_covers(p, rel) for p in protected) or skill_of(rel, mirrored) is None:
                continue
            if (inner := skill_of(rel, kept)) is not None:  # a separate skill, as `rm` keeps it
                report.kept_nested.append(inner)
                continue
            deletions.append(key)
            report.deleted.append(Item(rel, "not in the local tree", remote[key].size))
        report.kept_nested = sorted(set(report.kept_nested))
    if dry_run:
        return report
    layout = layout or KeyLayout()
    # Readers index from a listing while the mark is live: a push killed at any point below is
    # visible to the next reader (the mark expires unrenewed, and a reader's rewrite drops it).
    manifest_key = manifest_key_of(layout, prefix) if uploads or deletions else None
    async with marking(store, manifest_key, prefix, library_builder(store, prefix)) as mark:
        records, skill_mds = await _write(
            store, prefix, tree, uploads, deletions, keys, overrides, progress, concurrency, max_file_bytes
        )
        written = [keys[f.key_rel] for f in uploads if f.key_rel.endswith("/" + SKILL_FILE)]
        await anote_derived(store, prefix, layout, records, skill_mds, written, deletions, mark)
    owners = set(remote_ids) | set(report.skills)
    changed_skills = {f.skill for f in uploads} | {
        max(found, key=len)
        for k in deletions
        if (found := [sid for sid in owners if k[len(prefix) :].startswith(sid + "/")])
    }
    await arecord_versions(store, prefix, layout, changed_skills, actor, command)
    return report


async def _write(
    store: ObjectStore,
    prefix: str,
    tree: LocalTree,
    uploads: list[LocalFile],
    deletions: list[str],
    keys: dict[str, str],
    overrides: dict[str, bytes],
    progress: Progress | None,
    concurrency: int,
    max_file_bytes: int,
) -> tuple[dict[str, Record], dict[str, tuple[bytes, str]]]:
    """Upload and delete; returns the digest records of the files written and, by skill id,
    each `SKILL.md` stored with its ETag."""
    total, done = len(uploads) + len(deletions), 0
    records: dict[str, Record] = {}
    skill_mds: dict[str, tuple[bytes, str]] = {}  # skill id -> the SKILL.md bytes stored, its ETag
    if progress is not None:
        progress("", 0, total)  # the bar counts from the start, not from the first file done

    def upload(f: LocalFile) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal done
            data = overrides.get(f.key_rel)
            if data is None:
                data = await asyncio.to_thread(read_local, f.local, max_file_bytes, f.identity)
            if len(data) > max_file_bytes:  # it grew after the scan
                raise SkillError(f"{f.rel}: the file is over {max_file_bytes} bytes")
            is_md = f.key_rel == f"{f.skill}/{SKILL_FILE}"
            metadata = skill_md_metadata(tree, f.skill) if is_md else None
            key = keys[f.key_rel]
            etag = await store.aput(key, data, content_type=content_type_for(f.key_rel, data), metadata=metadata)
            records[key[len(prefix) :]] = record_of(key, data, etag)  # every key is join_key(prefix, ...)
            if is_md:
                skill_mds[f.skill] = (data, etag)
            done += 1
            if progress is not None:
                progress(f.key_rel, done, total)

        return run

    # Everything else first, then each SKILL.md: a skill appears only once complete.
    is_skill_md = [f.key_rel == f"{f.skill}/{SKILL_FILE}" for f in uploads]
    await gather_limited([upload(f) for f, last in zip(uploads, is_skill_md, strict=True) if not last], concurrency)
    await gather_limited([upload(f) for f, last in zip(uploads, is_skill_md, strict=True) if last], concurrency)
    # Deleting SKILL.md first makes a removed skill vanish from the index at once.
    for batch in (
        [k for k in deletions if k.endswith("/" + SKILL_FILE)],
        [k for k in deletions if not k.endswith("/" + SKILL_FILE)],
    ):
        if not batch:
            continue
        failed = await store.adelete_many(batch)
        if failed:
            raise S3SkillsError(f"delete: {_count(len(failed), 'object')} could not be deleted")
        done += len(batch)
        if progress is not None:
            progress(batch[-1][len(prefix) :], done, total)
    return records, skill_mds


push_tree = sync_method(apush_tree)
