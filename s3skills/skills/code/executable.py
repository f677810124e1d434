"""Executable skills: skills the agent *runs* with the `use_skill` tool.

(The API of the project's design document "seed 000", executable skills.) Two kinds:

- `CodeSkill`: Python of the host application, registered in a `SkillRegistry`
  (never code read from S3). Its `execute(ctx)` orchestrates: it calls the
  agent's tools through `ctx.tools.dispatch(name, args)` (only those named in its
  `tools_required`), asks the model through `ctx.llm.complete(prompt)`, reads its
  own folder through `ctx.files`, and returns a `SkillResult`. `execute` may be
  `def` or `async def`: in an `async def execute` (a running event loop) the same
  calls return awaitables, so `await ctx.tools.dispatch(...)` and
  `await ctx.llm.complete(...)` work as written; in a `def execute` they return
  the value. One async implementation (`adispatch`, `acomplete`, `files.aread`,
  also callable directly) serves both.
- `PromptSkill`: an S3 skill; running it hands back its SKILL.md instructions.

`s3skills.skills.code.execution` runs one skill under the limits: a nesting depth (a
skill calling itself, directly or through another, is refused), a time limit,
and every exception turned into `SkillResult(success=False, error=...)`. Each
run is recorded in the usage log (`skill_execution`). The LangChain wiring (the
tool, how tools are reached) lives in `tools/use_skill.py`.

Exceptions (all `SkillError`): `ToolNotAllowed` (also `PermissionError`),
`SkillToolError`, `SkillTimeout` (also `TimeoutError`), `SkillRecursion`
(also `RecursionError`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from s3skills._loop import run_sync
from s3skills.errors import NotFound, SkillError
from s3skills.paths import VPath
from s3skills.skills.format.model import SkillInfo, SkillMetadata
from s3skills.tenancy import Tenant


class _HasPath(Protocol):
    @property
    def path(self) -> str: ...


class _HasData(Protocol):
    @property
    def data(self) -> bytes: ...


class SkillFileSource(Protocol):
    """What `ctx.files` reads a skill's folder through (`SkillLibrary` is one)."""

    async def afiles(self, name: str, *, tenant: Tenant | None = None) -> Sequence[_HasPath]: ...

    async def aopen(self, name: str, path: str, *, tenant: Tenant | None = None) -> _HasData: ...


__all__ = [
    "CodeSkill",
    "ExecutableSkill",
    "PromptSkill",
    "SkillContext",
    "SkillFiles",
    "SkillLLM",
    "SkillRecursion",
    "SkillResult",
    "SkillTimeout",
    "SkillToolError",
    "SkillTools",
    "ToolDispatcher",
    "ToolNotAllowed",
    "in_event_loop",
    "make_context",
]


class ToolNotAllowed(SkillError, PermissionError):
    """A skill dispatched a tool it did not declare in `tools_required`."""


class SkillToolError(SkillError):
    """A dispatched tool reported an error, or cannot be called from a skill."""


class SkillTimeout(SkillError, TimeoutError):
    """The skill ran out of its time; later tool and model calls are refused."""


class SkillRecursion(SkillError, RecursionError):
    """A skill is already running in this chain, or the chain is too deep."""


@dataclass(frozen=True, slots=True)
class SkillResult:
    """What a skill's `execute` returns.

    Attributes:
        success: Whether the skill did its job.
        output: The result for the model (text, or any JSON-serialisable value).
        error: What went wrong, for the model to act on (when not `success`).
        metadata: Anything else for the application (kept in the tool message's artifact).
    """

    success: bool
    output: Any = None
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_text(self) -> str:
        """The output as the model sees it: text as is, anything else as JSON."""
        if isinstance(self.output, str):
            return self.output
        if self.output is None:
            return ""
        return json.dumps(self.output, ensure_ascii=False, default=str)


@runtime_checkable
class ExecutableSkill(Protocol):
    """Anything `use_skill` can run: a `metadata` and an `execute(ctx)`."""

    @property
    def metadata(self) -> SkillMetadata:
        """Name, description, `tools_required`..."""
        ...

    def execute(self, ctx: SkillContext) -> SkillResult | Awaitable[SkillResult]:
        """Do the skill's work."""
        ...


class CodeSkill(ABC):
    """Base of a skill written in Python by the host application.

    Subclass it, set `metadata` (a property or a class attribute; list the tools
    `execute` dispatches in `metadata.tools_required`) and write `execute`.
    It also satisfies the `Skill` protocol, so a `SkillRegistry` indexes it with
    the S3 skills and `cargar_habilidad` can load it.

    Example:
        class Resumen(CodeSkill):
            metadata = SkillMetadata(name="resumen", description="Resume los ficheros.",
                                     tools_required=["glob", "read_file"])

            def execute(self, ctx: SkillContext) -> SkillResult:
                paths = ctx.tools.dispatch("glob", {"pattern": "*.md", "path": "/workspace"})
                return SkillResult(True, ctx.llm.complete(f"Resume: {paths}"))
    """

    @property
    @abstractmethod
    def metadata(self) -> SkillMetadata:
        """Name, description, category, `tools_required`..."""

    @abstractmethod
    def execute(self, ctx: SkillContext) -> SkillResult | Awaitable[SkillResult]:
        """Do the skill's work; exceptions become an error result."""

    def is_available(self, config: Mapping[str, Any]) -> bool:
        """Whether the skill can be offered in this run (default: always)."""
        return True

    def get_tools(self, config: Mapping[str, Any]) -> Sequence[Any]:
        """Tools the skill shows the model once loaded (default: none)."""
        return []

    def get_system_instructions(self) -> str:
        """What loading the skill puts in the prompt (default: how to run it)."""
        meta = self.metadata
        sid = f"{meta.category}/{meta.name}" if meta.category else meta.name
        return f"{meta.description}\n\nRun it with use_skill(skill_name='{sid}', input=...)."


