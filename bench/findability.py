"""Findability: is the right skill in the agent's view when a user asks for something?

The requests are written by hand, the way users phrase them (`findability_data/requests.tsv`,
never copied from a skill or a repository), each naming the skill that should answer it and
a split: `dev` (used to choose the ranker's weights and priors) and `test` (held out, the one
the targets are checked on). The skills they aim at are a hand-written core library
(`findability_data/skills.json`: description and SKILL.md body); the library is grown to
`--sizes` skills (1,000 and 10,000 by default) with generated distractors made from the
vocabulary of those descriptions: `<app>-automation` skills with formulaic descriptions
(the shape of ComposioHQ's ~800) and topic skills mixing the core words.

Through the real code paths (SKILL.md objects in an in-memory store, indexed by the
library, which writes the manifest), for each size it measures:

- **index**: the skill's id is in the index `SkillsPromptMiddleware` puts in the prompt for
  that request (default budget), with its description or among the ids it also names;
- **search**: the skill is on page 1 of `list_skills(query=<request>)`;
- **CPU**: process CPU time of one warm `build_prompt` (median and p95), and the S3
  requests it makes.

Targets (exit status 1 when one fails) on the chosen split at the largest size: index
>= 90 %, search >= 98 %, warm prompt build <= 50 ms CPU (median), no S3 request per call.

    python bench/findability.py                          # test split, 1,000 and 10,000 skills
    python bench/findability.py --split dev --sizes 1000
    python bench/findability.py --sizes 200 --budget 300 --json out.json
    python bench/findability.py --ranker hybrid          # HybridRanker(MiniLMEncoder()): s3skills[embeddings]

With `--ranker hybrid` the library is embedded before the requests are measured (reported
as `embedding_the_library_seconds`), as the ranker's background thread does in a server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import findability_distractors
import findability_variants
import record  # bench/record.py
from findability_distractors import put_distractors, skill_md
from langchain_core.messages import AIMessage, HumanMessage

from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware

try:  # the ranking seam (issue 19); absent in older versions the bench may be run against
    from s3skills.skills.ranking import rankers as ranking
except ImportError:  # pragma: no cover - only when measuring an older s3skills
    ranking = None  # type: ignore[assignment]
from s3skills.skills import usage
from s3skills.storage import RequestCounter
from s3skills.testing import MemoryObjectStore
from s3skills.tools import skill_tools

USER = "bench"
LAYOUT = KeyLayout.seeds()
PREFIX = findability_distractors.PREFIX  # f"{USER}/skills/"
DATA = Path(__file__).resolve().parent / "findability_data"
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Case:
    """One hand-written request and the skill that should answer it."""

    skill_id: str
    split: str
    request: str


def load_cases(path: Path = DATA / "requests.tsv") -> list[Case]:
    """The requests of `requests.tsv` (skill, split, request; `#` lines are comments)."""
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            skill_id, split, request = line.split("\t")
            cases.append(Case(skill_id, split, request))
    return cases


def load_conversations(path: Path = DATA / "conversations.tsv") -> list[tuple[Case, list[str]]]:
    """The hand-written conversations: the case (its latest turn as the request) and every user turn."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            skill_id, split, turns = line.split("\t")
            texts = [t.strip() for t in turns.split(" || ")]
            out.append((Case(skill_id, split, texts[-1]), texts))
    return out


@dataclass(frozen=True)
class History:
    """A request with what came before it: the user's past uses and the thread's loaded skills."""

    case: Case
    uses: dict[str, int]
    loaded: list[str]


def load_histories(path: Path = DATA / "histories.tsv") -> list[History]:
    """The hand-written histories (skill, split, `id:times` uses, loaded ids, request; `-` for none)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            skill_id, split, uses, loaded, request = line.split("\t")
            used = {} if uses == "-" else {u.split(":")[0]: int(u.split(":")[1]) for u in uses.split(",")}
            out.append(History(Case(skill_id, split, request), used, [] if loaded == "-" else loaded.split(",")))
    return out


def replay_usage(history: History) -> None:
    """Make the process's usage log hold exactly this user's past uses (as `cargar_habilidad` logs them)."""
    usage.reset_usage()
    for skill_id, times in history.uses.items():
        for _ in range(times):
            usage.log_usage("skill_load", skill=skill_id, user=USER, thread="earlier", duration_ms=1.0, outcome="ok")


async def histories_found(
    middleware: SkillsPromptMiddleware, list_tool: Any, histories: Sequence[History]
) -> tuple[float, float]:
    """% of the histories whose skill is in the prompt index, and on page 1 of
    `list_skills(query=<request>)`, with the ranking's current priors."""
    in_index = in_search = 0
    try:
        for history in histories:
            replay_usage(history)
            state = {"messages": [HumanMessage(history.case.request)], "loaded_skills": list(history.loaded)}
            prompt = await middleware.build_prompt(state)
            in_index += 1 if _named(history.case.skill_id, prompt.split("### Loaded skills")[0]) else 0
            page = await list_tool.ainvoke({"query": history.case.request})
            in_search += 1 if _named(history.case.skill_id, str(page)) else 0
    finally:
        usage.reset_usage()
    total = len(histories) or 1
    return round(100 * in_index / total, 1), round(100 * in_search / total, 1)


