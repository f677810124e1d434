"""Code skills (seeds 000/001): registry precedence, tool disclosure, injection modes, usage log."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from s3skills import S3Backend, SkillMetadata, SkillRegistry, create_skills_agent, usage_stats
from s3skills.layout import KeyLayout
from s3skills.skills.usage import reset_usage
from s3skills.testing.scripted import ScriptedChatModel, tool_call

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

SYSTEM = "Base prompt of the host application."


@tool
def firmar_documento(documento: str) -> str:
    """Sign a document electronically."""
    return f"firmado:{documento}"


class FirmaSkill:
    """A code skill that brings one tool and its instructions."""

    def __init__(self, description: str = "Firma electrónica de documentos.", available: bool = True) -> None:
        self._meta = SkillMetadata(name="firma", description=description, category="notaria")
        self._available = available

    @property
    def metadata(self) -> SkillMetadata:
        return self._meta

    def is_available(self, config: Mapping[str, Any]) -> bool:
        return self._available and config.get("user_id") != "blocked"

    def get_tools(self, config: Mapping[str, Any]) -> Sequence[BaseTool]:
        return [firmar_documento]

    def get_system_instructions(self) -> str:
        return "Para firmar, llama a firmar_documento con el nombre del documento."


class NeedsMissingTool(FirmaSkill):
    def __init__(self) -> None:
        super().__init__()
        self._meta = SkillMetadata(name="sello", description="Sellado.", tools_required=["sellar"])


def call(tool_name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool_name, args)])


@pytest.fixture
def backend(make_backend: Callable[..., S3Backend], bucket: str, s3_client: Any) -> S3Backend:
    s3_client.put_object(
        Bucket=bucket,
        Key="ana/skills/pdf/SKILL.md",
        Body=b"---\nname: pdf\ndescription: Trabaja con PDF.\n---\n# PDF\nInstrucciones PDF.",
    )
    return make_backend()


def invoke(agent: Any, user: str = "ana", thread: str = "t") -> dict[str, Any]:
    out: dict[str, Any] = agent.invoke(
        {"messages": [{"role": "user", "content": "firma el contrato"}]},
        context={"user_id": user},
        config={"configurable": {"thread_id": thread}},
    )
    return out


def test_registry_precedence_bundled_user_workspace() -> None:
    registry = SkillRegistry()
    assert registry.register(FirmaSkill("bundled"), source="bundled")
    assert registry.register(FirmaSkill("workspace"), source="workspace")
    assert not registry.register(FirmaSkill("user"), source="user")  # lower than workspace
    skill = registry.get("notaria/firma")
    assert skill is not None
    assert skill.metadata.description == "workspace"
    with pytest.raises(TypeError):
        registry.register(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="source"):
        registry.register(FirmaSkill(), source="global")  # type: ignore[arg-type]


def test_registry_lists_tools_and_instructions_of_available_skills() -> None:
    registry = SkillRegistry([FirmaSkill()])
    assert [s.id for s in registry.list_skills()] == ["notaria/firma"]
    assert registry.list_skills()[0].source == "code"
    assert [t.name for t in registry.get_active_tools()] == ["firmar_documento"]
    assert registry.get_active_tools(loaded=[]) == []
    assert "firmar_documento" in registry.get_combined_system_instructions()
    assert registry.list_skills({"user_id": "blocked"}) == []


def test_a_code_skill_tool_is_hidden_until_its_skill_is_loaded(backend: S3Backend) -> None:
    reset_usage()
    registry = SkillRegistry([FirmaSkill()])
    model = ScriptedChatModel(
        steps=[
            call("firmar_documento", documento="contrato.pdf"),
            call("cargar_habilidad", skill_path="notaria/firma"),
            call("firmar_documento", documento="contrato.pdf"),
        ]
    )
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry)
    out = invoke(agent)
    results = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "load it with cargar_habilidad first" in results[0]
    assert "Skill 'notaria/firma' loaded" in results[1]
    assert "firmar_documento" in results[1]
    assert results[2] == "firmado:contrato.pdf"

    seen = model.tools_seen
    assert "firmar_documento" not in seen[0]
    assert "cargar_habilidad" in seen[0]
    assert "firmar_documento" in seen[2]
    prompts = model.system_prompts()
    assert "<name>firma</name>" in prompts[0]  # in the same index as the S3 skill
    assert "<name>pdf</name>" in prompts[0]
    assert "Para firmar" not in prompts[0]
    assert "Para firmar, llama a firmar_documento" in prompts[2]
    assert prompts[2].startswith(SYSTEM)

    stats = usage_stats()
    assert stats["notaria/firma"].loads == 1
    assert stats["notaria/firma"].users == 1


def test_a_code_skill_needing_a_missing_tool_fails_to_load(backend: S3Backend) -> None:
    registry = SkillRegistry([NeedsMissingTool()])
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="sello")])
    out = invoke(create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry))
    (result,) = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "needs the tool(s) sellar" in result
    assert not out.get("loaded_skills")


def test_an_unavailable_code_skill_is_not_offered_nor_loadable(backend: S3Backend) -> None:
    registry = SkillRegistry([FirmaSkill(available=False)])
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="notaria/firma")])
    out = invoke(create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry))
    (result,) = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "not available" in result
    assert "<name>firma</name>" not in model.system_prompts()[0]


def test_preload_mode_injects_every_skill_and_shows_every_tool(backend: S3Backend) -> None:
    registry = SkillRegistry([FirmaSkill()])
    model = ScriptedChatModel(steps=[call("firmar_documento", documento="a.pdf")])
    agent = create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry, mode="preload")
    out = invoke(agent)
    (result,) = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert result == "firmado:a.pdf"
    prompt = model.system_prompts()[0]
    assert "Para firmar" in prompt
    assert "Instrucciones PDF." in prompt
    assert "firmar_documento" in model.tools_seen[0]


def test_list_and_read_skill_include_code_skills(backend: S3Backend) -> None:
    registry = SkillRegistry([FirmaSkill()])
    model = ScriptedChatModel(steps=[call("list_skills"), call("read_skill", name="notaria/firma")])
    out = invoke(create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry))
    listed, read = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "notaria/firma" in listed
    assert "pdf" in listed
    assert read.startswith("Para firmar")
