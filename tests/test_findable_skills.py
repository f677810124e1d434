"""Findable skills (issue 11, items 7-11): the ranked prompt index, list_skills pages that
reach every skill, names in every tool, PDF resources as text."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from s3skills import S3Backend, create_skills_agent
from s3skills.aio import run_sync
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import SkillInfo, SkillMetadata
from s3skills.skills.format import render
from s3skills.skills.ranking.matching import bm25_index
from s3skills.testing import MemoryObjectStore
from s3skills.testing.scripted import ScriptedChatModel, tool_call
from s3skills.tools import skill_tools
from s3skills.tools.script_tool import script_tool

SEEDS = KeyLayout.seeds()
USER = "ana"
PREFIX = f"{USER}/skills/"


def skill_md(name: str, description: str, body: str = "Instructions.") -> str:
    return f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{body}\n"


def big_library(store: MemoryObjectStore, count: int = 300) -> None:
    """`count` skills in three categories, each with a distinct app word and a long description."""
    for i in range(count):
        category = ("apps", "docs", "data")[i % 3]
        name = f"app{i:03d}-automation"
        description = (
            f"Automate App{i:03d} tasks via the connector: tickets, boards and contacts. "
            "Always search the tools first for their current schemas, then call them one by one."
        )
        store.put_object(f"{PREFIX}{category}/{name}/SKILL.md", skill_md(name, description))


def backend_of(store: MemoryObjectStore, **kwargs: Any) -> S3Backend:
    return S3Backend("memory", user_id=USER, store=store, layout=SEEDS, **kwargs)


# -- item 7: the ranked index ---------------------------------------------------------------------


def test_index_ranks_by_the_latest_request_and_summarises_the_rest() -> None:
    store = MemoryObjectStore()
    big_library(store)
    middleware = SkillsPromptMiddleware(backend_of(store))
    state = {"messages": [HumanMessage("hola"), AIMessage("?"), HumanMessage("archive a board in App217 please")]}
    prompt = run_sync(middleware.build_prompt(state))
    index = prompt.split("## Skills", 1)[1]
    assert len(index) <= middleware.budget_chars + 700  # the header is outside the budget
    assert re.search(r"<name>app217-automation</name>\s*<description>Automate App217", index)
    assert "more skills are not shown, by category: " in index
    assert re.search(r"apps \(\d+\), data \(\d+\), docs \(\d+\)|apps \(\d+\)", index)
    assert 'list_skills(query="words of the task")' in index
    assert "call the list_skills tool to see them all" not in index


def test_ranked_index_never_cuts_a_description_inside_a_word() -> None:
    skills = [
        SkillInfo(f"s{i:03d}", SkillMetadata(name=f"s{i:03d}", description=" ".join(["wordy"] * 80) + f" end{i}"))
        for i in range(200)
    ]
    cuts_seen = 0
    for budget in (300, 1000, 3000, 6000):
        for fmt in ("xml", "yaml", "grouped"):
            text = render.format_ranked(skills, budget, index_format=fmt)
            assert len(text) <= budget
            assert not re.search(r"\bend\d+\b", text)  # no 80-word description fits whole: each one is cut
            cuts = re.findall(r"(\w*)…", text)
            cuts_seen += len(cuts)
            for cut in cuts:
                assert cut in ("", "wordy"), (fmt, budget, cut)
    assert cuts_seen > 0  # the check above ran on real cuts


def test_small_library_index_is_the_plain_format() -> None:
    skills = [
        SkillInfo("b", SkillMetadata(name="b", description="Bee.")),
        SkillInfo("a", SkillMetadata(name="a", description="Ay.")),
    ]
    assert render.format_ranked(skills, 6000) == render.format_xml(skills, 6000)


def test_tokenised_library_is_cached_per_version() -> None:
    one = [SkillInfo("a", SkillMetadata(name="a", description="Alpha."), etag="e1")]
    assert bm25_index(one) is bm25_index(list(one))
    changed = [SkillInfo("a", SkillMetadata(name="a", description="Alpha two."), etag="e2")]
    assert bm25_index(changed) is not bm25_index(one)
    assert bm25_index(changed).rank("two")[0][0].id == "a"


# -- item 8: every skill reachable ----------------------------------------------------------------


@pytest.mark.parametrize(("query", "category"), [(None, None), ("tickets boards", None), (None, "docs")])
def test_list_skills_pages_reach_every_skill_and_never_point_at_themselves(
    query: str | None, category: str | None
) -> None:
    store = MemoryObjectStore()
    big_library(store)
    list_tool = next(t for t in skill_tools(backend_of(store), budget_chars=4000) if t.name == "list_skills")
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(400):
        args: dict[str, Any] = {k: v for k, v in (("query", query), ("category", category), ("cursor", cursor)) if v}
        page = str(list_tool.invoke(args))
        assert len(page) <= 4000
        assert "to see them all" not in page
        seen += re.findall(r"^- (\S+?)(?: \[|:)", page, flags=re.MULTILINE)
        found = re.search(r"cursor='(\d+)' for the next page", page)
        if found is None:
            break
        cursor = found.group(1)
    expected = 100 if category else 300
    assert len(seen) == len(set(seen)) == expected


# -- item 10: names in every tool -----------------------------------------------------------------

CALC = """---
name: calc
description: Adds numbers. Use it for sums.
---
Run scripts/main.py with {"numbers": [1, 2]}.
"""
CALC_SCRIPT = "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({'sum': sum(args['numbers'])}))\n"


def test_run_skill_script_takes_the_folder_name_of_a_loaded_skill() -> None:
    store = MemoryObjectStore()
    store.put_object(f"{PREFIX}tools/calc/SKILL.md", CALC)
    store.put_object(f"{PREFIX}tools/calc/scripts/main.py", CALC_SCRIPT)
    backend = S3Backend("memory", store=store, layout=SEEDS)

    def call(tool: str, **args: Any) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call(tool, args)])

    model = ScriptedChatModel(
        steps=[
            call("cargar_habilidad", skill_path="calc"),
            call("run_skill_script", skill="calc", script="main.py", args={"numbers": [2, 3]}),
            call("read_skill", name="calc"),
        ]
    )
    agent = create_skills_agent(model, backend, tools=[script_tool(backend)])
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "suma 2 y 3"}]},
        context={"user_id": USER},
        config={"configurable": {"thread_id": "t-calc"}},
    )
    loaded, ran, read = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "Skill 'tools/calc' loaded" in str(loaded.content)
    observation = json.loads(str(ran.content))
    assert observation["ok"] is True, observation
    assert observation["result"] == {"sum": 5}
    assert "Run scripts/main.py" in str(read.content)


# -- item 11: PDF as text -------------------------------------------------------------------------


def make_pdf(pages: list[str]) -> bytes:
    """A small valid PDF with one line of Helvetica text per page."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@pytest.fixture