class PromptSkill:
    """An S3 skill run with `use_skill`: its result is its SKILL.md instructions."""

    def __init__(self, info: SkillInfo, instructions: str) -> None:
        self.info = info
        self.instructions = instructions

    @property
    def metadata(self) -> SkillMetadata:
        """The SKILL.md frontmatter."""
        return self.info.metadata

    def execute(self, ctx: SkillContext) -> SkillResult:
        """Hand the model the instructions (and the input it passed, to apply them to)."""
        text = self.instructions.strip()
        if ctx.input is not None:
            given = ctx.input if isinstance(ctx.input, str) else json.dumps(ctx.input, ensure_ascii=False)
            text += f"\n\n## Input\n{given}"
        return SkillResult(True, text, metadata={"kind": "prompt", "skill": self.info.id})


def in_event_loop() -> bool:
    """Whether the caller runs inside an event loop (an `async def execute`): calls then return awaitables."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _either(coro: Coroutine[Any, Any, Any], sync: Any) -> Any:
    """`coro` inside an event loop (the caller awaits it); else close it and run `sync()`."""
    if in_event_loop():
        return coro
    coro.close()
    return sync()


class _Guard:
    """Shared by a run's context parts: once the time is up, they refuse to work."""

    def __init__(self, skill_id: str, timeout: float) -> None:
        self.skill_id = skill_id
        self.timeout = timeout
        self.expired = threading.Event()

    def check(self) -> None:
        if self.expired.is_set():
            raise SkillTimeout(f"the skill '{self.skill_id}' ran out of its {self.timeout:g} s")


