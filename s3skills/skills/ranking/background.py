"""Background language: how often a word occurs in general English, to tell chat from evidence.

A word rare among skills is strong evidence in BM25 (a high IDF). Some such words are
rare among skills only because skills are not written in the register of a chat: "friday",
"deadline", "meeting", "morning", "boss" are everyday English, and a request that says who
the user is and when the work is due names no skill with them. What sets them apart is
the ratio of how many skills use a word to how often English does (its *specificity*, after
the "weirdness" ratio of terminology extraction): "pandas", "terraform", "dataframe" are far
more frequent among skills than in English, "week" and "boss" are not, and "test" or
"review", common in both, are common among skills too.

The skills holding a word are taken as a share of the library up to `REFERENCE_SKILLS`
skills (the size the level was chosen at) and counted against that size beyond it: a topical
word is held by a few skills however large the library grows, so as a share of 10,000 it
would look like chat (the synthetic findability bench at 10,000 lost 10 points that way).

`specificity_weight` turns that ratio into the weight of a query word (1: full evidence),
and `background_strength` says how much of it applies: a short request is all ask (there is
no room for chat in ten words, and "interview" or "budget" is the topic there), so the
weighting grows with the request's length, whole from `BACKGROUND_WORDS` scored words.
The English frequencies are `wordfreq`'s small English list (the optional `ranking` extra:
`pip install "s3skills[ranking]"`), read once per process on the first request that
needs them (about 10 ms; importing `wordfreq` itself is not needed). Without `wordfreq`
every word weighs 1, as before this module existed.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from pathlib import Path

__all__ = [
    "BACKGROUND",
    "BACKGROUND_POWER",
    "BACKGROUND_WORDS",
    "REFERENCE_SKILLS",
    "background_strength",
    "english_frequency",
    "has_background",
    "specificity_weight",
]

BACKGROUND: float | None = 3000.0
"""Specificity (the share of skills holding a word, of at most `REFERENCE_SKILLS`, over the
word's share of English text) at and above which a query word counts whole; below it the
word counts `(specificity / BACKGROUND) ** BACKGROUND_POWER` ("week", held by 2 % of the
skills: about 0.14; "dataframe", "terraform": 1). None or 0: no background weighting. 3000
was chosen on the real-skills benches' dev splits among 1000, 2000, 3000 and 10000
(bench/README.md)."""

BACKGROUND_POWER = 0.5
"""How steeply a word below `BACKGROUND` loses weight: 0.5 (chosen against 0.75 and 1 on the dev splits)."""

BACKGROUND_WORDS = 20
"""A request of n scored words takes each word's `specificity_weight` to the power
`min(1, n / BACKGROUND_WORDS)` (0: always whole). 20 was chosen on the dev splits of both
real-skills sets and of the synthetic findability bench, against 30, 40 and none (applied at
any length: the synthetic bench's short everyday requests, "which credit card should I pay
off first", then lost their skill)."""

REFERENCE_SKILLS = 670
"""The library size `BACKGROUND` was chosen at (the real-skills corpus): in a larger library the
skills holding a word are counted against this many, not against the library's size."""

_LIST = "small_en.msgpack.gz"


@functools.cache
def _frequencies() -> dict[str, float] | None:
    """Word -> share of English running text, from `wordfreq`'s small English list; None without it."""
    spec = importlib.util.find_spec("wordfreq")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        import msgpack  # a dependency of wordfreq

        path = Path(next(iter(spec.submodule_search_locations))) / "data" / _LIST
        with gzip.open(path, "rb") as packed:
            data = msgpack.load(packed, raw=False)
        header = data[0]
        if not isinstance(header, dict) or header.get("format") != "cB" or header.get("version") != 1:
            raise ValueError(f"unexpected wordfreq list header {header!r}")
        # cBpack: the n-th list holds the words of frequency 10 ** (-n / 100) (wordfreq.read_cBpack).
        return {word: 10 ** (-n / 100) for n, bucket in enumerate(data[1:]) for word in bucket}
    except (ImportError, OSError, ValueError, TypeError, IndexError):
        import wordfreq  # the documented, slower way (it imports ftfy, langcodes, regex)

        return dict(wordfreq.get_frequency_dict("en", "small"))


def has_background() -> bool:
    """Whether English word frequencies are available (`wordfreq` installed)."""
    return _frequencies() is not None


def english_frequency(word: str) -> float:
    """`word`'s share of English running text (lower case, as `wordfreq` lists it); 0 when
    the list does not have it (rarer than about once per million words) or without `wordfreq`."""
    table = _frequencies()
    return table.get(word, 0.0) if table else 0.0


def specificity_weight(word: str, holding: int, skills: int, background: float | None = None) -> float:
    """The weight of query word `word` (folded) as evidence for a skill, 0..1.

    Args:
        word: The query word, folded (lower case, no accents).
        holding: How many of the library's skills hold the word.
        skills: How many skills the library has.
        background: The specificity at which a word counts whole (`BACKGROUND` by default;
            None there: every word counts whole).

    Returns:
        1 for a word English rarely uses (or without `wordfreq`), else
        `min(1, (holding / min(skills, REFERENCE_SKILLS) / english_frequency) / background) ** BACKGROUND_POWER`.
    """
    level = BACKGROUND if background is None else background
    if level is None or level <= 0:
        return 1.0
    english = english_frequency(word)
    if english <= 0:
        return 1.0
    ratio = holding / max(1, min(skills, REFERENCE_SKILLS)) / english / level
    return 1.0 if ratio >= 1 else float(ratio**BACKGROUND_POWER)


def background_strength(words: int) -> float:
    """How much of the background weighting applies to a request of `words` scored words:
    `min(1, words / BACKGROUND_WORDS)` (1 when `BACKGROUND_WORDS` is 0)."""
    if words <= 0:
        return 0.0
    return 1.0 if BACKGROUND_WORDS <= 0 else min(1.0, words / BACKGROUND_WORDS)
