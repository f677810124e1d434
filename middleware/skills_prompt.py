"""`SkillsPromptMiddleware`: progressive disclosure in the system prompt.

On every model call it APPENDS to the caller's system prompt (never replaces
it): the compact index of the skills not yet loaded, where the loaded ones can
be read, and the full `SKILL.md` body of the current skill. With an unchanged
library this costs at most one LIST per model call (none within the catalog's
TTL): `SKILL.md` bodies are cached by ETag.

The current skill's `SKILL.md` is the version the thread loaded (`skill_versions`,
recorded by `cargar_habilidad`): an edit pushed mid-thread does not change the
instructions under the agent. Checking it costs no request (the pinned ETag is
compared with the index's); a pinned older version is read once, then cached.

The index is ranked for the conversation: the latest user message, with the two before
it at a lower weight (`s3skills.skills.ranking.rankers.order_for`), at most the last
`Limits.max_prompt_query_chars` characters of them together (8,000 by default: a long real
request is kept whole, a pasted megabyte is cut to its end), by the `ranker` (BM25F over
name, description and the body sketch the manifest carries, by default: no request per
call). Among the skills that match, those the user has used (this process's usage log,
keyed by the resolved user id) and those in the category of a skill the thread loaded
rank higher (`ranking.prior_for`). The budget follows the model: 1 % of its context window, never below 6,000
characters (`budget_for`), unless `budget_chars` is given. When the whole library does not
fit, the best ones are shown with their descriptions, the next ones by id, and the rest
counted by category with how to find them (`list_skills(query=...)`; `render.format_ranked`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Annotated, Any, Literal, NotRequired

from deepagents.middleware._utils import append_to_system_message
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
)
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from s3skills.aio import run_sync
from s3skills.errors import ConfigurationError, S3SkillsError
from s3skills.fs import S3Backend
from s3skills.ids import SkillId
from s3skills.skills import SkillChanged, SkillInfo, SkillRegistry, tool_name
from s3skills.skills.format import render
from s3skills.skills.ranking.rankers import EARLIER_TURNS, Ranker, category_counts, order_for, prior_for
from s3skills.skills.usage import skill_uses
from s3skills.tenancy import SkillPin, merge_loaded_skills, merge_skill_versions, thread_skills

__all__ = [
    "IndexFormat",
    "SkillsPromptMiddleware",
    "SkillsState",
    "budget_for",
    "latest_request",
    "merge_loaded_skills",
    "merge_skill_versions",
    "ranked_for",
    "recent_requests",
]

logger = logging.getLogger(__name__)

IndexFormat = Literal["xml", "yaml", "grouped"]


class SkillsState(AgentState[Any]):
    """Agent state with the skills of the thread (checkpointed with it).

    `skill_versions` maps each loaded skill id to the version it was loaded at
    (`s3skills.tenancy.SkillPin.to_state`).

    The three keys are written by `cargar_habilidad` only: they are left out of the
    graph's input schema (`OmitFromInput`, so a run's `input=` cannot set them), and
    since `threads.update_state` can still write them, every reader and both reducers
    validate them (`s3skills.tenancy.thread_skills`; bad entries are dropped, never raised).
    """

    current_skill: NotRequired[Annotated[str | None, OmitFromInput]]
    loaded_skills: NotRequired[Annotated[list[str], OmitFromInput, merge_loaded_skills]]
    skill_versions: NotRequired[Annotated[dict[str, Any], OmitFromInput, merge_skill_versions]]


_HEADER = """## Skills

You have a library of skills: folders with instructions (SKILL.md) and resources for \
specific tasks. Below is the index of those you have not loaded, the best matches for \
the latest request first. When a request matches one, load it with the \
`cargar_habilidad` ("load skill") tool (pass its id); its instructions \
then appear at the end of this prompt and its files become readable under \
/skills/<name>/. Read a skill's other files only when its instructions point to them."""

_FORMATS = ("xml", "yaml", "grouped")
DEFAULT_BUDGET_CHARS = 6000
"""The index budget when the model's context window is unknown, and the least one."""
CONTEXT_SHARE = 0.01
"""The share of the model's context window the index may take by default (1 %)."""
_CHARS_PER_TOKEN = 4


def _text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    parts = [b if isinstance(b, str) else b.get("text", "") for b in content if isinstance(b, str | dict)]
    return " ".join(p for p in parts if isinstance(p, str))


def recent_requests(state: Any, turns: int = 1 + EARLIER_TURNS, *, max_chars: int | None = None) -> list[str]:
    """The texts of the last `turns` user messages in `state["messages"]`, newest first.

    With `max_chars`, the texts together hold at most that many characters: the latest
    message keeps its last `max_chars` characters, and each earlier one the last of
    what is left (ranking costs CPU per character, and the end of a long message is
    the request that follows what was pasted above it).
    """
    messages = state.get("messages") if isinstance(state, dict) else None
    out: list[str] = []
    left = max_chars
    for message in reversed(messages or []):
        if len(out) >= turns or left == 0:
            break
        if getattr(message, "type", None) == "human":
            text = _text(message)
            if left is not None:
                text = text[-left:] if len(text) > left else text
                left -= len(text)
            out.append(text)
    return out


