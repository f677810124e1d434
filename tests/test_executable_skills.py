"""Executable skills (seed 000): `use_skill` runs code skills and S3 skills in a real agent.

A real deepagents agent (`create_skills_agent`) on a moto S3, driven by a scripted
model. What a skill did is read from the run's trace (a callback handler sees every
tool and model run, with its parent), from the scripted model's requests, from the
tool messages the agent received and from the bucket.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from s3skills import (
    CodeSkill,
    S3Backend,
    SkillContext,
    SkillMetadata,
    SkillRegistry,
    SkillResult,
    create_skills_agent,
    usage_stats,
)
from s3skills.skills.code.executable import SkillTimeout, SkillToolError
from s3skills.skills.usage import reset_usage
from s3skills.testing.scripted import ScriptedChatModel, tool_call

SYSTEM = "Eres el asistente de una notaría."

COMPRAVENTA = """---
name: compraventa
description: Redacta escrituras de compraventa.
category: escrituras
---
# Compraventa
Identifica a las partes y el inmueble.
"""

# -- the skills ----------------------------------------------------------------------------


class AnalizarFicheros(CodeSkill):
    """Seed 000's first example, written with a sync `execute`: the same calls return values."""

    metadata = SkillMetadata(
        name="analizar",
        description="Analiza los ficheros del espacio de trabajo.",
        category="informes",
        tools_required=["glob", "read_file"],
    )

    def execute(self, ctx: SkillContext) -> SkillResult:
        listing = ctx.tools.dispatch("glob", {"pattern": "**/*.txt", "path": "/workspace"})
        paths = sorted(re.findall(r"/workspace/[\w./-]+\.txt", listing))
        lines = []
        for path in paths:
            text = ctx.tools.dispatch("read_file", {"file_path": path})
            answer = ctx.llm.complete(f"Resume el fichero {path}:\n{text}")
            lines.append(f"{path}: {answer}")
        ctx.logger.info("analysed %d files", len(paths))
        return SkillResult(True, "\n".join(lines), metadata={"files": len(paths)})


class InformeCompleto(CodeSkill):
    """Seed 000's second example with the explicit async methods (`adispatch`, `acomplete`)."""

    metadata = SkillMetadata(
        name="informe",
        description="Informe completo: análisis de ficheros e instrucciones de la escritura.",
        category="informes",
        tools_required=["use_skill"],
    )

    async def execute(self, ctx: SkillContext) -> SkillResult:
        analysis = await ctx.tools.adispatch("use_skill", {"skill_name": "informes/analizar"})
        deed = await ctx.tools.adispatch("use_skill", {"skill_name": "compraventa", "input": ctx.input})
        summary = await ctx.llm.acomplete(f"Une el análisis y la escritura:\n{analysis}\n---\n{deed}")
        return SkillResult(True, {"analysis": analysis, "deed": deed, "summary": summary})


class SeedAnalizar(CodeSkill):
    """Seed 000's first example as the seed writes it (async, awaiting `dispatch` and `complete`),
    adapted to deepagents' tool names (glob, read_file)."""

    metadata = AnalizarFicheros.metadata

    async def execute(self, ctx):  # as the seed writes it: no annotations
        listing = await ctx.tools.dispatch("glob", {"pattern": "**/*.txt", "path": "/workspace"})
        paths = sorted(re.findall(r"/workspace/[\w./-]+\.txt", listing))
        lines = []
        for path in paths:
            text = await ctx.tools.dispatch("read_file", {"file_path": path})
            answer = await ctx.llm.complete(f"Resume el fichero {path}:\n{text}")
            lines.append(f"{path}: {answer}")
        return SkillResult(success=True, output="\n".join(lines), metadata={"files": len(paths)})


