"""Code skills: skills written in Python by the host application (seeds 000/001).

A code skill brings instructions and tools of its own. It appears in the same
index as the S3 skills; its tools stay hidden from the model until the skill is
loaded (the prompt middleware filters the tool list per request), and loading
it puts its instructions in the prompt. `SkillRegistry` keeps them, with the
precedence of seed 000: bundled < user < workspace.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from s3skills.skills.format.model import SkillInfo, SkillMetadata

__all__ = ["PRECEDENCE", "Skill", "SkillRegistry", "SkillSource", "merge_index", "skill_id_of", "tool_name"]

SkillSource = Literal["bundled", "user", "workspace"]

PRECEDENCE: dict[str, int] = {"bundled": 0, "user": 1, "workspace": 2}
"""Higher wins when two code skills share a name."""


@runtime_checkable
class Skill(Protocol):
    """The interface of a code skill.

    `metadata` uses the same fields as a SKILL.md frontmatter; its `name`
    (with `category/` in front when `metadata.category` is set) is the skill id.
    """

    @property
    def metadata(self) -> SkillMetadata:
        """Name, description, category, tags..."""
        ...

    def is_available(self, config: Mapping[str, Any]) -> bool:
        """Whether the skill can be offered in this run (feature flags, plan, keys)."""
        ...

    def get_tools(self, config: Mapping[str, Any]) -> Sequence[Any]:
        """The LangChain tools the skill brings (shown once it is loaded)."""
        ...

    def get_system_instructions(self) -> str:
        """The instructions injected into the prompt once the skill is loaded."""
        ...


def skill_id_of(skill: Skill) -> str:
    """The id under which a code skill is indexed and loaded."""
    meta = skill.metadata
    return f"{meta.category}/{meta.name}" if meta.category else meta.name


def tool_name(tool: Any) -> str:
    """The name of a tool given as a name, a LangChain tool, a tool dict or a function."""
    if isinstance(tool, str):
        return tool
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("function", {}).get("name", ""))
    return str(getattr(tool, "name", None) or getattr(tool, "__name__", ""))


class SkillRegistry:
    """The code skills of an application. Thread-safe.

    Example:
        registry = SkillRegistry()
        registry.register(MySignatureSkill(), source="bundled")
        agent = create_skills_agent(model, backend, registry=registry)
    """

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._lock = threading.Lock()
        self._skills: dict[str, tuple[int, Skill]] = {}
        for skill in skills:
            self.register(skill)

    def register(self, skill: Skill, *, source: SkillSource = "user") -> bool:
        """Add a skill; one of the same id is replaced only by a higher-precedence source.

        Returns:
            True when the skill is now the registered one for its id.

        Raises:
            TypeError: The object does not implement `Skill`.
            ValueError: Unknown source.
        """
        if not isinstance(skill, Skill):
            raise TypeError(f"{type(skill).__name__} does not implement the Skill protocol")
        if source not in PRECEDENCE:
            raise ValueError(f"source must be one of {sorted(PRECEDENCE)}")
        rank = PRECEDENCE[source]
        sid = skill_id_of(skill)
        with self._lock:
            current = self._skills.get(sid)
            if current is not None and current[0] > rank:
                return False
            self._skills[sid] = (rank, skill)
            return True

    def unregister(self, skill_id: str) -> None:
        """Remove a skill (no error if absent)."""
        with self._lock:
            self._skills.pop(skill_id, None)

    def get(self, skill_id: str) -> Skill | None:
        """The registered skill with this id, if any."""
        with self._lock:
            entry = self._skills.get(skill_id)
        return entry[1] if entry else None

    def skills(self) -> list[Skill]:
        """Every registered skill, available or not, by id."""
        with self._lock:
            return [s for _, (_, s) in sorted(self._skills.items())]

    def _available(self, config: Mapping[str, Any] | None) -> list[tuple[str, Skill]]:
        with self._lock:
            items = sorted((sid, s) for sid, (_, s) in self._skills.items())
        return [(sid, s) for sid, s in items if s.is_available(config or {})]

    def list_skills(self, config: Mapping[str, Any] | None = None) -> list[SkillInfo]:
        """The available code skills as index entries (`source="code"`)."""
        return [SkillInfo(id=sid, metadata=s.metadata, source="code") for sid, s in self._available(config)]

    def get_active_tools(
        self, config: Mapping[str, Any] | None = None, loaded: Iterable[str] | None = None
    ) -> list[Any]:
        """Tools of the available skills (only of `loaded` ones when given)."""
        wanted = None if loaded is None else set(loaded)
        tools: list[Any] = []
        for sid, skill in self._available(config):
            if wanted is None or sid in wanted:
                tools.extend(skill.get_tools(config or {}))
        return tools

    def all_tools(self) -> list[Any]:
        """Every tool of every registered skill (the agent must know them all up front)."""
        with self._lock:
            items = [s for _, s in self._skills.values()]
        seen: dict[str, Any] = {}
        for skill in items:
            for tool in skill.get_tools({}):
                seen.setdefault(tool_name(tool), tool)
        return list(seen.values())

    def all_tool_names(self) -> dict[str, str]:
        """Every code-skill tool name -> the id of the skill that brings it."""
        with self._lock:
            items = [(sid, s) for sid, (_, s) in self._skills.items()]
        return {tool_name(t): sid for sid, s in items for t in s.get_tools({})}

    def get_combined_system_instructions(
        self, config: Mapping[str, Any] | None = None, loaded: Iterable[str] | None = None
    ) -> str:
        """The instructions of the available skills (of `loaded` ones when given)."""
        wanted = None if loaded is None else set(loaded)
        blocks = [
            f"### {sid}\n{skill.get_system_instructions().strip()}"
            for sid, skill in self._available(config)
            if wanted is None or sid in wanted
        ]
        return "\n\n".join(blocks)


def merge_index(s3_skills: Sequence[SkillInfo], code_skills: Sequence[SkillInfo]) -> list[SkillInfo]:
    """One index of S3 and code skills, by id; a code skill wins an id clash."""
    merged = {s.id: s for s in s3_skills}
    merged.update({s.id: s for s in code_skills})
    return sorted(merged.values(), key=lambda s: s.id)
