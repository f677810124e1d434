"""`use_skill`: the agent runs a skill (seed 000), code or S3, with one tool.

`SkillExecutionMiddleware` brings the `use_skill(skill_name, input=None)` tool.
It runs an available, enabled code skill of the registry (`CodeSkill.execute`),
or a loaded S3 skill as a `PromptSkill` (its result is its instructions).

How a skill reaches the agent's tools: for a `use_skill` call, the middleware's
`wrap_tool_call` receives the call's `ToolCallRequest` (its `runtime.tools` are
the ToolNode's tools: deepagents' `ls`, `read_file`, `glob`, `grep`, ... and
the application's) and the handler that runs a tool through the inner
middleware, injecting the call's `ToolRuntime`. `ctx.tools.dispatch` sends a
new request for the other tool through that handler, so the backend sees the
same tenant, and the tool's own checks and the inner middleware's gating apply.
The middleware is outermost of the skills middleware, so (like the agent's own
calls) a dispatched call does not pass through deepagents' outer middleware
(large-result eviction, human-in-the-loop interrupts).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel, Field

from s3skills.aio import run_sync
from s3skills.config import check_length
from s3skills.errors import S3SkillsError, SkillError
from s3skills.fs import S3Backend
from s3skills.ids import SkillId
from s3skills.skills import SkillRegistry, log_usage
from s3skills.skills.code.executable import (
    ExecutableSkill,
    PromptSkill,
    SkillContext,
    SkillResult,
    SkillToolError,
    make_context,
)
from s3skills.skills.code.execution import arun_skill, enter_skill, run_skill
from s3skills.tenancy import Tenant, run_config, thread_skills

__all__ = ["USE_SKILL", "SkillExecutionMiddleware", "UseSkillInput"]

USE_SKILL = "use_skill"

JSONValue = dict[str, Any] | list[Any] | str | int | float | bool | None

ToolResponse = ToolMessage | Command[Any]
Handler = Callable[[ToolCallRequest], ToolResponse]
AsyncHandler = Callable[[ToolCallRequest], Awaitable[ToolResponse]]


class UseSkillInput(BaseModel):
    """The model-facing arguments of `use_skill`."""

    skill_name: str = Field(description="The skill's id (e.g. 'informes/analizar') or its unique folder name or name.")
    input: JSONValue = Field(default=None, description="What the skill should work on: text or a JSON value.")


_DOC = """Run a skill and get its result.

A code skill from the skill index runs directly (no need to load it first). An S3 skill
must be loaded first (cargar_habilidad); running it returns its instructions applied to
your input. The answer is the skill's output, or an error saying what went wrong."""


@dataclass(frozen=True)
class _Scope:
    """The `use_skill` call being run: how to run other tools from inside it."""

    request: ToolCallRequest
    handler: Handler | None = None
    ahandler: AsyncHandler | None = None
    loop: asyncio.AbstractEventLoop | None = None


_SCOPE: ContextVar[_Scope | None] = ContextVar("s3skills_use_skill_scope", default=None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _tool_text(name: str, out: object) -> str:
    if isinstance(out, Command):
        raise SkillToolError(
            f"the tool '{name}' changes the agent's state, which a skill cannot do; let the agent call it"
        )
    if isinstance(out, ToolMessage):
        if out.status == "error":
            raise SkillToolError(f"{name}: {out.text}")
        return out.text
    return str(out)


class _AgentTools:
    """A `ToolDispatcher` over the agent's own tools, through the middleware handler."""

    def __init__(self, scope: _Scope, runtime: ToolRuntime[Any, Any], approval: frozenset[str]) -> None:
        self._scope = scope
        self._runtime = runtime
        self._approval = approval
        self.tools: dict[str, BaseTool] = {t.name: t for t in runtime.tools}
        self._ids = itertools.count(1)

    def _request(self, name: str, args: dict[str, Any]) -> ToolCallRequest:
        tool = self.tools.get(name)
        if tool is None:
            raise SkillToolError(f"the agent has no tool named '{name}'")
        if name in self._approval:
            raise SkillToolError(f"the tool '{name}' needs a person's approval in this agent; a skill cannot call it")
        call_id = f"{self._runtime.tool_call_id}.{next(self._ids)}"
        call = ToolCall(name=name, args=args, id=call_id, type="tool_call")
        runtime = replace(self._runtime, tool_call_id=call_id)
        return replace(self._scope.request, tool_call=call, tool=tool, runtime=runtime)

    def call(self, name: str, args: dict[str, Any]) -> str:
        scope = self._scope
        request = self._request(name, args)
        if scope.handler is not None:
            return _tool_text(name, scope.handler(request))
        if scope.ahandler is None or scope.loop is None:  # pragma: no cover - a scope has one of them
            raise SkillToolError("no way to run tools in this run")
        if _running_loop() is scope.loop:
            raise SkillToolError("an async execute must call tools with `await ctx.tools.adispatch(...)`")
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(scope.ahandler(request)), scope.loop)
        return _tool_text(name, future.result())

    async def acall(self, name: str, args: dict[str, Any]) -> str:
        scope = self._scope
        if scope.ahandler is not None and _running_loop() is scope.loop:
            return _tool_text(name, await scope.ahandler(self._request(name, args)))
        return await asyncio.to_thread(self.call, name, args)


