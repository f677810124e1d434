"""Who a call acts for: explicit values first, else the LangGraph run's context.

One `S3Backend` instance serves every tenant, so nothing tenant-specific is kept
on it: the user, thread and ticket ids and the loaded skills are resolved on
every call. Inside a graph they come from `get_runtime().context` (user_id,
ticket_id), `get_config()["configurable"]` (thread_id) and the agent state key
`loaded_skills` (read the way deepagents' `StateBackend` reads `files`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from s3skills.paths import check_identity

__all__ = ["LOADED_SKILLS_KEY", "IdentityFn", "Tenant", "resolve_tenant", "run_config", "run_context"]

logger = logging.getLogger(__name__)

IdentityFn = Callable[[Any, Mapping[str, Any]], tuple[str | None, str | None, str | None]]
"""`(context, config) -> (user_id, thread_id, ticket_id)`: who a call is for, decided by the
application (e.g. `s3skills.serve.langgraph.langgraph_auth_identity`). `config` holds the run's
`configurable` under `"configurable"`. A None id means "unknown", never "ask elsewhere"."""

LOADED_SKILLS_KEY = "loaded_skills"
"""The agent-state key that holds the ids of the skills loaded in a thread."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """The identity of one call. Ids are already checked against the allow-list."""

    user_id: str | None = None
    thread_id: str | None = None
    ticket_id: str | None = None
    loaded_skills: tuple[str, ...] = field(default=())


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def run_context() -> tuple[Any, Mapping[str, Any]]:
    """The current run's `(context, configurable)`, or `(None, {})` outside a graph."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except (RuntimeError, KeyError, ImportError):
        return None, {}
    configurable: Mapping[str, Any] = config.get("configurable") or {}
    context = None
    try:
        from langgraph.runtime import get_runtime

        context = get_runtime().context
    except (RuntimeError, KeyError, ImportError, AttributeError):
        context = None
    return context, configurable


def _valid_skill_id(value: object) -> bool:
    """One or two allow-listed segments (state comes from checkpoints: never trust it)."""
    if not isinstance(value, str):
        return False
    parts = value.split("/")
    if not 1 <= len(parts) <= 2:
        return False
    try:
        for part in parts:
            check_identity(part, "skill id segment")
    except ValueError:
        return False
    return True


def _state_loaded_skills(configurable: Mapping[str, Any]) -> list[str]:
    try:
        from langgraph._internal._constants import CONFIG_KEY_READ
    except ImportError:  # pragma: no cover - langgraph moved it
        return []
    read = configurable.get(CONFIG_KEY_READ)
    if read is None:
        return []
    try:
        value = read(LOADED_SKILLS_KEY, True)
    except Exception:  # the graph has no such channel (no skills middleware)
        return []
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else []
    good = [v for v in values if _valid_skill_id(v)]
    if len(good) != len(values):
        logger.warning("ignored %d malformed skill id(s) in the state's loaded_skills", len(values) - len(good))
    return good


def _pick(explicit: str | None, *candidates: Any) -> str | None:
    if explicit is not None:
        return explicit
    for value in candidates:
        if value is not None and value != "":
            return str(value)
    return None


def resolve_tenant(
    *,
    user_id: str | None,
    thread_id: str | None,
    ticket_id: str | None,
    instance_skills: Mapping[str | None, Iterable[str]] | None = None,
    identity: IdentityFn | None = None,
) -> Tenant:
    """Resolve the ids of this call and check each one.

    Args:
        user_id: The constructor's value, which wins when given.
        thread_id: Idem.
        ticket_id: Idem.
        instance_skills: Skills loaded on the instance (outside a graph), per user id.
        identity: Decides the ids the constructor did not fix, instead of the
            built-in lookup in the run's context and config.

    Raises:
        InvalidPath: An id has characters outside the allow-list.
    """
    context, configurable = run_context()
    if identity is not None:
        found_user, found_thread, found_ticket = identity(context, {"configurable": configurable})
        user = _pick(user_id, found_user)
        thread = _pick(thread_id, found_thread)
        ticket = _pick(ticket_id, found_ticket)
    else:
        user = _pick(user_id, _field(context, "user_id"), configurable.get("user_id"))
        thread = _pick(thread_id, configurable.get("thread_id"), _field(context, "thread_id"))
        ticket = _pick(ticket_id, _field(context, "ticket_id"), configurable.get("ticket_id"))
    own = (instance_skills or {}).get(user, ())
    loaded = list(dict.fromkeys([*_state_loaded_skills(configurable), *own]))
    return Tenant(
        user_id=check_identity(user, "user id") if user is not None else None,
        thread_id=check_identity(thread, "thread id") if thread is not None else None,
        ticket_id=check_identity(ticket, "ticket id") if ticket is not None else None,
        loaded_skills=tuple(loaded),
    )


def run_config(tenant: Tenant) -> dict[str, Any]:
    """What a code skill's `is_available(config)` / `get_tools(config)` receive.

    The run's ids, plus the run context object itself under `context`.
    """
    context, _ = run_context()
    return {
        "user_id": tenant.user_id,
        "thread_id": tenant.thread_id,
        "ticket_id": tenant.ticket_id,
        "context": context,
    }
