"""Bounded work per call (issue 9, items 7 to 10): grep, catalog parsing, body cache, sizes.

Work is asserted as requests and bytes fetched (a `KeyLogStore`), never as time or RSS.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from keylog import KeyLogStore
from langchain_core.messages import AIMessage, ToolMessage
from runs import SYNC_RUN

from s3skills import S3Backend, create_skills_agent
from s3skills.aio import run_sync
from s3skills.cli import main
from s3skills.config import Limits
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.tenancy import Tenant
from s3skills.testing import ScriptedChatModel, tool_call
from s3skills.transfer import PushRefused, push_tree

MB = 1_000_000
MiB = 1024 * 1024


def as_ana(op: Any, *, skills: list[str] | None = None) -> Any:
    return SYNC_RUN.invoke(
        {"op": op, "loaded_skills": skills or []},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )["result"]


# --- 7. grep --------------------------------------------------------------------------------------


@pytest.fixture
def big_workspace() -> KeyLogStore:
    store = KeyLogStore()
    for i in range(8):
        store.put_object(f"users/ana/threads/t1/big-{i}.txt", b"a\n" * MB)  # 2 MB of "a\n"
    return store


def test_grep_stops_at_max_count_and_fetches_far_fewer_than_all_files(big_workspace: KeyLogStore) -> None:
    backend = S3Backend("memory", store=big_workspace)
    big_workspace.take()
    result = as_ana(lambda: backend.grep("a", max_count=1000))
    fetched = big_workspace.bytes_fetched
    gets = [k for op, k in big_workspace.take() if op == "GetObject"]
    assert result.error is None  # the caller's own max_count: deepagents' note says so
    assert result.truncated is True
    assert len(result.matches) == 1000
    assert result.matches[0] == {"path": "/workspace/big-0.txt", "line": 1, "text": "a"}
    assert result.matches[-1]["line"] == 1000
    assert len(gets) <= 2, gets
    assert fetched <= 2 * 2 * MB  # of 16 MB


def test_exactly_max_count_matches_is_a_complete_answer() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/threads/t1/a.txt", "x\n" * 5)
    backend = S3Backend("memory", store=store)
    result = as_ana(lambda: backend.grep("x", max_count=5))
    assert len(result.matches) == 5
    assert result.truncated is False


def test_grep_caps_bytes_scanned_and_says_how_to_narrow_the_search() -> None:
    store = KeyLogStore()
    for i in range(8):
        store.put_object(f"users/ana/threads/t1/log-{i}.txt", b"no match here\n" * 70_000)  # ~1 MB
    backend = S3Backend("memory", store=store, limits=Limits(max_grep_scan_bytes=3 * MB))
    store.take()
    result = as_ana(lambda: backend.grep("needle"))
    fetched = store.bytes_fetched
    assert result.matches == []
    assert result.truncated is True
    assert "No matches in the 3 file(s) searched" in result.error
    assert "5 file(s) were not searched, from '/workspace/log-3.txt' on" in result.error
    assert "narrower path or pass a glob" in result.error
    assert fetched <= 3 * MB


def test_grep_skips_files_over_the_limit_and_names_them() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/threads/t1/huge.log", b"needle\n" * (3 * MiB // 7))
    store.put_object("users/ana/threads/t1/small.md", b"a needle\n")
    backend = S3Backend("memory", store=store)
    store.take()
    result = as_ana(lambda: backend.grep("needle"))
    assert result.matches == [{"path": "/workspace/small.md", "line": 1, "text": "a needle"}]
    assert result.truncated is True
    assert "1 file(s) over 2.0 MiB were not searched ('/workspace/huge.log')" in result.error
    assert "read_file" in result.error
    assert not [k for op, k in store.take() if op == "GetObject" and k.endswith("huge.log")]


def test_grep_stops_at_the_librarys_match_cap_and_says_so() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/threads/t1/a.txt", "hit\n" * 50)
    backend = S3Backend("memory", store=store, limits=Limits(max_grep_matches=10))
    result = as_ana(lambda: backend.grep("hit", max_count=100))
    assert len(result.matches) == 10
    assert "stopped at 10 matches, the most one search returns" in result.error
    # The seeds' alias keeps the partial matches.
    assert len(as_ana(lambda: backend.grep_raw("hit"))) == 10


def test_the_model_sees_the_narrowing_message_with_the_partial_matches() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/threads/t1/huge.log", b"needle\n" * (3 * MiB // 7))
    store.put_object("users/ana/threads/t1/small.md", b"a needle\n")
    backend = S3Backend("memory", store=store)
    model = ScriptedChatModel(
        steps=[AIMessage(content="", tool_calls=[tool_call("grep", {"pattern": "needle", "output_mode": "content"})])]
    )
    agent = create_skills_agent(model, backend)
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "find it"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )
    text = next(m.text for m in out["messages"] if isinstance(m, ToolMessage))
    assert "were not searched ('/workspace/huge.log')" in text
    assert "/workspace/small.md" in text
    assert "a needle" in text


# --- 8. catalog parsing off the loop, caps ----------------------------------------------------


def _fat_skill(i: int, note_words: int) -> bytes:
    return f"---\nname: s{i:02d}\ndescription: Skill {i}.\nnotes: {'word ' * note_words}\n---\nBody {i}\n".encode()


def test_indexing_big_frontmatters_lets_another_tenants_ls_run_meanwhile() -> None:
    store = KeyLogStore()
    for i in range(60):
        store.put_object(f"users/ana/skills/s{i:02d}/SKILL.md", _fat_skill(i, 6_000))  # ~30 KB of frontmatter each
    store.put_object("users/bob/threads/t9/note.md", b"bob")
    ana = S3Backend("memory", store=store, user_id="ana")
    bob = S3Backend("memory", store=store, user_id="bob", thread_id="t9")
    order: list[str] = []

    async def index() -> None:
        skills = await ana.skills.aindex(tenant=Tenant(user_id="ana"))
        assert len(skills) == 60
        order.append("index done")

    async def other_tenant(started: asyncio.Task[None]) -> None:
        while not started.done():
            result = await bob.als("/workspace")
            assert [e["path"] for e in result.entries] == ["/workspace/note.md"]
            order.append("ls")
            await asyncio.sleep(0)

    async def both() -> None:
        task = asyncio.ensure_future(index())
        await other_tenant(task)
        await task

    run_sync(both())
    done = order.index("index done")
    # Every ls before "index done" completed while the index was being built; if parsing
    # held the loop, only the few before the first parse could.
    assert order[:done].count("ls") >= 20, order[: done + 1].count("ls")
    problems = ana.skills.problems(Tenant(user_id="ana"))
    assert problems == []


def test_oversized_frontmatter_and_skills_past_the_cap_are_reported_as_problems() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/skills/fat/SKILL.md", _fat_skill(0, 14_000))  # ~70 KB frontmatter
    for i in range(1, 8):
        store.put_object(f"users/ana/skills/s{i:02d}/SKILL.md", _fat_skill(i, 3))
    backend = S3Backend("memory", store=store, user_id="ana", limits=Limits(max_skills_per_library=5))
    ids = [s.id for s in backend.skills.index()]
    problems = {(p.skill_id, p.reason) for p in backend.skills.problems()}
    assert ids == ["s01", "s02", "s03", "s04"]  # the first 5 ids, one of them invalid
    assert ("fat", "the frontmatter is over 65536 bytes") in problems
    assert ("*", "3 skills were not indexed: the limit is 5 per library") in problems


# --- 9. the body cache is bounded by bytes ------------------------------------------------------


def test_preloading_30_bodies_of_3_mib_keeps_the_body_cache_within_its_budget() -> None:
    store = KeyLogStore()
    for i in range(30):
        body = f"---\nname: b{i:02d}\ndescription: Big {i}.\n---\n".encode() + b"x" * (3 * MiB)
        store.put_object(f"users/ana/skills/b{i:02d}/SKILL.md", body)
    limits = Limits(body_cache_bytes=16 * MiB)
    backend = S3Backend("memory", store=store, limits=limits)
    middleware = SkillsPromptMiddleware(backend, mode="preload", instructions_budget_chars=10_000)
    catalog = backend.skills.catalog
    seen: list[int] = []
    original = catalog.abody

    async def abody(entry: Any) -> tuple[str, str]:
        body = await original(entry)
        seen.append(catalog.body_cache_bytes)
        return body

    catalog.abody = abody  # type: ignore[method-assign]  # observe the cache after every body
    for _ in range(2):
        prompt = as_ana(lambda: asyncio.run(middleware.build_prompt({})))
        assert len(prompt) < 20_000
    assert len(seen) == 60
    assert max(seen) <= limits.body_cache_bytes
    assert max(seen) >= limits.body_cache_bytes - 4 * MiB  # the budget is used, not bypassed


# --- 10. one size policy --------------------------------------------------------------------


def test_a_write_over_the_file_limit_is_refused_and_nothing_is_stored() -> None:
    store = KeyLogStore()
    backend = S3Backend("memory", store=store)
    content = "x" * (11 * MiB)
    results = as_ana(
        lambda: [
            backend.write("/workspace/big.txt", content),
            backend.upload_files([("/workspace/big.bin", content.encode())])[0],
        ]
    )
    assert results[0].error == (
        f"Error: File '/workspace/big.txt' is too large to write ({11 * MiB} bytes; files are limited to "
        f"{10 * MiB} bytes)."
    )
    assert results[1].error is not None
    assert "too large" in results[1].error
    assert store.keys() == []


def test_an_object_over_the_limit_written_by_another_tool_is_refused_on_read_with_its_size() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/threads/t1/big.txt", "x" * (11 * MiB))  # out of band: no s3skills writer
    backend = S3Backend("memory", store=store)
    read, downloaded = as_ana(
        lambda: [backend.read("/workspace/big.txt"), backend.download_files(["/workspace/big.txt"])[0]]
    )
    said = f"the object is {11 * MiB} bytes; the limit is {10 * MiB}"
    assert read.error == f"File '/workspace/big.txt' is too large to read (get: {said})."
    assert downloaded.error == f"File '/workspace/big.txt' is too large to download (get: {said})."
    assert store.bytes_fetched == 0  # refused from the object's size, its bytes never held


def test_an_edit_that_grows_a_file_past_the_limit_is_refused_and_the_file_kept() -> None:
    store = KeyLogStore()
    store.put_object("users/ana/threads/t1/a.txt", "seed")
    backend = S3Backend("memory", store=store)
    result = as_ana(lambda: backend.edit("/workspace/a.txt", "seed", "y" * (10 * MiB + 1)))
    assert "is too large to edit" in result.error
    assert run_sync(store.aget("users/ana/threads/t1/a.txt")).data == b"seed"


@pytest.fixture
def tree_with_a_20mb_file(tmp_path: Path) -> Path:
    skill = tmp_path / "lib" / "pdf"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf\ndescription: PDF.\n---\nBody\n")
    with (skill / "big.bin").open("wb") as handle:
        handle.truncate(20 * MB)  # sparse: no 20 MB written to disk
    return tmp_path / "lib"


def test_push_of_a_20mb_file_is_refused_with_its_size_and_writes_nothing(tree_with_a_20mb_file: Path) -> None:
    store = KeyLogStore()
    with pytest.raises(PushRefused) as refused:
        push_tree(store, tree_with_a_20mb_file, "users/ana/skills/", strict=True)
    reasons = {item.path: item.reason for item in refused.value.report.refused}
    assert reasons == {"pdf/big.bin": f"too large: the file is 19.1 MiB ({20 * MB} bytes); the limit is 10.0 MiB"}
    assert store.keys() == []
    assert [op for op, _ in store.take() if op == "PutObject"] == []
    # Without --strict the skill is pushed and the file left out, named with its size.
    report = push_tree(store, tree_with_a_20mb_file, "users/ana/skills/")
    assert {item.path for item in report.refused} == {"pdf/big.bin"}
    assert [k for k in store.keys() if "/skills/" in k] == ["users/ana/skills/pdf/SKILL.md"]


def test_validate_reports_the_20mb_file_with_its_size(
    tree_with_a_20mb_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--json", "validate", str(tree_with_a_20mb_file)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert f"the file is 19.1 MiB ({20 * MB} bytes)" in json.dumps(out)


# --- listing and glob limits -----------------------------------------------------------------------


def test_ls_of_a_folder_over_the_listing_limit_says_how_to_narrow_and_stops_listing() -> None:
    store = KeyLogStore()
    for i in range(30):
        store.put_object(f"users/ana/threads/t1/many/f{i:03d}.md", b"x")
    backend = S3Backend("memory", store=store, limits=Limits(max_ls_entries=10))
    store.take()
    result = as_ana(lambda: backend.ls("/workspace/many"))
    assert result.entries is None
    assert result.error is not None
    assert "more than 10 entries" in result.error
    assert "glob" in result.error
    ok = as_ana(lambda: backend.ls("/workspace"))
    assert [e["path"] for e in ok.entries] == ["/workspace/many/"]


def test_glob_returns_at_most_its_limit_and_says_the_answer_is_partial() -> None:
    store = KeyLogStore()
    for i in range(30):
        store.put_object(f"users/ana/threads/t1/f{i:03d}.md", b"x")
    backend = S3Backend("memory", store=store, limits=Limits(max_glob_results=7))
    result = as_ana(lambda: backend.glob("*.md", "/workspace"))
    assert len(result.matches) == 7
    assert result.truncated is True
    assert result.truncation_reason == "budget"


def test_the_model_sees_that_a_glob_was_cut_short() -> None:
    store = KeyLogStore()
    for i in range(12):
        store.put_object(f"users/ana/threads/t1/f{i:03d}.md", b"x")
    backend = S3Backend("memory", store=store, limits=Limits(max_glob_results=5))
    call = tool_call("glob", {"pattern": "*.md", "path": "/workspace"})
    model = ScriptedChatModel(steps=[AIMessage(content="", tool_calls=[call])])
    agent = create_skills_agent(model, backend)
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "hola"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "glob"]
    assert "incomplete" in str(message.content)
