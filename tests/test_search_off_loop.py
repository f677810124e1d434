"""Ranking a search runs off the I/O loop every tenant's calls share (issue 30, fair share)."""

from __future__ import annotations

import threading
from typing import Any

from s3skills.config import Config
from s3skills.skills import LexicalRanker, SkillLibrary
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md


class _ThreadNoting:
    """A real lexical ranker that notes the thread each ranking ran in."""

    def __init__(self) -> None:
        self.inner = LexicalRanker()
        self.threads: list[int] = []

    def rank(self, query: str, skills: Any) -> Any:
        self.threads.append(threading.get_ident())
        return self.inner.rank(query, skills)


def test_a_search_ranks_off_the_shared_io_loop() -> None:
    """`list_skills` (agent and MCP) ranks through `SkillLibrary.asearch`: never on the loop every tenant shares."""
    from s3skills._loop import io_loop, run_sync

    store = MemoryObjectStore()
    for name in ("pdf", "deploy", "docs"):
        store.put_object(f"users/ana/skills/{name}/SKILL.md", skill_md(name, f"Works with {name} files."))
    library = SkillLibrary(store, Config())
    ranker = _ThreadNoting()
    page = library.search("pdf files", tenant=Tenant("ana", "t1"), ranker=ranker)
    assert page.skills[0].id == "pdf"

    async def loop_thread() -> int:
        return threading.get_ident()

    io_thread = run_sync(loop_thread())
    assert io_loop().is_running()
    assert ranker.threads
    assert all(t not in (io_thread, threading.get_ident()) for t in ranker.threads)
