"""The benches' ranker variants (bench/findability_variants.py): one spelling for both benches.

A variant names BM25F's weights and the knobs issue 27 compared (identifiers, a cap on the
request's words, an IDF floor, what the sketch holds); a misspelt one is refused before a
bench spends minutes building its library, and the sketch a variant asks for is used only
while the bench indexes its library.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import findability_variants as variants

from s3skills.skills.index import heads
from s3skills.skills.ranking import matching
from s3skills.skills.ranking.sketch import make_sketch


def test_a_variant_spells_every_knob_and_keeps_the_defaults_it_does_not_name() -> None:
    ranker = variants.make_variant("bm25:sketch=3,ids=0,qcap=12,idf=0.5,content=when")
    assert isinstance(ranker, variants.FieldWeightsRanker)
    assert ranker.weights == {**matching.FIELD_WEIGHTS, "sketch": 3.0}
    assert ranker.options == {"identifiers": False, "max_query_terms": 12, "min_idf": 0.5}
    assert variants.sketch_mode_of("bm25:sketch=3,ids=0,qcap=12,idf=0.5,content=when") == "when"
    assert variants.sketch_mode_of("bm25:sketch=1") == "words"
    assert variants.make_variant("default") is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bm25:content=everything", "content must be one of"),
        ("bm25:colour=2", "unknown parameter 'colour'"),
        ("bm25:sketch=heavy", "is not <name>=<number>"),
        ("tfidf", "unknown ranker"),
    ],
)
def test_a_misspelt_variant_is_refused_with_what_is_wrong(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        variants.make_variant(name)


def test_a_sketch_variant_changes_the_sketch_only_inside_its_block() -> None:
    body = "# Deploy\n\nShip the service.\n\n## When to use\n\nWhen a release is due.\n"
    with variants.sketches("headings"):
        assert vars(heads)["make_sketch"](body) == "Deploy; When to use"
    assert vars(heads)["make_sketch"] is make_sketch
    assert vars(heads)["make_sketch"](body) == make_sketch(body, mode="words")
    with pytest.raises(RuntimeError), variants.sketches("first"):
        raise RuntimeError("a failing bench")
    assert vars(heads)["make_sketch"] is make_sketch  # restored on the way out of a failure too
