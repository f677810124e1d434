"""Skill versions end to end: a real agent (scripted model) on moto, with and without versioning,
and the CLI's history, rollback and diff on the same bucket."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from s3skills import CodeSkill, S3Backend, SkillContext, SkillMetadata, SkillRegistry, SkillResult, create_skills_agent
from s3skills.cli import main
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import usage_stats
from s3skills.skills.usage import reset_usage
from s3skills.storage import RequestCounter
from s3skills.testing.scripted import ScriptedChatModel, tool_call

# These tests push new versions with a raw S3 client (out of band): the index checks the
# library on every model call, as it does for a bucket written by other tools.
OUT_OF_BAND = Config(layout=KeyLayout.seeds(), verify="always")
SEEDS = KeyLayout.seeds()  # raw keys below are in the seeds' layout: ana/skills/...
FOLDER = "ana/skills/escrituras/compraventa/"


def skill_md(version: str) -> str:
    return (
        "---\nname: compraventa\ndescription: Redacta escrituras de compraventa.\n---\n"
        f"# Compraventa {version}\nInstrucciones de la {version}.\n"
    )


def push(s3_client: Any, bucket: str, version: str) -> None:
    """What `s3skills push` does: the other files, then SKILL.md last."""
    s3_client.put_object(Bucket=bucket, Key=FOLDER + "references/guia.md", Body=f"Guía de la {version}".encode())
    s3_client.put_object(Bucket=bucket, Key=FOLDER + "SKILL.md", Body=skill_md(version).encode())


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def run(agent: Any, thread: str, text: str = "Hola") -> dict[str, Any]:
    out: dict[str, Any] = agent.invoke(
        {"messages": [{"role": "user", "content": text}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": thread}},
    )
    return out


def last_tool_result(out: dict[str, Any]) -> str:
    return str([m.content for m in out["messages"] if isinstance(m, ToolMessage)][-1])


def cli(endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint, "--layout", "seeds", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return code, captured.out


def agent_with(model: ScriptedChatModel, backend: S3Backend, saver: InMemorySaver) -> Any:
    return create_skills_agent(model, backend, system_prompt="Eres un notario.", checkpointer=saver)


def versioned_at_v1(endpoint: str, bucket: str, s3_client: Any) -> tuple[S3Backend, InMemorySaver]:
    """A bucket with versioning on and v1 pushed; a backend on it and a checkpointer."""
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    push(s3_client, bucket, "v1")
    return S3Backend(bucket, endpoint_url=endpoint, config=OUT_OF_BAND), InMemorySaver()


def test_with_versioning_a_thread_keeps_the_version_it_loaded(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    backend, saver = versioned_at_v1(moto_endpoint, bucket, s3_client)
    reset_usage()

    first = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="compraventa")])
    loaded = run(agent_with(first, backend, saver), "t1")
    v1 = loaded["skill_versions"]["escrituras/compraventa"]["version"]
    assert f"(version {v1})" in last_tool_result(loaded)

    push(s3_client, bucket, "v2")  # during the thread

    second = ScriptedChatModel(
        steps=[
            call("grep", pattern="la v", path="/skills/compraventa", output_mode="content"),
            call("read_file", file_path="/skills/compraventa/references/guia.md"),
        ]
    )
    out = run(agent_with(second, backend, saver), "t1", "Sigue")
    grepped, read = [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)][-2:]
    assert "Guía de la v1" in grepped
    assert "v2" not in grepped
    assert "Guía de la v1" in read
    for prompt in second.system_prompts():
        assert f"- escrituras/compraventa: /skills/compraventa/ (version {v1})" in prompt
        assert "Instrucciones de la v1" in prompt
        assert "v2" not in prompt

    other = ScriptedChatModel(
        steps=[
            call("cargar_habilidad", skill_path="compraventa"),
            call("read_file", file_path="/skills/compraventa/references/guia.md"),
        ]
    )
    out2 = run(agent_with(other, backend, saver), "t2")
    v2 = out2["skill_versions"]["escrituras/compraventa"]["version"]
    assert v2 != v1
    assert "Guía de la v2" in last_tool_result(out2)
    assert "Instrucciones de la v2" in other.system_prompts()[-1]

    by_version = usage_stats(by="version")
    assert by_version[f"escrituras/compraventa@{v1}"].loads == 1
    assert by_version[f"escrituras/compraventa@{v2}"].loads == 1

    _, text = cli(moto_endpoint, bucket, capsys, "--json", "history", "compraventa")
    listed = json.loads(text)
    assert [x["version"] for x in listed["versions"]] == [v2, v1]
    assert listed["versions"][0]["latest"]
    assert listed["versioning"]
    _, table = cli(moto_endpoint, bucket, capsys, "history", "compraventa")
    assert v1 in table
    assert v2 in table
    assert "latest" in table

    _, diff = cli(moto_endpoint, bucket, capsys, "diff", "compraventa")
    assert f"--- {v1}/SKILL.md" in diff
    assert "-Instrucciones de la v1." in diff
    assert "+Instrucciones de la v2." in diff

    _, said = cli(moto_endpoint, bucket, capsys, "rollback", "compraventa", "--to", v1[:8])
    assert f"to version {v1}" in said
    assert f"version {v2} stays" in said
    assert s3_client.get_object(Bucket=bucket, Key=FOLDER + "SKILL.md")["Body"].read() == skill_md("v1").encode()
    _, text = cli(moto_endpoint, bucket, capsys, "--json", "history", "compraventa")
    assert [x["version"] for x in json.loads(text)["versions"]] == [v1, v2, v1]  # v2 kept in history

    # The thread that read v1 goes on reading v1; a new load gets v1 again (same content, same id).
    third = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="compraventa")])
    out3 = run(agent_with(third, backend, saver), "t3")
    assert out3["skill_versions"]["escrituras/compraventa"]["version"] == v1


class Noop(CodeSkill):
    """A runnable code skill: with one in the registry, the agent gets `use_skill`."""

    @property
    def metadata(self) -> SkillMetadata:
        return SkillMetadata(name="noop", description="Does nothing.")

    def execute(self, ctx: SkillContext) -> SkillResult:
        return SkillResult(True, "nothing")


def test_use_skill_runs_the_version_the_thread_loaded(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    backend, saver = versioned_at_v1(moto_endpoint, bucket, s3_client)

    def agent(model: ScriptedChatModel) -> Any:
        return create_skills_agent(model, backend, checkpointer=saver, registry=SkillRegistry([Noop()]))

    run(agent(ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="compraventa")])), "t1")
    push(s3_client, bucket, "v2")  # during the thread

    out = run(agent(ScriptedChatModel(steps=[call("use_skill", skill_name="compraventa")])), "t1", "Sigue")
    assert "Instrucciones de la v1" in last_tool_result(out)
    assert "v2" not in last_tool_result(out)
    fresh = run(agent(ScriptedChatModel(steps=[call("use_skill", skill_name="compraventa")])), "t2")
    assert "is not loaded" in last_tool_result(fresh)  # a new thread loads first, and then gets v2


def test_with_versioning_a_file_added_after_the_load_is_not_in_the_thread(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    backend, saver = versioned_at_v1(moto_endpoint, bucket, s3_client)
    run(agent_with(ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="compraventa")]), backend, saver), "t")
    s3_client.put_object(Bucket=bucket, Key=FOLDER + "references/nuevo.md", Body=b"Solo en la v2")
    model = ScriptedChatModel(
        steps=[
            call("ls", path="/skills/compraventa/references"),
            call("glob", pattern="**/*.md", path="/skills/compraventa"),
            call("read_file", file_path="/skills/compraventa/references/nuevo.md"),
        ]
    )
    out = run(agent_with(model, backend, saver), "t", "Sigue")
    listed, globbed, read = [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)][-3:]
    assert "guia.md" in listed
    assert "nuevo.md" not in listed
    assert "guia.md" in globbed
    assert "nuevo.md" not in globbed
    assert read == "Error: File '/skills/compraventa/references/nuevo.md' not found"


def test_without_versioning_a_changed_skill_asks_for_a_reload_and_reload_works(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    push(s3_client, bucket, "v1")
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, config=OUT_OF_BAND)
    saver = InMemorySaver()
    first = ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="compraventa")])
    run(agent_with(first, backend, saver), "t1")

    push(s3_client, bucket, "v2")

    second = ScriptedChatModel(
        steps=[
            call("read_file", file_path="/skills/compraventa/references/guia.md"),
            call("cargar_habilidad", skill_path="compraventa"),
            call("read_file", file_path="/skills/compraventa/references/guia.md"),
        ]
    )
    out = run(agent_with(second, backend, saver), "t1", "Sigue")
    results = [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]
    changed = results[-3]
    assert "changed since it was loaded" in changed
    assert "reload it with cargar_habilidad" in changed
    assert "Guía de la" not in changed  # never a silent mix of versions
    assert "SKILL.md changed since you loaded it" in second.system_prompts()[0]
    assert "Instrucciones de la v1" not in second.system_prompts()[0]
    assert "Guía de la v2" in results[-1]
    assert "Instrucciones de la v2" in second.system_prompts()[-1]


def test_a_pinned_read_is_one_get_and_an_unchanged_pin_costs_no_request_per_model_call(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    backend, saver = versioned_at_v1(moto_endpoint, bucket, s3_client)
    run(agent_with(ScriptedChatModel(steps=[call("cargar_habilidad", skill_path="compraventa")]), backend, saver), "t")
    counter = RequestCounter()
    backend.store.add_request_hook(counter)

    # Two model calls and a read. Each call checks the index (verify="always": the manifest's
    # conditional GET and the library's LISTs, by category); the read is one GET and, for a file
    # in a subfolder, one HEAD (is references/ another skill's now?); no version lookups.
    model = ScriptedChatModel(steps=[call("read_file", file_path="/skills/compraventa/references/guia.md")])
    run(agent_with(model, backend, saver), "t", "Sigue")
    assert len(model.requests) == 2
    assert counter.counts == {"ListObjectsV2": 4, "GetObject": 3, "HeadObject": 1}

    # After a push the pinned SKILL.md is an older version: read once (by VersionId), then cached.
    push(s3_client, bucket, "v2")
    counter.reset()
    model = ScriptedChatModel(steps=[call("read_file", file_path="/skills/compraventa/references/guia.md")])
    out = run(agent_with(model, backend, saver), "t", "Sigue")
    assert "Guía de la v1" in last_tool_result(out)
    assert all("Instrucciones de la v1" in p for p in model.system_prompts())
    # The index checks as above (2 GETs, 4 LISTs) and reads the changed SKILL.md head (1 ranged
    # GET); the pinned SKILL.md (1 GET by VersionId, once) and the pinned guia.md (1 GET, with
    # the HEAD of references/SKILL.md).
    assert counter.counts == {"ListObjectsV2": 4, "GetObject": 5, "PutObject": 1, "HeadObject": 1}


def test_versioning_enable_says_what_it_costs_and_push_prints_the_version(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    _, said = cli(moto_endpoint, bucket, capsys, "versioning", "enable")
    assert "on for bucket" in said
    assert "keeps the old object" in said
    assert "bills the storage of every version" in said
    assert s3_client.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    skill = tmp_path / "escrituras" / "compraventa"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(skill_md("v1"), encoding="utf-8")
    _, pushed = cli(moto_endpoint, bucket, capsys, "push", str(tmp_path))
    _, info = cli(moto_endpoint, bucket, capsys, "--json", "info", "compraventa")
    version = json.loads(info)["version_id"]
    assert f"escrituras/compraventa: version {version}" in pushed
    _, listed = cli(moto_endpoint, bucket, capsys, "--json", "list")
    assert json.loads(listed)["skills"][0]["version_id"] == version


def test_script_runs_are_logged_with_the_version_the_thread_loaded(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    push(s3_client, bucket, "v1")
    s3_client.put_object(
        Bucket=bucket, Key=FOLDER + "scripts/hola.py", Body=b"import json\nprint(json.dumps('hola'))\n"
    )
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, config=OUT_OF_BAND)
    reset_usage()
    model = ScriptedChatModel(
        steps=[
            call("cargar_habilidad", skill_path="compraventa"),
            call("run_skill_script", skill="escrituras/compraventa", script="hola.py", args={}),
        ]
    )
    agent = create_skills_agent(model, backend, scripts=True, checkpointer=InMemorySaver())
    out = run(agent, "t")
    assert json.loads(last_tool_result(out))["result"] == "hola"
    version = out["skill_versions"]["escrituras/compraventa"]["version"]
    stats = usage_stats(by="version")[f"escrituras/compraventa@{version}"]
    assert (stats.loads, stats.script_runs, stats.version) == (1, 1, version)
