"""What a prompt build costs in work, for a long request over a large library (issue 35).

The CPU itself is timed only in bench/ (`bench/prompt_cpu.py`); here the work is counted:
with the default ranker each turn's scores are one list of floats and the matches are
sorted once (`rankers.DENSE_ORDER`), so a ranking that matches every skill makes no
`(skill, score)` pair and no per-skill key, and the garbage collector does not run; the
library is indexed once per version and the request tokenised once per prompt. Every
order is the one the pair path (any other ranker's) gives, ties, turns and priors included.
"""

from __future__ import annotations

import gc
import json
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from s3skills import S3Backend
from s3skills.aio import run_sync
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import SkillInfo, SkillMetadata
from s3skills.skills.ranking import matching, rankers
from s3skills.skills.ranking.matching import Bm25Index
from s3skills.skills.ranking.rankers import order_for, prior_for
from s3skills.testing import MemoryObjectStore

BENCH = Path(__file__).resolve().parent.parent / "bench"
USER = "ana"
SEEDS = KeyLayout.seeds()
PREFIX = f"{USER}/skills/"
WORDS = tuple(
    " ".join(
        [
            "invoice ledger totals spreadsheet chart report export import parse schema table query index",
            "deploy container cluster pipeline build test coverage lint format review merge branch commit",
            "image resize crop video audio transcript subtitle translate summary email calendar meeting",
        ]
    ).split()
)


def info(skill_id: str, description: str, sketch: str = "") -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    return SkillInfo(id=skill_id, metadata=SkillMetadata(name=leaf, description=description), sketch=sketch)


def library(size: int, seed: int = 3) -> list[SkillInfo]:
    """`size` skills over a few folders, every description made of `WORDS`; each fifth one
    repeats an earlier description (equal scores: ties broken by id)."""
    rnd = random.Random(seed)
    skills: list[SkillInfo] = []
    for n in range(size):
        text = skills[rnd.randrange(n)].metadata.description if n and n % 5 == 0 else " ".join(rnd.sample(WORDS, 6))
        skills.append(
            info(f"{('docs', 'ops', 'media', 'team')[n % 4]}/s{n:05d}", f"{text}.", " ".join(rnd.sample(WORDS, 8)))
        )
    return sorted(skills, key=lambda s: s.id)


def long_request(words: int = 400) -> str:
    rnd = random.Random(11)
    code = "\n".join(f"    total_{n} = parse(row[{n}])  # {rnd.choice(WORDS)}" for n in range(20))
    prose = " ".join(rnd.choice(WORDS) for _ in range(words))
    return f"{prose}\n\n```python\n{code}\n```\nPlease fix the ledger totals in the spreadsheet export."


@contextmanager
def dense_order(on: bool) -> Iterator[None]:
    saved = rankers.DENSE_ORDER
    rankers.DENSE_ORDER = on
    try:
        yield
    finally:
        rankers.DENSE_ORDER = saved


@pytest.fixture
def pairs() -> Iterator[None]:
    """`order_for` through `(skill, score)` pairs, as with any ranker but the default."""
    with dense_order(False):
        yield


def both_ways(*args: Any, **kwargs: Any) -> tuple[list[str], list[str]]:
    with dense_order(True):
        dense = [s.id for s in order_for(*args, **kwargs)]
    with dense_order(False):
        through_pairs = [s.id for s in order_for(*args, **kwargs)]
    return dense, through_pairs


@pytest.mark.parametrize(
    ("turns", "exclude", "prior"),
    [
        (["fix the ledger totals"], set(), None),
        ([long_request()], set(), None),
        (["now the same for march", "export the invoice report as a spreadsheet"], set(), None),
        (["", "the invoice report"], set(), None),  # no latest request: by id
        (["ledger totals chart", "deploy", "resize an image"], {"docs/s00004", "ops/s00001"}, None),
        (["ledger totals chart"], set(), prior_for({"docs/s00008": 3, "media/s00002": 1}, ["ops/s00005"])),
        ([long_request(), "an earlier turn about video"], {"team/s00003"}, prior_for({"team/s00007": 2}, ["docs/s1"])),
        (["zzz nothing matches"], set(), prior_for({"docs/s00008": 1})),
    ],
)
def test_the_default_ranking_gives_the_order_the_pair_path_gives(
    turns: list[str], exclude: set[str], prior: dict[str, float] | None
) -> None:
    skills = library(400)
    dense, through_pairs = both_ways(turns, skills, exclude, prior=prior)
    assert dense == through_pairs
    assert sorted(dense) == sorted(s.id for s in skills if s.id not in exclude)


@pytest.mark.parametrize("turns", [[], [""], ["   ", "earlier"], ["\x00\ud800 ```"], ["a" * 20_000]])
def test_empty_blank_and_odd_turns_give_the_library_by_id_either_way(turns: list[str]) -> None:
    skills = library(50)
    dense, through_pairs = both_ways(turns, skills)
    assert dense == through_pairs == [s.id for s in skills]
    assert both_ways(turns, []) == ([], [])


