"""Who a call acts for: explicit values first, else a `TenantResolver` over the LangGraph run.

One `S3Backend` instance serves every tenant, so nothing tenant-specific is kept
on it: the user, thread and ticket ids and the loaded skills are resolved on
every call. A `TenantResolver` turns the run (`get_runtime().context` and
`get_config()`) into an `Identity`:

- `context_identity` (the default): `user_id` and `ticket_id` from the run
  context (`context=`), `thread_id` from `config["configurable"]`. Never a
  user or ticket from `configurable`, which a LangGraph Server client controls.
- `s3skills.serve.langgraph.LangGraphAuthResolver`: the user LangGraph Server's auth
  handler authenticated (`configurable["langgraph_auth_user"]`); whatever the client
  sends is ignored.
- any callable `(context, config) -> Identity` the application provides.

The skills loaded in the thread come from the agent state key `loaded_skills`
(read the way deepagents' `StateBackend` reads `files`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from s3skills.ids import SkillId
from s3skills.paths import check_identity

__all__ = [
    "LOADED_SKILLS_KEY",
    "Identity",
    "Tenant",
    "TenantResolver",
    "context_identity",
    "resolve_tenant",
    "run_config",
    "run_context",
]

logger = logging.getLogger(__name__)

LOADED_SKILLS_KEY = "loaded_skills"
"""The agent-state key that holds the ids of the skills loaded in a thread."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """The identity of one call. Ids are already checked against the allow-list."""

    user_id: str | None = None
    thread_id: str | None = None
    ticket_id: str | None = None
    loaded_skills: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Identity:
    """What a resolver found for a run (not yet checked: `resolve_tenant` checks it)."""

    user_id: str | None = None
    thread_id: str | None = None
    ticket_id: str | None = None


class TenantResolver(Protocol):
    """Decides who a run acts for, from its context object and its config."""

    def __call__(self, context: Any, config: Mapping[str, Any]) -> Identity: ...


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def run_context() -> tuple[Any, Mapping[str, Any]]:
    """The current run's `(context, config)`, or `(None, {})` outside a graph."""
    try:
        from langgraph.config import get_config

        config: Mapping[str, Any] = get_config()
    except (RuntimeError, KeyError, ImportError):
        return None, {}
    context = None
    try:
        from langgraph.runtime import get_runtime

        context = get_runtime().context
    except (RuntimeError, KeyError, ImportError, AttributeError):
        context = None
    return context, config


def context_identity(context: Any, config: Mapping[str, Any]) -> Identity:
    """The default resolver: user and ticket from the run context, thread from the config."""
    configurable: Mapping[str, Any] = config.get("configurable") or {}
    return Identity(
        user_id=_text(_field(context, "user_id")),
        thread_id=_text(configurable.get("thread_id")) or _text(_field(context, "thread_id")),
        ticket_id=_text(_field(context, "ticket_id")),
    )


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
    # State comes from checkpoints: never trust it.
    good = [v for v in values if SkillId.is_valid(v)]
    if len(good) != len(values):
        logger.warning("ignored %d malformed skill id(s) in the state's loaded_skills", len(values) - len(good))
    return good


def resolve_tenant(
    explicit: Identity = Identity(),
    *,
    resolver: TenantResolver = context_identity,
    instance_skills: Mapping[str | None, Iterable[str]] | None = None,
) -> Tenant:
    """Resolve the ids of this call and check each one.

    Args:
        explicit: Values fixed by the application (constructor arguments); each wins.
        resolver: Where the other values come from.
        instance_skills: Skills loaded on the instance (outside a graph), per user id.

    Raises:
        InvalidPath: An id has characters outside the allow-list.
    """
    context, config = run_context()
    found = resolver(context, config) if config or context is not None else Identity()
    user = explicit.user_id if explicit.user_id is not None else found.user_id
    thread = explicit.thread_id if explicit.thread_id is not None else found.thread_id
    ticket = explicit.ticket_id if explicit.ticket_id is not None else found.ticket_id
    own = (instance_skills or {}).get(user, ())
    configurable: Mapping[str, Any] = config.get("configurable") or {}
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
