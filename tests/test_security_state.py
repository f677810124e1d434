"""Graph state is client input (issue 22): attacks through `loaded_skills`, `current_skill`,
`skill_versions`, and the user-less run of issue 18 (item 5).

A LangGraph Server client can write the skills keys with a run's input (before they left
the input schema) and with `threads.update_state` (also `{"__overwrite__": ...}`, which
skips the reducers). Each test here is one such write, made in process on a real agent
(scripted model, `InMemorySaver`) over moto; tests/test_langgraph_server.py makes the same
writes through a real `langgraph dev` deployment.
"""

from __future__ import annotations

from typing import Any

import pytest
from keylog import KeyLogStore
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from s3skills import S3Backend, UserNotResolved, create_skills_agent
from s3skills.aio import run_sync
from s3skills.config import Config
from s3skills.ids import SkillId
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.middleware.skills_prompt import merge_loaded_skills, merge_skill_versions
from s3skills.skills.versions.pinned import PinMismatch
from s3skills.tenancy import PinnedFile, SkillPin, thread_skills
from s3skills.testing.scripted import ScriptedChatModel, tool_call

# Keys below are written with a raw client: the index checks the library on every model call.
CONFIG = Config(layout=KeyLayout(), shared_library="org", verify="always", shared_catalog_ttl=None)
SHARED = "shared/org/skills/guia/"


def md(name: str, body: str, *, enabled: bool = True) -> bytes:
    flag = "" if enabled else "enabled: false\n"
    return f"---\nname: {name}\ndescription: The {name} skill.\n{flag}---\n# {name}\n{body}\n".encode()


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def put(s3: Any, bucket: str, key: str, body: bytes) -> tuple[str, str]:
    """Write an object; its (ETag, VersionId)."""
    out = s3.put_object(Bucket=bucket, Key=key, Body=body)
    return out["ETag"].strip('"'), out.get("VersionId", "null")


@pytest.fixture
def library(s3_client: Any, bucket: str) -> dict[str, tuple[str, str]]:
    """alice's and bob's libraries, and a shared skill `guia` pushed twice (versioning on).

    Returns the (ETag, VersionId) of each `SKILL.md` version: v0 (withdrawn), then va (current).
    """
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put(s3_client, bucket, "users/alice/skills/notas/SKILL.md", md("notas", "ALICE-NOTAS"))
    put(s3_client, bucket, "users/alice/skills/notas/ref.md", b"ALICE-REF")
    put(s3_client, bucket, "users/alice/skills/oculta/SKILL.md", md("oculta", "DISABLED-BODY", enabled=False))
    put(s3_client, bucket, "users/alice/skills/oculta/ref.md", b"DISABLED-REF")
    put(s3_client, bucket, "users/alice/skills/extra/SKILL.md", md("extra", "EXTRA-NOT-LOADED"))
    put(s3_client, bucket, "users/bob/skills/secreto/SKILL.md", md("secreto", "BOB-SECRET"))
    versions = {}
    for name in ("v0", "va"):
        put(s3_client, bucket, SHARED + "ref.md", f"GUIA-REF-{name.upper()}".encode())
        versions[name] = put(s3_client, bucket, SHARED + "SKILL.md", md("guia", f"GUIA-TEXT-{name.upper()}"))
    return versions


def backend_on(endpoint: str, bucket: str, **options: Any) -> S3Backend:
    return S3Backend(bucket, endpoint_url=endpoint, config=CONFIG, **options)


def agent(model: ScriptedChatModel, backend: S3Backend, saver: InMemorySaver) -> Any:
    return create_skills_agent(model, backend, system_prompt="Base prompt.", checkpointer=saver)


def run(graph: Any, user: str, thread: str, text: str = "Hola", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = graph.invoke(
        {"messages": [{"role": "user", "content": text}], **extra},
        context={"user_id": user},
        config={"configurable": {"thread_id": thread}},
    )
    return out


def tool_results(out: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]


# --- the reducers and the validator (pure) ---------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    "notalist",
    "pdf",
    {"pdf": 1},
    {"__overwrite__": ["pdf"]},
    ["../../x"],
    ["a/b/c"],
    [""],
    ["/pdf/"],
    [" pdf"],
    [None, 1, 2.5, ["pdf"], {"pdf": 1}],
    ["x\x00"],
    ["\ud800"],
    42,
    None,
]


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=repr)
def test_the_loaded_skills_reducer_is_total_and_keeps_only_canonical_ids(value: Any) -> None:
    for merged in (merge_loaded_skills(value, ["notas"]), merge_loaded_skills(["notas"], value)):
        assert merged == ["notas"]
    assert merge_loaded_skills(value, value) == []
    assert thread_skills({"loaded_skills": value}).loaded == ()


