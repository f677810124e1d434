"""The writes `SkillLibrary` makes to a user's library, each keeping its manifest current.

`LibraryWriter` is mixed into `SkillLibrary`: create a skill, enable or disable it,
remove it, or tell the library that skills were written some other way
(`anote_changed`, which `s3skills.transfer.apush_tree` and a rollback call). Every
write ends with a conditional update of the library's manifest
(`s3skills.skills.index.manifest.aupdate_manifest`), which creates the manifest from a
listing when there is none yet, so the next reader's index is one GET. A writer
hands over the `SKILL.md` bytes it stored, so they are not read back. A failure
there never undoes or fails the write (the manifest is derived data and is rebuilt
by the next reader).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial

from s3skills._loop import io_bound
from s3skills.config import Config
from s3skills.errors import NotFound, SkillError
from s3skills.ids import SKILL_FILE, SkillId, nested_in
from s3skills.media import content_type_for
from s3skills.paths import join_key
from s3skills.skills.format.parse import parse_skill_md, render_skill_md
from s3skills.skills.index.catalog import LibraryIndex, SkillCatalog
from s3skills.skills.index.manifest import LibraryBuilder, SkillEntry, aupdate_manifest
from s3skills.skills.versions.records import awrite_records
from s3skills.storage import ObjectStore
from s3skills.tenancy import Tenant

__all__ = ["LibraryWriter", "anote_changed", "library_builder"]


async def anote_changed(
    store: ObjectStore,
    prefix: str,
    skill_ids: Iterable[str],
    *,
    manifest_key: str | None = None,
    catalog: SkillCatalog | None = None,
    source: str = "user",
    written: Mapping[str, tuple[bytes, str]] | None = None,
    create: bool = True,
    mark: str | None = None,
) -> bool:
    """Record the current state of `skill_ids` in the manifest of the library at `prefix`.

    Args:
        store: The bucket.
        prefix: The library prefix (`users/ana/skills/`).
        skill_ids: Skills written, changed or removed.
        manifest_key: The manifest's key; by default `KeyLayout().manifest_key(prefix)`
            (the same sibling key in every built-in layout).
        catalog: The catalog whose cached index of `prefix` is then refreshed.
        source: `user` or `shared`.
        written: Skill id -> (the `SKILL.md` bytes stored, the ETag its PUT returned):
            their entries are built from these bytes, with no request. Every other
            skill costs 1 ranged GET of its `SKILL.md` head.
        create: With no manifest (or a damaged one), build it from a LIST of the
            library (reading only the `SKILL.md` files not in `written`) and create it
            conditionally; False leaves it for the next reader.
        mark: The writer's mark (`s3skills.skills.index.marks.marking`), cleared in the
            same update.

    Returns:
        True when the manifest records them (or there is none and `create` is False);
        False when it could not be updated and was removed.
    """
    from s3skills.layout import KeyLayout

    ids = sorted({str(SkillId.parse(sid)) for sid in skill_ids})
    if not ids and mark is None:
        return True
    try:
        key = manifest_key or KeyLayout().manifest_key(prefix)
    except ValueError:
        return True
    reader = catalog or SkillCatalog(store)
    # The entries of the SKILL.md files just stored, from their bytes: the same entry a reader
    # would build from a ranged GET of the object, with no request.
    known: dict[str, SkillEntry] = (
        await reader.heads.aentries_of(source, prefix, {str(SkillId.parse(s)): b for s, b in written.items()})
        if written
        else {}
    )

    async def read_entries(wanted: list[str]) -> dict[str, SkillEntry | None]:
        out: dict[str, SkillEntry | None] = {sid: known[sid] for sid in wanted if sid in known}
        rest = [sid for sid in wanted if sid not in known]
        if rest:
            out.update(await reader.aread_entries(source, prefix, rest))
        known.clear()  # handed over once: a retry after a conflict reads the objects themselves
        return out

    ok = await aupdate_manifest(
        store,
        key,
        prefix,
        ids,
        read_entries,
        source=source,
        max_entries=reader.limits.max_skills_per_library,
        build=partial(_abuild_entries, reader, source, prefix, dict(known)) if create else None,
        clear_mark=mark,
    )
    if catalog is not None:
        catalog.invalidate(prefix)
    return ok


def library_builder(store: ObjectStore, prefix: str, source: str = "user") -> LibraryBuilder:
    """What builds the whole manifest of the library at `prefix` from a listing (for a writer)."""
    return partial(_abuild_entries, SkillCatalog(store), source, prefix, {})


async def _abuild_entries(
    catalog: SkillCatalog, source: str, prefix: str, known: Mapping[str, SkillEntry]
) -> dict[str, SkillEntry]:
    """Every entry of a library from a LIST of it, for a writer creating its manifest.

    Only the `SKILL.md` files whose listed ETag matches no entry in `known` (nor in the
    catalog's cached index) are read: 1 ranged GET each.
    """
    scratch = LibraryIndex(source, prefix)
    scratch.entries = {**catalog.known_entries(prefix), **known}
    objects = await catalog.lister.alist(prefix)
    await catalog.lister.aapply(scratch, source, prefix, objects)
    return scratch.entries


class LibraryWriter:
    """Writes to the current tenant's own library (mixed into `SkillLibrary`)."""

    store: ObjectStore
    config: Config
    catalog: SkillCatalog
    _user: Callable[[Tenant | None], Tenant]

    def _own_prefix(self, tenant: Tenant | None) -> str:
        return self.config.layout.user_prefix(self._user(tenant).user_id)

    async def anote_changed(
        self,
        skill_ids: Iterable[str],
        *,
        tenant: Tenant | None = None,
        written: Mapping[str, tuple[bytes, str]] | None = None,
        command: str = "write",
    ) -> bool:
        """Bring the manifest of the tenant's library up to date for these skills, and record them.

        Call it after writing skills without `SkillLibrary` (the library's own writers
        call it themselves). Costs 1 ranged GET per skill not in `written` (skill id ->
        the `SKILL.md` bytes stored and their ETag), 1 GET and 1 PUT of the manifest;
        with no manifest yet, a LIST of the library builds it whole (see `anote_changed`).
        Then each skill's new version gets a version record (1 ListObjectVersions and
        1 conditional PUT each; `s3skills.skills.versions.records`) naming `Config.actor`
        and `command`.
        """
        await self._arecord(skill_ids, tenant, command)
        if not self.config.manifest:
            self.catalog.invalidate(self._own_prefix(tenant))
            return True
        prefix = self._own_prefix(tenant)
        try:
            key = self.config.layout.manifest_key(prefix)
        except ValueError:
            self.catalog.invalidate(prefix)
            return True
        return await anote_changed(
            self.store, prefix, skill_ids, manifest_key=key, catalog=self.catalog, written=written
        )

    async def _arecord(self, skill_ids: Iterable[str], tenant: Tenant | None, command: str) -> None:
        prefix = self._own_prefix(tenant)
        try:
            records = self.config.layout.records_prefix(prefix)
        except ValueError:  # this layout keeps no derived data for the prefix
            return
        await awrite_records(self.store, prefix, records, list(skill_ids), actor=self.config.actor, command=command)

    @io_bound
    async def aflush(self) -> None:
        """Wait for the manifest writes that an index left in the background (see `SkillCatalog`).

        A short-lived process (a CLI command) calls it before it exits, so the manifest
        its index rebuilt is stored for the next one.
        """
        await self.catalog.aflush()

    async def acreate(self, skill_id: str, files: Mapping[str, bytes], *, tenant: Tenant | None = None) -> str:
        """Create a skill from its files (`SKILL.md` first), each only if absent.

        Args:
            skill_id: `name` or `category/name`.
            files: Path relative to the skill folder -> content; must hold `SKILL.md`.

        Returns:
            The skill folder's key prefix.

        Raises:
            Conflict: A file already exists (a concurrent create of the same skill
                loses at its `SKILL.md`, before writing anything).
            InvalidPath: A malformed id or file path.
        """
        sid = str(SkillId.parse(skill_id))
        if SKILL_FILE not in files:
            raise SkillError(f"cannot create '{sid}': no {SKILL_FILE}")
        folder = self._own_prefix(tenant) + sid + "/"
        order = [SKILL_FILE, *sorted(rel for rel in files if rel != SKILL_FILE)]
        etags: dict[str, str] = {}
        for rel in order:
            key = join_key(folder, tuple(rel.split("/")))
            etags[rel] = await self.store.aput(
                key, files[rel], if_none_match=True, content_type=content_type_for(rel, files[rel])
            )
        await self.anote_changed(
            [sid], tenant=tenant, written={sid: (files[SKILL_FILE], etags[SKILL_FILE])}, command="create"
        )
        return folder

    async def aset_enabled(self, skill_id: str, enabled: bool, *, tenant: Tenant | None = None) -> bool:
        """Set `enabled` in a skill's `SKILL.md` (a disabled one too) with a conditional PUT.

        Returns:
            Whether the file changed (False: it already was so).

        Raises:
            SkillError: No such skill. InvalidSkill: its SKILL.md cannot be parsed.
            Conflict: The SKILL.md changed while it was being edited.
        """
        sid = str(SkillId.parse(skill_id))
        key = self._own_prefix(tenant) + sid + "/" + SKILL_FILE
        try:
            body = await self.store.aget(key, max_bytes=self.config.limits.max_skill_md_bytes)
        except NotFound:
            raise SkillError(f"Skill '{sid}' not found.") from None
        parsed = parse_skill_md(body.data, folder=SkillId.parse(sid).leaf)
        if parsed.metadata.enabled == enabled:
            return False
        text = render_skill_md(parsed.metadata.model_copy(update={"enabled": enabled}), parsed.body)
        data = text.encode("utf-8")
        etag = await self.store.aput(
            key,
            data,
            if_match=body.etag,
            content_type="text/markdown; charset=utf-8",
            metadata=body.metadata,  # keeps where a push recorded the skill came from
        )
        await self.anote_changed(
            [sid], tenant=tenant, written={sid: (data, etag)}, command="enable" if enabled else "disable"
        )
        return True

    async def aremove(self, skill_id: str, *, tenant: Tenant | None = None) -> int:
        """Delete a skill's folder, its `SKILL.md` first (it vanishes from the index at once).

        A skill is one folder: skills nested in it are other skills and are kept.
        Returns the number of files deleted.

        Raises:
            SkillError: No such skill, or some files could not be deleted.
        """
        sid = str(SkillId.parse(skill_id))
        prefix = self._own_prefix(tenant)
        folder = prefix + sid + "/"
        objects, _ = await self.store.alist(folder)
        keys = [o.key for o in objects]
        if folder + SKILL_FILE not in keys:
            raise SkillError(f"Skill '{sid}' not found.")
        nested = nested_in(sid, [str(s) for k in keys if (s := SkillId.from_key(k, prefix)) is not None])
        kept = tuple(f"{prefix}{n}/" for n in nested)
        keys = [k for k in keys if not k.startswith(kept)]
        gone = [sid]
        first = [k for k in keys if k.endswith("/" + SKILL_FILE)]
        failed = await self.store.adelete_many(first)
        failed += await self.store.adelete_many([k for k in keys if k not in set(first)])
        await self.anote_changed(gone, tenant=tenant, command="rm")
        if failed:
            raise SkillError(f"{len(failed)} file(s) of '{sid}' could not be deleted")
        return len(keys)
