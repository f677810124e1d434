"""The MCP server for the host in front of it, and configuration errors that fail fast.

With the MCP SDK's client over stdio, on moto: the `instructions` of `initialize` describe
the tools face to a client without the skills extension and the extension's methods to a
client that declares it; prompt names are ones every host accepts (no `/`, no leading `-`,
unique), with the skill id in the description, and `prompts/get` answers each. A missing
bucket, credentials the store refuses (403 from a FaultProxy), no credentials at all and a
busy port stop the server at start with one line that says the fix; a transient fault (503)
does not: the server starts and answers "try again later" until the store is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_harness import child_env, put, server_args

from s3skills.serve.instructions import EXTENSION_FACE, TOOLS_FACE
from s3skills.serve.prompt_names import MAX_PROMPT_NAME, is_safe_prompt_name, prompt_names
from s3skills.testing import LOOPBACK, FaultProxy, skill_md

EXTENSION = "io.modelcontextprotocol/skills"
IDS = [
    "pdf",
    "-2chat-automation",
    "escrituras/compraventa",
    "escrituras__compraventa",
    "v1.2:tool~x",
    "ops/" + "a" * 70,
]


@pytest.fixture
def library(s3_client: Any, bucket: str) -> str:
    for skill_id in IDS:
        leaf = skill_id.rsplit("/", 1)[-1]
        put(s3_client, bucket, f"users/ana/skills/{skill_id}/SKILL.md", skill_md(leaf, f"Does {leaf} work."))
    return bucket


@contextlib.asynccontextmanager
async def session(
    bucket: str, endpoint: str, *, extensions: dict[str, dict[str, Any]] | None = None
) -> AsyncIterator[tuple[ClientSession, str | None]]:
    params = StdioServerParameters(
        command=sys.executable, args=server_args(bucket, endpoint, "--user", "ana"), env=child_env()
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, extensions=extensions) as s:
        result = await s.initialize()
        yield s, result.instructions


async def test_a_client_without_the_extension_reads_about_the_tools(library: str, moto_endpoint: str) -> None:
    async with session(library, moto_endpoint) as (_, instructions):
        assert instructions == TOOLS_FACE
    for name in ("list_skills", "load_skill", "read_skill_file", "prompts/list"):
        assert name in TOOLS_FACE


@pytest.mark.slow  # a server subprocess (~3 s): the tools face above is the fast stdio smoke
async def test_a_client_with_the_extension_reads_about_its_methods(library: str, moto_endpoint: str) -> None:
    async with session(library, moto_endpoint, extensions={EXTENSION: {}}) as (_, instructions):
        assert instructions == EXTENSION_FACE
    assert "skills/list" in EXTENSION_FACE
    assert "resources/read" in EXTENSION_FACE


async def test_every_prompt_name_is_one_every_host_accepts_and_names_its_skill(
    library: str, moto_endpoint: str
) -> None:
    async with session(library, moto_endpoint) as (s, _):
        prompts = (await s.list_prompts()).prompts
        names = [p.name for p in prompts]
        assert len(names) == len(set(names)) == len(IDS)
        assert all(is_safe_prompt_name(n) for n in names), names
        by_id = {(p.description or "").split(": ", 1)[0].removeprefix("Skill "): p.name for p in prompts}
        assert set(by_id) == set(IDS)
        assert by_id["pdf"] == "pdf"  # a name every host accepts is kept
        assert by_id["-2chat-automation"] == "2chat-automation"
        for skill_id, name in by_id.items():
            got = await s.get_prompt(name)
            leaf = skill_id.rsplit("/", 1)[-1]
            assert f"Use the skill {skill_id}." in got.messages[0].content.text  # type: ignore[union-attr]
            assert f"Does {leaf} work." in got.messages[0].content.text  # type: ignore[union-attr]


def test_prompt_names_are_unique_safe_and_bounded_whatever_the_ids() -> None:
    ids = ["a/b", "a__b", "a__b-2", "-x", "_x", "x", ".hidden/-", "é" * 3, "b" * 200, "b" * 199 + "/c"]
    names = prompt_names(ids)
    assert len(set(names.values())) == len(ids)
    assert all(is_safe_prompt_name(n) and len(n) <= MAX_PROMPT_NAME for n in names.values()), names
    assert names["a__b"] == "a__b"
    assert names["x"] == "x"
    assert names == prompt_names(reversed(ids))  # the order the ids come in does not matter


# SLOW_START_UP: each start-up failure and fault case starts the server in a subprocess (3-10 s
# on 2 cores), so the breadth runs in .ci/run's slow step; the README's command keeps the
# missing bucket as its fail-fast smoke test, and the instructions and prompt names over stdio.


def _start_fails(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the stdio server with stdin open; it must exit by itself (the fail-fast check)."""
    proc = subprocess.run(
        [sys.executable, *args],
        env=env or child_env(),
        stdin=subprocess.PIPE,
        capture_output=True,
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stderr.decode()


def _one_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("s3skills mcp: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_missing_bucket_stops_the_server_with_the_fix(moto_endpoint: str) -> None:
    code, err = _start_fails(server_args("no-such-bucket", moto_endpoint, "--user", "ana"))
    assert code == 1
    line = _one_error(err)
    assert "bucket does not exist" in line
    assert "--create-bucket" in line


@pytest.mark.slow  # server subprocesses (3-10 s): see SLOW_START_UP
def test_a_missing_bucket_through_the_cli_says_the_same(moto_endpoint: str) -> None:
    args = ["-m", "s3skills.cli", "--bucket", "no-such-bucket", "--endpoint-url", moto_endpoint, "--user", "ana", "mcp"]
    code, err = _start_fails(args)
    assert code == 1
    assert "bucket does not exist" in _one_error(err)


@pytest.mark.slow  # server subprocesses (3-10 s): see SLOW_START_UP
def test_access_denied_stops_the_server_with_the_fix(library: str, moto_endpoint: str) -> None:
    with FaultProxy(moto_endpoint) as proxy:
        proxy.inject("access_denied", count=None)
        code, err = _start_fails(server_args(library, proxy.url, "--user", "ana"))
    assert code == 1
    assert "access denied" in _one_error(err)
    assert "s3:ListBucket" in err


@pytest.mark.slow  # server subprocesses (3-10 s): see SLOW_START_UP
def test_no_credentials_stop_the_server_with_the_fix(library: str, moto_endpoint: str, tmp_path: Path) -> None:
    # A loopback endpoint without credentials gets local dummy keys; a profile without
    # keys has none at all (botocore refuses to sign before any connection is made).
    config = tmp_path / "aws-config"
    config.write_text("[profile keyless]\nregion = us-east-1\n")
    env = {k: v for k, v in child_env().items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env |= {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(config)}
    code, err = _start_fails(server_args(library, moto_endpoint, "--user", "ana", "--profile", "keyless"), env)
    assert code == 1
    line = _one_error(err)
    assert "no AWS credentials were found" in line
    assert "AWS_ACCESS_KEY_ID" in line


@pytest.mark.slow  # server subprocesses (3-10 s): see SLOW_START_UP
def test_a_busy_port_is_reported_as_a_busy_port(library: str, moto_endpoint: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"token-of-ana": "ana"}')
    tokens.chmod(0o600)
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = server_args(library, moto_endpoint, "--transport", "http", "--port", str(port), "--tokens", str(tokens))
        code, err = _start_fails(args)
        cli = ["-m", "s3skills.cli", "--bucket", library, "--endpoint-url", moto_endpoint, "mcp"]
        cli_code, cli_err = _start_fails([*cli, "--transport", "http", "--port", str(port), "--tokens", str(tokens)])
    for status, text in ((code, err), (cli_code, cli_err)):
        assert status == 1
        line = _one_error(text)
        assert f"port {port} on {LOOPBACK} is busy" in line
        assert "--port" in line
        assert "invalid options" not in text


@pytest.mark.slow  # server subprocesses (3-10 s): see SLOW_START_UP
async def test_a_transient_fault_keeps_the_try_again_path(library: str, moto_endpoint: str) -> None:
    with FaultProxy(moto_endpoint) as proxy:
        proxy.inject("slowdown", count=None)
        params = StdioServerParameters(
            command=sys.executable, args=server_args(library, proxy.url, "--user", "ana"), env=child_env()
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()  # the server started despite the 503s
            with pytest.raises(MCPError, match="try again later"):
                await s.list_prompts()
            proxy.clear_faults()
            assert len(await _prompts_once_the_store_is_back(s)) == len(IDS)


async def _prompts_once_the_store_is_back(s: ClientSession) -> list[Any]:
    """The prompts, asked again while the library's failure backoff lasts (bounded by attempts)."""
    for _ in range(100):
        try:
            return list((await s.list_prompts()).prompts)
        except MCPError as exc:
            if "try again later" not in str(exc):
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("the server never recovered")


@pytest.mark.slow  # server subprocesses (3-10 s): see SLOW_START_UP
async def test_access_denied_after_start_says_misconfigured_not_try_again(library: str, moto_endpoint: str) -> None:
    with FaultProxy(moto_endpoint) as proxy:
        params = StdioServerParameters(
            command=sys.executable, args=server_args(library, proxy.url, "--user", "ana"), env=child_env()
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            proxy.inject("access_denied", count=None)
            with pytest.raises(MCPError, match="misconfigured on the server: access denied"):
                await s.call_tool("read_skill_file", {"name": "pdf", "path": "SKILL.md"})
