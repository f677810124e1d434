"""Disabled means disabled in every channel: `disable` and `rm` reach agents serving a channel.

A shared skill `gone` is in channel `production`; after `s3skills disable gone` (then after
`rm gone`) every face of every reader of that channel refuses it within the catalog TTL (None
here: the next query): `SkillLibrary(channel=...)`, the MCP tools face, the MCP skills-extension
resources, the agent's tools and the prompt's index. `enable` brings it back at the channel's
version, not at the latest push. On the shared moto server.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp_harness import list_all

from s3skills import S3Backend, create_skills_agent
from s3skills.cli import main
from s3skills.config import Config
from s3skills.errors import NotFound, SkillError
from s3skills.serve.mcp import aclose_server, library_source
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.storage import S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing.scripted import ScriptedChatModel, tool_call

ANA = Tenant(user_id="ana")
SKILL = "---\nname: {name}\ndescription: The {name} skill, version {n}.\n---\n# {name} {n}\n"


class Org:
    """The shared library `org` on moto, written with the CLI."""

    def __init__(self, endpoint: str, bucket: str, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--bucket", bucket, "--shared", "org", "--endpoint-url", endpoint]
        self.root, self.capsys = root, capsys
        self.endpoint, self.bucket = endpoint, bucket

    def __call__(self, *argv: str) -> str:
        """Run the CLI (exit 0) and return what it printed (stdout and stderr)."""
        self.capsys.readouterr()
        code = main([*self.base, *argv])
        out = self.capsys.readouterr()
        assert code == 0, out.err
        return out.out + out.err

    def push(self, n: int) -> None:
        src = self.root / "src"
        if src.exists():
            shutil.rmtree(src)
        for name in ("gone", "kept"):
            (src / name).mkdir(parents=True)
            (src / name / "SKILL.md").write_text(SKILL.format(name=name, n=n))
            (src / name / "notes.md").write_text(f"{name} notes {n}")
        self("push", str(src))

    def library(self) -> SkillLibrary:
        store = S3ObjectStore(self.bucket, endpoint_url=self.endpoint)
        cfg = Config(shared_library="org", channel="production", shared_catalog_ttl=None)
        return SkillLibrary(store, cfg, tenant=lambda: ANA)


@pytest.fixture
def org(moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Org:
    o = Org(moto_endpoint, bucket, tmp_path, capsys)
    o("versioning", "enable")
    o.push(1)
    o("channel", "create", "production", "--from", "latest")
    o("channel", "create", "staging", "--from", "latest")
    o.push(2)  # the channels stay at version 1
    return o


@contextlib.asynccontextmanager
async def mcp_client(org: Org) -> AsyncIterator[Client]:
    source = library_source(org.bucket, endpoint_url=org.endpoint, shared_prefix="org", channel="production")
    skills = SkillsServer(source, user_id="ana", tools=True)
    try:
        async with Client(skills.server, mode="legacy") as c:
            yield c
    finally:
        await aclose_server(skills)


async def mcp_faces(client: Client) -> dict[str, bool]:
    """Whether each face of the MCP server serves `gone` (and still serves `kept`)."""
    listed = await client.call_tool("list_skills", {})
    ids = {s["id"] for s in (listed.structured_content or {})["skills"]}
    assert "kept" in ids
    loaded = await client.call_tool("load_skill", {"name": "gone"})
    read = await client.call_tool("read_skill_file", {"name": "gone", "path": "notes.md"})
    kept = await client.call_tool("read_skill_file", {"name": "kept", "path": "notes.md"})
    assert kept.content[0].text == "kept notes 1"  # type: ignore[union-attr]
    uris = {s["uri"] for s in (await list_all(client.session))[0]}
    assert "skill://kept/SKILL.md" in uris
    try:
        contents = (await client.read_resource("skill://gone/notes.md")).contents[0]
        resource_read = getattr(contents, "text", None) == "gone notes 1"
    except MCPError as exc:
        resource_read = False
        refused = exc.code
    else:
        refused = None
    assert refused in (None, -32602)  # refused as a resource that does not exist, never an internal error
    if not loaded.is_error:
        assert "gone 1" in (loaded.structured_content or {})["skillMd"]  # the channel's version, never the latest
    if not read.is_error:
        assert read.content[0].text == "gone notes 1"  # type: ignore[union-attr]
    return {
        "list_skills": "gone" in ids,
        "load_skill": not loaded.is_error,
        "read_skill_file": not read.is_error,
        "skills/list": "skill://gone/SKILL.md" in uris,
        "resources/read": resource_read,
    }


def call(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(tool, args)])


def agent_faces(org: Org) -> dict[str, bool]:
    """Whether the agent's prompt lists `gone`, `cargar_habilidad` loads it and `read_file` reads it."""
    backend = S3Backend(org.bucket, endpoint_url=org.endpoint, shared_prefix="org", channel="production")
    model = ScriptedChatModel(
        steps=[call("cargar_habilidad", skill_path="gone"), call("read_file", file_path="/skills/gone/notes.md")]
    )
    agent = create_skills_agent(model, backend, system_prompt="You help.")
    out = agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, context={"user_id": "ana"})
    load, read = [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]
    prompt = model.system_prompts()[0]
    assert "kept" in prompt
    loaded = "Skill 'gone' loaded" in load
    if loaded:  # its instructions are in the next call's prompt, at the channel's version
        assert "# gone 1" in model.system_prompts()[1]
    if "gone notes" in read:
        assert "gone notes 1" in read
    return {"prompt": "The gone skill" in prompt, "cargar_habilidad": loaded, "read": "gone notes" in read}


