"""`SkillsServer`: an MCP server for each user's skill library (the skills extension, SEP-2640).

It declares `io.modelcontextprotocol/skills` (with `directoryRead`) under
`capabilities.extensions`, on the 2026-07-28 `server/discover` and on the 2025-11-25
`initialize` handshake alike (`s3skills.serve.protocol.declare_extensions`), and serves:

* `skills/list` (paginated, `nextCursor`) and `skills/get`: one entry per enabled skill whose name the
  extension accepts (`s3skills.skills.format.naming`), with its `skill://` URI, its frontmatter as a YAML
  1.2 parser reads the file, and its files' manifest, nested skills' included (`sha256:` digest, size);
* `resources/read` of every file of a skill, as text or as a base64 blob;
* `resources/list` (the `SKILL.md` of each skill, paginated), `resources/templates/list`
  (the `skill://` template) and `resources/directory/read` (paginated);
* with `tools=True` (`s3skills.serve.tools`), the same library as MCP tools and prompts,
  for hosts without the extension.

Who a call is for comes from the transport only: a fixed user (stdio, one person's library)
or the verified bearer token of the HTTP request (`s3skills.serve.auth`). No request
parameter can name a user.

The server keeps nothing per connection or per user that changes an answer (only which users' unlisted
skills were already logged), so any number of replicas can answer one client. Digests come from
`s3skills.serve.fingerprints` (cached by file and ETag, recalled from the library's digest book, or read
once per file version). A file changed after a client listed it is served as it is now: its digest then
differs from the client's, which is how the extension tells a client to fetch the entry again.
"""

from __future__ import annotations

import base64
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST

from s3skills import __version__
from s3skills.errors import InvalidPath, NotFound, S3SkillsError
from s3skills.ids import SKILL_FILE
from s3skills.lines import fit, listing
from s3skills.serve.auth import user_of_token
from s3skills.serve.entries import (
    DigestCache,
    Fingerprint,
    decode_cursor,
    encode_cursor,
    mime_type,
    parse_uri,
    served,
    uri_of,
)
from s3skills.serve.fingerprints import Fingerprinter
from s3skills.serve.instructions import BOTH_FACES, EXTENSION_FACE, TOOLS_FACE
from s3skills.serve.protocol import (
    DirectoryReadParams,
    GetSkillParams,
    declare_extensions,
    finish,
    hide_internal_errors,
    protocol_error,
    tailor_instructions,
)
from s3skills.serve.source import CountsLoads, SkillFile, SkillSource
from s3skills.skills import Ranker, SkillInfo
from s3skills.skills.format.naming import unservable_reason, unservable_skills

__all__ = ["EXTENSION_ID", "MAX_SKILL_BYTES", "MAX_SKILL_FILES", "SkillsServer"]

logger = logging.getLogger(__name__)

EXTENSION_ID = "io.modelcontextprotocol/skills"
MAX_SKILL_FILES = 512
"""The extension's limit on files per skill; a larger skill is not served."""
MAX_SKILL_BYTES = 16 * 1024 * 1024
"""The extension's limit on the total size of a skill; a larger skill is not served."""
_DIRECTORY = "inode/directory"
_PRIVATE = CacheHint(ttl_ms=0, scope="private")


@dataclass(frozen=True, slots=True)
class _Target:
    """A URI resolved to a skill: the URI's skill path (`base`) and the rest (`rest`)."""

    skill: SkillInfo
    base: tuple[str, ...]
    rest: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Item:
    """One file of a skill's tree: its path below the skill folder, and the skill that owns it."""

    path: str
    owner: str
    file: SkillFile


class _Refused(Exception):
    """A skill that exists but is not served as a skill; the message says why."""


def _invalid(message: str, **data: Any) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=message, data=data or None)


def _nested(skill: SkillInfo, skills: list[SkillInfo]) -> list[SkillInfo]:
    """The served skills inside `skill`'s folder (ids are canonical: a string prefix is a folder)."""
    inside = skill.id + "/"
    return [s for s in skills if s.id.startswith(inside)]


