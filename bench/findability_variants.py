"""Ranker variants for the findability benches (`findability.py`, `findability_real.py`).

A variant is a `PRESETS` name or a `bm25:` spec (`make_variant`): BM25F (`Bm25Index`) with
its field weights, length normalisation and k1, identifier tokenization (`ids`), query
handling (`qcap`, `idf`) and what the body sketch holds (`content`, applied while the bench
indexes its library: `sketches`). Both benches take the same names, so a variant is
measured on both with one spelling.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from s3skills.skills import Ranker, SkillInfo
from s3skills.skills.index import heads
from s3skills.skills.ranking.matching import Bm25Index
from s3skills.skills.ranking.sketch import SKETCH_MODES

__all__ = ["PRESETS", "FieldWeightsRanker", "make_variant", "settings", "sketch_mode_of", "sketches"]


class FieldWeightsRanker:
    """BM25F (`Bm25Index`) with its public knobs: field weights, length normalisation, k1.

    A `Ranker` for `SkillsPromptMiddleware(ranker=)` and `skill_tools(ranker=)`; the index is
    built once per library (recognised by the identities of its `SkillInfo` objects).
    """

    def __init__(self, weights: Mapping[str, float], b: Mapping[str, float], k1: float, **options: Any) -> None:
        self.weights, self.b, self.k1 = dict(weights), dict(b), k1
        self.options = options  # identifiers, max_query_terms, min_idf (Bm25Index's keywords)
        self._key: tuple[int, ...] = ()
        self._held: Sequence[SkillInfo] = ()
        self._index: Any = None

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        """`(skill, score)` pairs for `query`, best first."""
        key = tuple(map(id, skills))
        if self._index is None or key != self._key:
            self._index = Bm25Index(skills, self.weights, b=self.b, k1=self.k1, **self.options)
            self._key, self._held = key, list(skills)  # held: the ids stay those objects'
        return list(self._index.rank(query))


def _defaults() -> tuple[dict[str, float], dict[str, float], float]:
    from s3skills.skills.ranking import matching

    return dict(matching.FIELD_WEIGHTS), dict(matching.FIELD_B), float(matching.K1)


PRESETS: dict[str, str] = {
    "default": "the ranker the middleware uses when given none (LexicalRanker: BM25F, today's weights)",
    "no-sketch": "bm25 with the sketch field's weight at 0 (name and description only)",
    "sketch-1": "bm25 with the sketch field's weight at 1.0",
    "hybrid": "HybridRanker(MiniLMEncoder()): needs the embeddings extra; hybrid:k=<RRF_K>,w=<DENSE_WEIGHT>,"
    "depth=<DENSE_DEPTH>,prose=0|1 (PROSE_ONLY) sets its constants (skill vectors from the bench cache)",
}


def sketch_mode_of(name: str) -> str:
    """The sketch a variant's library is indexed with (`content=<mode>` in a bm25 spec; else `words`)."""
    if name.startswith("bm25:"):
        for part in name[len("bm25:") :].split(","):
            key, _, value = part.partition("=")
            if key.strip() == "content":
                if value not in SKETCH_MODES:
                    raise ValueError(f"{name!r}: content must be one of {', '.join(SKETCH_MODES)}")
                return value
    return "words"


@contextlib.contextmanager
def sketches(mode: str) -> Iterator[None]:
    """While inside, the library's index sketches bodies with `make_sketch(mode=mode)` (what a
    writer would store if the sketch held that); the default sketch again on the way out."""
    original = heads.make_sketch
    if mode != "words":
        heads.make_sketch = functools.partial(original, mode=mode)  # type: ignore[assignment]
    try:
        yield
    finally:
        heads.make_sketch = original  # type: ignore[assignment]


_SETTINGS = {
    "qstop": ("s3skills.skills.ranking.matching", "QUERY_STOPWORDS"),
    "code": ("s3skills.skills.ranking.query", "CODE_WEIGHT"),
    "share": ("s3skills.skills.ranking.query", "CODE_SHARE"),
    "earlier": ("s3skills.skills.ranking.rankers", "EARLIER_WEIGHT"),
    "turns": ("s3skills.skills.ranking.rankers", "EARLIER_TURNS"),
    "bg": ("s3skills.skills.ranking.background", "BACKGROUND"),
    "bgpow": ("s3skills.skills.ranking.background", "BACKGROUND_POWER"),
    "bgwords": ("s3skills.skills.ranking.background", "BACKGROUND_WORDS"),
    "prose": ("s3skills.skills.ranking.embedding", "PROSE_ONLY"),
}


