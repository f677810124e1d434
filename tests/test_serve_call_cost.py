"""What one MCP tool call costs the server: one fresh index read, and no hop between threads.

A busy HTTP server held each call for every index read in it (a contended library's
refresh waited for more callers, bench/README.md "Where a call's time goes"), so a tool
call reads its tenant's index fresh once and uses that read for the rest of the call.
The library's calls run on the server's own loop while it serves
(`s3skills._loop.serve_on_running_loop`), not on the private I/O loop's thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from mcp.client.client import Client

from s3skills._loop import io_loop, on_io_loop, serve_on_running_loop
from s3skills.config import Config
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.storage import ObjectBody
from s3skills.testing import MemoryObjectStore, skill_md


class CountingStore(MemoryObjectStore):
    """Counts the GETs of each library's manifest (one per fresh index read)."""

    def __init__(self) -> None:
        super().__init__()
        self.manifest_gets = 0

    async def aget(self, key: str, **kwargs: Any) -> ObjectBody:
        if key.endswith("manifest.json"):
            self.manifest_gets += 1
        return await super().aget(key, **kwargs)


def _server() -> tuple[SkillsServer, CountingStore]:
    store = CountingStore()
    store.put_object("users/ana/skills/deploy/SKILL.md", skill_md("deploy", "Deploy the services"))
    store.put_object("users/ana/skills/deploy/references/steps.md", "steps\n")
    library = SkillLibrary(store, Config())
    return SkillsServer(LibrarySkillSource(library), user_id="ana", tools=True), store


async def test_load_skill_reads_the_index_fresh_once_for_the_whole_call() -> None:
    server, store = _server()
    async with Client(server.server, mode="legacy") as client:
        await client.call_tool("list_skills", {})  # the manifest exists from here on
        for tool, arguments in (
            ("load_skill", {"name": "deploy"}),
            ("read_skill_file", {"name": "deploy", "path": "references/steps.md"}),
        ):
            before = store.manifest_gets
            result = await client.call_tool(tool, arguments)
            assert not result.is_error
            assert store.manifest_gets - before == 1, tool  # one fresh read, not one per step


async def test_while_serving_on_a_loop_library_calls_run_on_it_and_after_on_the_private_loop() -> None:
    async def where() -> int:
        return threading.get_ident()

    private = io_loop()
    with serve_on_running_loop():
        assert await on_io_loop(where()) == threading.get_ident()  # no hop to another thread
    assert await on_io_loop(where()) != threading.get_ident()
    assert io_loop() is private  # the private loop is the I/O loop again
    assert asyncio.get_running_loop() is not private