def latest_request(state: Any) -> str:
    """The text of the latest user message in `state["messages"]` ("" when there is none)."""
    found = recent_requests(state, 1)
    return found[0] if found else ""


def ranked_for(
    request: str | Sequence[str],
    skills: Sequence[SkillInfo],
    exclude: set[str],
    *,
    ranker: Ranker | None = None,
    prior: Mapping[str, float] | None = None,
) -> list[SkillInfo]:
    """`skills` without `exclude`, the matches of the request first (best first), the rest by id.

    `request` is the latest user message, or the user's turns newest first (the earlier
    ones count less: `s3skills.skills.ranking.rankers.order_for`); `prior` raises the skills the
    user uses (`s3skills.skills.ranking.rankers.prior_for`).
    """
    turns = [request] if isinstance(request, str) else list(request)
    return order_for(turns, skills, exclude, ranker=ranker, prior=prior)


def budget_for(model: Any, floor: int = DEFAULT_BUDGET_CHARS, share: float = CONTEXT_SHARE) -> int:
    """The index budget for `model`: `share` of its context window (about 4 characters a
    token), never below `floor`. A model whose profile does not say its window gets `floor`."""
    profile = getattr(model, "profile", None)
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return floor
    return max(floor, int(window * _CHARS_PER_TOKEN * share))


