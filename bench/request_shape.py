"""The shape of a request set, and how close each request is to the skill it is aimed at.

A bench made of one-line requests written in a skill's own words measures vocabulary
matching, not finding. This module says what a set of requests looks like, per request and
in summary, so two sets can be compared side by side:

- **shape**: words, non-empty lines, pasted code (a fenced block, or two lines that read as
  code, a log, a stack trace, a diff or configuration), turns of conversation;
- **overlap with the target**: the share of the request's distinct content words that occur
  in the target's `name` and `description`, each word weighted by its rarity (IDF over every
  corpus skill's name and description), and the longest run of words the request shares with
  them. `least_overlapping_half` gives the half of a set that shares the least.

It also reads the request files of `findability_real_data/` (`read_request_file`): a request's
`query` is a string or a conversation, a list of `{"role": "user" | "assistant", "content"}`
turns ending with the user's; `own_words` (optional) lists the user's own product and team
words the text contains. Everything here is a pure function of its arguments except the
readers and the CLI, which prints the shape table of both sets:

    python bench/request_shape.py            # Markdown table: requests.json beside traffic.json
    python bench/request_shape.py --json     # the same figures as JSON
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FIRST_SET",
    "TRAFFIC",
    "Overlap",
    "Request",
    "Shape",
    "Turn",
    "common_runs",
    "content_words",
    "idf_table",
    "least_overlapping_half",
    "longest_common_run",
    "main",
    "overlap",
    "read_request_document",
    "read_request_file",
    "shape",
    "summary",
    "words_of",
]

DATA = Path(__file__).resolve().parent / "findability_real_data"
FIRST_SET = DATA / "requests.json"
TRAFFIC = DATA / "traffic.json"
ROLES = ("user", "assistant")

# Words that carry no topic: English function words and the filler of requests.
_STOP = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing done don down during each else even
    ever every few for from further get got had has have having he her here hers him his how i
    if in into is it its itself just let like make me more most my myself need no nor not now of
    off on once only or other our ours out over own please really same she should so some such
    than that the their them then there these they this those through to too under until up us
    use using very want was we were what when where which while who whom why will with would
    you your yours yourself yet still ok okay hi hey thanks thank one two way thing things anyone
    know think trying try tried something someone anything able via etc""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[a-z0-9]+")
# A line that reads as code, a log, a trace, a diff or configuration rather than prose.
_CODE_LINE = re.compile(
    r"""^(?:
        \s{4,}\S | \t                                   # indented
      | \s*(?:\$|>>>)\s+\S                              # shell prompt, Python REPL
      | \s*(?:Traceback|File\ ")|\s*at\ [\w.$<>]+\(        # Python / Java traces
      | \s*(?:diff\ --git|index\ [0-9a-f]|@@\ |\+\+\+|---\ ) # unified diffs
      | [+-][^+\-\s]                                     # a diff line
      | \s*[\w.-]+:\s*(?:\S.*)?$                         # key: value (YAML, headers, logs)
      | \s*[\w."\[\]-]+\s*=\s*\S                         # key = value (TOML, HCL, assignments)
      | .*[{};]\s*$ | \s*[}\])]                          # braces and statement ends
      | \s*(?:def|class|import|from|return|const|let|var|function|public|private|SELECT|FROM|WHERE|resource|module)\b
      | \s*<\/?[A-Za-z][\w:-]*[\s>/]                     # markup
      | \s*\d{4}-\d\d-\d\d[T\ ]\d\d:\d\d                 # timestamped log lines
      | \s*(?:ERROR|WARN|WARNING|INFO|DEBUG|FAIL|FAILED|PASS|E\ )\b
      | \s*[\w.]+\(.*\)\s*$                             # a call on a line of its own
      | [^\s,]+(?:,[^\s,]*){2,}$ | [^\t]+(?:\t[^\t]*){2,}$   # CSV and TSV rows
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation: who spoke (`user` or `assistant`) and what they wrote."""

    role: str
    content: str


@dataclass(frozen=True)
class Request:
    """One request of a file in `findability_real_data/`: its skill, split, turns, own words.

    A one-message request is one user turn. `target` is the skill it should find, or None for
    a should-not request, which names in `near_miss_of` the skill it sounds close to.
    """

    id: str
    repo: str
    folder: str
    target: str | None
    near_miss_of: str | None
    split: str
    turns: tuple[Turn, ...]
    own_words: tuple[str, ...] = ()

    @property
    def skill(self) -> str:
        """The skill the request is about: its target, or its near miss."""
        return self.target or self.near_miss_of or ""

    @property
    def text(self) -> str:
        """Every turn's content, in order, separated by a blank line."""
        return "\n\n".join(t.content for t in self.turns)

    @property
    def query(self) -> str | list[dict[str, str]]:
        """The request as the file gives it: a string, or the list of turns."""
        if len(self.turns) == 1 and self.turns[0].role == "user":
            return self.turns[0].content
        return [{"role": t.role, "content": t.content} for t in self.turns]