def test_a_string_in_loaded_skills_is_not_a_list_of_its_characters() -> None:
    assert merge_loaded_skills("notalist", None) == []
    assert thread_skills({"loaded_skills": "abc"}).loaded == ()
    assert merge_loaded_skills(["a", "cat/b", "a"], ["cat/b", "c"]) == ["a", "cat/b", "c"]


GOOD_PIN = {"version": "abc123", "files": {"SKILL.md": {"etag": "e1", "version_id": "v1"}, "refs/a.md": {"etag": "e2"}}}
BAD_PINS: list[Any] = [
    "notadict",
    None,
    {"version": 1, "files": {}},
    {"version": "v"},
    {"version": "v", "files": "x"},
    {"version": "v", "files": {"SKILL.md": {"etag": 5}}},
    {"version": "v", "files": {"SKILL.md": {"etag": "e", "version_id": 7}}},
    {"version": "v", "files": {"SKILL.md": "e"}},
    {"version": "x" * 65, "files": {}},
    {"version": "v", "files": {"SKILL.md": {"etag": "e" * 300}}},
]


@pytest.mark.parametrize("pin", BAD_PINS, ids=repr)
def test_the_skill_versions_reducer_is_total_and_drops_malformed_pins(pin: Any) -> None:
    merged = merge_skill_versions({"notas": GOOD_PIN}, {"guia": pin, "../x": GOOD_PIN, "a/b/c": GOOD_PIN})
    assert merged == {"notas": GOOD_PIN}
    assert merge_skill_versions(pin, None) == {}
    assert merge_skill_versions("notadict", {"notas": GOOD_PIN}) == {"notas": GOOD_PIN}
    assert merge_skill_versions({"__overwrite__": {"notas": GOOD_PIN}}, None) == {}


@pytest.mark.parametrize("path", ["../SKILL.md", "a//b", "", "/abs", "a/./b", "x\x00", "a\\b", 7])
def test_a_pinned_file_whose_path_no_virtual_path_names_is_left_out(path: Any) -> None:
    files = {**GOOD_PIN["files"], path: {"etag": "e9", "version_id": "v9"}}
    merged = merge_skill_versions(None, {"notas": {"version": "abc123", "files": files}})
    assert merged == {"notas": GOOD_PIN}


def test_current_skill_and_pins_count_only_for_loaded_skills() -> None:
    state = {
        "loaded_skills": ["notas"],
        "current_skill": "extra",
        "skill_versions": {"notas": GOOD_PIN, "extra": GOOD_PIN},
    }
    read = thread_skills(state)
    assert read.loaded == ("notas",)
    assert read.current is None
    assert set(read.pins) == {"notas"}
    assert read.pins["notas"] == SkillPin.from_state(GOOD_PIN)
    assert thread_skills({**state, "current_skill": "notas"}).current == "notas"
    assert thread_skills({**state, "current_skill": ["notas"]}).current is None
    assert thread_skills("notastate") == thread_skills({})


# --- the graph's input schema ----------------------------------------------------------------


def test_the_skills_keys_are_not_in_the_graphs_input_schema(moto_endpoint: str, bucket: str) -> None:
    graph = create_skills_agent(ScriptedChatModel(), backend_on(moto_endpoint, bucket))
    inputs = set(graph.get_input_jsonschema()["properties"])
    outputs = set(graph.get_output_jsonschema()["properties"])
    assert "messages" in inputs
    assert not inputs & {"loaded_skills", "current_skill", "skill_versions"}
    assert {"loaded_skills", "current_skill", "skill_versions"} <= outputs  # callers still read them