class SkillsPromptMiddleware(AgentMiddleware[SkillsState, Any]):
    """Shows the agent its skill index, and the instructions of the skill it loaded.

    Args:
        backend: The `S3Backend` the agent uses (its catalog and tenancy).
        category: Only index skills of this category.
        budget_chars: Most characters the index may take in the prompt (when the
            library does not fit, the skills that best match the conversation are
            shown and the rest are summarised by category). None (the default):
            1 % of the model's context window, never below 6,000 (`budget_for`).
        index_format: `xml` (`<available_skills>`), `yaml` (frontmatter blocks)
            or `grouped` (a human list by category).
        mode: `on_demand` (index + load) or `preload` (every skill's instructions
            in the prompt, seed 001's pre-injection; fine for small libraries).
        instructions_budget_chars: Most characters of a loaded SKILL.md body shown.
        registry: Code skills: indexed with the S3 skills; their tools are hidden
            from the model until their skill is loaded.
        ranker: Who orders the index for the conversation (`s3skills.skills.Ranker`);
            the local lexical `LexicalRanker` by default. Called in a worker thread.
    """

    state_schema = SkillsState

    def __init__(
        self,
        backend: S3Backend,
        *,
        category: str | None = None,
        budget_chars: int | None = None,
        index_format: IndexFormat = "xml",
        mode: Literal["on_demand", "preload"] = "on_demand",
        instructions_budget_chars: int = 40_000,
        registry: SkillRegistry | None = None,
        ranker: Ranker | None = None,
    ) -> None:
        super().__init__()
        if index_format not in _FORMATS:
            raise ValueError(f"index_format must be one of {sorted(_FORMATS)}")
        self.backend = backend
        self.library = backend.skills.with_registry(registry)
        self.category = category
        self.budget_chars = DEFAULT_BUDGET_CHARS if budget_chars is None else budget_chars
        self.follow_model = budget_chars is None
        self.ranker = ranker
        self.index_format = index_format
        self.mode = mode
        self.instructions_budget_chars = instructions_budget_chars
        self.registry = registry

    async def build_prompt(self, state: Any, *, budget_chars: int | None = None) -> str:
        """The text appended to the system prompt for this state ("" for an allowed user-less run).

        `budget_chars` is this call's index budget (by default `self.budget_chars`).

        Raises:
            UserNotResolved: The run has no user and the backend does not `allow_anonymous`
                (so the run fails before the model is called).
            ConfigurationError: The index cannot be read because the deployment is wrong
                (no bucket, no or rejected credentials, access denied, an endpoint that is not
                S3; the message names the bucket and `exc.fix`, what to change): the run fails
                rather than telling the model to try again. A transient
                fault still gives the prompt an "unavailable, try again later" note.
        """
        user_id = self.backend.require_user().user_id
        if user_id is None:  # allowed anonymous: no library
            return ""
        # State is client input: read it through the one validator (ids, pins, current).
        thread = thread_skills(state)
        loaded, current, pins = thread.loaded, thread.current, thread.pins
        try:
            everything = await self.library.aindex()
        except ConfigurationError as exc:  # no bucket, no credentials, denied: retrying will not help
            logger.error("skill index misconfigured: %s: %s", exc, exc.fix)
            # For the application's developer (the model never sees it): the bucket and the fix.
            where = f"bucket {self.library.store.bucket!r}"
            raise type(exc)(f"{exc} ({where}): {exc.fix}") from exc
        except S3SkillsError as exc:
            logger.warning("skill index unavailable: %s", exc)
            return f"{_HEADER}\n\n(The skill index is unavailable right now: {exc}. Try again later.)"
        skills = [s for s in everything if s.category == self.category] if self.category else everything
        parts = [_HEADER]
        if self.mode == "preload":
            parts.append(await self._preloaded(skills))
        else:
            # In a worker thread: a new library version is indexed there (~1 s at 10,000 skills),
            # never on the event loop that serves the other calls.
            # Ranked from the last `Limits.max_prompt_query_chars` (8,000) characters of the
            # latest user turns: a request of a few thousand characters is kept whole, and a
            # pasted megabyte costs the ranking no more than those.
            turns = recent_requests(state, max_chars=self.library.config.limits.max_prompt_query_chars)
            # The prior is the server's own record of this user's uses (the usage log) and
            # the thread's validated loaded skills; it only reorders skills that match.
            prior = prior_for(skill_uses(user_id), loaded)
            pending = await asyncio.to_thread(
                partial(ranked_for, turns, skills, set(loaded), ranker=self.ranker, prior=prior)
            )
            if pending:
                budget = self.budget_chars if budget_chars is None else budget_chars
                counts = category_counts(skills, set(loaded))
                parts.append(
                    render.format_ranked(pending, budget, index_format=self.index_format, category_counts=counts)
                )
            else:
                parts.append("(Every skill in the index is loaded.)")
        if loaded:
            lines = [
                f"- {sid}: "
                + (
                    "(code skill: its tools are available)"
                    if self._is_code(sid)
                    else f"/skills/{SkillId.parse(sid).leaf}/"
                    + (f" (version {pins[sid].version})" if sid in pins else "")
                )
                for sid in loaded
            ]
            parts.append("### Loaded skills\n" + "\n".join(lines))
        if current is not None:
            skill = next((s for s in everything if s.id == current), None)
            parts.append(await self._current(current, skill, pins.get(current)))
        return "\n\n".join(parts)

    def _is_code(self, skill_id: str) -> bool:
        return self.registry is not None and self.registry.get(skill_id) is not None

    async def _current(self, skill_id: str, skill: SkillInfo | None, pin: SkillPin | None = None) -> str:
        if skill is None:
            return f"### Current skill: {skill_id}\n(It is no longer in the library, or it was disabled.)"
        try:
            body = _clip(await self.library.ainstructions_pinned(skill, pin), self.instructions_budget_chars)
        except SkillChanged:
            return (
                f"### Current skill: {skill_id}\n(Its SKILL.md changed since you loaded it, and the old version "
                "is not kept: reload it with cargar_habilidad to get its new instructions.)"
            )
        except S3SkillsError as exc:
            return f"### Current skill: {skill_id}\n(Its SKILL.md cannot be read right now: {exc})"
        if skill.source == "code":
            return f"### Current skill: {skill_id}\n{body}"
        return (
            f"### Current skill: {skill_id}\n"
            f"Its files are under /skills/{SkillId.parse(skill_id).leaf}/. Its SKILL.md:\n\n{body}"
        )

    async def _preloaded(self, skills: Sequence[SkillInfo]) -> str:
        blocks = []
        for skill in skills:
            try:
                text = await self.library.ainstructions_of(skill)
            except S3SkillsError as exc:
                blocks.append(f"### {skill.id}\n(unavailable: {exc})")
                continue
            blocks.append(f"### {skill.id}\n{text.strip()}")
        return _clip("\n\n".join(blocks), self.instructions_budget_chars)

    def _hidden_tools(self, state: Any) -> set[str]:
        """Names of code-skill tools whose skill is not loaded (all shown in preload mode)."""
        if self.registry is None or self.mode == "preload":
            return set()
        loaded = set(thread_skills(state).loaded)
        return {name for name, sid in self.registry.all_tool_names().items() if sid not in loaded}

    def _budget(self, request: ModelRequest[Any]) -> int:
        """This call's index budget: follows the model unless one was set."""
        return budget_for(request.model, self.budget_chars) if self.follow_model else self.budget_chars

    def _override(self, request: ModelRequest[Any], text: str) -> ModelRequest[Any]:
        hidden = self._hidden_tools(request.state)
        tools = [t for t in request.tools if tool_name(t) not in hidden] if hidden else request.tools
        if not text:
            return request.override(tools=tools)
        return request.override(system_message=append_to_system_message(request.system_message, text), tools=tools)

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        call = request.tool_call
        if call["name"] not in self._hidden_tools(request.state or {}):
            return None
        owner = self.registry.all_tool_names().get(call["name"]) if self.registry else None
        return ToolMessage(
            content=(
                f"Error: the tool {call['name']} belongs to the skill '{owner}'; load it with cargar_habilidad first."
            ),
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
        )

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Refuse calls to tools of code skills that are not loaded."""
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async version of `wrap_tool_call`."""
        return self._refusal(request) or await handler(request)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Append the skills section to the system prompt, then call the model."""
        text = run_sync(self.build_prompt(request.state, budget_chars=self._budget(request)))
        return handler(self._override(request, text))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async version of `wrap_model_call`."""
        text = await self.build_prompt(request.state, budget_chars=self._budget(request))
        return await handler(self._override(request, text))


def _clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    note = "\n\n[... cut to fit the prompt; read the file for the rest ...]"
    return text[: max(0, budget - len(note))] + note