_BASE = {"id", "repo", "folder", "target", "near_miss_of", "split", "query"}


def _turns(query: object, where: str) -> tuple[Turn, ...]:
    if isinstance(query, str):
        if not query.strip():
            raise ValueError(f"{where}: the query must be a non-empty string or a list of turns")
        return (Turn("user", query),)
    if not isinstance(query, list) or not query:
        raise ValueError(f"{where}: the query must be a non-empty string or a list of turns")
    turns: list[Turn] = []
    for turn in query:
        if (
            not isinstance(turn, dict)
            or set(turn) != {"role", "content"}
            or turn["role"] not in ROLES
            or not isinstance(turn["content"], str)
            or not turn["content"].strip()
        ):
            raise ValueError(f"{where}: a turn must be {{'role': 'user'|'assistant', 'content': non-empty text}}")
        turns.append(Turn(turn["role"], turn["content"]))
    if turns[-1].role != "user":
        raise ValueError(f"{where}: a conversation ends with the user's turn")
    return tuple(turns)


def read_request_document(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """A request file's `repositories` object and `requests` list, as JSON gives them (unchecked items).

    Raises:
        ValueError: Not JSON with an object `repositories` and a list `requests`.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        repositories, items = doc["repositories"], doc["requests"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a request file ({exc})") from None
    if not isinstance(repositories, dict) or not isinstance(items, list):
        raise ValueError(f"{path}: 'repositories' must be an object and 'requests' a list")
    return repositories, items


def read_request_file(path: Path) -> tuple[dict[str, str], list[Request]]:
    """A request file of `findability_real_data/`: repository -> short name, and its requests.

    Raises:
        ValueError: Not JSON with `repositories` and `requests`; a request with a missing,
            extra or mistyped field, a split other than dev/test, a target and a near miss
            both or neither, a bad turn, an own word the text does not contain, or an id used
            twice. The message names the request.
    """
    repositories, items = read_request_document(path)
    out: list[Request] = []
    seen: set[str] = set()
    for n, item in enumerate(items):
        where = f"{path}: request {item.get('id', n) if isinstance(item, dict) else n}"
        if not isinstance(item, dict) or not _BASE <= set(item) <= {*_BASE, "own_words"}:
            raise ValueError(f"{where}: fields must be {sorted(_BASE)} and optionally 'own_words'")
        if not all(isinstance(item[k], str) for k in ("id", "repo", "folder")) or not all(
            isinstance(item[k], (str, type(None))) for k in ("target", "near_miss_of")
        ):
            raise ValueError(f"{where}: a field has the wrong type")
        if item["split"] not in ("dev", "test"):
            raise ValueError(f"{where}: the split must be dev or test")
        if (item["target"] is None) == (item["near_miss_of"] is None):
            raise ValueError(f"{where}: give a target or a near_miss_of (for a should-not request), not both")
        turns = _turns(item["query"], where)
        own = item.get("own_words", [])
        if not isinstance(own, list) or not all(isinstance(w, str) and w.strip() for w in own):
            raise ValueError(f"{where}: own_words must be a list of non-empty strings")
        text = "\n\n".join(t.content for t in turns)
        if missing := [w for w in own if w not in text]:
            raise ValueError(f"{where}: own_words {missing} are not in the request's text")
        if item["id"] in seen:
            raise ValueError(f"{where}: the id is used twice")
        seen.add(item["id"])
        fields = {k: item[k] for k in ("id", "repo", "folder", "target", "near_miss_of", "split")}
        out.append(Request(**fields, turns=turns, own_words=tuple(own)))
    return {str(k): str(v) for k, v in repositories.items()}, out


def words_of(text: str) -> list[str]:
    """The lower-case letter-and-digit runs of `text`, in order (`my_app.py` is 3 words)."""
    return _WORD.findall(text.casefold())


def content_words(text: str) -> set[str]:
    """The distinct words of `text` that can carry a topic: no stop words, no bare numbers."""
    return {w for w in words_of(text) if w not in _STOP and not w.isdigit() and len(w) > 1}


@dataclass(frozen=True)
class Shape:
    """What one request looks like: words (whitespace-separated), non-empty lines, turns.

    `lines` counts every turn's non-empty lines; `turn_lines` is the most one turn has, so a
    conversation of one-line turns is not multi-line.
    """

    words: int
    lines: int
    turn_lines: int
    turns: int
    fenced: bool
    pasted: bool

    @property
    def multi_line(self) -> bool:
        """One message of the request spans more than one line."""
        return self.turn_lines > 1

    @property
    def code(self) -> bool:
        """Pasted code, a log, a trace, a diff or configuration: fenced, or two lines that read so."""
        return self.fenced or self.pasted


def shape(turns: Sequence[Turn]) -> Shape:
    """The shape of a request given as its turns (one user turn for a one-message request)."""
    text = "\n".join(t.content for t in turns)
    lines = [line for line in text.splitlines() if line.strip()]
    code_lines = sum(1 for line in lines if _CODE_LINE.match(line))
    return Shape(
        words=len(text.split()),
        lines=len(lines),
        turn_lines=max((sum(1 for line in t.content.splitlines() if line.strip()) for t in turns), default=0),
        turns=len(turns),
        fenced="```" in text,
        pasted=code_lines >= 2,
    )


def idf_table(documents: Iterable[str]) -> dict[str, float]:
    """Word -> rarity over `documents` (one per skill: its name and description): ln((N+1)/(df+1)) + 1."""
    docs = [content_words(d) for d in documents]
    df: Counter[str] = Counter(w for d in docs for w in d)
    n = len(docs)
    return {w: math.log((n + 1) / (c + 1)) + 1 for w, c in df.items()} | {"": math.log(n + 1) + 1}


def longest_common_run(request: str, target: str) -> int:
    """The most consecutive words (stop words included) that `request` and `target` share."""
    return common_runs(words_of(request), words_of(target))[0]


def common_runs(a: Sequence[str], b: Sequence[str], run: int = 1) -> tuple[int, int]:
    """The longest run of words `a` and `b` share, and how many of `b`'s words lie in a shared
    run of at least `run` words."""
    best = 0
    covered = [False] * len(b)
    previous = [0] * (len(b) + 1)
    for word in a:
        current = [0] * (len(b) + 1)
        for j, other in enumerate(b, 1):
            if word == other:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
                if current[j] >= run:
                    covered[j - current[j] : j] = [True] * current[j]
        previous = current
    return best, sum(covered)


@dataclass(frozen=True)
class Overlap:
    """How much of a request is in its target's name and description."""

    share: float  # distinct content words found there, 0..1
    weighted: float  # the same, each word weighted by its IDF, 0..1
    run: int  # longest shared run of words


def overlap(request: str, name: str, description: str, idf: Mapping[str, float]) -> Overlap:
    """The request's overlap with a skill's `name` and `description` (see the module docstring).

    Name words are split on `-` and `_`, as a user would write them. A word the corpus never
    uses gets the highest rarity (`idf[""]`).
    """
    target = f"{name.replace('-', ' ').replace('_', ' ')} {description}"
    mine, theirs = content_words(request), content_words(target)
    if not mine:
        return Overlap(0.0, 0.0, longest_common_run(request, target))
    rare = idf.get("", 1.0)
    total = sum(idf.get(w, rare) for w in mine)
    found = sum(idf.get(w, rare) for w in mine & theirs)
    return Overlap(len(mine & theirs) / len(mine), found / total, longest_common_run(request, target))


def least_overlapping_half(overlaps: Mapping[str, Overlap]) -> list[str]:
    """The ids (request id -> overlap) of the half that shares least with its target (ties by id)."""
    ordered = sorted(overlaps, key=lambda rid: (overlaps[rid].weighted, overlaps[rid].run, rid))
    return ordered[: len(ordered) // 2]


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        v = float(values[0]) if values else 0.0
        return v, v, v
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summary(shapes: Sequence[Shape], overlaps: Sequence[Overlap] = ()) -> dict[str, Any]:
    """A set's shape: count, words median [Q1–Q3] (max), % over 40 words, multi-line, with code, multi-turn.

    With `overlaps` (one per request with a target), also the median weighted overlap and run.
    """
    n = len(shapes)

    def pct(count: int) -> float:
        return round(100 * count / n, 1) if n else 0.0

    q1, median, q3 = _quartiles([s.words for s in shapes])
    out: dict[str, Any] = {
        "requests": n,
        "words": {"median": median, "q1": q1, "q3": q3, "max": max((s.words for s in shapes), default=0)},
        "over_40_words": pct(sum(s.words > 40 for s in shapes)),
        "multi_line": pct(sum(s.multi_line for s in shapes)),
        "code": pct(sum(s.code for s in shapes)),
        "fenced": pct(sum(s.fenced for s in shapes)),
        "multi_turn": pct(sum(s.turns > 1 for s in shapes)),
    }
    if overlaps:
        w1, wm, w3 = _quartiles([o.weighted for o in overlaps])
        out["overlap_weighted"] = {"median": round(wm, 3), "q1": round(w1, 3), "q3": round(w3, 3)}
        out["longest_run"] = {"median": statistics.median(o.run for o in overlaps), "max": max(o.run for o in overlaps)}
    return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _rows(name: str, s: Mapping[str, Any]) -> dict[str, str]:
    w = s["words"]
    rows = {
        "requests": str(s["requests"]),
        "words, median [Q1–Q3] (max)": f"{_num(w['median'])} [{_num(w['q1'])}–{_num(w['q3'])}] ({w['max']})",
        "over 40 words": f"{s['over_40_words']} %",
        "multi-line": f"{s['multi_line']} %",
        "pasted code, log, trace, diff or config": f"{s['code']} %",
        "fenced code": f"{s['fenced']} %",
        "multi-turn": f"{s['multi_turn']} %",
    }
    if "overlap_weighted" in s:
        o = s["overlap_weighted"]
        rows["overlap with target, IDF-weighted, median [Q1–Q3]"] = f"{o['median']:.2f} [{o['q1']:.2f}–{o['q3']:.2f}]"
        run = s["longest_run"]
        rows["longest run shared with target, median (max)"] = f"{_num(run['median'])} ({run['max']})"
    return rows


def table(columns: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table: one row per figure of `summary`, one column per named set."""
    rows = {name: _rows(name, s) for name, s in columns.items()}
    keys = list(next(iter(rows.values())))
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    lines += [f"| {k} | " + " | ".join(rows[c].get(k, "") for c in columns) + " |" for k in keys]
    return "\n".join(lines)


def _corpus_fields() -> tuple[dict[str, tuple[str, str]], dict[str, float]]:
    """Skill id -> (name, description) for every corpus skill, and the IDF over them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import findability_corpus  # the corpus as the bench pushes it

    from s3skills.skills import InvalidSkill, parse_skill_md

    repositories, _ = read_request_file(FIRST_SET)
    corpus = findability_corpus.load_corpus(repositories)
    fields: dict[str, tuple[str, str]] = {}
    for skill, text in corpus.skills.items():
        folder = corpus.folder_of[skill].rsplit("/", 1)[-1]
        try:
            meta = parse_skill_md(text, folder=folder).metadata
            fields[skill] = (meta.name or folder, meta.description or "")
        except InvalidSkill:
            fields[skill] = (folder, "")
    return fields, idf_table(f"{n} {d}" for n, d in fields.values())


def measure_file(path: Path, fields: Mapping[str, tuple[str, str]], idf: Mapping[str, float]) -> dict[str, Any]:
    """The summary of one request file, whole and on its least-overlapping half."""
    _, items = read_request_file(path)
    shapes = {r.id: shape(r.turns) for r in items}
    overlaps = {
        r.id: overlap(r.text, *fields[r.target], idf) for r in items if r.target is not None and r.target in fields
    }
    half = set(least_overlapping_half(overlaps))
    hits = [r.id for r in items if r.target is not None]
    return {
        "all": summary(list(shapes.values())),
        "with_target": summary([shapes[i] for i in hits], [overlaps[i] for i in hits if i in overlaps]),
        "least_overlapping_half": summary([shapes[i] for i in half], [overlaps[i] for i in half]),
        "should_not": sum(r.target is None for r in items),
        "skills": len({r.target for r in items if r.target}),
        "own_words": sum(bool(r.own_words) for r in items),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Print the shape table of the first set beside the traffic-shaped set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args(argv)
    fields, idf = _corpus_fields()
    sets = {"requests.json": FIRST_SET, "traffic.json": TRAFFIC}
    found = {name: measure_file(path, fields, idf) for name, path in sets.items() if path.is_file()}
    if args.json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    columns: dict[str, Mapping[str, Any]] = {}
    for name, figures in found.items():
        with_target = figures["with_target"]
        columns[f"{name} (all)"] = figures["all"] | {
            k: with_target[k] for k in ("overlap_weighted", "longest_run") if k in with_target
        }
        columns[f"{name}, least-overlapping half"] = figures["least_overlapping_half"]
    print(table(columns))
    print(
        "\nShape rows count every request of a set (should-not ones included); the overlap rows and the"
        " least-overlapping half count the requests with a target."
    )
    for name, figures in found.items():
        print(
            f"\n{name}: {figures['with_target']['requests']} requests with a target ({figures['skills']} skills), "
            f"{figures['should_not']} should-not, {figures['own_words']} with the user's own product/team words"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
