"""`s3skills demo`: a new user's first command, a real agent run over a real S3 API.

With no options it starts an embedded S3 (moto on a loopback port), pushes the bundled
Spanish example library for the user `ana`, and runs a real deepagents loop built by
`create_skills_agent`. The model is a `ScriptedChatModel` whose steps read the tool
results, so the run walks the progressive-disclosure flow with no model provider:

    ls("/") -> the index in the prompt -> cargar_habilidad("escrituras/compraventa")
    -> its SKILL.md in the prompt -> ls("/skills") -> read the clauses, the example and
    the PDF template -> write /workspace/borrador.md -> answer

It prints what the model saw, each tool call, and the S3 requests each step cost.
`--model provider:name` runs the same task with a real model; `--endpoint-url`,
`--bucket` and `--user` run it against LocalStack, SeaweedFS or AWS instead.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import aioboto3
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from s3skills._loop import run_sync
from s3skills.seed import seed_example_library, session_for
from s3skills.testing.scripted import ScriptedChatModel, ScriptStep, tool_call

__all__ = [
    "DEMO_BUCKET",
    "DEMO_USER",
    "DemoError",
    "DemoResult",
    "PromptRecorder",
    "StepRecord",
    "demo_steps",
    "embedded_s3",
    "load_model",
    "main",
    "render",
    "run_demo",
    "summary",
]

DEMO_USER = "ana"
DEMO_BUCKET = "s3skills-demo"
SKILL_ID = "escrituras/compraventa"
DRAFT_PATH = "/workspace/borrador.md"
SYSTEM_PROMPT = (
    "Eres el asistente de una notaría española. Trabajas con las habilidades de tu biblioteca: "
    "carga la que corresponda a la tarea y sigue sus instrucciones. Responde en español."
)
TASK = (
    "Prepara un borrador de escritura de compraventa de un piso en Madrid y guárdalo en "
    f"{DRAFT_PATH}. Deja marcados los datos que falten."
)
_EMBEDDED_KEY = "s3skills-demo"  # dummy credentials, given to the embedded server's client only
_READ_LIMIT = 400  # lines: every file of the example skill fits in one read
# Providers whose API key init_chat_model reads from <PROVIDER>_API_KEY (or the name given here).
_KEYED_PROVIDERS = ("anthropic", "openai", "azure_openai", "google_genai", "mistralai", "groq", "deepseek", "xai")
_KEY_NAMES = {"google_genai": "GOOGLE_API_KEY", "mistralai": "MISTRAL_API_KEY"}


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
    """Everything the demo did, as printed (and as `--json` writes it)."""

    endpoint_url: str
    embedded: bool
    bucket: str
    user: str
    thread_id: str
    model: str
    seeded: dict[str, Any]
    seed_requests: dict[str, int]
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


# -- the scripted model: each step reads the conversation so far ---------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part if isinstance(part, str) else str(part.get("text", "")) for part in content or [])


def _results(messages: list[BaseMessage]) -> list[tuple[str, dict[str, Any], ToolMessage]]:
    """(tool name, args, result) of every tool call answered so far, in order."""
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return [
        (calls[m.tool_call_id]["name"], calls[m.tool_call_id]["args"], m)
        for m in messages
        if isinstance(m, ToolMessage) and m.tool_call_id in calls
    ]


def _last(messages: list[BaseMessage], name: str, path_part: str = "") -> ToolMessage | None:
    found = [m for n, a, m in _results(messages) if n == name and path_part in str(a.get("file_path", ""))]
    return found[-1] if found else None


def _call(name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(name, args)])


def _failed(message: ToolMessage | None) -> str | None:
    if message is None:
        return "no result"
    text = _text(message.content)
    return text if message.status == "error" or text.startswith("Error") else None


def _skill_files(messages: list[BaseMessage]) -> list[str]:
    loaded = _text(getattr(_last(messages, "cargar_habilidad"), "content", ""))
    match = re.search(r"Files: (.*?)\.(?: Note:|$)", loaded)
    return match.group(1).split(", ") if match else []


def _pick(messages: list[BaseMessage], pattern: str, fallback: str) -> str:
    return next((p for p in _skill_files(messages) if re.search(pattern, p)), fallback)


def _load(messages: list[BaseMessage]) -> AIMessage:
    system = next((m for m in messages if isinstance(m, SystemMessage)), None)
    index = _text(system.content) if system is not None else ""
    ids = re.findall(r"<location>([^<]+)</location>", index) or re.findall(r"[\w-]+/compraventa", index)
    skill = next((s for s in ids if s.rsplit("/", 1)[-1] == "compraventa"), None)
    if skill is None:
        return AIMessage(content="No encuentro ninguna habilidad de compraventa en mi biblioteca.")
    return _call("cargar_habilidad", skill_path=skill)


def _list_skills(messages: list[BaseMessage]) -> AIMessage:
    error = _failed(_last(messages, "cargar_habilidad"))
    if error:
        return AIMessage(content=f"No he podido cargar la habilidad: {error}")
    return _call("ls", path="/skills")


def _reader(pattern: str, fallback: str) -> ScriptStep:
    def read(messages: list[BaseMessage]) -> AIMessage:
        return _call("read_file", file_path=_pick(messages, pattern, fallback), offset=0, limit=_READ_LIMIT)

    return read


def _draft(clauses: str, template_bytes: int) -> str:
    """A draft deed in Markdown from the text of the standard clauses, placeholders kept."""
    body = re.sub(r"^@@.*@@\n", "", clauses)  # deepagents' read header
    body = re.sub(r"\*[^*]+\*", "", body).replace("[ciudad]", "Madrid")  # drop the notes to the drafter
    body = re.sub(r"[ \t]+\n", "\n", body)
    sections = [s.strip() for s in re.split(r"^## ", body, flags=re.MULTILINE)[1:] if s.strip()]
    parts = [
        "# Borrador: escritura de compraventa de vivienda en Madrid",
        "> Borrador para revisión del notario. Los datos entre corchetes están pendientes.",
        f"> Orden de secciones según la plantilla del despacho (plantilla.pdf, {template_bytes} bytes).",
    ]
    for section in sections:
        title, _, text = section.partition("\n")
        paragraphs = re.sub(r"\n{3,}", "\n\n", text.strip())
        parts.append(f"## {title.strip()}\n\n{paragraphs}")
    return "\n\n".join(parts) + "\n"


def _write(messages: list[BaseMessage]) -> AIMessage:
    clauses, template = _last(messages, "read_file", "disclosure_"), _last(messages, "read_file", ".pdf")
    error = _failed(clauses) or _failed(template)
    if error or clauses is None or template is None:
        return AIMessage(content=f"No he podido leer los archivos de la habilidad: {error}")
    blocks = [b for b in template.content if isinstance(b, dict)] if isinstance(template.content, list) else []
    size = len(base64.b64decode(blocks[0].get("base64", ""))) if blocks else 0
    return _call("write_file", file_path=DRAFT_PATH, content=_draft(_text(clauses.content), size))


def _answer(messages: list[BaseMessage]) -> AIMessage:
    written = next((a for n, a, m in reversed(_results(messages)) if n == "write_file" and not _failed(m)), None)
    if written is None:
        return AIMessage(content=f"No he podido guardar el borrador: {_failed(_last(messages, 'write_file'))}")
    draft = str(written["content"])
    sections, pending = len(re.findall(r"^## ", draft, re.MULTILINE)), len(re.findall(r"\[[^\]]+\]", draft))
    return AIMessage(
        content=(
            f"He cargado la habilidad {SKILL_ID}, he leído sus cláusulas estándar, el ejemplo y la "
            f"plantilla en PDF, y he guardado el borrador en {written['file_path']} ({sections} secciones). "
            f"Quedan {pending} datos por completar, marcados entre corchetes: partes, finca, precio y medios "
            "de pago. Si quiere, calculo el ITP con la habilidad calculos/impuestos-transmision."
        )
    )


def demo_steps() -> list[ScriptStep]:
    """The scripted model's steps: the progressive-disclosure flow of the demo."""
    return [
        _call("ls", path="/"),
        _load,
        _list_skills,
        _reader(r"/disclosure_[^/]*\.md$", "/skills/compraventa/disclosure_clausulas.md"),
        _reader(r"/resources/ejemplo\.md$", "/skills/compraventa/resources/ejemplo.md"),
        _reader(r"\.pdf$", "/skills/compraventa/resources/plantilla.pdf"),
        _write,
        _answer,
    ]


