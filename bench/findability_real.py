"""Findability on real skills: is the right one in the agent's view when a user asks for it?

The library is the real-skills corpus (`s3skills.testing.corpus`: 682 skills from 7 public
repositories), each repository pushed from its root with `--category <short name>` (the
names are in the request file): a skill's id is `<short>/<folder name>`, as `s3skills push`
maps it (`s3skills.transfer.localtree.scan_tree`). Skills that push leaves out (ambiguous
folders) are left out and listed in the results (`excluded_skills`); byte-identical copies
are pushed once. The library is then grown to each `--sizes` entry with the synthetic
distractors: by default each blended from several real skills' texts
(`findability_distractors.put_blended_distractors`, calibrated to be as hard as real skills:
`findability_calibrate.py`), with `--distractors real` two skills of one repository
re-combined (`put_real_distractors`, harder), or with `--distractors generated` the synthetic
bench's (`put_distractors`, easier). A run with distractors reports their calibration
(`findability_calibrate.calibration`: how often they outrank a target, per skill, against
real skills).

The requests (`findability_real_data/requests.json`) are written by hand as users type them,
split dev/test by skill; should-not requests (`target: null`) name the skill they sound
close to (`near_miss_of`). For each ranker and size, through the real code paths (SKILL.md
objects in an in-memory store, `SkillsPromptMiddleware.build_prompt`, the `list_skills` tool):

- **index**: the target is in the prompt index with its description (and, second, by id);
- **search**: the target is on page 1 of `list_skills(query=<request>)`;
- **rank**: its position in the order the index uses (`ranked_for`): top 1, 10, 50;
- **should-not**: how often the near-miss skill is ranked first, or shown with its description;
- **CPU**: process time of each warm `build_prompt` (median and spread over every request);
  with `--long-words N`, also for 40 requests padded to N words of pasted code and logs;
- **hub**: the largest share of requests aimed at other skills that one skill is ranked first for.

`--set traffic` runs the traffic-shaped set (`traffic.json`: long, pasted, multi-turn;
`request_shape.read_request_file`) instead of `requests.json`. `--variants` also measures
every request after a preamble, with pasted code, and after an unrelated thread
(`findability_robust`). Every figure is reported on the whole split and on its
least-overlapping half (`request_shape.overlap`, `least_overlapping_half`).

Every sample goes to a JSON file (`bench/results/`, gitignored, or `--out`) with the commit,
the machine and the load average; a table is printed. The exit status is 0 unless something
fails to run: quality is reported, never enforced here.

    python bench/findability_real.py                           # dev split, the corpus and 10,000
    python bench/findability_real.py --split test              # the held-out split
    python bench/findability_real.py --sizes corpus --ranker default --ranker no-sketch
    python bench/findability_real.py --ranker "bm25:name=2,description=1,sketch=0.5,b.sketch=0.75"
    python bench/findability_real.py --list-rankers
    python bench/findability_real.py --set traffic --variants --long-words 2000
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import findability  # the synthetic bench: its library layout, distractors and checks
import findability_distractors
import record  # bench/record.py
import request_shape
from calibration import calibration, outranked
from calibration import table as calibration_table
from findability_corpus import Corpus, load_corpus
from findability_robust import VARIANTS, conversation, long_message
from findability_variants import PRESETS, FieldWeightsRanker, make_variant, settings, sketch_mode_of, sketches
from langchain_core.messages import AIMessage, HumanMessage

from s3skills.fs import S3Backend
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.middleware.skills_prompt import ranked_for, recent_requests
from s3skills.skills import usage
from s3skills.skills.ranking.background import has_background
from s3skills.skills.ranking.rankers import conversation_scores
from s3skills.skills.ranking.sketch import SKETCH_MODES
from s3skills.storage import RequestCounter
from s3skills.testing import MemoryObjectStore
from s3skills.tools import skill_tools

__all__ = [
    "PRESETS",
    "REQUESTS",
    "Corpus",
    "FieldWeightsRanker",
    "RealRequest",
    "build_real_library",
    "hubs",
    "load_corpus",
    "load_requests",
    "load_traffic",
    "main",
    "make_variant",
    "measure",
    "overlaps",
    "sketch_mode_of",
    "sketches",
    "split_of",
]

BENCH = Path(__file__).resolve().parent
REQUESTS = BENCH / "findability_real_data" / "requests.json"
TRAFFIC = BENCH / "findability_real_data" / "traffic.json"
RESULTS = BENCH / "results"
SPLIT_SALT = "findability-real:"
LONG_REQUESTS = 40
"""How many requests the long-request CPU measure builds a prompt for (`--long-words`)."""


@dataclass(frozen=True)
class RealRequest:
    """One hand-written request: the skill it should find (or, for a should-not, the near miss)."""

    id: str
    repo: str
    folder: str
    target: str | None
    near_miss_of: str | None
    split: str
    query: str
    messages: tuple[tuple[str, str], ...] = ()
    """A conversation's (role, text) messages, oldest first, ending with the user's `query`;
    () for one message."""

    def conversation(self) -> tuple[tuple[str, str], ...]:
        """The request's messages, oldest first (`(("user", query),)` for one message)."""
        return self.messages or (("user", self.query),)


