"""Running the demo: the embedded S3, the agent, and the record of what each step cost.

`run_demo` seeds the bundled example library and runs a real deepagents loop built by
`create_skills_agent`, with the scripted model of `s3skills.demo.script` or a real
one (`model="provider:name"`). With no endpoint and no bucket it starts an embedded
S3 (a moto server on a loopback port), which needs the `demo` extra.
"""

from __future__ import annotations

import base64
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import aioboto3
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from s3skills import RequestCounter, S3Backend, SkillsContext, create_skills_agent
from s3skills.aio import run_sync
from s3skills.demo.result import DemoError, DemoResult, StepRecord
from s3skills.demo.script import DRAFT_PATH, SKILL_ID, SYSTEM_PROMPT, TASK, demo_steps, message_text, tool_failure
from s3skills.layout import KeyLayout
from s3skills.seed import library_prefix, seed_example_library, session_for
from s3skills.storage import ObjectStore, S3ObjectStore
from s3skills.testing.scripted import ScriptedChatModel

__all__ = ["DEMO_BUCKET", "DEMO_USER", "MOTO_MISSING", "PromptRecorder", "embedded_s3", "load_model", "run_demo"]

DEMO_USER = "ana"
DEMO_BUCKET = "s3skills-demo"
MOTO_MISSING = 'the embedded S3 server needs moto, which is not installed: pip install "s3skills[demo]"'
"""The one-line error when the embedded mode cannot import moto."""
_EMBEDDED_KEY = "s3skills-demo"  # dummy credentials, given to the embedded server's client only
# Providers whose API key init_chat_model reads from <PROVIDER>_API_KEY (or the name given here).
_KEYED_PROVIDERS = ("anthropic", "openai", "azure_openai", "google_genai", "mistralai", "groq", "deepseek", "xai")
_KEY_NAMES = {"google_genai": "GOOGLE_API_KEY", "mistralai": "MISTRAL_API_KEY"}