class SkillsServer:
    """The skills extension over a `SkillSource`, on the MCP SDK's low-level `Server`.

    Args:
        source: Where the skills come from.
        user_id: The one user served (stdio). None: each request's verified token decides.
        token_user: Maps a verified `AccessToken` to a user id (HTTP).
        page_size: Skills per `skills/list` and `resources/list` page, children per
            `resources/directory/read` page.
        concurrency: Files hashed at once while building a page.
        digests: A digest cache to share (a fresh one otherwise).
        name: The server name announced to clients (its version is the package's).
        tools: Also serve the library as MCP tools and prompts (`s3skills.serve.tools`),
            for hosts without the extension; needs a source with a `SkillLibrary`
            (`LibrarySkillSource`).
        ranker: Who ranks the tools face's `list_skills(query)` (`s3skills.skills.Ranker`);
            the lexical one by default.
        limiter: The tools face's `s3skills.serve.fairshare.TenantLimiter` (servers may share one).
    """

    def __init__(
        self,
        source: SkillSource,
        *,
        user_id: str | None = None,
        token_user: Callable[[AccessToken], str] = user_of_token,
        page_size: int = 50,
        concurrency: int = 8,
        digests: DigestCache | None = None,
        name: str = "s3skills",
        tools: bool = False,
        ranker: Ranker | None = None,
        limiter: Any = None,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.source = source
        self.user_id = user_id
        self.token_user = token_user
        self.page_size = page_size
        self.fingerprinter = Fingerprinter(source, digests if digests is not None else DigestCache(), concurrency)
        self._reported: OrderedDict[str, None] = OrderedDict()
        self.server: Server[Any] = Server(
            name,
            version=__version__,
            instructions=BOTH_FACES if tools else EXTENSION_FACE,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_list_resource_templates=self._list_templates,
            cache_hints={
                "resources/list": _PRIVATE,
                "resources/read": _PRIVATE,
                "resources/templates/list": _PRIVATE,
                "tools/list": _PRIVATE,
                "prompts/list": _PRIVATE,
            },
        )
        self.server.add_request_handler("skills/list", types.PaginatedRequestParams, self._skills_list)
        self.server.add_request_handler("skills/get", GetSkillParams, self._skills_get)
        self.server.add_request_handler("resources/directory/read", DirectoryReadParams, self._directory_read)
        self.server.extensions[EXTENSION_ID] = {"directoryRead": True}
        self.server.middleware.append(hide_internal_errors)
        self.server.middleware.append(declare_extensions(self.server.extensions))
        if tools:  # the client's declared capabilities at initialize decide which face to describe
            self.server.middleware.append(
                tailor_instructions(EXTENSION_ID, with_extension=EXTENSION_FACE, without_extension=TOOLS_FACE)
            )
        self.tools = None
        if tools:
            from s3skills.serve.tools import SkillTools

            self.tools = SkillTools(self, ranker=ranker, limiter=limiter)
            self.tools.register(self.server)

    # -- who and what ---------------------------------------------------------------------

    def user(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The user a request is for: the fixed one (stdio), else its verified token's."""
        if self.user_id is not None:
            return self.user_id
        token: AccessToken | None = None
        scope = getattr(ctx.request, "scope", None)
        user = scope.get("user") if isinstance(scope, dict) else None
        if isinstance(user, AuthenticatedUser):
            token = user.access_token
        if token is None:
            token = get_access_token()
        if token is None:
            raise MCPError(code=INVALID_REQUEST, message="Authentication required: send a bearer token")
        try:
            return self.token_user(token)
        except InvalidPath as exc:
            raise MCPError(code=INVALID_REQUEST, message=f"The token does not name a valid user: {exc}") from None

    async def call(self, coro: Awaitable[Any]) -> Any:
        """Await a source call, mapping its errors to protocol errors (`protocol_error`)."""
        try:
            return await coro
        except S3SkillsError as exc:
            raise protocol_error(exc) from None

    async def skills(self, user: str) -> list[SkillInfo]:
        """The user's skills (enabled), reporting once per user those the extension cannot list."""
        skills: list[SkillInfo] = await self.call(self.source.list_skills(user))
        if user not in self._reported:
            self.report_unservable(user, skills)
        return skills

    def report_unservable(self, user: str, skills: list[SkillInfo]) -> list[tuple[str, str]]:
        """Log, once per user, the skills `skills/list` leaves out for their names: a count line,
        then `id: reason` lines (the first 10, then how many more; `s3skills mcp --check` lists all)."""
        self._reported[user] = None
        while len(self._reported) > 10_000:
            self._reported.popitem(last=False)
        refused = unservable_skills(skills)
        if refused:
            head = f"{len(refused)} of {len(skills)} skills of {user} are not listed by skills/list"
            head += " (the tools face still serves them):"
            items = [f"{sid}: {why}" for sid, why in refused]
            logger.warning("%s", "\n".join(listing(head, items, "`s3skills mcp --check`")))
        return refused

    async def _resolve(self, user: str, segments: tuple[str, ...]) -> tuple[_Target | None, list[SkillInfo]]:
        """The skill a URI path falls in: the longest skill id it starts with, else a unique
        leaf (then a nested skill inside it, if the rest starts with one)."""
        skills = await self.skills(user)
        by_id = {s.id: s for s in skills}
        for n in range(len(segments), 0, -1):
            skill = by_id.get("/".join(segments[:n]))
            if skill is not None:
                return _Target(skill, segments[:n], segments[n:]), skills
        same_leaf = [s for s in skills if s.leaf == segments[0]]
        if len(same_leaf) != 1 or any(s.id.split("/")[0] == segments[0] for s in skills):
            return None, skills
        outer, rest = same_leaf[0], segments[1:]
        for n in range(len(rest), 0, -1):
            nested = by_id.get(outer.id + "/" + "/".join(rest[:n]))
            if nested is not None:
                return _Target(nested, (segments[0], *rest[:n]), rest[n:]), skills
        return _Target(outer, segments[:1], rest), skills

    # -- entries ------------------------------------------------------------------------------

    @staticmethod
    def _tree(skill: SkillInfo, nested: list[SkillInfo], by_skill: dict[str, list[SkillFile]]) -> list[_Item]:
        """Every file under a skill's folder: its own, then its nested skills' (paths below the folder)."""
        items = [_Item(f.path, skill.id, f) for f in by_skill.get(skill.id, [])]
        for inner in nested:
            rel = inner.id[len(skill.id) + 1 :]
            items.extend(_Item(f"{rel}/{f.path}", inner.id, f) for f in by_skill.get(inner.id, []))
        return sorted(items, key=lambda i: i.path)

    @staticmethod
    def _check(skill: SkillInfo, base: tuple[str, ...], tree: list[_Item]) -> None:
        """Raises `_Refused` when the skill breaks a rule of the extension (name, limits)."""
        reason = unservable_reason("/".join(base), skill.metadata.name)
        if reason is not None:
            raise _Refused(f"skill {skill.id}: {reason}")
        if not any(i.path == SKILL_FILE for i in tree):
            raise _Refused(f"skill {skill.id} has no SKILL.md")
        if len(tree) > MAX_SKILL_FILES:
            raise _Refused(f"skill {skill.id} has {len(tree)} files; the limit is {MAX_SKILL_FILES}")
        if (total := sum(i.file.size for i in tree)) > MAX_SKILL_BYTES:
            raise _Refused(f"skill {skill.id} holds {total} bytes; the limit is {MAX_SKILL_BYTES}")

    @staticmethod
    def _build(
        skill: SkillInfo,
        base: tuple[str, ...],
        tree: list[_Item],
        fingerprints: dict[tuple[str, str], tuple[SkillFile, Fingerprint]],
    ) -> dict[str, Any]:
        """A skill's entry.

        Raises:
            _Refused: The skill breaks a rule of the extension (name, frontmatter).
        """
        found = [(i, pair[1]) for i in tree if (pair := fingerprints.get((i.owner, i.file.path))) is not None]
        frontmatter: dict[str, Any] | None = None
        for item, fp in found:
            if item.path == SKILL_FILE:
                if fp.frontmatter is None:
                    raise _Refused(f"skill {skill.id}: {fp.problem or 'SKILL.md is gone'}")
                frontmatter = fp.frontmatter
        if frontmatter is None:
            raise _Refused(f"skill {skill.id}: SKILL.md was deleted while it was read")
        reason = unservable_reason("/".join(base), frontmatter["name"])
        if reason is not None:
            raise _Refused(f"skill {skill.id}: {reason}")
        return {
            "uri": uri_of((*base, SKILL_FILE)),
            "frontmatter": frontmatter,
            "resources": [
                {"uri": uri_of((*base, *i.path.split("/"))), "digest": fp.digest, "size": fp.size} for i, fp in found
            ],
        }

    async def _entries(
        self, user: str, wanted: list[tuple[SkillInfo, tuple[str, ...]]], skills: list[SkillInfo]
    ) -> list[dict[str, Any] | _Refused]:
        """The entries of some skills, from one listing per library; a refusal where one is not served."""
        nested = {s.id: _nested(s, skills) for s, _ in wanted}
        ids = list(dict.fromkeys([*(s.id for s, _ in wanted), *(n.id for ns in nested.values() for n in ns)]))
        by_skill: dict[str, list[SkillFile]] = await self.call(self.source.files_many(user, ids)) if ids else {}
        trees: list[list[_Item] | _Refused] = []
        for skill, base in wanted:
            tree = self._tree(skill, nested[skill.id], by_skill)
            try:
                self._check(skill, base, tree)
            except _Refused as exc:
                trees.append(exc)
                continue
            trees.append(tree)
        pairs = [(i.owner, i.file) for t in trees if not isinstance(t, _Refused) for i in t]
        unique = list({(owner, f.path): (owner, f) for owner, f in pairs}.values())
        fingerprints = await self.call(self.fingerprinter.fingerprints(user, unique))
        out: list[dict[str, Any] | _Refused] = []
        for (skill, base), built in zip(wanted, trees, strict=True):
            if isinstance(built, _Refused):
                out.append(built)
                continue
            try:
                out.append(self._build(skill, base, built, fingerprints))
            except _Refused as exc:
                out.append(exc)
        return out

    # -- handlers ------------------------------------------------------------------------

    @staticmethod
    def _after(cursor: str | None) -> str | None:
        try:
            return decode_cursor(cursor)
        except ValueError as exc:
            raise _invalid(str(exc)) from None

    async def _skills_list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        user = self.user(ctx)
        after = self._after(params.cursor)
        skills = await self.skills(user)
        listable = [s for s in skills if unservable_reason(s.id, s.metadata.name) is None]
        rest = [s for s in listable if after is None or s.id > after]
        page = rest[: self.page_size]
        entries: list[dict[str, Any]] = []
        for entry in await self._entries(user, [(s, tuple(s.id.split("/"))) for s in page], skills):
            if isinstance(entry, _Refused):
                logger.warning("%s", fit(f"not served as a skill: {entry}"))
            else:
                entries.append(entry)
        result: dict[str, Any] = {"skills": entries}
        if len(rest) > len(page):
            result["nextCursor"] = encode_cursor(page[-1].id)
        return finish(ctx, result)

    async def _skills_get(self, ctx: ServerRequestContext[Any, Any], params: GetSkillParams) -> dict[str, Any]:
        user = self.user(ctx)
        target, skills = await self._target(user, params.uri)
        if target is None or target.rest != (SKILL_FILE,):
            raise _invalid(f"No skill is served at {params.uri}", uri=params.uri)
        (entry,) = await self._entries(user, [(target.skill, target.base)], skills)
        if isinstance(entry, _Refused):
            raise _invalid(f"{params.uri} is not served as a skill: {entry}", uri=params.uri)
        return finish(ctx, {"skill": entry})

    async def _target(self, user: str, uri: str) -> tuple[_Target | None, list[SkillInfo]]:
        try:
            segments = parse_uri(uri)
        except InvalidPath as exc:
            raise _invalid(str(exc), uri=uri) from None
        return await self._resolve(user, segments)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        user = self.user(ctx)
        uri = str(params.uri)
        target, _ = await self._target(user, uri)
        if target is None:
            raise _invalid(f"No resource is served at {uri}", uri=uri)
        if not target.rest:
            raise _invalid(f"{uri} is a directory: use resources/directory/read", uri=uri)
        skill, path = target.skill, "/".join(target.rest)
        files: list[SkillFile] = await self.call(self.source.files(user, skill.id))
        listed = {f.path: f for f in files}
        read = await self.call(self._read_or_none(user, skill.id, path)) if path in listed else None
        if read is None:
            raise _invalid(f"No resource is served at {uri}", uri=uri)
        data, etag = read
        self.fingerprinter.note_read(user, skill.id, replace(listed[path], etag=etag, size=len(data)), data)
        if path == SKILL_FILE and isinstance(self.source, CountsLoads):
            self.source.count_load(user, skill.id)  # a host loads a skill by reading its SKILL.md
        mime, text = served(path, data)
        content: types.TextResourceContents | types.BlobResourceContents
        if text is not None:
            content = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
        else:
            content = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode())
        return types.ReadResourceResult(contents=[content])

    async def _read_or_none(self, user: str, skill_id: str, path: str) -> tuple[bytes, str] | None:
        try:
            return await self.source.read(user, skill_id, path)
        except NotFound:
            return None

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        user = self.user(ctx)
        after = self._after(params.cursor if params is not None else None)
        skills = await self.skills(user)
        rest = [s for s in skills if after is None or s.id > after]
        page = rest[: self.page_size]
        resources = [
            types.Resource(
                uri=uri_of((*s.id.split("/"), SKILL_FILE)),
                name=s.metadata.name,
                description=s.metadata.description,
                mime_type="text/markdown",
            )
            for s in page
        ]
        next_cursor = encode_cursor(page[-1].id) if len(rest) > len(page) else None
        return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        self.user(ctx)
        template = types.ResourceTemplate(
            uri_template="skill://{+path}",
            name="skill-file",
            title="A file of a skill",
            description=(
                "A file of one of your skills: skill://<skill id>/SKILL.md, or any file the skill's "
                "entry lists (skills/get). Skill ids are folder paths such as escrituras/compraventa."
            ),
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def _directory_read(self, ctx: ServerRequestContext[Any, Any], params: DirectoryReadParams) -> dict[str, Any]:
        user = self.user(ctx)
        after = self._after(params.cursor)
        target, skills = await self._target(user, params.uri)
        segments = parse_uri(params.uri)
        children: dict[str, bool] = {}  # name -> is a directory
        if target is not None:
            nested = _nested(target.skill, skills)
            ids = [target.skill.id, *(n.id for n in nested)]
            by_skill: dict[str, list[SkillFile]] = await self.call(self.source.files_many(user, ids))
            depth = len(target.rest)
            for item in self._tree(target.skill, nested, by_skill):
                parts = tuple(item.path.split("/"))
                if parts == target.rest:
                    raise _invalid(f"{params.uri} is not a directory resource", uri=params.uri)
                if len(parts) > depth and parts[:depth] == target.rest:
                    children[parts[depth]] = children.get(parts[depth], False) or len(parts) > depth + 1
            base = (*target.base, *target.rest)
        else:  # a folder of skill folders (a category)
            for s in skills:
                parts = tuple(s.id.split("/"))
                if len(parts) > len(segments) and parts[: len(segments)] == segments:
                    children[parts[len(segments)]] = True
            base = segments
        if not children and (target is None or target.rest):
            raise _invalid(f"No directory is served at {params.uri}", uri=params.uri)
        names = [n for n in sorted(children) if after is None or n > after]
        page = names[: self.page_size]
        resources: list[dict[str, str]] = []
        for n in page:  # a listing has no bytes: the name's type, none when the name says nothing
            mime = _DIRECTORY if children[n] else mime_type(n)
            resources.append({"uri": uri_of((*base, n)), "name": n} | ({"mimeType": mime} if mime else {}))
        result: dict[str, Any] = {"resources": resources}
        if len(names) > len(page):
            result["nextCursor"] = encode_cursor(page[-1])
        return finish(ctx, result)
