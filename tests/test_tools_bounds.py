"""Request-sized input is bounded where it enters the agent's side (issue 30, item 1).

The prompt middleware ranks the index from at most `Limits.max_prompt_query_chars` of the
latest user turns (their last characters: a long real request is kept whole); the agent's
`list_skills` cuts a query to `Limits.max_query_chars` and says so; names and script
arguments over their caps are refused with the cap named. A recording ranker (the real
lexical one underneath) shows what reached the ranking.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, HumanMessage

from s3skills import S3Backend
from s3skills.aio import run_sync
from s3skills.config import Limits
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import LexicalRanker, SkillInfo
from s3skills.testing import MemoryObjectStore, skill_md
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
