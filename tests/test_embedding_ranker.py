"""`HybridRanker` (s3skills.skills.ranking.embedding): BM25F fused with an encoder's similarity.

These tests run with a real, dependency-light `Encoder`: hashed character trigrams
(numpy), which relates a misspelt request to the skill it means, something BM25F's whole
words cannot do. The MiniLM encoder itself is measured on the findability bench
(tests/test_bench_findability.py, slow, with the `embeddings` extra).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import HumanMessage

from s3skills import S3Backend
from s3skills.aio import run_sync
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import LexicalRanker, Ranker, SkillInfo, SkillMetadata
from s3skills.skills.ranking import embedding
from s3skills.skills.ranking.embedding import HybridRanker, request_text, skill_text
from s3skills.testing import MemoryObjectStore
from s3skills.tools import skill_tools
from tests.encoders import TrigramEncoder

USER = "ana"
SEEDS = KeyLayout.seeds()


class BrokenEncoder:
    def __init__(self, result: Any = None) -> None:
        self.result = result

    def encode(self, texts: Sequence[str]) -> Any:
        if self.result is None:
            raise RuntimeError("the embedding service is down")
        return self.result


def info(skill_id: str, description: str) -> SkillInfo:
    leaf = skill_id.rsplit("/", 1)[-1]
    return SkillInfo(skill_id, SkillMetadata(name=leaf, description=description), etag=f"e-{skill_id}")


LIBRARY = [
    info("ops/kubernetes-deployment", "Roll out containers to a cluster with manifests and rollbacks."),
    info("ops/incident-response", "Triage, communication and postmortems when production breaks."),
    info("writing/newsletter", "Write email newsletters: subject lines, sections and calls to action."),
    *[info(f"filler/tool-{i:02d}", f"Automate the app number {i}: records, exports and webhooks.") for i in range(40)],
]
MISSPELT = "kubrnetes deplyment"  # no word in common with the skill once stemmed


def test_a_hybrid_ranker_is_a_ranker() -> None:
    assert isinstance(HybridRanker(TrigramEncoder()), Ranker)


def test_the_encoder_side_finds_a_skill_a_misspelt_request_shares_no_word_with() -> None:
    assert [s.id for s, _ in LexicalRanker().rank(MISSPELT, LIBRARY)] == []
    ranker = HybridRanker(TrigramEncoder(), background=False)
    ranked = [s.id for s, _ in ranker.rank(MISSPELT, LIBRARY)]
    assert ranked[0] == "ops/kubernetes-deployment"


def test_the_encoder_side_adds_at_most_depth_skills_a_request_shares_no_word_with() -> None:
    for depth in (10, 30):
        ranker = HybridRanker(TrigramEncoder(), background=False, depth=depth)
        assert len(ranker.rank(MISSPELT, LIBRARY)) == depth < len(LIBRARY)


def test_a_word_match_stays_first_when_the_encoder_agrees() -> None:
    ranker = HybridRanker(TrigramEncoder(), background=False)
    ranked = [s.id for s, _ in ranker.rank("email newsletter for subscribers", LIBRARY)]
    assert ranked[0] == "writing/newsletter"
    scores = [score for _, score in ranker.rank("email newsletter for subscribers", LIBRARY)]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)


def test_until_a_library_is_embedded_the_ranker_answers_lexically_and_embeds_it_in_the_background() -> None:
    encoder = TrigramEncoder()
    ranker = HybridRanker(encoder)
    try:
        first = ranker.rank("newsletter", LIBRARY)
        assert list(first) == list(LexicalRanker().rank("newsletter", LIBRARY))
        assert ranker.wait(timeout=60)
        assert ranker.ready(LIBRARY)
        assert next(s.id for s, _ in ranker.rank(MISSPELT, LIBRARY)) == "ops/kubernetes-deployment"
    finally:
        ranker.close()


def test_skills_are_embedded_once_and_a_changed_skill_alone_again() -> None:
    encoder = TrigramEncoder()
    ranker = HybridRanker(encoder, background=False)
    ranker.rank("newsletter", LIBRARY)
    skills_embedded = [t for t in encoder.texts if t != "newsletter"]
    assert sorted(skills_embedded) == sorted(map(skill_text, LIBRARY))
    encoder.texts.clear()
    ranker.rank("email for subscribers", LIBRARY)
    assert encoder.texts == ["email for subscribers"]  # the request only
    ranker.rank("email for subscribers", LIBRARY)  # the next model call of the same turn
    assert encoder.texts == ["email for subscribers"]
    changed = [*LIBRARY[:-1], info(LIBRARY[-1].id, "A new description of the last tool.")]
    encoder.texts.clear()
    ranker.rank("newsletter", changed)
    assert encoder.texts == [skill_text(changed[-1])]


def test_the_vectors_kept_are_bounded() -> None:
    ranker = HybridRanker(TrigramEncoder(), background=False, max_vectors=10)
    ranker.warm(LIBRARY)
    assert len(ranker._vectors) == 10
    # A library larger than the bound cannot be fused: it is ranked lexically, never wrongly.
    assert list(ranker.rank("newsletter", LIBRARY)) == list(LexicalRanker().rank("newsletter", LIBRARY))


@pytest.mark.parametrize(
    "encoder",
    [BrokenEncoder(), BrokenEncoder(np.zeros((1, 3), dtype=np.float32)), BrokenEncoder([["not", "numbers"]])],
    ids=["raises", "wrong-number-of-rows", "not-numbers"],
)
def test_a_failing_encoder_never_fails_a_ranking_it_is_answered_lexically(
    encoder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ranker = HybridRanker(encoder, background=False)
    with caplog.at_level(logging.ERROR, logger="s3skills.skills.ranking.embedding"):
        ranked = ranker.rank("newsletter", LIBRARY)
    assert list(ranked) == list(LexicalRanker().rank("newsletter", LIBRARY))
    assert "ranked lexically" in caplog.text


def test_a_huge_request_is_cut_before_it_is_embedded() -> None:
    encoder = TrigramEncoder()
    ranker = HybridRanker(encoder, background=False)
    ranker.warm(LIBRARY)
    encoder.texts.clear()
    ranker.rank("deploy " * 100_000, LIBRARY)
    assert [len(t) for t in encoder.texts] == [2_000]


PASTED = (
    "our newsletter signup form drops the subject line, how do I fix it?\n\n"
    "```python\ndef chunked(items, size):\n    batch = []\n    for item in items:\n"
    "        batch.append(item)\n```\n"
    "    Traceback (most recent call last): KeyError: 'subject'\n"
)


def test_the_encoder_reads_a_requests_prose_not_its_pasted_code_and_logs() -> None:
    encoder = TrigramEncoder()
    ranker = HybridRanker(encoder, background=False)
    ranker.warm(LIBRARY)
    encoder.texts.clear()
    ranker.rank(PASTED, LIBRARY)
    assert encoder.texts == ["our newsletter signup form drops the subject line, how do I fix it?"]


def test_with_prose_only_off_the_encoder_reads_the_whole_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "PROSE_ONLY", False)
    encoder = TrigramEncoder()
    ranker = HybridRanker(encoder, background=False)
    ranker.warm(LIBRARY)
    encoder.texts.clear()
    ranker.rank(PASTED, LIBRARY)
    assert encoder.texts == [PASTED]


@pytest.mark.parametrize(
    "request_",
    ["```\nKeyError: 'subject'\n```", "    x = load(path)\n    y = x['subject']", "  \n\t\n"],
    ids=["a-fence-only", "indented-code-only", "blank"],
)
def test_a_request_with_no_prose_is_embedded_whole(request_: str) -> None:
    assert request_text(request_) == request_[:2_000]


def _backend() -> S3Backend:
    store = MemoryObjectStore("b")
    for skill in LIBRARY:
        leaf, description = skill.id.rsplit("/", 1)[-1], json.dumps(skill.metadata.description)
        body = f"---\nname: {leaf}\ndescription: {description}\n---\n\n# Steps\n"
        store.put_object(f"{USER}/skills/{skill.id}/SKILL.md", body)
    return S3Backend("b", user_id=USER, store=store, layout=SEEDS)


def test_list_skills_and_the_prompt_index_rank_with_the_ranker_they_are_given() -> None:
    backend = _backend()
    ranker = HybridRanker(TrigramEncoder(), background=False)
    plain = next(t for t in skill_tools(backend, page_size=3) if t.name == "list_skills")
    hybrid = next(t for t in skill_tools(backend, page_size=3, ranker=ranker) if t.name == "list_skills")
    assert "ops/kubernetes-deployment" not in run_sync(plain.ainvoke({"query": MISSPELT}))
    page = run_sync(hybrid.ainvoke({"query": MISSPELT}))
    assert page.splitlines()[2].startswith("- ops/kubernetes-deployment")
    state = {"messages": [HumanMessage(MISSPELT)]}
    plain_prompt = run_sync(SkillsPromptMiddleware(backend, budget_chars=400).build_prompt(state))
    hybrid_prompt = run_sync(SkillsPromptMiddleware(backend, budget_chars=400, ranker=ranker).build_prompt(state))
    assert "ops/kubernetes-deployment" not in plain_prompt
    assert "ops/kubernetes-deployment" in hybrid_prompt
