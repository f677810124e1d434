"""Skills found by their frontmatter `name` too, as hosts call them (issue 31, item 2).

`cargar_habilidad`, `read_skill`, `use_skill`, the MCP tools `load_skill` and
`read_skill_file`, and `s3skills info` accept a skill's `name` (`"Xero Automation"`, any
case) where it is unambiguous, and answer an ambiguous one with the candidates. One place
decides (`SkillLibrary._find_in`), from the merged index already read: a name costs no
request more than the id. Each entry point is driven for real: a deepagents loop with a
scripted model, the MCP SDK client in process, the command line, all on moto.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from cli_harness import Cli
from langchain_core.messages import AIMessage, ToolMessage
from mcp.client.client import Client

from s3skills import S3Backend, create_skills_agent
from s3skills.errors import InvalidPath, SkillError
from s3skills.serve.mcp import aclose_server, library_source
from s3skills.serve.server import SkillsServer
from s3skills.storage import RequestCounter
from s3skills.testing import skill_md
from s3skills.testing.scripted import ScriptedChatModel, tool_call

SKILLS = {
    "finanzas/xero/SKILL.md": skill_md(
        "Xero Automation", "Reconcile Xero invoices.", body="# Xero\nConcilia facturas.\n"
    ),
    "finanzas/xero/notes.md": "xero notes\n",
    "a/informe/SKILL.md": skill_md("Informe", "Monthly report."),
    "b/resumen/SKILL.md": skill_md("informe", "Weekly report."),  # the same name, another case
    "pdf/SKILL.md": skill_md("pdf", "PDF tools."),
    "viejo/SKILL.md": skill_md("Old Thing", "Withdrawn.", enabled="false"),
}


def seed(s3_client: Any, bucket: str, prefix: str) -> None:
    for key, body in SKILLS.items():
        s3_client.put_object(Bucket=bucket, Key=prefix + key, Body=body.encode())


@pytest.fixture
def backend(make_backend: Callable[..., S3Backend], bucket: str, s3_client: Any) -> S3Backend:
    seed(s3_client, bucket, "ana/skills/")  # the seeds' layout (make_backend's)
    return make_backend(user_id="ana")


# -- the library ------------------------------------------------------------------------------


async def test_a_skill_is_found_by_its_name_in_any_case_for_no_request_more_than_its_id(backend: S3Backend) -> None:
    library = backend.skills
    await library.aindex()  # the index is warm, as in a running agent or server
    await library.aflush()
    counter = RequestCounter()
    backend.store.add_request_hook(counter)

    async def cost(name: str) -> dict[str, int]:
        before = counter.counts
        assert (await library.aget(name)).id == "finanzas/xero"
        return {op: n - before.get(op, 0) for op, n in counter.counts.items() if n != before.get(op, 0)}

    by_id = await cost("finanzas/xero")
    for name in ("Xero Automation", "xero automation", "XERO  Automation"):
        assert await cost(name) == by_id
    assert await library.aresolve("Xero Automation", cached=True) == "finanzas/xero"


async def test_an_ambiguous_name_answers_with_the_candidates_and_an_id_or_leaf_still_wins(backend: S3Backend) -> None:
    library = backend.skills
    with pytest.raises(SkillError, match=r"'INFORME' is the name of several skills \(a/informe, b/resumen\)"):
        await library.aget("INFORME")
    assert (await library.aget("informe")).id == "a/informe"  # the folder name (leaf) comes first
    assert (await library.aget("pdf")).id == "pdf"
    with pytest.raises(InvalidPath):  # neither an id nor a name: the id's error, as before
        await library.aget("No Such Skill")
    with pytest.raises(InvalidPath):  # a disabled skill does not exist, by any name
        await library.aget("Old Thing")


# -- the agent's tools --------------------------------------------------------------------------


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def run(agent: Any, thread: str) -> dict[str, Any]:
    result: dict[str, Any] = agent.invoke(
        {"messages": [{"role": "user", "content": "Concilia mis facturas"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": thread}},
    )
    return result


def results(out: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]


def test_cargar_habilidad_read_skill_and_use_skill_take_a_skills_name(backend: S3Backend) -> None:
    model = ScriptedChatModel(
        steps=[
            call("read_skill", name="xero automation"),
            call("cargar_habilidad", skill_path="Xero Automation"),
            call("use_skill", skill_name="XERO AUTOMATION"),
            call("read_file", file_path="/skills/xero/notes.md"),
        ]
    )
    agent = create_skills_agent(model, backend, system_prompt="Eres un asistente.", executable=True)
    out = run(agent, "t-name")
    read, loaded, used, notes = results(out)
    assert "Concilia facturas" in read
    assert "finanzas/xero" in loaded
    assert "Error" not in used
    assert "Concilia facturas" in used
    assert "xero notes" in notes
    assert out["loaded_skills"] == ["finanzas/xero"]


def test_cargar_habilidad_answers_an_ambiguous_name_with_the_candidates(backend: S3Backend) -> None:
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="INFORME")])
    out = run(create_skills_agent(model, backend, system_prompt="Eres un asistente."), "t-ambiguous")
    (answer,) = results(out)
    assert "is the name of several skills (a/informe, b/resumen)" in answer
    assert not out.get("loaded_skills")


# -- MCP tools ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def mcp_client(bucket: str, endpoint: str) -> AsyncIterator[Client]:
    skills = SkillsServer(library_source(bucket, endpoint_url=endpoint), user_id="ana", tools=True)
    try:
        async with Client(skills.server, mode="legacy") as c:
            yield c
    finally:
        await aclose_server(skills)


async def test_mcp_load_skill_and_read_skill_file_take_a_skills_name(
    bucket: str, s3_client: Any, moto_endpoint: str
) -> None:
    seed(s3_client, bucket, "users/ana/skills/")  # the default layout (the server's)
    async with mcp_client(bucket, moto_endpoint) as client:
        loaded = await client.call_tool("load_skill", {"name": "Xero Automation"})
        read = await client.call_tool("read_skill_file", {"name": "xero automation", "path": "notes.md"})
        ambiguous = await client.call_tool("load_skill", {"name": "Informe "})
    assert not loaded.is_error
    assert (loaded.structured_content or {})["id"] == "finanzas/xero"
    assert not read.is_error
    assert getattr(read.content[0], "text", None) == "xero notes\n"
    assert ambiguous.is_error
    assert "several skills (a/informe, b/resumen)" in getattr(ambiguous.content[0], "text", "")


# -- s3skills info ------------------------------------------------------------------------------


def test_info_takes_a_skills_name_and_names_the_candidates_of_an_ambiguous_one(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(s3_client, bucket, "ana/skills/")
    cli = Cli(moto_endpoint, bucket, capsys, "ana")
    assert cli.json("info", "Xero Automation")["id"] == "finanzas/xero"
    assert cli("info", "xero automation") == 0
    assert "finanzas/xero" in cli.out
    assert cli("info", "INFORME") == 1
    assert "several skills (a/informe, b/resumen)" in cli.err
    assert cli("info", "No Such Skill") == 1
    assert "several" not in cli.err
