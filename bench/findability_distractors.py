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
from collections.abc import Sequence

from s3skills.testing import MemoryObjectStore

__all__ = ["PREFIX", "put_distractors", "put_real_distractors", "skill_md"]

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