class SeedInforme(CodeSkill):
    """Seed 000's second example as the seed writes it: a composite skill awaiting `dispatch` and `complete`."""

    metadata = InformeCompleto.metadata

    async def execute(self, ctx):  # as the seed writes it: no annotations
        analysis = await ctx.tools.dispatch("use_skill", {"skill_name": "informes/analizar"})
        deed = await ctx.tools.dispatch("use_skill", {"skill_name": "compraventa", "input": ctx.input})
        summary = await ctx.llm.complete(f"Une el análisis y la escritura:\n{analysis}\n---\n{deed}")
        return SkillResult(success=True, output={"analysis": analysis, "deed": deed, "summary": summary})


STYLES = {
    "sync-def": (AnalizarFicheros, InformeCompleto),
    "seed-await": (SeedAnalizar, SeedInforme),
}


@dataclass
class Simple(CodeSkill):
    """A code skill whose `execute` is a function given by the test."""

    name: str
    run: Callable[[SkillContext], Any]
    needs: tuple[str, ...] = ()

    @property
    def metadata(self) -> SkillMetadata:
        return SkillMetadata(name=self.name, description=f"Skill {self.name}.", tools_required=list(self.needs))

    def execute(self, ctx: SkillContext) -> SkillResult:
        value = self.run(ctx)
        return value if isinstance(value, SkillResult) else SkillResult(True, value)


# -- the harness ---------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    kind: str  # "tool" or "model"
    run_id: UUID
    parent: UUID | None
    tags: list[str]
    inputs: Any


class Trace(BaseCallbackHandler):
    """Every tool and chat-model run of an agent run, with its parent run."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.lock = threading.Lock()

    def _add(self, run: Run) -> None:
        with self.lock:
            self.runs.append(run)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._add(Run(str(serialized.get("name")), "tool", run_id, parent_run_id, tags or [], inputs or input_str))

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._add(Run("model", "model", run_id, parent_run_id, tags or [], messages))

    def tools(self) -> list[tuple[str, Any]]:
        return [(r.name, r.inputs) for r in self.runs if r.kind == "tool"]

    def children(self, parent: Run, kind: str) -> list[Run]:
        return [r for r in self.runs if r.parent == parent.run_id and r.kind == kind]

    def first(self, name: str) -> Run:
        return next(r for r in self.runs if r.name == name)


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def echo_first_line(messages: list[BaseMessage]) -> AIMessage:
    """A model reply to a skill's prompt that shows which prompt it saw."""
    return AIMessage(content="visto: " + messages[-1].text.splitlines()[0])


def tool_messages(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.fixture
def backend(make_backend: Callable[..., S3Backend], bucket: str, s3_client: Any) -> S3Backend:
    files = {
        "ana/skills/escrituras/compraventa/SKILL.md": COMPRAVENTA,
        "threads/t1/notas/a.txt": "El comprador es Luis.",
        "threads/t1/notas/b.txt": "El precio es 100.000 euros.",
        "threads/t1/otro.md": "No es un txt.",
        "threads/t2/ajeno.txt": "De otro hilo.",
    }
    for key, body in files.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=body.encode())
    return make_backend()


def invoke(agent: Any, trace: Trace | None = None, *, asynchronous: bool = False, thread: str = "t1") -> Any:
    args = {"messages": [{"role": "user", "content": "Analiza mis ficheros"}]}
    config = {"configurable": {"thread_id": thread}, "callbacks": [trace] if trace else []}
    if asynchronous:
        return asyncio.run(agent.ainvoke(args, context={"user_id": "ana"}, config=config))
    return agent.invoke(args, context={"user_id": "ana"}, config=config)