def split_of(skill_id: str) -> str:
    """The split of every request about `skill_id` (its target or near miss): dev or test, by hash."""
    digest = int(hashlib.sha256(f"{SPLIT_SALT}{skill_id}".encode()).hexdigest(), 16)
    return "dev" if digest % 2 == 0 else "test"


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "repo": str,
    "folder": str,
    "target": (str, type(None)),
    "near_miss_of": (str, type(None)),
}


def load_requests(path: Path = REQUESTS) -> tuple[dict[str, str], list[RealRequest]]:
    """The request file: repository -> short name (its category), and the requests.

    Raises:
        ValueError: The file is not what `findability_real_data/requests.json` holds: a
            request with a missing, extra or mistyped field, a split other than dev/test, a
            target and a near miss both or neither, or an id used twice (the message names it).
    """
    repositories, items = request_shape.read_request_document(path)
    out: list[RealRequest] = []
    seen: set[str] = set()
    for n, item in enumerate(items):
        where = f"{path}: request {item.get('id', n) if isinstance(item, dict) else n}"
        if not isinstance(item, dict) or set(item) != {*_FIELDS, "split", "query"}:
            raise ValueError(f"{where}: fields must be {sorted({*_FIELDS, 'split', 'query'})}")
        for name, kind in _FIELDS.items():
            if not isinstance(item[name], kind):
                raise ValueError(f"{where}: {name!r} has the wrong type")
        if item["split"] not in ("dev", "test") or not isinstance(item["query"], str) or not item["query"].strip():
            raise ValueError(f"{where}: the split must be dev or test and the query a non-empty string")
        if (item["target"] is None) == (item["near_miss_of"] is None):
            raise ValueError(f"{where}: give a target or a near_miss_of (for a should-not request), not both")
        if item["id"] in seen:
            raise ValueError(f"{where}: the id is used twice")
        seen.add(item["id"])
        out.append(RealRequest(**item))
    return {str(k): str(v) for k, v in repositories.items()}, out


def load_traffic(path: Path = TRAFFIC) -> tuple[dict[str, str], list[RealRequest]]:
    """The traffic-shaped request file (`request_shape.read_request_file`), as the bench's requests:
    a conversation keeps its messages, and its `query` is the last (the user's).

    Raises:
        ValueError: The file is not a valid request file (`request_shape.read_request_file`).
    """
    repositories, items = request_shape.read_request_file(path)
    out = [
        RealRequest(
            r.id,
            r.repo,
            r.folder,
            r.target,
            r.near_miss_of,
            r.split,
            r.turns[-1].content,
            tuple((t.role, t.content) for t in r.turns) if len(r.turns) > 1 else (),
        )
        for r in items
    ]
    return repositories, out


