"""The MCP skills server (SEP-2640) driven by the official MCP client, over stdio and HTTP.

A moto server holds the libraries: ana's is the bundled example library plus generated
skills (more than a page), one disabled skill; bob has a skill of his own.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_harness import (
    ANY,
    DirectoryParams,
    ReadDirectory,
    child_env,
    digest,
    get_skill,
    http_server,
    http_session,
    list_all,
    put,
    read_bytes,
    stdio_session,
)

from s3skills.examples import LIBRARY
from s3skills.seed import seed_example_library
from s3skills.storage import S3ObjectStore as ObjectStore
from s3skills.testing import skill_md

PAGE = "3"
GENERATED = [f"gen/skill-{i:02d}" for i in range(5)]
EXAMPLES = sorted(str(p.parent.relative_to(LIBRARY)) for p in Path(LIBRARY).rglob("SKILL.md"))
ANA_IDS = sorted([*EXAMPLES, *GENERATED])


@pytest.fixture
def library(bucket: str, moto_endpoint: str, s3_client: Any) -> str:
    """ana: the example library + generated skills + a disabled one; bob: one skill.

    The generated skills are written first, by plain PUTs: the push that follows builds
    the manifest from a listing of everything (writes made outside s3skills after it would
    show only within `verify_interval`).
    """
    for skill_id in GENERATED:
        leaf = skill_id.rsplit("/", 1)[-1]
        put(s3_client, bucket, f"users/ana/skills/{skill_id}/SKILL.md", skill_md(leaf, f"Generated {leaf}"))
        put(s3_client, bucket, f"users/ana/skills/{skill_id}/references/notes.md", f"notes of {leaf}\n".encode())
    put(s3_client, bucket, "users/ana/skills/gen/apagada/SKILL.md", skill_md("apagada", "Disabled", enabled="false"))
    put(s3_client, bucket, "users/bob/skills/privado/SKILL.md", skill_md("privado", "Bob's own skill"))
    seed_example_library(ObjectStore(bucket, endpoint_url=moto_endpoint), "ana")
    return bucket


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["uri"].removeprefix("skill://").removesuffix("/SKILL.md") for e in entries]


async def _check_entry_bytes(session: Any, entry: dict[str, Any]) -> None:
    """Every file of the entry reads back with the digest and size the entry states."""
    for res in entry["resources"]:
        data = await read_bytes(session, res["uri"])
        assert (digest(data), len(data)) == (res["digest"], res["size"]), res["uri"]


# SLOW_STDIO: each stdio case starts the server in a subprocess (~3 s on 2 cores), so their breadth
# runs in .ci/run's slow step. The README's command keeps the listing across pages in the
# 2026-07-28 era and the `s3skills mcp` command over stdio as smoke tests (test_mcp_hosts.py keeps
# the instructions and prompts over stdio; test_mcp_face.py drives the same server in-process).


@pytest.mark.parametrize(
    "modern",
    [True, pytest.param(False, marks=pytest.mark.slow)],  # a server subprocess: see SLOW_STDIO
    ids=["2026-07-28", "2025-11-25"],
)
async def test_stdio_lists_every_enabled_skill_of_the_user_across_pages(
    library: str, moto_endpoint: str, modern: bool
) -> None:
    async with stdio_session(library, moto_endpoint, "ana", "--page-size", PAGE, modern=modern) as session:
        if modern:  # capabilities.extensions exists from the 2026-07-28 revision on
            caps = (await session.discover()).capabilities
            assert caps.resources is not None
            assert caps.extensions == {"io.modelcontextprotocol/skills": {"directoryRead": True}}
        entries, pages = await list_all(session)
    assert _ids(entries) == ANA_IDS  # no disabled skill, none of bob's
    assert pages == -(-len(ANA_IDS) // int(PAGE))
    by_id = dict(zip(_ids(entries), entries, strict=True))
    compraventa = by_id["escrituras/compraventa"]
    source = (Path(LIBRARY) / "escrituras/compraventa/SKILL.md").read_text()
    written = yaml.safe_load(source.split("---\n")[1])
    assert compraventa["frontmatter"] == written  # as written, every field
    files = sorted(
        str(p.relative_to(Path(LIBRARY) / "escrituras/compraventa"))
        for p in (Path(LIBRARY) / "escrituras/compraventa").rglob("*")
        if p.is_file()
    )
    assert [r["uri"] for r in compraventa["resources"]] == [f"skill://escrituras/compraventa/{f}" for f in files]


@pytest.mark.slow  # a server subprocess (~3 s): see SLOW_STDIO
async def test_stdio_reads_text_and_binary_files_matching_their_digests(library: str, moto_endpoint: str) -> None:
    async with stdio_session(library, moto_endpoint, "ana") as session:
        entry = await get_skill(session, "skill://escrituras/compraventa/SKILL.md")
        await _check_entry_bytes(session, entry)
        pdf = await session.read_resource("skill://escrituras/compraventa/resources/plantilla.pdf")
        text = await session.read_resource("skill://escrituras/compraventa/SKILL.md")
    local = (Path(LIBRARY) / "escrituras/compraventa/resources/plantilla.pdf").read_bytes()
    assert pdf.contents[0].mime_type == "application/pdf"
    assert hasattr(pdf.contents[0], "blob")
    assert text.contents[0].mime_type == "text/markdown"
    assert hasattr(text.contents[0], "text")
    assert any(r["digest"] == digest(local) for r in entry["resources"])


@pytest.mark.slow  # a server subprocess (~3 s): see SLOW_STDIO
async def test_get_by_folder_name_alias_and_unknown_skill_is_invalid_params(library: str, moto_endpoint: str) -> None:
    async with stdio_session(library, moto_endpoint, "ana") as session:
        alias = await get_skill(session, "skill://hipoteca/SKILL.md")
        assert alias["uri"] == "skill://hipoteca/SKILL.md"
        assert alias["frontmatter"]["name"] == "hipoteca"
        await _check_entry_bytes(session, alias)
        for uri in ("skill://gen/apagada/SKILL.md", "skill://privado/SKILL.md", "skill://nada/SKILL.md"):
            with pytest.raises(MCPError) as err:
                await get_skill(session, uri)
            assert err.value.code == -32602
            assert "No skill is served" in err.value.message
        with pytest.raises(MCPError) as err:
            await session.read_resource("skill://escrituras/compraventa/../hipoteca/SKILL.md")
        assert err.value.code == -32602


@pytest.mark.slow  # a server subprocess (~3 s): see SLOW_STDIO
async def test_directory_read_lists_direct_children(library: str, moto_endpoint: str) -> None:
    async with stdio_session(library, moto_endpoint, "ana") as session:
        root = await session.send_request(
            ReadDirectory(params=DirectoryParams(uri="skill://escrituras/compraventa")), ANY
        )
        category = await session.send_request(ReadDirectory(params=DirectoryParams(uri="skill://escrituras")), ANY)
        with pytest.raises(MCPError) as err:
            await session.send_request(
                ReadDirectory(params=DirectoryParams(uri="skill://escrituras/compraventa/SKILL.md")), ANY
            )
    assert {(r["name"], r["mimeType"]) for r in root["resources"]} == {
        ("SKILL.md", "text/markdown"),
        ("disclosure_clausulas.md", "text/markdown"),
        ("resources", "inode/directory"),
    }
    assert [r["uri"] for r in category["resources"]] == [
        "skill://escrituras/compraventa",
        "skill://escrituras/hipoteca",
    ]
    assert err.value.code == -32602


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "2025-11-25"])
@pytest.mark.slow  # a server subprocess (~3 s): see SLOW_STDIO
async def test_a_file_changed_after_listing_reads_as_it_is_now_and_its_digest_tells_the_client(
    library: str, moto_endpoint: str, s3_client: Any, modern: bool
) -> None:
    """No memory of what was listed: the bytes served are the current ones, and their
    digest differs from the one the client holds, which is the extension's staleness signal."""
    uri = "skill://gen/skill-01/references/notes.md"
    rewritten = b"rewritten, longer than before\n"
    async with stdio_session(library, moto_endpoint, "ana", modern=modern) as session:
        before = await get_skill(session, "skill://gen/skill-01/SKILL.md")
        put(s3_client, library, "users/ana/skills/gen/skill-01/references/notes.md", rewritten)
        data = await read_bytes(session, uri)
        after = await get_skill(session, "skill://gen/skill-01/SKILL.md")
    (old,) = [r for r in before["resources"] if r["uri"] == uri]
    (new,) = [r for r in after["resources"] if r["uri"] == uri]
    assert data == rewritten
    assert digest(data) != old["digest"]
    assert (digest(data), len(data)) == (new["digest"], new["size"])


