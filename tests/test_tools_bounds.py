"""Request-sized input is bounded where it enters the agent's side (issue 30, item 1).

The prompt middleware ranks the index from at most `Limits.max_prompt_query_chars` of the
latest user turns (their last characters: a long real request is kept whole); the agent's
`list_skills` cuts a query to `Limits.max_query_chars` and says so; names and script
arguments over their caps are refused with the cap named. A recording ranker (the real
lexical one underneath) shows what reached the ranking.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from s3skills import CodeSkill, S3Backend, SkillContext, SkillRegistry, SkillResult
from s3skills.aio import run_sync
from s3skills.config import Limits
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import LexicalRanker, SkillInfo, SkillMetadata
from s3skills.testing import MemoryObjectStore, skill_md
from s3skills.testing.scripted import ScriptedChatModel, tool_call
from s3skills.tools import skill_tools

LIMITS = Limits()


class Recorder:
    """The lexical ranker, noting every query it was given."""

    def __init__(self) -> None:
        self.inner = LexicalRanker()
        self.queries: list[str] = []

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        self.queries.append(query)
        return self.inner.rank(query, skills)


def backend() -> S3Backend:
    store = MemoryObjectStore()
    store.put_object("ana/skills/docs/writer/SKILL.md", skill_md("writer", "Write documents for people"))
    store.put_object("ana/skills/deploy/SKILL.md", skill_md("deploy", "Deploy the services"))
    return S3Backend("memory", user_id="ana", store=store, layout=KeyLayout.seeds())


def test_the_prompt_ranks_the_last_characters_of_a_huge_message_and_keeps_a_real_request_whole() -> None:
    ranker = Recorder()
    middleware = SkillsPromptMiddleware(backend(), ranker=ranker)
    pasted = " ".join(f"w{i}" for i in range(300_000))  # ~2 MB pasted above the request
    state = {"messages": [HumanMessage("hola"), AIMessage("?"), HumanMessage(pasted + " now write documents")]}
    assert "docs/writer" in run_sync(middleware.build_prompt(state))
    assert sum(len(q) for q in ranker.queries) <= LIMITS.max_prompt_query_chars
    assert ranker.queries[0].endswith("now write documents")  # the request at the end is what is ranked

    ranker.queries.clear()
    real = "Please write documents: " + "the quarterly report needs a summary for the board. " * 100  # ~5,300
    assert len(real) < LIMITS.max_prompt_query_chars
    run_sync(middleware.build_prompt({"messages": [HumanMessage(real)]}))
    assert ranker.queries[0] == real


def test_agent_list_skills_cuts_an_oversize_query_and_says_so() -> None:
    ranker = Recorder()
    tools = {t.name: t for t in skill_tools(backend(), ranker=ranker)}
    huge = "write documents " + " ".join(f"w{i}" for i in range(300_000))
    page = str(tools["list_skills"].invoke({"query": huge}))
    assert page.startswith("Note: the query was cut to its first ")
    assert f"the limit is {LIMITS.max_query_chars}" in page
    assert max(len(q) for q in ranker.queries) <= LIMITS.max_query_chars
    assert "docs/writer" in page.split("\n\n", 2)[2].splitlines()[0]  # still ranked by its start
    assert len(page) < 20_000


def test_agent_names_over_their_cap_are_refused_naming_the_cap() -> None:
    b = backend()
    tools = {t.name: t for t in skill_tools(b)}
    long_name = "x" * (LIMITS.max_name_chars + 1)
    read = str(tools["read_skill"].invoke({"name": long_name}))
    assert read.startswith("Error: 'name' is")
    assert f"the limit is {LIMITS.max_name_chars}" in read
    listed = str(tools["list_skills"].invoke({"category": long_name}))
    assert f"the limit is {LIMITS.max_name_chars}" in listed


class _Counting(CodeSkill):
    """A code skill that counts its runs (a refused call never runs it)."""

    runs = 0

    @property
    def metadata(self) -> SkillMetadata:
        return SkillMetadata(name="contar", description="Counts its runs.")

    def execute(self, ctx: SkillContext) -> SkillResult:
        _Counting.runs += 1
        return SkillResult(True, "ran")


def test_use_skill_refuses_a_name_or_an_input_over_its_cap_before_it_runs() -> None:
    from s3skills import create_skills_agent

    _Counting.runs = 0
    huge_input = "x" * (LIMITS.max_args_chars + 1)
    model = ScriptedChatModel(
        steps=[
            AIMessage(content="", tool_calls=[tool_call("use_skill", {"skill_name": "c" * 600})]),
            AIMessage(content="", tool_calls=[tool_call("use_skill", {"skill_name": "contar", "input": huge_input})]),
            AIMessage(content="", tool_calls=[tool_call("use_skill", {"skill_name": "contar", "input": "ok"})]),
        ]
    )
    agent = create_skills_agent(model, backend(), registry=SkillRegistry([_Counting()]))
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "count"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )
    name, data, fine = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert name.status == "error"
    assert f"'skill_name' is 600 characters long; the limit is {LIMITS.max_name_chars}" in str(name.content)
    assert data.status == "error"
    assert f"'input' (as JSON) is {LIMITS.max_args_chars + 3} characters long" in str(data.content)
    assert fine.status != "error"
    assert _Counting.runs == 1  # only the call within the caps ran


def test_run_skill_script_refuses_arguments_over_their_caps_before_anything_is_read() -> None:
    from s3skills.tools.script_tool import script_tool

    b = backend()
    tool = script_tool(b)
    assert tool.coroutine is not None

    async def refused(**kwargs: Any) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(await tool.coroutine(runtime=None, **kwargs))  # refused before runtime
        return reply

    cases = {
        "'skill'": {"skill": "s" * (LIMITS.max_name_chars + 1), "script": "run.py"},
        "'script'": {"skill": "deploy", "script": "p" * (LIMITS.max_path_chars + 1)},
        "'args' (as JSON)": {"skill": "deploy", "script": "run.py", "args": "a" * LIMITS.max_args_chars},
    }
    for what, kwargs in cases.items():
        reply = run_sync(refused(**kwargs))
        assert reply["ok"] is False
        assert reply["error"].startswith(f"refused: {what} is ")
        assert "the limit is" in reply["error"]