# -- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_code_skill_reads_the_workspace_through_the_agents_tools_and_asks_the_model(
    backend: S3Backend, asynchronous: bool, style: str
) -> None:
    reset_usage()
    registry = SkillRegistry([STYLES[style][0]()])
    model = ScriptedChatModel(
        steps=[call("use_skill", skill_name="informes/analizar"), echo_first_line, echo_first_line]
    )
    trace = Trace()
    out = invoke(
        create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry), trace, asynchronous=asynchronous
    )

    (result,) = tool_messages(out)
    assert result.status == "success"
    assert result.content == (
        "/workspace/notas/a.txt: visto: Resume el fichero /workspace/notas/a.txt:\n"
        "/workspace/notas/b.txt: visto: Resume el fichero /workspace/notas/b.txt:"
    )
    assert result.artifact["metadata"] == {"files": 2}
    assert out["messages"][-1].content == "Done."

    # The skill's tool calls ran the agent's own tools, as children of the trace.
    assert [name for name, _ in trace.tools()] == ["use_skill", "glob", "read_file", "read_file"]
    assert [inputs.get("file_path") for name, inputs in trace.tools() if name == "read_file"] == [
        "/workspace/notas/a.txt",
        "/workspace/notas/b.txt",
    ]
    # The model got one prompt per file, with the file's content read through the backend.
    prompts = [r[-1].text for r in model.requests[1:3]]
    assert "El comprador es Luis." in prompts[0]
    assert "El precio es 100.000 euros." in prompts[1]
    # Its model calls are in the run's trace, under the use_skill call, tagged with the skill.
    use = trace.first("use_skill")
    skill_calls = trace.children(use, "model")
    assert len(skill_calls) == 2
    assert all("skill:informes/analizar" in r.tags for r in skill_calls)

    stats = usage_stats()["informes/analizar"]
    assert (stats.executions, stats.failures, stats.users) == (1, 0, 1)


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_composite_skill_runs_a_code_skill_and_a_loaded_s3_skill_through_use_skill(
    backend: S3Backend, asynchronous: bool, style: str
) -> None:
    analizar, informe = STYLES[style]
    registry = SkillRegistry([analizar(), informe()])
    model = ScriptedChatModel(
        steps=[
            call("cargar_habilidad", skill_path="escrituras/compraventa"),
            call("use_skill", skill_name="informes/informe", input="piso en Sevilla"),
            echo_first_line,  # analizar: a.txt
            echo_first_line,  # analizar: b.txt
            lambda messages: AIMessage(content="informe unido"),  # informe: the summary
        ]
    )
    trace = Trace()
    out = invoke(
        create_skills_agent(model, backend, system_prompt=SYSTEM, registry=registry), trace, asynchronous=asynchronous
    )

    loaded, result = tool_messages(out)
    assert "loaded" in loaded.content
    assert result.status == "success", result.content
    report = json.loads(result.content)
    assert report["summary"] == "informe unido"
    assert report["analysis"].startswith("/workspace/notas/a.txt: visto: Resume el fichero /workspace/notas/a.txt")
    assert report["deed"].startswith("# Compraventa\nIdentifica a las partes")
    assert report["deed"].endswith("## Input\npiso en Sevilla")
    # The last prompt joined what the two skills returned.
    assert "Une el análisis y la escritura" in model.requests[4][-1].text
    assert "Identifica a las partes" in model.requests[4][-1].text

    names = [name for name, _ in trace.tools()]
    assert names == ["cargar_habilidad", "use_skill", "use_skill", "glob", "read_file", "read_file", "use_skill"]
    outer, analizar, deed = [r for r in trace.runs if r.name == "use_skill"]
    # Each skill's model calls hang under its own use_skill call in the trace.
    assert [r.tags[-1] for r in trace.children(outer, "model")] == ["skill:informes/informe"]
    assert [r.tags[-1] for r in trace.children(analizar, "model")] == ["skill:informes/analizar"] * 2
    assert trace.children(deed, "model") == []
    assert out["loaded_skills"] == ["escrituras/compraventa"]


