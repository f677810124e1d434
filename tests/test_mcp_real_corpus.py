"""MCP's `skills/list` on real repositories pushed as they are (issue 31).

A repository of the real-skills corpus is pushed from its root with no flag (what the hosts
load is stored), then an in-process MCP client pages through `skills/list`: every skill the
extension can serve under its name is listed, every other one is left out, reported once in
the server's log with the count, refused by `skills/get` with the reason, and still served
by the tools face (`load_skill`). The expected sets come from the pushed `SKILL.md` files and
the one naming rule (`s3skills.skills.format.naming.unservable_reason`), not from the server.
"""

from __future__ import annotations

import logging

import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp_harness import ANY, GetSkill, GetSkillParams, ListSkills

from s3skills.ids import SKILL_FILE
from s3skills.serve.mcp import aclose_server, library_source
from s3skills.serve.server import SkillsServer
from s3skills.skills import parse_skill_md
from s3skills.skills.format.naming import unservable_reason
from s3skills.storage import S3ObjectStore
from s3skills.testing import SeaweedBucket
from s3skills.testing.corpus import real_repository
from s3skills.transfer import push_tree

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["github/awesome-copilot", "langchain-ai/deepagents"])
async def test_skills_list_names_every_servable_skill_of_a_pushed_repository_and_reports_the_rest(
    name: str, seaweed_bucket: SeaweedBucket, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # SeaweedFS, a server in a process of its own: pushing awesome-copilot to the in-process moto
    # server took 134 s, and moto holds gigabytes for pushes of this size (test_push_real_corpus).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_bucket.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_bucket.secret_key)
    bucket, endpoint = seaweed_bucket.bucket, seaweed_bucket.endpoint_url
    repo = real_repository(name)
    store = S3ObjectStore(bucket, endpoint_url=endpoint)
    try:
        report = push_tree(store, repo.root, "users/ana/skills/")  # the default layout, no flag
    finally:
        await store.aclose()
    names = {}
    for skill_id, folder in report.mapping.items():
        data = (repo.root / folder / SKILL_FILE if folder != "." else repo.root / SKILL_FILE).read_bytes()
        names[skill_id] = parse_skill_md(data, folder=skill_id.rsplit("/", 1)[-1]).metadata.name
    unservable = {sid: why for sid, n in names.items() if (why := unservable_reason(sid, n)) is not None}
    servable = set(names) - set(unservable)
    assert servable  # the corpus has both kinds: the test checks something either way

    caplog.set_level(logging.WARNING, logger="s3skills.serve.server")
    skills = SkillsServer(library_source(bucket, endpoint_url=endpoint), user_id="ana", tools=True, page_size=100)
    listed: list[str] = []
    refusals: dict[str, str] = {}
    try:
        async with Client(skills.server, mode="legacy") as client:
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await client.session.send_request(ListSkills(params=params), ANY)
                listed += [e["uri"].removeprefix("skill://").removesuffix("/SKILL.md") for e in page["skills"]]
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            for skill_id in sorted(unservable):
                with pytest.raises(MCPError) as refused:
                    await client.session.send_request(
                        GetSkill(params=GetSkillParams(uri=f"skill://{skill_id}/SKILL.md")), ANY
                    )
                refusals[skill_id] = refused.value.message
            for skill_id in sorted(unservable)[:3]:  # still served by the tools face
                loaded = await client.call_tool("load_skill", {"name": skill_id})
                assert not loaded.is_error, loaded.content
    finally:
        await aclose_server(skills)

    assert len(listed) == len(set(listed))  # no page repeats a skill
    assert set(listed) == servable
    assert set(refusals) == set(unservable)
    for skill_id, message in refusals.items():
        assert unservable[skill_id].split(";")[0] in message
    reports = [r.getMessage() for r in caplog.records if "not listed by skills/list" in r.getMessage()]
    if unservable:
        assert len(reports) == 1
        assert reports[0].startswith(f"{len(unservable)} of {len(names)} skills of ana are not listed")
        report_lines = reports[0].splitlines()
        assert len(report_lines) <= 1 + 10 + 1  # the count, the first 10 skills, how many more
        if len(unservable) > 10:
            assert report_lines[-1] == f"  … and {len(unservable) - 10} more; `s3skills mcp --check` lists them all"
    else:
        assert reports == []
    logged = [line for r in caplog.records for line in r.getMessage().splitlines()]
    assert [line for line in logged if len(line) > 200] == []
