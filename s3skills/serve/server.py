"""`SkillsServer`: an MCP server for each user's skill library (the skills extension, SEP-2640).

It declares `io.modelcontextprotocol/skills` (with `directoryRead`) under
`capabilities.extensions`, and serves:

* `skills/list` (paginated, `nextCursor`) and `skills/get`: one entry per enabled skill,
  with its `skill://` URI, its frontmatter as written and the complete manifest of its files
  (`sha256:` digest and size of each);
* `resources/read` of every file of a skill, as text or as a base64 blob;
* `resources/list` (the `SKILL.md` of each skill, paginated) and `resources/directory/read`.

Who a call is for comes from the transport only: a fixed user (stdio, one person's library)
or the verified bearer token of the HTTP request (`s3skills.serve.auth`). No request
parameter can name a user.

Digests come from `s3skills.serve.fingerprints`: cached by (file, ETag), recalled from
the source's records (the library's digest book), or read once per file version. A page of
`skills/list` lists its skills' files in one call to the source (`files_many`). A manifest
never carries a stale digest: the server remembers, per connection, which version of each
file it last described, and a `resources/read` that finds another version answers with an
error asking the client to fetch the skill's entry again (`skills/get`) instead of bytes
that do not match what the client holds.
"""

from __future__ import annotations

import base64
import logging
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from s3skills.errors import FileTooLarge, InvalidPath, NotFound, S3SkillsError, SkillError
from s3skills.ids import SKILL_FILE
from s3skills.serve.auth import user_of_token
from s3skills.serve.entries import (
    DigestCache,
    Fingerprint,
    decode_cursor,
    encode_cursor,
    mime_type,
    parse_uri,
    text_or_none,
    uri_of,
)
from s3skills.serve.fingerprints import Fingerprinter
from s3skills.serve.source import SkillFile, SkillSource
from s3skills.skills import SkillInfo

__all__ = ["EXTENSION_ID", "MAX_SKILL_BYTES", "MAX_SKILL_FILES", "SkillsServer"]

logger = logging.getLogger(__name__)

EXTENSION_ID = "io.modelcontextprotocol/skills"
MAX_SKILL_FILES = 512
"""The extension's limit on files per skill; a larger skill is not served."""
MAX_SKILL_BYTES = 16 * 1024 * 1024
"""The extension's limit on the total size of a skill; a larger skill is not served."""
_DIRECTORY = "inode/directory"


class GetSkillParams(types.RequestParams):
    """Params of `skills/get`."""

    uri: str


class DirectoryReadParams(types.RequestParams):
    """Params of `resources/directory/read`."""

    uri: str
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class _Target:
    """A URI resolved to a skill: the URI's skill path (`base`) and the rest (`rest`)."""

    skill: SkillInfo
    base: tuple[str, ...]
    rest: tuple[str, ...]


class _Refused(Exception):
    """A skill that exists but is not served as a skill; the message says why."""


def _invalid(message: str, **data: Any) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=message, data=data or None)


