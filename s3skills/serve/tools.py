"""`SkillTools`: a user's skills as MCP tools and prompts, for hosts without the skills extension.

Claude Desktop, Claude Code, Cursor and VS Code call tools and show prompts but do not
implement SEP-2640 yet. Beside the extension's methods, `SkillsServer(tools=True)` serves:

* `list_skills(query?, cursor?)`: the user's enabled skills, ranked for `query` (the
  agent's ranking) or by id, a page at a time (`cursor` from the previous page);
* `load_skill(name)`: the skill's whole `SKILL.md` and the list of its files;
* `read_skill_file(name, path)`: one file of the skill (text, an image, or a blob);
* one prompt per enabled skill, whose message holds the `SKILL.md`: named by its id when
  every host accepts it, else by a folded name (`s3skills.serve.prompt_names`); the
  description starts with `Skill <id>:`.

A skill is named by its id or, when unique, by its folder name, as in the agent's tools.
Everything goes through the same `SkillLibrary` as the agent: disabled skills do not
exist, a nested skill's files belong to the nested skill only, reads are bounded. Skills
whose names the extension refuses are served here too (they have no other way out).
A problem with a call (unknown skill, missing file) is a tool result with `isError`.

Arguments are bounded where they enter (`s3skills.config.Limits` of the library): a
`list_skills` query over `max_query_chars` is cut to it and the result says so; a name
over `max_name_chars`, a path over `max_path_chars`, or a prompt argument over
`max_query_chars` is refused with an error naming the cap. A query is ranked off the
event loop, in the tenant's own queue (`s3skills.serve.fairshare`).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable
from typing import Any, Protocol

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from s3skills.config import bounded_query, check_length
from s3skills.errors import ConfigurationError, FileTooLarge, InvalidPath, NotFound, SkillError
from s3skills.ids import SKILL_FILE
from s3skills.serve.entries import served, uri_of
from s3skills.serve.fairshare import TenantBusy, TenantLimiter, asearch_fair
from s3skills.serve.library_source import MAX_FILE_BYTES
from s3skills.serve.prompt_names import prompt_names
from s3skills.skills import Ranker, SkillLibrary
from s3skills.tenancy import Tenant


class SkillsHost(Protocol):
    """What the tools face needs of its server (`s3skills.serve.server.SkillsServer`)."""

    source: Any
    page_size: int

    def user(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The user a request is for."""
        ...

    async def call(self, coro: Awaitable[Any]) -> Any:
        """Await a library call, mapping its errors to protocol errors."""
        ...


__all__ = ["TOOL_NAMES", "SkillTools", "SkillsHost"]

TOOL_NAMES = ("list_skills", "load_skill", "read_skill_file")
_FAILURES = (SkillError, NotFound, InvalidPath, FileTooLarge)


_NAME_ARG = "The skill id (escrituras/compraventa), or its folder name or its name when unique."


def _schema(properties: dict[str, str], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": text} for name, text in properties.items()},
        "required": required,
        "additionalProperties": False,
    }


_TOOLS = [
    types.Tool(
        name="list_skills",
        title="List skills",
        description=(
            "List the skills available to you, best matches first when you give a query. Each skill is a "
            "folder of instructions (SKILL.md) and files for one kind of task. Call load_skill before using one."
        ),
        input_schema=_schema(
            {"query": "Words describing the task (optional).", "cursor": "nextCursor of the previous page."}, []
        ),
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    ),
    types.Tool(
        name="load_skill",
        title="Load a skill",
        description=(
            "Load a skill: its SKILL.md instructions and the list of its files. Follow the instructions; "
            "read the files they mention with read_skill_file."
        ),
        input_schema=_schema({"name": _NAME_ARG}, ["name"]),
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    ),
    types.Tool(
        name="read_skill_file",
        title="Read a file of a skill",
        description="Read one file of a skill, by its path inside the skill folder (references/guide.md).",
        input_schema=_schema(
            {"name": _NAME_ARG, "path": "The file's path inside the skill folder."},
            ["name", "path"],
        ),
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    ),
]


def _failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _arg(arguments: dict[str, Any], name: str, *, required: bool, cap: int | None = None) -> str | None:
    value = arguments.get(name)
    if value is None or value == "":
        if required:
            raise ValueError(f"'{name}' is required")
        return None
    if not isinstance(value, str):
        raise ValueError(f"'{name}' must be a string")
    return check_length(value, cap, f"'{name}'") if cap is not None else value


