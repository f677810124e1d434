"""The real-skills findability bench (bench/findability_real.py): its request file, and one run.

The request file is hand-written data the ranker will be chosen on, so what makes it worth
measuring is pinned here: every target and near miss is a skill of the corpus under the id a
per-repository push gives it, the split is by skill (and follows the rule the file records),
the counts meet issue 27's floor, and no request copies its skill's text (no run of 8 words
shared with the SKILL.md). The slow test runs the bench on the dev split at the corpus size
and checks its exit status and the shape of its results, never its numbers.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import findability_real as bench

from s3skills.testing.corpus import real_repositories

SMALL_REPOSITORIES = {
    "getsentry/skills",
    "hashicorp/agent-skills",
    "langchain-ai/deepagents",
    "mattpocock/skills",
    "obra/superpowers",
}


@pytest.fixture(scope="module")
def requests() -> tuple[dict[str, str], list[bench.RealRequest]]:
    found: tuple[dict[str, str], list[bench.RealRequest]] = bench.load_requests()
    return found


@pytest.fixture(scope="module")
def corpus(requests: tuple[dict[str, str], list[bench.RealRequest]]) -> bench.Corpus:
    return bench.load_corpus(requests[0])


def _skill(request: bench.RealRequest) -> str:
    return request.target or request.near_miss_of or ""


def test_every_target_and_near_miss_is_a_pushable_corpus_skill_from_its_repository_and_folder(
    requests: tuple[dict[str, str], list[bench.RealRequest]], corpus: bench.Corpus
) -> None:
    repositories, items = requests
    assert set(repositories) == {r.name for r in real_repositories()}
    assert len(set(repositories.values())) == len(repositories)  # one category per repository
    for request in items:
        skill = _skill(request)
        assert skill in corpus.skills, f"{request.id}: {skill} is not a skill of the pushed corpus"
        assert corpus.repo_of[skill] == request.repo, request.id
        assert corpus.folder_of[skill] == request.folder, request.id
        assert skill == f"{repositories[request.repo]}/{request.folder.rsplit('/', 1)[-1]}", request.id


def test_the_request_set_meets_the_issue_floor_across_all_seven_repositories(
    requests: tuple[dict[str, str], list[bench.RealRequest]],
) -> None:
    repositories, items = requests
    hits = [r for r in items if r.target is not None]
    should_not = [r for r in items if r.target is None]
    targets = {r.target for r in hits}
    assert len(hits) >= 220
    assert len(targets) >= 85
    assert len(should_not) >= 40
    per_repo = Counter(r.repo for r in {r.target: r for r in hits}.values())
    assert set(per_repo) == set(repositories)
    for repo in SMALL_REPOSITORIES:
        assert per_repo[repo] >= 5, repo
    assert len({r.id for r in items}) == len(items)
    assert len({r.query.strip().casefold() for r in items}) == len(items)  # no request twice


def test_the_split_is_by_skill_follows_the_recorded_rule_and_is_about_even(
    requests: tuple[dict[str, str], list[bench.RealRequest]],
) -> None:
    _, items = requests
    splits: dict[str, set[str]] = defaultdict(set)
    for request in items:
        splits[_skill(request)].add(request.split)
        assert request.split == bench.split_of(_skill(request)), request.id
    assert all(len(found) == 1 for found in splits.values())
    targets = {r.target: r.split for r in items if r.target is not None}
    dev = sum(split == "dev" for split in targets.values())
    assert 0.4 <= dev / len(targets) <= 0.6
    doc = json.loads(bench.REQUESTS.read_text(encoding="utf-8"))
    assert bench.SPLIT_SALT in doc["split_rule"]


def _runs(text: str, n: int = 8) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.casefold())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_no_request_shares_a_run_of_eight_words_with_its_skill(
    requests: tuple[dict[str, str], list[bench.RealRequest]], corpus: bench.Corpus
) -> None:
    _, items = requests
    copied = [r.id for r in items if _runs(r.query) & _runs(corpus.skills[_skill(r)])]
    assert copied == []


def test_the_corpus_lists_what_a_push_would_refuse_and_keeps_the_rest(corpus: bench.Corpus) -> None:
    # 682 folders: deepagents' blog-post, social-media and skill-creator map three folders each
    # to one id under a forced category (refused), and three folders are byte-identical copies.
    assert len(corpus.skills) + len(corpus.excluded) + len(corpus.collapsed) == 682
    assert {e["repo"] for e in corpus.excluded} <= {r.name for r in real_repositories()}
    assert all(e["why"] for e in corpus.excluded)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda item: item.pop("folder"), "fields must be"),
        (lambda item: item.update(split="train"), "split must be dev or test"),
        (lambda item: item.update(near_miss_of="k-dense/scanpy"), "not both"),
        (lambda item: item.update(target=7), "wrong type"),
        (lambda item: item.update(query="   "), "non-empty"),
    ],
)
def test_a_malformed_request_file_is_refused_with_the_request_named(
    tmp_path: Path, change: object, message: str
) -> None:
    doc = json.loads(bench.REQUESTS.read_text(encoding="utf-8"))
    change(doc["requests"][3])  # type: ignore[operator]
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as caught:
        bench.load_requests(path)
    assert doc["requests"][3]["id"] in str(caught.value)


def test_a_request_id_used_twice_and_a_file_that_is_not_json_are_refused(tmp_path: Path) -> None:
    doc = json.loads(bench.REQUESTS.read_text(encoding="utf-8"))
    doc["requests"][5]["id"] = doc["requests"][4]["id"]
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="used twice"):
        bench.load_requests(path)
    path.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match="not a request file"):
        bench.load_requests(path)


def test_ranker_variants_are_parsed_by_name_and_bad_specs_are_refused() -> None:
    assert bench.make_variant("default") is None
    ranker = bench.make_variant("bm25:sketch=0.5,b.sketch=0.75,k1=1.5")
    assert isinstance(ranker, bench.FieldWeightsRanker)
    assert (ranker.weights["sketch"], ranker.b["sketch"], ranker.k1) == (0.5, 0.75, 1.5)
    no_sketch = bench.make_variant("no-sketch")
    assert isinstance(no_sketch, bench.FieldWeightsRanker)
    assert no_sketch.weights["sketch"] == 0
    for bad in ("bm25:colour=2", "bm25:sketch=lots", "tfidf"):
        with pytest.raises(ValueError, match=r"bm25|parameter|number"):
            bench.make_variant(bad)


@pytest.mark.slow
def test_the_bench_runs_on_the_dev_split_at_the_corpus_size_and_writes_every_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    status = bench.main(["--split", "dev", "--sizes", "corpus", "--ranker", "default", "--out", str(out)])
    assert status == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["commit"]
    assert report["machine"]["nproc"] >= 1
    assert len(report["load_average_before"]) == 3
    dev = [r for r in bench.load_requests()[1] if r.split == "dev"]
    (run,) = report["runs"]
    assert (
        run["skills"]
        == report["corpus_skills"]
        == 682 - len(report["excluded_skills"]) - len(report["collapsed_copies"])
    )
    assert run["requests"] == sum(r.target is not None for r in dev)
    assert run["should_not_requests"] == sum(r.target is None for r in dev)
    assert [s["id"] for s in run["samples"]] == [r.id for r in dev]
    for key in ("in_index_with_description", "on_first_search_page", "top1", "top10", "top50", "false_trigger_top1"):
        assert 0 <= run[key] <= 100
    assert run["top1"] <= run["top10"] <= run["top50"]
    assert set(run["prompt_build_cpu_ms"]) == {"median", "p10", "p90", "min", "max"}
    assert run["s3_requests_per_prompt"] <= 1  # the manifest's conditional GET at most
    printed = capsys.readouterr().out
    assert "described" in printed
    assert str(out) in printed
