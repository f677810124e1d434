"""What hosts see of the MCP skills server: both handshakes, spec gaps, names, the tools face.

The server runs in process (`mcp.client.client.Client` over the SDK's in-memory transport)
on a moto library: ana's has nested skills, a disabled nested skill, a skill whose folder
breaks the naming rules, one whose `name` differs from its folder, YAML 1.1/1.2 traps and a
binary file. The official python SDK client has no skills-extension support: the tools
face is driven with its plain `call_tool`, `list_prompts`, `get_prompt`.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_harness import (
    ANY,
    DirectoryParams,
    GetSkill,
    GetSkillParams,
    ListSkills,
    ReadDirectory,
    child_env,
    digest,
    put,
    server_args,
)

from s3skills import __version__
from s3skills.serve.mcp import aclose_server, library_source, main
from s3skills.serve.server import EXTENSION_ID, SkillsServer
from s3skills.testing import skill_md

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
TRAPS = {"license": "yes", "version": "0755", "released": "2024-01-02", "at": "12:30", "ratio": "1_000"}


@pytest.fixture
def library(bucket: str, s3_client: Any) -> str:
    files = {
        "deploy/SKILL.md": skill_md("deploy", "Deploy the services", **TRAPS),
        "deploy/references/steps.md": "steps\n",
        "deploy/assets/diagram.png": PNG,
        "deploy/canary/SKILL.md": skill_md("canary", "Canary releases"),
        "deploy/canary/notes.md": "canary notes\n",
        "deploy/legacy/SKILL.md": skill_md("legacy", "Old way", enabled="false"),
        "deploy/legacy/secret.md": "withdrawn\n",
        "ops/capsule_crm-automation/SKILL.md": skill_md("capsule_crm-automation", "CRM automation"),
        "ops/pdf-tools/SKILL.md": skill_md("pdf", "PDF tools named apart from their folder"),
        "docs/writer/SKILL.md": skill_md("writer", "Write documents for people"),
    }
    for key, body in files.items():
        put(s3_client, bucket, f"users/ana/skills/{key}", body)
    put(s3_client, bucket, "users/bob/skills/privado/SKILL.md", skill_md("privado", "Bob's"))
    return bucket


def _server(bucket: str, endpoint: str, *, tools: bool = True, page_size: int = 50, **kw: Any) -> SkillsServer:
    return SkillsServer(
        library_source(bucket, endpoint_url=endpoint, **kw), user_id="ana", tools=tools, page_size=page_size
    )


@contextlib.asynccontextmanager
async def _client(library: str, moto_endpoint: str, **kw: Any) -> AsyncIterator[Client]:
    async with _connected(_server(library, moto_endpoint, **kw)) as c:
        yield c


@contextlib.asynccontextmanager
async def _connected(skills: SkillsServer) -> AsyncIterator[Client]:
    """An in-process SDK client of `skills` (2025-11-25 handshake); the S3 clients closed after."""
    try:
        async with Client(skills.server, mode="legacy") as c:
            yield c
    finally:
        await aclose_server(skills)


async def _get(c: Client, uri: str) -> dict[str, Any]:
    result: dict[str, Any] = (await c.session.send_request(GetSkill(params=GetSkillParams(uri=uri)), ANY))["skill"]
    return result


async def _dir(c: Client, uri: str, cursor: str | None = None) -> dict[str, Any]:
    params = DirectoryParams(uri=uri, cursor=cursor)
    result: dict[str, Any] = await c.session.send_request(ReadDirectory(params=params), ANY)
    return result


# -- both eras, spec gaps ----------------------------------------------------------------------


async def test_the_2025_11_25_handshake_declares_the_skills_extension_and_the_package_version(
    library: str,
    moto_endpoint: str,
) -> None:
    async with _client(library, moto_endpoint) as client:
        assert client.protocol_version == "2025-11-25"
        raw = client.session.server_capabilities
        assert raw is not None
        assert raw.model_extra is not None or getattr(raw, "extensions", None) is not None
        declared = getattr(raw, "extensions", None) or (raw.model_extra or {}).get("extensions")
        assert declared == {EXTENSION_ID: {"directoryRead": True}}
        assert client.server_info is not None
        assert client.server_info.version == __version__


async def test_templates_list_answers_the_skill_template(library: str, moto_endpoint: str) -> None:
    async with _client(library, moto_endpoint) as client:
        result = await client.list_resource_templates()
        assert [t.uri_template for t in result.resource_templates] == ["skill://{+path}"]


async def test_nested_skills_are_in_the_outer_manifest_and_directory_but_a_disabled_one_is_not(
    library: str, moto_endpoint: str, s3_client: Any
) -> None:
    async with _client(library, moto_endpoint) as client:
        entry = await _get(client, "skill://deploy/SKILL.md")
        uris = [r["uri"] for r in entry["resources"]]
        assert uris == [
            "skill://deploy/SKILL.md",
            "skill://deploy/assets/diagram.png",
            "skill://deploy/canary/SKILL.md",
            "skill://deploy/canary/notes.md",
            "skill://deploy/references/steps.md",
        ]
        for res in entry["resources"]:  # every listed file reads back with its digest, nested ones included
            read = (await client.read_resource(res["uri"])).contents[0]
            data = read.text.encode() if isinstance(read, types.TextResourceContents) else base64.b64decode(read.blob)
            assert (digest(data), len(data)) == (res["digest"], res["size"])
        root = await _dir(client, "skill://deploy")
        assert {(r["name"], r["mimeType"]) for r in root["resources"]} == {
            ("SKILL.md", "text/markdown"),
            ("assets", "inode/directory"),
            ("canary", "inode/directory"),
            ("references", "inode/directory"),
        }
        with pytest.raises(MCPError) as err:
            await client.read_resource("skill://deploy/legacy/secret.md")
        assert err.value.code == -32602
        # The nested skill is a skill of its own too, also by folder name.
        assert (await _get(client, "skill://canary/SKILL.md"))["frontmatter"]["name"] == "canary"


async def test_directory_reads_are_paginated_and_a_forged_cursor_is_invalid_params(
    library: str, moto_endpoint: str
) -> None:
    async with _client(library, moto_endpoint, page_size=2) as c:
        first = await _dir(c, "skill://deploy")
        second = await _dir(c, "skill://deploy", first["nextCursor"])
        for forged in ("not-a-cursor", "eyJ4IjogMX0", base64.urlsafe_b64encode(b'{"after": 7}').decode()):
            with pytest.raises(MCPError) as err:
                await _dir(c, "skill://deploy", forged)
            assert err.value.code == -32602
    names = [r["name"] for r in first["resources"] + second["resources"]]
    assert names == ["SKILL.md", "assets", "canary", "references"]
    assert "nextCursor" not in second
    assert first["ttlMs"] == 0
    assert first["cacheScope"] == "private"


async def test_frontmatter_is_what_a_yaml_1_2_parser_reads_in_the_file(library: str, moto_endpoint: str) -> None:
    async with _client(library, moto_endpoint) as client:
        entry = await _get(client, "skill://deploy/SKILL.md")
        fm = entry["frontmatter"]
        assert (fm["license"], fm["version"], fm["released"], fm["at"], fm["ratio"]) == (
            "yes",
            755,
            "2024-01-02",
            "12:30",
            "1_000",
        )


# -- names ----------------------------------------------------------------------------------


async def test_skills_whose_names_break_the_rules_are_not_listed_but_logged_once_and_served_as_tools(
    library: str, moto_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="s3skills.serve.server")
    async with _client(library, moto_endpoint) as c:
        listed = await c.session.send_request(ListSkills(params=None), ANY)
        await c.session.send_request(ListSkills(params=None), ANY)
        with pytest.raises(MCPError) as err:
            await _get(c, "skill://ops/pdf-tools/SKILL.md")
        tools = await c.call_tool("list_skills", {})
    ids = [e["uri"].removeprefix("skill://").removesuffix("/SKILL.md") for e in listed["skills"]]
    assert ids == ["deploy", "deploy/canary", "docs/writer"]
    assert err.value.code == -32602
    assert "differs from its folder" in err.value.message
    reports = [r.getMessage() for r in caplog.records if "not listed by skills/list" in r.getMessage()]
    assert len(reports) == 1
    assert reports[0].startswith("2 of 5 skills of ana")
    assert "ops/capsule_crm-automation" in reports[0]
    assert "ops/pdf-tools" in reports[0]
    served = [s["id"] for s in (tools.structured_content or {})["skills"]]
    assert "ops/capsule_crm-automation" in served
    assert "ops/pdf-tools" in served


async def test_the_unlisted_skills_report_is_a_count_then_ten_short_lines_then_how_many_more(
    bucket: str, s3_client: Any, moto_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    long_name = "a-name-that-is-not-its-folder-" + "x" * 300
    for n in range(25):
        put(s3_client, bucket, f"users/ana/skills/team/tool-{n:02}/SKILL.md", skill_md(long_name, "A tool"))
    put(s3_client, bucket, "users/ana/skills/team/fine/SKILL.md", skill_md("fine", "A well named skill"))
    caplog.set_level(logging.WARNING, logger="s3skills.serve.server")
    async with _client(bucket, moto_endpoint) as c:
        listed = await c.session.send_request(ListSkills(params=None), ANY)
    assert [e["uri"] for e in listed["skills"]] == ["skill://team/fine/SKILL.md"]
    (report,) = [r.getMessage() for r in caplog.records if "not listed by skills/list" in r.getMessage()]
    lines = report.splitlines()
    assert lines[0] == "25 of 26 skills of ana are not listed by skills/list (the tools face still serves them):"
    items = [line for line in lines[1:] if line.startswith("  ") and not line.startswith("   ")]
    assert [line.split(":")[0] for line in items[:10]] == [f"  team/tool-{n:02}" for n in range(10)]
    assert items[10:] == ["  … and 15 more; `s3skills mcp --check` lists them all"]
    assert max(len(line) for line in lines) <= 200
    # Each long item wraps onto lines indented deeper, every character of it kept: nothing is cut.
    unspaced = "".join(report.split())
    assert all(f"team/tool-{n:02}:itsname'{long_name}'" in unspaced for n in range(10))


# A server subprocess (~3 s on 2 cores): runs in .ci/run's slow step; the same report is pinned
# in-process above (test_the_unlisted_skills_report_is_a_count_then_ten_short_lines_then_how_many_more).
@pytest.mark.slow
async def test_a_stdio_server_logs_the_unlisted_skills_once_at_start_with_a_count(
    library: str, moto_endpoint: str, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=server_args(library, moto_endpoint, "--user", "ana"), env=child_env()
    )
    with (tmp_path / "stderr.txt").open("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.send_request(ListSkills(params=None), ANY)
            await session.send_request(ListSkills(params=None), ANY)
        errlog.seek(0)
        logged = errlog.read()
    assert logged.count("not listed by skills/list") == 1
    assert "2 of 5 skills of ana are not listed by skills/list" in logged


def test_mcp_check_prints_the_skills_mcp_will_not_list_and_exits_1(
    library: str, moto_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--bucket", library, "--endpoint-url", moto_endpoint, "--user", "ana", "--check"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("ops/capsule_crm-automation: its folder 'capsule_crm-automation'")
    assert out.splitlines()[1].startswith("ops/pdf-tools: its name 'pdf' differs from its folder 'pdf-tools'")
    assert "2 of 5 skills are not listed" in err
    assert main(["--bucket", library, "--endpoint-url", moto_endpoint, "--user", "bob", "--check"]) == 0


# -- the tools face -------------------------------------------------------------------------


async def test_an_sdk_client_without_the_extension_lists_loads_and_reads_a_skill_through_tools(
    library: str,
    moto_endpoint: str,
) -> None:
    async with _client(library, moto_endpoint) as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["list_skills", "load_skill", "read_skill_file"]
        ranked = await client.call_tool("list_skills", {"query": "write documents"})
        assert (ranked.structured_content or {})["skills"][0]["id"] == "docs/writer"
        loaded = await client.call_tool("load_skill", {"name": "deploy"})
        assert not loaded.is_error
        structured = loaded.structured_content or {}
        assert structured["id"] == "deploy"
        assert structured["skillMd"].startswith("---\nname: deploy\n")
        # Nested skills' files are not the outer skill's, as in the agent.
        assert [f["path"] for f in structured["files"]] == ["SKILL.md", "assets/diagram.png", "references/steps.md"]
        text = await client.call_tool("read_skill_file", {"name": "deploy", "path": "references/steps.md"})
        assert isinstance(text.content[0], types.TextContent)
        assert text.content[0].text == "steps\n"
        image = await client.call_tool("read_skill_file", {"name": "deploy", "path": "assets/diagram.png"})
        assert isinstance(image.content[0], types.ImageContent)
        assert base64.b64decode(image.content[0].data) == PNG


async def test_disabled_nested_and_other_users_skills_behave_in_tools_as_in_the_agent(
    library: str, moto_endpoint: str
) -> None:
    async with _client(library, moto_endpoint) as client:
        for args in ({"name": "legacy"}, {"name": "deploy/legacy"}, {"name": "privado"}):
            result = await client.call_tool("load_skill", args)
            assert result.is_error
            assert "not found" in result.content[0].text  # type: ignore[union-attr]
        nested_via_outer = await client.call_tool("read_skill_file", {"name": "deploy", "path": "canary/notes.md"})
        assert nested_via_outer.is_error
        nested = await client.call_tool("read_skill_file", {"name": "canary", "path": "notes.md"})
        assert nested.content[0].text == "canary notes\n"  # type: ignore[union-attr]
        escape = await client.call_tool("read_skill_file", {"name": "deploy", "path": "../canary/notes.md"})
        assert escape.is_error
        missing_arg = await client.call_tool("load_skill", {})
        assert missing_arg.is_error


async def test_every_enabled_skill_is_a_prompt_holding_its_skill_md(library: str, moto_endpoint: str) -> None:
    async with _client(library, moto_endpoint) as client:
        prompts = await client.list_prompts()
        names = [p.name for p in prompts.prompts]
        # Names every host accepts (no '/'): the id is in each description.
        assert names == ["deploy", "deploy__canary", "docs__writer", "ops__capsule_crm-automation", "ops__pdf-tools"]
        assert prompts.prompts[1].description is not None
        assert prompts.prompts[1].description.startswith("Skill deploy/canary: ")
        for name in ("deploy__canary", "deploy/canary"):  # the id itself still answers
            got = await client.get_prompt(name)
            message = got.messages[0].content
            assert isinstance(message, types.TextContent)
            assert "name: canary" in message.text
        with pytest.raises(MCPError):
            await client.get_prompt("deploy/legacy")


async def test_the_tools_face_searches_with_the_ranker_the_server_was_given(library: str, moto_endpoint: str) -> None:
    from test_embedding_ranker import TrigramEncoder

    from s3skills.skills.ranking.embedding import HybridRanker

    query = {"query": "writting documments"}  # misspelt: no word in common with the skill once stemmed
    async with _client(library, moto_endpoint) as plain:
        lexical = await plain.call_tool("list_skills", query)
        assert (lexical.structured_content or {})["skills"][0]["id"] == "deploy"  # no match: by id
    ranker = HybridRanker(TrigramEncoder(), background=False)
    skills = SkillsServer(library_source(library, endpoint_url=moto_endpoint), user_id="ana", tools=True, ranker=ranker)
    async with _connected(skills) as hybrid:
        ranked = await hybrid.call_tool("list_skills", query)
        assert (ranked.structured_content or {})["skills"][0]["id"] == "docs/writer"


def test_a_hybrid_ranker_without_the_embeddings_extra_is_refused_with_how_to_install_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where the extra is installed, hide it: a None entry in sys.modules is how Python marks a
    # package as absent (importlib.util.find_spec then returns None, and an import raises).
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    assert main(["--bucket", "b", "--user", "ana", "--ranker", "hybrid"]) == 2
    assert "s3skills[embeddings]" in capsys.readouterr().err


async def test_no_tools_turns_the_tools_face_off(library: str, moto_endpoint: str) -> None:
    async with _client(library, moto_endpoint, tools=False) as c:
        with pytest.raises(MCPError) as err:
            await c.list_tools()
    assert err.value.code == -32601


# -- attacks (issue 22) -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["%C0%AE", "%ED%A0%80", "ops/%C0%AE%C0%AE/deploy"])
async def test_a_uri_that_does_not_decode_is_invalid_params_without_internal_text(
    library: str, moto_endpoint: str, bad: str
) -> None:
    async with _client(library, moto_endpoint) as client:
        uri = f"skill://{bad}/SKILL.md"
        calls = [
            lambda: client.read_resource(uri),
            lambda: _get(client, uri),
            lambda: _dir(client, f"skill://{bad}"),
        ]
        for call in calls:
            with pytest.raises(MCPError) as err:
                await call()
            assert err.value.code == -32602
            assert err.value.message.startswith("Invalid skill URI")
            assert "codec" not in err.value.message
            assert "position" not in err.value.message


async def test_in_the_seeds_layout_a_user_named_like_the_shared_library_is_refused(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    put(s3_client, bucket, "org/skills/interno/SKILL.md", skill_md("interno", "The organisation's own"))
    source = library_source(bucket, endpoint_url=moto_endpoint, shared_prefix="org", layout=_seeds())
    skills = SkillsServer(source, user_id="org")
    async with _connected(skills) as c:
        with pytest.raises(MCPError) as err:
            await c.session.send_request(ListSkills(params=None), ANY)
        with pytest.raises(MCPError):
            await c.read_resource("skill://interno/SKILL.md")
    assert err.value.code == -32600
    assert "reserved" in err.value.message or "cannot be equal" in err.value.message


def _seeds() -> Any:
    from s3skills.layout import KeyLayout

    return KeyLayout.seeds()


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_tokens_file_that_group_or_others_can_write_is_refused(
    tmp_path: Any, mode: int, capsys: pytest.CaptureFixture[str]
) -> None:
    from s3skills.serve.auth import JsonFileTokenVerifier

    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tok": "ana"}')
    tokens.chmod(mode)
    with pytest.raises(ValueError, match="can be written by group or others"):
        JsonFileTokenVerifier(tokens)
    assert main(["--bucket", "b-1", "--transport", "http", "--tokens", str(tokens)]) == 2
    assert "chmod 600" in " ".join(capsys.readouterr().err.split())  # the line may wrap at 200 characters
    link = tmp_path / "link.json"
    tokens.chmod(0o600)
    link.symlink_to(tokens)
    with pytest.raises(ValueError, match="tokens file"):
        JsonFileTokenVerifier(link)
    assert JsonFileTokenVerifier(tokens) is not None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_a_tokens_file_owned_by_another_user_is_refused_at_server_start(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from s3skills.serve.auth import JsonFileTokenVerifier

    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tok": "ana"}')
    tokens.chmod(0o600)
    os.chown(tokens, 65534, 65534)  # nobody: mode 600, but that user can rewrite the token map
    with pytest.raises(ValueError, match="owned by uid 65534"):
        JsonFileTokenVerifier(tokens)
    assert main(["--bucket", "b-1", "--transport", "http", "--tokens", str(tokens)]) == 2
    assert "not by this process's user" in " ".join(capsys.readouterr().err.split())
    os.chown(tokens, os.geteuid(), os.getegid())
    assert JsonFileTokenVerifier(tokens) is not None


def test_the_cli_mcp_check_takes_the_global_user(
    library: str, moto_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from s3skills.cli import main as cli

    assert cli(["--bucket", library, "--endpoint-url", moto_endpoint, "--user", "ana", "mcp", "--check"]) == 1
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines()] == ["ops/capsule_crm-automation", "ops/pdf-tools"]
    assert cli(["--bucket", library, "--endpoint-url", moto_endpoint, "--user", "bob", "mcp", "--check"]) == 0