def test_a_tool_outside_tools_required_is_refused_and_never_runs(backend: S3Backend, s3_client: Any) -> None:
    def sneaky(ctx: SkillContext) -> str:
        ctx.tools.dispatch("read_file", {"file_path": "/workspace/notas/a.txt"})
        return ctx.tools.dispatch("write_file", {"file_path": "/workspace/x.txt", "content": "pwned"})

    registry = SkillRegistry([Simple("sneaky", sneaky, needs=("read_file",))])
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="sneaky")])
    trace = Trace()
    out = invoke(create_skills_agent(model, backend, registry=registry), trace)

    (result,) = tool_messages(out)
    assert result.status == "error"
    assert result.content == (
        "Error: the skill 'sneaky' failed: the skill 'sneaky' may not call the tool 'write_file': "
        "it is not in its tools_required (read_file)"
    )
    assert [name for name, _ in trace.tools()] == ["use_skill", "read_file"]
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=backend.bucket, Prefix="threads/t1/")["Contents"]]
    assert "threads/t1/x.txt" not in keys


def test_a_skill_needing_a_tool_the_agent_lacks_is_refused_before_it_runs(backend: S3Backend) -> None:
    ran: list[str] = []
    registry = SkillRegistry([Simple("sello", lambda ctx: ran.append("ran"), needs=("sellar",))])
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="sello")])
    (result,) = tool_messages(invoke(create_skills_agent(model, backend, registry=registry)))
    assert result.content == "Error: the skill 'sello' needs the tool(s) sellar, which this agent does not have"
    assert ran == []


def test_a_skill_calling_itself_through_another_skill_is_refused(backend: S3Backend) -> None:
    reset_usage()
    errors: list[str] = []

    def bounce(target: str) -> Callable[[SkillContext], Any]:
        def run(ctx: SkillContext) -> str:
            try:
                return ctx.tools.dispatch("use_skill", {"skill_name": target})
            except SkillToolError as exc:
                errors.append(str(exc))
                raise

        return run

    registry = SkillRegistry(
        [Simple("ping", bounce("pong"), ("use_skill",)), Simple("pong", bounce("ping"), ("use_skill",))]
    )
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="ping"), call("ls", path="/workspace")])
    out = invoke(create_skills_agent(model, backend, registry=registry))

    result, listing = tool_messages(out)
    assert errors[0] == (
        "use_skill: Error: the skill 'ping' is already running (ping -> pong -> ping): a skill cannot call "
        "itself, directly or through another skill"
    )
    assert result.status == "error"
    assert result.content.startswith("Error: the skill 'ping' failed: use_skill: Error: the skill 'pong' failed:")
    assert "already running (ping -> pong -> ping)" in result.content
    assert "/workspace/notas/" in listing.content  # the run went on
    stats = usage_stats()
    assert (stats["ping"].executions, stats["ping"].failures) == (2, 2)  # the run, and the refused re-entry
    assert (stats["pong"].executions, stats["pong"].failures) == (1, 1)


def test_skills_nest_only_as_deep_as_the_limit(backend: S3Backend) -> None:
    from tools.use_skill import SkillExecutionMiddleware

    def calls(target: str) -> Callable[[SkillContext], Any]:
        return lambda ctx: "via " + ctx.tools.dispatch("use_skill", {"skill_name": target})

    registry = SkillRegistry(
        [
            Simple("uno", calls("dos"), ("use_skill",)),
            Simple("dos", calls("tres"), ("use_skill",)),
            Simple("tres", lambda ctx: "fin"),
        ]
    )
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="dos"), call("use_skill", skill_name="uno")])
    runner = SkillExecutionMiddleware(backend, registry=registry, max_depth=2)
    agent = create_skills_agent(model, backend, registry=registry, executable=False, middleware=[runner])
    two_deep, three_deep = tool_messages(invoke(agent))
    assert two_deep.content == "via fin"
    assert three_deep.status == "error"
    assert "skills nest at most 2 deep (uno -> dos -> tres)" in three_deep.content


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_sync_skill_past_its_time_limit_fails_and_its_late_calls_are_refused(
    backend: S3Backend, asynchronous: bool
) -> None:
    release, finished = threading.Event(), threading.Event()
    late: list[BaseException] = []

    def slow(ctx: SkillContext) -> str:
        release.wait(30)
        try:
            ctx.tools.dispatch("ls", {"path": "/workspace"})
        except SkillTimeout as exc:
            late.append(exc)
        finally:
            finished.set()
        return "too late"

    registry = SkillRegistry([Simple("lenta", slow, ("ls",))])
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="lenta")])
    agent = create_skills_agent(model, backend, registry=registry, skill_timeout=0.2)
    try:
        out = invoke(agent, asynchronous=asynchronous)
    finally:
        release.set()
    (result,) = tool_messages(out)
    assert result.content == "Error: the skill 'lenta' failed: the skill 'lenta' timed out after 0.2 s"
    assert out["messages"][-1].content == "Done."
    assert finished.wait(30)
    assert [str(e) for e in late] == ["the skill 'lenta' ran out of its 0.2 s"]


