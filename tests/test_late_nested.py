"""A nested skill written after the index was read is still another skill, on every read path.

The attack (issue 30): once a reader's index is warm, a disabled nested skill is written into
an enabled one (`tools/inner/SKILL.md` with `enabled: false`, plus `inner/secret.md`) straight
to the bucket (no push, so no manifest update). The MCP tools face used to serve
`read_skill_file(name="tools", path="inner/secret.md")` and the withdrawn `SKILL.md` until the
next verify (up to 300 s), trusting its cached index. Every path now asks the bucket
(`s3skills.skills.anested_now`): the tools face, the library's `aopen` (used by `read_skill`,
`use_skill`'s files and the runner's staging), the agent's file tools, and MCP resources.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_harness import put
from runs import ASYNC_RUN, SYNC_RUN

from s3skills import S3Backend
from s3skills.config import Config
from s3skills.errors import NotFound
from s3skills.runner.staging import Refused, stage
from s3skills.serve.mcp import aclose_server, library_source
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary, anested_now
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md

CANARY = "LATE-NESTED-CANARY"
OUTER = {
    "tools/SKILL.md": skill_md("tools", "Shared tools for everyone.", body="TOOLS BODY"),
    "tools/notes.md": "TOOLS NOTES",
    "tools/scripts/run.py": "print('ok')",
}
LATE = {
    "tools/inner/SKILL.md": skill_md("inner", "Withdrawn.", body=f"{CANARY} BODY", enabled="false"),
    "tools/inner/secret.md": f"{CANARY} SECRET",
    "tools/inner/scripts/go.py": f"print('{CANARY}')",
}


@contextlib.asynccontextmanager
async def _tools_face(bucket: str, endpoint: str, prefix: str) -> AsyncIterator[Client]:
    shared = {"shared_prefix": "org"} if prefix.startswith("shared/") else {}
    skills = SkillsServer(library_source(bucket, endpoint_url=endpoint, **shared), user_id="ana", tools=True)
    try:
        async with Client(skills.server, mode="legacy") as client:
            yield client
    finally:
        await aclose_server(skills)


@pytest.mark.parametrize("prefix", ["users/ana/skills/", "shared/org/skills/"], ids=["own", "shared"])
async def test_the_tools_face_refuses_a_nested_skill_written_after_its_index_was_warm(
    bucket: str, moto_endpoint: str, s3_client: Any, prefix: str
) -> None:
    for key, body in OUTER.items():
        put(s3_client, bucket, prefix + key, body)
    async with _tools_face(bucket, moto_endpoint, prefix) as client:
        before = await client.call_tool("read_skill_file", {"name": "tools", "path": "notes.md"})
        assert before.content[0].text == "TOOLS NOTES"  # type: ignore[union-attr]
        for key, body in LATE.items():  # written behind the warm index's back
            put(s3_client, bucket, prefix + key, body)
        for path in ("inner/secret.md", "inner/SKILL.md", "inner/scripts/go.py"):
            result = await client.call_tool("read_skill_file", {"name": "tools", "path": path})
            assert result.is_error, path
            assert CANARY not in repr(result)
        loaded = await client.call_tool("load_skill", {"name": "tools"})
        assert CANARY not in repr(loaded)  # its file list comes from a listing, which ends at inner/
        still = await client.call_tool("read_skill_file", {"name": "tools", "path": "scripts/run.py"})
        assert not still.is_error


def _library(store: MemoryObjectStore) -> SkillLibrary:
    return SkillLibrary(store, Config(catalog_ttl=3600))  # the index is trusted for an hour


async def test_the_librarys_open_asks_the_bucket_not_the_index() -> None:
    store = MemoryObjectStore()
    for key, body in OUTER.items():
        store.put_object("users/ana/skills/" + key, body)
    library = _library(store)
    tenant = Tenant("ana", "t1")
    assert (await library.aopen("tools", "notes.md", tenant=tenant)).data == b"TOOLS NOTES"
    for key, body in LATE.items():
        store.put_object("users/ana/skills/" + key, body)
    for path in ("inner/secret.md", "inner/SKILL.md"):
        with pytest.raises(NotFound):
            await library.aopen("tools", path, tenant=tenant)
    assert (await library.aopen("tools", "scripts/run.py", tenant=tenant)).data == b"print('ok')"


async def test_staging_refuses_a_late_nested_skills_script(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    for key, body in OUTER.items():
        store.put_object("users/ana/skills/" + key, body)
    backend = S3Backend("memory", store=store, catalog_ttl=3600)

    async def attempt(script: str) -> str:
        try:
            await stage(backend.skills, "tools", tuple(script.split("/")), tmp_path, max_files=10, max_bytes=1 << 20)
        except Refused as exc:
            return str(exc)
        return "staged"

    async def run(script: str) -> str:
        out = await ASYNC_RUN.ainvoke(
            {"op": lambda: attempt(script)}, context={"user_id": "ana"}, config={"configurable": {"thread_id": "t"}}
        )
        return str(out["result"])

    assert await run("run.py") == "staged"
    for key, body in LATE.items():
        store.put_object("users/ana/skills/" + key, body)
    refused = await run("inner/go.py")
    assert "not found" in refused or "only Python" in refused, refused
    assert _staged(tmp_path) == ["scripts/run.py"]


def _staged(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_the_agents_file_tools_refuse_a_late_nested_skill() -> None:
    store = MemoryObjectStore()
    for key, body in OUTER.items():
        store.put_object("users/ana/skills/" + key, body)
    backend = S3Backend("memory", store=store, catalog_ttl=3600)

    def as_ana(op: Any) -> Any:
        return SYNC_RUN.invoke(
            {"op": op, "loaded_skills": ["tools"]},
            context={"user_id": "ana"},
            config={"configurable": {"thread_id": "t1"}},
        )["result"]

    assert as_ana(lambda: backend.read("/skills/tools/notes.md")).error is None
    for key, body in LATE.items():
        store.put_object("users/ana/skills/" + key, body)
    got = as_ana(
        lambda: {
            "read": backend.read("/skills/tools/inner/secret.md"),
            "read_md": backend.read("/skills/tools/inner/SKILL.md"),
            "grep": backend.grep(CANARY),
            "glob": backend.glob("**", path="/skills/tools"),
            "glob_in": backend.glob("**", path="/skills/tools/inner"),
        }
    )
    assert got["read"].error == "File '/skills/tools/inner/secret.md' not found"
    assert got["read_md"].error == "File '/skills/tools/inner/SKILL.md' not found"
    assert not got["grep"].matches
    assert {m["path"] for m in got["glob"].matches} == {
        "/skills/tools/SKILL.md",
        "/skills/tools/notes.md",
        "/skills/tools/scripts/run.py",
    }
    assert not got["glob_in"].matches
    assert CANARY not in repr(got)


class _Heads(MemoryObjectStore):
    """Counts the existence checks a read makes."""

    def __init__(self) -> None:
        super().__init__()
        self.heads: list[str] = []

    async def aexists(self, key: str) -> bool:
        self.heads.append(key)
        return await super().aexists(key)


async def test_a_file_costs_one_existence_check_per_folder_level_and_none_at_the_top() -> None:
    store = _Heads()
    assert await anested_now(store, "p/", ("notes.md",)) is False
    assert store.heads == []
    assert await anested_now(store, "p/", ("a", "b", "c.md")) is False
    assert sorted(store.heads) == ["p/a/SKILL.md", "p/a/b/SKILL.md"]
    store.put_object("p/a/b/SKILL.md", "x")
    assert await anested_now(store, "p/", ("a", "b", "c.md")) is True


async def test_a_path_too_deep_is_refused_before_any_request() -> None:
    from s3skills.errors import InvalidPath

    store = _Heads()
    with pytest.raises(InvalidPath, match="at most 16 folders"):
        await anested_now(store, "p/", (*"abcdefghijklmnopq", "x.md"))
    assert store.heads == []