def test_skills_sent_in_a_runs_input_are_not_loaded(moto_endpoint: str, bucket: str, library: dict[str, Any]) -> None:
    model = ScriptedChatModel(steps=[call("read_file", file_path="/skills/notas/ref.md")])
    hostile = {"loaded_skills": ["notas"], "current_skill": "notas", "skill_versions": {"notas": GOOD_PIN}}
    out = run(agent(model, backend_on(moto_endpoint, bucket), InMemorySaver()), "alice", "t1", **hostile)
    assert "ALICE-REF" not in tool_results(out)[0]
    assert "ALICE-NOTAS" not in model.system_prompts()[0]
    assert "notas" in model.system_prompts()[0]  # still offered in the index, not loaded
    assert not out.get("loaded_skills")
    assert not out.get("skill_versions")


# --- update_state: hostile values do not break a thread ---------------------------------------

BROKEN_STATES: list[dict[str, Any]] = [
    {"loaded_skills": ["../../x"]},
    {"loaded_skills": ["a/b/c"]},
    {"loaded_skills": [""]},
    {"loaded_skills": {"__overwrite__": "notalist"}},
    {"loaded_skills": {"__overwrite__": ["../../x", "notas", 3]}},
    {"skill_versions": {"__overwrite__": "notadict"}},
    {"skill_versions": {"__overwrite__": {"notas": {"version": 1}}}},
    {"current_skill": "../../users/bob/skills/secreto"},
    {"current_skill": {"__overwrite__": ["x"]}},
]


@pytest.mark.parametrize("values", BROKEN_STATES, ids=repr)
def test_a_hostile_state_write_never_breaks_the_thread(
    moto_endpoint: str, bucket: str, library: dict[str, Any], values: dict[str, Any]
) -> None:
    saver = InMemorySaver()
    backend = backend_on(moto_endpoint, bucket)
    first = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="notas")])
    run(agent(first, backend, saver), "alice", "t1")
    graph = agent(ScriptedChatModel(), backend, saver)
    config = {"configurable": {"thread_id": "t1"}}
    graph.update_state(config, values)
    graph.get_state(config)  # the thread's state still reads

    model = ScriptedChatModel(
        steps=[
            call("ls", path="/skills"),
            call("read_file", file_path="/skills/notas/ref.md"),
            call("cargar_habilidad", skill_path="extra"),
        ]
    )
    out = run(agent(model, backend, saver), "alice", "t1", "Sigue")
    results = tool_results(out)
    assert "Skill 'extra' loaded" in results[-1]  # the run went on to the end
    assert "BOB-SECRET" not in repr(out) + "".join(model.system_prompts())
    assert all(SkillId.is_valid(s) for s in out["loaded_skills"])
    assert "extra" in out["loaded_skills"]
    assert isinstance(out.get("skill_versions", {}), dict)
    graph.get_state(config)


def test_a_disabled_skill_named_in_loaded_skills_is_not_listed_or_read(
    moto_endpoint: str, bucket: str, library: dict[str, Any]
) -> None:
    saver = InMemorySaver()
    backend = backend_on(moto_endpoint, bucket)
    first = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="notas")])
    run(agent(first, backend, saver), "alice", "t1")
    graph = agent(ScriptedChatModel(), backend, saver)
    graph.update_state({"configurable": {"thread_id": "t1"}}, {"loaded_skills": ["oculta"], "current_skill": "oculta"})

    model = ScriptedChatModel(
        steps=[
            call("ls", path="/skills"),
            call("read_file", file_path="/skills/oculta/ref.md"),
            call("grep", pattern="DISABLED", path="/"),
        ]
    )
    out = run(agent(model, backend, saver), "alice", "t1", "Sigue")
    listing, read, grep = tool_results(out)[-3:]
    assert "notas" in listing
    assert "oculta" not in listing
    assert "DISABLED" not in read + grep
    assert all("DISABLED-BODY" not in p for p in model.system_prompts())


def test_current_skill_naming_a_skill_the_thread_did_not_load_shows_no_skill_md(
    moto_endpoint: str, bucket: str, library: dict[str, Any]
) -> None:
    saver = InMemorySaver()
    backend = backend_on(moto_endpoint, bucket)
    run(agent(ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="notas")]), backend, saver), "alice", "t1")
    agent(ScriptedChatModel(), backend, saver).update_state(
        {"configurable": {"thread_id": "t1"}}, {"current_skill": "extra"}
    )

    model = ScriptedChatModel()
    run(agent(model, backend, saver), "alice", "t1", "Sigue")
    assert "EXTRA-NOT-LOADED" not in model.system_prompts()[0]
    assert "### Current skill" not in model.system_prompts()[0]


