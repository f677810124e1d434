"""The synthetic findability bench's distractors: generated skills that grow a library.

`put_distractors` writes `<app>-automation` skills with formulaic descriptions (the shape of
ComposioHQ's ~800) and topic skills mixing a library's own words; both benches use it.
`put_real_distractors` re-combines real skills' texts within a category, so the distractors
compete with real skills (`findability_real.py --distractors real`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

import request_shape  # bench/request_shape.py

from s3skills.testing import MemoryObjectStore

__all__ = [
    "BLEND_CHUNK",
    "BLEND_DONORS",
    "BLEND_SCOPE",
    "DEFAULT_KIND",
    "KINDS",
    "PREFIX",
    "blend_body",
    "blend_description",
    "copied",
    "maker",
    "put_blended_distractors",
    "put_distractors",
    "put_real_distractors",
    "skill_md",
]

PREFIX = "bench/skills/"
"""Where the benches' library lives (user `bench`, the seeds layout)."""


def skill_md(name: str, description: str, body: str) -> str:
    """A `SKILL.md` with this name, description and body."""
    return f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{body}\n"


_SYLLABLES = [c + v for c in "bcdfgklmnprstvz" for v in "aeiou"]
_ENTITIES = [
    "ticket",
    "task",
    "issue",
    "project",
    "board",
    "card",
    "contact",
    "deal",
    "lead",
    "invoice",
    "payment",
    "order",
    "customer",
    "channel",
    "message",
    "meeting",
    "event",
    "calendar",
    "file",
    "folder",
    "document",
    "sheet",
    "row",
    "record",
    "campaign",
    "email",
    "template",
    "user",
    "team",
    "webhook",
    "report",
    "dashboard",
    "note",
    "comment",
    "label",
    "tag",
    "pipeline",
    "build",
    "release",
    "repository",
    "branch",
    "subscription",
    "coupon",
    "product",
    "inventory",
    "page",
    "database",
    "form",
    "survey",
    "shipment",
]
_VERBS = [
    "create",
    "update",
    "list",
    "search",
    "archive",
    "delete",
    "assign",
    "export",
    "import",
    "schedule",
    "send",
    "merge",
    "tag",
    "move",
]
_STOP = {
    "a",
    "an",
    "and",
    "the",
    "of",
    "for",
    "to",
    "with",
    "in",
    "on",
    "or",
    "from",
    "as",
    "by",
    "your",
    "any",
    "at",
    "be",
    "it",
    "is",
    "its",
    "into",
    "their",
    "them",
    "this",
}


def _invented(rng: random.Random, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 3))))
        if name not in used:
            used.add(name)
            return name


def _automation(rng: random.Random, app: str) -> tuple[str, str]:
    """(description, body) of an `<app>-automation` distractor, Composio-shaped."""
    title = app.capitalize()
    entities = rng.sample(_ENTITIES, 4)
    description = (
        f"Automate {title} tasks via Rube MCP (Composio): {entities[0]}s, {entities[1]}s and {entities[2]}s. "
        "Always search tools first for current schemas."
    )
    sections = []
    for number, entity in enumerate(entities, 1):
        verb, other = rng.choice(_VERBS), rng.choice(_ENTITIES)
        sections.append(
            f"### {number}. {verb.capitalize()} {entity}s\n\n**When to use**: {verb} a {entity} in {title} "
            f"and link it to the {other}.\n\n1. Call `RUBE_SEARCH_TOOLS` for `{app.upper()}_{verb.upper()}`.\n"
        )
    return description, f"# {title} Automation via Rube MCP\n\n## Core workflows\n\n" + "\n".join(sections)


def _topic(rng: random.Random, words: list[str], name: str) -> tuple[str, str]:
    """(description, body) of a topic distractor: words of the core library, no phrase of it."""
    pick = rng.sample(words, 9)
    description = f"{pick[0].capitalize()} and {pick[1]} {pick[2]} with {name.capitalize()}: {pick[3]}, {pick[4]}."
    body = (
        f"# {name.capitalize()}\n\n## When to use\n\n- {pick[5]} {pick[6]} for the {pick[7]}.\n\n"
        f"## Steps\n\nCheck the {pick[8]} first, then {rng.choice(_VERBS)} the {rng.choice(_ENTITIES)}."
    )
    return description, body


