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
from tests.encoders import TrigramEncoder


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


def test_a_hybrid_variant_sets_its_fusion_constants_and_prose_only_inside_its_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vector_cache

    from s3skills.skills.ranking import embedding

    monkeypatch.setattr(vector_cache, "CACHE_DIR", tmp_path)
    ranker = variants.make_variant("hybrid:k=5,w=0.7,depth=10,prose=0")
    assert isinstance(ranker, embedding.HybridRanker)
    assert (ranker.k, ranker.dense_weight, ranker.depth) == (5.0, 0.7, 10)
    plain = variants.make_variant("hybrid")
    assert isinstance(plain, embedding.HybridRanker)
    assert (plain.k, plain.dense_weight, plain.depth) == (
        embedding.RRF_K,
        embedding.DENSE_WEIGHT,
        embedding.DENSE_DEPTH,
    )
    with variants.settings("hybrid:k=5,prose=0"):
        assert embedding.PROSE_ONLY is False
    assert embedding.PROSE_ONLY is True
    with pytest.raises(ValueError, match="unknown hybrid option 'kk'"):
        variants.make_variant("hybrid:kk=5")


def test_the_bench_vector_cache_embeds_a_text_once_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    import vector_cache

    monkeypatch.setattr(vector_cache, "CACHE_DIR", tmp_path)
    texts = [f"skill number {n}: {'abc' * n}" for n in range(10)]
    first = TrigramEncoder()
    rows = vector_cache.CachedEncoder(first).encode(texts)
    assert first.texts == texts
    again = TrigramEncoder()
    cached = vector_cache.CachedEncoder(again)  # a new run: reads the file
    assert np.array_equal(cached.encode(list(reversed(texts))), rows[::-1])
    assert again.texts == []
    cached.encode(["a request"])  # fewer than min_batch: embedded, never cached
    assert again.texts == ["a request"]
    assert list(tmp_path.iterdir()) == [tmp_path / f"{vector_cache.minilm_name()}.npz"]
