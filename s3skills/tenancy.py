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
(read the way deepagents' `StateBackend` reads `files`), and the version each
was loaded at from `skill_versions` (`SkillPin`): reads of a loaded skill serve
that version for the rest of the thread.
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
    "SKILL_VERSIONS_KEY",
    "Identity",
    "PinnedFile",
    "SkillPin",
    "Tenant",
    "TenantResolver",
    "context_identity",
    "parse_pins",
    "resolve_tenant",
    "run_config",
    "run_context",
]

logger = logging.getLogger(__name__)

LOADED_SKILLS_KEY = "loaded_skills"
"""The agent-state key that holds the ids of the skills loaded in a thread."""


SKILL_VERSIONS_KEY = "skill_versions"
"""The agent-state key that holds the version each loaded skill was loaded at (`SkillPin.to_state`)."""


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """One file of a pinned skill: the ETag it had at load, and its S3 VersionId if it has one."""

    etag: str
    version_id: str | None = None


@dataclass(frozen=True)
class SkillPin:
    """The version of a skill a thread loaded: reads serve it until the skill is loaded again.

    Attributes:
        version: The skill's short version id (`s3skills.skills.versions.version_id_of`).
        files: Path relative to the skill folder -> the file as loaded.
    """

    version: str
    files: Mapping[str, PinnedFile] = field(default_factory=dict, hash=False)

    @property
    def versioned(self) -> bool:
        """Whether every file was loaded with a VersionId, so each can be read as it was."""
        return bool(self.files) and all(f.version_id for f in self.files.values())

    def to_state(self) -> dict[str, Any]:
        """The JSON-able form kept in the agent state (checkpointed with the thread)."""
        return {
            "version": self.version,
            "files": {
                path: {"etag": f.etag, **({"version_id": f.version_id} if f.version_id else {})}
                for path, f in sorted(self.files.items())
            },
        }

    @classmethod
    def from_state(cls, value: Any) -> SkillPin | None:
        """Parse `to_state`'s form; None for anything malformed (state comes from checkpoints)."""
        if not isinstance(value, Mapping) or not isinstance(value.get("version"), str):
            return None
        files = value.get("files")
        if not isinstance(files, Mapping):
            return None
        out: dict[str, PinnedFile] = {}
        for path, item in files.items():
            if not isinstance(path, str) or not isinstance(item, Mapping) or not isinstance(item.get("etag"), str):
                return None
            version_id = item.get("version_id")
            out[path] = PinnedFile(item["etag"], version_id if isinstance(version_id, str) and version_id else None)
        return cls(value["version"], out)


def parse_pins(value: Any) -> dict[str, SkillPin]:
    """The `skill_versions` state value as `{skill_id: SkillPin}`; malformed entries are dropped."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, SkillPin] = {}
    for skill_id, raw in value.items():
        pin = SkillPin.from_state(raw)
        if isinstance(skill_id, str) and SkillId.is_valid(skill_id) and pin is not None:
            out[skill_id] = pin
        else:
            logger.warning("ignored a malformed entry of the state's skill_versions")
    return out


@dataclass(frozen=True, slots=True)
class Tenant:
    """The identity of one call. Ids are already checked against the allow-list.

    `skill_versions` holds the version each skill was loaded at in this thread
    (empty outside a graph, or for skills loaded before versions were recorded).
    """

    user_id: str | None = None
    thread_id: str | None = None
    ticket_id: str | None = None
    loaded_skills: tuple[str, ...] = field(default=())
    skill_versions: Mapping[str, SkillPin] = field(default_factory=dict, compare=False, hash=False)


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


def _state_value(configurable: Mapping[str, Any], key: str) -> Any:
    """A channel of the run's state, read fresh; None outside a graph or without the channel."""
    try:
        from langgraph._internal._constants import CONFIG_KEY_READ
    except ImportError:  # pragma: no cover - langgraph moved it
        return None
    read = configurable.get(CONFIG_KEY_READ)
    if read is None:
        return None
    try:
        return read(key, True)
    except Exception:  # the graph has no such channel (no skills middleware)
        return None


def _state_skill_versions(configurable: Mapping[str, Any]) -> dict[str, SkillPin]:
    """The pins of the run's state (`skill_versions`), read the way `loaded_skills` is."""
    return parse_pins(_state_value(configurable, SKILL_VERSIONS_KEY))


def _state_loaded_skills(configurable: Mapping[str, Any]) -> list[str]:
    value = _state_value(configurable, LOADED_SKILLS_KEY)
    if value is None:
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
    pins = _state_skill_versions(configurable) if configurable else {}
    return Tenant(
        user_id=check_identity(user, "user id") if user is not None else None,
        thread_id=check_identity(thread, "thread id") if thread is not None else None,
        ticket_id=check_identity(ticket, "ticket id") if ticket is not None else None,
        loaded_skills=tuple(loaded),
        skill_versions={k: v for k, v in pins.items() if k in loaded},
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
