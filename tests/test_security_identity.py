"""Who a call acts for, and what an id may hold (issue 9, items 2 and 3).

A LangGraph Server client controls `config["configurable"]`: a user or ticket id put
there must never make a run act for that user. Ids must match the allow-list in full
(`"alice\\n"` once slipped through a `re.match` with `$`), and a lone surrogate in a path
is refused with a clear message by every operation instead of an internal error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from keylog import KeyLogStore
from runs import ASYNC_RUN, SYNC_RUN

from s3skills import InvalidPath, S3Backend, VPath
from s3skills.errors import TenantError
from s3skills.serve.langgraph import LangGraphAuthResolver
from s3skills.tenancy import Identity

BOB_SKILL = b"---\nname: pdf\ndescription: Bob's PDF skill.\n---\nBOB SKILL BODY\n"


@pytest.fixture
def store() -> KeyLogStore:
    store = KeyLogStore()
    store.put_object("users/bob/skills/pdf/SKILL.md", BOB_SKILL)
    store.put_object("users/bob/threads/t1/notes.md", "BOB NOTES")
    store.put_object("tickets/k-bob/ticket.md", "BOB TICKET")
    return store


def run(
    op: Callable[[], Any], *, context: Any, configurable: Mapping[str, Any], skills: list[str] | None = None
) -> Any:
    return SYNC_RUN.invoke(
        {"op": op, "loaded_skills": skills or []}, context=context, config={"configurable": dict(configurable)}
    )["result"]


FORGED = {"thread_id": "t1", "user_id": "bob", "ticket_id": "k-bob"}


@pytest.mark.parametrize("context", [{}, {"user_id": None}, {"user_id": "", "ticket_id": None}, None])
def test_user_and_ticket_in_configurable_never_make_a_run_act_for_them(store: KeyLogStore, context: Any) -> None:
    backend = S3Backend("memory", store=store)

    def attempt() -> dict[str, Any]:
        out: dict[str, Any] = {
            "ls_root": backend.ls("/"),
            "workspace": backend.read("/workspace/notes.md"),
            "ticket": backend.read("/ticket/ticket.md"),
            "skill": backend.read("/skills/pdf/SKILL.md"),
            "grep": backend.grep("BOB"),
        }
        for name, call in (("index", backend.load_skills), ("content", lambda: backend.load_skill_content("pdf"))):
            try:
                out[name] = call()
            except TenantError as exc:
                out[name] = exc
        return out

    store.take()
    got = run(attempt, context=context, configurable=FORGED, skills=["pdf"])
    assert "No user id" in got["workspace"].error
    assert got["ticket"].error == "File '/ticket/ticket.md' not found"
    assert "No user id" in (got["skill"].error or "")
    assert isinstance(got["index"], TenantError)
    assert isinstance(got["content"], TenantError)
    assert not got["grep"].matches
    assert "BOB" not in repr(got)
    assert not [k for k in store.keys_requested() if "bob" in k], store.keys_requested()


def test_the_same_run_with_the_user_in_its_context_does_act_for_them(store: KeyLogStore) -> None:
    # The counterpart of the test above: the context is the trusted channel.
    backend = S3Backend("memory", store=store)
    got = run(lambda: backend.read("/workspace/notes.md"), context={"user_id": "bob"}, configurable={"thread_id": "t1"})
    assert got.file_data["content"] == "BOB NOTES"


def test_a_custom_resolver_decides_who_a_call_is_for(store: KeyLogStore) -> None:
    def from_session(context: Any, config: Mapping[str, Any]) -> Identity:
        # An application that looks the user up from its own session object.
        sessions = {"s-1": "bob"}
        return Identity(user_id=sessions.get(getattr(context, "session", "")), thread_id="t1")

    class Ctx:
        session = "s-1"

    backend = S3Backend("memory", store=store, resolver=from_session)
    assert run(lambda: backend.read("/workspace/notes.md"), context=Ctx(), configurable={}).file_data["content"] == (
        "BOB NOTES"
    )
    # Whatever the context or configurable say is ignored when the resolver does not read it.
    forged = run(lambda: backend.read("/workspace/notes.md"), context={"user_id": "bob"}, configurable=FORGED)
    assert "No user id" in forged.error


def test_langgraph_auth_resolver_plugs_in_and_ignores_client_ids(store: KeyLogStore) -> None:
    backend = S3Backend("memory", store=store, resolver=LangGraphAuthResolver())
    authenticated = {"thread_id": "t1", "langgraph_auth_user": {"identity": "bob"}, "langgraph_auth_user_id": "bob"}
    got = run(lambda: backend.read("/workspace/notes.md"), context={}, configurable=authenticated)
    assert got.file_data["content"] == "BOB NOTES"
    store.take()
    forged = run(
        lambda: backend.read("/workspace/notes.md"),
        context={"user_id": "bob", "ticket_id": "k-bob"},
        configurable=FORGED,
    )
    assert "No user id" in forged.error
    assert store.keys_requested() == []


# --- id hygiene ---------------------------------------------------------------------------------

TRAILING = ["alice\n", "alice\r\n", "alice\x00", "alice ", "\nalice", "ali\nce", "alice/", "alice\u2028"]


@pytest.mark.parametrize("value", TRAILING)
@pytest.mark.parametrize("field", ["user_id", "thread_id", "ticket_id"])
def test_ids_with_a_trailing_newline_or_other_junk_are_refused_by_the_constructor(field: str, value: str) -> None:
    with pytest.raises(InvalidPath, match=f"Invalid {field.replace('_', ' ')}"):
        S3Backend("memory", store=KeyLogStore(), **{field: value})


@pytest.mark.parametrize("value", TRAILING)
def test_ids_with_a_trailing_newline_are_refused_from_the_run_context(store: KeyLogStore, value: str) -> None:
    backend = S3Backend("memory", store=store)
    store.take()
    got = run(
        lambda: [backend.ls("/workspace"), backend.read("/workspace/notes.md"), backend.grep("x")],
        context={"user_id": value},
        configurable={"thread_id": "t1"},
    )
    for result in got:
        assert result.error is not None
        assert "Invalid user id" in result.error
    assert store.keys_requested() == []


SURROGATE_PATHS = ["/workspace/\ud800.md", "/workspace/a\udfff/b.md", "/\udc80", "/skills/pdf/\ud83d"]


def _operations(backend: S3Backend, path: str) -> dict[str, Callable[[], Any]]:
    return {
        "ls": lambda: backend.ls(path),
        "read": lambda: backend.read(path),
        "write": lambda: backend.write(path, "x"),
        "edit": lambda: backend.edit(path, "a", "b"),
        "delete": lambda: backend.delete(path),
        "grep_path": lambda: backend.grep("a", path=path),
        "glob_path": lambda: backend.glob("*", path=path),
        "upload": lambda: backend.upload_files([(path, b"x")])[0],
        "download": lambda: backend.download_files([path])[0],
    }


@pytest.mark.parametrize("path", SURROGATE_PATHS)
def test_a_lone_surrogate_in_a_path_gives_a_clear_error_from_every_operation(store: KeyLogStore, path: str) -> None:
    backend = S3Backend("memory", store=store)
    with pytest.raises(InvalidPath, match="lone surrogates"):
        VPath.parse(path)

    def everything() -> dict[str, Any]:
        out = {name: op() for name, op in _operations(backend, path).items()}
        out["exists"] = backend.exists(path)
        return out

    store.take()
    got = run(everything, context={"user_id": "bob"}, configurable={"thread_id": "t1"}, skills=["pdf"])
    assert got.pop("exists") is False
    for name, result in got.items():
        if name in ("upload", "download"):
            assert result.error == "invalid_path", name
        else:
            assert "lone surrogates" in (result.error or ""), (name, result)
            assert "internal error" not in result.error
    assert store.keys_requested() == []


def test_a_lone_surrogate_in_a_path_is_refused_by_the_async_api_too(store: KeyLogStore) -> None:
    backend = S3Backend("memory", store=store)

    async def everything() -> list[Any]:
        path = "/workspace/\ud800.md"
        return [
            await backend.aread(path),
            await backend.awrite(path, "x"),
            await backend.agrep("a", glob="\ud800*"),
            await backend.aexists(path),
        ]

    got = asyncio.run(
        ASYNC_RUN.ainvoke({"op": everything}, context={"user_id": "bob"}, config={"configurable": {"thread_id": "t1"}})
    )["result"]
    assert "lone surrogates" in got[0].error
    assert "lone surrogates" in got[1].error
    assert got[2].error is None or "internal error" not in got[2].error
    assert got[3] is False
