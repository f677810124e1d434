"""A cold index parses its heads on the loop in slices: at most 8 heads, or 32 KB of head bytes.

`s3skills.skills.index.streaming.read_as_listed` parses the `SKILL.md` heads of a library
with no manifest on the event loop and yields to the loop between slices, so a big
library (or big frontmatters) never holds the loop that serves every tenant for long.
This is pinned by counting work, not time: `parse_heads` is wrapped to record how many
heads and how many head bytes it parsed, and a ticker task on the same loop counts the
loop's turns. Calls made with no turn of the loop between them are one uninterrupted
stretch; each stretch must stay within the slice limits. With slicing switched off (the
limits made huge, or the yield between slices removed) one stretch parses far more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from keylog import KeyLogStore

from s3skills import S3Backend
from s3skills.aio import run_sync
from s3skills.skills.index import heads
from s3skills.tenancy import Tenant

SLICE_HEADS = 8
SLICE_BYTES = 32_768


@dataclass
class Stretch:
    """Parsing done with no turn of the loop in between: the weight of each head parsed."""

    tick: int
    weights: list[int] = field(default_factory=list)


@dataclass
class ParseLog:
    """What each uninterrupted stretch of parsing on the loop parsed."""

    ticks: int = 0
    stop: bool = False
    ticker: asyncio.Task[None] | None = None
    stretches: list[Stretch] = field(default_factory=list)

    async def tick(self) -> None:
        while not self.stop:
            self.ticks += 1
            await asyncio.sleep(0)

    def record(self, items: list[Any]) -> None:
        if self.ticker is None:  # the loop the parsing runs on, whichever it is
            self.ticker = asyncio.get_running_loop().create_task(self.tick())
        if not self.stretches or self.stretches[-1].tick != self.ticks:
            self.stretches.append(Stretch(self.ticks))
        self.stretches[-1].weights.extend(heads.head_weight(head) for _, _, head in items)


@pytest.fixture
def parse_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[ParseLog]:
    log = ParseLog()
    real = heads.parse_heads

    def counted(source: str, items: list[Any]) -> list[Any]:
        log.record(items)
        return real(source, items)

    monkeypatch.setattr(heads, "parse_heads", counted)  # what the cold index's parser calls on the loop
    yield log
    log.stop = True


def _skill(i: int, note_bytes: int) -> bytes:
    notes = "word " * (note_bytes // 5)
    return f"---\nname: s{i:03d}\ndescription: Skill number {i}.\nnotes: {notes}\n---\nBody {i}\n".encode()


def _cold_index(store: KeyLogStore, log: ParseLog, expected: int) -> None:
    backend = S3Backend("memory", store=store, user_id="ana")

    async def index() -> None:
        try:
            skills = await backend.skills.aindex(tenant=Tenant(user_id="ana"))
        finally:
            log.stop = True
        assert len(skills) == expected

    run_sync(index())
    assert backend.skills.problems(Tenant(user_id="ana")) == []


def test_a_cold_index_of_small_heads_parses_at_most_8_between_turns_of_the_loop(parse_log: ParseLog) -> None:
    store = KeyLogStore()
    for i in range(80):
        store.put_object(f"users/ana/skills/s{i:03d}/SKILL.md", _skill(i, 100))
    _cold_index(store, parse_log, 80)
    sizes = [len(s.weights) for s in parse_log.stretches]
    assert sum(sizes) == 80  # every head parsed once, on the loop
    assert max(sizes) <= SLICE_HEADS, sizes
    assert len(sizes) >= 80 // SLICE_HEADS


def test_a_cold_index_of_big_frontmatters_parses_at_most_32_kb_between_turns_of_the_loop(
    parse_log: ParseLog,
) -> None:
    store = KeyLogStore()
    for i in range(40):  # ~7 KB frontmatters (the most that is not heavy), a few small; one of ~40 KB
        size = 40_000 if i == 7 else 200 if i % 5 == 0 else 7_000
        store.put_object(f"users/ana/skills/s{i:03d}/SKILL.md", _skill(i, size))
    _cold_index(store, parse_log, 40)
    stretches = [s.weights for s in parse_log.stretches]
    # The ~40 KB frontmatter is heavy: parsed in the worker process, never on the loop.
    assert sum(len(w) for w in stretches) == 39
    assert max(len(w) for w in stretches) <= SLICE_HEADS, stretches
    # A slice ends once it holds 32 KB: the heads before its last weigh less than that.
    assert max(sum(w[:-1]) for w in stretches) < SLICE_BYTES, stretches
    assert max(sum(w) for w in stretches) >= SLICE_BYTES  # and some slices did fill up
    assert sum(sum(w) for w in stretches) > 4 * SLICE_BYTES  # so the limit was reached many times