def test_an_async_skill_past_its_time_limit_is_cancelled(backend: S3Backend) -> None:
    cancelled: list[bool] = []

    class Eterna(CodeSkill):
        metadata = SkillMetadata(name="eterna", description="Nunca acaba.")

        async def execute(self, ctx: SkillContext) -> SkillResult:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
            return SkillResult(True, "never")

    model = ScriptedChatModel(steps=[call("use_skill", skill_name="eterna")])
    agent = create_skills_agent(model, backend, registry=SkillRegistry([Eterna()]), skill_timeout=0.2)
    (result,) = tool_messages(invoke(agent, asynchronous=True))
    assert result.content == "Error: the skill 'eterna' failed: the skill 'eterna' timed out after 0.2 s"
    assert cancelled == [True]


def test_an_exception_inside_execute_is_an_error_result_and_the_run_goes_on(backend: S3Backend) -> None:
    reset_usage()

    def broken(ctx: SkillContext) -> str:
        raise ValueError(f"fichero corrupto en {ctx.input}")

    registry = SkillRegistry([Simple("rota", broken)])
    model = ScriptedChatModel(
        steps=[call("use_skill", skill_name="rota", input="/workspace/notas/a.txt"), call("ls", path="/workspace")]
    )
    out = invoke(create_skills_agent(model, backend, registry=registry))

    failed, listing = tool_messages(out)
    assert failed.status == "error"
    assert failed.content == "Error: the skill 'rota' failed: ValueError: fichero corrupto en /workspace/notas/a.txt"
    assert failed.artifact["success"] is False
    assert "/workspace/notas/" in listing.content
    assert out["messages"][-1].content == "Done."
    assert usage_stats()["rota"].failures == 1


def test_an_s3_skill_runs_only_once_loaded_and_unknown_names_are_explained(backend: S3Backend) -> None:
    registry = SkillRegistry([AnalizarFicheros()])
    model = ScriptedChatModel(
        steps=[
            call("use_skill", skill_name="escrituras/compraventa"),
            call("use_skill", skill_name="inventada"),
            call("cargar_habilidad", skill_path="escrituras/compraventa"),
            call("use_skill", skill_name="compraventa"),
        ]
    )
    before, unknown, _, after = tool_messages(invoke(create_skills_agent(model, backend, registry=registry)))
    assert before.content == (
        "Error: the skill 'escrituras/compraventa' is not loaded: load it with cargar_habilidad first"
    )
    assert unknown.content == "Error: no skill 'inventada' can run here (runnable: informes/analizar)"
    assert after.status == "success"
    assert after.content == "# Compraventa\nIdentifica a las partes y el inmueble."
    assert after.artifact["kind"] == "prompt"


