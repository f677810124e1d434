"""What a demo run returns: `DemoResult` with a `StepRecord` per tool call, and `DemoError`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DemoError", "DemoResult", "StepRecord"]


class DemoError(Exception):
    """The demo could not run, or did not do what it shows; the message is one line."""


@dataclass
class StepRecord:
    """One tool call (or the final answer) and the S3 requests it cost.

    `prompt_requests` were spent building the prompt of the model call that chose the
    step (the skills index, the loaded SKILL.md); `tool_requests` by the tool itself.
    """

    index: int
    name: str
    args: dict[str, Any]
    call_id: str = ""
    status: str = "pending"
    result: str = ""
    block: dict[str, Any] | None = None
    prompt_requests: dict[str, int] = field(default_factory=dict)
    tool_requests: dict[str, int] = field(default_factory=dict)


@dataclass
class DemoResult:
    """Everything the demo did, as printed (and as `--json` writes it).

    `library` is the key prefix the example library was seeded into; `index` and
    `skill_section` are what the skills middleware appended to the system prompt
    before and after the skill was loaded.
    """

    endpoint_url: str
    embedded: bool
    bucket: str
    user: str
    thread_id: str
    model: str
    seeded: dict[str, Any]
    seed_requests: dict[str, int]
    library: str = ""
    index: str = ""
    skill_section: str = ""
    steps: list[StepRecord] = field(default_factory=list)
    final_answer: str = ""
    requests: dict[str, int] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "ok": self.ok, "total_requests": sum(self.requests.values())}
