"""Heavy `SKILL.md` heads are parsed in a worker process, never in the process serving tenants.

A crafted frontmatter (a flow list of ~30,000 values, under the 64 KiB cap) costs
milliseconds to refuse; a library of hundreds of them, indexed cold, held the GIL every
other tenant's calls need (issue 30). `s3skills.skills.index.isolated` sends the heads no
real skill has (see `is_heavy`) to a worker process, and falls back to a thread when that
process cannot run.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from s3skills.config import Config, Limits
from s3skills.skills import SkillLibrary
from s3skills.skills.index import heads, isolated
from s3skills.skills.index.heads import HeadReader, parse_heads
from s3skills.skills.index.isolated import ParseWorker, aparse_isolated, is_heavy
from s3skills.storage import ObjectInfo
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md
from s3skills.testing.corpus import real_skills_root

EVE = Tenant(user_id="eve")
PREFIX = "users/eve/skills/"
FLOOD = "---\nname: {name}\ndescription: d\ntags: [" + ",".join(["a"] * 30_000) + "]\n---\n"
BIG_BUT_VALID = "---\nname: {name}\ndescription: A long one.\nmetadata:\n  notes: '" + "n" * 12_000 + "'\n---\n# Use\n"


def _reader() -> HeadReader:
    return HeadReader(MemoryObjectStore(), Limits(), 8192)


def _item(name: str, text: str) -> tuple[str, ObjectInfo, heads.Head]:
    data = text.format(name=name).encode()
    return name, ObjectInfo(f"{PREFIX}{name}/SKILL.md", len(data), "etag-" + name), _reader().of_bytes(data, "etag")


class Recording:
    """`parse_heads` in this process, recording the skill ids it parsed."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, source: str, items: list[tuple[str, ObjectInfo, heads.Head]]) -> list[heads.SkillEntry]:
        self.ids.extend(sid for sid, _, _ in items)
        return parse_heads(source, items)


def test_no_real_skill_has_a_heavy_head() -> None:
    reader = _reader()
    paths = sorted(real_skills_root().rglob("SKILL.md"))
    assert len(paths) >= 682
    for path in paths:
        data = path.read_bytes()
        assert not is_heavy(reader.of_bytes(data, "etag")), path


def test_flooded_and_oversized_frontmatters_are_heavy_and_an_ordinary_one_is_not() -> None:
    assert is_heavy(_item("flood", FLOOD)[2])
    assert is_heavy(_item("big", BIG_BUT_VALID)[2])
    assert not is_heavy(_item("pdf", skill_md("pdf", "Fill PDF forms.", tags="[pdf, forms]"))[2])
    assert not is_heavy("SKILL.md disappeared while the index was built")


async def test_a_cold_index_parses_heavy_heads_in_the_worker_process_and_reports_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolated, "WORKER", ParseWorker())
    here = Recording()
    monkeypatch.setattr(heads, "parse_heads", here)
    store = MemoryObjectStore()
    for i in range(5):
        store.put_object(f"{PREFIX}flood{i}/SKILL.md", FLOOD.format(name=f"flood{i}"))
    store.put_object(f"{PREFIX}pdf/SKILL.md", skill_md("pdf", "Fill PDF forms."))
    library = SkillLibrary(store, Config(manifest=False))
    try:
        assert [s.id for s in await library.aindex(tenant=EVE)] == ["pdf"]
        problems = {p.skill_id: p.reason for p in library.problems(tenant=EVE)}
    finally:
        isolated.WORKER.close()
    assert set(problems) == {f"flood{i}" for i in range(5)}
    assert all("over 1000 YAML values" in reason for reason in problems.values())
    assert here.ids == ["pdf"]  # the flooded heads were parsed elsewhere
    assert isolated.WORKER.requests == 5  # one per heavy head, read as the listing arrived


async def test_the_worker_parses_a_heavy_head_as_this_process_would() -> None:
    worker = ParseWorker()
    items = [_item("big", BIG_BUT_VALID), _item("flood", FLOOD), _item("pdf", skill_md("pdf", "Fill PDF forms."))]
    try:
        assert await worker.aparse("user", items) == parse_heads("user", items)
    finally:
        worker.close()
    assert worker.requests == 1


async def test_heavy_heads_read_by_id_or_written_go_to_the_worker_in_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolated, "WORKER", ParseWorker())
    items = [_item("a", skill_md("a", "First.")), _item("flood", FLOOD), _item("z", skill_md("z", "Last."))]
    try:
        entries = await aparse_isolated(parse_heads, "user", items)
        written = await _reader().aentries_of("user", PREFIX, {"flood": (FLOOD.format(name="flood").encode(), "e")})
    finally:
        isolated.WORKER.close()
    assert [e.skill_id for e in entries] == ["a", "flood", "z"]
    assert entries == parse_heads("user", items)
    assert written["flood"].problem is not None
    assert isolated.WORKER.requests == 2


async def test_when_the_worker_cannot_run_heavy_heads_are_parsed_here_and_that_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = ParseWorker([sys.executable, "-c", "import sys; sys.exit(3)"])
    monkeypatch.setattr(isolated, "WORKER", broken)
    items = [_item("flood", FLOOD), _item("pdf", skill_md("pdf", "Fill PDF forms."))]
    with caplog.at_level(logging.WARNING, logger="s3skills.skills.index.isolated"):
        first = await aparse_isolated(parse_heads, "user", items)
        second = await aparse_isolated(parse_heads, "user", items)
    assert first == second == parse_heads("user", items)
    assert not broken.usable
    assert len([r for r in caplog.records if "parsed in this process" in r.message]) == 1


def test_the_worker_finds_this_s3skills_whatever_the_parents_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    worker = ParseWorker()
    try:
        entries = worker._roundtrip("user", [_item("flood", FLOOD)])
    finally:
        worker.close()
    assert entries is not None
    assert entries[0].problem is not None


async def test_a_worker_that_dies_on_a_batch_after_answering_is_started_again_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker that answers one batch, then dies on the next one (as a head that crashed it would).
    once = (
        "import sys; from s3skills.skills.index import isolated; from s3skills.skills.index.heads import parse_heads; "
        "source, items = isolated._receive(sys.stdin.buffer); "
        "isolated._send(sys.stdout.buffer, parse_heads(source, items)); "
        "isolated._receive(sys.stdin.buffer); sys.exit(1)"
    )
    worker = ParseWorker([sys.executable, "-c", once])
    monkeypatch.setattr(isolated, "WORKER", worker)
    items = [_item("flood", FLOOD)]
    try:
        for _ in range(3):  # answered; died (this batch parsed in a thread); a new worker answered
            assert await aparse_isolated(parse_heads, "user", items) == parse_heads("user", items)
    finally:
        worker.close()
    assert worker.usable
    assert worker.restarts == 1
    assert worker.requests == 2


def test_the_worker_sees_no_secret_of_the_parents_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "parent-aws-secret",
        "AWS_SESSION_TOKEN": "parent-session-token",
        "OPENAI_API_KEY": "parent-model-key",
        "GITHUB_TOKEN": "parent-token",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    worker = ParseWorker()
    try:
        assert worker._roundtrip("user", [_item("flood", FLOOD)]) is not None  # it runs, and parses
        process = worker._process
        assert process is not None
        environ = Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")  # what it was started with
    finally:
        worker.close()
    names = {entry.split(b"=", 1)[0].decode() for entry in environ if entry}
    assert "PATH" in names
    assert not names & set(secrets)
    assert not any(value.encode() in entry for entry in environ for value in secrets.values())