def put_distractors(
    store: MemoryObjectStore, skills: Sequence[tuple[str, str]], count: int, rng: random.Random
) -> None:
    """Put `count` generated distractors in `store`, made from the words of `skills` ((id, text) pairs).

    Half-plus are `composio-skills/<app>-automation` skills with formulaic descriptions (the shape
    of ComposioHQ's ~800); the others are topic skills mixing the library's words, in its
    categories. Their names are invented syllables, never a segment of an id of `skills`.
    """
    words = sorted({w for _, text in skills for w in re.findall(r"[a-z][a-z-]{3,}", text.lower()) if w not in _STOP})
    categories = sorted({sid.split("/")[0] for sid, _ in skills})
    used = {w for sid, _ in skills for w in re.split(r"[/-]", sid)}
    for index in range(count):
        name = _invented(rng, used)
        if index % 20 < 11:
            leaf, category = f"{name}-automation", "composio-skills"
            description, body = _automation(rng, name)
        else:
            leaf, category = f"{name}-{rng.choice(words)}", rng.choice(categories)
            description, body = _topic(rng, words, name)
        store.put_object(f"{PREFIX}{category}/{leaf}/SKILL.md", skill_md(leaf, description, body))


_MAX_DESCRIPTION = 1024  # the Agent Skills limit on `description`


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s.strip()]


def _sections(body: str) -> list[str]:
    """A body's `## ` sections (the text before the first one is a section too)."""
    parts = re.split(r"(?m)^(?=##\s)", body)
    return [p.strip() for p in parts if p.strip()]


def _parse_real(skills: Sequence[tuple[str, str]]) -> dict[str, list[tuple[str, str, str]]]:
    """Category -> (folder name, description, body) of each of `skills` that parses with a description."""
    from s3skills.skills import InvalidSkill, parse_skill_md

    parsed: dict[str, list[tuple[str, str, str]]] = {}
    for sid, text in skills:
        leaf = sid.rsplit("/", 1)[-1]
        try:
            skill = parse_skill_md(text, folder=leaf)
        except InvalidSkill:
            continue
        if skill.metadata.description:
            parsed.setdefault(sid.split("/")[0], []).append((leaf, skill.metadata.description, skill.body))
    return parsed


