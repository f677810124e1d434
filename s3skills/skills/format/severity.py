"""One severity policy for skill problems: what `validate`, `push`, `list` and `info` do with each.

Every problem found in a skill has one of three severities (`SEVERITIES`, the table):

| severity  | what it means                                    | validate | push              | agents / MCP      |
|-----------|--------------------------------------------------|----------|-------------------|-------------------|
| `fatal`   | the skill cannot be read (no name, bad YAML...)  | exit 1   | refused (--force) | skipped           |
| `error`   | breaks the Agent Skills specification (a name    | exit 1   | refused (--force) | loaded, reported  |
|           | that is not its folder's, a description too long)|          |                   |                   |
| `warning` | advice (unknown field, a long body...)           | exit 0   | pushed            | loaded            |

So what `validate` calls an error, `push` refuses without `--force`, and `list`/`info`
call it the same. The parser (`validate_skill_md`) reports `Problem(level, fatal)`; a
local tree reports `Finding`s (the same fields); the catalog reports `SkillProblem`s (a
skipped skill is `fatal`, a remark the loader kept is a tolerated specification
`error`). The `severity_of_*` functions map each to a `Severity`, and `Tally` counts
them by severity with the skills named, for every summary line and `--json`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from s3skills.skills.format.model import SkillProblem

__all__ = [
    "SEVERITIES",
    "Severity",
    "SeverityRule",
    "Tally",
    "severity_of",
    "severity_of_skill_problem",
]


class Severity(StrEnum):
    """How bad a problem is (see the module's table)."""

    FATAL = "fatal"
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class SeverityRule:
    """What each command does with a problem of one severity.

    Attributes:
        severity: The severity.
        meaning: One line for people.
        fails_validate: `validate` exits 1.
        push_needs_force: `push` refuses the skill unless `--force`.
        loaded: Agents (and the MCP server) can load the skill.
    """

    severity: Severity
    meaning: str
    fails_validate: bool
    push_needs_force: bool
    loaded: bool


SEVERITIES: dict[Severity, SeverityRule] = {
    Severity.FATAL: SeverityRule(
        Severity.FATAL,
        "the skill cannot be read: agents skip it",
        fails_validate=True,
        push_needs_force=True,
        loaded=False,
    ),
    Severity.ERROR: SeverityRule(
        Severity.ERROR,
        "breaks the Agent Skills specification: loaded, but fix it",
        fails_validate=True,
        push_needs_force=True,
        loaded=True,
    ),
    Severity.WARNING: SeverityRule(
        Severity.WARNING, "advice", fails_validate=False, push_needs_force=False, loaded=True
    ),
}
"""The table: one rule per severity, read by every command."""


class _Leveled(Protocol):
    @property
    def level(self) -> str: ...

    @property
    def fatal(self) -> bool: ...


def severity_of(problem: _Leveled) -> Severity:
    """The severity of a parser `Problem` or a local tree's `Finding` (`level` and `fatal`)."""
    if problem.fatal:
        return Severity.FATAL
    return Severity.ERROR if problem.level == "error" else Severity.WARNING


def severity_of_skill_problem(problem: SkillProblem) -> Severity:
    """The severity of a catalog `SkillProblem`: a skipped skill is fatal, a kept remark an error."""
    return Severity.FATAL if problem.level == "error" else Severity.ERROR


@dataclass
class Tally:
    """Problems counted by severity, each count with the skills it names."""

    skills: dict[Severity, list[str]] = field(default_factory=lambda: {s: [] for s in Severity})
    problems: dict[Severity, int] = field(default_factory=lambda: dict.fromkeys(Severity, 0))

    @classmethod
    def of(cls, items: Iterable[tuple[str, Severity]]) -> Tally:
        """Count `(skill, severity)` pairs (a skill is named once per severity)."""
        tally = cls()
        for skill, severity in items:
            tally.problems[severity] += 1
            if skill not in tally.skills[severity]:
                tally.skills[severity].append(skill)
        for names in tally.skills.values():
            names.sort()
        return tally

    def count(self, severity: Severity) -> int:
        """How many problems of `severity`."""
        return self.problems[severity]

    @property
    def failing_validate(self) -> bool:
        """Whether `validate` fails (a fatal problem or an error)."""
        return any(self.problems[s] for s in Severity if SEVERITIES[s].fails_validate)

    @property
    def blocking_push(self) -> list[str]:
        """The skills `push` refuses without `--force`."""
        return sorted({n for s in Severity if SEVERITIES[s].push_needs_force for n in self.skills[s]})

    def to_dict(self) -> dict[str, dict[str, object]]:
        """`{severity: {"problems": n, "skills": [...]}}` for `--json`."""
        return {str(s): {"problems": self.problems[s], "skills": list(self.skills[s])} for s in Severity}

    def summary(self, *, max_names: int = 12, zeros: bool = False) -> str:
        """`1 fatal (x), 2 errors (a, b)`: each count with the skills it names.

        Counts of zero are left out unless `zeros` (say them only when every severity
        was checked: the catalog, for one, records no warnings).
        """
        parts = []
        for s in Severity:
            n = self.problems[s]
            noun = str(s) if s is Severity.FATAL or n == 1 else f"{s}s"
            names = self.skills[s]
            if not n:
                if zeros:
                    parts.append(f"0 {noun}")
                continue
            more = f", +{len(names) - max_names} more" if len(names) > max_names else ""
            shown = ", ".join(names[:max_names]) + more
            parts.append(f"{n} {noun} ({'in ' if n > len(names) else ''}{shown})")
        return ", ".join(parts) or "no problems"
