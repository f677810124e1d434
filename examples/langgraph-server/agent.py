"""The graph `langgraph dev` serves: a skills agent over S3, for every authenticated user.

One `S3Backend` serves all tenants. Who a run acts for comes only from the user the
deployment's auth handler (`auth.py`) authenticated, through
`s3skills.serve.langgraph.langgraph_auth_identity`; a client's `context` or
`config["configurable"]` never picks the user.

Environment (the connection variables are those of every entry point, `s3skills.options`):
    S3SKILLS_BUCKET: The bucket (required).
    S3SKILLS_ENDPOINT_URL: An S3-compatible endpoint (else `AWS_ENDPOINT_URL_S3`,
        `AWS_ENDPOINT_URL`, else AWS). Credentials come from the usual AWS chain.
    S3SKILLS_REGION: The region (else `AWS_REGION`, `AWS_DEFAULT_REGION`).
    S3SKILLS_SHARED: An organisation library under every user's (`shared/{name}/skills/`);
        `S3SKILLS_SHARED_PREFIX` still works, with a deprecation warning.
    S3SKILLS_LAYOUT / S3SKILLS_LAYOUT_FILE: The key layout (default `users`: everything a
        user owns under `users/{user_id}/`), or a layout file.
    S3SKILLS_RANKER: `lexical` (default) or `hybrid` (needs `s3skills[embeddings]`).
    S3SKILLS_SHARED_CATALOG_TTL: Seconds the organisation library's index is trusted
        without asking S3 (default 5; `0` asks on every model call, so a push to it
        shows in the very next run).
    S3SKILLS_CHANNEL: Serve this channel of the libraries (`s3skills channel`), e.g.
        `production`: each skill at the version it names, none it does not (default: latest).
    S3SKILLS_MODEL: The model, as `provider:name` (e.g. `anthropic:claude-sonnet-4-5`).
    S3SKILLS_SCRIPTED: `1` to use a scripted model instead (no provider, for tests and
        smoke checks): each run loads the first skill of its index, reads files from the
        skill, /workspace and /ticket, writes /workspace/report.md and answers with a
        JSON report of what it saw. A user message of exactly `REPORT-ONLY` makes it
        answer the report at once (what the prompt shows, with the thread as it is).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from s3skills import S3Backend, create_skills_agent
from s3skills.config import SHARED_CATALOG_TTL
from s3skills.options import backend_keywords, build_ranker, resolve
from s3skills.serve.langgraph import LangGraphAuthResolver
from s3skills.testing.scripted import ScriptedChatModel, ScriptStep, tool_call

SYSTEM_PROMPT = "You are a helpful assistant. Use the skills of your library when a task calls for one."


class ConfigError(RuntimeError):
    """The server's environment does not describe a usable deployment."""


def _env(*names: str) -> str | None:
    return next((value for name in names if (value := os.environ.get(name))), None)


def _shared_catalog_ttl() -> float:
    raw = _env("S3SKILLS_SHARED_CATALOG_TTL")
    if raw is None:
        return SHARED_CATALOG_TTL
    try:
        ttl = float(raw)
    except ValueError:
        ttl = math.nan
    if not (math.isfinite(ttl) and ttl >= 0):
        raise ConfigError(f"S3SKILLS_SHARED_CATALOG_TTL must be a number of seconds >= 0, got {raw!r}")
    return ttl


@functools.cache
def backend() -> S3Backend:
    """The one backend instance every run shares (built on first use)."""
    bucket = _env("S3SKILLS_BUCKET")
    if bucket is None:
        raise ConfigError("set S3SKILLS_BUCKET to the bucket that holds the skills")
    try:
        keywords = backend_keywords()  # endpoint, region, shared library, layout
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return S3Backend(
        bucket,
        **keywords,
        shared_catalog_ttl=_shared_catalog_ttl(),
        resolver=LangGraphAuthResolver(),
        channel=_env("S3SKILLS_CHANNEL"),
    )


def _ranker() -> Any:
    """The ranker `S3SKILLS_RANKER` names (None: the lexical default)."""
    try:
        return build_ranker(resolve("ranker", None))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _scripted() -> bool:
    return os.environ.get("S3SKILLS_SCRIPTED", "") == "1"


@functools.cache
def _provider_agent() -> Any:
    model = _env("S3SKILLS_MODEL")
    if model is None:
        raise ConfigError("set S3SKILLS_MODEL=provider:name (or S3SKILLS_SCRIPTED=1 for the scripted model)")
    return create_skills_agent(model, backend(), system_prompt=SYSTEM_PROMPT, ranker=_ranker())


def make_graph() -> Any:
    """The graph of one run (LangGraph Server calls this factory per request).

    With a provider model the agent is built once and shared. The scripted model
    keeps its position in the script, so each run gets its own.
    """
    if _scripted():
        return create_skills_agent(
            ScriptedChatModel(steps=probe_steps()), backend(), system_prompt=SYSTEM_PROMPT, ranker=_ranker()
        )
    return _provider_agent()


# -- the scripted model: a run that shows what this user can see -------------------------------

WORKSPACE_NOTE = "/workspace/notes.md"
WORKSPACE_REPORT = "/workspace/report.md"
TICKET_FILE = "/ticket/brief.md"
SKILL_FILE = "references/private.md"
REPORT_ONLY = "REPORT-ONLY"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part if isinstance(part, str) else str(part.get("text", "")) for part in content or [])


def _system(messages: list[BaseMessage]) -> str:
    return next((_text(m.content) for m in messages if isinstance(m, SystemMessage)), "")


def _index(messages: list[BaseMessage]) -> list[str]:
    return re.findall(r"<location>([^<]+)</location>", _system(messages))


def _call(name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(name, args)])


def _read(path: str) -> AIMessage:
    return _call("read_file", file_path=path, offset=0, limit=200)


def _first_index(messages: list[BaseMessage]) -> list[str]:
    """The index the first model call saw (the load step wrote it into its message)."""
    first = next((m for m in messages if isinstance(m, AIMessage)), None)
    if first is None:
        return _index(messages)
    index: list[str] = json.loads(_text(first.content)).get("index", [])
    return index


def _report(messages: list[BaseMessage]) -> AIMessage:
    """The final answer: the first index, the last system prompt and every tool result, as JSON."""
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = [
        {"tool": calls[m.tool_call_id]["name"], "args": calls[m.tool_call_id]["args"], "result": _text(m.content)}
        for m in messages
        if isinstance(m, ToolMessage) and m.tool_call_id in calls
    ]
    report = {"index": _first_index(messages), "system_prompt": _system(messages), "results": results}
    return AIMessage(content=json.dumps(report))


def probe_steps() -> list[ScriptStep]:
    """The scripted run: load the first indexed skill, read, write, report."""

    def load(messages: list[BaseMessage]) -> AIMessage:
        index = _index(messages)
        latest = next((_text(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        if not index or latest.strip() == REPORT_ONLY:
            return _report(messages)
        step = _call("cargar_habilidad", skill_path=index[0])
        return step.model_copy(update={"content": json.dumps({"index": index})})

    def read_skill_file(messages: list[BaseMessage]) -> AIMessage:
        leaf = _first_index(messages)[0].rsplit("/", 1)[-1]
        return _read(f"/skills/{leaf}/{SKILL_FILE}")

    def write(messages: list[BaseMessage]) -> AIMessage:
        return _call("write_file", file_path=WORKSPACE_REPORT, content="Written by the scripted model.\n")

    return [
        load,
        read_skill_file,
        lambda messages: _read(WORKSPACE_NOTE),
        lambda messages: _read(TICKET_FILE),
        write,
        _report,
    ]
