"""Findability: is the right skill in the agent's view when a request comes in?

For every skill of a library, one request is written from the skill's BODY (not its
description: the words a user might use for a task the skill covers), and two things
are measured through the real code paths:

- **index**: the skill's id is in the prompt index that `SkillsPromptMiddleware` builds
  for that request (default budget, 6,000 characters), with its description or among the
  ids the index also names;
- **search**: the skill is on the first page of `list_skills(query=<request>)`.

The library is generated (`--skills 864` by default, shaped like ComposioHQ's: most
skills are `<app>-automation` with formulaic descriptions, the rest topic skills in a few
categories), or read from a local folder (`--library DIR`, e.g. a clone of
ComposioHQ/awesome-claude-skills fetched by you; it is pushed into an in-memory store,
nothing is committed). `--anonymous` also measures requests with the skill's own name
words removed (a user who does not name the app).

Targets (the exit status is 1 when one fails), for the requests written from the body:
>= 90 % of the skills in the index, >= 98 % on the first search page. The anonymous
requests are reported, not held to them.

    python bench/findability.py                       # generated, 864 skills
    python bench/findability.py --library ~/src/awesome-claude-skills
    python bench/findability.py --skills 200 --budget 4000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.middleware import SkillsPromptMiddleware
from s3skills.skills import get_skill_doc
from s3skills.testing import MemoryObjectStore
from s3skills.tools import skill_tools
from s3skills.transfer import push_tree

USER = "bench"
LAYOUT = KeyLayout.seeds()
PREFIX = f"{USER}/skills/"


def _words(text: str) -> list[str]:
    return text.split()


_SYLLABLES = [c + v for c in "bcdfgklmnprstvz" for v in "aeiou"]
_ENTITIES_TEXT = (
    "ticket task issue project board card contact deal lead invoice payment order customer channel message "
    "meeting event calendar file folder document sheet row record campaign email template user team webhook "
    "report dashboard note comment label tag pipeline build release repository branch subscription coupon"
)
_ENTITIES = _words(_ENTITIES_TEXT)
_VERBS = _words("create update list search archive delete assign export import schedule send merge tag")
_TOPICS = {
    "documents": ["pdf", "docx", "spreadsheet", "slides", "markdown", "invoice", "contract", "form", "ocr", "epub"],
    "development": ["pytest", "docker", "terraform", "graphql", "migration", "linting", "profiling", "webhooks"],
    "data": ["csv", "parquet", "sql", "charts", "pandas", "forecasting", "dedupe", "geocoding"],
    "writing": ["changelog", "blog", "newsletter", "translation", "summary", "press-release", "grant", "resume"],
}
_TOPIC_WORDS = _words(
    "pages tables columns fields values layout fonts images headers footers citations metadata schema rows "
    "indexes queries tests fixtures containers modules variables charts axes labels forecasts duplicates "
    "addresses drafts tone audience sections bullet points deadlines budgets sources"
)


@dataclass
class Case:
    """One skill and the request written from its body."""

    skill_id: str
    request: str
    anonymous: str


def _app_name(rng: random.Random, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 3))))
        if name not in used:
            used.add(name)
            return name


def _automation_skill(rng: random.Random, app: str) -> tuple[str, str, list[str]]:
    """(description, body, task sentences) of an `<app>-automation` skill."""
    title = app.capitalize()
    entities = rng.sample(_ENTITIES, 4)
    description = (
        f"Automate {title} tasks via Rube MCP (Composio): {', '.join(entities[:3])} and more. "
        "Always search tools first for current schemas."
    )
    tasks, sections = [], []
    for number, entity in enumerate(entities, 1):
        verb, other = rng.choice(_VERBS), rng.choice(_ENTITIES)
        task = f"{verb} a {entity} in {title} and link it to the {other}"
        tasks.append(task)
        slug = f"{app.upper()}_{verb.upper()}_{entity.upper()}"
        sections.append(
            f"### {number}. {verb.capitalize()} {entity}s\n\n**When to use**: the user wants to {task}.\n\n"
            f"1. Call `RUBE_SEARCH_TOOLS` for `{slug}`.\n2. Call `{slug}` with the {entity} id.\n"
        )
    body = f"# {title} Automation via Rube MCP\n\n## Core workflows\n\n" + "\n".join(sections)
    return description, body, tasks


def _topic_skill(rng: random.Random, topic: str) -> tuple[str, str, list[str]]:
    words = rng.sample(_TOPIC_WORDS, 6)
    name = topic.replace("-", " ")
    description = f"Work with {name} files and tasks: {words[0]}, {words[1]} and {words[2]}."
    tasks = [
        f"check the {words[3]} of my {name} and fix the {words[4]}",
        f"turn this {name} into a clean version with proper {words[5]}",
    ]
    body = f"# {name.capitalize()}\n\n## When to use\n\n" + "\n".join(f"- The user wants to {t}." for t in tasks)
    return description, body, tasks


def generate(root: Path, count: int, seed: int) -> None:
    """Write a library of `count` skills below `root` (category folders, one SKILL.md each)."""
    rng = random.Random(seed)
    used: set[str] = set()
    topics = [(c, t) for c, names in _TOPICS.items() for t in names]
    for index in range(count):
        if index < len(topics) and count > 4 * len(topics):
            category, name = topics[index]
            description, body, _ = _topic_skill(rng, name)
        else:
            category, name = "composio-skills", f"{_app_name(rng, used)}-automation"
            description, body, _ = _automation_skill(rng, name.removesuffix("-automation"))
        folder = root / category / name
        folder.mkdir(parents=True, exist_ok=True)
        text = f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{body}"
        (folder / "SKILL.md").write_text(text, encoding="utf-8")


_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def request_from_body(body: str, skill_id: str, rng: random.Random) -> tuple[str, str]:
    """A request made of one sentence of the body (6+ words, not a heading), and the same
    sentence without the words of the skill's name."""
    sentences = []
    for raw in _SENTENCE_RE.split(body):
        line = re.sub(r"[*_`#>|-]+", " ", raw).strip()
        line = re.sub(r"^\d+\.\s*", "", line)
        if len(line.split()) >= 6 and not raw.lstrip().startswith("#"):
            sentences.append(" ".join(line.split()))
    if not sentences:
        sentences = [" ".join(body.split()[:30]) or skill_id]
    request = rng.choice(sentences)
    name_words = {w for w in re.split(r"[\W_]+", skill_id.lower()) if len(w) > 2} - {"automation", "skills"}
    anonymous = " ".join(w for w in request.split() if re.sub(r"\W", "", w.lower()) not in name_words)
    return request, anonymous


