"""Multi-line and multi-turn requests for `s3skills find` and `s3skills eval`.

A request is one message (any text, as many lines as the user typed or pasted), or a
conversation: `{"turns": [{"role": "user" | "assistant", "content": "..."}, ...]}` ending with
the user's turn. The agent ranks a conversation from its user turns (the latest first, the
two before at a lower weight) and at most the last `Limits.max_prompt_query_chars`
characters of them (`SkillsPromptMiddleware`); `agent_turns` gives exactly what it ranks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from s3skills.cli.context import UsageError

__all__ = ["MAX_INPUT_BYTES", "MAX_TURNS", "Turns", "agent_turns", "parse_turns", "read_request", "request_bytes"]

MAX_INPUT_BYTES = 1 << 20
"""The largest request `find --file` reads (1 MiB)."""

MAX_TURNS = 200
"""The most turns of one conversation."""

_MAX_TURN_CHARS = 100_000  # one turn's content: the agent ranks on the last 8,000 characters anyway

Turns = tuple[tuple[str, str], ...]
"""A conversation: (role, content) pairs, oldest first, ending with the user's."""


def parse_turns(value: Any, where: str) -> Turns:
    """The turns of a conversation given as `[{"role": "user"|"assistant", "content": text}, ...]`.

    Raises:
        UsageError: Not a non-empty list of such objects (no other keys, non-empty text), more
            than `MAX_TURNS` turns, a turn longer than 100,000 characters, or a last turn that
            is not the user's; the message names `where` and the turn.
    """
    if not isinstance(value, list) or not value:
        raise UsageError(f'{where}: "turns" must be a non-empty list of {{"role": ..., "content": ...}}')
    if len(value) > MAX_TURNS:
        raise UsageError(f"{where}: {len(value)} turns; at most {MAX_TURNS}")
    out: list[tuple[str, str]] = []
    for n, turn in enumerate(value):
        if not isinstance(turn, dict) or set(turn) != {"role", "content"}:
            raise UsageError(f'{where}: turn {n} must be {{"role": "user"|"assistant", "content": text}}')
        role, content = turn["role"], turn["content"]
        if role not in ("user", "assistant"):
            raise UsageError(f"{where}: turn {n}: the role must be user or assistant")
        if not isinstance(content, str) or not content.strip():
            raise UsageError(f"{where}: turn {n}: the content must be non-empty text")
        if len(content) > _MAX_TURN_CHARS:
            raise UsageError(f"{where}: turn {n} is longer than {_MAX_TURN_CHARS} characters")
        out.append((role, content))
    if out[-1][0] != "user":
        raise UsageError(f"{where}: the last turn must be the user's")
    return tuple(out)


def request_bytes(path: str) -> bytes:
    """The bytes of a request file (`-`: standard input), at most `MAX_INPUT_BYTES` + 1.

    Raises:
        UsageError: The file cannot be read (the message names it and why).
    """
    import sys

    if path == "-":
        return sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the request ({exc.strerror or exc})") from None


def read_request(data: bytes, where: str) -> Turns:
    """A request file's bytes as turns: a JSON object with `turns` is a conversation, anything
    else is one user message (its text as written, every line).

    Raises:
        UsageError: Larger than `MAX_INPUT_BYTES`, not UTF-8, empty, or a bad conversation.
    """
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{where}: the request is larger than {MAX_INPUT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None  # a message that happens to start with a brace: the text as written
        if isinstance(doc, dict) and "turns" in doc:
            if set(doc) != {"turns"}:
                raise UsageError(f'{where}: a conversation is {{"turns": [...]}} and nothing else')
            return parse_turns(doc["turns"], where)
    if not text.strip():
        raise UsageError(f"{where}: the request is empty: give the words of a request")
    return (("user", text),)


def agent_turns(turns: Turns, max_chars: int) -> list[str]:
    """The user turns the agent ranks, newest first, cut as `SkillsPromptMiddleware` cuts them
    (`recent_requests`: the last `max_chars` characters of them together)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from s3skills.middleware.skills_prompt import recent_requests

    messages: Sequence[Any] = [HumanMessage(c) if r == "user" else AIMessage(c) for r, c in turns]
    return recent_requests({"messages": list(messages)}, max_chars=max_chars)
