"""`s3skills eval`: trigger evals for skill authors, offline, against the library as it is.

A queries file is a JSON list of `{"query": "...", "should_trigger": true|false}` (other
keys, as an `id` or a `note`, are ignored): the format skill authors already use for
trigger evals. A query may be long and multi-line (pasted code, a log), and an item may
give a conversation instead, `{"turns": [{"role": "user"|"assistant", "content": ...}, ...],
"should_trigger": ...}` ending with the user's turn: the agent ranks its user turns as it
ranks a thread (`s3skills.cli.turns`). For each query the command builds what the agent would see, with the
agent's own code and no model: the prompt index (`SkillsPromptMiddleware.build_prompt`,
the default budget unless `--budget`) and page 1 of `list_skills(query=...)` (the tool's
page), over the library's real size and neighbours (the merged view of `--user` over
`--shared`). It reports, per query, whether the skill is in the index with its
description, named by id only, on page 1, and its rank among the matches; then

- **recall**: the share of should-trigger queries that show the skill with its description;
- **page-1 recall**: the share whose `list_skills` page 1 names it;
- **false-trigger rate**: the share of should-not queries for which the skill ranks first.

`--min-recall` and `--max-false-trigger` make it a gate (exit status 1). The library-wide
mode (`--all`) runs every skill's `evals/triggers.json` (`TRIGGERS_FILE`, kept in the
skill's folder next to its `SKILL.md`, pushed with it). A bad queries file (not JSON, not
a list of such objects, larger than `MAX_QUERIES_BYTES`, more than `MAX_QUERIES` queries,
costlier to decode than `MAX_QUERIES_COST` or nested deeper than `MAX_QUERIES_DEPTH`) or an
unknown skill is a usage error: exit status 2 and nothing is evaluated or written. With
`--all`, a skill's bad `evals/triggers.json` is reported in `errors` and the other skills are
still evaluated (exit status 2). A triggers file is pushed by whoever can write the library:
it is decoded under the same bounds as the library's derived data
(`s3skills.skills.index.derived`), never with a bare `json.loads`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from s3skills.cli.context import Context, UsageError, global_options, pass_context
from s3skills.cli.find import LINE_CHARS
from s3skills.errors import FileTooLarge, S3SkillsError
from s3skills.storage.documents import ANY, NODE_COST, DocumentKind, decode_document

if TYPE_CHECKING:
    from s3skills.skills import SkillInfo

__all__ = [
    "MAX_QUERIES",
    "MAX_QUERIES_BYTES",
    "MAX_QUERIES_COST",
    "MAX_QUERIES_DEPTH",
    "TRIGGERS_FILE",
    "TriggerQuery",
    "eval_command",
    "parse_queries",
]

TRIGGERS_FILE = "evals/triggers.json"
"""Where a skill keeps its trigger queries, relative to its folder (next to `SKILL.md`)."""

MAX_QUERIES_BYTES = 1 << 20
"""The largest queries file read (1 MiB)."""

MAX_QUERIES = 1000
"""The most queries of one file."""

MAX_QUERIES_COST = 32 << 20
"""The memory budget of decoding a queries file: it may hold `MAX_QUERIES_COST // NODE_COST`
values, so what decoding builds stays within it; a real file of `MAX_QUERIES` queries costs
under 2 MiB, while 1 MiB of `[` or `,` would cost 80 MiB and is refused before decoding."""

MAX_QUERIES_DEPTH = 4
"""The deepest nesting of a queries file: the list, its objects, and one level inside a value."""

QUERIES_DOCUMENT = DocumentKind(
    "queries file",
    ANY,
    max_bytes=MAX_QUERIES_BYTES,
    max_nodes=MAX_QUERIES_COST // NODE_COST,
    max_depth=MAX_QUERIES_DEPTH,
)
"""A queries file or a skill's `evals/triggers.json` for the one bounded decoder
(`s3skills.storage.documents`): at most `MAX_QUERIES_COST // NODE_COST` values (419,430; a real
file of `MAX_QUERIES` queries holds a few thousand), `MAX_QUERIES_DEPTH` levels."""

_MAX_QUERY_CHARS = 8000  # the middleware ranks on the last 8,000 characters of a turn


@dataclass(frozen=True)
class TriggerQuery:
    """One query of a queries file: the request, and whether the skill should be found for it."""

    query: str
    should_trigger: bool
    turns: tuple[tuple[str, str], ...] = ()
    """A conversation's (role, content) turns, oldest first; `query` is the last (the user's)."""

    def messages(self) -> tuple[tuple[str, str], ...]:
        """The query's turns, oldest first (one user turn for a one-message query)."""
        return self.turns or (("user", self.query),)


