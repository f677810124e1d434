"""`create_skills_agent`: a deep agent wired to an `S3Backend` in one call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from deepagents import create_deep_agent
from langchain_core.language_models import BaseChatModel

from s3skills.fs import S3Backend
from s3skills.middleware.skills_prompt import IndexFormat, SkillsPromptMiddleware
from s3skills.skills import Ranker, SkillRegistry, tool_name
from s3skills.skills.code.executable import ExecutableSkill
from s3skills.tools.skill_tools import skill_tools
from s3skills.tools.use_skill import USE_SKILL, SkillExecutionMiddleware

__all__ = ["DEEPAGENTS_TOOLS", "SkillsContext", "create_skills_agent"]

DEEPAGENTS_TOOLS = ("ls", "read_file", "write_file", "edit_file", "glob", "grep", "write_todos", "task")
"""The tools `create_deep_agent` gives every agent (checked against `tools_required`)."""


@dataclass
class SkillsContext:
    """The run context of a skills agent: who the run acts for.

    Pass it as `agent.invoke(..., context=SkillsContext(user_id="alice"))` or as a
    dict with the same keys; the thread id comes from `config["configurable"]`.
    """

    user_id: str | None = None
    ticket_id: str | None = None


def create_skills_agent(
    model: str | BaseChatModel,
    backend: S3Backend,
    *,
    system_prompt: str | None = None,
    category: str | None = None,
    tools: Sequence[Any] = (),
    middleware: Sequence[Any] = (),
    index_format: IndexFormat = "xml",
    budget_chars: int | None = None,
    ranker: Ranker | None = None,
    registry: SkillRegistry | None = None,
    scripts: bool = False,
    mode: Literal["on_demand", "preload"] = "on_demand",
    executable: bool | None = None,
    skill_model: BaseChatModel | None = None,
    skill_timeout: float = 60.0,
    **kwargs: Any,
) -> Any:
    """Build a deep agent whose files and skills live in S3.

    Args:
        model: A chat model or a `provider:name` string.
        backend: The `S3Backend`; one instance serves every user.
        system_prompt: Your instructions; the skills section is appended to them.
        category: Only offer skills of this category.
        tools: Your own tools (the skill tools are added).
        middleware: More middleware, run after the skills middleware.
        index_format: How the skill index is shown (`xml`, `yaml`, `grouped`).
        budget_chars: Most characters of the index in the prompt; None (the default):
            1 % of the model's context window, never below 6,000.
        ranker: Orders the index for the conversation and `list_skills` searches
            (`s3skills.skills.Ranker`); the local lexical ranker by default, or
            `s3skills.skills.ranking.embedding.HybridRanker` for meaning as well as words.
        registry: Code skills (their tools appear once their skill is loaded).
        scripts: Enable `run_skill_script`, which runs tenant-supplied code
            (not a sandbox: read docs/THREAT_MODEL.md first).
        mode: `on_demand` (index + cargar_habilidad) or `preload` (every
            skill's instructions in the prompt).
        executable: Add `use_skill`, which runs code skills' `execute` and
            loaded S3 skills. None (default): only when `registry` holds a skill
            with an `execute` (a `CodeSkill`).
        skill_model: The model of `ctx.llm` in skills; default the agent's.
        skill_timeout: Seconds one `use_skill` run may take.
        **kwargs: Passed to `create_deep_agent` (checkpointer, subagents, ...).

    Returns:
        The compiled graph. Invoke it with `context={"user_id": ...}` and a thread id.
    """
    code_tools = registry.all_tools() if registry is not None else []
    own = [*tools, *code_tools]
    if executable is None:
        executable = registry is not None and any(isinstance(s, ExecutableSkill) for s in registry.skills())
    names = [*DEEPAGENTS_TOOLS, *(tool_name(t) for t in own)]
    names += ["cargar_habilidad", "list_skills", "read_skill"] + (["run_skill_script"] if scripts else [])
    names += [USE_SKILL] if executable else []
    extra = skill_tools(
        backend, agent_tools=names, category=category, registry=registry, scripts=scripts, ranker=ranker
    )
    prompt_mw = SkillsPromptMiddleware(
        backend,
        category=category,
        budget_chars=budget_chars,
        ranker=ranker,
        index_format=index_format,
        mode=mode,
        registry=registry,
    )
    # Outermost of ours, so the tool calls a skill makes pass through the prompt middleware's gating.
    runner: list[Any] = []
    if executable:
        agent_model = skill_model or (model if isinstance(model, BaseChatModel) else None)
        approval = [name for name, rule in (kwargs.get("interrupt_on") or {}).items() if rule]
        runner = [
            SkillExecutionMiddleware(
                backend, registry=registry, model=agent_model, timeout=skill_timeout, approval_required=approval
            )
        ]
    kwargs.setdefault("context_schema", SkillsContext)
    return create_deep_agent(
        model=model,
        tools=[*own, *extra],
        system_prompt=system_prompt,
        middleware=[*runner, prompt_mw, *middleware],
        backend=backend,
        **kwargs,
    )
