"""Requests of a scripted agent run over one `S3Backend` serving many tenants (issue 21).

The run is `bench/tenants.py`'s: the skills index before each of four model calls, load a
skill and read its `SKILL.md`, read a workspace file, write one and read it back, grep the
run's folder. Counts come from `RequestCounter` on a `MemoryObjectStore`; the catalog's
clock is a number the test moves, so no count depends on how fast the machine is.

With the defaults, the user's own library is asked on every query (1 conditional GET of its
manifest) and the shared library once per `SHARED_CATALOG_TTL` window, whoever asks.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from s3skills import S3Backend
from s3skills._loop import run_sync
from s3skills.config import SHARED_CATALOG_TTL, Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.storage import RequestCounter
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore

LAYOUT = KeyLayout()
SHARED = "company"
USERS = 4
SKILLS = 3
NEEDLE = "needle-7f3a"


class RunState(TypedDict, total=False):
    run: int


class RunContext(TypedDict, total=False):
    user_id: str


def skill_md(name: str, text: str = "Do it carefully.") -> str:
    return f"---\nname: {name}\ndescription: Use it for {name}.\n---\n\n# {name}\n\n{text}\n"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def fill() -> MemoryObjectStore:
    """Users' libraries, a shared one and workspaces, each library with its manifest (as after a push)."""
    store = MemoryObjectStore()
    for s in range(SKILLS):
        store.put_object(f"{LAYOUT.shared_prefix(SHARED)}common/shared-{s}/SKILL.md", skill_md(f"shared-{s}"))
    for u in range(USERS):
        for s in range(SKILLS):
            store.put_object(f"{LAYOUT.user_prefix(f'user-{u}')}mine/skill-{s}/SKILL.md", skill_md(f"skill-{s}"))
        for f in range(2):
            store.put_object(f"{LAYOUT.workspace_prefix(f'user-{u}', 't0')}notes/file-{f}.md", f"x {NEEDLE}\n")
    for u in range(USERS):
        lib = SkillLibrary(store, Config(layout=LAYOUT, shared_library=SHARED), tenant=lambda u=u: Tenant(f"user-{u}"))
        lib.index()
        lib.flush()
    return store


def backend_on(store: MemoryObjectStore, clock: Clock, **options: Any) -> tuple[S3Backend, RequestCounter]:
    backend = S3Backend("memory", store=store, layout=LAYOUT, shared_prefix=SHARED, **options)
    backend.skills.catalog.clock = clock
    counter = RequestCounter()
    store.add_request_hook(counter)
    return backend, counter


async def scripted_run(backend: S3Backend, run: int) -> None:
    """One agent turn's backend calls (bench/tenants.py), for the user of this context."""
    await backend.skills.aindex()
    wanted = f"mine/skill-{run % SKILLS}"
    assert await backend.aload_skill(wanted) == wanted
    assert "carefully" in (await backend.aload_skill_content(wanted) or "")
    await backend.skills.aindex()
    assert not (await backend.aread(f"/workspace/notes/file-{run % 2}.md")).error
    assert not (await backend.awrite(f"/workspace/runs/{run}/out.md", f"run {run} {NEEDLE}\n")).error
    await backend.skills.aindex()
    assert not (await backend.aread(f"/workspace/runs/{run}/out.md")).error
    found = await backend.agrep(NEEDLE, f"/workspace/runs/{run}/")
    assert not getattr(found, "error", None)
    await backend.skills.aindex()


def runs(backend: S3Backend, numbers: range) -> None:
    """Scripted runs one after another, each a LangGraph run whose context names its user."""

    async def node(state: RunState) -> RunState:
        await scripted_run(backend, state["run"])
        return {}

    graph = StateGraph(RunState, context_schema=RunContext)
    graph.add_node("run", node)
    graph.add_edge(START, "run")
    graph.add_edge("run", END)
    compiled = graph.compile()
    for n in numbers:
        config: Any = {"configurable": {"thread_id": "t0"}}
        run_sync(compiled.ainvoke({"run": n}, config=config, context={"user_id": f"user-{n % USERS}"}))


def test_a_scripted_run_costs_twelve_requests_with_the_default_settings() -> None:
    store = fill()
    clock = Clock()
    backend, counter = backend_on(store, clock)
    runs(backend, range(USERS * SKILLS))  # a server's warm state: libraries read, each SKILL.md body cached
    counter.reset()
    runs(backend, range(USERS * SKILLS, USERS * SKILLS + 40))
    # 6 conditional GETs of the user's manifest (4 indexes, the load, the SKILL.md read),
    # none of the shared one (inside its window), ListObjectVersions, read, write, re-read,
    # grep's LIST and GET: 12 (18 when the shared library was asked each time too).
    assert counter.counts == {"GetObject": 9 * 40, "ListObjectVersions": 40, "PutObject": 40, "ListObjectsV2": 40}
    assert counter.total == 12 * 40
    backend.close()