def overlaps(requests: Sequence[RealRequest]) -> dict[str, Any]:
    """Each should-trigger request's overlap with its target (`request_shape.overlap`: rarity-weighted
    share of its content words in the target's name and description, longest common run), over
    the whole conversation."""
    fields, idf = request_shape._corpus_fields()  # the corpus's names and descriptions, their IDF
    return {
        r.id: request_shape.overlap("\n\n".join(text for _, text in r.conversation()), *fields[r.target], idf)
        for r in requests
        if r.target is not None and r.target in fields
    }


def build_real_library(
    store: MemoryObjectStore,
    corpus: Corpus,
    size: int,
    seed: int,
    distractors: str = findability_distractors.DEFAULT_KIND,
) -> int:
    """Put every corpus skill, then distractors up to `size` skills, in `store`; returns the count.

    `distractors`: a family of `findability_distractors.maker` (`blended`, `real`, `generated`,
    or a `blended:` spec).

    Raises:
        ValueError: An unknown family.
    """
    for skill_id, text in corpus.skills.items():
        store.put_object(f"{findability.PREFIX}{skill_id}/SKILL.md", text)
    count = max(0, size - len(corpus.skills))
    findability_distractors.maker(distractors)(store, sorted(corpus.skills.items()), count, random.Random(seed))
    return len(corpus.skills) + count


def _spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))], 3)

    return {"median": round(statistics.median(ordered), 3), "p10": at(0.1), "p90": at(0.9), "min": at(0), "max": at(1)}


def _pct(hits: int, total: int) -> float:
    return round(100 * hits / total, 1) if total else 0.0


