"""A `SKILL.md` key ends a skill, whatever it says and whoever else has that id (issue 22, item 2).

Attacks: (a) a shared outer skill must not expose a *disabled* shared nested skill's files when
the user owns a skill with the nested id (exclusion used to be computed per merged-index owner);
(b) a nested folder whose `SKILL.md` does not parse is excluded too (problem entries used to be
dropped from the known set). Each is tried through the agent's file tools, the library's file
listing, the runner's staging, and the MCP server (`skills/get`, `resources/read`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from keylog import KeyLogStore
from mcp.shared.exceptions import MCPError
from mcp_harness import get_skill, put, read_bytes, stdio_session
from runs import ASYNC_RUN, SYNC_RUN

from s3skills import S3Backend
from s3skills.runner.staging import Refused, stage
from s3skills.testing import builders

CANARY = "NESTED-CANARY"

SHARED = {  # (a) the shared library: an outer skill and a disabled skill nested in it
    "shared/org/skills/tools/SKILL.md": builders.skill_md("tools", "Shared tools.", body="TOOLS BODY"),
    "shared/org/skills/tools/notes.md": "TOOLS NOTES",
    "shared/org/skills/tools/inner/SKILL.md": builders.skill_md(
        "inner", "Withdrawn.", body=f"{CANARY} BODY", enabled="false"
    ),
    "shared/org/skills/tools/inner/secret.md": f"{CANARY} SHARED SECRET",
    "shared/org/skills/tools/inner/scripts/go.py": f"print('{CANARY}')",
    # ana owns a skill with the nested id: the merged index says `tools/inner` is hers.
    "users/ana/skills/tools/inner/SKILL.md": builders.skill_md("inner", "Ana's own inner.", body="ANA INNER"),
}

BROKEN = {  # (b) ana's outer skill with a nested folder whose SKILL.md does not parse
    "users/ana/skills/pdf/SKILL.md": builders.skill_md("pdf", "PDF forms.", body="PDF BODY"),
    "users/ana/skills/pdf/guide.md": "PDF GUIDE",
    "users/ana/skills/pdf/scripts/run.py": "print('ok')",
    "users/ana/skills/pdf/broken/SKILL.md": f"no frontmatter at all {CANARY}",
    "users/ana/skills/pdf/broken/secret.md": f"{CANARY} BROKEN SECRET",
    "users/ana/skills/pdf/broken/scripts/go.py": f"print('{CANARY}')",
    "users/ana/skills/pdf/scripts/evil/SKILL.md": "---\nname: [unclosed\n---\n",
    "users/ana/skills/pdf/scripts/evil/go.py": f"print('{CANARY}')",
    # deeper than an id can be: still a SKILL.md key below the outer folder
    "users/ana/skills/pdf/a/b/SKILL.md": builders.skill_md("b", "Deep.", body="DEEP"),
    "users/ana/skills/pdf/a/b/deep.md": f"{CANARY} DEEP SECRET",
}


@pytest.fixture
def store() -> KeyLogStore:
    store = KeyLogStore()
    for key, body in {**SHARED, **BROKEN}.items():
        store.put_object(key, body.encode())
    return store


@pytest.fixture
def backend(store: KeyLogStore) -> S3Backend:
    return S3Backend("memory", store=store, shared_prefix="org")


def _as_ana(op: Any, skills: list[str]) -> Any:
    return SYNC_RUN.invoke(
        {"op": op, "loaded_skills": skills},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )["result"]


def _file_tools(backend: S3Backend, leaf: str, nested: str) -> dict[str, Any]:
    base = f"/skills/{leaf}"
    return {
        "ls": backend.ls(base),
        "ls_nested": backend.ls(f"{base}/{nested}"),
        "read_md": backend.read(f"{base}/{nested}/SKILL.md"),
        "read_secret": backend.read(f"{base}/{nested}/secret.md"),
        "grep": backend.grep(CANARY),
        "grep_in": backend.grep("O", path=base),
        "glob": backend.glob("**", path="/skills"),
        "download": backend.download_files([f"{base}/{nested}/secret.md"]),
        "exists": backend.exists(f"{base}/{nested}"),
    }


def _paths(result: Any) -> set[str]:
    return {m["path"] for m in (result.matches or [])}


def test_a_shared_outer_skill_never_shows_a_disabled_nested_skill_that_the_user_also_has(
    store: KeyLogStore, backend: S3Backend
) -> None:
    skill = _as_ana(lambda: backend.skills.get("tools"), [])
    assert skill.source == "shared"
    store.take()
    got = _as_ana(lambda: _file_tools(backend, "tools", "inner"), ["tools"])
    assert [e["path"] for e in got["ls"].entries] == ["/skills/tools/SKILL.md", "/skills/tools/notes.md"]
    assert not got["ls_nested"].entries
    assert got["read_md"].error == "File '/skills/tools/inner/SKILL.md' not found"
    assert got["read_secret"].error == "File '/skills/tools/inner/secret.md' not found"
    assert got["grep"].matches == []
    assert _paths(got["grep_in"]) == {"/skills/tools/SKILL.md", "/skills/tools/notes.md"}
    assert _paths(got["glob"]) == {"/skills/tools/SKILL.md", "/skills/tools/notes.md"}
    assert [r.error for r in got["download"]] == ["file_not_found"]
    assert got["exists"] is False
    assert CANARY not in repr(got)
    assert not [k for op, k in store.take() if op == "GetObject" and "tools/inner" in k]
    files = _as_ana(lambda: backend.skills.files("tools"), [])
    assert sorted(f.path for f in files) == ["SKILL.md", "notes.md"]
    many = _as_ana(lambda: backend.skills.files_many(["tools", "tools/inner"]), [])
    assert sorted(f.path for f in many["tools"]) == ["SKILL.md", "notes.md"]
    assert all(f.key.startswith("users/ana/") for f in many["tools/inner"])


def test_a_nested_folder_whose_skill_md_does_not_parse_still_ends_the_outer_skill(
    store: KeyLogStore, backend: S3Backend
) -> None:
    problems = _as_ana(lambda: backend.skills.problems(), [])
    assert problems == [] or all(p.skill_id != "pdf" for p in problems)
    got = _as_ana(lambda: _file_tools(backend, "pdf", "broken"), ["pdf"])
    assert sorted(e["path"] for e in got["ls"].entries) == [
        "/skills/pdf/SKILL.md",
        "/skills/pdf/a/",
        "/skills/pdf/guide.md",
        "/skills/pdf/scripts/",
    ]
    assert not got["ls_nested"].entries
    assert got["read_md"].error == "File '/skills/pdf/broken/SKILL.md' not found"
    assert got["read_secret"].error == "File '/skills/pdf/broken/secret.md' not found"
    assert got["grep"].matches == []
    assert _paths(got["glob"]) == {"/skills/pdf/SKILL.md", "/skills/pdf/guide.md", "/skills/pdf/scripts/run.py"}
    assert got["exists"] is False
    assert CANARY not in repr(got)
    deep = _as_ana(lambda: backend.read("/skills/pdf/a/b/deep.md"), ["pdf"])
    assert deep.error == "File '/skills/pdf/a/b/deep.md' not found"
    files = _as_ana(lambda: backend.skills.files("pdf"), [])
    assert sorted(f.path for f in files) == ["SKILL.md", "guide.md", "scripts/run.py"]
    opened = _as_ana(lambda: backend.skills.files_many(["pdf"]), [])
    assert sorted(f.path for f in opened["pdf"]) == ["SKILL.md", "guide.md", "scripts/run.py"]


async def test_staging_fetches_no_script_of_a_nested_folder_that_does_not_parse_or_is_shadowed(
    backend: S3Backend, tmp_path: Path
) -> None:
    async def attempt(skill_id: str, script: str) -> str:
        try:
            await stage(backend.skills, skill_id, tuple(script.split("/")), tmp_path, max_files=10, max_bytes=1 << 20)
        except Refused as exc:
            return str(exc)
        return "staged"

    for skill_id, script in (("pdf", "evil/go.py"), ("pdf", "evil/SKILL.md")):
        out = await ASYNC_RUN.ainvoke(
            {"op": lambda s=skill_id, p=script: attempt(s, p)},
            context={"user_id": "ana"},
            config={"configurable": {"thread_id": "t1"}},
        )
        assert "not found" in out["result"] or "only Python" in out["result"], out["result"]
    assert _staged(tmp_path) == []
    out = await ASYNC_RUN.ainvoke(
        {"op": lambda: attempt("pdf", "run.py")},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )
    assert out["result"] == "staged"
    assert _staged(tmp_path) == ["scripts/run.py"]


def _staged(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


async def test_mcp_get_and_read_never_serve_a_nested_folder_that_does_not_parse_or_is_shadowed(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    for key, body in {**SHARED, **BROKEN}.items():
        put(s3_client, bucket, key, body.encode())
    async with stdio_session(bucket, moto_endpoint, "ana", "--shared-prefix", "org") as session:
        for outer, nested in (("tools", "inner"), ("pdf", "broken")):
            entry = await get_skill(session, f"skill://{outer}/SKILL.md")
            uris = [r["uri"] for r in entry.get("resources", [])]
            # The outer manifest may link a nested skill the user can load (ana's own `tools/inner`,
            # whose SKILL.md is hers), never a file of the nested folder nor a folder that does not parse.
            linked = f"skill://{outer}/{nested}/SKILL.md" if outer == "tools" else None
            assert not [u for u in uris if (f"/{nested}/" in u and u != linked) or "/a/b/" in u], uris
            assert CANARY not in repr(entry)
            for path in (f"{nested}/secret.md", f"{nested}/scripts/go.py", "a/b/deep.md"):
                with pytest.raises(MCPError):
                    await read_bytes(session, f"skill://{outer}/{path}")
        with pytest.raises(MCPError):
            await read_bytes(session, "skill://pdf/broken/SKILL.md")
        # `skill://tools/inner/...` names ana's own skill, served from her library only
        assert b"ANA INNER" in await read_bytes(session, "skill://tools/inner/SKILL.md")


def test_a_fresh_reader_of_the_manifest_still_ends_a_skill_at_a_skill_md_deeper_than_an_id(store: KeyLogStore) -> None:
    writer = S3Backend("memory", store=store, shared_prefix="org")
    _as_ana(lambda: writer.skills.index(), [])  # builds the manifest from a LIST
    writer.skills.flush()  # ... and stores it after the answer: wait for it, as a CLI command does
    reader = S3Backend("memory", store=store, shared_prefix="org")  # another process: the manifest only
    store.take()
    got = _as_ana(lambda: reader.read("/skills/pdf/a/b/deep.md"), ["pdf"])
    assert got.error == "File '/skills/pdf/a/b/deep.md' not found"
    assert not [op for op, _ in store.take() if op.startswith("List")]  # no LIST needed to know it