def test_a_code_skill_never_maps_to_s3_keys_and_paths_cannot_escape(backend: S3Backend, s3_client: Any) -> None:
    # A folder with the code skill's id exists in the library: it is not the code skill's.
    for key, body in {
        "ana/skills/informes/plantilla/SKILL.md": b"---\nname: plantilla\ndescription: d\n---\n",
        "ana/skills/informes/plantilla/modelo.md": b"Modelo de informe",
        "beto/skills/secreto/SKILL.md": b"---\nname: secreto\ndescription: d\n---\nsecreto",
    }.items():
        s3_client.put_object(Bucket=backend.bucket, Key=key, Body=body)

    class Plantilla(CodeSkill):
        metadata = SkillMetadata(name="plantilla", description="Usa su plantilla.", category="informes")

        def execute(self, ctx: SkillContext) -> SkillResult:
            refused = []
            for path in ("../../../beto/skills/secreto/SKILL.md", "/../secreto/SKILL.md", "modelo.md"):
                try:
                    ctx.files.read(path)
                except (ValueError, FileNotFoundError) as exc:
                    refused.append(type(exc).__name__)
            return SkillResult(True, {"files": ctx.files.list(), "refused": refused})

    model = ScriptedChatModel(steps=[call("use_skill", skill_name="plantilla")])
    (result,) = tool_messages(invoke(create_skills_agent(model, backend, registry=SkillRegistry([Plantilla()]))))
    assert json.loads(result.content) == {"files": [], "refused": ["InvalidPath", "InvalidPath", "NotFound"]}


def test_use_skill_is_added_when_the_registry_holds_a_runnable_skill(backend: S3Backend) -> None:
    class SoloInstrucciones:
        metadata = SkillMetadata(name="solo", description="Sólo instrucciones.")

        def is_available(self, config: Any) -> bool:
            return True

        def get_tools(self, config: Any) -> list[Any]:
            return []

        def get_system_instructions(self) -> str:
            return "Instrucciones."

    for skills, expected in (([SoloInstrucciones()], False), ([SoloInstrucciones(), AnalizarFicheros()], True)):
        model = ScriptedChatModel(steps=[])
        invoke(create_skills_agent(model, backend, registry=SkillRegistry(skills)))
        assert ("use_skill" in model.tools_seen[0]) is expected


def test_a_tool_that_needs_human_approval_cannot_be_called_by_a_skill(backend: S3Backend, s3_client: Any) -> None:
    def writer(ctx: SkillContext) -> str:
        return ctx.tools.dispatch("write_file", {"file_path": "/workspace/x.txt", "content": "sin permiso"})

    registry = SkillRegistry([Simple("escritora", writer, ("write_file",))])
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="escritora")])
    agent = create_skills_agent(model, backend, registry=registry, interrupt_on={"write_file": True})
    (result,) = tool_messages(invoke(agent))
    assert result.content == (
        "Error: the skill 'escritora' failed: the tool 'write_file' needs a person's approval in this agent; "
        "a skill cannot call it"
    )
    assert "threads/t1/x.txt" not in [o["Key"] for o in s3_client.list_objects_v2(Bucket=backend.bucket)["Contents"]]


def test_a_skills_tool_calls_act_for_the_runs_tenant(backend: S3Backend, s3_client: Any) -> None:
    def report(ctx: SkillContext) -> str:
        found = ctx.tools.dispatch("glob", {"pattern": "*.txt", "path": "/workspace"})
        ctx.tools.dispatch("write_file", {"file_path": "/workspace/informe.md", "content": found})
        return f"{ctx.user_id}/{ctx.thread_id}: {found}"

    registry = SkillRegistry([Simple("informe", report, ("glob", "write_file"))])
    model = ScriptedChatModel(steps=[call("use_skill", skill_name="informe")])
    (result,) = tool_messages(invoke(create_skills_agent(model, backend, registry=registry), thread="t2"))
    assert result.content.startswith("ana/t2: ")
    assert "/workspace/ajeno.txt" in result.content
    assert "notas" not in result.content  # thread t1's files are not this run's /workspace
    body = s3_client.get_object(Bucket=backend.bucket, Key="threads/t2/informe.md")["Body"].read().decode()
    assert "/workspace/ajeno.txt" in body
