"""CPU of one prompt build at 10,000 skills, the score-list ranking on and off (issue 35).

The library is the one `findability_real.py --sizes 10000` builds (the real-skills corpus
grown with realistic distractors) in an in-memory store. `SkillsPromptMiddleware` is
warmed once (its ranking index built), then for each of the first 40 requests of the
traffic set's split, as written and padded with pasted code and log lines to `--words`
words (`findability_robust.long_message`, the CPU measure of `findability_real.py
--long-words`), the prompt is built twice: with `rankers.DENSE_ORDER` on (each turn's
scores as one list, one sort) and off (through `(skill, score)` pairs, the path of any
other ranker), alternating which goes first. Each build's process CPU and garbage
collections are recorded; both builds must give the same prompt.

Both ways run in one process at the same moment, so their ratio holds on a loaded
machine where the milliseconds do not: quote the ratio from a shared machine and the
milliseconds from an idle one. On a tree without `DENSE_ORDER` (before issue 35's CPU
work) only that tree's own way is measured.

    python bench/prompt_cpu.py                        # 10,000 skills, 2,000-word requests
    python bench/prompt_cpu.py --size 2000 --words 500 --requests 10
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import findability  # the synthetic bench: its library layout
import findability_real
import record  # bench/record.py
from findability_robust import long_message
from langchain_core.messages import HumanMessage

from s3skills.fs import S3Backend
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills.ranking import rankers
from s3skills.testing import MemoryObjectStore

__all__ = ["main", "measure"]

WAYS = {"score lists": True, "pairs": False}
"""The two ways `order_for` ranks with the default ranker: `rankers.DENSE_ORDER` on and off."""


@contextmanager
def _dense(on: bool) -> Iterator[None]:
    saved = getattr(rankers, "DENSE_ORDER", None)
    if saved is not None:
        rankers.DENSE_ORDER = on  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if saved is not None:
            rankers.DENSE_ORDER = saved  # type: ignore[attr-defined]


class _Collections:
    """How many garbage collections (any generation) ran since `reset`."""

    def __init__(self) -> None:
        self.count = 0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, _info: dict[str, Any]) -> None:
        self.count += phase == "start"

    def close(self) -> None:
        gc.callbacks.remove(self._seen)


async def _build(middleware: SkillsPromptMiddleware, text: str, collections: _Collections) -> tuple[float, int, str]:
    before_gc = collections.count
    cpu = time.process_time()
    prompt = await middleware.build_prompt({"messages": [HumanMessage(text)]})
    return 1000 * (time.process_time() - cpu), collections.count - before_gc, prompt


async def measure(size: int, words: int, count: int, split: str, seed: int) -> dict[str, Any]:
    """Every sample of one run: per request and kind (`long`, `plain`), each way's CPU (ms),
    collections and whether the prompts agree."""
    repositories, requests = findability_real.load_traffic()
    chosen = [r for r in requests if split == "all" or r.split == split][:count]
    corpus = findability_real.load_corpus(repositories)
    store = MemoryObjectStore("bench")
    skills = findability_real.build_real_library(store, corpus, size, seed)
    backend = S3Backend("bench", user_id=findability.USER, store=store, layout=findability.LAYOUT)
    middleware = SkillsPromptMiddleware(backend)
    await middleware.build_prompt({"messages": [HumanMessage("hello")]})  # warm: the ranking index
    ways = WAYS if hasattr(rankers, "DENSE_ORDER") else {"as is": True}
    collections = _Collections()
    samples: list[dict[str, Any]] = []
    try:
        for n, request in enumerate(chosen):
            for kind, text in (
                ("long", long_message(request.query, request.id, request.split, words)),
                ("plain", request.query),
            ):
                sample: dict[str, Any] = {"id": request.id, "kind": kind}
                prompts = set()
                order = list(ways.items()) if n % 2 == 0 else list(reversed(ways.items()))
                for name, on in order:
                    with _dense(on):
                        cpu_ms, gcs, prompt = await _build(middleware, text, collections)
                    sample[name] = {"cpu_ms": round(cpu_ms, 3), "collections": gcs}
                    prompts.add(prompt)
                sample["same_prompt"] = len(prompts) == 1
                samples.append(sample)
    finally:
        collections.close()
    return {"skills": skills, "words": words, "ways": list(ways), "samples": samples}


def _summary(samples: Sequence[dict[str, Any]], ways: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": len(samples), "same_prompt": sum(s["same_prompt"] for s in samples)}
    for way in ways:
        out[way] = {
            "cpu_ms": record.spread(s[way]["cpu_ms"] for s in samples),
            "collections": record.spread(s[way]["collections"] for s in samples),
        }
    if len(ways) == 2:
        first, second = ways
        out["cpu_ratio"] = {
            "of_medians": out[first]["cpu_ms"]["median"] / out[second]["cpu_ms"]["median"],
            "per_request": record.spread(s[first]["cpu_ms"] / s[second]["cpu_ms"] for s in samples),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); 0 unless something fails to run or the prompts differ."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000, help="Skills in the library (the default: 10,000).")
    parser.add_argument("--words", type=int, default=2000, help="Words of the long requests (the default: 2,000).")
    parser.add_argument("--requests", type=int, default=findability_real.LONG_REQUESTS, help="Requests (40).")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="test")
    parser.add_argument("--seed", type=int, default=7, help="The distractors' seed.")
    parser.add_argument("--out", type=Path, help="The results file (default: bench/results/prompt_cpu-*.json).")
    args = parser.parse_args(argv)
    run = record.Run("prompt_cpu", argv)
    found = asyncio.run(measure(args.size, args.words, args.requests, args.split, args.seed))
    summary = {
        kind: _summary([s for s in found["samples"] if s["kind"] == kind], found["ways"]) for kind in ("long", "plain")
    }
    path = run.write(
        args.out,
        extra={**{k: v for k, v in found.items() if k != "samples"}, "summary": summary, "samples": found["samples"]},
    )
    print(f"{found['skills']} skills; process CPU per prompt build, median [p10-p90] over every request:")
    for kind, part in summary.items():
        label = f"{found['words']}-word request" if kind == "long" else "request as written"
        for way in found["ways"]:
            cpu, gcs = part[way]["cpu_ms"], part[way]["collections"]
            print(
                f"  {label:22} {way:12} {cpu['median']:8.1f} ms [{cpu['p10']:.1f}-{cpu['p90']:.1f}]"
                f"  collections {gcs['median']:.0f} [{gcs['p10']:.0f}-{gcs['p90']:.0f}]"
            )
        if "cpu_ratio" in part:
            ratio, each = part["cpu_ratio"], part["cpu_ratio"]["per_request"]
            print(
                f"  {label:22} ratio {ratio['of_medians']:.2f} of the medians, per request "
                f"{each['median']:.2f} [{each['p10']:.2f}-{each['p90']:.2f}];"
                f" same prompt {part['same_prompt']}/{part['requests']}"
            )
    print(f"samples: {path}")
    return 0 if all(s["same_prompt"] for s in found["samples"]) else 1


if __name__ == "__main__":
    sys.exit(main())
