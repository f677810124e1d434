"""Choose the ranker's field weights on the findability bench's DEV split (never the test split).

For each candidate weighting it ranks the library (`--size` skills, built as
bench/findability.py builds it) for every dev request and reports where the right skill
lands: top 1, top 10, top 25 (about what the prompt index describes) and top 50 (page 1
of list_skills). The weights in `s3skills.skills.ranking.matching.FIELD_WEIGHTS` were chosen with it.

    python bench/findability_tune.py --size 10000
    python bench/findability_tune.py --size 10000 --priors   # the priors' weights instead

With `--hybrid` it tries `HybridRanker`'s fusion constant and dense weight
(`s3skills.skills.ranking.embedding.RRF_K`, `DENSE_WEIGHT`) with the MiniLM encoder (needs the
`embeddings` extra; embedding 10,000 skills takes a minute or two):

    python bench/findability_tune.py --size 10000 --hybrid

With `--priors` it tries `ranking.PRIOR_WEIGHT` x `ranking.LOADED_CATEGORY_PRIOR` on the
dev histories (`findability_data/histories.tsv`: the user's past uses and the thread's
loaded skills), ranking as the prompt index does, and reports the same ranks.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys

import findability

from s3skills.fs import S3Backend
from s3skills.skills.ranking import rankers as ranking
from s3skills.skills.ranking.matching import Bm25Index
from s3skills.testing import MemoryObjectStore


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


async def _library(size: int, seed: int) -> list[object]:
    store = MemoryObjectStore("bench")
    findability.build_library(store, findability.load_core(), size, seed)
    backend = S3Backend("bench", user_id=findability.USER, store=store, layout=findability.LAYOUT)
    return list(await backend.skills.aindex())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--name", default="1,2,3", help="Weights of the name field to try.")
    parser.add_argument("--description", default="0.5,1,1.5", help="Weights of the description field to try.")
    parser.add_argument("--sketch", default="0.6,1,1.5,2,3", help="Weights of the sketch field to try.")
    parser.add_argument("--b-sketch", default="0.75", help="Length normalisation of the sketch field to try.")
    parser.add_argument("--k1", default="1.2", help="k1 values to try.")
    parser.add_argument("--misses", action="store_true", help="Print the dev requests the best one misses.")
    parser.add_argument("--priors", action="store_true", help="Tune the priors on the dev histories instead.")
    parser.add_argument("--hybrid", action="store_true", help="Tune HybridRanker's fusion on the dev requests.")
    parser.add_argument("--rrf-k", default="10,30,60", help="HybridRanker k values to try.")
    parser.add_argument("--dense-weight", default="0.5,1,2", help="HybridRanker dense weights to try.")
    parser.add_argument("--prior-weight", default="0,0.25,0.5,1,2,4", help="PRIOR_WEIGHT values to try.")
    parser.add_argument("--loaded-category", default="0,0.25,0.5,1", help="LOADED_CATEGORY_PRIOR values to try.")
    args = parser.parse_args(argv)
    skills = asyncio.run(_library(args.size, args.seed))
    if args.priors:
        return _tune_priors(skills, args)
    if args.hybrid:
        return _tune_hybrid(skills, args)
    cases = [c for c in findability.load_cases() if c.split == "dev"]
    rows = []
    grid = itertools.product(
        _floats(args.name), _floats(args.description), _floats(args.sketch), _floats(args.b_sketch), _floats(args.k1)
    )
    misses: dict[tuple[float, ...], list[str]] = {}
    for name, desc, sketch, b_sketch, k1 in grid:
        weights = {"name": name, "description": desc, "sketch": sketch}
        b = {"name": 0.3, "description": 0.75, "sketch": b_sketch}
        index = Bm25Index(skills, weights, b=b, k1=k1)  # type: ignore[arg-type]
        ranks = []
        for case in cases:
            ids = [s.id for s, _ in index.rank(case.request, limit=50)]
            ranks.append(ids.index(case.skill_id) + 1 if case.skill_id in ids else 999)
        misses[(name, desc, sketch, b_sketch, k1)] = [
            f"{r:4} {c.skill_id}: {c.request}" for r, c in zip(ranks, cases, strict=True) if r > 10
        ]
        hits = [sum(r <= k for r in ranks) * 100 / len(ranks) for k in (1, 10, 25, 50)]
        rows.append(((name, desc, sketch, b_sketch, k1), hits))
    rows.sort(key=lambda row: (-row[1][2], -row[1][3], -row[1][0]))
    print("name desc sketch b_sketch k1 | top1 top10 top25 top50 (% of dev requests)")
    for params, hits in rows[:15]:
        print(" ".join(f"{p:4}" for p in params) + " | " + " ".join(f"{h:5.1f}" for h in hits))
    if args.misses:
        print("\nrequests of the best weighting whose skill is not in the top 10 (rank, skill, request):")
        print("\n".join(misses[rows[0][0]]))
    return 0


def _tune_hybrid(skills: list[object], args: argparse.Namespace) -> int:
    from s3skills.skills.ranking.embedding import HybridRanker, MiniLMEncoder

    cases = [c for c in findability.load_cases() if c.split == "dev"]
    ranker = HybridRanker(MiniLMEncoder(), background=False)
    ranker.warm(skills)  # type: ignore[arg-type]
    rows = []
    for k, weight in itertools.product(_floats(args.rrf_k), _floats(args.dense_weight)):
        ranker.k, ranker.dense_weight = k, weight
        ranks = []
        for case in cases:
            ids = [s.id for s, _ in ranker.rank(case.request, skills)[:50]]  # type: ignore[arg-type]
            ranks.append(ids.index(case.skill_id) + 1 if case.skill_id in ids else 999)
        hits = [sum(r <= n for r in ranks) * 100 / len(ranks) for n in (1, 10, 25, 50)]
        rows.append(((k, weight), hits))
    rows.sort(key=lambda row: (-row[1][3], -row[1][2], -row[1][1]))
    print(f"{len(cases)} dev requests, {len(skills)} skills")
    print("   k weight | top1 top10 top25 top50 (% of dev requests)")
    for params, hits in rows:
        print(" ".join(f"{p:5}" for p in params) + " | " + " ".join(f"{h:5.1f}" for h in hits))
    return 0


def _tune_priors(skills: list[object], args: argparse.Namespace) -> int:
    histories = [h for h in findability.load_histories() if h.case.split == "dev"]
    rows = []
    for weight, category in itertools.product(_floats(args.prior_weight), _floats(args.loaded_category)):
        ranking.PRIOR_WEIGHT, ranking.LOADED_CATEGORY_PRIOR = weight, category
        ranks = []
        for history in histories:
            prior = ranking.prior_for(history.uses, history.loaded)
            order = ranking.order_for([history.case.request], skills, set(history.loaded), prior=prior)  # type: ignore[arg-type]
            ids = [s.id for s in order[:50]]
            ranks.append(ids.index(history.case.skill_id) + 1 if history.case.skill_id in ids else 999)
        hits = [sum(r <= k for r in ranks) * 100 / len(ranks) for k in (1, 10, 25, 50)]
        rows.append(((weight, category), hits))
    print(f"{len(histories)} dev histories")
    print("prior_weight loaded_category | top1 top10 top25 top50 (% of dev histories)")
    for params, hits in rows:
        print(" ".join(f"{p:12}" for p in params) + " | " + " ".join(f"{h:5.1f}" for h in hits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