@pytest.mark.slow
async def test_http_refuses_requests_without_a_valid_token(library: str, moto_endpoint: str, tmp_path: Path) -> None:
    with http_server(library, moto_endpoint, {"tok-ana": "ana"}, tmp_path) as url:
        body = {"jsonrpc": "2.0", "id": 1, "method": "skills/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(url, json=body, headers=headers)
            wrong = await http.post(url, json=body, headers={**headers, "Authorization": "Bearer nope"})
        assert anonymous.status_code == 401
        assert wrong.status_code == 401


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "2025-11-25"])
@pytest.mark.slow
async def test_http_token_decides_the_user_and_never_shows_another_users_skills(
    library: str, moto_endpoint: str, tmp_path: Path, modern: bool
) -> None:
    tokens = {"tok-ana": "ana", "tok-bob": "bob"}
    with http_server(library, moto_endpoint, tokens, tmp_path, "--page-size", PAGE) as url:
        async with http_session(url, "tok-ana", modern=modern) as ana:
            ana_entries, pages = await list_all(ana)
            await _check_entry_bytes(ana, ana_entries[0])
            compraventa = await get_skill(ana, "skill://escrituras/compraventa/SKILL.md")
            await _check_entry_bytes(ana, compraventa)  # its text files and its PDF, digests checked
            pdf = await ana.read_resource("skill://escrituras/compraventa/resources/plantilla.pdf")
            assert pdf.contents[0].mime_type == "application/pdf"
            assert hasattr(pdf.contents[0], "blob")
            with pytest.raises(MCPError):
                await ana.read_resource("skill://privado/SKILL.md")
        async with http_session(url, "tok-bob", modern=modern) as bob:
            bob_entries, _ = await list_all(bob)
            await _check_entry_bytes(bob, bob_entries[0])
            with pytest.raises(MCPError) as err:
                await get_skill(bob, "skill://escrituras/compraventa/SKILL.md")
            assert err.value.code == -32602
    assert _ids(ana_entries) == ANA_IDS
    assert pages > 1
    assert _ids(bob_entries) == ["privado"]


async def test_the_cli_command_serves_stdio_with_the_global_options(library: str, moto_endpoint: str) -> None:
    """`s3skills --bucket B --endpoint-url E mcp --user ana` is the same server."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "s3skills.cli", "--bucket", library, "--endpoint-url", moto_endpoint, "mcp", "--user", "ana"],
        env=child_env(),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        entries, _ = await list_all(session)
    assert _ids(entries) == ANA_IDS


def test_the_cli_command_refuses_a_user_over_http(capsys: pytest.CaptureFixture[str]) -> None:
    from s3skills.cli import main

    assert main(["--bucket", "b-1", "--user", "ana", "mcp", "--transport", "http"]) == 2
    assert "--user is for stdio" in capsys.readouterr().err


def test_the_cli_command_passes_the_global_profile_to_the_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from s3skills.cli import main

    config = tmp_path / "aws-config"
    config.write_text("[profile elsewhere]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    # The server is built with the profile: an unknown one is refused before it serves anything
    # (a configuration error, status 1, with the fix).
    assert main(["--bucket", "b-1", "--user", "ana", "--profile", "missing-profile", "mcp"]) == 1
    assert "AWS profile not found" in capsys.readouterr().err