class PromptRecorder(AgentMiddleware[Any, Any]):
    """Keeps the system prompt of every model call (runs inside the skills middleware)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def _keep(self, request: ModelRequest[Any]) -> None:
        self.prompts.append(message_text(request.system_message.content) if request.system_message else "")

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        """Record the prompt, then call the model."""
        self._keep(request)
        return handler(request)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        """Async version of `wrap_model_call`."""
        self._keep(request)
        return await handler(request)


# -- setup ----------------------------------------------------------------------------------------


@contextmanager
def embedded_s3() -> Iterator[str]:
    """Run a moto S3 server on a free loopback port; yield its endpoint URL; stop it.

    Raises:
        DemoError: moto is not installed (`MOTO_MISSING` names the command that installs it).
    """
    try:
        from moto.server import ThreadedMotoServer  # only the embedded mode needs moto (the `demo` extra)
    except ImportError as exc:
        raise DemoError(MOTO_MISSING) from exc

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def load_model(spec: str) -> Any:
    """A real chat model for `provider:name`, or a one-line `DemoError` naming what is missing."""
    provider, sep, name = spec.partition(":")
    if not sep or not provider or not name:
        raise DemoError(f"--model {spec!r}: use provider:name, e.g. anthropic:claude-sonnet-4-5")
    key = _KEY_NAMES.get(provider, f"{provider.upper()}_API_KEY")
    if provider in _KEYED_PROVIDERS and not os.environ.get(key):
        raise DemoError(f"--model {spec}: set {key} to use this provider")
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec)
    except ImportError as exc:
        raise DemoError(f"--model {spec}: the provider's package is missing ({exc})") from exc
    except Exception as exc:
        raise DemoError(f"--model {spec}: {type(exc).__name__}: {exc}") from exc


# -- the run --------------------------------------------------------------------------------------


def run_demo(
    *,
    endpoint_url: str | None = None,
    bucket: str | None = None,
    user: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    model: str | None = None,
    layout: KeyLayout | None = None,
) -> DemoResult:
    """Seed the example library and run the agent once (see the module docstring).

    Args:
        endpoint_url: An S3-compatible endpoint. With neither this nor `bucket`, an
            embedded moto server is started, and stopped at the end.
        bucket: The bucket (created if missing); `s3skills-demo` by default.
        user: The user whose library is seeded and who runs the agent (`ana` by default).
        region: The region (default: `AWS_REGION`, else `us-east-1`).
        profile: An AWS profile for the credentials (not with the embedded server).
        model: `provider:name` for a real model; the scripted model otherwise.
        layout: Where keys live; `KeyLayout()` by default.

    Raises:
        DemoError: A setup step failed (moto missing for the embedded server, a model
            without its key, ...), or the scripted run did not do what it shows.
        S3SkillsError: The store failed (unreachable, credentials, access denied).
    """
    user = user or DEMO_USER
    layout = layout or KeyLayout()
    chat_model = load_model(model) if model else None  # fail before starting anything
    if endpoint_url is None and bucket is None:
        if profile is not None:
            raise DemoError("--profile needs --endpoint-url or --bucket: the embedded server takes no credentials")
        with embedded_s3() as url:
            session = aioboto3.Session(
                aws_access_key_id=_EMBEDDED_KEY, aws_secret_access_key=_EMBEDDED_KEY, region_name="us-east-1"
            )
            return _run(url, DEMO_BUCKET, user, session, chat_model, layout, embedded=True)
    session = session_for(endpoint_url, region, profile=profile)
    return _run(endpoint_url, bucket or DEMO_BUCKET, user, session, chat_model, layout, embedded=False)


def _run(
    endpoint: str | None,
    bucket: str,
    user: str,
    session: aioboto3.Session,
    chat_model: Any,
    layout: KeyLayout,
    *,
    embedded: bool,
) -> DemoResult:
    store = S3ObjectStore(bucket, endpoint_url=endpoint, region_name=session.region_name, session=session)
    backend = S3Backend(bucket, store=store, layout=layout)
    try:
        return _run_on(backend, store, endpoint, bucket, user, chat_model, embedded=embedded)
    finally:
        backend.close()


def _run_on(
    backend: S3Backend,
    store: ObjectStore,
    endpoint: str | None,
    bucket: str,
    user: str,
    chat_model: Any,
    *,
    embedded: bool,
) -> DemoResult:
    started = time.monotonic()
    counter = RequestCounter()
    store.add_request_hook(counter)
    report = seed_example_library(store, user, layout=backend.layout, create_bucket=True)
    result = DemoResult(
        endpoint_url=endpoint or "AWS",
        embedded=embedded,
        bucket=bucket,
        user=user,
        thread_id=f"demo-{uuid.uuid4().hex[:8]}",
        model=str(getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None) or "scripted"),
        seeded={
            "skills": report.skills,
            "uploaded": len(report.uploaded),
            "unchanged": len(report.skipped),
            "bytes": report.bytes_uploaded,
        },
        seed_requests=counter.counts,
        library=library_prefix(user, layout=backend.layout),
    )
    counter.reset()
    recorder = PromptRecorder()
    agent = create_skills_agent(
        chat_model or ScriptedChatModel(steps=demo_steps(), final="Listo."),
        backend=backend,
        system_prompt=SYSTEM_PROMPT,
        middleware=[recorder],
    )
    config: dict[str, Any] = {"configurable": {"thread_id": result.thread_id}, "recursion_limit": 60}
    pending: dict[str, StepRecord] = {}
    for chunk in agent.stream(
        {"messages": [HumanMessage(TASK)]}, config=config, context=SkillsContext(user_id=user), stream_mode="updates"
    ):
        spent = counter.counts  # the S3 requests of this graph step (model call or tool calls)
        counter.reset()
        for op, n in spent.items():
            result.requests[op] = result.requests.get(op, 0) + n
        for message in _messages(list(chunk.values())):
            _record(result, pending, message, spent)
            spent = {}
    store.remove_request_hook(counter)
    result.index = _skills_section(recorder.prompts[0]) if recorder.prompts else ""
    after = next((p for p in recorder.prompts if f"### Current skill: {SKILL_ID}" in p), "")
    section = _skills_section(after)
    result.skill_section = section[section.find("### Loaded skills") :] if section else ""
    draft_key = backend.layout.workspace_prefix(user, result.thread_id) + DRAFT_PATH.removeprefix("/workspace/")
    result.checks = _checks(result, draft_exists=run_sync(store.aexists(draft_key)))
    result.seconds = round(time.monotonic() - started, 2)
    if chat_model is None and not result.ok:
        failed = ", ".join(name for name, ok in result.checks.items() if not ok)
        raise DemoError(f"the scripted run did not complete its flow (failed checks: {failed})")
    return result


def _messages(update: Any) -> list[Any]:
    """The messages of a graph update (a dict, or a list of them for parallel tool calls)."""
    if isinstance(update, list):
        return [m for part in update for m in _messages(part)]
    found = update.get("messages", []) if isinstance(update, dict) else []
    return list(found) if isinstance(found, list) else [found]


def _record(result: DemoResult, pending: dict[str, StepRecord], message: Any, spent: dict[str, int]) -> None:
    if isinstance(message, AIMessage):
        for call in message.tool_calls or [{"name": "answer", "args": {}, "id": ""}]:
            step = StepRecord(len(result.steps) + 1, call["name"], dict(call["args"]), str(call["id"] or ""))
            step.prompt_requests, spent = spent, {}
            result.steps.append(step)
            pending[step.call_id] = step
        if not message.tool_calls:
            result.final_answer = step.result = message_text(message.content)
            step.status = "ok"
        return
    found: StepRecord | None = pending.pop(str(getattr(message, "tool_call_id", "")), None)
    if not isinstance(message, ToolMessage) or found is None:
        return
    found.tool_requests = spent
    found.status = "error" if tool_failure(message) else "ok"
    blocks = [b for b in message.content if isinstance(b, dict)] if isinstance(message.content, list) else []
    if blocks and "base64" in blocks[0]:
        data, kind, mime = base64.b64decode(blocks[0]["base64"]), blocks[0].get("type"), blocks[0].get("mime_type")
        found.block = {"type": kind, "mime_type": mime, "bytes": len(data), "header": data[:8].decode("latin-1")}
        found.result = f"[{kind} block: {mime}, {len(data)} bytes]"
    else:
        found.result = message_text(message.content)[:4000]


def _skills_section(prompt: str) -> str:
    """The part of a system prompt that `SkillsPromptMiddleware` appended."""
    at = prompt.rfind("\n## Skills\n")
    return prompt[at + 1 :] if at >= 0 else ""


def _checks(result: DemoResult, *, draft_exists: bool) -> dict[str, bool]:
    steps = result.steps
    first_ls = next((s for s in steps if s.name == "ls"), None)
    blocks = [s.block for s in steps if s.block]
    return {
        "index_lists_skill": f"<location>{SKILL_ID}</location>" in result.index or SKILL_ID in result.index,
        "root_has_no_skills": first_ls is not None and first_ls.status == "ok" and "/skills" not in first_ls.result,
        "skill_loaded": any(s.name == "cargar_habilidad" and s.status == "ok" for s in steps),
        "skill_md_in_prompt": "# Escritura de compraventa" in result.skill_section,
        "pdf_content_block": any(b["mime_type"] == "application/pdf" and b["header"][:5] == "%PDF-" for b in blocks),
        "draft_written": draft_exists and any(s.name == "write_file" and s.status == "ok" for s in steps),
    }
