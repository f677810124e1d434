"""The recall screen's ceiling (bench/recall_screen.py --ceiling): what a second stage could reach.

A reranker reorders the candidates it is given; a target that no first stage puts among its
first N can never reach page 1 through it. `ceiling_shares` turns each request's target rank
on each side (lexical, dense) into the share of targets within each depth, for each side and
for their union, on all requests and on the least-overlapping half. bench/README.md quotes
these shares; the screen itself needs numpy, which the `embeddings` extra brings (CI's slow
step installs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

pytestmark = pytest.mark.slow

MISSING = 10**9  # the screen's rank for a target a side does not match at all


def _shares(ranks: dict[str, list[tuple[str, int]]], half: set[str], depths: tuple[int, ...]) -> dict[str, object]:
    from recall_screen import ceiling_shares

    return ceiling_shares(ranks, half, depths)


def test_a_target_is_in_the_union_when_either_side_has_it_within_the_depth() -> None:
    ranks = {
        "lexical": [("a", 3), ("b", 400), ("c", MISSING), ("d", 60)],
        "desc": [("a", 900), ("b", 20), ("c", 150), ("d", 70)],
    }
    out = _shares(ranks, set(), (50, 100, 200))
    assert out["requests"] == 4
    assert out["all:lexical"] == [25.0, 50.0, 50.0]
    assert out["all:desc"] == [25.0, 50.0, 75.0]
    # a by lexical, b by desc at 50; d joins at 100 (lexical 60); c at 200 (desc 150)
    assert out["all:union"] == [50.0, 75.0, 100.0]


def test_the_half_is_counted_over_its_own_requests_only() -> None:
    ranks = {"lexical": [("a", 1), ("b", 500), ("c", 2)], "desc": [("a", 5), ("b", 80), ("c", 3)]}
    out = _shares(ranks, {"b", "c"}, (50, 100))
    assert out["half:lexical"] == [50.0, 50.0]
    assert out["half:desc"] == [50.0, 100.0]
    assert out["half:union"] == [50.0, 100.0]
    assert out["all:union"] == [66.7, 100.0]


def test_a_target_no_side_matches_is_never_within_any_depth() -> None:
    out = _shares({"lexical": [("a", MISSING)], "body": [("a", MISSING)]}, {"a"}, (50, 1000))
    assert out["all:union"] == [0.0, 0.0]
    assert out["half:body"] == [0.0, 0.0]


def test_an_empty_half_reports_zero_rather_than_failing() -> None:
    out = _shares({"lexical": [("a", 1)]}, set(), (50,))
    assert out["half:lexical"] == [0.0]
    assert out["all:lexical"] == [100.0]
