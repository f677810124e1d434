"""`s3skills find QUERY`: search a library with the agent's ranker, and say why each skill matched.

The library is the one the agent sees: the user's skills over the shared ones with
`--user`/`--shared` (the same merged view as `list`), enabled skills only. The ranker is
the agent's default (`LexicalRanker`: BM25F over name, description and body sketch), or
`--ranker hybrid` (`HybridRanker(MiniLMEncoder())`, the `embeddings` extra). Each result
names the fields the query's words hit (`Bm25Index.explain`). Nothing is written; the
command reads the library's index (the manifest, or the heads) like any reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from s3skills.cli.context import CliError, Context, UsageError, global_options, pass_context
from s3skills.config import bounded_query

if TYPE_CHECKING:
    from s3skills.skills import Ranker, SkillInfo

__all__ = ["EMBEDDINGS_HINT", "LINE_CHARS", "explain_line", "find_command", "make_ranker"]

LINE_CHARS = 200
"""The longest line `eval` prints, and `find` on the widest terminal (`find` keeps to the
terminal's width; an id is never cut: it has a line to itself)."""

EMBEDDINGS_HINT = 'the hybrid ranker needs the embeddings extra: pip install "s3skills[embeddings]"'


def make_ranker(name: str, skills: Sequence[SkillInfo]) -> Ranker | None:
    """The ranker called `name` (`lexical`: None, the agent's default; `hybrid`: MiniLM, warmed on `skills`).

    Raises:
        CliError: `hybrid` without the embeddings extra installed (the message says what to install).
    """
    if name == "lexical":
        return None
    from s3skills.skills.ranking.embedding import HybridRanker, MiniLMEncoder

    ranker = HybridRanker(MiniLMEncoder(), background=False)
    try:
        ranker.warm(skills)  # embeds the library now: a CLI run has no later call to wait for
    except ImportError:
        raise CliError(EMBEDDINGS_HINT) from None
    return ranker


def explain_line(matched: dict[str, list[str]], limit: int = LINE_CHARS) -> str:
    """`name: w, w; description: w; sketch: w` cut to `limit` characters at a word."""
    parts = [f"{field}: {', '.join(words)}" for field, words in matched.items()]
    text = "; ".join(parts) if parts else "(by meaning: no shared word)"
    if len(text) <= limit:
        return text
    return text[: limit - 4].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 4].rsplit(" ", 1)[0] + " ..."


def search(
    ctx: Context, query: str | Sequence[str], ranker_name: str
) -> tuple[list[SkillInfo], list[tuple[SkillInfo, float]]]:
    """The enabled skills of the merged view, and the matches best first (with scores) of `query`:
    one request, or the user's turns newest first (ranked as the agent ranks a conversation:
    `rankers.conversation_scores`)."""
    skills = [s for s in ctx.library.index() if s.metadata.enabled]
    ranker = make_ranker(ranker_name, skills)
    from s3skills.skills.ranking.rankers import conversation_scores

    scores, by_id = conversation_scores([query] if isinstance(query, str) else query, skills, ranker=ranker)
    ranked = sorted(scores, key=lambda sid: (-scores[sid], sid))
    return skills, [(by_id[sid], scores[sid]) for sid in ranked]


@click.command("find", short_help="Search a library with the agent's ranker, showing why each skill matched.")
@global_options
@click.argument("query", nargs=-1)
@click.option(
    "--file",
    "request_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help='Read the request from FILE ("-": standard input): any text, every line, or a conversation'
    ' {"turns": [{"role": "user"|"assistant", "content": ...}, ...]}.',
)
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="The most results.")
@click.option(
    "--ranker",
    "ranker_name",
    type=click.Choice(["lexical", "hybrid"]),
    default="lexical",
    show_default=True,
    help="lexical: the agent's default; hybrid: BM25F fused with MiniLM embeddings"
    ' (pip install "s3skills[embeddings]").',
)
@pass_context
def find_command(ctx: Context, query: tuple[str, ...], request_file: str | None, limit: int, ranker_name: str) -> int:
    """Search the library for QUERY, ranked as the agent ranks it, with the words that matched.

    QUERY is any request, as a user would type it (several words are joined); or --file
    FILE (- for standard input) gives a long, multi-line request (pasted code, a log) or a
    conversation as {"turns": [...]}, ranked as the agent ranks it (the latest user turn
    first, the two before at a lower weight, their last 8,000 characters). The library is
    the user's over the shared one (`--user`, `--shared`), enabled skills only. Each result
    names its fields (name, description, body sketch) and the words of the latest turn that
    hit each one. Exit status 0 even when nothing matches.
    """
    from s3skills.skills.ranking.matching import bm25_index

    if (request_file is None) == (not query):
        raise UsageError("give the request as QUERY words or with --file FILE (- for standard input), not both")
    turns: list[str] = []
    if request_file is not None:
        from s3skills.cli.turns import agent_turns, read_request, request_bytes

        where = "standard input" if request_file == "-" else request_file
        conversation = read_request(request_bytes(request_file), where)
        turns = agent_turns(conversation, ctx.library.config.limits.max_prompt_query_chars)
        text, cut = turns[0], None
    else:
        text, cut = bounded_query(" ".join(query), ctx.library.config.limits.max_query_chars)
    if not text.strip():
        raise CliError("the query is empty: give the words of a request")
    skills, ranked = search(ctx, turns or text, ranker_name)
    index = bm25_index(skills)
    results: list[dict[str, Any]] = []
    for position, (skill, score) in enumerate(ranked[:limit], start=1):
        results.append(
            {
                "rank": position,
                "id": skill.id,
                "score": round(score, 4),
                "source": skill.source,
                "category": skill.category,
                "description": skill.metadata.description,
                "matched": index.explain(text, skill),
            }
        )
    if ctx.json:
        ctx.emit(
            {
                "query": text,
                **({"turns": len(turns)} if turns else {}),
                "ranker": ranker_name,
                "skills": len(skills),
                "matches": len(ranked),
                "results": results,
                **({"note": cut} if cut else {}),
            }
        )
        return 0
    if cut:
        ctx.warn(f"note: {cut}")
    if not results:
        ctx.print(f"No skill of {len(skills)} matches {_shorten(text, 80)!r}.")
        return 0
    ctx.print(f"{len(ranked)} of {len(skills)} skill(s) match; the best {len(results)} ({ranker_name} ranker):")
    width = max(ctx.console.width, 40)  # the terminal's (`terminal_width`): descriptions are cut to it
    for item in results:
        ctx.print(f"{item['rank']:>3}. {item['id']}")
        about = f"score {item['score']:.2f}, {item['source']}: {item['description']}"
        ctx.print("     " + _shorten(about, width - 5))
        ctx.print("     matched " + explain_line(item["matched"], width - 13))
    return 0
