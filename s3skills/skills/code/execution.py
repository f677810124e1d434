"""Running an executable skill under the limits: nesting, a time limit, errors as results.

`run_skill` (sync agents) and `arun_skill` (async agents) run one `ExecutableSkill`
with its `SkillContext`: a skill already running in the chain, or a chain deeper
than allowed, is refused (`enter_skill`); past `ctx.guard.timeout` the run is given
up (an async `execute` is cancelled; a sync one is left to finish in its thread, its
later tool and model calls refused); every exception becomes
`SkillResult(success=False, error=...)`. Each run is one `skill_execution` usage record.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from s3skills.errors import SkillError
from s3skills.skills.code.executable import ExecutableSkill, SkillContext, SkillRecursion, SkillResult
from s3skills.skills.usage import log_usage

__all__ = ["arun_skill", "enter_skill", "run_skill"]

_CHAIN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("s3skills_skill_chain", default=())


def enter_skill(skill_id: str, max_depth: int) -> tuple[str, ...]:
    """The chain of running skills with `skill_id` added.

    Raises:
        SkillRecursion: `skill_id` is already running in this chain, or the chain
            would be deeper than `max_depth`.
    """
    chain = _CHAIN.get()
    path = " -> ".join([*chain, skill_id])
    if skill_id in chain:
        raise SkillRecursion(
            f"the skill '{skill_id}' is already running ({path}): a skill cannot call itself, "
            "directly or through another skill"
        )
    if len(chain) >= max_depth:
        raise SkillRecursion(f"skills nest at most {max_depth} deep ({path})")
    return (*chain, skill_id)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, SkillError | TimeoutError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _checked(skill_id: str, value: object) -> SkillResult:
    if not isinstance(value, SkillResult):
        raise SkillError(f"the skill '{skill_id}' returned {type(value).__name__}, not a SkillResult")
    return value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _in_thread(fn: Callable[[], Any], chain: tuple[str, ...]) -> concurrent.futures.Future[Any]:
    """Run `fn` in a daemon thread (a hung skill cannot block exit), in a copy of this context."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def body() -> None:
        if not future.set_running_or_notify_cancel():  # pragma: no cover - cancelled before it started
            return
        _CHAIN.set(chain)
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the waiting caller
            future.set_exception(exc)

    threading.Thread(target=context.run, args=(body,), name=f"skill-{chain[-1]}", daemon=True).start()
    return future


def _sync_body(skill: ExecutableSkill, ctx: SkillContext) -> Callable[[], Any]:
    def body() -> Any:
        value = skill.execute(ctx)
        if inspect.isawaitable(value):  # an async execute in a sync agent: its own loop here
            return asyncio.run(_awaited(value))
        return value

    return body


def _settle(ctx: SkillContext, kind: str, started: float, done: bool, value: Callable[[], Any]) -> SkillResult:
    """The result of a run (timed out, failed or returned), recorded in the usage log."""
    if not done:
        ctx.guard.expired.set()
        result = SkillResult(False, error=f"the skill '{ctx.skill_id}' timed out after {ctx.guard.timeout:g} s")
        outcome = "timeout"
    else:
        try:
            result = _checked(ctx.skill_id, value())
            outcome = "ok" if result.success else "error"
        except Exception as exc:
            ctx.logger.warning("skill raised", exc_info=exc)
            result, outcome = SkillResult(False, error=_error_text(exc)), "error"
    log_usage(
        "skill_execution",
        skill=ctx.skill_id,
        user=ctx.user_id,
        thread=ctx.thread_id,
        duration_ms=(time.perf_counter() - started) * 1000,
        outcome=outcome,
        ticket_id=ctx.ticket_id,
        kind=kind,
        depth=ctx.depth,
    )
    return result


def run_skill(skill: ExecutableSkill, ctx: SkillContext, chain: tuple[str, ...], kind: str = "code") -> SkillResult:
    """Run `skill` from sync code, under `ctx.guard.timeout`; never raises for the skill's faults.

    `execute` runs in a worker thread; past the time limit the thread is left
    to finish (Python cannot kill it), but its tool and model calls are refused.
    """
    started = time.perf_counter()
    future = _in_thread(_sync_body(skill, ctx), chain)
    done, _ = concurrent.futures.wait([future], timeout=ctx.guard.timeout)
    return _settle(ctx, kind, started, bool(done), future.result)


async def arun_skill(
    skill: ExecutableSkill, ctx: SkillContext, chain: tuple[str, ...], kind: str = "code"
) -> SkillResult:
    """Async version of `run_skill`: an `async def execute` runs as a task (cancelled at the limit)."""
    started = time.perf_counter()
    if inspect.iscoroutinefunction(skill.execute):
        token = _CHAIN.set(chain)
        try:
            task: asyncio.Future[Any] = asyncio.ensure_future(skill.execute(ctx))
        finally:
            _CHAIN.reset(token)
    else:
        task = asyncio.wrap_future(_in_thread(_sync_body(skill, ctx), chain))
    done, _ = await asyncio.wait({task}, timeout=ctx.guard.timeout)
    if not done:
        task.cancel()
    return _settle(ctx, kind, started, bool(done), task.result)
