"""The skill tools: `cargar_habilidad`, `list_skills`, `read_skill` (seeds 000/001).

`cargar_habilidad` records the load in the thread's state (`loaded_skills`,
`current_skill`) with a `Command`, so the load is checkpointed with the thread
and seen by every process that serves it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command

from s3skills import formats
from s3skills._sync import run_sync
from s3skills.backend import S3Backend
from s3skills.errors import S3SkillsError
from s3skills.layout import skill_leaf, validate_skill_id
from s3skills.registry import SkillRegistry, merge_index, tool_name
from s3skills.seedapi import check_leaf_clash
from s3skills.skillmd import SkillInfo, get_skill_doc
from s3skills.tenancy import run_config
from s3skills.usage import log_usage

__all__ = ["load_skill_update", "skill_tools"]

_LOAD_DOC = """Load a skill (cargar habilidad) by its id, e.g. 'escrituras/compraventa' or 'pdf'.

After loading, the skill's instructions (its SKILL.md) appear in your system prompt and
its files become readable under /skills/<name>/ (ls, read_file, grep, glob). Load a skill
before following it; load only the skills the task needs."""

_LIST_DOC = """List the skills in the library (id and description), optionally of one category."""

_READ_DOC = """Read a skill's instructions (its SKILL.md body) without loading it."""


def _tool_names(tools: Iterable[Any] | None) -> list[str] | None:
    if tools is None:
        return None
    names: list[str] = []
    for tool in tools:
        name = tool_name(tool)
        if name and name not in names:
            names.append(name)
    return names


def _allowed_tool_name(entry: str) -> str:
    return entry.split("(", 1)[0].strip()


async def load_skill_update(
    backend: S3Backend,
    skill_path: str,
    loaded: list[str],
    tool_call_id: str,
    agent_tools: set[str] | None,
    registry: SkillRegistry | None = None,
) -> Command[Any] | str:
    """Validate a load and build the state update of `cargar_habilidad`.

    Every attempt is recorded in the usage log (`s3skills.usage`).

    Returns:
        A `Command` that sets `current_skill`, adds to `loaded_skills` and carries
        the `ToolMessage`; or an error string for the model to act on.
    """
    started = time.perf_counter()
    tenant = None
    outcome = "error"
    try:
        tenant = backend.tenant()
        result = await _load(backend, skill_path, loaded, tool_call_id, agent_tools, registry)
        outcome = "ok" if isinstance(result, Command) else "refused"
        return result
    except S3SkillsError as exc:
        return f"Error: {exc}"
    finally:
        log_usage(
            "skill_load",
            skill=str(skill_path),
            user=tenant.user_id if tenant else None,
            thread=tenant.thread_id if tenant else None,
            duration_ms=(time.perf_counter() - started) * 1000,
            outcome=outcome,
        )


async def _load(
    backend: S3Backend,
    skill_path: str,
    loaded: list[str],
    tool_call_id: str,
    agent_tools: set[str] | None,
    registry: SkillRegistry | None,
) -> Command[Any] | str:
    skill_id = validate_skill_id(skill_path)
    code = registry.get(skill_id) if registry is not None else None
    if code is not None:
        if not code.is_available(run_config(backend.tenant())):
            return f"Error: the skill '{skill_id}' is not available in this context."
        info = SkillInfo(id=skill_id, metadata=code.metadata, source="code")
        problem = _tools_problem(info, agent_tools)
        if problem:
            return problem
        names = ", ".join(_tool_names(code.get_tools(run_config(backend.tenant()))) or ["(none)"])
        text = f"Skill '{skill_id}' loaded. Its instructions are now in your system prompt; its tools: {names}."
        return _command(skill_id, text, tool_call_id)
    user = backend.current_user()
    check_leaf_clash(skill_id, [*loaded, *backend.loaded_skills])
    info, _ = await backend.catalog.askill_md(user, skill_id)
    problem = _tools_problem(info, agent_tools)
    if problem:
        return problem
    leaf = skill_leaf(skill_id)
    try:
        paths = await backend.askill_files(skill_id, home=backend.catalog.home_of(user, info))
    except S3SkillsError:
        paths = []
    unavailable = [
        t
        for t in (_allowed_tool_name(e) for e in info.metadata.allowed_tools)
        if agent_tools is not None and t and t not in agent_tools
    ]
    note = f" Note: its allowed-tools name tools this agent lacks: {', '.join(unavailable)}." if unavailable else ""
    files = " Files: " + ", ".join(paths) + "." if paths else ""
    text = (
        f"Skill '{skill_id}' loaded. Its instructions are now in your system prompt; "
        f"its files are under /skills/{leaf}/ (start with /skills/{leaf}/SKILL.md if you need "
        f"the full text).{files}{note}"
    )
    return _command(skill_id, text, tool_call_id)


