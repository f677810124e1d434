"""Which skills fit a request: BM25 ranking, and suggestions for an unknown skill id.

Text is folded before matching: case-insensitive, accent-insensitive (NFKD with the
combining marks dropped), split on anything that is not a letter or digit (so
hyphens, underscores and slashes separate words), common Spanish and English words
dropped, and plurals reduced by a light suffix rule (`escrituras` ~ `escritura`,
`inmuebles` ~ `inmueble`, `policies` ~ `policy`). Id, name, category and tags weigh
three times as much as the description.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Sequence
from difflib import SequenceMatcher

from s3skills.skills.model import SkillInfo

__all__ = ["Bm25Index", "bm25_index", "closest_ids", "rank", "tokenize"]

_CACHE_SIZE = 32

K1 = 1.5
B = 0.75
_STRONG_WEIGHT = 3
_MIN_SIMILARITY = 0.6  # difflib ratio below which an id is not suggested on spelling alone.
_SPLIT_RE = re.compile(r"[\W_]+")
_ENGLISH_STOPWORDS = (
    "a an and any are as at be by can do for from how i if in into is it its me my of on or our"
    " please should that the their them this to use used using want we what when which with you your"
)
_SPANISH_STOPWORDS = (
    "al como con de del el en es esta este hay la las lo los mas me mi mis necesito para por que"
    " quiero se sin su sus un una uno unos unas y o"
)
_STOPWORDS = frozenset(f"{_ENGLISH_STOPWORDS} {_SPANISH_STOPWORDS}".split())


def _fold(text: str) -> str:
    """Lower case without accents: `Compraventa Hipotecaría` -> `compraventa hipotecaria`."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def _stem(token: str) -> str:
    """A light plural rule for Spanish and English; both forms of a word reach one stem."""
    if len(token) <= 3 or token.isdigit():
        return token
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith("s") and not token.endswith("ss"):
        token = token[:-1]
    if token.endswith("e") and len(token) > 3:
        token = token[:-1]  # inmuebles -> inmueble -> inmuebl, and inmueble -> inmuebl too.
    return token


def tokenize(text: str) -> list[str]:
    """The folded, stemmed tokens of `text`, stop words removed, in order."""
    return [_stem(token) for token in _SPLIT_RE.split(_fold(text)) if token and token not in _STOPWORDS]


def _document(skill: SkillInfo) -> list[str]:
    meta = skill.metadata
    strong = tokenize(" ".join([skill.id, meta.name, skill.category or "", *meta.tags]))
    return list(dict.fromkeys(strong)) * _STRONG_WEIGHT + tokenize(meta.description)


class Bm25Index:
    """A library tokenised once for BM25 (k1=1.5, b=0.75): build it per library version.

    Args:
        skills: The library, in the order results break ties after the score (by id).
    """

    def __init__(self, skills: Sequence[SkillInfo]) -> None:
        self.skills = list(skills)
        self._docs = [Counter(_document(skill)) for skill in self.skills]
        self._lengths = [sum(doc.values()) for doc in self._docs]
        self._average = (sum(self._lengths) / len(self._docs) if self._docs else 0.0) or 1.0
        self._df: Counter[str] = Counter()
        for doc in self._docs:
            self._df.update(doc.keys())

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every skill for `query`, in library order (0 when no term matches)."""
        terms = set(tokenize(query))
        if not terms or not self.skills:
            return [0.0] * len(self.skills)
        total = len(self._docs)
        idf = {t: math.log(1 + (total - self._df[t] + 0.5) / (self._df[t] + 0.5)) for t in terms if self._df[t]}
        out = []
        for doc, length in zip(self._docs, self._lengths, strict=True):
            score = 0.0
            for term, weight in idf.items():
                tf = doc.get(term, 0)
                if tf:
                    score += weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / self._average))
            out.append(score)
        return out

    def rank(self, query: str, *, limit: int | None = None) -> list[tuple[SkillInfo, float]]:
        """`(skill, score)` pairs with a score above zero, best first, ties by id."""
        scored = [(s, score) for s, score in zip(self.skills, self.scores(query), strict=True) if score > 0]
        scored.sort(key=lambda pair: (-pair[1], pair[0].id))
        return scored if limit is None else scored[: max(limit, 0)]


_cache: OrderedDict[tuple[tuple[str, str, str], ...], Bm25Index] = OrderedDict()
_cache_lock = threading.Lock()


def bm25_index(skills: Sequence[SkillInfo]) -> Bm25Index:
    """The `Bm25Index` of `skills`, cached per library version (ids, sources and ETags).

    A model call over an unchanged library does not tokenise it again; a skill whose
    `SKILL.md` changed (new ETag) makes a new version. Code skills (no ETag) are keyed by
    their description. The last 32 versions are kept.
    """
    key = tuple((s.id, s.source, s.etag or s.metadata.description) for s in skills)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    built = Bm25Index(skills)
    with _cache_lock:
        _cache[key] = built
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return built


def rank(query: str, skills: Sequence[SkillInfo], *, limit: int = 5) -> list[tuple[SkillInfo, float]]:
    """The skills that match `query`, best first, by BM25 (k1=1.5, b=0.75).

    The tokenised library is cached per version (`bm25_index`).

    Args:
        query: The request, in any words (`necesito una escritura de compraventa`).
        skills: The library to search.
        limit: The most results to return.

    Returns:
        `(skill, score)` pairs with a score above zero, best first, ties by id.
    """
    return bm25_index(skills).rank(query, limit=limit)


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