class PromptRecorder(AgentMiddleware[Any, Any]):
    """Keeps the system prompt of every model call (runs inside the skills middleware)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def _keep(self, request: ModelRequest[Any]) -> None:
        self.prompts.append(_text(request.system_message.content) if request.system_message else "")

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
    """Run a moto S3 server on a free loopback port; yield its endpoint URL; stop it."""
    from moto.server import ThreadedMotoServer  # only the embedded mode needs moto

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
    user: str = DEMO_USER,
    region: str | None = None,
    model: str | None = None,
) -> DemoResult:
    """Seed the example library and run the agent once (see the module docstring).

    Args:
        endpoint_url: An S3-compatible endpoint. With neither this nor `bucket`, an
            embedded moto server is started, and stopped at the end.
        bucket: The bucket (created if missing); `s3skills-demo` by default.
        user: The user whose library is seeded and who runs the agent.
        region: The region.
        model: `provider:name` for a real model; the scripted model otherwise.

    Raises:
        DemoError: A setup step failed, or the scripted run did not do what it shows.
    """
    chat_model = load_model(model) if model else None  # fail before starting anything
    if endpoint_url is None and bucket is None:
        with embedded_s3() as url:
            session = aioboto3.Session(
                aws_access_key_id=_EMBEDDED_KEY, aws_secret_access_key=_EMBEDDED_KEY, region_name="us-east-1"
            )
            return _run(url, DEMO_BUCKET, user, session, chat_model, embedded=True)
    session = session_for(endpoint_url, region)
    return _run(endpoint_url, bucket or DEMO_BUCKET, user, session, chat_model, embedded=False)


def _run(
    endpoint: str | None, bucket: str, user: str, session: aioboto3.Session, chat_model: Any, *, embedded: bool
) -> DemoResult:
    from s3skills import RequestCounter, S3Backend, SkillsContext, Tenant, create_skills_agent

    started = time.monotonic()
    backend = S3Backend(bucket, endpoint_url=endpoint, region_name=session.region_name, session=session)
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    report = seed_example_library(backend.store, user, create_bucket=True)
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
    backend.store.remove_request_hook(counter)
    result.index = _skills_section(recorder.prompts[0]) if recorder.prompts else ""
    after = next((p for p in recorder.prompts if f"### Current skill: {SKILL_ID}" in p), "")
    section = _skills_section(after)
    result.skill_section = section[section.find("### Loaded skills") :] if section else ""
    tenant = Tenant(user_id=user, thread_id=result.thread_id)
    draft_key = backend.layout.workspace_prefix(tenant) + DRAFT_PATH.removeprefix("/workspace/")
    result.checks = _checks(result, draft_exists=run_sync(backend.store.aexists(draft_key)))
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
            result.final_answer = step.result = _text(message.content)
            step.status = "ok"
        return
    found: StepRecord | None = pending.pop(str(getattr(message, "tool_call_id", "")), None)
    if not isinstance(message, ToolMessage) or found is None:
        return
    found.tool_requests = spent
    found.status = "error" if _failed(message) else "ok"
    blocks = [b for b in message.content if isinstance(b, dict)] if isinstance(message.content, list) else []
    if blocks and "base64" in blocks[0]:
        data, kind, mime = base64.b64decode(blocks[0]["base64"]), blocks[0].get("type"), blocks[0].get("mime_type")
        found.block = {"type": kind, "mime_type": mime, "bytes": len(data), "header": data[:8].decode("latin-1")}
        found.result = f"[{kind} block: {mime}, {len(data)} bytes]"
    else:
        found.result = _text(message.content)[:4000]


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


# -- output ----------------------------------------------------------------------------------------


def _ops(counts: dict[str, int]) -> str:
    return " ".join(f"{op}×{n}" for op, n in sorted(counts.items())) or "none"


def _trim(text: str, lines: int = 6, chars: int = 600) -> str:
    rows = text.strip().splitlines()
    out = "\n".join(rows[:lines])[:chars]
    hidden = len(text.strip()) - len(out)
    return out + (f"\n… ({hidden} more characters)" if hidden > 0 else "")


def _args(args: dict[str, Any]) -> str:
    shown = {k: (v if not isinstance(v, str) or len(v) < 60 else f"<{len(v)} characters>") for k, v in args.items()}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


def summary(result: DemoResult) -> str:
    """The one-line summary printed at the end."""
    reads = [s for s in result.steps if s.name == "read_file" and s.status == "ok"]
    calls = sum(1 for s in result.steps if s.name != "answer")
    loaded, written = result.checks.get("skill_loaded"), result.checks.get("draft_written")
    return (
        f"{'demo ok' if result.ok else 'demo finished, some checks failed'}: {len(result.seeded['skills'])} skills "
        f"seeded for {result.user}; {'compraventa loaded' if loaded else 'no skill loaded'}; {len(reads)} files read "
        f"({sum(1 for s in reads if s.block)} PDF); {'borrador.md written' if written else 'no draft written'}; "
        f"{sum(result.requests.values())} S3 requests for {calls} tool calls in {result.seconds:.1f} s"
    )


def render(result: DemoResult, *, quiet: bool = False) -> None:
    """Print the transcript with rich (only the summary line when `quiet`)."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.table import Column, Table
    from rich.text import Text

    if quiet:
        print(summary(result))
        return
    console = Console(highlight=False)
    where = "embedded S3 (moto)" if result.embedded else "S3"
    console.print(Rule("s3skills demo"))
    seeded = result.seeded
    head = (
        f"{where} at {result.endpoint_url} · bucket {result.bucket} · user {result.user} · thread {result.thread_id}"
        f" · model {result.model}\nSeeded {len(seeded['skills'])} skills ({seeded['uploaded']} files uploaded, "
        f"{seeded['unchanged']} unchanged) into {result.user}/skills/: {', '.join(seeded['skills'])}"
    )
    console.print(Text(head))
    console.print(Panel(Text(_trim(result.index, 40, 4000)), title="Skills index the model saw (system prompt)"))
    for step in result.steps:
        call = "final answer" if step.name == "answer" else f"{step.name}({_args(step.args)})"
        console.print(Text(f"▶ {step.index}. {call}", style="bold"))
        if step.name != "answer":
            style = "red" if step.status == "error" else "dim"
            console.print(Padding(Text(_trim(step.result), style=style), (0, 0, 0, 2), expand=False))
        tool = "" if step.name == "answer" else f" · tool {_ops(step.tool_requests)}"
        console.print(Text(f"  S3 requests: prompt {_ops(step.prompt_requests)}{tool}"))
    if result.skill_section:
        title = "Appended to the system prompt after cargar_habilidad"
        console.print(Panel(Text(_trim(result.skill_section, 18, 2000)), title=title))
    seeding, run = Column("seeding", justify="right"), Column("agent run", justify="right")
    table = Table("operation", seeding, run, title="S3 requests per operation")
    for op in sorted({*result.seed_requests, *result.requests}):
        table.add_row(op, str(result.seed_requests.get(op, 0)), str(result.requests.get(op, 0)))
    console.print(table)
    console.print(Panel(Text(result.final_answer or "(no answer)"), title="Final answer"))
    for name, ok in result.checks.items():
        console.print(Text(f"{'✓' if ok else '✗'} {name}", style="green" if ok else "red"))
    console.print(Text(summary(result), style="bold"), soft_wrap=True)


# -- the command ------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="s3skills demo",
        description="Run an agent over the bundled Spanish skills library. With no options: an embedded "
        "S3 server and a scripted model; no network, no keys, no setup.",
    )
    parser.add_argument("--model", help="run with a real model, provider:name (needs its API key)")
    parser.add_argument("--endpoint-url", help="an S3-compatible endpoint (LocalStack, SeaweedFS): no embedded server")
    parser.add_argument("--bucket", help=f"bucket, created if missing (default {DEMO_BUCKET}): no embedded server")
    parser.add_argument("--user", default=DEMO_USER, help=f"user whose library is seeded (default {DEMO_USER})")
    parser.add_argument("--region", help="region (default: AWS_REGION, else us-east-1)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a machine-readable transcript")
    output.add_argument("--quiet", action="store_true", help="print only the summary line")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `s3skills demo` and `python -m s3skills.demo`. Returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        result = run_demo(
            endpoint_url=args.endpoint_url, bucket=args.bucket, user=args.user, region=args.region, model=args.model
        )
    except KeyboardInterrupt:
        print("s3skills demo: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        print(f"s3skills demo: error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")
    else:
        render(result, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
