"""Which skills fit a request: BM25F ranking, and suggestions for an unknown skill id.

Text is folded before matching: case-insensitive, accent-insensitive (NFKD with the
combining marks dropped), split on anything that is not a letter or digit (so
hyphens, underscores and slashes separate words), common Spanish and English words
dropped, and each word reduced by a Snowball stemmer (`snowballstemmer`), English or
Spanish as the text reads (`language_of`): `escrituras` ~ `escritura`, `merging` ~
`merge`. A request is matched with both stemmers, so a Spanish skill is found by an
English request that uses its words and the other way round. Identifiers as code and
paths write them are words whole as well as in parts (`IDENTIFIERS`): `canonicalize_url`
gives `canonicalize`, `url` and `canonicalize_url`; `codec.py` gives `codec`, `py` and
`codec.py`; `mockResolvedValue` gives `mockresolvedvalue`, `mock`, `resolved`, `value`.

A skill has three fields, weighed by BM25F (`FIELD_WEIGHTS`, chosen on the findability
benches' dev splits, the real-skills one deciding: bench/README.md): its name (id, name, category, tags), its
description, and its body sketch (`SkillInfo.sketch`, stored in the manifest by the
writers: ranking costs no request). The index is built once per library version and
shared by every call and tenant that sees that version (`bm25_index`); a query only
touches the skills that contain one of its words (an inverted index, each word's skills
two flat arrays), and adds their scores into one list of floats in library order.

Why not `bm25s`: it scores one field per document (no BM25F), and it would bring numpy
and scipy into every install; the inverted index here ranks 10,000 skills in a few
milliseconds (bench/findability.py reports the CPU per model call).
"""

from __future__ import annotations

import functools
import math
import re
import threading
import unicodedata
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from operator import attrgetter
from typing import Any, Literal

from s3skills.skills.format.model import SkillInfo
from s3skills.skills.ranking.background import background_strength, specificity_weight
from s3skills.skills.ranking.identifiers import identifier_parts
from s3skills.skills.ranking.identity import IdentityCache
from s3skills.skills.ranking.query import (
    ENGLISH_STOPWORDS,
    QUERY_STOPWORDS,
    SPANISH_STOPWORDS,
    query_parts,
    word_weights,
)

__all__ = [
    "FIELD_B",
    "FIELD_WEIGHTS",
    "IDENTIFIERS",
    "MAX_QUERY_TERMS",
    "MIN_IDF",
    "Bm25Index",
    "bm25_index",
    "language_of",
    "rank",
    "tokenize",
    "version_key",
]

Language = Literal["english", "spanish"]

_CACHE_SIZE = 32
_Posting = tuple["array[int]", "array[float]"]
"""A term's skills: their positions in the library, and each one's saturated term frequency."""

K1 = 1.2
FIELD_WEIGHTS = {"name": 2.0, "description": 1.0, "sketch": 1.0}
"""BM25F weight of each field. Name and description: chosen on the synthetic bench's dev
split (`bench/findability.py`); the sketch's 1.0 (was 3.0): on the real-skills bench's dev
split (`bench/findability_real.py`, bench/README.md's table), where real bodies are long and
share generic words."""
FIELD_B = {"name": 0.3, "description": 0.75, "sketch": 0.0}
"""BM25F length normalisation of each field (chosen with the weights)."""
IDENTIFIERS = True
"""Whether identifiers count whole (`canonicalize_url`, `codec.py`) and split at camelCase
(`mockResolvedValue`): on, chosen on the real-skills bench's dev split (it helps there and
is neutral on the synthetic bench's)."""
MAX_QUERY_TERMS: int | None = None
"""The most words of a query that are scored, the rarest first (None: all). A cap of 8 or
12 lost requests on the real-skills bench's dev split, so none."""
MIN_IDF = 0.0
"""Query words with a lower IDF (in more of the library) do not count. A floor of 0.5 or 1
changed nothing on the real-skills bench's dev split, so none."""
PATH_WORDS_RARE: float | None = 3.0
"""A word a skill's name field gets only from its id's folders or its category (`k-dense` of
`k-dense/scanpy`) counts `min(1, PATH_WORDS_RARE / n)` of a name word, where n is the number
of skills whose folders or category hold it: a word shared by many skills' paths is little
evidence for any one of them (None: every path word counts whole). 3: neutral on the
real-skills bench's dev splits (its requests rarely use a folder word), and it stops a
folder such as `scientific-skills/` from naming all 134 of its skills (issue 35)."""
SKETCH_CAP: float | None = None
"""Hub control, tried and not chosen (it lost requests on the dev splits: bench/README.md):
what the body sketch adds to a skill's score is at most `SKETCH_CAP` times
what its name and description score plus `SKETCH_FLOOR` (None: no cap). A skill whose long
body shares a word with everything then cannot outrank skills whose name and description
match the request."""
SKETCH_FLOOR = 0.0
"""What the sketch may add to a skill whose name and description match nothing (`SKETCH_CAP`)."""
LONG_QUERY_TERMS: int | None = None
"""Query length, tried and not chosen (mixed on the dev splits: bench/README.md): when a
request has more than this many scored words, what the body sketch
adds counts `LONG_QUERY_TERMS / n` of itself (n: the scored words). A long message shares
some words with every long body by chance; its name and description matches are the
evidence that holds (None: no damping)."""
_SPLIT_RE = re.compile(r"[\W_]+")
_ENGLISH_STOPWORDS = ENGLISH_STOPWORDS
_SPANISH_STOPWORDS = SPANISH_STOPWORDS
_STOPWORDS = _ENGLISH_STOPWORDS | _SPANISH_STOPWORDS
# Words that say a text is Spanish (stop words only Spanish has, and its letters).
_SPANISH_MARKS = _SPANISH_STOPWORDS - _ENGLISH_STOPWORDS - {"me", "a", "i"}
_SPANISH_LETTERS = frozenset("ñáéíóúü¿¡")
_ENGLISH_MARKS = _ENGLISH_STOPWORDS - _SPANISH_STOPWORDS
_stem_lock = threading.Lock()  # a Snowball stemmer object is not thread-safe