async def _cases(store: MemoryObjectStore, seed: int) -> list[Case]:
    rng = random.Random(seed + 1)
    objects, _ = await store.alist(PREFIX)
    cases = []
    for obj in objects:
        if not obj.key.endswith("/SKILL.md"):
            continue
        skill_id = obj.key[len(PREFIX) : -len("/SKILL.md")]
        body = get_skill_doc((await store.aget(obj.key)).data)
        request, anonymous = request_from_body(body, skill_id, rng)
        cases.append(Case(skill_id, request, anonymous))
    return cases


def _named(skill_id: str, text: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(skill_id)}(?![\w/-])", text) is not None


async def measure(store: MemoryObjectStore, cases: list[Case], budget: int, anonymous: bool) -> dict[str, Any]:
    backend = S3Backend("bench", user_id=USER, store=store, layout=LAYOUT)
    middleware = SkillsPromptMiddleware(backend, budget_chars=budget)
    list_tool = next(t for t in skill_tools(backend) if t.name == "list_skills")
    in_index = described = in_search = 0
    longest = 0
    started = time.perf_counter()
    for case in cases:
        request = case.anonymous if anonymous else case.request
        prompt = await middleware.build_prompt({"messages": [HumanMessage(request)]})
        index = prompt.split("### Loaded skills")[0]
        longest = max(longest, len(index))
        if _named(case.skill_id, index):
            in_index += 1
            block = index.split("Also relevant (ids only):")[0]
            described += 1 if _named(case.skill_id, block) else 0
        page = await list_tool.ainvoke({"query": request})
        in_search += 1 if _named(case.skill_id, str(page)) else 0
    total = len(cases) or 1
    return {
        "requests": len(cases),
        "in_index": round(100 * in_index / total, 1),
        "in_index_with_description": round(100 * described / total, 1),
        "in_first_search_page": round(100 * in_search / total, 1),
        "longest_prompt_section_chars": longest,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    store = MemoryObjectStore("bench")
    if args.library:
        source = Path(args.library)
    else:
        import tempfile

        source = Path(tempfile.mkdtemp(prefix="findability-"))
        generate(source, args.skills, args.seed)
    await asyncio.to_thread(push_tree, store, source, PREFIX, force=True)
    cases = await _cases(store, args.seed)
    report: dict[str, Any] = {
        "library": str(args.library or f"generated ({args.skills} skills, seed {args.seed})"),
        "budget_chars": args.budget,
        "skills": len(cases),
        "named_requests": await measure(store, cases, args.budget, anonymous=False),
    }
    if args.anonymous:
        report["anonymous_requests"] = await measure(store, cases, args.budget, anonymous=True)
    report["examples"] = [{"skill": c.skill_id, "request": c.request} for c in cases[:3]]
    named = report["named_requests"]
    report["targets"] = [
        {"target": "in the index >= 90 %", "value": named["in_index"], "ok": named["in_index"] >= 90},
        {
            "target": "on the first search page >= 98 %",
            "value": named["in_first_search_page"],
            "ok": named["in_first_search_page"] >= 98,
        },
    ]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skills", type=int, default=864, help="Skills in the generated library.")
    parser.add_argument("--library", help="A local folder of skills instead of the generated library.")
    parser.add_argument("--budget", type=int, default=6000, help="The prompt index budget (the default: 6000).")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--anonymous", action="store_true", help="Also requests without the skill's name words.")
    parser.add_argument("--json", metavar="FILE", help="Also write the report as JSON.")
    args = parser.parse_args(argv)
    report = asyncio.run(main_async(args))
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0 if all(t["ok"] for t in report["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
