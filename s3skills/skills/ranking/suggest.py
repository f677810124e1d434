"""Skill ids to suggest for a name that is not one (`escrituras/compraventas`): spelling and words."""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from s3skills.skills.format.model import SkillInfo
from s3skills.skills.ranking.matching import _fold, rank

__all__ = ["closest_ids"]

_MIN_SIMILARITY = 0.6  # difflib ratio below which an id is not suggested on spelling alone.


def closest_ids(name: str, skills: Sequence[SkillInfo], *, limit: int = 3) -> list[str]:
    """Skill ids to suggest when `name` is not a known id (`escrituras/compraventas`).

    Combines the spelling similarity of `name` to each id and leaf (difflib) with the
    BM25 score of `name` as a query, so both typos and related words find a skill.

    Args:
        name: The id the caller asked for.
        skills: The library.
        limit: The most ids to return.

    Returns:
        Distinct ids, best first; empty when nothing is close.
    """
    target = _fold(name).strip().strip("/")
    target_leaf = target.rsplit("/", 1)[-1]
    lexical = {skill.id: score for skill, score in rank(name, skills, limit=len(skills))}
    top = max(lexical.values(), default=0.0)
    best: dict[str, float] = {}
    for skill in skills:
        similarity = max(
            SequenceMatcher(None, target, _fold(skill.id)).ratio(),
            SequenceMatcher(None, target_leaf, _fold(skill.leaf)).ratio(),
        )
        related = lexical.get(skill.id, 0.0) / top if top else 0.0
        if similarity >= _MIN_SIMILARITY or related > 0:
            best[skill.id] = max(best.get(skill.id, 0.0), 0.7 * similarity + 0.3 * related)
    ordered = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    return [skill_id for skill_id, _ in ordered[: max(limit, 0)]]
