"""Key layouts: the per-user default keeps tenants apart, namespaces never meet (issue 9, item 1).

The attacks found on the seeds' layout are replayed: two users with one thread id, a user
called `threads`, a user named like the shared library. A hypothesis property then builds
random layouts from literal segments and placeholders and random ids, and checks that for
every layout that builds and every tenant whose ids are accepted, no two namespaces'
prefixes are equal or nested, across tenants too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from runs import SYNC_RUN

from s3skills import S3Backend
from s3skills.config import Config
from s3skills.errors import InvalidPath, TenantError
from s3skills.layout import KeyLayout
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore

SKILL = b"---\nname: evil\ndescription: Planted through a workspace.\n---\nEVIL BODY\n"


def run_as(user: str, thread: str, op: Callable[[], Any]) -> Any:
    """Call `op` inside a LangGraph run of `user` in `thread` (ids from the run, as in an agent)."""
    return SYNC_RUN.invoke(
        {"op": op, "loaded_skills": []},
        context={"user_id": user},
        config={"configurable": {"thread_id": thread}},
    )["result"]


def backend_on(store: MemoryObjectStore, layout: KeyLayout, **kwargs: Any) -> S3Backend:
    return S3Backend("memory", store=store, layout=layout, **kwargs)


# --- the attacks ------------------------------------------------------------------------------


def test_default_layout_two_users_with_one_thread_id_never_share_a_workspace() -> None:
    store = MemoryObjectStore()
    backend = backend_on(store, KeyLayout())
    written = run_as("ana", "case-42", lambda: backend.write("/workspace/ana-private.md", "ANA SECRET"))
    assert written.error is None
    assert store.keys() == ["users/ana/threads/case-42/ana-private.md"]

    read = run_as("bob", "case-42", lambda: backend.read("/workspace/ana-private.md"))
    listed = run_as("bob", "case-42", lambda: backend.ls("/workspace"))
    grepped = run_as("bob", "case-42", lambda: backend.grep("SECRET"))
    assert read.error == "File '/workspace/ana-private.md' not found"
    assert listed.entries == []
    assert grepped.matches == []
    assert run_as("ana", "case-42", lambda: backend.read("/workspace/ana-private.md")).file_data["content"] == (
        "ANA SECRET"
    )


def test_seeds_layout_keys_threads_by_thread_id_only_so_ids_must_be_unguessable() -> None:
    # Pins what the README says KeyLayout.seeds() requires of the application.
    store = MemoryObjectStore()
    backend = backend_on(store, KeyLayout.seeds())
    run_as("ana", "case-42", lambda: backend.write("/workspace/ana-private.md", "ANA SECRET"))
    assert store.keys() == ["threads/case-42/ana-private.md"]
    assert run_as("bob", "case-42", lambda: backend.read("/workspace/ana-private.md")).error is None


def test_seeds_layout_refuses_a_user_called_threads() -> None:
    # The attack: an agent in thread `skills` writes /workspace/evil/SKILL.md, which is
    # threads/skills/evil/SKILL.md, the library of a user `threads`.
    store = MemoryObjectStore()
    backend = backend_on(store, KeyLayout.seeds())
    planted = run_as("mallory", "skills", lambda: backend.write("/workspace/evil/SKILL.md", SKILL.decode()))
    assert planted.error is None
    assert store.keys() == ["threads/skills/evil/SKILL.md"]

    for user in ("threads", "tickets"):
        result = run_as(user, "t1", lambda: backend.ls("/workspace"))
        assert result.error is not None
        assert "reserved by the key layout" in result.error
        with pytest.raises(TenantError, match="reserved"):
            run_as(user, "t1", lambda: backend.load_skills())
    with pytest.raises(TenantError, match="reserved"):
        S3Backend("memory", store=store, layout=KeyLayout.seeds(), user_id="threads").tenant()


def test_seeds_layout_refuses_a_user_named_like_the_shared_library() -> None:
    store = MemoryObjectStore()
    store.put_object("org/skills/house-style/SKILL.md", b"---\nname: house-style\ndescription: Org.\n---\nORG\n")
    backend = backend_on(store, KeyLayout.seeds(), shared_prefix="org")
    read = run_as("org", "t1", lambda: backend.read("/workspace/x.md"))
    assert read.error is not None
    assert "cannot be equal" in read.error
    with pytest.raises(TenantError, match="cannot be equal"):
        run_as("org", "t1", lambda: backend.load_skills())
    # Another user still sees the shared library.
    assert run_as("ana", "t1", lambda: backend.load_skills()) == ["house-style"]
    with pytest.raises(TenantError):
        Config(layout=KeyLayout.seeds(), shared_library="org").check_tenant(Tenant(user_id="org"))


def test_default_layout_reserves_no_id_and_keeps_a_user_named_like_the_library_apart() -> None:
    layout = KeyLayout()
    assert layout.reserved == {}
    assert layout.distinct == frozenset()
    config = Config(shared_library="org")
    config.check_tenant(Tenant(user_id="org", thread_id="shared"))
    assert layout.user_prefix("org") == "users/org/skills/"
    assert layout.shared_prefix("org") == "shared/org/skills/"
    assert layout.workspace_prefix("threads", "skills") == "users/threads/threads/skills/"


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"user_skills": "users/{user_id}/skills"}, "must end with '/'"),
        ({"user_skills": "users/u{user_id}/skills/"}, "whole segment"),
        ({"user_skills": "users/{user_id}{user_id}/"}, "whole segment"),
        ({"user_skills": "users/{tenant}/skills/"}, "unknown placeholder"),
        ({"user_skills": "skills/"}, "must hold {user_id}"),
        ({"workspace": "threads/"}, "must hold {thread_id}"),
        ({"ticket": "tickets/{user_id}/"}, "must hold {ticket_id}"),
        ({"shared_skills": "shared/skills/"}, "must hold {library}"),
        ({"workspace": "w/{thread_id}/{thread_id}/"}, "appears twice"),
        ({"shared_skills": "shared/{library}/{user_id}/"}, "cannot use user_id"),
        ({"user_skills": "{user_id}/{thread_id}/"}, "cannot use thread_id"),
        ({"user_skills": "users/../{user_id}/"}, "Invalid KeyLayout.user_skills segment"),
        ({"user_skills": "users//{user_id}/"}, "Invalid KeyLayout.user_skills segment"),
        ({"root": "{user_id}/"}, "root cannot hold placeholders"),
        # Always overlapping: two per-call ids at one position, or nested templates.
        ({"workspace": "{thread_id}/", "user_skills": "{user_id}/skills/"}, "can overlap"),
        ({"workspace": "users/{user_id}/skills/{thread_id}/"}, "can overlap"),
        ({"ticket": "users/{user_id}/skills/{ticket_id}/"}, "can overlap"),
    ],
)
def test_malformed_or_always_overlapping_layouts_are_refused(kwargs: dict[str, str], why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("{", r"\{").replace("}", r"\}").replace(".", r"\.")):
        KeyLayout(**kwargs)


def test_named_layouts() -> None:
    assert KeyLayout.named("users") == KeyLayout()
    assert KeyLayout.named("seeds") == KeyLayout.seeds()
    with pytest.raises(ValueError, match="Unknown key layout"):
        KeyLayout.named("flat")


# --- the property: no two namespaces ever meet --------------------------------------------------

# Few literals and ids, shared between them, so that collisions are frequent.
WORDS = ["a", "b", "users", "threads", "skills"]
IDS = st.sampled_from([*WORDS, "u1", "org"])
NAMESPACES = {
    "user_skills": ("user_id", ["user_id"]),
    "shared_skills": ("library", ["library"]),
    "workspace": ("thread_id", ["user_id", "thread_id"]),
    "ticket": ("ticket_id", ["ticket_id", "user_id"]),
}


@st.composite
def templates(draw: st.DrawFn, namespace: str) -> str:
    needed, allowed = NAMESPACES[namespace]
    optional = [p for p in allowed if p != needed and draw(st.booleans())]
    slots = [needed, *optional]
    literals = draw(st.lists(st.sampled_from(WORDS), max_size=3))
    segments: list[str] = [f"{{{p}}}" for p in slots] + literals
    order = draw(st.permutations(segments))
    return "/".join(order) + "/"


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, str]:
    spec = {name: draw(templates(name)) for name in NAMESPACES}
    spec["root"] = draw(st.sampled_from(["", "prod/", "a/"]))
    return spec


TENANTS = st.lists(st.tuples(IDS, IDS, IDS), min_size=1, max_size=3)


def _prefixes(config: Config, tenants: list[tuple[str, str, str]]) -> dict[tuple[str, tuple[str, ...]], str]:
    """Every namespace prefix the accepted tenants (and the shared library) can reach.

    A namespace is named by its template's ids: the seeds' workspace of thread `t` is one
    namespace whoever uses it.
    """
    layout = config.layout
    out: dict[tuple[str, tuple[str, ...]], str] = {}
    if config.shared_library is not None:
        out[("shared_skills", (config.shared_library,))] = layout.shared_prefix(config.shared_library)
    for user, thread, ticket in tenants:
        try:
            config.check_tenant(Tenant(user_id=user, thread_id=thread, ticket_id=ticket))
        except TenantError:
            continue  # refused: this tenant does nothing at all
        ids = {"user_id": user, "thread_id": thread, "ticket_id": ticket}
        for name, build in (
            ("user_skills", lambda: layout.user_prefix(user)),
            ("workspace", lambda: layout.workspace_prefix(user, thread)),
            ("ticket", lambda: layout.ticket_prefix(ticket, user)),
        ):
            used = tuple(ids[p] for p in NAMESPACES[name][1] if "{" + p + "}" in getattr(layout, name))
            out[(name, used)] = build()
    return out


@settings(max_examples=300, deadline=None)
@given(spec=layouts(), library=st.none() | IDS, tenants=TENANTS)
def test_no_two_namespaces_meet_in_any_layout_that_builds(
    spec: dict[str, str], library: str | None, tenants: list[tuple[str, str, str]]
) -> None:
    try:
        layout = KeyLayout(**spec)
    except ValueError:
        return  # refused at construction: nothing to check
    try:
        config = Config(layout=layout, shared_library=library)
    except (TenantError, InvalidPath):
        return  # a library name the layout reserves is refused too
    prefixes = sorted(_prefixes(config, tenants).items())
    for i, (name_a, a) in enumerate(prefixes):
        for name_b, b in prefixes[i + 1 :]:
            assert not a.startswith(b), f"{name_a} {a!r} is inside {name_b} {b!r} in {spec}"
            assert not b.startswith(a), f"{name_b} {b!r} is inside {name_a} {a!r} in {spec}"


def _builds_with_reserved_ids(spec: dict[str, str]) -> bool:
    try:
        return bool(KeyLayout(**spec).reserved)
    except ValueError:
        return False


def test_the_layout_strategy_reaches_layouts_that_build_and_reserve_ids() -> None:
    # Guards the property above against a strategy whose layouts are all refused: it must
    # reach the interesting case, a layout that builds only because some ids are refused.
    spec = find(layouts(), _builds_with_reserved_ids, settings=settings(database=None, max_examples=500))
    assert KeyLayout(**spec).reserved