def parse_queries(data: bytes, where: str) -> list[TriggerQuery]:
    """The queries of a queries file's bytes.

    Raises:
        UsageError: The file is too large, not UTF-8 JSON, or not a non-empty list of
            `{"query": non-empty string, "should_trigger": true|false}` objects (the
            message names `where` and the first bad item).
    """
    if len(data) > MAX_QUERIES_BYTES:
        raise UsageError(f"{where}: the queries file is larger than {MAX_QUERIES_BYTES} bytes")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None
    try:
        doc = decode_document(data, QUERIES_DOCUMENT)
    except ValueError as exc:
        raise UsageError(f"{where}: {_why_not_decoded(data, str(exc))}") from None
    if not isinstance(doc, list) or not doc:
        raise UsageError(f'{where}: expected a non-empty JSON list of {{"query": ..., "should_trigger": true|false}}')
    if len(doc) > MAX_QUERIES:
        raise UsageError(f"{where}: {len(doc)} queries; at most {MAX_QUERIES}")
    out = []
    for n, item in enumerate(doc):
        if not isinstance(item, dict):
            raise UsageError(f"{where}: item {n} is not an object")
        if "turns" in item:
            out.append(_conversation_query(item, f"{where}: item {n}"))
            continue
        query, trigger = item.get("query"), item.get("should_trigger")
        if not isinstance(query, str) or not query.strip():
            raise UsageError(f"{where}: item {n}: 'query' must be a non-empty string")
        if len(query) > _MAX_QUERY_CHARS:
            raise UsageError(f"{where}: item {n}: the query is longer than {_MAX_QUERY_CHARS} characters")
        if not isinstance(trigger, bool):
            raise UsageError(f"{where}: item {n}: 'should_trigger' must be true or false")
        out.append(TriggerQuery(query, trigger))
    return out


def _why_not_decoded(data: bytes, reason: str) -> str:
    """Why the decoder refused a queries file, in the words of `eval`'s documented errors."""
    if " values; the limit is " in reason:
        return "too costly to decode (nested or repeated far past what a queries file holds)"
    if "nested" in reason:
        return f"nested deeper than {MAX_QUERIES_DEPTH} levels; not a queries file"
    if "not JSON" in reason:
        try:  # within the value cap (checked first), so a second, plain parse is bounded
            json.loads(data)
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        except (RecursionError, ValueError):
            pass
        return "not JSON"
    return reason


def _conversation_query(item: dict[str, Any], where: str) -> TriggerQuery:
    """A queries file's conversation item: `{"turns": [...], "should_trigger": ...}` (`cli.turns`).

    Raises:
        UsageError: A `query` beside the `turns`, bad turns, or a bad `should_trigger`.
    """
    from s3skills.cli.turns import parse_turns

    if "query" in item:
        raise UsageError(f"{where}: give 'query' or 'turns', not both")
    turns = parse_turns(item["turns"], where)
    trigger = item.get("should_trigger")
    if not isinstance(trigger, bool):
        raise UsageError(f"{where}: 'should_trigger' must be true or false")
    return TriggerQuery(turns[-1][1], trigger, turns if len(turns) > 1 else ())


def _read_local(path: Path) -> list[TriggerQuery]:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_QUERIES_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the queries file ({exc.strerror or exc})") from None
    return parse_queries(data, str(path))


def _named(skill_id: str, text: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(skill_id)}(?![\w/-])", text) is not None


