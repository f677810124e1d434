"""One tenant's hostile input never holds another's calls (issue 30, item 1), through the MCP tools face.

In-process SDK clients of `SkillsServer` on a moto bucket. The mechanisms are pinned, not
times: an oversize `list_skills` query is cut to `Limits.max_query_chars` and the result
says so; names and paths over their caps are refused with the cap named; the ranking runs
in a worker thread, never on the server's loop or the I/O loop; one tenant's burst of
queries runs one at a time in its own queue while another tenant's query is ranked.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp_harness import put

from s3skills._loop import io_loop
from s3skills.config import Limits
from s3skills.serve.fairshare import TenantLimiter
from s3skills.serve.mcp import aclose_server, library_source
from s3skills.serve.server import SkillsServer
from s3skills.skills import LexicalRanker, SkillInfo
from s3skills.testing import skill_md

CAP = Limits().max_query_chars


@pytest.fixture
def library(bucket: str, s3_client: Any) -> str:
    for user in ("ana", "bob"):
        put(s3_client, bucket, f"users/{user}/skills/docs/writer/SKILL.md", skill_md("writer", "Write documents"))
        put(s3_client, bucket, f"users/{user}/skills/deploy/SKILL.md", skill_md("deploy", "Deploy the services"))
    return bucket


class Recorder:
    """A real ranker (lexical) that notes each call's thread, and how many run at once per tenant.

    The tenant is the query's first word. With `hold`, calls wait (in their worker thread)
    until `release` is set, so concurrency can be counted while they are in.
    """

    def __init__(self, *, hold: bool = False) -> None:
        self.inner = LexicalRanker()
        self.threads: list[int] = []
        self.queries: list[int] = []
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.entered = {name: threading.Event() for name in ("ana", "bob")}
        self.release = threading.Event()
        self.hold = hold
        self.lock = threading.Lock()

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        who = query.split(" ", 1)[0]
        with self.lock:
            self.threads.append(threading.get_ident())
            self.queries.append(len(query))
            self.running[who] = self.running.get(who, 0) + 1
            self.peak[who] = max(self.peak.get(who, 0), self.running[who])
        if who in self.entered:
            self.entered[who].set()
        try:
            if self.hold:
                assert self.release.wait(60), "the test never released the ranker"
            return self.inner.rank(query, skills)
        finally:
            with self.lock:
                self.running[who] -= 1


@contextlib.asynccontextmanager
async def connected(*servers: SkillsServer) -> AsyncIterator[list[Client]]:
    try:
        async with contextlib.AsyncExitStack() as stack:
            yield [await stack.enter_async_context(Client(s.server, mode="legacy")) for s in servers]
    finally:
        for s in servers:
            await aclose_server(s)


def server(library: str, endpoint: str, user: str, **kw: Any) -> SkillsServer:
    return SkillsServer(library_source(library, endpoint_url=endpoint), user_id=user, tools=True, **kw)


async def test_an_oversize_query_is_cut_to_the_cap_and_the_result_says_so(library: str, moto_endpoint: str) -> None:
    ranker = Recorder()
    huge = "ana " + " ".join(f"w{i}" for i in range(300_000)) + " documents"  # ~2.3 MB of distinct words
    async with connected(server(library, moto_endpoint, "ana", ranker=ranker)) as (client,):
        result = await client.call_tool("list_skills", {"query": huge})
        short = await client.call_tool("list_skills", {"query": "ana write documents"})
    assert not result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("Note: the query was cut to its first ")
    assert f"the limit is {CAP}; it had {len(huge)}" in text
    assert "queryTruncated" in (result.structured_content or {})
    assert max(ranker.queries) <= CAP  # the ranker never saw more than the cap
    assert (short.structured_content or {})["skills"][0]["id"] == "docs/writer"
    assert "queryTruncated" not in (short.structured_content or {})


async def test_names_paths_and_prompt_arguments_over_their_caps_are_refused_naming_the_cap(
    library: str, moto_endpoint: str
) -> None:
    limits = Limits()
    async with connected(server(library, moto_endpoint, "ana")) as (client,):
        long_name = "a" * (limits.max_name_chars + 1)
        for args in (
            {"name": long_name},
            {"name": long_name, "path": "SKILL.md"},
            {"name": "deploy", "path": "p/" * limits.max_path_chars},
        ):
            tool = "load_skill" if "path" not in args else "read_skill_file"
            result = await client.call_tool(tool, args)
            assert result.is_error
            message = result.content[0].text  # type: ignore[union-attr]
            assert "characters long; the limit is" in message
        with pytest.raises(MCPError, match=f"the limit is {limits.max_name_chars}"):
            await client.get_prompt(long_name)
        with pytest.raises(MCPError, match=f"the limit is {limits.max_query_chars}"):
            await client.get_prompt("deploy", {"x": "y" * (limits.max_query_chars + 1)})
        ok = await client.call_tool("read_skill_file", {"name": "deploy", "path": "SKILL.md"})
        assert not ok.is_error


async def test_ranking_runs_in_a_worker_thread_never_on_the_servers_loop_or_the_io_loop(
    library: str, moto_endpoint: str
) -> None:
    ranker = Recorder()
    async with connected(server(library, moto_endpoint, "ana", ranker=ranker)) as (client,):
        await client.call_tool("list_skills", {"query": "ana write documents"})
        await client.call_tool("list_skills", {"query": "ana deploy services"})
    loop_thread = threading.get_ident()  # the test's loop runs the in-process server
    io_thread = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_ident(), io_loop()))
    assert len(ranker.threads) == 2
    assert loop_thread not in ranker.threads
    assert io_thread not in ranker.threads


async def _ident() -> int:
    return threading.get_ident()


async def test_one_tenants_burst_is_queued_behind_its_own_work_not_another_tenants(
    library: str, moto_endpoint: str
) -> None:
    ranker = Recorder(hold=True)
    shared = TenantLimiter(per_tenant=1, queue=3, workers=2)
    ana = server(library, moto_endpoint, "ana", ranker=ranker, limiter=shared)
    bob = server(library, moto_endpoint, "bob", ranker=ranker, limiter=shared)
    huge = "ana " + " ".join(f"w{i}" for i in range(2_000))
    async with connected(ana, bob) as (ana_client, bob_client):
        burst = [asyncio.create_task(ana_client.call_tool("list_skills", {"query": huge})) for _ in range(6)]
        assert await asyncio.to_thread(ranker.entered["ana"].wait, 60)
        # bob's query is ranked while ana's first one still holds its slot...
        bob_call = asyncio.create_task(bob_client.call_tool("list_skills", {"query": "bob write documents"}))
        assert await asyncio.to_thread(ranker.entered["bob"].wait, 60)
        assert ranker.running["ana"] == 1  # ...and ana's others wait in ana's queue
        pending = set(burst)
        while len(pending) > 4:  # the two calls over ana's queue are refused at once, while the rest wait
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        ranker.release.set()
        results = await asyncio.gather(*burst)
        bob_result = await bob_call
    assert ranker.peak == {"ana": 1, "bob": 1}
    assert shared.peak == {"ana": 1, "bob": 1}
    assert not bob_result.is_error
    busy = [r for r in results if r.is_error]
    served = [r for r in results if not r.is_error]
    assert len(served) == 4  # one running and three queued (queue=3)
    assert len(busy) == 2
    assert all("busy: this user already has 4 searches" in r.content[0].text for r in busy)  # type: ignore[union-attr]
