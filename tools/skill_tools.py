"""The skill tools: `cargar_habilidad` ("load skill"), `list_skills`, `read_skill` (seeds 000/001).

`cargar_habilidad` records the load in the thread's state (`loaded_skills`,
`current_skill`, and the version loaded in `skill_versions`) with a `Command`, so
the load is checkpointed with the thread and seen by every process that serves it;
until the skill is loaded again, the thread reads that version of it. Every tool names a skill by its id or
by its folder name when that is unique, and talks to the skills only through the
backend's `SkillLibrary`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command

from s3skills.aio import run_sync
from s3skills.config import bounded_query, check_length
from s3skills.errors import S3SkillsError
from s3skills.fs import S3Backend
from s3skills.ids import SkillId
from s3skills.skills import SkillInfo, SkillLibrary, SkillRegistry, SkillVersion, log_usage, tool_name
from s3skills.skills.format import render
from s3skills.skills.ranking.rankers import Ranker, prior_for
from s3skills.skills.usage import skill_uses
from s3skills.tenancy import SKILL_VERSIONS_KEY, thread_skills

__all__ = ["load_skill_update", "skill_tools"]

_LOAD_DOC = """Load a skill (cargar habilidad = "load skill") by its id, e.g. 'escrituras/compraventa', or by its
folder name or its name when unique, e.g. 'compraventa'.

After loading, the skill's instructions (its SKILL.md) appear in your system prompt and
its files become readable under /skills/<name>/ (ls, read_file, grep, glob). Load a skill
before following it; load only the skills the task needs."""

_LIST_DOC = """List or search the skills in the library (id and description), a page at a time.

query: words describing the task (best matches first); omit to list by id.
category: only skills of this category. cursor: the cursor a previous page gave, for the next page."""

_READ_DOC = """Read a skill's instructions (its SKILL.md body) without loading it."""

LOAD_TOOL = "cargar_habilidad"


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


def _earlier_loads(state: Any, tool_call_id: str) -> list[str]:
    """Skill names of the `cargar_habilidad` calls that precede this one in the same model
    message: parallel calls all see the old state, so the leaf rule must count them."""
    messages = state.get("messages") if isinstance(state, dict) else None
    for message in reversed(messages or []):
        calls = getattr(message, "tool_calls", None) or []
        ids = [c.get("id") for c in calls]
        if tool_call_id in ids:
            earlier = calls[: ids.index(tool_call_id)]
            return [str((c.get("args") or {}).get("skill_path")) for c in earlier if c.get("name") == LOAD_TOOL]
    return []


async def load_skill_update(
    library: SkillLibrary,
    skill_path: str,
    loaded: list[str],
    tool_call_id: str,
    agent_tools: set[str] | None,
    *,
    pending: Iterable[str] = (),
) -> Command[Any] | str:
    """Validate a load and build the state update of `cargar_habilidad`.

    Every attempt is recorded in the usage log (`s3skills.usage`).

    Args:
        library: The skills.
        skill_path: The skill's id, or its unique folder name or frontmatter `name`.
        loaded: Skills already loaded in the thread.
        tool_call_id: The id of the tool call (for the `ToolMessage`).
        agent_tools: Tool names of the agent (to check `tools_required`); None skips.
        pending: Names loaded by earlier calls of the same model message.

    Returns:
        A `Command` that sets `current_skill`, adds to `loaded_skills`, pins the
        version loaded in `skill_versions` and carries the `ToolMessage`; or an
        error string for the model to act on.
    """
    started = time.perf_counter()
    tenant = None
    outcome = "error"
    skill = str(skill_path)
    version: SkillVersion | None = None
    try:
        tenant = library.tenant()
        others = list(loaded)
        for name in pending:
            try:
                others.append(await library.aresolve(name, tenant=tenant, cached=True))
            except S3SkillsError:
                continue  # that call fails on its own
        result = await library.aload(skill_path, others, tenant=tenant)
        skill, version = result.skill.id, result.version
        problem = _tools_problem(result.skill, agent_tools)
        if problem:
            outcome = "refused"
            return problem
        outcome = "ok"
        text = _loaded_text(result.skill, result.files, agent_tools, result.is_code, library, version)
        return _command(result.skill.id, text, tool_call_id, version)
    except S3SkillsError as exc:
        return f"Error: {exc}"
    finally:
        log_usage(
            "skill_load",
            skill=skill,
            user=tenant.user_id if tenant else None,
            thread=tenant.thread_id if tenant else None,
            duration_ms=(time.perf_counter() - started) * 1000,
            outcome=outcome,
            version=version.id if version is not None else None,
        )
        if tenant is not None:
            library.count_use(skill, "skill_load", outcome, tenant=tenant)


