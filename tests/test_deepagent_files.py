"""deepagents' own file tools over S3Backend: create_deep_agent, a scripted model, moto.

The user id comes from the run's context and the thread from its config; one
backend instance serves both users below.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from s3skills import S3Backend
from s3skills.layout import KeyLayout
from s3skills.testing.scripted import ScriptedChatModel, tool_call

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout


def call(tool_name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool_name, args, call_id=f"call-{tool_name}-{len(args)}")])


def results(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


def test_file_tools_end_to_end_with_the_user_from_the_run_context(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    s3_client.put_object(
        Bucket=bucket,
        Key="ana/skills/pdf/SKILL.md",
        Body=b"---\nname: pdf\ndescription: PDF.\n---\nbody",
    )
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, layout=SEEDS)
    model = ScriptedChatModel(
        steps=[
            call("write_file", file_path="/workspace/notas.md", content="uno\ndos\ntres\n"),
            call("ls", path="/workspace"),
            call("read_file", file_path="/workspace/notas.md"),
            call("edit_file", file_path="/workspace/notas.md", old_string="dos", new_string="DOS"),
            call("glob", pattern="*.md", path="/workspace"),
            call("grep", pattern="DOS", path="/workspace"),
            call("read_file", file_path="/skills/pdf/SKILL.md"),
        ]
    )
    agent = create_deep_agent(model=model, backend=backend, system_prompt="Tests.")
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )
    written, listed, read, edited, globbed, grepped, skill = results(out["messages"])
    assert "/workspace/notas.md" in written
    assert "/workspace/notas.md" in listed
    assert "dos" in read
    assert "notas.md" in edited
    assert "/workspace/notas.md" in globbed
    assert "/workspace/notas.md" in grepped
    assert skill == "Error: File '/skills/pdf/SKILL.md' not found"  # gated: not loaded
    body = s3_client.get_object(Bucket=bucket, Key="threads/t1/notas.md")["Body"].read()
    assert body == b"uno\nDOS\ntres\n"


def test_a_large_tool_result_is_evicted_into_the_thread_and_read_back(
    moto_endpoint: str, bucket: str, s3_client: Any
) -> None:
    lines = "".join(f"linea {i:05d} del informe con texto de relleno para ocupar sitio\n" for i in range(4000))

    @tool
    def informe_completo() -> str:
        """Return the full report (very long)."""
        return lines

    backend = S3Backend(bucket, endpoint_url=moto_endpoint, layout=SEEDS)

    def read_evicted(messages: list[BaseMessage]) -> AIMessage:
        evicted = [m for m in messages if isinstance(m, ToolMessage) and "/large_tool_results/" in str(m.content)]
        assert evicted, "the tool result was not evicted"
        text = str(evicted[-1].content)
        start = text.index("/large_tool_results/")
        path = text[start:].split()[0].rstrip(".,:;`'\")")
        return call("read_file", file_path=path, offset=0, limit=5)

    model = ScriptedChatModel(steps=[call("informe_completo"), read_evicted])
    agent = create_deep_agent(model=model, backend=backend, system_prompt="Tests.", tools=[informe_completo])
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "busca"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t-big"}},
    )
    preview, read_back = results(out["messages"])
    assert "/large_tool_results/" in preview
    assert len(preview) < len(lines)
    assert "linea 00000 del informe" in read_back
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="threads/t-big/")["Contents"]]
    assert any(k.startswith("threads/t-big/large_tool_results/") for k in keys)


def test_one_backend_serves_two_users_in_turn(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, layout=SEEDS)
    for user, thread in (("ana", "t-ana"), ("beto", "t-beto")):
        model = ScriptedChatModel(
            steps=[call("write_file", file_path="/workspace/yo.md", content=user), call("ls", path="/workspace")]
        )
        agent = create_deep_agent(model=model, backend=backend, system_prompt="Tests.")
        out = agent.invoke(
            {"messages": [{"role": "user", "content": "go"}]},
            context={"user_id": user},
            config={"configurable": {"thread_id": thread}},
        )
        assert "/workspace/yo.md" in results(out["messages"])[-1]
    assert s3_client.get_object(Bucket=bucket, Key="threads/t-ana/yo.md")["Body"].read() == b"ana"
    assert s3_client.get_object(Bucket=bucket, Key="threads/t-beto/yo.md")["Body"].read() == b"beto"
