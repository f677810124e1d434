"""Screen hybrid-ranking variants on the real-skills benches' dev splits, ranks only.

`findability_real.py` builds a prompt and a search page for every request; that is the
figure to report, but too slow to sweep a grid with (a hybrid run at 10,000 skills takes
minutes). This script builds each library once (the corpus, and 10,000 with the default
blended distractors, the same seed as `findability_real.py`), ranks every dev request of
both sets the way `HybridRanker` under `order_for` does (each user turn fused by reciprocal
rank, the earlier turns at `EARLIER_WEIGHT`), and reports top 1 / 5 / 50, near miss first
and hub per setting. Skill and request vectors come through `vector_cache.CachedEncoder`.

    python bench/recall_screen.py --diagnose          # the lexical misses at 10,000
    python bench/recall_screen.py --grid               # the dense query/text and RRF grid
    python bench/recall_screen.py --ceiling            # what any reranker over N candidates could reach

Dev splits only: the test split is not read.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import findability
import numpy as np
import request_shape
from findability_real import build_real_library, load_corpus, load_requests, load_traffic, overlaps
from findability_robust import conversation
from findability_variants import sketches
from langchain_core.messages import AIMessage, HumanMessage
from vector_cache import CachedEncoder

from s3skills.fs import S3Backend
from s3skills.middleware.skills_prompt import recent_requests
from s3skills.skills.format.model import SkillInfo
from s3skills.skills.format.parse import parse_skill_md
from s3skills.skills.ranking import embedding
from s3skills.skills.ranking.matching import bm25_index
from s3skills.skills.ranking.rankers import EARLIER_TURNS, EARLIER_WEIGHT
from s3skills.testing import MemoryObjectStore

QUERY_CHARS = 8000  # the middleware's max_prompt_query_chars default


def _turns(request: Any, variant: str = "plain") -> list[str]:
    messages = conversation(variant, request.id, request.split, request.conversation())
    state = {"messages": [HumanMessage(t) if r == "user" else AIMessage(t) for r, t in messages]}
    return recent_requests(state, max_chars=QUERY_CHARS)


async def _library(corpus: Any, size: int) -> tuple[list[SkillInfo], dict[str, str]]:
    """The library's skills, and each one's SKILL.md body (what the `body` texts embed)."""
    store = MemoryObjectStore("bench")
    build_real_library(store, corpus, size, 7)
    backend = S3Backend("bench", user_id=findability.USER, store=store, layout=findability.LAYOUT)
    with sketches("words"):
        skills = list(await backend.skills.aindex())
    bodies = {}
    for skill in skills:
        data = (await store.aget(f"{findability.PREFIX}{skill.id}/SKILL.md")).data
        bodies[skill.id] = parse_skill_md(data, folder=skill.id).body
    return skills, bodies


def headings(skill: SkillInfo) -> str:
    """The body sketch's headings (`heading; heading | words`), or ""."""
    return skill.sketch.split(" | ", 1)[0] if " | " in skill.sketch else ""


BODY_CHUNKS = 6  # the first `## ` sections of a body embedded, each cut to BODY_CHARS
BODY_CHARS = 1000  # about MiniLM's 256 tokens


def body_chunks(skill: SkillInfo, body: str) -> list[str]:
    """A skill's description, then its body's first `BODY_CHUNKS` `## ` sections of 8 words or more,
    each cut to `BODY_CHARS`. A section is embedded as it is (no folder name): a blended
    distractor's sections are its donors' own, so their vectors come from the cache."""
    sections = [" ".join(p.split())[:BODY_CHARS] for p in re.split(r"(?m)^(?=##\s)", body)]
    return [embedding.skill_text(skill), *[c for c in sections if len(c.split()) >= 8][:BODY_CHUNKS]]


# Each mode gives a skill's texts; a skill's similarity is the largest of its texts'.
SKILL_TEXTS: dict[str, Callable[[SkillInfo, str], list[str]]] = {
    "desc": lambda s, b: [embedding.skill_text(s)],
    "desc+head": lambda s, b: [f"{embedding.skill_text(s)} {headings(s)}".strip()],
    "body": body_chunks,
}