def _loaded_text(
    skill: SkillInfo,
    files: list[str],
    agent_tools: set[str] | None,
    is_code: bool,
    library: SkillLibrary,
    version: SkillVersion | None = None,
) -> str:
    version_note = f" (version {version.id})" if version is not None else ""
    if is_code:
        code = library.registry.get(skill.id) if library.registry is not None else None
        tools = _tool_names(code.get_tools({}) if code is not None else []) or ["(none)"]
        return (
            f"Skill '{skill.id}' loaded. Its instructions are now in your system prompt; its tools: {', '.join(tools)}."
        )
    leaf = SkillId.parse(skill.id).leaf
    unavailable = [
        t
        for t in (_allowed_tool_name(e) for e in skill.metadata.allowed_tools)
        if agent_tools is not None and t and t not in agent_tools
    ]
    note = f" Note: its allowed-tools name tools this agent lacks: {', '.join(unavailable)}." if unavailable else ""
    shown = files[:50] + ([f"... and {len(files) - 50} more"] if len(files) > 50 else [])
    listed = " Files: " + ", ".join(shown) + "." if shown else ""
    return (
        f"Skill '{skill.id}' loaded{version_note}. Its instructions are now in your system prompt; "
        f"its files are under /skills/{leaf}/ (start with /skills/{leaf}/SKILL.md if you need "
        f"the full text).{listed}{note}"
    )


def _command(skill_id: str, text: str, tool_call_id: str, version: SkillVersion | None = None) -> Command[Any]:
    update: dict[str, Any] = {
        "current_skill": skill_id,
        "loaded_skills": [skill_id],
        "messages": [ToolMessage(content=text, tool_call_id=tool_call_id, name=LOAD_TOOL)],
    }
    if version is not None:
        update[SKILL_VERSIONS_KEY] = {skill_id: version.pin().to_state()}
    return Command(update=update)


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


def _list_page(
    skills: list[SkillInfo], start: int, total: int, query: str | None, category: str | None, budget: int
) -> str:
    """One `list_skills` page cut to `budget` characters; the cursor resumes exactly after it.

    Every skill of any library is reachable: a page that would not fit ends early and
    its cursor points at the first skill not shown.
    """
    lines: list[str] = []
    used = 200  # the head and tail lines
    for skill in skills:
        where = f" [{render.one_line(skill.category)}]" if skill.category else ""
        line = f"- {render.one_line(skill.id)}{where}: {render.shorten(skill.metadata.description, 300)}"
        if lines and used + len(line) + 1 > budget:
            break
        lines.append(render.shorten(line, max(budget - used, 40)))
        used += len(line) + 1
    end = start + len(lines)
    head = f"Skills {start + 1}-{end} of {total}"
    if query:
        head += f", best matches for {render.shorten(query, 200)!r} first"
    if category:
        head += f", category {category!r}"
    tail = ""
    if end < total:
        same = f"query={query!r}" if len(query or "") <= 200 else "the same query"
        again = ", ".join([*([same] if query else []), *([f"category={category!r}"] if category else []), ""])
        tail = f"\n\n{total - end} more: call list_skills with {again}cursor={str(end)!r} for the next page."
    return f"{head}:\n\n" + "\n".join(lines) + tail