def pdf_store() -> MemoryObjectStore:
    store = MemoryObjectStore()
    store.put_object(f"{PREFIX}docs/manual/SKILL.md", skill_md("manual", "Reads the manual. Use it for manuals."))
    store.put_object(f"{PREFIX}docs/manual/resources/x.pdf", make_pdf(["Alpha page", "Bravo page", "Charlie page"]))
    return store


def test_pdf_text_mode_reads_pages_for_models_without_vision(pdf_store: MemoryObjectStore) -> None:
    backend = backend_of(pdf_store, pdf_mode="text")
    backend.load_skill("manual")
    whole = backend.read("/skills/manual/resources/x.pdf")
    assert whole.error is None
    assert whole.file_data is not None
    content = whole.file_data["content"]
    assert "[page 1 of 3]\nAlpha page" in content
    assert "[page 3 of 3]\nCharlie page" in content

    some = backend.read("/skills/manual/resources/x.pdf#pages=2-3")
    assert some.file_data is not None
    assert "Alpha" not in some.file_data["content"]
    assert "[page 2 of 3]\nBravo page" in some.file_data["content"]
    assert "page 9" in str(backend.read("/skills/manual/resources/x.pdf#pages=9").error)
    assert "#pages=2-4" in str(backend.read("/skills/manual/resources/x.pdf#pages=x").error)


def test_pdf_file_mode_keeps_the_file_block_and_text_on_request(pdf_store: MemoryObjectStore) -> None:
    backend = backend_of(pdf_store)
    backend.load_skill("manual")
    block = backend.read("/skills/manual/resources/x.pdf")
    assert block.file_data is not None
    assert block.file_data["encoding"] == "base64"
    text = backend.read("/skills/manual/resources/x.pdf#text")
    assert text.file_data is not None
    assert "Bravo page" in text.file_data["content"]


def test_pdf_text_without_pypdf_says_how_to_install_it(
    pdf_store: MemoryObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)  # what an environment without the extra sees
    backend = backend_of(pdf_store, pdf_mode="text")
    backend.load_skill("manual")
    error = backend.read("/skills/manual/resources/x.pdf").error
    assert error is not None
    assert "s3skills[pdf]" in error
