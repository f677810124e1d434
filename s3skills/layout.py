"""Where things live: the key layout, and the mapping of virtual paths to keys.

`KeyLayout` holds the key templates (the defaults are the seeds'). A resolved
virtual path is a `Location` (a key prefix and the segments below it), or one
of the virtual folders `RootDir` (`/`) and `SkillsDir` (`/skills`);
`s3skills.mounts.Mounts` does the resolution with the helpers here. Every key is
built from allow-listed identity parts and checked to start with the prefix of
the mount it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass

from s3skills.errors import InvalidPath, NotFound, TenantError
from s3skills.paths import VPath, check_identity, join_key
from s3skills.tenancy import Tenant

__all__ = ["ARTIFACT_DIRS", "KeyLayout", "Location", "RootDir", "SkillsDir", "skill_leaf", "validate_skill_id"]

ARTIFACT_DIRS = ("large_tool_results", "conversation_history")
"""Root folders that deepagents writes through the backend; they live in the thread."""


def validate_skill_id(skill_id: object) -> str:
    """Check a skill id (`category/skill` or `skill`) and return it normalised.

    Raises:
        InvalidPath: Not one or two allow-listed segments.
    """
    if not isinstance(skill_id, str):
        raise InvalidPath(f"Invalid skill id {skill_id!r}")
    text = skill_id.strip().strip("/")
    parts = text.split("/")
    if not 1 <= len(parts) <= 2:
        raise InvalidPath(f"Invalid skill id {skill_id!r}: use 'skill' or 'category/skill'")
    for part in parts:
        check_identity(part, "skill id segment")
    return "/".join(parts)


def skill_leaf(skill_id: str) -> str:
    """The last segment of a skill id: the folder name the agent sees under /skills."""
    return skill_id.rsplit("/", 1)[-1]


def _check_template_prefix(value: str, what: str) -> str:
    if value == "":
        return value
    if not value.endswith("/"):
        value += "/"
    for part in value[:-1].split("/"):
        check_identity(part, what)
    return value


@dataclass(frozen=True)
class KeyLayout:
    """Key templates. Each yields a prefix ending in `/`.

    Attributes:
        root: An optional global key prefix put in front of every key.
        user_skills: The user's library (`{user_id}`).
        shared_skills: The organisation library (`{shared_prefix}`).
        workspace: A thread's files (`{thread_id}`, and `{user_id}` if you want it).
        ticket: A ticket's context files (`{ticket_id}`).
    """

    root: str = ""
    user_skills: str = "{user_id}/skills/"
    shared_skills: str = "{shared_prefix}/skills/"
    workspace: str = "threads/{thread_id}/"
    ticket: str = "tickets/{ticket_id}/"

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", _check_template_prefix(self.root, "key prefix segment"))
        for name in ("user_skills", "shared_skills", "workspace", "ticket"):
            if not getattr(self, name).endswith("/"):
                raise ValueError(f"KeyLayout.{name} must end with '/'")

    def _format(self, template: str, **ids: str | None) -> str:
        needed = {name for name in ("user_id", "thread_id", "ticket_id", "shared_prefix") if f"{{{name}}}" in template}
        values: dict[str, str] = {}
        for name in needed:
            value = ids.get(name)
            if value is None:
                raise TenantError(_MISSING[name])
            values[name] = value
        return self.root + template.format(**values)

    def user_prefix(self, tenant: Tenant) -> str:
        """The user's skill library prefix."""
        return self._format(self.user_skills, user_id=tenant.user_id)

    def shared_prefix(self, shared: str) -> str:
        """The organisation library prefix."""
        return self._format(self.shared_skills, shared_prefix=shared)

    def workspace_prefix(self, tenant: Tenant) -> str:
        """The thread's workspace prefix."""
        return self._format(self.workspace, thread_id=tenant.thread_id, user_id=tenant.user_id)

    def ticket_prefix(self, tenant: Tenant) -> str:
        """The ticket's prefix."""
        return self._format(self.ticket, ticket_id=tenant.ticket_id, user_id=tenant.user_id)


_MISSING = {
    "user_id": ("No user id for this call: pass user_id= to S3Backend, or run the agent with context={'user_id': ...}"),
    "thread_id": "No thread id for this call: run the agent with config={'configurable': {'thread_id': ...}}",
    "ticket_id": "No ticket id for this call",
    "shared_prefix": "No shared library is configured",
}


@dataclass(frozen=True, slots=True)
class Location:
    """A virtual path resolved to storage.

    Attributes:
        vbase: The virtual folder that `prefix` stands for (`/workspace`, `/skills/pdf`).
        prefix: The key prefix of that folder (ends with `/`).
        rel: The segments below `vbase` (empty for the folder itself).
        writable: Whether the mount admits writes.
        mount: `workspace`, `ticket` or `skills`.
    """

    vbase: VPath
    prefix: str
    rel: tuple[str, ...]
    writable: bool
    mount: str

    @property
    def key(self) -> str:
        """The object key of this path (the prefix itself for the folder)."""
        return join_key(self.prefix, self.rel)

    @property
    def dir_prefix(self) -> str:
        """The prefix to list when this path is a folder."""
        return self.prefix if not self.rel else self.key + "/"

    def vpath(self, key: str) -> str:
        """The virtual path of `key`, which must lie under `prefix`."""
        if not key.startswith(self.prefix):
            raise InvalidPath("Invalid path: a key outside its mount")
        tail = key[len(self.prefix) :]
        return str(self.vbase).rstrip("/") + "/" + tail


@dataclass(frozen=True, slots=True)
class RootDir:
    """The virtual root `/`: lists the mounts that exist for this call."""


@dataclass(frozen=True, slots=True)
class SkillsDir:
    """The virtual folder `/skills`: lists the loaded skills by leaf name."""


def find_loaded_skill(tenant: Tenant, leaf: str) -> str:
    """The id of the loaded skill whose last segment is exactly `leaf`.

    Raises:
        NotFound: No loaded skill has that leaf (unloaded skills do not exist).
    """
    for skill_id in tenant.loaded_skills:
        if skill_leaf(skill_id) == leaf:
            return skill_id
    raise NotFound(f"/skills/{leaf} is not a loaded skill")


def mounts_of(tenant: Tenant) -> list[str]:
    """The root folders visible to this call, in listing order."""
    names = []
    if tenant.thread_id is not None:
        names.append("workspace")
    if tenant.ticket_id is not None:
        names.append("ticket")
    if tenant.loaded_skills:
        names.append("skills")
    return names