async def _as_coroutine(value: Awaitable[ToolResponse]) -> ToolResponse:
    return await value


@dataclass(frozen=True)
class _Prepared:
    skill: ExecutableSkill
    ctx: SkillContext
    chain: tuple[str, ...]
    kind: str


class _Refused(Exception):
    """`use_skill` refuses the call before running anything (the message is for the model)."""

    def __init__(self, message: str, skill: str) -> None:
        super().__init__(message)
        self.skill = skill


class SkillExecutionMiddleware(AgentMiddleware[Any, Any]):
    """Adds `use_skill`, and lets the skills it runs call the agent's tools.

    Put it before `SkillsPromptMiddleware` (as `create_skills_agent` does), so
    the calls a skill makes pass through that middleware's gating too.

    Args:
        backend: The agent's `S3Backend` (tenancy, S3 skills, skill files).
        registry: The code skills; those with an `execute` can run.
        model: The model for `ctx.llm`; by default the agent's own (the model of
            its last model call; it is the same object for every tenant).
        timeout: Seconds one skill may run (nested skills count inside their caller).
        max_depth: How deep skills may call skills through `use_skill`.
        approval_required: Tools that need a person's approval in this agent
            (the keys of `interrupt_on`): a skill's call to one is refused, since
            human-in-the-loop only sees the model's own tool calls.
    """

    def __init__(
        self,
        backend: S3Backend,
        *,
        registry: SkillRegistry | None = None,
        model: BaseChatModel | None = None,
        timeout: float = 60.0,
        max_depth: int = 4,
        approval_required: Iterable[str] = (),
    ) -> None:
        super().__init__()
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        self.backend = backend
        self.library = backend.skills.with_registry(registry)
        self.registry = registry
        self.model = model
        self.timeout = timeout
        self.max_depth = max_depth
        self.approval_required = frozenset(approval_required)
        self._agent_model: BaseChatModel | None = None
        self.tools = [
            StructuredTool.from_function(
                func=self._use_skill,
                coroutine=self._ause_skill,
                name=USE_SKILL,
                description=_DOC,
                args_schema=UseSkillInput,
            )
        ]

    # -- the tool -----------------------------------------------------------------------------

    def _use_skill(self, skill_name: str, runtime: ToolRuntime[Any, Any], input: JSONValue = None) -> ToolMessage:
        started = time.perf_counter()
        try:
            prepared = run_sync(self._prepare(skill_name, input, runtime))
        except _Refused as refusal:
            return self._refusal(refusal, runtime, started)
        result = run_skill(prepared.skill, prepared.ctx, prepared.chain, prepared.kind)
        return _message(prepared, result, runtime)

    async def _ause_skill(
        self, skill_name: str, runtime: ToolRuntime[Any, Any], input: JSONValue = None
    ) -> ToolMessage:
        started = time.perf_counter()
        try:
            prepared = await self._prepare(skill_name, input, runtime)
        except _Refused as refusal:
            return self._refusal(refusal, runtime, started)
        result = await arun_skill(prepared.skill, prepared.ctx, prepared.chain, prepared.kind)
        return _message(prepared, result, runtime)

    def _refusal(self, refusal: _Refused, runtime: ToolRuntime[Any, Any], started: float) -> ToolMessage:
        tenant = _tenant_or_none(self.backend)
        log_usage(
            "skill_execution",
            skill=refusal.skill,
            user=tenant.user_id if tenant else None,
            thread=tenant.thread_id if tenant else None,
            duration_ms=(time.perf_counter() - started) * 1000,
            outcome="refused",
        )
        return ToolMessage(
            content=f"Error: {refusal}",
            tool_call_id=str(runtime.tool_call_id),
            name=USE_SKILL,
            status="error",
            artifact={"skill": refusal.skill, "success": False, "error": str(refusal)},
        )

    async def _prepare(self, skill_name: str, input: JSONValue, runtime: ToolRuntime[Any, Any]) -> _Prepared:
        limits = self.backend.skills.config.limits
        try:  # the caps of `s3skills.config.Limits`, where the model's arguments enter
            check_length(str(skill_name), limits.max_name_chars, "'skill_name'")
            check_length(json.dumps(input, ensure_ascii=False), limits.max_args_chars, "'input' (as JSON)")
        except (ValueError, TypeError) as exc:
            raise _Refused(f"refused: {exc}", str(skill_name)[: limits.max_name_chars]) from None
        scope = _SCOPE.get()
        if scope is None:
            raise _Refused("use_skill runs only in an agent built with SkillExecutionMiddleware", str(skill_name))
        try:
            tenant = self.backend.tenant()
            skill_id, skill, kind = await self._resolve(str(skill_name), tenant, runtime)
        except S3SkillsError as exc:
            raise _Refused(str(exc), str(skill_name)) from None
        except Exception as exc:  # e.g. an application's is_available: never abort the run
            raise _Refused(f"cannot run '{skill_name}': {type(exc).__name__}: {exc}", str(skill_name)) from exc
        try:
            chain = enter_skill(skill_id, self.max_depth)
        except SkillError as exc:
            raise _Refused(str(exc), skill_id) from None
        dispatcher = _AgentTools(scope, runtime, self.approval_required)
        required = list(skill.metadata.tools_required)
        missing = [t for t in required if t not in dispatcher.tools]
        if missing:
            raise _Refused(
                f"the skill '{skill_id}' needs the tool(s) {', '.join(missing)}, which this agent does not have",
                skill_id,
            )
        ctx = make_context(
            skill_id=skill_id,
            input=input,
            library=self.library,
            dispatcher=dispatcher,
            tools_required=required,
            model=self.model or self._agent_model,
            config=ensure_config(),
            user_id=tenant.user_id,
            thread_id=tenant.thread_id,
            ticket_id=tenant.ticket_id,
            depth=len(chain),
            timeout=self.timeout,
        )
        return _Prepared(skill, ctx, chain, kind)

    async def _resolve(
        self, name: str, tenant: Tenant, runtime: ToolRuntime[Any, Any]
    ) -> tuple[str, ExecutableSkill, str]:
        """The skill `name` means: a runnable code skill, else a loaded S3 skill."""
        code_ids = (
            []
            if self.registry is None
            else [s.id for s in self.registry.list_skills(run_config(tenant)) if s.metadata.enabled]
        )
        state_loaded = thread_skills(runtime.state).loaded  # client input: validated
        loaded = list(dict.fromkeys([*state_loaded, *tenant.loaded_skills]))
        code_id = _match(name, code_ids)
        if code_id is not None and self.registry is not None:
            code = self.registry.get(code_id)
            if not isinstance(code, ExecutableSkill):
                raise SkillError(
                    f"the skill '{code_id}' brings tools and instructions but nothing to run: "
                    "load it with cargar_habilidad instead"
                )
            return code_id, code, "code"
        s3_id = _match(name, [s for s in loaded if s not in code_ids])
        if s3_id is None:  # not a loaded id or leaf: perhaps a skill's frontmatter name
            try:
                known = await self.library.aget(name, tenant=tenant)
            except SkillError:
                runnable = ", ".join([*code_ids, *loaded]) or "none"
                raise SkillError(f"no skill '{name}' can run here (runnable: {runnable})") from None
            if known.id not in loaded:
                raise SkillError(f"the skill '{known.id}' is not loaded: load it with cargar_habilidad first")
            s3_id = known.id
        # Disabled since it was loaded: not found, like everywhere else.
        info = await self.library.aget(s3_id, tenant=tenant)
        # The version this thread loaded (its pin), as the prompt shows it; a changed skill on an
        # unversioned bucket raises SkillChanged, which asks the model to reload it.
        pin = tenant.skill_versions.get(info.id)
        return s3_id, PromptSkill(info, await self.library.ainstructions_pinned(info, pin, tenant=tenant)), "prompt"

    # -- middleware hooks --------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolResponse:
        """Keep, for a `use_skill` call, how to run the agent's other tools."""
        if request.tool_call["name"] != USE_SKILL:
            return handler(request)
        token = _SCOPE.set(_Scope(request, handler=handler))
        try:
            return handler(request)
        finally:
            _SCOPE.reset(token)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncHandler) -> ToolResponse:
        """Async version of `wrap_tool_call`."""
        if request.tool_call["name"] != USE_SKILL:
            return await handler(request)
        token = _SCOPE.set(_Scope(request, ahandler=handler, loop=asyncio.get_running_loop()))
        try:
            return await handler(request)
        finally:
            _SCOPE.reset(token)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        """Note the agent's model (used by skills when no model was given)."""
        self._agent_model = request.model
        return handler(request)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        """Async version of `wrap_model_call`."""
        self._agent_model = request.model
        return await handler(request)


def _match(name: str, ids: Sequence[str]) -> str | None:
    """`name` as an id, else as the folder name of exactly one id."""
    wanted = name.strip().strip("/")
    if wanted in ids:
        return wanted
    by_leaf = [sid for sid in ids if SkillId.parse(sid).leaf == wanted]
    if len(by_leaf) > 1:
        raise SkillError(f"'{name}' names several skills ({', '.join(by_leaf)}): use the full id")
    return by_leaf[0] if by_leaf else None


def _tenant_or_none(backend: S3Backend) -> Tenant | None:
    try:
        return backend.tenant()
    except S3SkillsError:
        return None


def _message(prepared: _Prepared, result: SkillResult, runtime: ToolRuntime[Any, Any]) -> ToolMessage:
    sid = prepared.ctx.skill_id
    artifact = {
        "skill": sid,
        "kind": prepared.kind,
        "success": result.success,
        "error": result.error,
        "metadata": result.metadata,
    }
    if result.success:
        content, status = result.to_text(), "success"
    else:
        content, status = f"Error: the skill '{sid}' failed: {result.error}", "error"
    return ToolMessage(
        content=content, tool_call_id=str(runtime.tool_call_id), name=USE_SKILL, status=status, artifact=artifact
    )
