"""Printing a demo run: the transcript (rich), or its one-line summary."""

from __future__ import annotations

from typing import Any, TextIO

from s3skills.demo.result import DemoResult

__all__ = ["render", "summary"]


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


def render(result: DemoResult, *, quiet: bool = False, file: TextIO | None = None) -> None:
    """Print the transcript with rich on `file` (stdout by default); only the summary line when `quiet`."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.table import Column, Table
    from rich.text import Text

    if quiet:
        print(summary(result), file=file)
        return
    console = Console(file=file, highlight=False)
    where = "embedded S3 (moto)" if result.embedded else "S3"
    console.print(Rule("s3skills demo"))
    seeded = result.seeded
    head = (
        f"{where} at {result.endpoint_url} · bucket {result.bucket} · user {result.user} · thread {result.thread_id}"
        f" · model {result.model}\nSeeded {len(seeded['skills'])} skills ({seeded['uploaded']} files uploaded, "
        f"{seeded['unchanged']} unchanged) into {result.library}: {', '.join(seeded['skills'])}"
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