@pytest.mark.parametrize(
    "state",
    [
        {"loaded_skills": ["../../x"], "current_skill": "../../x"},
        {"loaded_skills": ["a/b/c"], "current_skill": "a/b/c"},
        {"loaded_skills": [""], "current_skill": ""},
        {"loaded_skills": "notalist", "skill_versions": "notadict", "current_skill": 7},
        {"loaded_skills": ["notas"], "skill_versions": {"notas": "x"}, "current_skill": "notas"},
    ],
    ids=repr,
)
def test_the_prompt_middleware_never_raises_on_a_hostile_state(
    moto_endpoint: str, bucket: str, library: dict[str, Any], state: dict[str, Any]
) -> None:
    middleware = SkillsPromptMiddleware(backend_on(moto_endpoint, bucket, user_id="alice"))
    text = run_sync(middleware.build_prompt(state))
    assert text.startswith("## Skills")
    assert "notas" in text
    assert "BOB-SECRET" not in text


# --- issue 22: a forged pin never shows another version ---------------------------------------


def _load_guia(backend: S3Backend, saver: InMemorySaver, user: str, thread: str) -> dict[str, Any]:
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="guia")])
    return run(agent(model, backend, saver), user, thread)


def _prompt_of_next_run(backend: S3Backend, saver: InMemorySaver, user: str, thread: str) -> tuple[str, list[str]]:
    model = ScriptedChatModel(steps=[call("read_file", file_path="/skills/guia/ref.md")])
    out = run(agent(model, backend, saver), user, thread, "Sigue")
    return model.system_prompts()[0], tool_results(out)


def test_a_forged_pin_never_shows_another_tenant_a_withdrawn_version(
    moto_endpoint: str, bucket: str, s3_client: Any, library: dict[str, Any]
) -> None:
    # v0 is withdrawn, va is current: alice loads va; then vc is pushed over it.
    etag_a, vid_a = library["va"]
    etag_0, vid_0 = library["v0"]
    saver = InMemorySaver()
    backend = backend_on(moto_endpoint, bucket)
    loaded = _load_guia(backend, saver, "alice", "alice-thread")
    assert loaded["skill_versions"]["guia"]["files"]["SKILL.md"] == {"etag": etag_a, "version_id": vid_a}
    put(s3_client, bucket, SHARED + "SKILL.md", md("guia", "GUIA-TEXT-VC"))

    # bob forges his thread's pin: alice's ETag with the withdrawn VersionId.
    _load_guia(backend, saver, "bob", "bob-thread")
    forged = {"guia": {"version": "forged", "files": {"SKILL.md": {"etag": etag_a, "version_id": vid_0}}}}
    agent(ScriptedChatModel(), backend, saver).update_state(
        {"configurable": {"thread_id": "bob-thread"}}, {"skill_versions": {"__overwrite__": forged}}
    )
    bob_prompt, _ = _prompt_of_next_run(backend, saver, "bob", "bob-thread")
    assert "GUIA-TEXT-V0" not in bob_prompt
    assert "GUIA-TEXT-VA" not in bob_prompt  # the pin does not match what its VersionId holds
    assert "reload it with cargar_habilidad" in bob_prompt

    alice_prompt, _ = _prompt_of_next_run(backend, saver, "alice", "alice-thread")
    assert "GUIA-TEXT-VA" in alice_prompt
    assert "GUIA-TEXT-V0" not in alice_prompt

    # A pin whose ETag really is that version's shows it: bob names a version he could read.
    genuine = {"guia": {"version": "old", "files": {"SKILL.md": {"etag": etag_0, "version_id": vid_0}}}}
    agent(ScriptedChatModel(), backend, saver).update_state(
        {"configurable": {"thread_id": "bob-thread"}}, {"skill_versions": {"__overwrite__": genuine}}
    )
    bob_prompt, _ = _prompt_of_next_run(backend, saver, "bob", "bob-thread")
    assert "GUIA-TEXT-V0" in bob_prompt
    alice_prompt, _ = _prompt_of_next_run(backend, saver, "alice", "alice-thread")
    assert "GUIA-TEXT-VA" in alice_prompt
    assert "GUIA-TEXT-V0" not in alice_prompt


