"""Helpers for the MCP server tests: a library in moto, server subprocesses, client calls.

Servers run as subprocesses (`python -m s3skills.serve.mcp`) on free loopback ports and are
always stopped. Clients are the official SDK's `ClientSession` over stdio or streamable HTTP.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

from s3skills.testing import LOOPBACK, free_port

ANY = TypeAdapter(dict[str, Any])


class ListSkills(types.Request[types.PaginatedRequestParams | None, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"


class GetSkillParams(types.RequestParams):
    uri: str


class GetSkill(types.Request[GetSkillParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"


class DirectoryParams(types.RequestParams):
    uri: str


class ReadDirectory(types.Request[DirectoryParams, Literal["resources/directory/read"]]):
    method: Literal["resources/directory/read"] = "resources/directory/read"


def put(client: Any, bucket: str, key: str, body: bytes | str) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body)


def server_args(bucket: str, endpoint: str, *extra: str) -> list[str]:
    return ["-m", "s3skills.serve.mcp", "--bucket", bucket, "--endpoint-url", endpoint, *extra]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return env


@contextlib.asynccontextmanager
async def stdio_session(
    bucket: str, endpoint: str, user: str, *extra: str, modern: bool = False
) -> AsyncIterator[ClientSession]:
    """A client session on a stdio server; `modern`: the 2026-07-28 era (`server/discover`)."""
    params = StdioServerParameters(
        command=sys.executable, args=server_args(bucket, endpoint, "--user", user, *extra), env=child_env()
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await (session.discover() if modern else session.initialize())
        yield session


@contextlib.contextmanager
def http_server(bucket: str, endpoint: str, tokens: dict[str, str], tmp: Path, *extra: str) -> Iterator[str]:
    """Start the HTTP transport on a free loopback port; yields its /mcp URL; always stops it."""
    tokens_file = tmp / "tokens.json"
    tokens_file.write_text(json.dumps(tokens))
    tokens_file.chmod(0o600)
    port = free_port()
    args = server_args(bucket, endpoint, "--transport", "http", "--port", str(port), "--tokens", str(tokens_file))
    proc = subprocess.Popen([sys.executable, *args, *extra], env=child_env(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the MCP server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP server did not start listening")
            time.sleep(0.05)
        yield f"http://{LOOPBACK}:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str, *, modern: bool = False) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await (session.discover() if modern else session.initialize())
        yield session


async def list_all(session: ClientSession) -> tuple[list[dict[str, Any]], int]:
    """Every skill entry, following nextCursor; also the number of pages."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.send_request(ListSkills(params=params), ANY)
        pages += 1
        entries.extend(result["skills"])
        cursor = result.get("nextCursor")
        if not cursor:
            return entries, pages


async def get_skill(session: ClientSession, uri: str) -> dict[str, Any]:
    return (await session.send_request(GetSkill(params=GetSkillParams(uri=uri)), ANY))["skill"]


async def read_bytes(session: ClientSession, uri: str) -> bytes:
    result = await session.read_resource(uri)
    (content,) = result.contents
    if isinstance(content, types.TextResourceContents):
        return content.text.encode("utf-8")
    return base64.b64decode(content.blob)


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
