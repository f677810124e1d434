"""The HTTP transport is stateless: replicas behind a round-robin proxy answer as one server.

Two server processes on one moto library sit behind `s3skills.testing.RoundRobinProxy`
(every request goes to the other replica than the one before). The official SDK client,
in both protocol eras, runs the same list/get/read/directory/tools sequence against the
proxy and against a single server: the answers are the same. A server also says where it
listens and shuts down without leaking its S3 client.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp_harness import (
    ANY,
    DirectoryParams,
    ReadDirectory,
    get_skill,
    http_server_process,
    http_session,
    list_all,
    put,
    read_bytes,
)

from s3skills.seed import seed_example_library
from s3skills.storage import S3ObjectStore
from s3skills.testing import skill_md
from s3skills.testing.balancer import RoundRobinProxy

TOKENS = {"tok-ana": "ana", "tok-bob": "bob"}


@pytest.fixture
def library(bucket: str, moto_endpoint: str, s3_client: Any) -> str:
    # Plain PUTs first: the push then records them in the manifest it builds from a listing
    # (a write made outside s3skills after a push shows only after `verify_interval`).
    put(s3_client, bucket, "users/ana/skills/informes/SKILL.md", skill_md("informes", "Reports"))
    put(s3_client, bucket, "users/ana/skills/informes/trimestral/SKILL.md", skill_md("trimestral", "Quarterly"))
    put(s3_client, bucket, "users/bob/skills/privado/SKILL.md", skill_md("privado", "Bob's own"))
    seed_example_library(S3ObjectStore(bucket, endpoint_url=moto_endpoint), "ana")
    return bucket


async def _sequence(url: str, token: str, modern: bool) -> list[Any]:
    """What one client sees: every entry, one entry, its files' bytes, a directory, a tool call."""
    seen: list[Any] = []
    session: ClientSession
    async with http_session(url, token, modern=modern) as session:
        entries, pages = await list_all(session)
        seen += [entries, pages]
        for entry in entries[:3]:
            got = await get_skill(session, entry["uri"])
            seen.append(got)
            seen += [await read_bytes(session, r["uri"]) for r in got["resources"]]
        seen.append(await session.send_request(ReadDirectory(params=DirectoryParams(uri="skill://informes")), ANY))
        loaded = await session.call_tool("load_skill", {"name": "trimestral"})
        seen.append(loaded.structured_content)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_two_replicas_behind_a_round_robin_proxy_answer_a_client_as_one_server_does(
    library: str, moto_endpoint: str, tmp_path: Path, modern: bool
) -> None:
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                http_server_process(library, moto_endpoint, TOKENS, tmp_path / str(n), "--page-size", "3")
            )
            for n in range(2)
        ]
        urls = [url for url, _, _ in servers]
        proxy = stack.enter_context(RoundRobinProxy([u.removesuffix("/mcp") for u in urls]))
        alone = await _sequence(urls[0], "tok-ana", modern)
        balanced = await _sequence(proxy.url + "/mcp", "tok-ana", modern)
        async with http_session(proxy.url + "/mcp", "tok-bob", modern=modern) as bob:
            bob_entries, _ = await list_all(bob)
    assert balanced == alone
    assert alone[1] > 1  # several pages of entries
    assert min(proxy.forwarded) >= 5  # both replicas answered a good share
    assert [e["uri"] for e in bob_entries] == ["skill://privado/SKILL.md"]


async def test_a_server_says_where_it_listens_and_closes_its_s3_client_on_shutdown(
    library: str, moto_endpoint: str, tmp_path: Path
) -> None:
    with http_server_process(library, moto_endpoint, TOKENS, tmp_path) as (url, proc, log):
        async with http_session(url, "tok-ana") as session:
            entries, _ = await list_all(session)
    assert proc.returncode == 0  # SIGTERM: a graceful shutdown, not death by the signal
    text = log.text()
    assert f"listening on {url}\n" in text
    assert url.startswith("http://127.0.0.1:")
    assert entries
    assert "Unclosed client session" not in text
    assert "Unclosed connector" not in text