def _state(messages: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {"messages": [HumanMessage(t) if role == "user" else AIMessage(t) for role, t in messages]}


async def measure(
    size: int,
    requests: Sequence[RealRequest],
    corpus: Corpus,
    ranker_name: str,
    budget: int,
    seed: int,
    variants: Sequence[str] = ("plain",),
    half: frozenset[str] | set[str] = frozenset(),
    distractors: str = findability_distractors.DEFAULT_KIND,
    long_words: int = 0,
) -> dict[str, Any]:
    """Every measure of one ranker at one library size, per variant (`findability_robust`),
    with a sample per request and variant."""
    usage.reset_usage()  # no priors from an earlier run of this process
    store = MemoryObjectStore("bench")
    skills = build_real_library(store, corpus, size, seed, distractors)
    backend = S3Backend("bench", user_id=findability.USER, store=store, layout=findability.LAYOUT)
    ranker = make_variant(ranker_name)
    middleware = SkillsPromptMiddleware(backend, budget_chars=budget, ranker=ranker)
    list_tool = next(t for t in skill_tools(backend, ranker=ranker) if t.name == "list_skills")
    with sketches(sketch_mode_of(ranker_name)):
        library = await backend.skills.aindex()
    if ranker is not None and hasattr(ranker, "warm"):
        ranker.warm(library)
    await middleware.build_prompt({"messages": [HumanMessage("hello")]})  # warm: the ranker's index
    counter = RequestCounter()
    store.add_request_hook(counter)
    limit = middleware.library.config.limits.max_prompt_query_chars
    samples: list[dict[str, Any]] = []
    prompt_requests = 0  # S3 requests of the prompt builds only (list_skills makes its own)
    for variant in variants:
        for request in requests:
            state = _state(conversation(variant, request.id, request.split, request.conversation()))
            before = counter.total
            cpu = time.process_time()
            prompt = await middleware.build_prompt(state)
            cpu_ms = 1000 * (time.process_time() - cpu)
            prompt_requests += counter.total - before
            index = prompt.split("### Loaded skills")[0]
            described = index.split("Also relevant (ids only):")[0]
            skill = request.target or request.near_miss_of or ""
            turns = recent_requests(state, max_chars=limit)
            full = [s.id for s in ranked_for(turns, library, set(), ranker=ranker)]
            order = full[:50]
            page = str(await list_tool.ainvoke({"query": turns[0]}))
            samples.append(
                {
                    "id": request.id,
                    "variant": variant,
                    "skill": skill,
                    "should_trigger": request.target is not None,
                    "rank": order.index(skill) + 1 if skill in order else None,
                    "top1": order[0] if order else None,
                    "in_index": findability._named(skill, index),
                    "described": findability._named(skill, described),
                    "on_first_page": findability._named(skill, page),
                    "cpu_ms": round(cpu_ms, 3),
                }
            )
            if variant == variants[0] and request.target is not None and skills > len(corpus.skills):
                matched = conversation_scores(turns, library, ranker=ranker)[0]
                samples[-1]["calibration"] = outranked(full, request.target, matched, corpus.skills)
    long_cpu: list[float] = []
    for request in requests[:LONG_REQUESTS] if long_words else []:
        text = long_message(request.query, request.id, request.split, long_words)
        cpu = time.process_time()
        await middleware.build_prompt({"messages": [HumanMessage(text)]})
        long_cpu.append(round(1000 * (time.process_time() - cpu), 3))
    store.remove_request_hook(counter)
    run = _summary(size, skills, ranker_name, [s for s in samples if s["variant"] == variants[0]], prompt_requests)
    run["variant"] = variants[0]
    if long_cpu:
        run["long_request"] = {"words": long_words, "requests": len(long_cpu), "cpu_ms": _spread(long_cpu)}
    if skills > len(corpus.skills):  # how hard the distractors are, against the real skills
        rows = [s["calibration"] for s in samples if "calibration" in s]
        run["calibration"] = calibration(rows, len(corpus.skills), skills - len(corpus.skills))
    run["variants"] = {}
    run["least_overlapping_half"] = {}
    for v in variants:
        mine = [s for s in samples if s["variant"] == v]
        run["variants"][v] = {k: x for k, x in _summary(size, skills, ranker_name, mine, 0).items() if k != "samples"}
        if half:  # the half of the should-trigger requests that share least with their target
            low = [s for s in mine if s["id"] in half or not s["should_trigger"]]
            summary = _summary(size, skills, ranker_name, low, 0)
            run["least_overlapping_half"][v] = {k: x for k, x in summary.items() if k != "samples"}
    run["samples"] = samples
    return run


def hubs(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The skill ranked first most often for requests aimed at other skills (should-trigger
    and should-not alike): its id, that count, and its share of those requests."""
    counts: dict[str, int] = {}
    for s in samples:
        if s["top1"] is not None and s["top1"] != s["skill"]:
            counts[s["top1"]] = counts.get(s["top1"], 0) + 1
    if not counts:
        return {"skill": None, "count": 0, "share": 0.0}
    worst = max(counts, key=lambda k: (counts[k], k))
    aimed_elsewhere = sum(1 for s in samples if s["skill"] != worst)
    return {"skill": worst, "count": counts[worst], "share": _pct(counts[worst], aimed_elsewhere)}


def _summary(size: int, skills: int, ranker_name: str, samples: list[dict[str, Any]], requests: int) -> dict[str, Any]:
    hits = [s for s in samples if s["should_trigger"]]
    misses = [s for s in samples if not s["should_trigger"]]
    ranked = [s["rank"] or 10**9 for s in hits]
    return {
        "ranker": ranker_name,
        "size": size,
        "skills": skills,
        "requests": len(hits),
        "should_not_requests": len(misses),
        "in_index_with_description": _pct(sum(s["described"] for s in hits), len(hits)),
        "in_index": _pct(sum(s["in_index"] for s in hits), len(hits)),
        "on_first_search_page": _pct(sum(s["on_first_page"] for s in hits), len(hits)),
        "top1": _pct(sum(r <= 1 for r in ranked), len(hits)),
        "top5": _pct(sum(r <= 5 for r in ranked), len(hits)),
        "top10": _pct(sum(r <= 10 for r in ranked), len(hits)),
        "top50": _pct(sum(r <= 50 for r in ranked), len(hits)),
        "false_trigger_top1": _pct(sum(s["rank"] == 1 for s in misses), len(misses)),
        "false_trigger_described": _pct(sum(s["described"] for s in misses), len(misses)),
        "hub": hubs(samples),
        "prompt_build_cpu_ms": _spread([s["cpu_ms"] for s in samples]),
        "s3_requests_per_prompt": round(requests / len(samples), 3) if samples else 0.0,
        "samples": samples,
    }


_COLUMNS = [
    ("ranker", "ranker", "{}"),
    ("skills", "skills", "{}"),
    ("described", "in_index_with_description", "{:.1f}"),
    ("in index", "in_index", "{:.1f}"),
    ("page 1", "on_first_search_page", "{:.1f}"),
    ("top1", "top1", "{:.1f}"),
    ("top5", "top5", "{:.1f}"),
    ("top10", "top10", "{:.1f}"),
    ("top50", "top50", "{:.1f}"),
    ("FT top1", "false_trigger_top1", "{:.1f}"),
    ("FT desc", "false_trigger_described", "{:.1f}"),
]


def table(runs: Sequence[Mapping[str, Any]], key: str = "variants") -> str:
    """The runs as a text table, a row per variant (percentages of the split's requests; FT:
    should-not requests; hub: the share of requests aimed elsewhere that one skill tops)."""
    rows = [[label for label, _, _ in _COLUMNS] + ["variant", "hub", "CPU ms median [p10-p90]"]]
    for run in runs:
        for variant, summary in run.get(key, {run.get("variant", "plain"): run}).items():
            cpu = summary["prompt_build_cpu_ms"]
            rows.append(
                [fmt.format(summary[key]) for _, key, fmt in _COLUMNS]
                + [variant, f"{summary['hub']['share']:.1f}"]
                + [f"{cpu.get('median', 0):.1f} [{cpu.get('p10', 0):.1f}-{cpu.get('p90', 0):.1f}]"]
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def _sizes(text: str, corpus_size: int) -> list[int]:
    sizes = []
    for part in text.split(","):
        size = corpus_size if part.strip() == "corpus" else int(part)
        if size < corpus_size:
            raise ValueError(f"size {size} is below the corpus ({corpus_size} skills)")
        sizes.append(size)
    return sizes


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Run the bench as the command line asks; returns the report (also written to a file)."""
    path = Path(args.requests) if args.requests else TRAFFIC if args.set == "traffic" else REQUESTS
    repositories, requests = load_traffic(path) if args.set == "traffic" else load_requests(path)
    chosen = [r for r in requests if args.split == "all" or r.split == args.split]
    corpus = load_corpus(repositories)
    found = overlaps(chosen)
    half = set(request_shape.least_overlapping_half(found))
    variants = VARIANTS if args.variants else ("plain",)
    report: dict[str, Any] = {
        "bench": "findability_real",
        "commit": record.machine()["commit"],
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "nproc": os.cpu_count()},
        "load_average_before": list(os.getloadavg()),
        "split": args.split,
        "set": args.set,
        "requests_file": str(path),
        "overlap": {rid: {"weighted": round(o.weighted, 3), "run": o.run} for rid, o in found.items()},
        "least_overlapping_half": sorted(half),
        "budget_chars": args.budget,
        "seed": args.seed,
        "distractors": args.distractors,
        "background_frequencies": has_background(),  # wordfreq installed: chat words weigh less
        "corpus_skills": len(corpus.skills),
        "excluded_skills": corpus.excluded,
        "collapsed_copies": corpus.collapsed,
        "runs": [],
    }
    for size in _sizes(args.sizes, len(corpus.skills)):
        for name in args.ranker or ["default"]:
            with settings(name):
                report["runs"].append(
                    await measure(
                        size,
                        chosen,
                        corpus,
                        name,
                        args.budget,
                        args.seed,
                        variants,
                        half,
                        args.distractors,
                        args.long_words,
                    )
                )
    report["load_average_after"] = list(os.getloadavg())
    return report


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); 0 unless something fails to run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--sizes", default="corpus,10000", help="Library sizes: 'corpus' (every pushable skill) or N.")
    parser.add_argument("--ranker", action="append", help="A ranker variant (repeatable; see --list-rankers).")
    parser.add_argument("--list-rankers", action="store_true", help="Print the ranker presets and exit.")
    parser.add_argument("--budget", type=int, default=6000, help="The prompt index budget (the default: 6000).")
    parser.add_argument(
        "--variants", action="store_true", help="Also each request with a preamble, pasted code, after a thread."
    )
    parser.add_argument(
        "--distractors",
        default=findability_distractors.DEFAULT_KIND,
        help="blended (default): each from several real skills; real: two of one repository re-combined; "
        "generated: the synthetic bench's; or blended:donors=N,scope=repo|any.",
    )
    parser.add_argument(
        "--long-words",
        type=int,
        default=0,
        help="Also time one prompt build for each of 40 requests padded to this many words (0: none).",
    )
    parser.add_argument("--seed", type=int, default=7, help="The distractors' seed.")
    parser.add_argument(
        "--set", choices=("first", "traffic"), default="first", help="first: requests.json; traffic: traffic.json."
    )
    parser.add_argument("--requests", help="The request file (default: the --set's).")
    parser.add_argument(
        "--out", metavar="FILE", help="The results file (default: bench/results/findability_real-*.json)."
    )
    args = parser.parse_args(argv)
    if args.list_rankers:
        print("\n".join(f"{name:10} {about}" for name, about in PRESETS.items()))
        print(
            "bm25:name=2,description=1,sketch=3,b.name=0.3,b.description=0.75,b.sketch=0,k1=1.2,"
            f"ids=0,qcap=0,idf=0,content=words  (any subset; content: {'|'.join(SKETCH_MODES)})"
        )
        return 0
    try:
        findability_distractors.maker(args.distractors)
    except ValueError as exc:
        parser.error(str(exc))
    for name in args.ranker or []:
        try:
            make_variant(name) if not name.startswith("hybrid") else None
        except ValueError as exc:
            parser.error(str(exc))
    report = asyncio.run(main_async(args))
    out = (
        Path(args.out) if args.out else RESULTS / f"findability_real-{args.split}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"split {args.split}; {report['corpus_skills']} corpus skills ({len(report['excluded_skills'])} left out)")
    if not report["background_frequencies"]:
        print("note: wordfreq is not installed: no background-language weighting (pip install 's3skills[ranking]')")
    print(table(report["runs"]))
    for run in report["runs"]:
        if "long_request" in run:
            cpu = run["long_request"]["cpu_ms"]
            print(
                f"{run['ranker']} at {run['skills']}: a {run['long_request']['words']}-word request: "
                f"CPU {cpu['median']:.1f} ms median [{cpu['p10']:.1f}-{cpu['p90']:.1f}]"
            )
    for run in report["runs"]:
        if "calibration" in run:
            print(f"{run['ranker']} at {run['skills']}, {args.distractors} distractors, how hard they are (per skill):")
            print(calibration_table([(args.distractors, run["calibration"])]))
    if report["least_overlapping_half"]:
        print(f"least-overlapping half ({len(report['least_overlapping_half'])} requests, and the should-not ones):")
        print(table(report["runs"], key="least_overlapping_half"))
    print(f"samples: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