def _prose(text: str) -> str:
    from s3skills.skills.ranking.query import query_parts

    prose = "\n".join(t for t, w in query_parts(text) if w >= 1)
    return prose if prose.strip() else text


QUERY_TEXTS: dict[str, Callable[[str], str]] = {
    "raw": lambda t: t[: embedding.MAX_QUERY_CHARS],
    "prose": lambda t: _prose(t)[: embedding.MAX_QUERY_CHARS],
    "prose-tail": lambda t: _prose(t)[-1000:],
}


class FolderEncoder:
    """A sentence-transformers model from a folder on disk (`--model`), unit vectors on the CPU.

    For screening another encoder against MiniLM on the same dev splits; the library's
    `HybridRanker` takes any `Encoder`, so a model that wins here needs no change but a package."""

    def __init__(self, folder: str, threads: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.model = SentenceTransformer(folder, device="cpu", local_files_only=True)

    def encode(self, texts: Sequence[str]) -> Any:
        return self.model.encode(list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False)


class Screen:
    """One library: its lexical rankings per turn and its skill vectors per text mode."""

    def __init__(self, library: tuple[list[SkillInfo], dict[str, str]], encoder: CachedEncoder) -> None:
        skills, self.bodies = library
        self.skills = skills
        self.ids = [s.id for s in skills]
        self.index = bm25_index(skills)
        self.encoder = encoder
        self.matrices: dict[str, Any] = {}
        self.lexical: dict[str, list[int]] = {}
        self.scores: dict[str, list[float]] = {}

    def similarities(self, mode: str, query: Any) -> Any:
        """Each skill's cosine similarity to the unit vector `query`: its best text's."""
        if mode not in self.matrices:
            texts = [SKILL_TEXTS[mode](s, self.bodies[s.id]) for s in self.skills]
            starts = np.cumsum([0] + [len(t) for t in texts[:-1]])
            rows = np.asarray(self.encoder.encode([x for t in texts for x in t]))
            self.matrices[mode] = (rows, starts)
        rows, starts = self.matrices[mode]
        return np.maximum.reduceat(rows @ query, starts)

    def lex(self, text: str) -> list[int]:
        if text not in self.lexical:
            position = {sid: p for p, sid in enumerate(self.ids)}
            ranked = self.index.rank(text)
            self.lexical[text] = [position[s.id] for s, _ in ranked]
            self.scores[text] = [score for _, score in ranked]
        return self.lexical[text]


def fuse(lexical: list[int], dense: list[int] | None, k: float, weight: float, tail: bool = True) -> dict[int, float]:
    scores: dict[int, float] = {}
    for r, p in enumerate(lexical[: embedding.LEXICAL_HEAD]):
        scores[p] = 1.0 / (k + r + 1)
    for r, p in enumerate(dense or []):
        scores[p] = scores.get(p, 0.0) + weight / (k + r + 1)
    if not tail and len(scores) >= 50:  # the tail scores below every fused skill: never in a top 50
        return scores
    floor = min(scores.values(), default=1.0)
    for r, p in enumerate(lexical[embedding.LEXICAL_HEAD :], start=embedding.LEXICAL_HEAD):
        scores.setdefault(p, min(floor, 1.0 / (k + r + 1)) * 0.999)
    return scores


def ranked_texts(turns: Sequence[str]) -> list[str]:
    """What `order_for` ranks: the latest user turn, then the earlier ones joined (if any)."""
    texts = [t for t in turns[: 1 + EARLIER_TURNS] if t.strip()]
    return [texts[0], " ".join(texts[1:])] if len(texts) > 1 else texts[:1]


def lexical_totals(screen: Screen, turns: Sequence[str]) -> dict[int, float]:
    """Position -> the BM25F score `order_for` adds over the turns (earlier at `EARLIER_WEIGHT`)."""
    total: dict[int, float] = {}
    for n, text in enumerate(ranked_texts(turns)):
        for p, score in zip(screen.lex(text), screen.scores[text], strict=True):
            total[p] = total.get(p, 0.0) + (1.0 if n == 0 else EARLIER_WEIGHT) * score
    return total


def order(
    screen: Screen,
    turns: Sequence[str],
    qvec: Callable[[str], Any],
    setting: dict[str, Any],
) -> list[int]:
    """Positions, best first (the top 50 at least), as `order_for` with a fused ranker."""
    texts = ranked_texts(turns)
    if setting["weight"] == 0:  # lexical only: the BM25F scores, as order_for adds them
        total = lexical_totals(screen, turns)
        return heapq.nsmallest(50, total, key=lambda p: (-total[p], screen.ids[p]))
    total = {}
    latest_dense: list[int] = []
    for n, text in enumerate(texts):
        lexical = screen.lex(text)
        dense = None
        if setting["weight"] > 0 and (n == 0 or setting["earlier_dense"]):
            sims = screen.similarities(setting["skill"], qvec(QUERY_TEXTS[setting["query"]](text)))
            depth = setting["depth"]
            top = np.argpartition(-sims, depth - 1)[:depth]
            dense = [int(i) for i in top[np.argsort(-sims[top], kind="stable")]]
            latest_dense = dense if n == 0 else latest_dense
        scores = (
            fuse(lexical, dense, setting["k"], setting["weight"], tail=len(texts) > 1)
            if dense
            else {p: 1.0 / (setting["k"] + r + 1) for r, p in enumerate(lexical)}
        )
        for p, s in scores.items():
            total[p] = total.get(p, 0.0) + (1.0 if n == 0 else EARLIER_WEIGHT) * s
    head = heapq.nsmallest(50, total, key=lambda p: (-total[p], screen.ids[p]))
    promote = setting.get("promote", 0)  # the dense side's first n kept in the top 50 (at its end)
    missing = [p for p in latest_dense[:promote] if p not in head]
    return head[: 50 - len(missing)] + missing if missing else head


def figures(results: list[tuple[Any, list[str]]], half: set[str]) -> dict[str, Any]:
    hits = [(r, top) for r, top in results if r.target]
    misses = [(r, top) for r, top in results if not r.target]

    def rank(r: Any, top: list[str]) -> int:
        return top.index(r.target) + 1 if r.target in top else 10**9

    def pct(n: int, d: int) -> float:
        return round(100 * n / d, 1) if d else 0.0

    out: dict[str, Any] = {}
    for label, rows in (("all", hits), ("half", [(r, t) for r, t in hits if r.id in half])):
        ranks = [rank(r, t) for r, t in rows]
        out[label] = [pct(sum(x <= n for x in ranks), len(ranks)) for n in (1, 5, 10, 50)]
    out["ft1"] = pct(sum(bool(t) and t[0] == r.near_miss_of for r, t in misses), len(misses))
    firsts = Counter(t[0] for r, t in results if t and t[0] != (r.target or r.near_miss_of))
    worst, count = max(firsts.items(), key=lambda kv: (kv[1], kv[0])) if firsts else ("", 0)
    elsewhere = sum(1 for r, _ in results if (r.target or r.near_miss_of) != worst)
    out["hub"] = pct(count, elsewhere)
    return out


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    sets = {}
    for name, loader in (("first", load_requests), ("traffic", load_traffic)):
        repositories, requests = loader()
        dev = [r for r in requests if r.split == "dev"]
        sets[name] = (repositories, dev, set(request_shape.least_overlapping_half(overlaps(dev))))
    corpus = load_corpus(sets["first"][0])
    from s3skills.skills.ranking.embedding import MiniLMEncoder

    if args.model:  # another encoder, for the screen only: its vectors are cached under its folder's name
        encoder = CachedEncoder(FolderEncoder(args.model, args.threads), name=Path(args.model).name)
    else:
        encoder = CachedEncoder(MiniLMEncoder(threads=args.threads, batch_size=128))
    screens = {size: Screen(await _library(corpus, size), encoder) for size in args.sizes}
    turns = {(name, r.id): _turns(r) for name, (_, dev, _) in sets.items() for r in dev}
    for variant in args.variants:  # at the smallest size only (the brief's robustness check)
        turns.update(
            {(f"{name}+{variant}", r.id): _turns(r, variant) for name, (_, dev, _) in sets.items() for r in dev}
        )
    if args.diagnose:
        diagnose(screens[max(screens)], sets, turns)
        return []
    if args.body_stats:
        for size, screen in screens.items():
            print(json.dumps({"skills": size, **body_stats(screen, set(corpus.skills))}))
        return []
    if args.ceiling:
        texts = sorted({QUERY_TEXTS["prose"](ranked_texts(ts)[0]) for ts in turns.values()})
        vectors = dict(zip(texts, encoder.encode(texts), strict=True))
        rows = []
        for size, screen in screens.items():
            for name, (_, dev, half) in sets.items():
                row = {"skills": size, "set": name, **ceiling(screen, dev, half, turns, name, vectors, args.skill)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        return rows
    # every query text of every mode, embedded once in one batch (cached on disk)
    texts = sorted(
        {
            QUERY_TEXTS[q](t)
            for q in args.query
            for ts in turns.values()
            for t in [ts[0], " ".join(ts[1:3])]
            if t.strip()
        }
    )
    qrows = dict(zip(texts, encoder.encode(texts), strict=True))
    grid = [
        {"skill": s, "query": q, "k": k, "weight": w, "depth": d, "earlier_dense": e, "promote": n}
        for s, q, k, w, d, e, n in itertools.product(
            args.skill, args.query, args.k, args.weight, args.depth, args.earlier, args.promote
        )
    ]
    grid.insert(0, {"skill": "desc", "query": "raw", "k": 10, "weight": 0.0, "depth": 100, "earlier_dense": True})
    rows = []
    for setting in grid:
        row: dict[str, Any] = {"setting": setting}
        for size, screen in screens.items():
            for name, (_, dev, half) in sets.items():
                results = [
                    (r, [screen.ids[p] for p in order(screen, turns[(name, r.id)], qrows.__getitem__, setting)])
                    for r in dev
                ]
                row[f"{name}@{size}"] = figures(results, half)
                for variant in args.variants if size == min(screens) else ():
                    key = f"{name}+{variant}"
                    results = [
                        (r, [screen.ids[p] for p in order(screen, turns[(key, r.id)], qrows.__getitem__, setting)])
                        for r in dev
                    ]
                    row[f"{key}@{size}"] = figures(results, half)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def body_stats(screen: Screen, real: set[str]) -> dict[str, int]:
    """How many `## ` sections `--skill body` embeds, how many are distinct, and in how many
    skills a real skill's section is (median, p90): the blended distractors copy them."""
    owners: dict[str, set[str]] = {}
    for s in screen.skills:
        for chunk in body_chunks(s, screen.bodies[s.id])[1:]:
            owners.setdefault(chunk, set()).add(s.id)
    held = sorted(len(o) for o in owners.values() if o & real)
    return {
        "sections": sum(len(o) for o in owners.values()),
        "distinct": len(owners),
        "of_real_skills": len(held),
        "holders_median": held[len(held) // 2] if held else 0,
        "holders_p90": held[int(len(held) * 0.9)] if held else 0,
    }


CEILING_DEPTHS = (50, 100, 200, 500, 1000)


def ceiling(
    screen: Screen,
    dev: list[Any],
    half: set[str],
    turns: dict[tuple[str, str], list[str]],
    name: str,
    vectors: dict[str, Any],
    modes: Sequence[str],
) -> dict[str, Any]:
    """The share of targets among N candidates, for each depth N: the lexical ranking's first N
    (every turn, as `order_for` combines them), each embedding mode's first N (the latest turn's
    prose), and their union (up to N from each side). A second stage that reorders candidates,
    however good, can put on page 1 only a target among them: this is its ceiling."""
    ranks: dict[str, list[tuple[str, int]]] = {"lexical": []}
    for r in dev:
        if not r.target:
            continue
        target = screen.ids.index(r.target)
        total = lexical_totals(screen, turns[(name, r.id)])
        if target in total:  # ties are broken by id, as order() does
            key = (-total[target], screen.ids[target])
            ranks["lexical"].append((r.id, 1 + sum((-s, screen.ids[p]) < key for p, s in total.items())))
        else:
            ranks["lexical"].append((r.id, 10**9))
        for mode in modes:
            sims = screen.similarities(mode, vectors[QUERY_TEXTS["prose"](ranked_texts(turns[(name, r.id)])[0])])
            ranks.setdefault(mode, []).append((r.id, 1 + int(np.sum(sims > sims[target]))))
    return ceiling_shares(ranks, half)


def ceiling_shares(
    ranks: dict[str, list[tuple[str, int]]], half: set[str], depths: Sequence[int] = CEILING_DEPTHS
) -> dict[str, Any]:
    """For each side (`ranks`: side -> (request id, the target's rank), one pair a request) and
    their union (a target is among the union's candidates when any side has it within the depth),
    the % of targets within each of `depths`, on all requests and on the `half` given."""
    best: dict[str, int] = {}
    for side in ranks.values():
        for rid, rank in side:
            best[rid] = min(rank, best.get(rid, rank))
    out: dict[str, Any] = {"requests": len(best)}
    for label, keep in (("all", lambda rid: True), ("half", lambda rid: rid in half)):
        for name, pairs in [*ranks.items(), ("union", list(best.items()))]:
            rows = [rank for rid, rank in pairs if keep(rid)]
            out[f"{label}:{name}"] = [round(100 * sum(x <= d for x in rows) / max(1, len(rows)), 1) for d in depths]
    return out


def diagnose(screen: Screen, sets: dict[str, Any], turns: dict[tuple[str, str], list[str]]) -> None:
    by_id = {s.id: s for s in screen.skills}
    setting = {"skill": "desc", "query": "raw", "k": 10, "weight": 0.0, "depth": 100, "earlier_dense": True}
    for name, (_, dev, half) in sets.items():
        for r in dev:
            if not r.target:
                continue
            lexical = screen.lex(turns[(name, r.id)][0])
            top = order(screen, turns[(name, r.id)], lambda t: None, setting)
            ids = [screen.ids[p] for p in top]
            if r.target in ids:
                continue
            full = [screen.ids[p] for p in lexical]
            where = full.index(r.target) + 1 if r.target in full else None
            t = by_id[r.target]
            n_turns = len(turns[(name, r.id)])
            print(f"=== {name} {r.id} target {r.target} lexical rank {where} half={r.id in half} turns={n_turns}")
            print("   target:", t.metadata.description[:200].replace("\n", " "))
            print("   query:", turns[(name, r.id)][0][:400].replace("\n", " | "))
            print("   top3:", ids[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument("--body-stats", action="store_true", help="Count the body sections --skill body embeds.")
    parser.add_argument(
        "--ceiling", action="store_true", help="The share of targets among N candidates (lexical, dense, union)."
    )
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[670, 10000])
    parser.add_argument("--skill", nargs="+", default=["desc"])
    parser.add_argument("--query", nargs="+", default=["raw"])
    parser.add_argument("--k", nargs="+", type=float, default=[10])
    parser.add_argument("--weight", nargs="+", type=float, default=[1.0])
    parser.add_argument("--depth", nargs="+", type=int, default=[100])
    parser.add_argument("--earlier", nargs="+", type=int, default=[1])
    parser.add_argument(
        "--variants", nargs="*", default=[], help="Also these robustness variants, at the smallest size."
    )
    parser.add_argument(
        "--promote", nargs="+", type=int, default=[0], help="Keep the dense side's first n in the top 50."
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", help="A sentence-transformers model folder to screen instead of MiniLM.")
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    if args.out and rows:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
