"""Progressive cost of the MCP skills server, as S3 request counts (in-process client)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_harness import ANY, ListSkills

from s3skills.config import Config
from s3skills.errors import InvalidPath
from s3skills.seed import seed_example_library
from s3skills.serve.entries import decode_cursor, encode_cursor, parse_uri, uri_of
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.storage import RequestCounter
from s3skills.storage import S3ObjectStore as ObjectStore


async def test_listing_again_reads_no_file_and_a_change_reads_only_that_file(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    store = ObjectStore(bucket, endpoint_url=moto_endpoint)
    seed_example_library(store, "ana")
    counter = RequestCounter()
    store.add_request_hook(counter)
    # verify="always": the out-of-band put below shows at once (the default shows it within verify_interval)
    skills = SkillsServer(LibrarySkillSource(SkillLibrary(store, Config(verify="always"))), user_id="ana")
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(store.aclose)  # this loop's client; the I/O loop's closes with the store
        client = await stack.enter_async_context(Client(skills.server))
        first = await client.session.send_request(ListSkills(params=None), ANY)
        cold = counter["GetObject"]
        counter.reset()
        again = await client.session.send_request(ListSkills(params=None), ANY)
        assert counter["GetObject"] == 1  # only the manifest's conditional GET: digests come from the cache
        s3_client.put_object(
            Bucket=bucket,
            Key="users/ana/skills/escrituras/hipoteca/SKILL.md",
            Body=b"---\nname: hipoteca\ndescription: New\n---\n",
        )
        counter.reset()
        changed = await client.session.send_request(ListSkills(params=None), ANY)
    files = sum(len(e["resources"]) for e in first["skills"])
    # The push that seeded the library recorded every digest: the first listing reads no file,
    # only the manifest (missing), the index's head read of each SKILL.md, and the digest book.
    assert cold <= 2 + len(first["skills"]) < files
    assert again == first
    # The manifest, the digest book's conditional GET, the changed SKILL.md, and the catalog's read of its head.
    assert counter["GetObject"] <= 4
    assert counter["PutObject"] <= 2  # the manifest and the digest book, each once
    (entry,) = [e for e in changed["skills"] if e["uri"] == "skill://escrituras/hipoteca/SKILL.md"]
    assert entry["frontmatter"] == {"name": "hipoteca", "description": "New"}


@pytest.mark.parametrize(
    "uri",
    [
        "skill://a/../b/SKILL.md",
        "skill://a/./SKILL.md",
        "skill://a//SKILL.md",
        "skill://a/b%2Fc",
        "skill://a/b%5Cc",
        "skill://a/%00",
        "skill://a/",
        "file:///etc/passwd",
        "skill://a?x=1",
    ],
)
def test_bad_skill_uris_are_refused(uri: str) -> None:
    with pytest.raises(InvalidPath):
        parse_uri(uri)


def test_uris_and_cursors_round_trip() -> None:
    segments = ("escrituras", "compraventa", "resources", "plantilla 1 ñ%.pdf")
    assert parse_uri(uri_of(segments)) == segments
    assert decode_cursor(encode_cursor("gen/skill-02")) == "gen/skill-02"
    with pytest.raises(ValueError, match="Invalid cursor"):
        decode_cursor("not-a-cursor")