class ToolDispatcher(Protocol):
    """How a skill's tool calls reach the agent's tools (see `tools/use_skill.py`)."""

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Run a tool and return its text; raise `SkillToolError` when it reports an error."""
        ...

    async def acall(self, name: str, args: dict[str, Any]) -> str:
        """Async version of `call`."""
        ...


class SkillTools:
    """`ctx.tools`: the agent's tools, limited to the skill's `tools_required`."""

    def __init__(self, skill_id: str, allowed: Sequence[str], dispatcher: ToolDispatcher, guard: _Guard) -> None:
        self.skill_id = skill_id
        self.names: tuple[str, ...] = tuple(allowed)
        self._dispatcher = dispatcher
        self._guard = guard

    def _check(self, name: str, args: Mapping[str, Any] | None) -> dict[str, Any]:
        self._guard.check()
        if name not in self.names:
            allowed = ", ".join(self.names) or "none"
            raise ToolNotAllowed(
                f"the skill '{self.skill_id}' may not call the tool '{name}': it is not in its "
                f"tools_required ({allowed})"
            )
        if args is not None and not isinstance(args, Mapping):
            raise TypeError(f"the arguments of '{name}' must be a mapping, not {type(args).__name__}")
        return dict(args or {})

    def dispatch(self, name: str, args: Mapping[str, Any] | None = None) -> Any:
        """Call one of the agent's tools: its text result (`str`).

        In an `async def execute` this returns an awaitable of the text:
        `await ctx.tools.dispatch(name, args)`. Whether the tool may be called is
        checked at once, also before the await.

        Raises:
            ToolNotAllowed: `name` is not in the skill's `tools_required`.
            SkillToolError: The tool reported an error.
            SkillTimeout: The skill's time is up.
        """
        checked = self._check(name, args)
        return _either(self._dispatcher.acall(name, checked), lambda: self._dispatcher.call(name, checked))

    async def adispatch(self, name: str, args: Mapping[str, Any] | None = None) -> str:
        """Async version of `dispatch` (use it from an `async def execute`)."""
        return await self._dispatcher.acall(name, self._check(name, args))


class SkillLLM:
    """`ctx.llm`: the agent's model (or the application's), traced in the run.

    Every call carries the run's config (callbacks, tags), so it shows in the
    run's trace under the `use_skill` call, tagged `skill:<id>`.
    """

    def __init__(self, model: BaseChatModel | None, config: RunnableConfig | None, guard: _Guard) -> None:
        self.model = model
        self._guard = guard
        base: dict[str, Any] = dict(config or {})
        base["tags"] = [*(base.get("tags") or []), f"skill:{guard.skill_id}"]
        base["metadata"] = {**(base.get("metadata") or {}), "s3skills_skill": guard.skill_id}
        self.config: RunnableConfig = RunnableConfig(**base)  # type: ignore[typeddict-item]

    def _model(self) -> BaseChatModel:
        self._guard.check()
        if self.model is None:
            raise SkillError("no model is known for skills yet: pass skill_model= to create_skills_agent")
        return self.model

    def complete(self, prompt: str | Sequence[BaseMessage], **kwargs: Any) -> Any:
        """Ask the model: the text of its answer (`str`).

        In an `async def execute` this returns an awaitable of the text:
        `await ctx.llm.complete(prompt)`.
        """
        model = self._model()
        return _either(
            self.acomplete(prompt, **kwargs), lambda: model.invoke(prompt, config=self.config, **kwargs).text
        )

    async def acomplete(self, prompt: str | Sequence[BaseMessage], **kwargs: Any) -> str:
        """Async version of `complete`."""
        return (await self._model().ainvoke(prompt, config=self.config, **kwargs)).text


class SkillFiles:
    """`ctx.files`: the skill's own folder in the user's library, read-only.

    Paths are relative to the folder (`references/a.md`); `..` and the like are
    refused. A code skill has no files (it never maps to S3 keys).
    """

    def __init__(self, library: SkillFileSource, skill_id: str, tenant: Tenant, guard: _Guard) -> None:
        self._library = library
        self.skill_id = skill_id
        self._tenant = tenant
        self._guard = guard

    async def alist(self) -> list[str]:
        """The paths of the skill's files, relative to its folder."""
        self._guard.check()
        try:
            files = await self._library.afiles(self.skill_id, tenant=self._tenant)
        except (SkillError, NotFound):
            return []
        return sorted(f.path for f in files)

    async def aread_bytes(self, path: str) -> bytes:
        """The bytes of one file of the skill.

        Raises:
            InvalidPath: A malformed or escaping path.
            NotFound: No such file in the skill's folder.
        """
        self._guard.check()
        VPath.parse("/" + path.lstrip("/"))  # a clear InvalidPath before any request
        try:
            body = await self._library.aopen(self.skill_id, path, tenant=self._tenant)
        except (SkillError, NotFound):
            raise NotFound(f"the skill '{self.skill_id}' has no file '{path}'") from None
        return body.data

    async def aread(self, path: str) -> str:
        """The text (UTF-8) of one file of the skill."""
        return (await self.aread_bytes(path)).decode("utf-8", errors="replace")

    def list(self) -> Any:
        """`alist`'s result (`list[str]`); an awaitable of it in an `async def execute`."""
        return _either(self.alist(), lambda: run_sync(self.alist()))

    def read(self, path: str) -> Any:
        """`aread`'s result (`str`); an awaitable of it in an `async def execute`."""
        return _either(self.aread(path), lambda: run_sync(self.aread(path)))

    def read_bytes(self, path: str) -> Any:
        """`aread_bytes`'s result (`bytes`); an awaitable of it in an `async def execute`."""
        return _either(self.aread_bytes(path), lambda: run_sync(self.aread_bytes(path)))


@dataclass
class SkillContext:
    """What `execute(ctx)` gets.

    Attributes:
        skill_id: The running skill.
        input: What the model passed as `input` (None when nothing).
        tools: The agent's tools the skill declared (`dispatch`; awaited in an
            `async def execute`).
        llm: The model (`complete`; awaited in an `async def execute`).
        files: The skill's own folder, read-only.
        user_id: The tenant's user (None when the run has none).
        thread_id: The tenant's thread.
        ticket_id: The tenant's ticket, if any.
        logger: A logger tagged with the skill and the tenant.
        depth: 1 for a skill the agent called, 2 for one it called, ...
    """

    skill_id: str
    input: Any
    tools: SkillTools
    llm: SkillLLM
    files: SkillFiles
    user_id: str | None
    thread_id: str | None
    ticket_id: str | None
    logger: logging.LoggerAdapter[logging.Logger]
    depth: int
    guard: _Guard = field(repr=False)


def make_context(
    *,
    skill_id: str,
    input: Any,
    library: SkillFileSource,
    dispatcher: ToolDispatcher,
    tools_required: Sequence[str],
    model: BaseChatModel | None,
    config: RunnableConfig | None,
    user_id: str | None,
    thread_id: str | None,
    ticket_id: str | None,
    depth: int,
    timeout: float,
) -> SkillContext:
    """Build the context of one run: its parts share one time limit of `timeout` seconds."""
    guard = _Guard(skill_id, timeout)
    extra = {"skill": skill_id, "user_id": user_id, "thread_id": thread_id, "depth": depth}
    name = "s3skills.skills." + skill_id.replace("/", ".")
    return SkillContext(
        skill_id=skill_id,
        input=input,
        tools=SkillTools(skill_id, tools_required, dispatcher, guard),
        llm=SkillLLM(model, config, guard),
        files=SkillFiles(library, skill_id, Tenant(user_id, thread_id, ticket_id), guard),
        user_id=user_id,
        thread_id=thread_id,
        ticket_id=ticket_id,
        logger=logging.LoggerAdapter(logging.getLogger(name), extra),
        depth=depth,
        guard=guard,
    )