class _Agent:
    """What the agent sees for a request: its prompt index and `list_skills`, built by its own code."""

    def __init__(self, ctx: Context, budget: int) -> None:
        from s3skills.fs import S3Backend
        from s3skills.middleware import SkillsPromptMiddleware
        from s3skills.tools import skill_tools

        library = ctx.library
        backend = S3Backend(ctx.bucket, user_id=library.tenant().user_id, store=ctx.store, config=library.config)
        self.middleware = SkillsPromptMiddleware(backend, budget_chars=budget)
        self.list_tool = next(t for t in skill_tools(backend) if t.name == "list_skills")
        self.skills: list[SkillInfo] = ctx.run(backend.skills.aindex())

    async def check(self, skill_id: str, query: TriggerQuery) -> dict[str, Any]:
        from s3skills.cli.turns import agent_turns
        from s3skills.skills.ranking.rankers import conversation_scores

        state = _state(query.messages())
        prompt = await self.middleware.build_prompt(state)
        index = prompt.split("### Loaded skills")[0]
        described = index.split("Also relevant (ids only):")[0]
        turns = agent_turns(query.messages(), self.middleware.library.config.limits.max_prompt_query_chars)
        page = str(await self.list_tool.ainvoke({"query": turns[0]}))
        scores, _ = conversation_scores(turns, self.skills)
        matches = sorted(scores, key=lambda sid: (-scores[sid], sid))
        return {
            "query": query.query,
            **({"turns": len(query.turns)} if query.turns else {}),
            "should_trigger": query.should_trigger,
            "rank": matches.index(skill_id) + 1 if skill_id in matches else None,
            "described": _named(skill_id, described),
            "in_index": _named(skill_id, index),
            "on_first_page": _named(skill_id, page),
        }


def _state(turns: Sequence[tuple[str, str]]) -> dict[str, Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return {"messages": [HumanMessage(c) if role == "user" else AIMessage(c) for role, c in turns]}


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _evaluate(
    ctx: Context, agent: _Agent, skill_id: str, queries: Sequence[TriggerQuery], where: str
) -> dict[str, Any]:
    results = [ctx.run(agent.check(skill_id, q)) for q in queries]
    should = [r for r in results if r["should_trigger"]]
    should_not = [r for r in results if not r["should_trigger"]]
    return {
        "skill": skill_id,
        "queries_file": where,
        "library_skills": len(agent.skills),
        "should_trigger": len(should),
        "should_not_trigger": len(should_not),
        "recall": _rate(sum(r["described"] for r in should), len(should)),
        "page1_recall": _rate(sum(r["on_first_page"] for r in should), len(should)),
        "false_trigger_rate": _rate(sum(r["rank"] == 1 for r in should_not), len(should_not)),
        "results": results,
    }


def _resolve(ctx: Context, agent: _Agent, name: str) -> str:
    from s3skills.skills.ranking.suggest import closest_ids

    ids = {s.id for s in agent.skills}
    if name in ids:
        return name
    leaves = sorted(i for i in ids if i.rsplit("/", 1)[-1] == name)
    if len(leaves) == 1:
        return leaves[0]
    if leaves:
        raise UsageError(f"'{name}' is ambiguous: {', '.join(leaves)}; give the full id")
    close = closest_ids(name, agent.skills)
    hint = f" (did you mean: {', '.join(close)}?)" if close else ""
    raise UsageError(f"unknown skill '{name}' in {ctx.location(ctx.prefix)} (enabled skills only){hint}")


def _library_files(ctx: Context, agent: _Agent) -> list[tuple[str, str]]:
    """(skill id, key) of each enabled skill's triggers file, in the library the agent sees
    the skill from (a user's copy hides the shared one's file), by id."""
    library = ctx.library
    by_source = {s.id: s.source for s in agent.skills}
    found: list[tuple[str, str]] = []
    for source, prefix in library.libraries(library.tenant()):
        objects, _ = ctx.run(ctx.store.alist(prefix))
        for obj in objects:
            if obj.key.endswith("/" + TRIGGERS_FILE):
                skill_id = obj.key[len(prefix) : -len("/" + TRIGGERS_FILE)]
                if by_source.get(skill_id) == source:
                    found.append((skill_id, obj.key))
    return sorted(found)


def _summary_line(report: dict[str, Any]) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f} %"

    return (
        f"recall {pct(report['recall'])} (described in the index), page 1 {pct(report['page1_recall'])}, "
        f"false triggers {pct(report['false_trigger_rate'])} ({report['should_trigger']} should, "
        f"{report['should_not_trigger']} should not; library of {report['library_skills']})"
    )


