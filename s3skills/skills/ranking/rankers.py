"""The ranking seam: which skills the prompt index shows first for a conversation.

`Ranker` is the small protocol an application implements to bring its own retrieval
(embeddings, a search service); `LexicalRanker`, the default, is BM25F over name,
description and body sketch (`s3skills.skills.ranking.matching`), local and with no request.

`order_for` turns a conversation into the index order: the latest user turn is the
query; the earlier user turns (at most `EARLIER_TURNS`, newest first) add their score
times `EARLIER_WEIGHT`, so a short follow-up ("now do the same for March") still finds
the skill the thread is about.

Priors (`prior_for`) raise a matching skill's score: the skills the user uses (their
successful uses in the usage log, `s3skills.skills.usage.skill_uses`, kept by this
process for the user id the server resolved, never a list the client sends) and the
skills in the category of one the thread has loaded. A prior only reorders skills that
match the request; it never brings in one that does not. The constants were chosen on
the findability bench's dev split (`bench/findability.py`, `findability_tune.py --priors`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from s3skills.skills.format.model import SkillInfo
from s3skills.skills.ranking.identity import IdentityCache
from s3skills.skills.ranking.matching import bm25_index

__all__ = [
    "DENSE_ORDER",
    "EARLIER_TURNS",
    "EARLIER_WEIGHT",
    "LOADED_CATEGORY_PRIOR",
    "PRIOR_WEIGHT",
    "LexicalRanker",
    "Ranker",
    "category_counts",
    "conversation_scores",
    "order_for",
    "prior_for",
]

EARLIER_TURNS = 2
"""Earlier user turns (before the latest) that take part in the query."""

EARLIER_WEIGHT = 0.3
"""How much an earlier turn's score counts against the latest turn's: 0.3 (was 0.5), chosen on
the real-skills bench's dev splits with the conversation variant (`findability_real.py
--variants`: a request after an unrelated thread; bench/README.md)."""

PRIOR_WEIGHT = 0.5
"""How much a skill's prior (0..1, `prior_for`) raises its score: a matching skill with
prior p scores `score * (1 + PRIOR_WEIGHT * p)`. A prior never brings in a skill that does
not match the request."""

LOADED_CATEGORY_PRIOR = 0.5
"""The prior of a skill in the category of a skill the thread has loaded."""

DENSE_ORDER = True
"""Whether `order_for` ranks with the default ranker on score lists (`_lexical_order`)
rather than through `(skill, score)` pairs (`conversation_scores`): the same order; for a
2,000-word request at 10,000 skills 0.6 of the prompt build's CPU and no garbage
collection (22 with pairs: `bench/prompt_cpu.py`, bench/README.md)."""


@runtime_checkable
class Ranker(Protocol):
    """Ranks a library for a request.

    `rank` returns the skills that match `query`, best first, with a score above zero
    (scores of one call are compared with each other only); skills it leaves out follow
    by id. It is called on every model call, so it should be fast and must not raise for
    an ordinary query. Any object with this method fits (`SkillsPromptMiddleware(ranker=)`).
    """

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        """`(skill, score)` pairs for `query`, best first."""
        ...


class LexicalRanker:
    """The default `Ranker`: BM25F with Snowball stemming, the index cached per library version."""

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        """`(skill, score)` pairs for `query`, best first, ties by id (`matching.Bm25Index.rank`)."""
        return bm25_index(skills).rank(query)


_DEFAULT = LexicalRanker()


def prior_for(uses: Mapping[str, int], loaded: Sequence[str] = ()) -> dict[str, float]:
    """Each skill's prior, 0..1: how much the user uses it, and whether it shares a category
    with a skill the thread has loaded (`LOADED_CATEGORY_PRIOR`; a category is the part of
    the id before its last `/`, as `documents` for `documents/pdf`).

    Args:
        uses: Skill id -> the user's successful uses (`s3skills.skills.usage.skill_uses`).
        loaded: The ids the thread has loaded.

    Returns:
        Skill id -> prior for the used skills (`log(1 + uses) / log(1 + most uses)`), and
        category -> prior under the key `category/` for the loaded skills' categories.
    """
    out: dict[str, float] = {}
    most = max(uses.values(), default=0)
    if most > 0:
        scale = math.log1p(most)
        out = {sid: math.log1p(n) / scale for sid, n in uses.items() if n > 0}
    if LOADED_CATEGORY_PRIOR > 0:
        for sid in loaded:
            if "/" in sid:
                out[sid.rsplit("/", 1)[0] + "/"] = LOADED_CATEGORY_PRIOR
    return out


def _prior_of(skill_id: str, prior: Mapping[str, float]) -> float:
    own = prior.get(skill_id, 0.0)
    if "/" in skill_id:
        return max(own, prior.get(skill_id.rsplit("/", 1)[0] + "/", 0.0))
    return own


def conversation_scores(
    turns: Sequence[str], skills: Sequence[SkillInfo], *, ranker: Ranker | None = None
) -> tuple[dict[str, float], dict[str, SkillInfo]]:
    """The score of each skill that matches a conversation (no prior): the latest turn's score,
    plus `EARLIER_WEIGHT` times that of the earlier user turns (at most `EARLIER_TURNS`) together.

    Args:
        turns: The user's turns, newest first (the first is the latest request).
        skills: The library.
        ranker: Who ranks; `LexicalRanker` by default.

    Returns:
        Skill id -> score, and skill id -> skill, for the matching skills.
    """
    ranker = ranker or _DEFAULT
    texts = [t for t in turns[: 1 + EARLIER_TURNS] if t.strip()]
    scores: dict[str, float] = {}
    by_id: dict[str, SkillInfo] = {}
    if texts and turns[0].strip():
        for skill, score in ranker.rank(texts[0], skills):
            scores[skill.id] = score
            by_id[skill.id] = skill
        earlier = " ".join(texts[1:])
        if earlier and EARLIER_WEIGHT > 0:
            for skill, score in ranker.rank(earlier, skills):
                scores[skill.id] = scores.get(skill.id, 0.0) + EARLIER_WEIGHT * score
                by_id.setdefault(skill.id, skill)
    return scores, by_id


def order_for(
    turns: Sequence[str],
    skills: Sequence[SkillInfo],
    exclude: set[str] | frozenset[str] = frozenset(),
    *,
    ranker: Ranker | None = None,
    prior: Mapping[str, float] | None = None,
) -> list[SkillInfo]:
    """`skills` without `exclude`, in index order for a conversation.

    With the default ranker (`LexicalRanker`, `DENSE_ORDER`) each turn's scores are one list
    of floats read from the cached index (`Bm25Index.scores`) and the matches are sorted
    once: no `(skill, score)` pair and no id-keyed map per match, so a long request that
    matches all of 10,000 skills costs its scoring and one sort. Any other ranker goes
    through `conversation_scores`; both give the same order.

    Args:
        turns: The user's turns, newest first (the first is the latest request).
        skills: The library.
        exclude: Ids to leave out (the skills the thread has loaded).
        ranker: Who ranks; `LexicalRanker` by default.
        prior: `prior_for`'s map: a matching skill scores `score * (1 + PRIOR_WEIGHT * prior)`.

    Returns:
        The matches best first, then the others by id.
    """
    if DENSE_ORDER and (ranker is None or type(ranker) is LexicalRanker):
        return _lexical_order(turns, skills, exclude, prior)
    scores, by_id = conversation_scores(turns, skills, ranker=ranker)
    if prior and PRIOR_WEIGHT > 0:
        for sid, score in scores.items():
            if p := _prior_of(sid, prior):
                scores[sid] = score * (1 + PRIOR_WEIGHT * p)
    ranked = sorted(scores, key=lambda sid: (-scores[sid], sid))
    head = [by_id[sid] for sid in ranked if sid not in exclude]
    rest = [s for s in _by_id(skills) if s.id not in scores and s.id not in exclude]
    return head + rest


def _lexical_order(
    turns: Sequence[str],
    skills: Sequence[SkillInfo],
    exclude: set[str] | frozenset[str],
    prior: Mapping[str, float] | None,
) -> list[SkillInfo]:
    """`order_for` with the default ranker, on score lists (the same arithmetic, in the same order)."""
    index = bm25_index(skills)
    texts = [t for t in turns[: 1 + EARLIER_TURNS] if t.strip()]
    scores = [0.0] * len(skills)
    if texts and turns[0].strip():
        scores = index.scores(texts[0])
        earlier = " ".join(texts[1:])
        if earlier and EARLIER_WEIGHT > 0:
            more = index.scores(earlier)
            scores = [s + EARLIER_WEIGHT * e if e > 0 else s for s, e in zip(scores, more, strict=True)]
    if prior and PRIOR_WEIGHT > 0:  # only the skills the prior names, or in a folder it names
        for position in {p for key in prior for p in index.positions.get(key, ())}:
            if scores[position] > 0 and (p := _prior_of(skills[position].id, prior)):
                scores[position] = scores[position] * (1 + PRIOR_WEIGHT * p)
    head = [skills[p] for p in index.order(scores)]
    rest = [skills[p] for p in index.by_id if not scores[p] > 0]
    if exclude:
        return [s for s in head if s.id not in exclude] + [s for s in rest if s.id not in exclude]
    return head + rest


def _category(skill: SkillInfo) -> str:
    if skill.metadata.category:
        return skill.metadata.category
    return skill.id.split("/", 1)[0] if "/" in skill.id else "(no category)"


_sorted: IdentityCache[list[SkillInfo]] = IdentityCache()
_counts: IdentityCache[tuple[Counter[str], dict[str, str]]] = IdentityCache()


def _by_id(skills: Sequence[SkillInfo]) -> list[SkillInfo]:
    """`skills` sorted by id, once per list of the catalog's (unchanged) `SkillInfo` objects."""
    return _sorted.get_or_build(skills, lambda: sorted(skills, key=lambda s: s.id))


def category_counts(skills: Sequence[SkillInfo], exclude: set[str] | frozenset[str] = frozenset()) -> Counter[str]:
    """How many of `skills` (less `exclude`) each category holds (`(no category)` for none).

    Counted once per list of the catalog's (unchanged) `SkillInfo` objects, recognised by
    their identities, so a model call over 10,000 skills does not count them again; what
    the call excludes is subtracted.
    """
    found = _counts.get_or_build(
        skills, lambda: (Counter(map(_category, skills)), {s.id: _category(s) for s in skills})
    )
    total, of = found
    out = total.copy()
    out.subtract(of[sid] for sid in exclude if sid in of)
    return +out
