"""The demo's scripted model: the steps of the progressive-disclosure flow, and the task.

Each step reads the conversation so far (the system prompt the skills middleware
built, the results of earlier tool calls) and answers with the next tool call, so a
`ScriptedChatModel` walks the real flow with no model provider:

    ls("/") -> the index in the prompt -> cargar_habilidad("escrituras/compraventa")
    -> ls("/skills") -> read the clauses, the example and the PDF template
    -> write /workspace/borrador.md -> answer
"""

from __future__ import annotations

import base64
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from s3skills.testing.scripted import ScriptStep, tool_call

__all__ = ["DRAFT_PATH", "SKILL_ID", "SYSTEM_PROMPT", "TASK", "demo_steps", "message_text", "tool_failure"]

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
_READ_LIMIT = 400  # lines: every file of the example skill fits in one read


def message_text(content: Any) -> str:
    """The text of a message's content (a string, or a list of text parts and blocks)."""
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


def tool_failure(message: ToolMessage | None) -> str | None:
    """The error text of a tool result, or None when the tool succeeded."""
    if message is None:
        return "no result"
    text = message_text(message.content)
    return text if message.status == "error" or text.startswith("Error") else None


def _skill_files(messages: list[BaseMessage]) -> list[str]:
    loaded = message_text(getattr(_last(messages, "cargar_habilidad"), "content", ""))
    match = re.search(r"Files: (.*?)\.(?: Note:|$)", loaded)
    return match.group(1).split(", ") if match else []


def _pick(messages: list[BaseMessage], pattern: str, fallback: str) -> str:
    return next((p for p in _skill_files(messages) if re.search(pattern, p)), fallback)


def _load(messages: list[BaseMessage]) -> AIMessage:
    system = next((m for m in messages if isinstance(m, SystemMessage)), None)
    index = message_text(system.content) if system is not None else ""
    ids = re.findall(r"<location>([^<]+)</location>", index) or re.findall(r"[\w-]+/compraventa", index)
    skill = next((s for s in ids if s.rsplit("/", 1)[-1] == "compraventa"), None)
    if skill is None:
        return AIMessage(content="No encuentro ninguna habilidad de compraventa en mi biblioteca.")
    return _call("cargar_habilidad", skill_path=skill)


def _list_skills(messages: list[BaseMessage]) -> AIMessage:
    error = tool_failure(_last(messages, "cargar_habilidad"))
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
    error = tool_failure(clauses) or tool_failure(template)
    if error or clauses is None or template is None:
        return AIMessage(content=f"No he podido leer los archivos de la habilidad: {error}")
    blocks = [b for b in template.content if isinstance(b, dict)] if isinstance(template.content, list) else []
    size = len(base64.b64decode(blocks[0].get("base64", ""))) if blocks else 0
    return _call("write_file", file_path=DRAFT_PATH, content=_draft(message_text(clauses.content), size))


def _answer(messages: list[BaseMessage]) -> AIMessage:
    written = next((a for n, a, m in reversed(_results(messages)) if n == "write_file" and not tool_failure(m)), None)
    if written is None:
        return AIMessage(content=f"No he podido guardar el borrador: {tool_failure(_last(messages, 'write_file'))}")
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
