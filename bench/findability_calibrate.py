"""How hard are the distractors? Each family measured on the dev splits (issue 35).

What is measured, and when a family counts as "as hard as real skills", is in
`calibration.py`. `findability_real.py` computes it for every run with distractors (the run's `calibration`);
this command runs the dev splits of both request sets at the corpus plus `--count`
distractors for each family asked, to choose a family on dev only:

    python bench/findability_calibrate.py                                      # the three families
    python bench/findability_calibrate.py --distractors blended:donors=3,scope=any --seed 7 --seed 11

With several seeds each family is built and measured once per seed, and `summary` gives the
mean and range of its two ratios over the seeds (the choice in bench/README.md uses 7, 11, 13).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration import TOLERANCE, calibration, outranked, summary, table

__all__ = ["TOLERANCE", "calibration", "main", "outranked", "summary", "table"]


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    import findability_real as real
    from findability_variants import settings

    seeds = args.seed or [7]
    out: dict[str, Any] = {"bench": "findability_calibrate", "count": args.count, "seeds": seeds, "families": {}}
    sets: dict[str, tuple[list[Any], Any]] = {}
    for name in ("first", "traffic"):
        repositories, requests = real.load_traffic() if name == "traffic" else real.load_requests()
        dev = [r for r in requests if r.split == "dev" and r.target is not None]
        sets[name] = (dev, real.load_corpus(repositories))
    for kind in args.distractors or ["generated", "real", "blended"]:
        family: dict[str, Any] = {}
        for seed in seeds:
            rows: list[dict[str, Any]] = []
            per_set: dict[str, Any] = {}
            for name, (dev, corpus) in sets.items():
                with settings(args.ranker):
                    size = len(corpus.skills) + args.count
                    run = await real.measure(size, dev, corpus, args.ranker, args.budget, seed, distractors=kind)
                mine = [s["calibration"] for s in run["samples"] if "calibration" in s]
                per_set[name] = calibration(mine, len(corpus.skills), args.count)
                rows.extend(mine)
            family[str(seed)] = {"both": calibration(rows, len(corpus.skills), args.count), **per_set}
            print(table([(f"{kind} seed {seed} ({n})", c) for n, c in family[str(seed)].items()]), flush=True)
        family["summary"] = summary([family[str(seed)]["both"] for seed in seeds])
        out["families"][kind] = family
        print(f"{kind}: over seeds {seeds}: {json.dumps(family['summary'])}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); 0 unless something fails to run."""
    import findability_distractors

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--distractors", action="append", help="A family (repeatable; default: the three).")
    parser.add_argument("--count", type=int, default=2000, help="Distractors added to the corpus (2000).")
    parser.add_argument("--seed", type=int, action="append", help="A distractors' seed (repeatable; default 7).")
    parser.add_argument("--ranker", default="default", help="The ranker variant (findability_real --list-rankers).")
    parser.add_argument("--budget", type=int, default=6000, help="The prompt index budget.")
    parser.add_argument("--out", metavar="FILE", help="The results file (default: bench/results/).")
    args = parser.parse_args(argv)
    for kind in args.distractors or []:
        try:
            findability_distractors.maker(kind)
        except ValueError as exc:
            parser.error(str(exc))
    report = asyncio.run(_run(args))
    results = Path(__file__).resolve().parent / "results"
    out = Path(args.out) if args.out else results / f"findability_calibrate-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