def put_real_distractors(
    store: MemoryObjectStore, skills: Sequence[tuple[str, str]], count: int, rng: random.Random
) -> None:
    """Put `count` distractors made of real skills' texts in `store`: as hard as real skills.

    Each one re-combines two real skills of the same category (repository): its description
    is the first sentence(s) of one's description and the rest of the other's, its body
    alternates their `##` sections, and its name joins a word of each one's name with an
    invented syllable word (never an id of `skills`). So it uses a real domain's vocabulary,
    phrasing and body shape, and it competes with the skills it was made from: a request for
    either may find it. `skills` are (id, SKILL.md text) pairs.
    """
    parsed = _parse_real(skills)
    categories = sorted(parsed)
    weights = [len(parsed[c]) for c in categories]
    used = {w for sid, _ in skills for w in re.split(r"[/-]", sid)} | {sid.rsplit("/", 1)[-1] for sid, _ in skills}
    for _ in range(count):
        category = rng.choices(categories, weights)[0]
        pool = parsed[category]
        (leaf_a, desc_a, body_a), (leaf_b, desc_b, body_b) = (
            rng.sample(pool, 2) if len(pool) > 1 else (pool[0], pool[0])
        )
        first, second = _sentences(desc_a), _sentences(desc_b)
        cut_a, cut_b = max(1, len(first) // 2 + len(first) % 2), len(second) // 2
        description = " ".join(first[:cut_a] + second[cut_b:]) or desc_a
        if len(description) > _MAX_DESCRIPTION:  # a longer one is invalid: a reader skips it and reads it again
            description = description[:_MAX_DESCRIPTION].rsplit(" ", 1)[0]
        sections_a, sections_b = _sections(body_a), _sections(body_b)
        body = "\n\n".join(
            s
            for pair in zip(sections_a[::2], sections_b[1::2] + [""] * len(sections_a), strict=False)
            for s in pair
            if s
        )
        words = [rng.choice(leaf_a.split("-")), rng.choice(leaf_b.split("-"))]
        leaf = "-".join(dict.fromkeys([*words, _invented(rng, used)]))
        store.put_object(f"{PREFIX}{category}/{leaf}/SKILL.md", skill_md(leaf, description, body))


BLEND_DONORS = 2
"""How many real skills a blended distractor is made of (`put_blended_distractors`): chosen on
the dev splits by the calibration metric (`findability_calibrate.py`, bench/README.md
"Realistic distractors: how hard they are")."""
BLEND_SCOPE = "repo"
"""Where a blended distractor's donors come from: `repo` (one repository) or `any`."""
BLEND_CHUNK = 8
"""The longest run of words a blended description takes from one donor at a time."""


def _pieces(description: str, chunk: int) -> list[list[str]]:
    """A description's clauses (split after `.!?;:,`), each cut into runs of at most `chunk` words."""
    out: list[list[str]] = []
    for clause in re.split(r"(?<=[.!?;:,])\s+", " ".join(description.split())):
        words = clause.split()
        out.extend(words[i : i + chunk] for i in range(0, len(words), chunk))
    return [p for p in out if p]


def _rotated(items: list[Any], rng: random.Random) -> list[Any]:
    start = rng.randrange(len(items)) if items else 0
    return items[start:] + items[:start]


def blend_description(descriptions: Sequence[str], rng: random.Random, chunk: int = BLEND_CHUNK) -> str:
    """A description taken in turn from each of `descriptions` (its donors).

    Each donor contributes clauses (cut into runs of at most `chunk` words, from a random
    clause on) in rotation, and at most `ceil(its words / len(descriptions))` words: no real
    description gives more than its share, and the result is about as long as the donors'
    mean. The blend stops when only one donor has words left to give, so no two runs of one
    donor are ever next to each other. At most 1,024 characters, ending with a full stop.
    """
    caps = [-(-len(d.split()) // len(descriptions)) for d in descriptions]
    queues = [_rotated(_pieces(d, chunk), rng) for d in descriptions]
    taken = [0] * len(descriptions)
    words: list[str] = []
    last = -1
    while True:
        open_ = [n for n, queue in enumerate(queues) if queue and taken[n] < caps[n]]
        if not open_ or (len(descriptions) > 1 and open_ == [last]):
            break
        for n in open_:
            if n == last or taken[n] >= caps[n]:
                continue
            piece = queues[n].pop(0)[: caps[n] - taken[n]]
            taken[n] += len(piece)
            words.extend(piece)
            last = n
    text = " ".join(words)
    if len(text) > _MAX_DESCRIPTION - 1:
        text = text[: _MAX_DESCRIPTION - 1].rsplit(" ", 1)[0]
    text = text.rstrip(",;: ")
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def copied(text: str, source: str, run: int = 4) -> tuple[int, int]:
    """How much of `source` is in `text`: the longest run of words they share, and how many of
    `source`'s words lie in a shared run of at least `run` words (case and the punctuation
    around words ignored)."""
    return request_shape.common_runs(_plain_words(text), _plain_words(source), run)


def _plain_words(text: str) -> list[str]:
    return [w for w in (w.strip(".,;:!?()[]\"'`").casefold() for w in text.split()) if w]


def blend_body(bodies: Sequence[str], rng: random.Random) -> str:
    """A body of about the first one's length: `##` sections taken in turn from each of `bodies`,
    each giving at most its share of the characters (and at least one section)."""
    length = len(bodies[0])
    cap = -(-length // len(bodies))
    queues = [_rotated(_sections(b), rng) for b in bodies]
    taken = [0] * len(bodies)
    out: list[str] = []
    total = 0
    while total < length and any(queues):
        for n, queue in enumerate(queues):
            if not queue or total >= length:
                continue
            section = queue.pop(0)
            if taken[n] and taken[n] + len(section) > cap:
                queue.clear()
                continue
            taken[n] += len(section)
            total += len(section)
            out.append(section)
    return "\n\n".join(out)


def put_blended_distractors(
    store: MemoryObjectStore,
    skills: Sequence[tuple[str, str]],
    count: int,
    rng: random.Random,
    donors: int = BLEND_DONORS,
    scope: str = BLEND_SCOPE,
    chunk: int = BLEND_CHUNK,
) -> None:
    """Put `count` distractors blended from `donors` real skills each in `store`.

    Each one takes its donors from one category (repository), or with `scope="any"` from the
    whole library (it keeps the first donor's category): its description interleaves
    clauses of all of them (`blend_description`: runs of at most `chunk` words, no donor
    more than its share), its body their `##` sections (`blend_body`), and its name joins
    a word of two donors' names with an invented syllable word (never an id of `skills`,
    at most 64 characters). So it speaks a real domain's vocabulary, but carries no large
    share of any one real skill's text. `skills` are (id, SKILL.md text) pairs.

    Raises:
        ValueError: `donors` is below 1, `scope` is not `repo` or `any`, or no skill parses.
    """
    if donors < 1 or scope not in ("repo", "any") or chunk < 1:
        raise ValueError(f"donors and chunk must be >= 1 and scope repo or any (got {donors}, {scope!r}, {chunk})")
    parsed = _parse_real(skills)
    if not parsed:
        raise ValueError("no skill with a description to blend")
    categories = sorted(parsed)
    weights = [len(parsed[c]) for c in categories]
    everything = [(c, *item) for c in categories for item in parsed[c]]
    used = {w for sid, _ in skills for w in re.split(r"[/-]", sid)} | {sid.rsplit("/", 1)[-1] for sid, _ in skills}
    for _ in range(count):
        category = rng.choices(categories, weights)[0]
        pool = [(category, *item) for item in parsed[category]] if scope == "repo" else everything
        first = rng.choice(pool)
        others = [p for p in pool if p[2] != first[2]]
        picked = [first[1:], *(p[1:] for p in rng.sample(others, min(donors - 1, len(others))))]
        description = blend_description([d for _, d, _ in picked], rng, chunk)
        body = blend_body([b for _, _, b in picked], rng)
        words = [rng.choice(leaf.split("-")) for leaf, _, _ in picked[:2]]
        invented = _invented(rng, used)
        leaf = "-".join(dict.fromkeys([*words, invented]))
        if len(leaf) > 64:
            leaf = f"{words[0][:40]}-{invented}"
        store.put_object(f"{PREFIX}{category}/{leaf}/SKILL.md", skill_md(leaf, description, body))


KINDS = ("blended", "real", "generated")
"""The distractor families: `blended` (`put_blended_distractors`), `real` (two skills of one
repository re-combined, `put_real_distractors`), `generated` (`put_distractors`, synthetic)."""
DEFAULT_KIND = "blended"
"""The family the real-skills bench grows its library with unless told otherwise."""

Put = Callable[[MemoryObjectStore, Sequence[tuple[str, str]], int, random.Random], None]


def maker(kind: str) -> Put:
    """The function that puts distractors of `kind`: a name of `KINDS`, or `blended:` with any of
    `donors=N`, `scope=repo|any`, `chunk=N` (comma-separated) to try another blend.

    Raises:
        ValueError: An unknown kind or setting, or a value that is not one.
    """
    name, _, spec = kind.partition(":")
    if name not in KINDS or (spec and name != "blended"):
        raise ValueError(f"unknown distractors {kind!r}: one of {', '.join(KINDS)} or blended:donors=N,scope=repo|any")
    if name == "generated":
        return put_distractors
    if name == "real":
        return put_real_distractors
    options: dict[str, Any] = {}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        if key in ("donors", "chunk") and value.isdigit() and int(value) >= 1:
            options[key] = int(value)
        elif key == "scope" and value in ("repo", "any"):
            options[key] = value
        else:
            raise ValueError(f"bad distractor setting {part!r} in {kind!r}")

    def put(store: MemoryObjectStore, skills: Sequence[tuple[str, str]], count: int, rng: random.Random) -> None:
        put_blended_distractors(store, skills, count, rng, **options)

    return put