@functools.cache
def _stemmer(language: Language) -> Any:
    """The Snowball stemmer of `language`, imported on first use (`s3skills --help` never pays for it)."""
    import snowballstemmer  # type: ignore[import-untyped]

    return snowballstemmer.stemmer(language)


def _fold(text: str) -> str:
    """Lower case without accents: `Compraventa Hipotecaría` -> `compraventa hipotecaria`."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def language_of(text: str) -> Language:
    """`spanish` when `text` reads as Spanish (its stop words and letters), else `english`."""
    lowered = text.casefold()
    words = _SPLIT_RE.split(lowered)
    spanish = sum(w in _SPANISH_MARKS for w in words) + (
        0 if lowered.isascii() else sum(map(lowered.count, _SPANISH_LETTERS))
    )
    english = sum(w in _ENGLISH_MARKS for w in words)
    return "spanish" if spanish > english else "english"


@lru_cache(maxsize=200_000)
def _stem(token: str, language: Language) -> str:
    if len(token) <= 2 or token.isdigit():
        return token
    with _stem_lock:
        return str(_stemmer(language).stemWord(token))


def _identifier_words(text: str) -> list[str]:
    """The extra words of the identifiers in `text` (`identifier_parts`), folded, stop words out."""
    return [w for w in map(_fold, identifier_parts(text)) if w not in _STOPWORDS]


def _words(text: str, identifiers: bool = False) -> list[str]:
    words = [t for t in _SPLIT_RE.split(_fold(text)) if t and t not in _STOPWORDS]
    return words + _identifier_words(text) if identifiers else words


def tokenize(text: str, language: Language | None = None, *, identifiers: bool = False) -> list[str]:
    """The folded, stemmed tokens of `text`, stop words removed, in order.

    Args:
        text: Any text.
        language: The stemmer to use; by default the one `language_of(text)` picks.
        identifiers: Also the identifiers whole and their camelCase parts (`IDENTIFIERS`).
    """
    lang = language or language_of(text)
    return [_stem(t, lang) for t in _words(text, identifiers)]


def _query_words(query: str, identifiers: bool = False) -> dict[str, float]:
    """Each distinct scored word of `query` (folded, not stemmed) -> its weight: 1 in prose,
    `query.CODE_WEIGHT` (scaled by `query.CODE_SHARE`) when it appears in pasted code or logs
    only (`query.word_weights`); `QUERY_STOPWORDS` and bare numbers left out."""
    return word_weights(
        [
            ([w for w in _words(text, identifiers) if w not in QUERY_STOPWORDS and not w.isdigit()], weight)
            for text, weight in query_parts(query)
        ]
    )


def _fields(skill: SkillInfo, identifiers: bool = False) -> dict[str, list[str]]:
    """A skill's tokens per field; `path` holds the name tokens that only its id's folders and
    its category give (`documents` of `documents/pdf`), not its leaf, name or tags."""
    meta = skill.metadata
    language = language_of(f"{meta.description} {skill.sketch}")
    own = " ".join([skill.leaf, meta.name, *meta.tags])
    folders = " ".join([skill.id.rsplit("/", 1)[0] if "/" in skill.id else "", skill.category or ""])
    name = list(dict.fromkeys(tokenize(f"{own} {folders}", language, identifiers=identifiers)))
    kept = set(tokenize(own, language, identifiers=identifiers))
    return {
        "name": name,
        "path": [t for t in name if t not in kept],
        "description": tokenize(meta.description, language, identifiers=identifiers),
        "sketch": tokenize(skill.sketch, language, identifiers=identifiers),
    }


class Bm25Index:
    """A library tokenised once for BM25F: build it per library version (`bm25_index`).

    Args:
        skills: The library, in the order results break ties after the score (by id).
        weights: Weight of each field (`name`, `description`, `sketch`); `FIELD_WEIGHTS` by default.
        b: Length normalisation of each field; `FIELD_B` by default.
        k1: Term-frequency saturation.
        identifiers: Also index and match identifiers whole and their camelCase parts
            (`IDENTIFIERS` by default).
        max_query_terms: Score at most this many of a query's words, the rarest in the
            library first (None: `MAX_QUERY_TERMS`; 0: all).
        min_idf: Query words whose IDF is below this do not count (`MIN_IDF` by default).
        path_words_rare: `PATH_WORDS_RARE` for this index (None: the module's; 0: off).
        sketch_cap: `SKETCH_CAP` for this index (None: the module's; negative: off).
        sketch_floor: `SKETCH_FLOOR` for this index (None: the module's).
        long_query_terms: `LONG_QUERY_TERMS` for this index (None: the module's; 0: off).
        background: `background.BACKGROUND` for this index (None: the module's, read at each
            query; 0: off): a query word as common in English as among skills counts less.
    """

    def __init__(
        self,
        skills: Sequence[SkillInfo],
        weights: dict[str, float] | None = None,
        *,
        b: dict[str, float] | None = None,
        k1: float = K1,
        identifiers: bool | None = None,
        max_query_terms: int | None = None,
        min_idf: float | None = None,
        path_words_rare: float | None = None,
        sketch_cap: float | None = None,
        sketch_floor: float | None = None,
        long_query_terms: int | None = None,
        background: float | None = None,
    ) -> None:
        self.skills = list(skills)
        self.weights = dict(FIELD_WEIGHTS if weights is None else weights)
        self.b = dict(FIELD_B if b is None else b)
        self.k1 = k1
        self.identifiers = IDENTIFIERS if identifiers is None else identifiers
        self.max_query_terms = MAX_QUERY_TERMS if max_query_terms is None else (max_query_terms or None)
        self.min_idf = MIN_IDF if min_idf is None else min_idf
        self.path_words_rare = PATH_WORDS_RARE if path_words_rare is None else (path_words_rare or None)
        self.sketch_cap = SKETCH_CAP if sketch_cap is None else (sketch_cap if sketch_cap >= 0 else None)
        self.sketch_floor = SKETCH_FLOOR if sketch_floor is None else sketch_floor
        self.long_query_terms = LONG_QUERY_TERMS if long_query_terms is None else (long_query_terms or None)
        self.background = background
        split = self.sketch_cap is not None or self.long_query_terms is not None
        docs = [_fields(skill, self.identifiers) for skill in self.skills]
        path_share: dict[str, float] = {}
        if self.path_words_rare is not None:
            for doc in docs:
                for token in doc["path"]:
                    path_share[token] = path_share.get(token, 0) + 1
            path_share = {t: min(1.0, self.path_words_rare / n) for t, n in path_share.items()}
        averages = {
            f: (sum(len(d[f]) for d in docs) / len(docs) if docs else 0.0) or 1.0
            for f in ("name", "description", "sketch")
        }
        # term -> {skill position: the field-weighted, length-normalised term frequency}; with a
        # sketch cap, also without the sketch (`_named`: name and description only).
        postings: dict[str, dict[int, float]] = {}
        named: dict[str, dict[int, float]] = {}
        for position, doc in enumerate(docs):
            path = set(doc["path"]) if path_share else set()
            for field in ("name", "description", "sketch"):
                tokens, weight = doc[field], self.weights.get(field, 0.0)
                if not tokens or weight <= 0:
                    continue
                norm = weight / (1 - self.b[field] + self.b[field] * len(tokens) / averages[field])
                counts: dict[str, float] = {}
                for token in tokens:
                    counts[token] = counts.get(token, 0) + (path_share[token] if token in path else 1)
                for token, tf in counts.items():
                    posting = postings.setdefault(token, {})
                    posting[position] = posting.get(position, 0.0) + tf * norm
                    if split and field != "sketch":
                        mine = named.setdefault(token, {})
                        mine[position] = mine.get(position, 0.0) + tf * norm
        # The saturated term frequency of each posting (it does not depend on the query).
        self._saturated = {term: self._saturate(posting) for term, posting in postings.items()}
        self._named = {term: self._saturate(posting) for term, posting in named.items()}
        self.by_id = sorted(range(len(self.skills)), key=lambda p: self.skills[p].id)
        """The positions in `skills`, by id: how results break ties after the score."""
        self.positions: dict[str, list[int]] = {}
        """Each id, and each folder of ids with its `/` (`documents/` of `documents/pdf`) -> its positions."""
        for position, skill in enumerate(self.skills):
            self.positions.setdefault(skill.id, []).append(position)
            if "/" in skill.id:
                self.positions.setdefault(skill.id.rsplit("/", 1)[0] + "/", []).append(position)

    def _saturate(self, posting: dict[int, float]) -> _Posting:
        # Two flat arrays, positions and values: scoring reads them in order from contiguous
        # memory, about four times faster than a dict of float objects spread over the heap.
        k1 = self.k1
        return array("i", posting), array("d", [tf * (k1 + 1) / (tf + k1) for tf in posting.values()])

    def _idf(self, hits: int) -> float:
        total = len(self.skills)
        return math.log(1 + (total - hits + 0.5) / (hits + 0.5))

    def _terms(self, query: str) -> list[tuple[str, frozenset[str], float, list[tuple[float, str]]]]:
        """Each scored query word: (word, its stems, its weight in the query, (IDF, stem) per
        stem found), after `min_idf` and `max_query_terms`, in the query's order."""
        terms = []
        words = _query_words(query, self.identifiers)
        for word, weight in words.items():
            stems = frozenset({_stem(word, "english"), _stem(word, "spanish")})
            found = [(self._idf(len(p[0])), stem) for stem in stems if (p := self._saturated.get(stem))]
            found = [(idf, stem) for idf, stem in found if idf >= self.min_idf]
            if found:
                terms.append((word, stems, weight, found))
        strength = background_strength(len(words))
        if strength > 0:  # words as common in English as among skills weigh less (`background`)
            size = len(self.skills)
            terms = [
                (
                    word,
                    stems,
                    weight * specificity_weight(word, self._holding(found), size, self.background) ** strength,
                    found,
                )
                for word, stems, weight, found in terms
            ]
        if self.max_query_terms is not None and len(terms) > self.max_query_terms:
            rarest = sorted(terms, key=lambda term: -max(idf for idf, _ in term[3]))[: self.max_query_terms]
            kept = {id(term) for term in rarest}
            terms = [term for term in terms if id(term) in kept]
        return terms

    def _holding(self, found: list[tuple[float, str]]) -> int:
        """How many skills hold a query word (its most common stem)."""
        return max(len(self._saturated[stem][0]) for _, stem in found)

    def _sum(self, terms: list[tuple[str, frozenset[str], float, list[tuple[float, str]]]], table: Any) -> list[float]:
        # One float per skill, in library order: adding into a list is about three times
        # cheaper than into a dict, and a float is no object the garbage collector tracks.
        scores = [0.0] * len(self.skills)
        for _, _, weight, found in terms:
            postings = [(idf * weight, p) for idf, stem in found if (p := table.get(stem))]
            if len(postings) == 1:  # one stem (the usual case): add its scores
                factor, (positions, values) = postings[0]
                for position, value in zip(positions, values, strict=True):
                    scores[position] += factor * value
                continue
            best: dict[int, float] = {}  # an English and a Spanish stem: the better one counts
            get = best.get
            for factor, (positions, values) in postings:
                for position, value in zip(positions, values, strict=True):
                    if (scored := factor * value) > get(position, 0.0):
                        best[position] = scored
            for position, value in best.items():
                scores[position] += value
        return scores

    def scores(self, query: str) -> list[float]:
        """The score of every skill for `query`, in library order (0 when no term matches)."""
        terms = self._terms(query)
        scores = self._sum(terms, self._saturated)
        damp = 1.0
        if self.long_query_terms is not None and len(terms) > self.long_query_terms:
            damp = self.long_query_terms / len(terms)
        if self.sketch_cap is None and damp == 1.0:
            return scores
        named = self._sum(terms, self._named)
        cap, floor = self.sketch_cap, self.sketch_floor
        for position, total in enumerate(scores):
            if total:
                own = named[position]
                sketch = damp * (total - own)
                scores[position] = own + (sketch if cap is None else min(sketch, cap * own + floor))
        return scores

    def score_map(self, query: str) -> dict[int, float]:
        """Position in `skills` -> BM25F score, for the skills that score above zero for `query`."""
        return {position: value for position, value in enumerate(self.scores(query)) if value > 0}

    def explain(self, query: str, skill: SkillInfo | str) -> dict[str, list[str]]:
        """Why `skill` matches `query`: each field (`name`, `description`, `sketch`, in that
        order) with the query words (folded) that hit it, in the query's order; fields with a
        weight of 0 and fields no word hits are left out. Only the words the score counts
        appear (`min_idf`, `max_query_terms`).

        Args:
            query: The request.
            skill: One of the index's skills, or its id.

        Raises:
            KeyError: The skill is not in this index.
        """
        wanted = skill if isinstance(skill, str) else skill.id
        found = next((s for s in self.skills if s.id == wanted), None)
        if found is None:
            raise KeyError(wanted)
        fields = {f: set(tokens) for f, tokens in _fields(found, self.identifiers).items()}
        terms = self._terms(query)
        out: dict[str, list[str]] = {}
        for name in ("name", "description", "sketch"):
            hits = [word for word, stems, _, _ in terms if stems & fields[name]]
            if hits and self.weights.get(name, 0.0) > 0:
                out[name] = hits
        return out

    def order(self, scores: Sequence[float]) -> list[int]:
        """The positions whose score is above zero, best first, ties by id (`by_id`'s order)."""
        return sorted([p for p in self.by_id if scores[p] > 0], key=scores.__getitem__, reverse=True)

    def rank(self, query: str, *, limit: int | None = None) -> list[tuple[SkillInfo, float]]:
        """`(skill, score)` pairs with a score above zero, best first, ties by id."""
        scores = self.scores(query)
        order = self.order(scores)
        return [(self.skills[p], scores[p]) for p in (order if limit is None else order[: max(limit, 0)])]


_Key = tuple[tuple[tuple[str, str, str], ...], tuple[str, ...]]
_version_fields = attrgetter("id", "source", "etag")
_lock = threading.Lock()
# Content key -> index; and a list of SkillInfo objects -> its index (by their identities).
_by_content: OrderedDict[_Key, Bm25Index] = OrderedDict()
_by_identity: IdentityCache[Bm25Index] = IdentityCache(_CACHE_SIZE)


def version_key(skills: Sequence[SkillInfo]) -> _Key:
    """What identifies a library version: each skill's id, source and ETag, and the
    descriptions of the skills with no ETag (code skills). A skill's sketch comes from
    the same `SKILL.md` as its ETag, so it needs no place in the key."""
    return tuple(map(_version_fields, skills)), tuple(s.metadata.description for s in skills if not s.etag)


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def bm25_index(skills: Sequence[SkillInfo]) -> Bm25Index:
    """The `Bm25Index` of `skills`, cached per library version (`version_key`).

    A model call over an unchanged library does not tokenise it again, whichever tenant
    makes it; a skill whose `SKILL.md` changed (new ETag) makes a new version. The catalog
    hands out the same `SkillInfo` objects while a library is unchanged, so a list of
    those very objects is recognised by their identities (a fraction of a millisecond at
    10,000 skills); another list is compared by content. The last 32 versions are kept.
    """
    hit = _by_identity.get(skills)
    if hit is not None:
        return hit
    key = version_key(skills)
    with _lock:
        found = _by_content.get(key)
    if found is None:
        found = Bm25Index(skills)
    with _lock:
        _remember(_by_content, key, found)
    return _by_identity.put(skills, found)


def rank(query: str, skills: Sequence[SkillInfo], *, limit: int = 5) -> list[tuple[SkillInfo, float]]:
    """The skills that match `query`, best first, by BM25F (see the module docstring).

    The tokenised library is cached per version (`bm25_index`).

    Args:
        query: The request, in any words (`necesito una escritura de compraventa`).
        skills: The library to search.
        limit: The most results to return.

    Returns:
        `(skill, score)` pairs with a score above zero, best first, ties by id.
    """
    return bm25_index(skills).rank(query, limit=limit)
