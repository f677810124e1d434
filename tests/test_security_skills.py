"""Skills fail safe (issue 9, items 4, 5, 6): disabled means disabled, a skill is one folder,
parallel loads keep the leaf rule. Real agents (deepagents loop, `ScriptedChatModel`) on a
`MemoryObjectStore` in the per-user layout.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from keylog import KeyLogStore
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from runs import SYNC_RUN

from s3skills import S3Backend, create_skills_agent
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import SkillMetadata, SkillRegistry
from s3skills.tenancy import Tenant
from s3skills.testing import ScriptedChatModel, builders, tool_call

SCRIPT = b'import json\nprint(json.dumps({"ran": "SCRIPT RAN"}))\n'


def skill_md(name: str, body: str, *, enabled: bool = True) -> bytes:
    flags = {} if enabled else {"enabled": "false"}
    return builders.skill_md(name, f"The {name} skill.", body=body, **flags).encode()


@pytest.fixture
def store() -> KeyLogStore:
    store = KeyLogStore()
    files = {
        "users/ana/skills/later/SKILL.md": skill_md("later", "LATER BODY"),
        "users/ana/skills/later/ref.md": b"LATER REF",
        "users/ana/skills/later/scripts/go.py": SCRIPT,
        "users/ana/skills/off/SKILL.md": skill_md("off", "OFF BODY", enabled=False),
        "users/ana/skills/off/ref.md": b"OFF REF",
        "users/ana/skills/off/scripts/go.py": SCRIPT,
        "shared/org/skills/orgoff/SKILL.md": skill_md("orgoff", "ORGOFF BODY", enabled=False),
        "shared/org/skills/orgoff/scripts/go.py": SCRIPT,
        "users/ana/skills/escrituras/SKILL.md": skill_md("escrituras", "ESCRITURAS BODY"),
        "users/ana/skills/escrituras/notes.md": b"ESCRITURAS NOTES",
        "users/ana/skills/escrituras/compraventa/SKILL.md": skill_md("compraventa", "NESTED BODY"),
        "users/ana/skills/escrituras/compraventa/secret.md": b"NESTED SECRET",
        "users/ana/skills/a/dup/SKILL.md": skill_md("dup", "DUP A"),
        "users/ana/skills/b/dup/SKILL.md": skill_md("dup", "DUP B"),
    }
    for key, body in files.items():
        store.put_object(key, body)
    return store


@pytest.fixture
def backend(store: KeyLogStore) -> S3Backend:
    return S3Backend("memory", store=store, shared_prefix="org")


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def invoke(agent: Any, **state: Any) -> dict[str, Any]:
    config = {"configurable": {"thread_id": "t1"}}
    if state:  # the skills keys are not run input: a client writes them with update_state
        agent.update_state(config, state, as_node="model")
    out: dict[str, Any] = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]}, context={"user_id": "ana"}, config=config
    )
    return out


def tool_texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text if isinstance(m.content, str) else str(m.content) for m in messages if isinstance(m, ToolMessage)]


# --- 4. disabled means disabled ----------------------------------------------------------------


def test_a_disabled_skill_cannot_be_loaded_read_mounted_prompted_or_run_even_when_the_state_says_loaded(
    backend: S3Backend,
) -> None:
    # A LangGraph Server client can write the state: it claims both disabled skills are loaded.
    steps = [
        call("cargar_habilidad", skill_path="off"),
        call("cargar_habilidad", skill_path="orgoff"),
        call("read_file", file_path="/skills/off/SKILL.md"),
        call("read_file", file_path="/skills/orgoff/SKILL.md"),
        call("ls", path="/skills/off"),
        call("grep", pattern="BODY", path="/"),
        call("glob", pattern="**", path="/skills"),
        call("read_skill", name="off"),
        call("read_skill", name="orgoff"),
        call("run_skill_script", skill="off", script="go.py"),
        call("run_skill_script", skill="orgoff", script="go.py"),
    ]
    model = ScriptedChatModel(steps=steps)
    agent = create_skills_agent(model, backend, scripts=True, checkpointer=InMemorySaver())
    out = invoke(agent, loaded_skills=["off", "orgoff"], current_skill="off")
    texts = tool_texts(out["messages"])
    assert len(texts) == len(steps)
    assert texts[0] == "Error: Skill 'off' not found. Call list_skills to see them all."
    assert texts[1] == "Error: Skill 'orgoff' not found. Call list_skills to see them all."
    assert texts[2] == "Error: File '/skills/off/SKILL.md' not found"
    assert texts[3] == "Error: File '/skills/orgoff/SKILL.md' not found"
    assert "not found" in texts[4]
    assert "not found" in texts[7]
    assert "not found" in texts[8]
    for text in texts:
        for canary in ("OFF BODY", "ORGOFF BODY", "OFF REF", "SCRIPT RAN"):
            assert canary not in text, text
    assert texts[5] == "No matches found"
    assert texts[6] == "No files found"
    for text, name in ((texts[9], "off"), (texts[10], "orgoff")):
        observation = json.loads(text)
        assert observation["ok"] is False
        assert observation["exit_code"] is None
        assert observation["error"] == f"Skill '{name}' not found. Call list_skills to see them all."
    for prompt in model.system_prompts():
        assert "OFF BODY" not in prompt
        assert "ORGOFF BODY" not in prompt
        assert "(It is no longer in the library, or it was disabled.)" in prompt


def _disable(store: KeyLogStore, key: str, name: str, body: str) -> None:
    store.put_object(key, skill_md(name, body, enabled=False))


def _disable_in_band(backend: S3Backend, skill: str) -> None:
    """Disable as `s3skills disable` does: through the library, so its index (the manifest)
    knows at once. An out-of-band write shows within `Config.verify_interval` instead."""
    backend.skills.set_enabled(skill, False, tenant=Tenant(user_id="ana"))


def test_a_skill_disabled_after_it_was_loaded_disappears_from_files_prompt_tools_and_scripts(
    store: KeyLogStore, backend: S3Backend
) -> None:
    def disable_then_noop(_: list[BaseMessage]) -> AIMessage:
        _disable_in_band(backend, "later")
        return call("ls", path="/workspace")

    steps: list[Any] = [
        call("cargar_habilidad", skill_path="later"),
        call("read_file", file_path="/skills/later/ref.md"),
        disable_then_noop,
        # The next model call refreshes the index (the middleware): from here on it is gone.
        call("read_file", file_path="/skills/later/SKILL.md"),
        call("ls", path="/skills/later"),
        call("grep", pattern="LATER", path="/"),
        call("glob", pattern="**", path="/skills/later"),
        call("read_skill", name="later"),
        call("run_skill_script", skill="later", script="go.py"),
        call("cargar_habilidad", skill_path="later"),
    ]
    model = ScriptedChatModel(steps=steps)
    agent = create_skills_agent(model, backend, scripts=True)
    texts = tool_texts(invoke(agent)["messages"])
    assert "Skill 'later' loaded" in texts[0]
    assert "LATER REF" in texts[1]  # loaded and enabled: readable
    after = texts[3:]
    assert after[0] == "Error: File '/skills/later/SKILL.md' not found"
    assert "not found" in after[1]
    assert "No matches found" in after[2]
    assert "not found" in after[3]
    assert "not found" in after[4]
    assert "SCRIPT RAN" not in after[5]
    assert "not found" in after[6]
    for text in after:
        assert "LATER BODY" not in text
        assert "LATER REF" not in text
    prompts = model.system_prompts()
    assert "LATER BODY" in prompts[1]  # loaded: the body is shown
    for prompt in prompts[3:]:
        assert "LATER BODY" not in prompt


@pytest.mark.parametrize("mode", ["on_demand", "preload"])
def test_the_prompt_drops_the_body_of_a_skill_disabled_after_loading(
    store: KeyLogStore, backend: S3Backend, mode: Any
) -> None:
    middleware = SkillsPromptMiddleware(backend, mode=mode)
    state = {"loaded_skills": ["later"], "current_skill": "later"}

    def build() -> str:
        return str(
            SYNC_RUN.invoke(
                {"op": lambda: asyncio.run(middleware.build_prompt(state))},
                context={"user_id": "ana"},
                config={"configurable": {"thread_id": "t1"}},
            )["result"]
        )

    assert "LATER BODY" in build()
    _disable_in_band(backend, "later")
    prompt = build()
    assert "LATER BODY" not in prompt
    assert "OFF BODY" not in prompt
    assert "ORGOFF BODY" not in prompt


# --- 5. a skill is one folder --------------------------------------------------------------------


def _as_ana(op: Any, skills: Sequence[str]) -> Any:
    return SYNC_RUN.invoke(
        {"op": op, "loaded_skills": list(skills)},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )["result"]


def _everything(backend: S3Backend) -> dict[str, Any]:
    return {
        "ls": backend.ls("/skills/escrituras"),
        "ls_nested": backend.ls("/skills/escrituras/compraventa"),
        "read": backend.read("/skills/escrituras/compraventa/SKILL.md"),
        "read_secret": backend.read("/skills/escrituras/compraventa/secret.md"),
        "grep": backend.grep("NESTED"),
        "grep_in": backend.grep("E", path="/skills/escrituras"),
        "glob": backend.glob("**", path="/skills"),
        "download": backend.download_files(
            ["/skills/escrituras/compraventa/secret.md", "/skills/escrituras/compraventa/SKILL.md"]
        ),
        "exists": backend.exists("/skills/escrituras/compraventa"),
        "files": backend.skills.files("escrituras"),
    }


def test_loading_a_skill_never_exposes_the_skill_nested_in_its_folder(store: KeyLogStore, backend: S3Backend) -> None:
    store.take()
    got = _as_ana(lambda: _everything(backend), ["escrituras"])
    assert [e["path"] for e in got["ls"].entries] == ["/skills/escrituras/SKILL.md", "/skills/escrituras/notes.md"]
    assert not got["ls_nested"].entries
    assert got["read"].error == "File '/skills/escrituras/compraventa/SKILL.md' not found"
    assert got["read_secret"].error == "File '/skills/escrituras/compraventa/secret.md' not found"
    assert got["grep"].matches == []
    assert {m["path"] for m in got["grep_in"].matches} == {"/skills/escrituras/SKILL.md", "/skills/escrituras/notes.md"}
    assert {m["path"] for m in got["glob"].matches} == {"/skills/escrituras/SKILL.md", "/skills/escrituras/notes.md"}
    assert [r.error for r in got["download"]] == ["file_not_found", "file_not_found"]
    assert got["exists"] is False
    assert sorted(f.path for f in got["files"]) == ["SKILL.md", "notes.md"]
    assert "NESTED" not in repr(got)
    fetched = [k for op, k in store.take() if op == "GetObject"]
    assert not [k for k in fetched if "compraventa" in k], fetched


class EscriturasCode:
    """A code skill whose id equals an S3 folder that holds a (nested, disabled) skill."""

    metadata = SkillMetadata(name="escrituras", description="Code skill named like an S3 folder.")

    def is_available(self, config: Mapping[str, Any]) -> bool:
        return True

    def get_tools(self, config: Mapping[str, Any]) -> Sequence[Any]:
        return []

    def get_system_instructions(self) -> str:
        return "Code instructions."


def test_a_code_skill_named_like_an_s3_folder_never_maps_to_its_keys(store: KeyLogStore) -> None:
    store.put_object("users/ana/skills/escrituras/hidden/SKILL.md", skill_md("hidden", "HIDDEN", enabled=False))
    backend = S3Backend("memory", store=store, registry=SkillRegistry([EscriturasCode()]))
    assert _as_ana(lambda: backend.skills.get("escrituras").source, []) == "code"
    store.take()
    got = _as_ana(
        lambda: {
            "ls": backend.ls("/skills/escrituras"),
            "read": backend.read("/skills/escrituras/notes.md"),
            "hidden": backend.read("/skills/escrituras/hidden/SKILL.md"),
            "glob": backend.glob("**", path="/"),
            "grep": backend.grep("E"),
        },
        ["escrituras"],
    )
    assert got["ls"].error is not None or not got["ls"].entries
    assert got["read"].error == "File '/skills/escrituras/notes.md' not found"
    assert got["hidden"].error == "File '/skills/escrituras/hidden/SKILL.md' not found"
    assert got["glob"].matches == []
    assert got["grep"].matches == []
    assert not [k for op, k in store.take() if op == "GetObject" and "escrituras" in k]


# --- 6. parallel loads ---------------------------------------------------------------------------


def test_two_loads_of_one_leaf_in_one_model_message_load_exactly_one(backend: S3Backend) -> None:
    both = AIMessage(
        content="",
        tool_calls=[
            tool_call("cargar_habilidad", {"skill_path": "a/dup"}),
            tool_call("cargar_habilidad", {"skill_path": "b/dup"}),
        ],
    )
    model = ScriptedChatModel(steps=[both, call("read_file", file_path="/skills/dup/SKILL.md")])
    out = invoke(create_skills_agent(model, backend))
    texts = tool_texts(out["messages"])
    loaded = [t for t in texts[:2] if "loaded" in t and not t.startswith("Error")]
    clashes = [t for t in texts[:2] if "already appears as /skills/dup" in t]
    assert len(loaded) == 1, texts
    assert len(clashes) == 1, texts
    assert len(out["loaded_skills"]) == 1
    winner = out["loaded_skills"][0]
    assert f"DUP {winner[0].upper()}" in texts[2]