def skill_tools(
    backend: S3Backend,
    *,
    agent_tools: Iterable[Any] | None = None,
    category: str | None = None,
    budget_chars: int = 20_000,
    page_size: int = 50,
    registry: SkillRegistry | None = None,
    scripts: bool = False,
    ranker: Ranker | None = None,
) -> list[BaseTool]:
    """The skill tools for an agent using `backend`.

    Args:
        backend: The agent's `S3Backend` (its `skills` library and tenancy).
        agent_tools: The tools (or tool names) the agent has, to check a skill's
            `tools_required` at load time. None skips the check.
        category: Only list skills of this category.
        budget_chars: Most characters one `list_skills` page returns.
        page_size: Skills per `list_skills` page.
        registry: Code skills, loadable and listed like the S3 ones.
        scripts: Add `run_skill_script` (runs tenant-supplied code: see the threat model).
        ranker: Who ranks `list_skills(query=...)` (`s3skills.skills.Ranker`); give the one the
            prompt middleware uses, so a search and the index agree. Lexical by default.
    """
    library = backend.skills.with_registry(registry)
    limits = library.config.limits  # input caps (`s3skills.config.Limits`), applied where arguments enter
    listed = _tool_names(agent_tools)
    names = set(listed) if listed is not None else None
    default_category = category

    async def acargar(skill_path: str, runtime: ToolRuntime[Any, Any]) -> Command[Any] | str:
        try:
            check_length(str(skill_path), limits.max_name_chars, "'skill_path'")
        except ValueError as exc:
            return f"Error: {exc}"
        state = runtime.state or {}
        loaded = list(thread_skills(state).loaded)  # client input: validated
        call_id = str(runtime.tool_call_id)
        return await load_skill_update(
            library, skill_path, loaded, call_id, names, pending=_earlier_loads(state, call_id)
        )

    def cargar(skill_path: str, runtime: ToolRuntime[Any, Any]) -> Command[Any] | str:
        return run_sync(acargar(skill_path, runtime))

    async def alist(query: str | None = None, category: str | None = None, cursor: str | None = None) -> str:
        query, cut = bounded_query(query or "", limits.max_query_chars)
        try:
            for value, what in ((category, "'category'"), (cursor, "'cursor'")):
                check_length(value or "", limits.max_name_chars, what)
        except ValueError as exc:
            return f"Error: {exc}"
        try:
            tenant = library.tenant()
            page = await library.asearch(
                query,
                limit=page_size,
                cursor=cursor,
                category=category or default_category,
                tenant=tenant,
                prior=prior_for(skill_uses(tenant.user_id)),  # the skills this user uses, among the matches
                ranker=ranker,
            )
        except S3SkillsError as exc:
            return f"Error: {exc}"
        if not page.skills:
            return "No skills found." if page.total == 0 else "No more skills."
        start = int(cursor) if cursor else 0
        listing = _list_page(page.skills, start, page.total, query, category, budget_chars - (300 if cut else 0))
        return f"Note: {cut}.\n\n{listing}" if cut else listing

    def list_(query: str | None = None, category: str | None = None, cursor: str | None = None) -> str:
        return run_sync(alist(query, category, cursor))

    async def aread(name: str) -> str:
        try:
            check_length(str(name), limits.max_name_chars, "'name'")
        except ValueError as exc:
            return f"Error: {exc}"
        try:
            return await library.ainstructions(name)
        except S3SkillsError as exc:
            return f"Error: {exc}"

    def read(name: str) -> str:
        return run_sync(aread(name))

    def make(name: str, func: Callable[..., Any], coro: Callable[..., Awaitable[Any]], doc: str) -> BaseTool:
        return StructuredTool.from_function(func=func, coroutine=coro, name=name, description=doc)

    tools = [
        make(LOAD_TOOL, cargar, acargar, _LOAD_DOC),
        make("list_skills", list_, alist, _LIST_DOC),
        make("read_skill", read, aread, _READ_DOC),
    ]
    if scripts:
        from s3skills.tools.script_tool import script_tool

        tools.append(script_tool(backend))
    return tools