@contextlib.contextmanager
def settings(name: str) -> Iterator[None]:
    """While inside, the module settings a bm25 spec names hold its values: `qstop=0` (no
    query-only stop words), `code=<w>` (`query.CODE_WEIGHT`), `share=<p>` (`query.CODE_SHARE`),
    `earlier=<w>` (`rankers.EARLIER_WEIGHT`), `turns=<n>` (`rankers.EARLIER_TURNS`), `bg=<x>`,
    `bgpow=<p>` and `bgwords=<n>` (`background.BACKGROUND`, `BACKGROUND_POWER`, `BACKGROUND_WORDS`;
    `bg=0`: off); the old ones on the way out."""
    import importlib

    saved: list[tuple[Any, str, Any]] = []
    try:
        for part in name.split(":", 1)[1].split(",") if name.startswith(("bm25:", "hybrid:")) else []:
            key, _, value = part.partition("=")
            if key.strip() in _SETTINGS:
                module_name, attribute = _SETTINGS[key.strip()]
                module = importlib.import_module(module_name)
                saved.append((module, attribute, getattr(module, attribute)))
                if key.strip() == "qstop":
                    new: Any = getattr(module, attribute) if float(value) else frozenset()
                elif key.strip() == "prose":
                    new = bool(float(value))
                elif key.strip() == "turns":
                    new = int(float(value))
                else:
                    new = float(value)
                setattr(module, attribute, new)
        yield
    finally:
        for module, attribute, old in reversed(saved):
            setattr(module, attribute, old)


def _hybrid(name: str) -> Ranker:
    """`hybrid` or `hybrid:k=..,w=..,depth=..,prose=..`: `HybridRanker` over MiniLM, its skill
    vectors read from the bench-only cache (`vector_cache`: the same vectors, embedded once)."""
    from vector_cache import CachedEncoder

    from s3skills.skills.ranking import embedding

    options: dict[str, Any] = {}
    keys = {"k": ("k", float), "w": ("dense_weight", float), "depth": ("depth", int)}
    for part in filter(None, name[len("hybrid:") :].split(",")) if ":" in name else []:
        key, _, value = part.partition("=")
        if key.strip() == "prose":
            continue  # a module setting (`settings`)
        if key.strip() not in keys:
            raise ValueError(f"{name!r}: unknown hybrid option {key!r} (k, w, depth, prose)")
        attribute, kind = keys[key.strip()]
        options[attribute] = kind(value)
    encoder = CachedEncoder(embedding.MiniLMEncoder())
    return embedding.HybridRanker(encoder, background=False, **options)


def make_variant(name: str) -> Ranker | None:
    """The ranker called `name`: a `PRESETS` name, or `bm25:<field>=<w>,b.<field>=<b>,k1=<k>`
    (fields `name`, `description`, `sketch`; unnamed ones keep today's values), with
    `ids=0|1` (identifiers whole and camelCase parts), `qcap=<n>` (score at most n query
    words, the rarest first; 0: all), `idf=<x>` (query words below that IDF do not count)
    and `content=<mode>` (what the sketch holds, `SKETCH_MODES`; see `sketch_mode_of`).
    None is the middleware's own default.

    Raises:
        ValueError: An unknown name or a malformed spec.
    """
    weights, b, k1 = _defaults()
    options: dict[str, Any] = {}
    if name == "default":
        return None
    if name == "hybrid" or name.startswith("hybrid:"):
        return _hybrid(name)
    if name == "no-sketch":
        return FieldWeightsRanker({**weights, "sketch": 0.0}, b, k1)
    if name == "sketch-1":
        return FieldWeightsRanker({**weights, "sketch": 1.0}, b, k1)
    if not name.startswith("bm25:"):
        raise ValueError(f"unknown ranker {name!r}: one of {', '.join(PRESETS)}, or bm25:<field>=<weight>,...")
    for part in filter(None, name[len("bm25:") :].split(",")):
        key, _, value = part.partition("=")
        key = key.strip()
        if key == "content":
            sketch_mode_of(name)
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{name!r}: {part!r} is not <name>=<number>") from None
        if key == "k1":
            k1 = number
        elif key == "ids":
            options["identifiers"] = bool(number)
        elif key == "qcap":
            options["max_query_terms"] = int(number)  # 0: every word
        elif key == "idf":
            options["min_idf"] = number
        elif key == "path":
            options["path_words_rare"] = number  # 0: off
        elif key == "cap":
            options["sketch_cap"] = number  # negative: off
        elif key == "floor":
            options["sketch_floor"] = number
        elif key == "long":
            options["long_query_terms"] = int(number)  # 0: off
        elif key in _SETTINGS:
            continue  # a module setting: `settings`
        elif key.startswith("b.") and key[2:] in b:
            b[key[2:]] = number
        elif key in weights:
            weights[key] = number
        else:
            raise ValueError(
                f"{name!r}: unknown parameter {key!r}"
                " (name, description, sketch, b.<field>, k1, ids, qcap, idf, path, cap, floor, long, content,"
                f" {', '.join(_SETTINGS)})"
            )
    return FieldWeightsRanker(weights, b, k1, **options)