def _command(skill_id: str, text: str, tool_call_id: str) -> Command[Any]:
    return Command(
        update={
            "current_skill": skill_id,
            "loaded_skills": [skill_id],
            "messages": [ToolMessage(content=text, tool_call_id=tool_call_id, name="cargar_habilidad")],
        }
    )


def _tools_problem(info: SkillInfo, agent_tools: set[str] | None) -> str | None:
    if agent_tools is None:
        return None
    missing = [t for t in info.metadata.tools_required if t not in agent_tools]
    if not missing:
        return None
    return (
        f"Error: cannot load '{info.id}': it needs the tool(s) {', '.join(missing)}, "
        "which this agent does not have. Choose another skill or tell the user."
    )


def skill_tools(
    backend: S3Backend,
    *,
    agent_tools: Iterable[Any] | None = None,
    category: str | None = None,
    budget_chars: int = 20_000,
    registry: SkillRegistry | None = None,
    scripts: bool = False,
) -> list[BaseTool]:
    """The skill tools for an agent using `backend`.

    Args:
        backend: The agent's `S3Backend`.
        agent_tools: The tools (or tool names) the agent has, to check a skill's
            `tools_required` at load time. None skips the check.
        category: Only list skills of this category.
        budget_chars: Most characters `list_skills` returns.
        registry: Code skills, loadable and listed like the S3 ones.
        scripts: Add `run_skill_script` (runs tenant-supplied code: see the threat model).
    """
    listed = _tool_names(agent_tools)
    names = set(listed) if listed is not None else None
    default_category = category

    async def acargar(skill_path: str, runtime: ToolRuntime[Any, Any]) -> Command[Any] | str:
        loaded = list(runtime.state.get("loaded_skills") or [])
        return await load_skill_update(backend, skill_path, loaded, str(runtime.tool_call_id), names, registry)

    def cargar(skill_path: str, runtime: ToolRuntime[Any, Any]) -> Command[Any] | str:
        return run_sync(acargar(skill_path, runtime))

    async def alist(category: str | None = None) -> str:
        try:
            wanted = category or default_category
            skills = await backend.catalog.askills(backend.current_user(), category=wanted)
            if registry is not None:
                code = registry.list_skills(run_config(backend.tenant()))
                skills = merge_index(skills, [c for c in code if not wanted or c.category == wanted])
        except S3SkillsError as exc:
            return f"Error: {exc}"
        if not skills:
            return "No skills found."
        return formats.format_grouped(skills, budget_chars)

    def list_(category: str | None = None) -> str:
        return run_sync(alist(category))

    async def aread(name: str) -> str:
        code = registry.get(name) if registry is not None else None
        if code is not None:
            return code.get_system_instructions()
        try:
            _, text = await backend.catalog.askill_md(backend.current_user(), validate_skill_id(name))
        except S3SkillsError as exc:
            return f"Error: {exc}"
        return get_skill_doc(text)

    def read(name: str) -> str:
        return run_sync(aread(name))

    def make(name: str, func: Callable[..., Any], coro: Callable[..., Awaitable[Any]], doc: str) -> BaseTool:
        return StructuredTool.from_function(func=func, coroutine=coro, name=name, description=doc)

    tools = [
        make("cargar_habilidad", cargar, acargar, _LOAD_DOC),
        make("list_skills", list_, alist, _LIST_DOC),
        make("read_skill", read, aread, _READ_DOC),
    ]
    if scripts:
        from tools.script_tool import script_tool

        tools.append(script_tool(backend))
    return tools
