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

Everything in graph state is client input: a LangGraph Server client writes it with a
run's input or `threads.update_state` (`{"__overwrite__": ...}` even skips the
reducers). So the skills keys are read through ONE validator, `thread_skills` (and
the reducers `merge_loaded_skills` / `merge_skill_versions`, which use the same
rules): ids must be canonical `SkillId`s, pins must match `SkillPin`'s schema,
`current_skill` must be one of the loaded skills; anything else is dropped with a
log line, never raised. A pin is still only a claim: a pinned read checks what the
store returns against it (`s3skills.skills.versions.pinned`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from s3skills.errors import InvalidPath
from s3skills.ids import SkillId
from s3skills.paths import VPath, check_identity

__all__ = [
    "CURRENT_SKILL_KEY",
    "LOADED_SKILLS_KEY",
    "MAX_STATE_PIN_FILES",
    "MAX_STATE_SKILLS",
    "SKILL_VERSIONS_KEY",
    "Identity",
    "PinnedFile",
    "SkillPin",
    "Tenant",
    "TenantResolver",
    "ThreadSkills",
    "context_identity",
    "loaded_skill_ids",
    "merge_loaded_skills",
    "merge_skill_versions",
    "parse_pins",
    "resolve_tenant",
    "run_config",
    "run_context",
    "thread_skills",
]

logger = logging.getLogger(__name__)

LOADED_SKILLS_KEY = "loaded_skills"
"""The agent-state key that holds the ids of the skills loaded in a thread."""


SKILL_VERSIONS_KEY = "skill_versions"
"""The agent-state key that holds the version each loaded skill was loaded at (`SkillPin.to_state`)."""

CURRENT_SKILL_KEY = "current_skill"
"""The agent-state key that names the skill whose SKILL.md the prompt shows (one of the loaded ones)."""

MAX_STATE_SKILLS = 1000
"""Most skill ids (and pins) kept from a thread's state; more are dropped with a log line."""

MAX_STATE_PIN_FILES = 10_000
"""Most files one pin may name; a larger pin is malformed (dropped)."""

_MAX_ETAG_CHARS = 256
_MAX_VERSION_ID_CHARS = 1024
_MAX_PIN_VERSION_CHARS = 64
_MAX_PIN_PATH_BYTES = 1024


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """One file of a pinned skill: the ETag it had at load, and its S3 VersionId if it has one."""

    etag: str
    version_id: str | None = None


@dataclass(frozen=True)
class SkillPin:
    """The version of a skill a thread loaded: reads serve it until the skill is loaded again.

    Attributes:
        version: The skill's short version id (`s3skills.skills.versions.history.version_id_of`).
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
        """Parse `to_state`'s form; None for anything malformed (state is client input).

        The schema: `{"version": str (<= 64 chars), "files": {path: {"etag": str,
        "version_id"?: str}}}`, at most `MAX_STATE_PIN_FILES` files, ETags and VersionIds
        bounded in length; a bad value makes the whole pin malformed. A file whose path is
        not a plain relative path (`..`, `.`, empty or control segments) is left out: no
        virtual path can name it, so it is never read. Every pinned read is still checked
        against the store (`s3skills.skills.versions.pinned`).
        """
        if not isinstance(value, Mapping):
            return None
        version, files = value.get("version"), value.get("files")
        if not isinstance(version, str) or not 0 < len(version) <= _MAX_PIN_VERSION_CHARS:
            return None
        if not isinstance(files, Mapping) or len(files) > MAX_STATE_PIN_FILES:
            return None
        out: dict[str, PinnedFile] = {}
        for path, item in files.items():
            if not isinstance(item, Mapping):
                return None
            if not _pin_path_ok(path):  # a key no virtual path can name: never read, so not pinned
                logger.warning("ignored a pinned file whose path is not a plain relative path")
                continue
            etag, version_id = item.get("etag"), item.get("version_id")
            if not isinstance(etag, str) or not 0 < len(etag) <= _MAX_ETAG_CHARS:
                return None
            if version_id is not None and (not isinstance(version_id, str) or len(version_id) > _MAX_VERSION_ID_CHARS):
                return None
            out[path] = PinnedFile(etag, version_id or None)
        return cls(version, out)


def _pin_path_ok(path: object) -> bool:
    """Whether a pin's file path is a plain path relative to the skill folder."""
    if not isinstance(path, str) or not path or len(path.encode("utf-8", "surrogatepass")) > _MAX_PIN_PATH_BYTES:
        return False
    try:
        return "/".join(VPath.parse("/" + path).parts) == path
    except InvalidPath:
        return False


def _canonical_id(value: object) -> str | None:
    """`value` when it is a canonical skill id (as `cargar_habilidad` records them), else None."""
    if not isinstance(value, str):
        return None
    try:
        canonical = str(SkillId.parse(value))
    except InvalidPath:
        return None
    return value if canonical == value else None


def loaded_skill_ids(value: Any) -> list[str]:
    """The `loaded_skills` state value as canonical skill ids, deduplicated, in load order.

    Only a list (or tuple) counts: a string is not a list of its characters. Malformed
    ids are dropped with a log line; at most `MAX_STATE_SKILLS` are kept. Never raises.
    """
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        logger.warning("ignored the state's loaded_skills: a %s, not a list", type(value).__name__)
        return []
    good = [i for i in (_canonical_id(v) for v in value[: MAX_STATE_SKILLS * 4]) if i is not None]
    out = list(dict.fromkeys(good))
    if len(good) != len(value):
        logger.warning("ignored %d malformed skill id(s) in the state's loaded_skills", len(value) - len(good))
    if len(out) > MAX_STATE_SKILLS:
        logger.warning("kept the first %d of %d skill ids of the state's loaded_skills", MAX_STATE_SKILLS, len(out))
        out = out[:MAX_STATE_SKILLS]
    return out


def parse_pins(value: Any) -> dict[str, SkillPin]:
    """The `skill_versions` state value as `{skill_id: SkillPin}`; malformed entries are dropped.

    Keys must be canonical skill ids and values `SkillPin.from_state`'s schema; at most
    `MAX_STATE_SKILLS` entries are read. Never raises.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        logger.warning("ignored the state's skill_versions: a %s, not a mapping", type(value).__name__)
        return {}
    out: dict[str, SkillPin] = {}
    bad = 0
    for n, (skill_id, raw) in enumerate(value.items()):
        if n >= MAX_STATE_SKILLS:
            logger.warning("read only the first %d entries of the state's skill_versions", MAX_STATE_SKILLS)
            break
        canonical = _canonical_id(skill_id)
        pin = SkillPin.from_state(raw) if canonical is not None else None
        if canonical is not None and pin is not None:
            out[canonical] = pin
        else:
            bad += 1
    if bad:
        logger.warning("ignored %d malformed entr(y/ies) of the state's skill_versions", bad)
    return out


def merge_loaded_skills(left: Any, right: Any) -> list[str]:
    """Reducer of `loaded_skills`: the union of the valid ids, in load order.

    Total: any value on either side (a string, a dict, an `__overwrite__` left in the
    channel, bad ids) is validated by `loaded_skill_ids`, so nothing malformed persists.
    """
    return loaded_skill_ids([*loaded_skill_ids(left), *loaded_skill_ids(right)])


def merge_skill_versions(left: Any, right: Any) -> dict[str, Any]:
    """Reducer of `skill_versions`: per skill id, the newest load wins (a reload moves the pin).

    Total: only entries that pass `parse_pins` are kept, re-serialised (`SkillPin.to_state`).
    """
    merged = {**parse_pins(left), **parse_pins(right)}
    return {skill_id: pin.to_state() for skill_id, pin in list(merged.items())[-MAX_STATE_SKILLS:]}


@dataclass(frozen=True, slots=True)
class ThreadSkills:
    """The skills keys of one thread's state, validated (`thread_skills`).

    Attributes:
        loaded: Canonical ids of the loaded skills, in load order.
        current: The skill whose SKILL.md the prompt shows: one of `loaded`, or None.
        pins: The version each loaded skill was loaded at (only loaded skills).
    """

    loaded: tuple[str, ...] = ()
    current: str | None = None
    pins: Mapping[str, SkillPin] = field(default_factory=dict)


def thread_skills(state: Any) -> ThreadSkills:
    """Read `loaded_skills`, `current_skill` and `skill_versions` from a state, validated.

    The one reader of those keys: the prompt middleware, the skill tools and the
    backend's tenancy all go through it. Malformed parts are dropped with a log line;
    a `current_skill` the thread did not load is ignored. Never raises.
    """
    if not isinstance(state, Mapping):
        return ThreadSkills()
    loaded = loaded_skill_ids(state.get(LOADED_SKILLS_KEY))
    raw_current = state.get(CURRENT_SKILL_KEY)
    current = _canonical_id(raw_current)
    if current is not None and current not in loaded:
        logger.warning("ignored the state's current_skill: the thread did not load it")
        current = None
    elif current is None and raw_current is not None:
        logger.warning("ignored a malformed current_skill in the state")
    pins = parse_pins(state.get(SKILL_VERSIONS_KEY)) if loaded else {}
    return ThreadSkills(tuple(loaded), current, {k: v for k, v in pins.items() if k in loaded})


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


def _state_skills(configurable: Mapping[str, Any]) -> ThreadSkills:
    """The skills keys of the run's state, read fresh and validated (`thread_skills`)."""
    state = {key: _state_value(configurable, key) for key in (LOADED_SKILLS_KEY, SKILL_VERSIONS_KEY)}
    return thread_skills(state)


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
    state = _state_skills(configurable) if configurable else ThreadSkills()
    loaded = list(dict.fromkeys([*state.loaded, *own]))
    pins = state.pins
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