def _thread(turns: list[str]) -> dict[str, Any]:
    messages: list[Any] = []
    for turn in turns:
        messages += [HumanMessage(turn), AIMessage("Done.")]
    return {"messages": messages[:-1]}


def load_core(path: Path = DATA / "skills.json") -> list[dict[str, Any]]:
    """The hand-written skills the requests aim at."""
    return list(json.loads(path.read_text(encoding="utf-8")))


def build_library(store: MemoryObjectStore, core: list[dict[str, Any]], size: int, seed: int) -> int:
    """Put the core skills and `size - len(core)` distractors (SKILL.md objects) in `store`."""
    rng = random.Random(seed)
    for skill in core:
        leaf = skill["id"].rsplit("/", 1)[-1]
        store.put_object(
            f"{PREFIX}{skill['id']}/SKILL.md", skill_md(leaf, skill["description"], "\n".join(skill["body"]))
        )
    put_distractors(
        store,
        [(s["id"], s["description"] + " " + " ".join(s["body"])) for s in core],
        max(0, size - len(core)),
        rng,
    )
    return max(size, len(core))


def make_ranker(name: str) -> Any:
    """None for the default (lexical) ranker; the hybrid one embeds with MiniLM; any other
    name is a variant of the real bench's (`findability_variants.make_variant`: `bm25:...`)."""
    if name in ("lexical", "default"):
        return None
    if name == "hybrid":
        from s3skills.skills.ranking.embedding import HybridRanker, MiniLMEncoder

        return HybridRanker(MiniLMEncoder(), background=False)
    return findability_variants.make_variant(name)


def _sketches(name: str) -> Any:
    """The context in which the library is indexed: a variant's sketch content (`content=`)."""
    if not name.startswith("bm25:"):
        return contextlib.nullcontext()
    return findability_variants.sketches(findability_variants.sketch_mode_of(name))


def _named(skill_id: str, text: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(skill_id)}(?![\w/-])", text) is not None


