"""What one MCP tool call costs the server: one fresh index read, and no hop between threads.

A busy HTTP server held each call for every index read in it (a contended library's
refresh waited for more callers, bench/README.md "Where a call's time goes"), so a tool
call reads its tenant's index fresh once and uses that read for the rest of the call.
The library's calls run on the server's own loop while it serves
(`s3skills._loop.serve_on_running_loop`), not on the private I/O loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_types import TextContent

from s3skills._loop import io_loop, on_io_loop, serve_on_running_loop
from s3skills.config import Config, Limits
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.mcp import main as mcp_main
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.skills.index.folders import FolderCache
from s3skills.storage import ObjectBody
from s3skills.tenancy import Tenant
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


# -- within the catalog TTL a call costs no S3 request ---------------------------------------------------------

TTL = 60.0


class _Served:
    """A server whose library trusts its index for `ttl` seconds, on a clock the test moves."""

    def __init__(self, ttl: float | None) -> None:
        self.store = MemoryObjectStore()
        self.store.put_object("users/ana/skills/deploy/SKILL.md", skill_md("deploy", "Deploy the services"))
        self.store.put_object("users/ana/skills/deploy/references/steps.md", "steps\n")
        self.library = SkillLibrary(self.store, Config(catalog_ttl=ttl))
        self.now = 1_000_000.0
        self.library.catalog.clock = lambda: self.now
        self.server = SkillsServer(LibrarySkillSource(self.library), user_id="ana", tools=True)
        self.requests: Counter[str] = Counter()
        self.store.add_request_hook(lambda operation: self.requests.update([operation]))

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        """A client of the server, the library's calls on this loop (as the HTTP server runs them)."""
        with serve_on_running_loop():
            async with Client(self.server.server, mode="legacy") as client:
                yield client

    async def cost(self, client: Client, tool: str, **arguments: str) -> tuple[Counter[str], str]:
        """The S3 requests of one call, by operation, and its text (the call must succeed)."""
        before = self.requests.copy()
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        text = result.content[0].text if isinstance(result.content[0], TextContent) else ""
        return self.requests - before, text


READ = {"name": "deploy", "path": "references/steps.md"}


async def test_within_the_catalog_ttl_load_and_read_cost_no_s3_request() -> None:
    served = _Served(TTL)
    async with served.client() as client:
        await served.cost(client, "list_skills")  # indexes the library (and writes its manifest)
        await served.library.catalog.aflush()
        load, _ = await served.cost(client, "load_skill", name="deploy")
        assert load == Counter({"GetObject": 1, "ListObjectsV2": 1})  # the SKILL.md, the folder's listing
        read, text = await served.cost(client, "read_skill_file", **READ)
        assert read == Counter({"GetObject": 1})
        assert text == "steps\n"
        for _ in range(3):
            assert (await served.cost(client, "list_skills"))[0] == Counter()
            assert (await served.cost(client, "load_skill", name="deploy"))[0] == Counter()
            assert (await served.cost(client, "read_skill_file", **READ)) == (Counter(), "steps\n")


async def test_without_a_ttl_every_call_asks_the_bucket_as_before() -> None:
    served = _Served(None)
    async with served.client() as client:
        await served.cost(client, "list_skills")
        await served.cost(client, "load_skill", name="deploy")
        for _ in range(2):
            # the manifest (304), then the folder's LIST; the manifest, the file and a HEAD of references/SKILL.md
            assert (await served.cost(client, "load_skill", name="deploy"))[0] == Counter(
                {"GetObject": 1, "ListObjectsV2": 1}
            )
            assert (await served.cost(client, "read_skill_file", **READ)) == (
                Counter({"GetObject": 2, "HeadObject": 1}),
                "steps\n",
            )


async def test_a_file_changed_in_the_bucket_is_served_new_once_the_ttl_has_passed() -> None:
    served = _Served(TTL)
    async with served.client() as client:
        assert (await served.cost(client, "read_skill_file", **READ))[1] == "steps\n"
        served.store.put_object("users/ana/skills/deploy/references/steps.md", "steps, second edition\n")
        served.store.put_object("users/ana/skills/deploy/references/more.md", "more\n")
        served.now += TTL / 2  # within the TTL the index, and the folder read since, are trusted
        assert (await served.cost(client, "read_skill_file", **READ))[1] == "steps\n"
        served.now += TTL
        cost, text = await served.cost(client, "read_skill_file", **READ)
        assert text == "steps, second edition\n"  # the listing is too old now: listed and read again
        assert cost == Counter({"GetObject": 2, "ListObjectsV2": 1})  # the manifest (304), the file; the LIST
        _, loaded = await served.cost(client, "load_skill", name="deploy")
        assert "references/more.md" in loaded


