"""What of a request counts, and how much: stop words, and pasted code and logs.

Skills and requests drop the same stop words (`STOPWORDS`: common English and Spanish
function words). A request also drops `QUERY_STOPWORDS`: the rest of a standard English
stop list ("been", "they", "before") and the keywords of common programming languages
("def", "return", "const", "null"), which a long message or a pasted file is full of and
which say nothing about the task. Identifiers stay (`parse_genbank`, `KeyError`).

Pasted code and logs (`query_parts`): a fenced block, or a line indented as code or
dense with code punctuation, counts at `CODE_WEIGHT` of the prose around it: the prose
is where the user says what they want, the code and the stack trace add evidence
(identifiers, error names) but should not outvote it. Nor should its length: when the
pasted part has more distinct words than the prose, each of its words counts
`prose / code` less again (`CODE_SHARE`, `word_weights`), so 120 words of utility code
after a one-line question weigh about as much as the question, however long the paste.

Chat (who the user is, a deadline, a meeting) is handled by the words' background
frequency in English (`s3skills.skills.ranking.background`).
"""

from __future__ import annotations

import re

__all__ = [
    "CODE_WEIGHT",
    "ENGLISH_STOPWORDS",
    "QUERY_STOPWORDS",
    "SPANISH_STOPWORDS",
    "STOPWORDS",
    "code_line",
    "query_parts",
    "word_weights",
]


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_ENGLISH = _set(
    "a an and any are as at be by can do for from how i if in into is it its me my of on or our please should"
    " that the their them this to use used using want we what when which with you your"
)
_SPANISH = _set(
    "al como con de del el en es esta este hay la las lo los mas me mi mis necesito para por que quiero se sin"
    " su sus un una uno unos unas y o"
)
STOPWORDS = _ENGLISH | _SPANISH
"""Dropped from skills and requests alike."""

ENGLISH_STOPWORDS = _ENGLISH
"""The English part of `STOPWORDS`."""
SPANISH_STOPWORDS = _SPANISH
"""The Spanish part of `STOPWORDS`."""

QUERY_STOPWORDS = _set(
    # The rest of a standard English stop list.
    "am was were been being have has had having does did doing but because until while about against between"
    " through during before after above below up down out off over under again further then once here there"
    " where why all both each few more most other some such no nor not only own same so than too very s t will"
    " just don now he him his himself she her hers herself they theirs themselves ourselves yourself yourselves"
    " myself who whom these those would could also get got let ve ll re m d didn doesn isn wasn aren thanks hi hello"
    # Keywords of common programming languages.
    " def return self cls import const var elif else try except catch finally throw raise"
    " lambda yield async await null none true false nil void static public private protected new typeof"
    " instanceof pass break continue while endif fi esac done then"
)
"""Dropped from requests only (a skill keeps them: its length normalisation is unchanged)."""

CODE_WEIGHT = 0.5
"""How much a word of pasted code or logs counts against a word of prose (1: the same)."""

CODE_SHARE = 1.0
"""Hub control for pasted code: when a request's code and logs hold n distinct scored words
(not also in its prose) and its prose p < n, each of those words counts `(p / n) ** CODE_SHARE`
of `CODE_WEIGHT` (0: no length scaling). A request with no prose keeps `CODE_WEIGHT`. 1 was
chosen on the real-skills benches' dev splits (bench/README.md): without it, a skill whose
body shares generic code words (`function`, `promise`, `settimeout`) with any pasted file
was first for 4 to 6 % of the requests aimed at other skills."""

_FENCE_RE = re.compile(r"^[^\S\n]*(```|~~~)[^\n]*\n.*?(?:^[^\S\n]*\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)
_CODE_PUNCTUATION = frozenset("{}[]()<>=;:$\"'`|\\/#@*&%.,_")


def code_line(line: str) -> bool:
    """Whether a line outside a fence reads as code or a log line: indented by a tab or four
    spaces, or at least a fifth of its visible characters code punctuation (`{}()<>=;:"/.,_`
    and the like; at least 8 visible characters)."""
    if line.startswith(("    ", "\t")) and line.strip():
        return True
    visible = [ch for ch in line if not ch.isspace()]
    if len(visible) < 8:
        return False
    return sum(ch in _CODE_PUNCTUATION for ch in visible) * 5 >= len(visible)


def query_parts(query: str) -> list[tuple[str, float]]:
    """`query` as (text, weight) parts in order: prose at 1, pasted code and logs at `CODE_WEIGHT`.

    A prose part is never empty of letters; consecutive lines of the same kind are one part.
    With `CODE_WEIGHT` at 1 the whole query is one part.
    """
    if CODE_WEIGHT == 1 or ("\n" not in query and "`" not in query):
        return [(query, 1.0)]
    parts: list[tuple[str, float]] = []

    def add(text: str, weight: float) -> None:
        if not text.strip():
            return
        if parts and parts[-1][1] == weight:
            parts[-1] = (parts[-1][0] + "\n" + text, weight)
        else:
            parts.append((text, weight))

    position = 0
    for fence in _FENCE_RE.finditer(query):
        _lines(query[position : fence.start()], add)
        add(fence.group(0), CODE_WEIGHT)
        position = fence.end()
    _lines(query[position:], add)
    return parts or [(query, 1.0)]


def _lines(text: str, add: object) -> None:
    for line in text.split("\n"):
        add(line, CODE_WEIGHT if code_line(line) else 1.0)  # type: ignore[operator]


def word_weights(parts: list[tuple[list[str], float]]) -> dict[str, float]:
    """Each distinct word of a request -> its weight: the highest weight of a part it is in,
    a code part's words scaled down when the code outnumbers the prose (`CODE_SHARE`).

    Args:
        parts: Each part's scored words and its weight (`query_parts`: 1 for prose).
    """
    prose: dict[str, float] = {}
    code: dict[str, float] = {}
    for words, weight in parts:
        into = prose if weight >= 1 else code
        for word in words:
            if into.get(word, 0.0) < weight:
                into[word] = weight
    only = {word: weight for word, weight in code.items() if word not in prose}
    if prose and CODE_SHARE > 0 and len(only) > len(prose):
        scale = (len(prose) / len(only)) ** CODE_SHARE
        only = {word: weight * scale for word, weight in only.items()}
    return {**only, **prose}
