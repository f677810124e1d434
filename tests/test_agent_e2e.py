"""Progressive disclosure end to end: a real deepagents loop, a scripted model, moto."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from deepagents.middleware.skills import SkillsMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from s3skills import S3Backend, create_skills_agent
from s3skills.layout import KeyLayout
from s3skills.storage import RequestCounter
from s3skills.testing.scripted import ScriptedChatModel, tool_call

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

SYSTEM = "Eres el asistente de una notaría. Responde siempre en español."

COMPRAVENTA = """---
name: compraventa
description: Redacta escrituras de compraventa de inmuebles. Úsala cuando pidan una escritura de venta.
category: escrituras
---
# Escritura de compraventa

1. Lee las cláusulas en disclosure_clausulas.md.
2. Sigue el ejemplo de resources/ejemplo.md.
"""

HIPOTECA = """---
name: hipoteca
description: Redacta escrituras de préstamo hipotecario.
---
# Hipoteca
Instrucciones de hipoteca.
"""

PDF_BYTES = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def seed(s3_client: Any, bucket: str) -> None:
    files = {
        "ana/skills/escrituras/compraventa/SKILL.md": COMPRAVENTA.encode(),
        "ana/skills/escrituras/compraventa/disclosure_clausulas.md": "Cláusula primera: objeto.".encode(),
        "ana/skills/escrituras/compraventa/resources/ejemplo.md": b"Ejemplo de escritura.",
        "ana/skills/escrituras/compraventa/resources/plantilla.pdf": PDF_BYTES,
        "ana/skills/escrituras/hipoteca/SKILL.md": HIPOTECA.encode(),
        "beto/skills/contratos/arrendamiento/SKILL.md": (
            b"---\nname: arrendamiento\ndescription: Contratos de alquiler de vivienda.\n---\nBody"
        ),
    }
    for key, body in files.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=body)


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def tool_results(messages: list[BaseMessage]) -> dict[str, ToolMessage]:
    """The tool messages of a run, keyed by the id of the call they answer."""
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def results_in_order(messages: list[BaseMessage]) -> list[Any]:
    return [m.content for m in messages if isinstance(m, ToolMessage)]


@pytest.fixture
def backend(make_backend: Callable[..., S3Backend], bucket: str, s3_client: Any) -> S3Backend:
    seed(s3_client, bucket)
    return make_backend()


def run(agent: Any, user: str, thread: str, text: str = "Necesito una escritura de compraventa") -> dict[str, Any]:
    result: dict[str, Any] = agent.invoke(
        {"messages": [{"role": "user", "content": text}]},
        context={"user_id": user},
        config={"configurable": {"thread_id": thread}},
    )
    return result


def test_the_seeds_complete_example(backend: S3Backend) -> None:
    model = ScriptedChatModel(
        steps=[
            call("ls", path="/"),
            call("read_file", file_path="/skills/compraventa/SKILL.md"),
            call("cargar_habilidad", skill_path="escrituras/compraventa"),
            call("ls", path="/"),
            call("ls", path="/skills"),
            call("read_file", file_path="/skills/compraventa/disclosure_clausulas.md"),
            call("read_file", file_path="/skills/compraventa/resources/ejemplo.md"),
            call("read_file", file_path="/skills/compraventa/resources/plantilla.pdf"),
            call("read_file", file_path="/skills/hipoteca/SKILL.md"),
            call("cargar_habilidad", skill_path="escrituras/hipoteca"),
            call("read_file", file_path="/skills/hipoteca/SKILL.md"),
        ]
    )
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    out = run(agent, "ana", "t-ana")
    results = results_in_order(out["messages"])

    assert "/workspace/" in results[0]
    assert "/skills" not in results[0]
    assert results[1] == "Error: File '/skills/compraventa/SKILL.md' not found"
    assert "Skill 'escrituras/compraventa' loaded" in results[2]
    assert "/skills/" in results[3]
    assert results[4] == str(["/skills/compraventa/"])
    assert "Cláusula primera" in results[5]
    assert "Ejemplo de escritura" in results[6]
    assert results[7][0]["type"] == "file"
    assert results[7][0]["mime_type"] == "application/pdf"
    assert results[8] == "Error: File '/skills/hipoteca/SKILL.md' not found"
    assert "Skill 'escrituras/hipoteca' loaded" in results[9]
    assert "Instrucciones de hipoteca" in results[10]
    assert out["loaded_skills"] == ["escrituras/compraventa", "escrituras/hipoteca"]
    assert out["current_skill"] == "escrituras/hipoteca"

    prompts = model.system_prompts()
    first = prompts[0]
    assert first.startswith(SYSTEM)
    assert "<name>compraventa</name>" in first
    assert "<name>hipoteca</name>" in first
    assert "Escritura de compraventa" not in first  # instructions only once loaded
    after_load = prompts[3]
    assert after_load.startswith(SYSTEM)
    assert "# Escritura de compraventa" in after_load
    assert "<name>compraventa</name>" not in after_load  # loaded skills leave the index
    assert "- escrituras/compraventa: /skills/compraventa/" in after_load


def test_a_second_user_in_the_same_agent_sees_only_their_library(backend: S3Backend) -> None:
    def step(messages: list[BaseMessage]) -> AIMessage:
        return call("cargar_habilidad", skill_path="escrituras/compraventa")

    model = ScriptedChatModel(
        steps=[
            call("cargar_habilidad", skill_path="escrituras/compraventa"),
            call("ls", path="/skills"),
            AIMessage(content="listo"),
            step,
            call("grep", pattern="Cláusula", path="/"),
            call("cargar_habilidad", skill_path="contratos/arrendamiento"),
            call("read_file", file_path="/skills/arrendamiento/SKILL.md"),
        ]
    )
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    run(agent, "ana", "t-1")
    out = run(agent, "beto", "t-2")
    results = results_in_order(out["messages"])
    assert results[0].startswith("Error: Skill 'escrituras/compraventa' not found")
    assert "Cláusula" not in str(results[1])  # ana's loaded skill is not beto's
    assert "loaded" in results[2]
    assert "Contratos de alquiler" in results[3]
    beto_prompt = model.system_prompts()[3]
    assert "arrendamiento" in beto_prompt
    assert "compraventa" not in beto_prompt


def test_loaded_skills_survive_the_next_invocation_and_a_fresh_backend(
    moto_endpoint: str, bucket: str, backend: S3Backend
) -> None:
    saver = InMemorySaver()
    first = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="escrituras/compraventa")])
    agent = create_skills_agent(first, backend, system_prompt=SYSTEM, checkpointer=saver)
    run(agent, "ana", "t-persist")

    # Another process in production: a new backend instance, the same checkpointer.
    fresh = S3Backend(bucket, endpoint_url=moto_endpoint, layout=SEEDS)
    second = ScriptedChatModel(steps=[call("read_file", file_path="/skills/compraventa/resources/ejemplo.md")])
    agent2 = create_skills_agent(second, fresh, system_prompt=SYSTEM, checkpointer=saver)
    out = run(agent2, "ana", "t-persist", "Sigue")
    assert out["loaded_skills"] == ["escrituras/compraventa"]
    assert "Ejemplo de escritura" in results_in_order(out["messages"])[-1]
    assert "# Escritura de compraventa" in second.system_prompts()[0]

    # Another thread of the same user starts with nothing loaded.
    third = ScriptedChatModel(steps=[call("ls", path="/skills")])
    agent3 = create_skills_agent(third, fresh, system_prompt=SYSTEM, checkpointer=saver)
    out3 = run(agent3, "ana", "t-other")
    assert "compraventa" not in str(results_in_order(out3["messages"])[-1])
    assert not out3.get("loaded_skills")


def test_each_model_call_costs_one_conditional_get_with_an_unchanged_library(backend: S3Backend) -> None:
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="escrituras/compraventa")])
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    run(agent, "ana", "warm-up")  # fills the caches
    counter.reset()
    model2 = ScriptedChatModel(steps=[AIMessage(content="hola")])
    agent2 = create_skills_agent(model2, backend, system_prompt=SYSTEM)
    agent2.invoke(
        {
            "messages": [{"role": "user", "content": "hola"}],
            "loaded_skills": ["escrituras/compraventa"],
            "current_skill": "escrituras/compraventa",
        },
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "warm"}},
    )
    assert len(model2.requests) == 1
    assert counter.counts == {"GetObject": 1}  # the manifest's conditional GET (304), no LIST


def test_within_the_catalog_ttl_a_model_call_costs_no_request(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    seed(s3_client, bucket)
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, catalog_ttl=3600, layout=SEEDS)
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    model = ScriptedChatModel(steps=[AIMessage(content="uno")])
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    run(agent, "ana", "ttl-1")
    backend.skills.flush()  # the manifest the first index rebuilt is written after its answer
    counter.reset()
    run(agent, "ana", "ttl-2")
    assert counter.total == 0


def test_a_skill_needing_a_missing_tool_fails_to_load_with_a_clear_message(
    backend: S3Backend, s3_client: Any, bucket: str
) -> None:
    s3_client.put_object(
        Bucket=bucket,
        Key="ana/skills/firma/SKILL.md",
        Body=b"---\nname: firma\ndescription: Firma digital.\ntools_required: [firmar_documento]\n---\nBody",
    )
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="firma")])
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    out = run(agent, "ana", "t-firma")
    (result,) = results_in_order(out["messages"])
    assert "firmar_documento" in result
    assert "does not have" in result
    assert not out.get("loaded_skills")


def test_unknown_skill_answers_with_the_closest_matches(backend: S3Backend) -> None:
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="escrituras/compraventas")])
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    out = run(agent, "ana", "t-typo")
    (result,) = results_in_order(out["messages"])
    assert "not found" in result
    assert "escrituras/compraventa" in result


def test_list_skills_and_read_skill_tools(backend: S3Backend) -> None:
    model = ScriptedChatModel(
        steps=[
            call("list_skills"),
            call("list_skills", category="contratos"),
            call("read_skill", name="escrituras/hipoteca"),
        ]
    )
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    out = run(agent, "ana", "t-list")
    listed, filtered, read = results_in_order(out["messages"])
    assert "compraventa" in listed
    assert "hipoteca" in listed
    assert filtered == "No skills found."
    assert "Instrucciones de hipoteca" in read
    assert not out.get("loaded_skills")


async def test_the_flow_runs_async_too(backend: S3Backend) -> None:
    model = ScriptedChatModel(
        steps=[
            call("cargar_habilidad", skill_path="escrituras/compraventa"),
            call("read_file", file_path="/skills/compraventa/disclosure_clausulas.md"),
            call("write_file", file_path="/workspace/borrador.md", content="Borrador"),
        ]
    )
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM)
    out = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "escritura"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t-async"}},
    )
    results = results_in_order(out["messages"])
    assert "Cláusula primera" in results[1]
    assert "borrador.md" in results[2]
    assert "# Escritura de compraventa" in model.system_prompts()[1]
    assert (await backend.aread("/workspace/borrador.md")).error is not None  # no thread outside a run
    check = S3Backend(backend.bucket, endpoint_url=backend.store.endpoint_url, thread_id="t-async", layout=SEEDS)
    assert (await check.aread("/workspace/borrador.md")).file_data == {
        "content": "Borrador",
        "encoding": "utf-8",
        "modified_at": (await check.aread("/workspace/borrador.md")).file_data["modified_at"],  # type: ignore[index]
    }


def test_library_mode_lets_deepagents_skills_middleware_list_the_library(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    seed(s3_client, bucket)
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, skills_mode="library", layout=SEEDS)
    model = ScriptedChatModel(steps=[call("read_file", file_path="/skills/compraventa/disclosure_clausulas.md")])
    from deepagents.middleware.filesystem import FilesystemMiddleware

    agent = create_agent(
        model,
        system_prompt=SYSTEM,
        middleware=[FilesystemMiddleware(backend=backend), SkillsMiddleware(backend=backend, sources=["/skills/"])],
    )
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "hola"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "lib"}},
    )
    prompt = model.system_prompts()[0]
    assert "compraventa" in prompt
    assert "hipoteca" in prompt
    assert "arrendamiento" not in prompt  # beto's
    assert "Cláusula primera" in str(results_in_order(out["messages"])[-1])
    assert json.dumps(out["messages"][-1].content)


async def test_cargar_habilidad_costs_the_manifest_check_one_get_and_one_version_listing(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    from langgraph.types import Command

    from s3skills.tools import load_skill_update

    seed(s3_client, bucket)
    backend = S3Backend(bucket, user_id="ana", endpoint_url=moto_endpoint, layout=SEEDS)
    await backend.skills.aindex()  # the index is warm in a running agent
    await backend.skills.aflush()  # and the manifest it rebuilt is written
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    update = await load_skill_update(backend.skills, "escrituras/compraventa", [], "call-1", None)
    assert isinstance(update, Command)
    assert update.update is not None
    (message,) = update.update["messages"]  # type: ignore[index]
    assert "/skills/compraventa/resources/plantilla.pdf" in message.content
    # the index (the manifest's conditional GET), the SKILL.md body (1 GET), the skill's files with
    # their versions (1 ListObjectVersions)
    assert counter.counts == {"ListObjectVersions": 1, "GetObject": 2}