def test_equal_scores_are_ordered_by_id_in_the_ranking_and_in_the_index() -> None:
    twins = [info(f"t/{name}", "Ledger totals for the month.") for name in ("delta", "alpha", "charlie", "bravo")]
    skills = sorted([*twins, info("t/other", "Resize an image.")], key=lambda s: s.id)
    assert [s.id for s, _ in Bm25Index(skills).rank("ledger totals")] == ["t/alpha", "t/bravo", "t/charlie", "t/delta"]
    dense, through_pairs = both_ways(["ledger totals"], skills)
    assert dense == through_pairs == ["t/alpha", "t/bravo", "t/charlie", "t/delta", "t/other"]


def test_scores_are_the_same_numbers_either_way() -> None:
    skills = library(300)
    index = Bm25Index(skills)
    request = long_request()
    listed = index.scores(request)
    assert index.score_map(request) == {p: v for p, v in enumerate(listed) if v > 0}
    assert [(s.id, v) for s, v in index.rank(request)] == sorted(
        ((skills[p].id, v) for p, v in enumerate(listed) if v > 0), key=lambda pair: (-pair[1], pair[0])
    )


class Collections:
    """Garbage collections (any generation) that start while inside, at the thresholds of
    CPython 3.11 and 3.12 (700, 10, 10): 3.13 starts its youngest collection at 2,000 new
    objects, so its defaults would count fewer collections for the same allocations."""

    THRESHOLDS = (700, 10, 10)

    def __init__(self) -> None:
        self.count = 0
        self._thresholds = gc.get_threshold()

    def _seen(self, phase: str, _info: dict[str, Any]) -> None:
        self.count += phase == "start"

    def __enter__(self) -> Collections:
        gc.collect()
        gc.set_threshold(*self.THRESHOLDS)
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._seen)
        gc.set_threshold(*self._thresholds)


def test_ranking_a_long_request_that_matches_every_skill_runs_no_garbage_collection() -> None:
    skills = library(3000)
    order_for(["warm"], skills)  # the index, built once
    with Collections() as seen:
        order = order_for([long_request(), "an earlier turn about the invoice report"], skills, prior={"docs/": 0.5})
    assert len(order) == 3000
    assert seen.count == 0  # no per-skill object lives through the ranking


def test_through_pairs_the_same_ranking_runs_the_collector(pairs: None) -> None:
    # What `DENSE_ORDER` saves: a pair and a sort key per match, thousands of live objects.
    skills = library(3000)
    order_for(["warm"], skills)
    with Collections() as seen:
        order_for([long_request(), "an earlier turn about the invoice report"], skills, prior={"docs/": 0.5})
    assert seen.count >= 4


def skill_md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n{description}\n"


@pytest.fixture
def middleware() -> SkillsPromptMiddleware:
    store = MemoryObjectStore()
    for skill in library(600):
        store.put_object(f"{PREFIX}{skill.id}/SKILL.md", skill_md(skill.leaf, skill.metadata.description))
    return SkillsPromptMiddleware(S3Backend("memory", user_id=USER, store=store, layout=SEEDS))


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Each call of `owner.name` from now on, counted (the real one runs)."""
    calls: list[int] = []
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_warm_prompt_indexes_nothing_tokenises_each_turn_once_and_makes_no_pairs(
    middleware: SkillsPromptMiddleware, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_sync(middleware.build_prompt({"messages": [HumanMessage("hello")]}))  # warm: the index is built
    builds = count_calls(monkeypatch, matching, "Bm25Index")
    tokenised = count_calls(monkeypatch, matching, "_query_words")
    ranked = count_calls(monkeypatch, Bm25Index, "rank")
    turns = [HumanMessage("an earlier turn about the invoice report"), HumanMessage(long_request())]
    for state in ({"messages": [HumanMessage(long_request())]}, {"messages": turns}):
        tokenised.clear()
        prompt = run_sync(middleware.build_prompt(state))
        assert "<available_skills>" in prompt
        assert len(tokenised) == len(state["messages"])  # the latest turn, and the earlier ones together
    assert builds == []  # the library's index is reused, whatever the request
    assert ranked == []  # each turn's scores are read as one list: no (skill, score) pair per match


def test_through_pairs_a_prompt_ranks_each_turn_into_pairs(
    middleware: SkillsPromptMiddleware, monkeypatch: pytest.MonkeyPatch, pairs: None
) -> None:
    run_sync(middleware.build_prompt({"messages": [HumanMessage("hello")]}))
    ranked = count_calls(monkeypatch, Bm25Index, "rank")
    run_sync(middleware.build_prompt({"messages": [HumanMessage(long_request())]}))
    assert len(ranked) == 1


@pytest.mark.slow  # the real-skills corpus, pushed in memory: about half a minute
def test_the_prompt_cpu_bench_measures_both_ways_on_the_same_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(BENCH))
    import prompt_cpu

    out = tmp_path / "results.json"
    assert prompt_cpu.main(["--size", "700", "--words", "300", "--requests", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["skills"] == 700
    assert report["ways"] == ["score lists", "pairs"]
    assert [s["kind"] for s in report["samples"]] == ["long", "plain"] * 3
    assert all(s["same_prompt"] for s in report["samples"])
    for kind in ("long", "plain"):
        summary = report["summary"][kind]
        assert summary["requests"] == summary["same_prompt"] == 3
        assert {"median", "p10", "p90"} <= set(summary["score lists"]["cpu_ms"])
        assert summary["cpu_ratio"]["per_request"]["n"] == 3
    assert str(out) in capsys.readouterr().out
    assert rankers.DENSE_ORDER  # the bench puts the setting back