def library_faces(library: SkillLibrary) -> dict[str, bool]:
    """Whether `SkillLibrary(channel=...)` serves `gone` by index, search, get, load and open."""
    faces = {
        "index": "gone" in {s.id for s in library.index()},
        "search": "gone" in {s.id for s in library.search("gone skill").skills},
    }
    for name, attempt in (
        ("get", lambda: library.get("gone")),
        ("load", lambda: library.load("gone")),
        ("open", lambda: library.open("gone", "notes.md")),
    ):
        try:
            attempt()
            faces[name] = True
        except (SkillError, NotFound):
            faces[name] = False
    assert library.open("kept", "notes.md").data == b"kept notes 1"
    return faces


def every_face(org: Org, library: SkillLibrary) -> dict[str, bool]:
    import asyncio

    async def both() -> dict[str, bool]:
        async with mcp_client(org) as client:
            return await mcp_faces(client)

    return {**library_faces(library), **asyncio.run(both()), **agent_faces(org)}


def test_a_channel_reader_refuses_a_disabled_skill_at_once_and_serves_it_again_at_its_version_after_enable(
    org: Org,
) -> None:
    library = org.library()
    assert all(library_faces(library).values())
    loaded = library.load("gone").version
    assert loaded is not None
    thread = Tenant(user_id="ana", loaded_skills=["gone"], skill_versions={"gone": loaded.pin()})
    org("disable", "gone")
    assert not any(library_faces(library).values())
    with pytest.raises((SkillError, NotFound)):  # a thread that loaded it loses it too
        library.open("gone", "notes.md", tenant=thread)
    org("enable", "gone")
    assert all(library_faces(library).values())
    assert library.instructions("gone").strip() == "# gone 1"  # the channel's version, not the latest push


@pytest.mark.slow
def test_every_face_of_a_channel_serves_its_skill_then_refuses_it_after_disable_and_enable_restores_it(
    org: Org,
) -> None:
    library = org.library()  # one running reader: no restart between the steps
    assert all(every_face(org, library).values())
    said = org("disable", "gone")
    assert "production, staging" in said
    assert "shared/org/skills/" in said  # the library named
    assert not any(every_face(org, library).values())
    said = org("enable", "gone")
    assert "production" in said
    assert all(every_face(org, library).values())  # back at the channel's version (asserted in each face)
    assert library.instructions("gone").strip() == "# gone 1"


@pytest.mark.slow
def test_every_face_of_a_channel_refuses_a_removed_skill(org: Org) -> None:
    library = org.library()
    assert all(every_face(org, library).values())
    said = org("rm", "gone", "--yes")
    assert "production, staging" in said
    assert not any(every_face(org, library).values())
