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
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

ANY = TypeAdapter(dict[str, Any])


class ListSkills(types.Request[types.PaginatedRequestParams | None, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"


class GetSkillParams(types.RequestParams):
    uri: str


class GetSkill(types.Request[GetSkillParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"


class DirectoryParams(types.RequestParams):
    uri: str
    cursor: str | None = None


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


class ServerLog:
    """The stderr of a server subprocess, drained by a thread (a full pipe would stall it)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.lines: list[str] = []
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._drain, args=(proc,), daemon=True)
        self._thread.start()

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if line.startswith("listening on http://"):
                self.listening.set()
        self.listening.set()  # the process ended

    def text(self) -> str:
        self._thread.join(10)
        return "".join(self.lines)


@contextlib.contextmanager
def http_server_process(
    bucket: str, endpoint: str, tokens: dict[str, str], tmp: Path, *extra: str, cli: bool = False
) -> Iterator[tuple[str, subprocess.Popen[bytes], ServerLog]]:
    """Start the HTTP transport on a port it picks (`--port 0`); yields its /mcp URL (from the
    "listening on" line), the process and its stderr; always stops it. `cli`: start it as a
    user does, `s3skills --bucket B --endpoint-url E mcp ...`, not `python -m s3skills.serve.mcp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    tokens_file = tmp / "tokens.json"
    tokens_file.write_text(json.dumps(tokens))
    tokens_file.chmod(0o600)
    http = ("--transport", "http", "--port", "0", "--tokens", str(tokens_file))
    if cli:
        args = ["-m", "s3skills.cli", "--bucket", bucket, "--endpoint-url", endpoint, "mcp", *http]
    else:
        args = server_args(bucket, endpoint, *http)
    proc = subprocess.Popen([sys.executable, *args, *extra], env=child_env(), stderr=subprocess.PIPE)
    log = ServerLog(proc)
    try:
        if not log.listening.wait(60) or proc.poll() is not None:
            raise RuntimeError(f"the MCP server did not start: {''.join(log.lines)[-3000:]}")
        line = next(ln for ln in log.lines if ln.startswith("listening on http://"))
        yield line.removeprefix("listening on ").strip(), proc, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.text()
        if proc.stderr:
            proc.stderr.close()


@contextlib.contextmanager
def http_server(bucket: str, endpoint: str, tokens: dict[str, str], tmp: Path, *extra: str) -> Iterator[str]:
    """Start the HTTP transport on a free loopback port; yields its /mcp URL; always stops it."""
    with http_server_process(bucket, endpoint, tokens, tmp, *extra) as (url, _, _):
        yield url


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