class KeyLog:
    """The key of every GET the store is asked for (its get methods wrapped, then restored)."""

    def __init__(self, store: MemoryObjectStore) -> None:
        self.store = store
        self.keys: list[str] = []
        for name in ("aget", "aget_range"):
            setattr(store, name, self._wrap(getattr(store, name)))

    def _wrap(self, method: Any) -> Any:
        async def wrapped(key: str, *args: Any, **kwargs: Any) -> Any:
            self.keys.append(key)
            return await method(key, *args, **kwargs)

        return wrapped

    def close(self) -> None:
        for name in ("aget", "aget_range"):
            delattr(self.store, name)


def test_the_shared_library_costs_one_request_per_window_however_many_tenants_ask() -> None:
    store = fill()
    clock = Clock()
    backend, _ = backend_on(store, clock)
    runs(backend, range(USERS))
    shared_key = LAYOUT.manifest_key(LAYOUT.shared_prefix(SHARED))
    user_key = LAYOUT.manifest_key(LAYOUT.user_prefix("user-0"))
    log = KeyLog(store)
    runs(backend, range(USERS, USERS + 20))
    assert log.keys.count(shared_key) == 0
    assert log.keys.count(user_key) == 6 * 5  # user-0 ran 5 of the 20 runs and asked 6 times in each
    clock.now += SHARED_CATALOG_TTL  # the window has passed: the next ask reads it, once per window
    log.keys.clear()
    runs(backend, range(USERS + 20, USERS + 40))
    assert log.keys.count(shared_key) == 1
    log.close()
    backend.close()


def test_an_edit_of_the_users_own_library_made_elsewhere_shows_at_once() -> None:
    store = fill()
    backend, _ = backend_on(store, Clock(), user_id="user-0")
    assert "mine/new-one" not in [s.id for s in backend.skills.index()]
    # Another process adds a skill and records it in the manifest, as every writer does.
    other = SkillLibrary(store, Config(layout=LAYOUT, shared_library=SHARED), tenant=lambda: Tenant("user-0"))
    other.create("mine/new-one", {"SKILL.md": skill_md("new-one").encode()})
    assert "mine/new-one" in [s.id for s in backend.skills.index()]  # the clock has not moved
    backend.close()


@pytest.mark.parametrize("shared_ttl", [SHARED_CATALOG_TTL, None])
def test_an_edit_of_the_shared_library_made_elsewhere_shows_within_its_window(shared_ttl: float | None) -> None:
    store = fill()
    clock = Clock()
    backend, _ = backend_on(store, clock, user_id="user-1", shared_catalog_ttl=shared_ttl)
    assert "New text." not in backend.skills.skill_md("common/shared-0")
    # Another process rewrites a shared skill and the manifest records it.
    shared = LAYOUT.shared_prefix(SHARED)
    store.put_object(f"{shared}common/shared-0/SKILL.md", skill_md("shared-0", "New text."))
    other = SkillLibrary(store, Config(layout=LAYOUT, shared_library=SHARED), tenant=lambda: Tenant("user-1"))
    run_sync(other.catalog.areconcile("shared", shared))
    other.flush()
    if shared_ttl is not None:  # inside the window the index read before answers, until it passes
        assert "New text." not in backend.skills.skill_md("common/shared-0")
        clock.now += shared_ttl
        assert "New text." in backend.skills.skill_md("common/shared-0")
        store.put_object(f"{shared}common/shared-0/SKILL.md", skill_md("shared-0", "Newer text."))
        run_sync(other.catalog.areconcile("shared", shared))
        other.flush()
        assert "Newer text." not in backend.skills.skill_md("common/shared-0")
        backend.skills.index(refresh=True)  # a forced refresh does not wait for the window
        assert "Newer text." in backend.skills.skill_md("common/shared-0")
    else:  # trusted for no time: shows at once
        assert "New text." in backend.skills.skill_md("common/shared-0")
    backend.close()


def test_the_shared_window_is_the_longer_of_the_two_ttls_and_the_users_stays_fresh() -> None:
    assert Config().shared_catalog_ttl == SHARED_CATALOG_TTL
    store = MemoryObjectStore()
    assert S3Backend("m", store=store).skills.catalog.ttl_of("user") is None
    assert S3Backend("m", store=store).skills.catalog.ttl_of("shared") == SHARED_CATALOG_TTL
    assert S3Backend("m", store=store, catalog_ttl=30).skills.catalog.ttl_of("shared") == 30
    assert S3Backend("m", store=store, shared_catalog_ttl=None).skills.catalog.ttl_of("shared") is None
    with pytest.raises(ValueError, match="shared_catalog_ttl"):
        Config(shared_catalog_ttl=-1)