async def measure(
    size: int,
    cases: list[Case],
    budget: int,
    seed: int,
    conversations: Sequence[tuple[Case, list[str]]] = (),
    histories: Sequence[History] = (),
    ranker_name: str = "lexical",
) -> dict[str, Any]:
    """Index recall, list_skills page-1 recall and prompt-build cost at one library size."""
    store = MemoryObjectStore("bench")
    skills = build_library(store, load_core(), size, seed)
    backend = S3Backend("bench", user_id=USER, store=store, layout=LAYOUT)
    ranker = make_ranker(ranker_name)
    seam = {"ranker": ranker} if ranker is not None else {}  # older trees have no ranker= on the tools
    middleware = SkillsPromptMiddleware(backend, budget_chars=budget, **seam)
    list_tool = next(t for t in skill_tools(backend, **seam) if t.name == "list_skills")
    started = time.perf_counter()
    with _sketches(ranker_name):
        library = await backend.skills.aindex()  # the first index: LIST + heads
    cold_seconds = time.perf_counter() - started
    embed_seconds = 0.0
    if ranker is not None and hasattr(ranker, "warm"):
        started = time.perf_counter()
        ranker.warm(library)  # what its background thread does after the first model call
        embed_seconds = time.perf_counter() - started
    await middleware.build_prompt({"messages": [HumanMessage("hello")]})
    counter = RequestCounter()
    store.add_request_hook(counter)
    in_index = described = in_search = longest = 0
    cpu_ms: list[float] = []
    samples: list[dict[str, Any]] = []
    for case in cases:
        state = {"messages": [HumanMessage(case.request)]}
        cpu = time.process_time()
        prompt = await middleware.build_prompt(state)
        cpu_ms.append(1000 * (time.process_time() - cpu))
        index = prompt.split("### Loaded skills")[0]
        longest = max(longest, len(index))
        shown = _named(case.skill_id, index)
        with_description = shown and _named(case.skill_id, index.split("Also relevant (ids only):")[0])
        in_index += shown
        described += with_description
        samples.append(
            {
                "skill": case.skill_id,
                "request": case.request,
                "in_index": shown,
                "described": with_description,
                "cpu_ms": round(cpu_ms[-1], 3),
            }
        )
    prompt_requests = counter.total
    for case, sample in zip(cases, samples, strict=True):
        page = await list_tool.ainvoke({"query": case.request})
        sample["on_first_page"] = _named(case.skill_id, str(page))
        in_search += sample["on_first_page"]
    threads: dict[str, float] = {}
    weight = ranking.EARLIER_WEIGHT if ranking is not None else None
    for label, earlier in (("conversation_in_index", weight), ("conversation_in_index_latest_turn_only", 0.0)):
        if ranking is None and earlier is not None:
            continue  # an older s3skills: it ranks on the latest turn only
        if ranking is not None and earlier is not None:
            ranking.EARLIER_WEIGHT = earlier
        try:
            hits = 0
            for case, turns in conversations:
                prompt = await middleware.build_prompt(_thread(turns))
                hits += 1 if _named(case.skill_id, prompt.split("### Loaded skills")[0]) else 0
        finally:
            if ranking is not None and weight is not None:
                ranking.EARLIER_WEIGHT = weight
        threads[label] = round(100 * hits / (len(conversations) or 1), 1)
    priors: dict[str, float] = {}
    if ranking is not None and hasattr(ranking, "prior_for") and histories:
        chosen = (ranking.PRIOR_WEIGHT, ranking.LOADED_CATEGORY_PRIOR)
        found = await histories_found(middleware, list_tool, histories)
        priors["histories_in_index"], priors["histories_on_first_search_page"] = found
        try:
            ranking.PRIOR_WEIGHT = ranking.LOADED_CATEGORY_PRIOR = 0.0
            found = await histories_found(middleware, list_tool, histories)
            priors["histories_in_index_without_prior"], priors["histories_on_first_search_page_without_prior"] = found
        finally:
            ranking.PRIOR_WEIGHT, ranking.LOADED_CATEGORY_PRIOR = chosen
    total = len(cases) or 1
    cpu_ms.sort()
    return {
        "skills": skills,
        "ranker": ranker_name,
        "requests": len(cases),
        "in_index": round(100 * in_index / total, 1),
        "in_index_with_description": round(100 * described / total, 1),
        "in_first_search_page": round(100 * in_search / total, 1),
        "prompt_build_cpu_ms_median": round(statistics.median(cpu_ms), 2) if cpu_ms else 0.0,
        "prompt_build_cpu_ms_p95": round(cpu_ms[int(0.95 * (len(cpu_ms) - 1))], 2) if cpu_ms else 0.0,
        "s3_requests_per_prompt": round(prompt_requests / total, 3),
        "conversations": len(conversations),
        **threads,
        "histories": len(histories),
        **priors,
        "first_index_seconds": round(cold_seconds, 1),
        "embedding_the_library_seconds": round(embed_seconds, 1),
        "longest_index_chars": longest,
        "samples": samples,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cases = [c for c in load_cases() if args.split == "all" or c.split == args.split]
    conversations = [(c, t) for c, t in load_conversations() if args.split == "all" or c.split == args.split]
    histories = [h for h in load_histories() if args.split == "all" or h.case.split == args.split]
    sizes = [int(s) for s in str(args.sizes).split(",")]
    report: dict[str, Any] = {
        "bench": "findability",
        "commit": record.machine()["commit"],
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "nproc": os.cpu_count()},
        "load_average_before": list(os.getloadavg()),
        "split": args.split,
        "budget_chars": args.budget,
        "results": [],
    }
    for size in sizes:
        report["results"].append(
            await measure(size, cases, args.budget, args.seed, conversations, histories, ranker_name=args.ranker)
        )
    report["load_average_after"] = list(os.getloadavg())
    largest = report["results"][-1]
    report["targets"] = [
        {"target": "in the index >= 90 %", "value": largest["in_index"], "ok": largest["in_index"] >= 90},
        {
            "target": "on the first search page >= 98 %",
            "value": largest["in_first_search_page"],
            "ok": largest["in_first_search_page"] >= 98,
        },
        {
            "target": "warm prompt build <= 50 ms CPU (median)",
            "value": largest["prompt_build_cpu_ms_median"],
            "ok": largest["prompt_build_cpu_ms_median"] <= 50,
        },
        {
            "target": "no extra S3 request per prompt build (<= 1: the manifest's conditional GET, as before)",
            "value": largest["s3_requests_per_prompt"],
            "ok": largest["s3_requests_per_prompt"] <= 1,
        },
    ]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="Library sizes, comma-separated.")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="test")
    parser.add_argument("--budget", type=int, default=6000, help="The prompt index budget (the default: 6000).")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--json", metavar="FILE", help="The report with every sample (default: bench/results/findability-*.json)."
    )
    parser.add_argument(
        "--ranker",
        default="lexical",
        help="lexical: the default ranker; hybrid: HybridRanker(MiniLMEncoder()) (needs s3skills[embeddings]); "
        "or a variant, bm25:sketch=1,ids=1,... (bench/findability_real.py --list-rankers).",
    )
    args = parser.parse_args(argv)
    if args.ranker not in ("lexical", "default", "hybrid"):
        try:
            make_ranker(args.ranker)
        except ValueError as exc:
            parser.error(str(exc))
    report = asyncio.run(main_async(args))
    out = Path(args.json) if args.json else RESULTS / f"findability-{args.split}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    brief = {k: v for k, v in report.items() if k != "results"}
    brief["results"] = [{k: v for k, v in r.items() if k != "samples"} for r in report["results"]]
    print(json.dumps(brief, indent=2, ensure_ascii=False))
    print(f"samples: {out}")
    return 0 if all(t["ok"] for t in report["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
