"""One `S3Backend` instance, many tenants at once: nobody ever sees anybody else's files.

The backend is built with no ids. Each worker (8 threads and 8 asyncio tasks, all running at
the same time) acts for one of 4 tenants: every call happens inside a LangGraph run whose
context carries the tenant's user and ticket ids and whose config carries its thread id, with
the tenant's loaded skills in the run's state.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aioboto3
import pytest
from runs import ASYNC_RUN, SYNC_RUN

from s3skills import S3Backend
from s3skills.layout import KeyLayout
from s3skills.testing import skill_md

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

SESSION = aioboto3.Session()
TENANTS = ["alice", "bob", "carol", "dave"]
ITERATIONS = 3


@dataclass(frozen=True)
class Tenant:
    user: str

    @property
    def thread_id(self) -> str:
        return f"thread-{self.user}"

    @property
    def ticket_id(self) -> str:
        return f"ticket-{self.user}"


def _run_args(tenant: Tenant, op: Callable[[], Any], skills: list[str]) -> dict[str, Any]:
    return {
        "input": {"op": op, "loaded_skills": skills},
        "context": {"user_id": tenant.user, "ticket_id": tenant.ticket_id},
        "config": {"configurable": {"thread_id": tenant.thread_id}},
    }


def run_as(tenant: Tenant, op: Callable[[], Any], skills: list[str] | None = None) -> Any:
    return SYNC_RUN.invoke(**_run_args(tenant, op, skills or []))["result"]


async def arun_as(tenant: Tenant, op: Callable[[], Awaitable[Any]], skills: list[str] | None = None) -> Any:
    return (await ASYNC_RUN.ainvoke(**_run_args(tenant, op, skills or [])))["result"]


def user_skill_md(user: str) -> bytes:
    return skill_md("pdf", f"PDF for {user}.", body=f"TOKEN skill of {user}\n").encode()


@pytest.fixture
def shared(bucket: str, moto_endpoint: str, s3_client: Any) -> Iterator[S3Backend]:
    for user in TENANTS:
        tenant = Tenant(user)
        s3_client.put_object(Bucket=bucket, Key=f"{user}/skills/pdf/SKILL.md", Body=user_skill_md(user))
        s3_client.put_object(
            Bucket=bucket, Key=f"tickets/{tenant.ticket_id}/ticket.md", Body=f"TOKEN ticket of {user}\n".encode()
        )
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, session=SESSION, layout=SEEDS)
    yield backend
    backend.close()


SHARED_FILES = {"/skills/pdf/SKILL.md", "/ticket/ticket.md"}


def _check_iteration(tenant: Tenant, worker: str, i: int, results: dict[str, Any], written: list[str]) -> None:
    """What one worker saw in one iteration belongs to its own tenant, and nothing is missing.

    Worker names repeat across tenants (each tenant has workers `w0`, `w1`, `a0`, `a1`), so a
    file of another tenant that leaked into a listing or a search would match the same
    names and globs as this worker's own files, and be caught by its content or prefix.
    """
    user = tenant.user
    assert results["write"].error is None
    assert results["read"].file_data["content"] == f"TOKEN {user} {worker} {i}\n"
    assert results["skill"].file_data["content"] == user_skill_md(user).decode()
    assert results["ticket"].file_data["content"] == f"TOKEN ticket of {user}\n"
    listed = {e["path"] for e in results["ls"].entries}
    for path in listed:
        assert path.startswith(f"/workspace/{user}-"), path
    assert set(written) <= listed
    globbed = {e["path"] for e in results["glob"].matches}
    for path in globbed:
        assert path.startswith(f"/workspace/{user}-") or path in SHARED_FILES, path
    assert SHARED_FILES | set(written) <= globbed
    assert results["grep"].error is None
    for match in results["grep"].matches:
        assert match["text"] == f"TOKEN {user} {worker} {match['path'][-4]}", match
    assert {m["path"] for m in results["grep"].matches} == set(written)


def _path(tenant: Tenant, worker: str, i: int) -> str:
    return f"/workspace/{tenant.user}-{worker}-{i}.md"


def thread_worker(backend: S3Backend, tenant: Tenant, worker: str, start: threading.Barrier) -> list[str]:
    start.wait()
    written: list[str] = []
    for i in range(ITERATIONS):
        path = _path(tenant, worker, i)

        def iteration(i: int = i, path: str = path) -> dict[str, Any]:
            return {
                "write": backend.write(path, f"TOKEN {tenant.user} {worker} {i}\n"),
                "read": backend.read(path),
                "ls": backend.ls("/workspace"),
                "glob": backend.glob("**", path="/"),
                "grep": backend.grep("TOKEN", path="/", glob=f"*-{worker}-*"),
                "skill": backend.read("/skills/pdf/SKILL.md"),
                "ticket": backend.read("/ticket/ticket.md"),
            }

        results = run_as(tenant, iteration, ["pdf"])
        written.append(path)
        _check_iteration(tenant, worker, i, results, written)
    return written


async def task_worker(backend: S3Backend, tenant: Tenant, worker: str) -> list[str]:
    written: list[str] = []
    for i in range(ITERATIONS):
        path = _path(tenant, worker, i)

        async def iteration(i: int = i, path: str = path) -> dict[str, Any]:
            return {
                "write": await backend.awrite(path, f"TOKEN {tenant.user} {worker} {i}\n"),
                "read": await backend.aread(path),
                "ls": await backend.als("/workspace"),
                "glob": await backend.aglob("**", path="/"),
                "grep": await backend.agrep("TOKEN", path="/", glob=f"*-{worker}-*"),
                "skill": await backend.aread("/skills/pdf/SKILL.md"),
                "ticket": await backend.aread("/ticket/ticket.md"),
            }

        results = await arun_as(tenant, iteration, ["pdf"])
        written.append(path)
        _check_iteration(tenant, worker, i, results, written)
    return written


def test_concurrent_tenants_on_one_instance_only_see_their_own_files(
    shared: S3Backend, bucket: str, s3_client: Any
) -> None:
    workers = [(Tenant(TENANTS[n % 4]), f"w{n // 4}") for n in range(8)]
    tasks = [(Tenant(TENANTS[n % 4]), f"a{n // 4}") for n in range(8)]
    start = threading.Barrier(len(workers) + 1)
    outcomes: dict[str, list[str] | BaseException] = {}

    def guarded(name: str, fn: Callable[[], list[str]]) -> None:
        try:
            outcomes[name] = fn()
        except BaseException as exc:  # reported below, with the worker's name
            outcomes[name] = exc

    async def all_tasks() -> list[list[str]]:
        return await asyncio.gather(*(task_worker(shared, tenant, name) for tenant, name in tasks))

    def async_side() -> list[str]:
        start.wait()
        return [path for written in asyncio.run(all_tasks()) for path in written]

    threads = [
        threading.Thread(
            target=guarded,
            args=(f"{tenant.user}-{name}", lambda t=tenant, n=name: thread_worker(shared, t, n, start)),
        )
        for tenant, name in workers
    ]
    threads.append(threading.Thread(target=guarded, args=("tasks", async_side)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    failures = {name: exc for name, exc in outcomes.items() if isinstance(exc, BaseException)}
    if failures:
        name, exc = next(iter(failures.items()))
        raise AssertionError(f"{len(failures)} worker(s) failed; first: {name}") from exc
    assert len(outcomes) == 9

    # Storage agrees: each thread prefix holds exactly what its tenant's workers wrote.
    for user in TENANTS:
        listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=f"threads/thread-{user}/")
        names = sorted(o["Key"].rsplit("/", 1)[1] for o in listed.get("Contents", []))
        expected = sorted(
            f"{user}-{name}-{i}.md"
            for tenant, name in workers + tasks
            if tenant.user == user
            for i in range(ITERATIONS)
        )
        assert names == expected


def test_sync_and_async_calls_resolve_the_tenant_of_their_own_run(shared: S3Backend) -> None:
    alice, bob = Tenant("alice"), Tenant("bob")
    run_as(alice, lambda: shared.write("/workspace/mine.md", "alice's"))
    run_as(bob, lambda: shared.write("/workspace/mine.md", "bob's"))

    async def both() -> list[Any]:
        return await asyncio.gather(
            arun_as(alice, lambda: shared.aread("/workspace/mine.md")),
            arun_as(bob, lambda: shared.aread("/workspace/mine.md")),
        )

    read_alice, read_bob = asyncio.run(both())
    assert read_alice.file_data["content"] == "alice's"
    assert read_bob.file_data["content"] == "bob's"


def test_outside_any_run_there_is_no_tenant(shared: S3Backend) -> None:
    assert shared.ls("/").entries == []
    assert "no thread id" in shared.read("/workspace/x.md").error
    assert shared.write("/workspace/x.md", "x").error is not None
    assert shared.read("/ticket/ticket.md").error == "File '/ticket/ticket.md' not found"


def test_explicit_ids_win_over_the_run_context(bucket: str, moto_endpoint: str, s3_client: Any) -> None:
    s3_client.put_object(Bucket=bucket, Key="alice/skills/pdf/SKILL.md", Body=user_skill_md("alice"))
    s3_client.put_object(Bucket=bucket, Key="bob/skills/pdf/SKILL.md", Body=user_skill_md("bob"))
    s3_client.put_object(Bucket=bucket, Key="threads/thread-alice/mine.md", Body=b"alice thread")
    s3_client.put_object(Bucket=bucket, Key="threads/thread-bob/mine.md", Body=b"bob thread")
    s3_client.put_object(Bucket=bucket, Key="tickets/ticket-alice/t.md", Body=b"alice ticket")
    s3_client.put_object(Bucket=bucket, Key="tickets/ticket-bob/t.md", Body=b"bob ticket")
    fixed = S3Backend(
        bucket,
        user_id="alice",
        thread_id="thread-alice",
        ticket_id="ticket-alice",
        endpoint_url=moto_endpoint,
        session=SESSION,
        layout=SEEDS,
    )
    only_user = S3Backend(bucket, user_id="alice", endpoint_url=moto_endpoint, session=SESSION, layout=SEEDS)
    try:
        bob = Tenant("bob")
        seen = run_as(
            bob,
            lambda: [
                fixed.read("/workspace/mine.md"),
                fixed.read("/ticket/t.md"),
                fixed.read("/skills/pdf/SKILL.md"),
            ],
            ["pdf"],
        )
        skill_text = user_skill_md("alice").decode()
        assert [r.file_data["content"] for r in seen] == ["alice thread", "alice ticket", skill_text]
        # Only the user is fixed: the thread and the ticket still come from bob's run.
        seen = run_as(
            bob,
            lambda: [
                only_user.read("/workspace/mine.md"),
                only_user.read("/ticket/t.md"),
                only_user.read("/skills/pdf/SKILL.md"),
            ],
            ["pdf"],
        )
        assert [r.file_data["content"] for r in seen] == ["bob thread", "bob ticket", user_skill_md("alice").decode()]
    finally:
        fixed.close()
        only_user.close()


def test_loaded_skills_come_from_each_runs_state(shared: S3Backend) -> None:
    alice, bob = Tenant("alice"), Tenant("bob")
    assert [e["path"] for e in run_as(alice, lambda: shared.ls("/skills"), ["pdf"]).entries] == ["/skills/pdf/"]
    assert run_as(bob, lambda: shared.ls("/skills"), []).error == "File '/skills' not found"
    assert run_as(bob, lambda: shared.read("/skills/pdf/SKILL.md")).error == "File '/skills/pdf/SKILL.md' not found"


def test_load_skill_inside_a_run_does_not_load_it_for_other_tenants(shared: S3Backend) -> None:
    alice, bob = Tenant("alice"), Tenant("bob")
    assert run_as(alice, lambda: shared.load_skill("pdf")) == "pdf"
    assert sorted(e["path"] for e in run_as(bob, lambda: shared.ls("/")).entries) == ["/ticket/", "/workspace/"]
    assert run_as(bob, lambda: shared.read("/skills/pdf/SKILL.md")).error == "File '/skills/pdf/SKILL.md' not found"
