"""A frontmatter's YAML is read within a budget of values and CPU, not only of bytes.

A crafted frontmatter under the 64 KiB cap (a flow list of 30,000 tiny values) used to cost
0.15-0.2 s of CPU per file on every cold index, in every process. Now it is refused after at
most `MAX_FRONTMATTER_NODES` values, reported as the skill's problem, and never loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from s3skills.skills import InvalidSkill, SkillLibrary, parse_skill_md
from s3skills.skills.format import parse as parse_module
from s3skills.skills.format.frontmatter import frontmatter_json
from s3skills.skills.format.model import MAX_FRONTMATTER_BYTES, MAX_FRONTMATTER_NODES
from s3skills.skills.format.parse import node_bound, over_budget
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md

FLOOD = "---\nname: flood\ndescription: Floods the parser.\ntags: [" + ",".join(["a"] * 30_000) + "]\n---\nBody\n"
NESTED_FLOOD = "---\nname: flood\ndescription: d\nx: {" + ", ".join(f"k{i}: [1, 2]" for i in range(3000)) + "}\n---\n"


def test_the_crafted_frontmatters_fit_under_the_byte_cap() -> None:
    for text in (FLOOD, NESTED_FLOOD):
        assert len(text.encode()) < MAX_FRONTMATTER_BYTES  # only the value budget can refuse them


@pytest.mark.parametrize("text", [FLOOD, NESTED_FLOOD], ids=["flow-list", "flow-map"])
def test_a_frontmatter_with_too_many_values_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(InvalidSkill, match=f"over {MAX_FRONTMATTER_NODES} YAML values"):
        parse_skill_md(text, folder="flood")


class _Counting:
    """Counts the YAML events a parse consumed, and the whole loads it made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events = 0
        self.loads = 0
        real_parse, real_load = yaml.parse, yaml.load

        def parse(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for event in real_parse(*args, **kwargs):
                self.events += 1
                yield event

        def load(*args: Any, **kwargs: Any) -> Any:
            self.loads += 1
            return real_load(*args, **kwargs)

        monkeypatch.setattr(yaml, "parse", parse)
        monkeypatch.setattr(yaml, "load", load)


def test_an_over_budget_frontmatter_is_never_read_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _Counting(monkeypatch)
    with pytest.raises(InvalidSkill):
        parse_skill_md(FLOOD, folder="flood")
    assert seen.loads == 0  # never composed into Python objects
    assert 0 < seen.events <= MAX_FRONTMATTER_NODES + 16  # stopped at the budget, not at 30,000


def test_the_cpu_budget_refuses_a_frontmatter_whose_reading_takes_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moving the clock, not waiting: each read of the CPU clock advances it by 10 ms."""
    ticks = iter(range(10**6))
    monkeypatch.setattr(parse_module.time, "thread_time", lambda: next(ticks) * 0.010)
    text = "---\nname: slow\ndescription: d\ntags: [" + ",".join(["a"] * 600) + "]\n---\n"
    assert node_bound(text) > MAX_FRONTMATTER_NODES  # walked (600 values are within the value budget)
    with pytest.raises(InvalidSkill, match="ms of CPU to read"):
        parse_skill_md(text, folder="slow")


def test_a_frontmatter_within_the_budget_is_read_as_before() -> None:
    text = "---\nname: many\ndescription: d\ntags: [" + ",".join(f"t{i}" for i in range(700)) + "]\n---\nBody\n"
    assert node_bound(text) > MAX_FRONTMATTER_NODES  # it is walked, and passes
    parsed = parse_skill_md(text, folder="many")
    assert parsed.metadata.tags[:3] == ["t0", "t1", "t2"]
    assert len(parsed.metadata.tags) == 700


def test_the_digest_books_frontmatter_reader_has_the_same_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _Counting(monkeypatch)
    with pytest.raises(ValueError, match="YAML values"):
        frontmatter_json(FLOOD.encode())
    assert seen.loads == 0


def test_no_real_frontmatter_comes_near_the_budget() -> None:
    """The 682 skills of the real corpus: none refused, and none even walked by the count."""
    from s3skills.testing.corpus import real_skills_root

    root = real_skills_root()  # without the corpus: skipped with how to get it (tests/conftest.py)
    opening = re.compile(r"\A\ufeff?(?:[ \t]*\n)*---[ \t]*\n")
    closing = re.compile(r"^---[ \t]*$", re.M)
    checked = 0
    for path in sorted(root.rglob("SKILL.md")):
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        start = opening.match(text)
        end = closing.search(text, start.end()) if start else None
        if start is None or end is None:
            continue
        block = text[start.end() : end.start()]
        assert over_budget(block) is None, path
        assert node_bound(block) <= MAX_FRONTMATTER_NODES // 3, path  # a wide margin
        checked += 1
    assert checked >= 650


async def test_a_library_with_flooded_frontmatters_reports_them_and_serves_the_rest() -> None:
    store = MemoryObjectStore()
    for i in range(5):
        await store.aput(
            f"users/eve/skills/flood{i}/SKILL.md", FLOOD.replace("name: flood", f"name: flood{i}").encode()
        )
    await store.aput("users/eve/skills/pdf/SKILL.md", skill_md("pdf").encode())
    library = SkillLibrary(store)
    tenant = Tenant("eve", "t1")
    assert [s.id for s in await library.aindex(tenant=tenant)] == ["pdf"]
    problems = {p.skill_id: p.reason for p in library.problems(tenant)}
    assert set(problems) == {f"flood{i}" for i in range(5)}
    assert all("YAML values" in message for message in problems.values())
