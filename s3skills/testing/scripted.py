"""A scripted chat model: drives a real agent loop without a model provider.

Each step is an `AIMessage` or a function of the conversation so far that
returns one, so a script can react to tool results (the demo does). The model
records every request it got (`requests`: system prompt + messages), which is
what tests assert on. It is not a mock of the library: the agent, the tools,
the middleware and the backend all run for real.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from s3skills.skills.code.registry import tool_name

__all__ = ["ScriptStep", "ScriptedChatModel", "tool_call"]

ScriptStep = AIMessage | Callable[[list[BaseMessage]], AIMessage]

_ids = itertools.count(1)


def tool_call(name: str, args: dict[str, Any] | None = None, *, call_id: str | None = None) -> dict[str, Any]:
    """One tool call for an `AIMessage(tool_calls=[...])`."""
    return {"name": name, "args": args or {}, "id": call_id or f"call_{next(_ids)}", "type": "tool_call"}


class ScriptedChatModel(BaseChatModel):
    """Answers each model call with the next step of its script.

    Args:
        steps: The replies, in order. When the script runs out, the model answers
            `final` (a plain message), so a run always ends.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    steps: list[Any] = Field(default_factory=list)
    final: str = "Done."
    _position: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _requests: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _bound: list[str] = PrivateAttr(default_factory=list)
    _tools_seen: list[list[str]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def requests(self) -> list[list[BaseMessage]]:
        """Every conversation the model was called with (system message first)."""
        return list(self._requests)

    def system_prompts(self) -> list[str]:
        """The text of the system message of every call."""
        out = []
        for messages in self._requests:
            system = next((m for m in messages if isinstance(m, SystemMessage)), None)
            out.append(system.text if system is not None else "")
        return out

    @property
    def tools_seen(self) -> list[list[str]]:
        """The names of the tools bound for every call, in call order."""
        return list(self._tools_seen)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        """Record the tool names offered to the next call; the script decides the calls."""
        with self._lock:
            self._bound = [tool_name(t) for t in tools]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._requests.append(list(messages))
            self._tools_seen.append(list(self._bound))
            step = self.steps[self._position] if self._position < len(self.steps) else None
            self._position += 1
        if step is None:
            return AIMessage(content=self.final)
        message: AIMessage = step(list(messages)) if callable(step) else step
        return message.model_copy(update={"id": message.id or f"scripted-{next(_ids)}"})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])
