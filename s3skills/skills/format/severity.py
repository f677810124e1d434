"""One severity policy for skill problems: what `validate`, `push`, `list` and `info` do with each.

The policy follows the hosts. The vercel `skills` CLI loads a skill whose `SKILL.md` has a
readable frontmatter with a `name` and a `description` and checks nothing else; Claude Code
is as lenient (it takes the folder name when `name` is missing). Neither refuses a name
that differs from its folder, uppercase or spaces in a name, a description over 1,024
characters or metadata values that are not strings. So neither does `push`: it stores what
the hosts load and says, one line per skill, what breaks the Agent Skills specification.
`push --strict` (for a curated library's CI) refuses instead, as `validate` fails.

Every problem found in a skill has one of three severities (`SEVERITIES`, the table):

| severity  | what it means                                  | validate | push            | --strict | agents / MCP |
|-----------|------------------------------------------------|----------|-----------------|----------|--------------|
| `fatal`   | cannot be read (no description, bad YAML...):  | exit 1   | left out, named | refused  | skipped      |
|           | no host loads it                               |          |                 |          |              |
| `error`   | breaks the Agent Skills specification (a name  | exit 1   | stored, named   | refused  | loaded,      |
|           | not its folder's, a description too long)      |          |                 |          | reported     |
| `warning` | advice (unknown field, a long body...)         | exit 0   | stored, counted | stored   | loaded       |

So what `validate` calls an error, `push --strict` refuses, and `list`/`info` call it the
same. The parser (`validate_skill_md`) reports `Problem(level, fatal)`; a local tree
reports `Finding`s (the same fields); the catalog reports `SkillProblem`s (a skipped skill
is `fatal`, a remark the loader kept is a tolerated specification `error`). The
`severity_of_*` functions map each to a `Severity`, and `Tally` counts them by severity
with the skills named, for every summary line and `--json`.

Whether MCP's `skills/list` can list a skill under its name is another rule
(`s3skills.skills.format.naming.unservable_reason`); `push` and `validate` name those
skills too.
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
        pushed: `push` stores the skill (False: it leaves the skill out and names it).
        named_by_push: `push` names each skill with the problem, one line each (else it
            only counts them).
        strict_refuses: `push --strict` refuses the push.
        loaded: Agents (and the MCP server) can load the skill.
    """

    severity: Severity
    meaning: str
    fails_validate: bool
    pushed: bool
    named_by_push: bool
    strict_refuses: bool
    loaded: bool


SEVERITIES: dict[Severity, SeverityRule] = {
    Severity.FATAL: SeverityRule(
        Severity.FATAL,
        "the skill cannot be read: no host loads it, agents skip it",
        fails_validate=True,
        pushed=False,
        named_by_push=True,
        strict_refuses=True,
        loaded=False,
    ),
    Severity.ERROR: SeverityRule(
        Severity.ERROR,
        "breaks the Agent Skills specification: hosts load it anyway, but fix it",
        fails_validate=True,
        pushed=True,
        named_by_push=True,
        strict_refuses=True,
        loaded=True,
    ),
    Severity.WARNING: SeverityRule(
        Severity.WARNING,
        "advice",
        fails_validate=False,
        pushed=True,
        named_by_push=False,
        strict_refuses=False,
        loaded=True,
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
    def refused_by_strict(self) -> list[str]:
        """The skills `push --strict` refuses (and `validate` fails on)."""
        return sorted({n for s in Severity if SEVERITIES[s].strict_refuses for n in self.skills[s]})

    @property
    def left_out_by_push(self) -> list[str]:
        """The skills `push` leaves out (no host could load them)."""
        return sorted({n for s in Severity if not SEVERITIES[s].pushed for n in self.skills[s]})

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