class SkillTools:
    """The tools and prompts face of a `SkillsServer` whose source has a `SkillLibrary`.

    Args:
        skills: The server (its user resolution, page size and source are used).
        ranker: Who ranks `list_skills(query)` (`s3skills.skills.Ranker`); lexical by default.
        limiter: Where queries are ranked (`TenantLimiter`); by default one sized by the
            library's `Limits.tenant_cpu_calls` and `tenant_cpu_queue`.

    Raises:
        TypeError: The server's source has no `library` and `tenant_of` (not a `LibrarySkillSource`).
    """

    def __init__(
        self, skills: SkillsHost, *, ranker: Ranker | None = None, limiter: TenantLimiter | None = None
    ) -> None:
        library = getattr(skills.source, "library", None)
        if not isinstance(library, SkillLibrary) or not callable(getattr(skills.source, "tenant_of", None)):
            raise TypeError("The tools face needs a LibrarySkillSource (a source with a SkillLibrary)")
        self.skills = skills
        self.library: SkillLibrary = library
        self.ranker = ranker
        self.limits = library.config.limits
        self.limiter = limiter or TenantLimiter(
            per_tenant=self.limits.tenant_cpu_calls, queue=self.limits.tenant_cpu_queue
        )

    def register(self, server: Server[Any]) -> None:
        """Add `tools/list`, `tools/call`, `prompts/list` and `prompts/get` to `server`."""
        server.add_request_handler("tools/list", types.PaginatedRequestParams, self._list_tools)
        server.add_request_handler("tools/call", types.CallToolRequestParams, self._call_tool)
        server.add_request_handler("prompts/list", types.PaginatedRequestParams, self._list_prompts)
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, self._get_prompt)

    def _tenant(self, ctx: ServerRequestContext[Any, Any]) -> Tenant:
        tenant: Tenant = self.skills.source.tenant_of(self.skills.user(ctx))
        return tenant

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(_TOOLS))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in TOOL_NAMES:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool {params.name!r}: use {', '.join(TOOL_NAMES)}")
        tenant = await self.skills.call(_now(self._tenant, ctx))
        arguments = params.arguments or {}
        names, paths = self.limits.max_name_chars, self.limits.max_path_chars
        try:
            if params.name == "list_skills":
                query = _arg(arguments, "query", required=False)
                work = self._list(tenant, query or "", _arg(arguments, "cursor", required=False, cap=names))
            elif params.name == "load_skill":
                work = self._load(tenant, str(_arg(arguments, "name", required=True, cap=names)))
            else:
                name = _arg(arguments, "name", required=True, cap=names)
                path = _arg(arguments, "path", required=True, cap=paths)
                work = self._read(tenant, str(name), str(path))
        except ValueError as exc:
            return _failed(f"Invalid arguments for {params.name}: {exc}")
        result: types.CallToolResult = await self.skills.call(work)
        return result

    async def _list(self, tenant: Tenant, query: str, cursor: str | None) -> types.CallToolResult:
        query, cut = bounded_query(query, self.limits.max_query_chars)
        try:
            page = await asearch_fair(
                self.library,
                self.limiter,
                query,
                tenant=tenant,
                limit=self.skills.page_size,
                cursor=cursor,
                ranker=self.ranker,
            )
        except (InvalidPath, TenantBusy) as exc:
            return _failed(str(exc))
        rows = [{"id": s.id, "name": s.metadata.name, "description": s.metadata.description} for s in page.skills]
        shown = query if len(query) <= 200 else query[:200] + "..."
        lines = [f"Note: {cut}."] if cut else []
        lines.append(f"{len(page.skills)} of {page.total} skills" + (f" for {shown!r}" if query else "") + ":")
        lines += [f"- {r['id']}: {r['description']}" for r in rows]
        if page.next_cursor:
            lines.append(f"More: call list_skills with cursor={page.next_cursor!r}.")
        lines.append("Load one with load_skill(name) before following it.")
        structured: dict[str, Any] = {"skills": rows, "total": page.total}
        if cut:
            structured["queryTruncated"] = cut
        if page.next_cursor:
            structured["nextCursor"] = page.next_cursor
        return types.CallToolResult(content=[types.TextContent(text="\n".join(lines))], structured_content=structured)

    async def _load(self, tenant: Tenant, name: str) -> types.CallToolResult:
        skill_id = name  # counted in the library's usage (no request: `SkillLibrary.count_use`)
        try:
            skill = await self.library.aget(name, tenant=tenant)  # the one fresh index read of the call
            skill_id = skill.id
            text = await self.library.askill_md(skill.id, tenant=tenant, cached=True)
            files = await self.library.afiles(skill.id, tenant=tenant)
        except ConfigurationError:
            raise  # the server's fault, not the call's: `SkillsServer.call` says the fix
        except _FAILURES as exc:
            self.library.count_use(skill_id, "skill_load", "error", tenant=tenant)
            return _failed(str(exc))
        self.library.count_use(skill.id, "skill_load", "ok", tenant=tenant)
        others = [f for f in files if f.path != SKILL_FILE]
        listing = "\n".join(f"- {f.path} ({f.size} bytes)" for f in others) or "(no other files)"
        body = (
            f"Skill {skill.id} ({uri_of((*skill.id.split('/'), SKILL_FILE))})\n\n{text}\n\n"
            f"Files of this skill (read them with read_skill_file(name={skill.id!r}, path=...)):\n{listing}"
        )
        structured = {
            "id": skill.id,
            "name": skill.metadata.name,
            "skillMd": text,
            "files": [{"path": f.path, "size": f.size} for f in files],
        }
        return types.CallToolResult(content=[types.TextContent(text=body)], structured_content=structured)

    async def _read(self, tenant: Tenant, name: str, path: str) -> types.CallToolResult:
        try:
            skill = await self.library.aget(name, tenant=tenant)
            body = await self.library.aopen(skill.id, path, tenant=tenant, max_bytes=MAX_FILE_BYTES)
        except ConfigurationError:
            raise  # the server's fault, not the call's: `SkillsServer.call` says the fix
        except _FAILURES as exc:
            return _failed(str(exc))
        mime, text = served(path, body.data)
        content: types.TextContent | types.ImageContent | types.EmbeddedResource
        if text is not None:
            content = types.TextContent(text=text)
        elif mime.startswith("image/"):
            content = types.ImageContent(data=base64.b64encode(body.data).decode(), mime_type=mime)
        else:
            uri = uri_of((*skill.id.split("/"), *path.strip("/").split("/")))
            blob = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(body.data).decode())
            content = types.EmbeddedResource(resource=blob)
        return types.CallToolResult(content=[content])

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListPromptsResult:
        tenant = await self.skills.call(_now(self._tenant, ctx))
        page = await self.skills.call(
            self.library.asearch("", limit=self.skills.page_size, cursor=params.cursor, tenant=tenant)
        )
        names = await self._prompt_names(tenant)
        prompts = [
            types.Prompt(
                name=names.get(s.id, s.id),
                title=s.metadata.name,
                description=f"Skill {s.id}: {s.metadata.description}",
            )
            for s in page.skills
        ]
        return types.ListPromptsResult(prompts=prompts, next_cursor=page.next_cursor)

    async def _prompt_names(self, tenant: Tenant) -> dict[str, str]:
        """`{skill id: prompt name}` of the tenant's skills (`s3skills.serve.prompt_names`)."""
        skills = await self.skills.call(self.library.aindex(tenant=tenant))
        return prompt_names(s.id for s in skills)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        try:
            check_length(params.name, self.limits.max_name_chars, "The prompt name")
            for key, value in (params.arguments or {}).items():
                check_length(f"{key}{value}", self.limits.max_query_chars, f"The prompt argument {key[:40]!r}")
        except ValueError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        tenant = await self.skills.call(_now(self._tenant, ctx))
        by_name = {name: skill_id for skill_id, name in (await self._prompt_names(tenant)).items()}
        skill = await self.skills.call(self.library.aget(by_name.get(params.name, params.name), tenant=tenant))
        text = await self.skills.call(self.library.askill_md(skill.id, tenant=tenant))
        message = (
            f"Use the skill {skill.id}. Its SKILL.md follows; read the files it mentions with "
            f"read_skill_file(name={skill.id!r}, path=...).\n\n{text}"
        )
        return types.GetPromptResult(
            description=f"Skill {skill.id}: {skill.metadata.description}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=message))],
        )


async def _now(fn: Any, *args: Any) -> Any:
    """Run a sync call where `SkillsServer.call` maps its errors (tenant checks raise)."""
    return fn(*args)