def test_a_forged_pin_of_a_skill_file_is_refused_on_read(
    moto_endpoint: str, bucket: str, s3_client: Any, library: dict[str, Any]
) -> None:
    saver = InMemorySaver()
    backend = backend_on(moto_endpoint, bucket)
    loaded = _load_guia(backend, saver, "bob", "bob-thread")
    versions = s3_client.list_object_versions(Bucket=bucket, Prefix=SHARED + "ref.md")["Versions"]
    oldest = next(v for v in versions if not v["IsLatest"])
    pin = loaded["skill_versions"]["guia"]
    pin["files"]["ref.md"] = {"etag": pin["files"]["ref.md"]["etag"], "version_id": oldest["VersionId"]}
    agent(ScriptedChatModel(), backend, saver).update_state(
        {"configurable": {"thread_id": "bob-thread"}}, {"skill_versions": {"guia": pin}}
    )
    _, results = _prompt_of_next_run(backend, saver, "bob", "bob-thread")
    assert "GUIA-REF-V0" not in results[-1]
    assert "reload the skill" in results[-1]


def test_the_pinned_skill_md_cache_holds_only_what_a_read_verified() -> None:
    store = KeyLogStore()
    run_sync(store.aput_versioning(True))
    key = "users/ana/skills/guia/SKILL.md"
    store.put_object(key, md("guia", "TEXT-V0"))
    store.put_object(key, md("guia", "TEXT-VA"))
    store.put_object("users/bob/skills/x/SKILL.md", md("x", "BOB"))
    versions = run_sync(store.alist_versions("users/"))
    v0, va = sorted((v for v in versions if v.key == key), key=lambda v: v.last_modified)
    bob = next(v for v in versions if v.key.startswith("users/bob/"))
    library = S3Backend("memory", store=store, user_id="ana").skills
    skill = library.get("guia")

    def pinned(etag: str, version_id: str) -> str:
        pin = SkillPin("p", {"SKILL.md": PinnedFile(etag, version_id)})
        return str(run_sync(library.ainstructions_pinned(skill, pin)))

    store.take()
    assert "TEXT-V0" in pinned(v0.etag, v0.version_id)
    assert "TEXT-V0" in pinned(v0.etag, v0.version_id)
    assert [op for op, _ in store.take()].count("GetObject") == 1  # the verified read is cached
    # Claims that reuse the cached ETag with another VersionId, or another object's ETag, are read and refused.
    for etag, version_id in ((v0.etag, va.version_id), (bob.etag, v0.version_id)):
        with pytest.raises(PinMismatch):
            pinned(etag, version_id)
    assert [op for op, _ in store.take()].count("GetObject") == 2
    assert "TEXT-VA" in pinned(va.etag, v0.version_id)  # the current ETag: the current SKILL.md


# --- issue 18 item 5: a run with no user ------------------------------------------------------


@pytest.mark.parametrize("context", [None, {}, {"user_id": ""}, {"user_id": None}], ids=repr)
def test_a_run_with_no_user_fails_before_the_model_is_called(
    moto_endpoint: str, bucket: str, library: dict[str, Any], context: Any
) -> None:
    model = ScriptedChatModel()
    graph = agent(model, backend_on(moto_endpoint, bucket), InMemorySaver())
    with pytest.raises(UserNotResolved, match="allow_anonymous=True"):
        graph.invoke(
            {"messages": [{"role": "user", "content": "Hola"}]},
            context=context,
            config={"configurable": {"thread_id": "t1"}},
        )
    assert model.requests == []


def test_allow_anonymous_lets_a_user_less_run_go_on_with_no_library(
    moto_endpoint: str, bucket: str, library: dict[str, Any]
) -> None:
    model = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="notas")])
    graph = agent(model, backend_on(moto_endpoint, bucket, allow_anonymous=True), InMemorySaver())
    out = graph.invoke(
        {"messages": [{"role": "user", "content": "Hola"}]}, config={"configurable": {"thread_id": "t1"}}
    )
    assert out["messages"][-1].content == "Done."
    assert "## Skills" not in model.system_prompts()[0]
    assert "Base prompt." in model.system_prompts()[0]
    assert "Error" in tool_results(out)[0]
    assert not out.get("loaded_skills")