def _print(ctx: Context, report: dict[str, Any]) -> None:
    ctx.print(f"{report['skill']}")
    ctx.print(f"  {report['queries_file']}")
    for r in report["results"]:
        expected = "should    " if r["should_trigger"] else "should not"
        shown = "described" if r["described"] else "id only  " if r["in_index"] else "not shown"
        rank = f"rank {r['rank']}" if r["rank"] else "no match"
        head = f"  {expected}  {shown}  {'page 1' if r['on_first_page'] else 'later '}  {rank:<9} "
        query = " ".join(r["query"].split())
        room = LINE_CHARS - len(head) - 2
        ctx.print(head + json.dumps(query if len(query) <= room else query[: room - 5] + "...", ensure_ascii=False))
    ctx.print("  " + _summary_line(report))


@click.command("eval", short_help="Trigger evals: would the agent find a skill for these queries?")
@global_options
@click.argument("name", required=False)
@click.option(
    "--queries",
    "queries_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help='A JSON list of {"query": ..., "should_trigger": true|false} (a conversation: {"turns": [...], ...}).',
)
@click.option("--all", "every", is_flag=True, help=f"Every skill's {TRIGGERS_FILE} in the library.")
@click.option("--min-recall", type=click.FloatRange(0, 1), help="Exit 1 when a skill's recall is below (0..1).")
@click.option(
    "--max-false-trigger", type=click.FloatRange(0, 1), help="Exit 1 when a false-trigger rate is above (0..1)."
)
@click.option(
    "--budget",
    type=click.IntRange(200, 1_000_000),
    default=6000,
    show_default=True,
    help="The prompt index budget in characters (the middleware's default).",
)
@pass_context
def eval_command(
    ctx: Context,
    name: str | None,
    queries_path: Path | None,
    every: bool,
    min_recall: float | None,
    max_false_trigger: float | None,
    budget: int,
) -> int:
    """Would the agent find skill NAME for each query of --queries? Offline: no model, no network but S3.

    The queries file is a JSON list of {"query": ..., "should_trigger": true|false}. Each
    query is run through the agent's prompt index (default budget) and list_skills page 1
    over the library as it is (--user over --shared). With --all, every skill's
    evals/triggers.json in the library is run. Exit 1 when --min-recall or
    --max-false-trigger is missed, 2 on a bad queries file or an unknown skill.
    """
    if every == (name is not None) or (every and queries_path is not None) or (name and queries_path is None):
        raise UsageError("give NAME --queries FILE, or --all (each skill's evals/triggers.json)")
    local = _read_local(queries_path) if queries_path is not None else None
    agent = _Agent(ctx, budget)
    reports: list[dict[str, Any]] = []
    errors: list[str] = []
    if name is not None and local is not None:
        skill_id = _resolve(ctx, agent, name)
        reports.append(_evaluate(ctx, agent, skill_id, local, str(queries_path)))
    else:
        for skill_id, key in _library_files(ctx, agent):
            where = f"{skill_id}/{TRIGGERS_FILE}"
            try:
                data = ctx.run(ctx.store.aget(key, max_bytes=MAX_QUERIES_BYTES)).data
                queries = parse_queries(data, where)
            except FileTooLarge:
                errors.append(f"{where}: the queries file is larger than {MAX_QUERIES_BYTES} bytes")
                continue
            except UsageError as exc:
                errors.append(str(exc))
                continue
            except S3SkillsError as exc:  # gone since the listing, or refused: this skill only
                errors.append(f"{where}: cannot read it ({type(exc).__name__})")
                continue
            reports.append(_evaluate(ctx, agent, skill_id, queries, where))
    failed = [
        r["skill"]
        for r in reports
        if (min_recall is not None and r["recall"] is not None and r["recall"] < min_recall)
        or (max_false_trigger is not None and (r["false_trigger_rate"] or 0.0) > max_false_trigger)
    ]
    status = 2 if errors else 1 if failed else 0
    if ctx.json:
        ctx.emit({"ok": status == 0, "status": status, "skills": reports, "errors": errors, "failed": failed})
    else:
        for report in reports:
            _print(ctx, report)
        if every and not reports and not errors:
            ctx.print(f"No skill in the library has an {TRIGGERS_FILE}.")
        for error in errors:
            ctx.warn(f"s3skills: error: {error}")
        if failed:
            ctx.warn(f"below the bar: {', '.join(failed)}")
    return status