class SkillsServer:
    """The skills extension over a `SkillSource`, on the MCP SDK's low-level `Server`.

    Args:
        source: Where the skills come from.
        user_id: The one user served (stdio). None: each request's verified token decides.
        token_user: Maps a verified `AccessToken` to a user id (HTTP).
        page_size: Skills per `skills/list` and `resources/list` page.
        concurrency: Files hashed at once while building a page.
        digests: A digest cache to share (a fresh one otherwise).
        name: The server name announced to clients.
        held_per_connection: How many file versions are remembered per connection (or user).
        max_users: How many users' remembered versions are kept (2026-07-28 clients).
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
        held_per_connection: int = 20_000,
        max_users: int = 10_000,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.source = source
        self.user_id = user_id
        self.token_user = token_user
        self.page_size = page_size
        self.fingerprinter = Fingerprinter(source, digests if digests is not None else DigestCache(), concurrency)
        self.held_per_connection = held_per_connection
        self.max_users = max_users
        self._held_by_user: OrderedDict[str, OrderedDict[tuple[str, str, str], str]] = OrderedDict()
        self._held: weakref.WeakKeyDictionary[Any, OrderedDict[tuple[str, str, str], str]] = weakref.WeakKeyDictionary()
        self.server: Server[Any] = Server(
            name,
            instructions=(
                "Skills of the signed-in user, as skill:// resources. Call skills/list for the "
                "entries (frontmatter and digests), then resources/read the files you need."
            ),
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self.server.add_request_handler("skills/list", types.PaginatedRequestParams, self._skills_list)
        self.server.add_request_handler("skills/get", GetSkillParams, self._skills_get)
        self.server.add_request_handler("resources/directory/read", DirectoryReadParams, self._directory_read)
        self.server.extensions[EXTENSION_ID] = {"directoryRead": True}

    # -- who and what ---------------------------------------------------------------------

    def _user(self, ctx: ServerRequestContext[Any, Any]) -> str:
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

    async def _call(self, coro: Awaitable[Any]) -> Any:
        """Await a source call, mapping its errors to protocol errors."""
        try:
            return await coro
        except (SkillError, NotFound, InvalidPath, FileTooLarge) as exc:
            raise _invalid(str(exc)) from None
        except S3SkillsError as exc:
            logger.warning("skill source failed: %s", exc)
            raise MCPError(code=INTERNAL_ERROR, message=f"The skill library is unavailable: {exc}") from None

    async def _resolve(self, user: str, segments: tuple[str, ...]) -> tuple[_Target | None, list[SkillInfo]]:
        """The skill a URI path falls in: the longest skill id it starts with, else a unique leaf."""
        skills: list[SkillInfo] = await self._call(self.source.list_skills(user))
        by_id = {s.id: s for s in skills}
        for n in range(len(segments), 0, -1):
            skill = by_id.get("/".join(segments[:n]))
            if skill is not None:
                return _Target(skill, segments[:n], segments[n:]), skills
        same_leaf = [s for s in skills if s.leaf == segments[0]]
        if len(same_leaf) == 1 and not any(s.id.split("/")[0] == segments[0] for s in skills):
            return _Target(same_leaf[0], segments[:1], segments[1:]), skills
        return None, skills

    def _held_for(self, ctx: ServerRequestContext[Any, Any], user: str) -> OrderedDict[tuple[str, str, str], str]:
        """The file versions last described on this connection (handshake era), else to this user.

        A 2026-07-28 exchange is stateless (each request is its own connection), so there
        the memory is per user: the versions last described to any of the user's clients.
        """
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            held = self._held.get(connection)
            if held is None:
                held = self._held[connection] = OrderedDict()
            return held
        held = self._held_by_user.get(user)
        if held is None:
            held = self._held_by_user[user] = OrderedDict()
            while len(self._held_by_user) > self.max_users:
                self._held_by_user.popitem(last=False)
        self._held_by_user.move_to_end(user)
        return held

    def _hold(self, ctx: ServerRequestContext[Any, Any], user: str, skill_id: str, files: list[SkillFile]) -> None:
        held = self._held_for(ctx, user)
        for f in files:
            held[(user, skill_id, f.path)] = f.etag
            held.move_to_end((user, skill_id, f.path))
        while len(held) > self.held_per_connection:
            held.popitem(last=False)

    @staticmethod
    def _finish(ctx: ServerRequestContext[Any, Any], result: dict[str, Any]) -> dict[str, Any]:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            result = {"resultType": "complete", **result, "ttlMs": 0, "cacheScope": "private"}
        return result

    # -- entries ------------------------------------------------------------------------------

    @staticmethod
    def _check(skill: SkillInfo, files: list[SkillFile]) -> None:
        """Raises `_Refused` when the listed files break a limit of the extension."""
        if not any(f.path == SKILL_FILE for f in files):
            raise _Refused(f"skill {skill.id} has no SKILL.md")
        if len(files) > MAX_SKILL_FILES:
            raise _Refused(f"skill {skill.id} has {len(files)} files; the limit is {MAX_SKILL_FILES}")
        if (total := sum(f.size for f in files)) > MAX_SKILL_BYTES:
            raise _Refused(f"skill {skill.id} holds {total} bytes; the limit is {MAX_SKILL_BYTES}")

    @staticmethod
    def _build(
        skill: SkillInfo,
        base: tuple[str, ...],
        files: list[SkillFile],
        fingerprints: dict[tuple[str, str], tuple[SkillFile, Fingerprint]],
    ) -> tuple[dict[str, Any], list[SkillFile]]:
        """A skill's entry and the file versions it describes.

        Raises:
            _Refused: The skill breaks a rule of the extension (name, frontmatter).
        """
        found = [pair for f in files if (pair := fingerprints.get((skill.id, f.path))) is not None]
        frontmatter: dict[str, Any] | None = None
        for f, fp in found:
            if f.path == SKILL_FILE:
                if fp.frontmatter is None:
                    raise _Refused(f"skill {skill.id}: {fp.problem or 'SKILL.md is gone'}")
                frontmatter = fp.frontmatter
        if frontmatter is None:
            raise _Refused(f"skill {skill.id}: SKILL.md was deleted while it was read")
        if frontmatter["name"] != base[-1]:
            raise _Refused(
                f"skill {skill.id}: its name {frontmatter['name']!r} differs from its folder {base[-1]!r};"
                " the skills extension needs them equal (rename one)"
            )
        entry = {
            "uri": uri_of((*base, SKILL_FILE)),
            "frontmatter": frontmatter,
            "resources": [
                {"uri": uri_of((*base, *f.path.split("/"))), "digest": fp.digest, "size": fp.size} for f, fp in found
            ],
        }
        return entry, [f for f, _ in found]

    async def _entry(
        self, user: str, skill: SkillInfo, base: tuple[str, ...]
    ) -> tuple[dict[str, Any], list[SkillFile]]:
        """One skill's entry, from one listing of its folder (`skills/get`).

        Raises:
            _Refused: The skill breaks a rule of the extension (name, limits, frontmatter).
        """
        files: list[SkillFile] = await self._call(self.source.files(user, skill.id))
        self._check(skill, files)
        fingerprints = await self._call(self.fingerprinter.fingerprints(user, [(skill.id, f) for f in files]))
        return self._build(skill, base, files, fingerprints)

    # -- handlers ------------------------------------------------------------------------

    async def _skills_list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        user = self._user(ctx)
        try:
            after = decode_cursor(params.cursor)
        except ValueError as exc:
            raise _invalid(str(exc)) from None
        skills: list[SkillInfo] = await self._call(self.source.list_skills(user))
        rest = [s for s in skills if after is None or s.id > after]
        page = rest[: self.page_size]
        by_skill: dict[str, list[SkillFile]] = await self._call(self.source.files_many(user, [s.id for s in page]))
        served: list[tuple[SkillInfo, list[SkillFile]]] = []
        for skill in page:
            try:
                self._check(skill, by_skill.get(skill.id, []))
            except _Refused as exc:
                logger.warning("not served as a skill: %s", exc)
                continue
            served.append((skill, by_skill[skill.id]))
        wanted = [(skill.id, f) for skill, files in served for f in files]
        fingerprints = await self._call(self.fingerprinter.fingerprints(user, wanted))
        entries: list[dict[str, Any]] = []
        for skill, files in served:
            try:
                entry, held = self._build(skill, tuple(skill.id.split("/")), files, fingerprints)
            except _Refused as exc:
                logger.warning("not served as a skill: %s", exc)
                continue
            self._hold(ctx, user, skill.id, held)
            entries.append(entry)
        result: dict[str, Any] = {"skills": entries}
        if len(rest) > len(page):
            result["nextCursor"] = encode_cursor(page[-1].id)
        return self._finish(ctx, result)

    async def _skills_get(self, ctx: ServerRequestContext[Any, Any], params: GetSkillParams) -> dict[str, Any]:
        user = self._user(ctx)
        target = await self._target(user, params.uri)
        if target is None or target.rest != (SKILL_FILE,):
            raise _invalid(f"No skill is served at {params.uri}", uri=params.uri)
        try:
            entry, files = await self._entry(user, target.skill, target.base)
        except _Refused as exc:
            raise _invalid(f"{params.uri} is not served as a skill: {exc}", uri=params.uri) from None
        self._hold(ctx, user, target.skill.id, files)
        return self._finish(ctx, {"skill": entry})

    async def _target(self, user: str, uri: str) -> _Target | None:
        try:
            segments = parse_uri(uri)
        except InvalidPath as exc:
            raise _invalid(str(exc), uri=uri) from None
        target, _ = await self._resolve(user, segments)
        return target

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        user = self._user(ctx)
        uri = str(params.uri)
        target = await self._target(user, uri)
        if target is None:
            raise _invalid(f"No resource is served at {uri}", uri=uri)
        if not target.rest:
            raise _invalid(f"{uri} is a directory: use resources/directory/read", uri=uri)
        skill, path = target.skill, "/".join(target.rest)
        skill_uri = uri_of((*target.base, SKILL_FILE))
        held = self._held_for(ctx, user).get((user, skill.id, path))
        changed = _invalid(
            f"{uri} changed after the skill was listed; call skills/get for {skill_uri} "
            "(or skills/list) and read it again",
            uri=uri,
            skill=skill_uri,
            reason="changed",
        )
        files: list[SkillFile] = await self._call(self.source.files(user, skill.id))
        listed = {f.path: f for f in files}
        if path not in listed:
            if held is not None:
                raise changed
            raise _invalid(f"No resource is served at {uri}", uri=uri)
        read: tuple[bytes, str] | None = await self._call(self._read_or_none(user, skill.id, path))
        if read is None:
            raise changed if held is not None else _invalid(f"No resource is served at {uri}", uri=uri)
        data, etag = read
        if held is not None and held != etag:
            raise changed
        self.fingerprinter.note_read(user, skill.id, replace(listed[path], etag=etag), data)
        mime = mime_type(path)
        text = text_or_none(data, mime)
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
        user = self._user(ctx)
        try:
            after = decode_cursor(params.cursor if params is not None else None)
        except ValueError as exc:
            raise _invalid(str(exc)) from None
        skills: list[SkillInfo] = await self._call(self.source.list_skills(user))
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

    async def _directory_read(self, ctx: ServerRequestContext[Any, Any], params: DirectoryReadParams) -> dict[str, Any]:
        user = self._user(ctx)
        try:
            segments = parse_uri(params.uri)
        except InvalidPath as exc:
            raise _invalid(str(exc), uri=params.uri) from None
        target, skills = await self._resolve(user, segments)
        children: dict[str, bool] = {}  # name -> is a directory
        if target is not None:
            files: list[SkillFile] = await self._call(self.source.files(user, target.skill.id))
            depth = len(target.rest)
            for f in files:
                parts = tuple(f.path.split("/"))
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
        resources = [
            {"uri": uri_of((*base, name)), "name": name, "mimeType": _DIRECTORY if is_dir else mime_type(name)}
            for name, is_dir in sorted(children.items())
        ]
        result: dict[str, Any] = {"resources": resources}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            result = {"resultType": "complete", **result}
        return result