async def test_a_skill_md_written_above_a_file_takes_it_out_once_the_ttl_has_passed() -> None:
    served = _Served(TTL)
    async with served.client() as client:
        await served.cost(client, "read_skill_file", **READ)
        served.store.put_object("users/ana/skills/deploy/references/SKILL.md", skill_md("refs", "Another skill"))
        served.now += TTL + 1
        result = await client.call_tool("read_skill_file", READ)
        assert result.is_error  # references/ is a nested skill now: its files are not deploy's
        before = served.requests.copy()
        again = await client.call_tool("read_skill_file", READ)
        assert again.is_error
        assert served.requests - before == Counter()


async def test_invalidating_the_library_ends_the_folder_listings_read_before() -> None:
    served = _Served(TTL)
    async with served.client() as client:
        await served.cost(client, "read_skill_file", **READ)
        served.store.put_object("users/ana/skills/deploy/references/steps.md", "steps, second edition\n")
        served.library.invalidate()  # what the library's own writers do after a write
        cost, text = await served.cost(client, "read_skill_file", **READ)
        assert text == "steps, second edition\n"
        assert cost["ListObjectsV2"] == 1


def test_the_folder_cache_keeps_bodies_within_its_budget_and_never_one_over_a_quarter_of_it() -> None:
    cache = FolderCache(MemoryObjectStore(), Limits(body_cache_bytes=400), lambda source: TTL, lambda: 0.0)
    cache.keep_body(ObjectBody("k/big", b"x" * 101, "e-big", 101))
    assert cache.body("k/big", "e-big") is None
    assert cache.size == 0
    for n in range(5):
        cache.keep_body(ObjectBody(f"k/{n}", b"y" * 100, f"e{n}", 100))
    assert cache.size <= 400
    assert cache.body("k/0", "e0") is None
    assert cache.body("k/4", "e4") is not None
    assert cache.body("k/4", "other") is None
    cache.keep_body(ObjectBody("k/part", b"z" * 10, "e-part", 1000))  # a part of an object: never kept
    assert cache.body("k/part", "e-part") is None


@pytest.mark.parametrize("ttl", ["-1", "nan", "3601"])
def test_the_server_refuses_a_catalog_ttl_that_is_no_number_of_seconds(
    ttl: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mcp_main(["--bucket", "b-1", "--user", "ana", "--catalog-ttl", ttl]) == 2
    assert "--catalog-ttl must be a number of seconds in [0, 3600]" in capsys.readouterr().err


def test_the_server_refuses_a_catalog_ttl_that_is_not_a_number(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        mcp_main(["--bucket", "b-1", "--user", "ana", "--catalog-ttl", "soon"])
    assert exited.value.code == 2
    assert "--catalog-ttl" in capsys.readouterr().err


async def test_a_shared_skill_read_by_one_tenant_costs_the_next_tenant_no_request_within_the_shared_ttl() -> None:
    store = MemoryObjectStore()
    store.put_object("shared/org/skills/deploy/SKILL.md", skill_md("deploy", "Deploy the services"))
    store.put_object("shared/org/skills/deploy/references/steps.md", "steps\n")
    library = SkillLibrary(store, Config(shared_library="org"))  # the shared library's TTL: 5 s by default
    now = [1_000_000.0]
    library.catalog.clock = lambda: now[0]
    requests: Counter[str] = Counter()
    store.add_request_hook(lambda operation: requests.update([operation]))
    with serve_on_running_loop():
        first = await library.aopen("deploy", "references/steps.md", tenant=Tenant("ana"))
        await library.aindex(tenant=Tenant("bob"))  # bob's own library, indexed once
        await library.catalog.aflush()
        before = requests.copy()
        second = await library.aopen("deploy", "references/steps.md", tenant=Tenant("bob"))
        bob = requests - before
        assert first.data == second.data == b"steps\n"
        assert bob == Counter()  # the shared folder's listing and the file's bytes, as ana's read left them
        now[0] += 6  # past the shared library's TTL: its folder is listed again
        store.put_object("shared/org/skills/deploy/references/steps.md", "steps, second edition\n")
        third = await library.aopen("deploy", "references/steps.md", tenant=Tenant("bob"))
        assert third.data == b"steps, second edition\n"
