"""`LibrarySkillSource`: the MCP server's `SkillSource` over a `SkillLibrary`.

The library decides what a user may see (enabled skills only; a nested skill's folder
is not part of the outer one; a code skill has no files) and where each skill lives.
A skill's file listing costs one LIST of its folder, a page of skills one LIST per library
(per 1,000 keys); reading a file costs one GET. Keys under a folder that do not make a
valid relative path are left out.

Fingerprints the server computed are kept in each library's digest book
(`s3skills.skills.index.digests`): recalling them costs one GET per library involved.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from s3skills.errors import InvalidPath, S3SkillsError
from s3skills.lines import fit
from s3skills.paths import VPath, check_identity
from s3skills.serve.entries import Fingerprint
from s3skills.serve.fingerprints import fingerprint_from
from s3skills.serve.source import SkillFile
from s3skills.skills import SkillFile as LibraryFile
from s3skills.skills import SkillInfo, SkillLibrary
from s3skills.skills.index.digests import DigestBooks, Record
from s3skills.tenancy import Tenant

__all__ = ["MAX_FILE_BYTES", "LibrarySkillSource", "check_file_path"]

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 16 * 1024 * 1024
"""Largest file read (the skills extension's limit for a whole skill)."""


def check_file_path(path: str) -> tuple[str, ...]:
    """The segments of a path relative to a skill folder, with `VPath`'s rules.

    Raises:
        InvalidPath: Empty, absolute, or with `..`, `.`, `//`, a backslash, NUL or a
            control character.
    """
    if not isinstance(path, str) or path == "" or path.startswith("/") or path.endswith("/"):
        raise InvalidPath(f"Invalid path {path!r}: use a relative path such as 'references/a.md'")
    return VPath.parse("/" + path).parts


class LibrarySkillSource:
    """A `SkillSource` over a `SkillLibrary` (S3 skills only: MCP serves files).

    Args:
        library: The skills of the bucket (its layout and shared library).
        max_file_bytes: Largest file `read` returns; a larger one raises `FileTooLarge`.
    """

    def __init__(self, library: SkillLibrary, *, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.library = library
        self.max_file_bytes = max_file_bytes
        self.books = DigestBooks(library.store, library.config.layout)

    def tenant_of(self, user_id: str) -> Tenant:
        """The tenant of a served user, through the same checks as the agent backend's.

        Raises:
            InvalidPath: Not an allow-listed id.
            TenantError: An id the key layout reserves (in the seeds layout, a user named
                like the shared library, `threads` or `tickets`).
        """
        return self.library.config.check_tenant(Tenant(user_id=check_identity(user_id, "user id")))

    def count_load(self, user_id: str, skill_id: str) -> None:
        """Count a load in the usage of the library the user's index finds the skill in (no I/O)."""
        try:
            tenant = self.tenant_of(user_id)
        except S3SkillsError:
            return  # the server only serves checked users: nothing to count for another id
        self.library.count_use(skill_id, "skill_load", "ok", tenant=tenant)

    async def list_skills(self, user_id: str) -> list[SkillInfo]:
        """The user's enabled S3 skills (user library over shared), sorted by id."""
        skills = await self.library.aindex(tenant=self.tenant_of(user_id))
        return [s for s in skills if s.source != "code"]

    async def files(self, user_id: str, skill_id: str) -> list[SkillFile]:
        """The skill's files from one LIST of its folder (no reads)."""
        return _served(skill_id, await self.library.afiles(skill_id, tenant=self.tenant_of(user_id)))

    async def files_many(self, user_id: str, skill_ids: Sequence[str]) -> dict[str, list[SkillFile]]:
        """The files of several skills from one LIST per library (per 1,000 keys), no reads."""
        listed = await self.library.afiles_many(skill_ids, tenant=self.tenant_of(user_id))
        return {skill_id: _served(skill_id, files) for skill_id, files in listed.items()}

    def _by_library(self, user_id: str, files: Sequence[SkillFile]) -> dict[str, list[tuple[str, SkillFile]]]:
        """Files grouped by the library holding their key, with the key relative to it."""
        prefixes = sorted((p for _, p in self.library.libraries(self.tenant_of(user_id))), key=len, reverse=True)
        grouped: dict[str, list[tuple[str, SkillFile]]] = {}
        for f in files:
            key = f.key or ""
            library = next((p for p in prefixes if key.startswith(p)), None)
            if library is not None:
                grouped.setdefault(library, []).append((key[len(library) :], f))
        return grouped

    async def recall(self, user_id: str, files: Sequence[SkillFile]) -> dict[str, Fingerprint]:
        """Fingerprints from the digest books (1 GET per library), for the listed versions only."""
        out: dict[str, Fingerprint] = {}
        for library, group in self._by_library(user_id, files).items():
            try:
                records = await self.books.arecall(library)
            except S3SkillsError as exc:
                logger.info("digest book of %s not read: %s", library, exc)
                continue
            for rel, f in group:
                r = records.get(rel)
                if r is not None and f.key and r.matches(f.etag, f.size):
                    out[f.key] = fingerprint_from(r)
        return out

    async def remember(self, user_id: str, known: Sequence[tuple[SkillFile, Fingerprint]]) -> None:
        """Record fingerprints in the digest books (1 conditional PUT per library; best effort)."""
        fingerprints = {id(f): fp for f, fp in known}
        for library, group in self._by_library(user_id, [f for f, _ in known]).items():
            records = {}
            for rel, f in group:
                fp = fingerprints[id(f)]
                records[rel] = Record(f.etag, fp.size, fp.digest.removeprefix("sha256:"), fp.frontmatter, fp.problem)
            await self.books.aremember(library, records)

    async def read(self, user_id: str, skill_id: str, path: str) -> tuple[bytes, str]:
        """One GET of the file (after the index lookup, usually cached).

        Raises:
            InvalidPath: A bad path.
            NotFound: No such file.
            FileTooLarge: The file is over `max_file_bytes`.
        """
        check_file_path(path)
        body = await self.library.aopen(skill_id, path, tenant=self.tenant_of(user_id), max_bytes=self.max_file_bytes)
        return body.data, body.etag


def _served(skill_id: str, files: Sequence[LibraryFile]) -> list[SkillFile]:
    """The files a client may be given, by path; keys that make no valid path are left out."""
    found = []
    for f in files:
        try:
            parts = check_file_path(f.path)
        except InvalidPath:
            logger.warning("%s", fit(f"skill {skill_id}: {f.path!r} is not a valid file path; it is not served"))
            continue
        found.append(SkillFile(path="/".join(parts), size=f.size, etag=f.etag, key=f.key))
    return sorted(found, key=lambda f: f.path)
