"""Derived data is a cache that may lie (issue 22, item 3): attacks on the manifest and the book.

Whoever can write a library can write its `.s3skills/manifest.json` and `digests.json`. These
tests write damaged, inflated, deeply nested and lying ones and check that reading them is
bounded (peak memory measured with tracemalloc on a `MemoryObjectStore`: no server thread in
the process to skew it), never fatal, and that what they claimed is rebuilt from the SKILL.md
files. The agent path (a real deepagents loop) and the MCP server (a subprocess over moto)
still answer when they meet one.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from mcp_harness import get_skill, list_all, put, read_bytes, stdio_session
from runs import SYNC_RUN

from s3skills import S3Backend, create_skills_agent
from s3skills.config import Config
from s3skills.errors import SkillError
from s3skills.layout import KeyLayout
from s3skills.skills import SkillCatalog, SkillLibrary
from s3skills.skills.index.derived import weigh
from s3skills.skills.index.digests import BOOK_SCHEMA, DigestBooks, Record, book_key, decode_book, encode_book
from s3skills.skills.index.manifest import MANIFEST_SCHEMA, decode_manifest
from s3skills.skills.ranking.sketch import MAX_SKETCH_CHARS as SKETCH_MAX_CHARS
from s3skills.skills.versions.records import load_bounded
from s3skills.storage.documents import decode_cost
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, ScriptedChatModel, builders, tool_call

LAYOUT = KeyLayout()
ANA = Tenant(user_id="ana")
PREFIX = "users/ana/skills/"
MANIFEST = "users/ana/.s3skills/manifest.json"
BOOK = book_key(LAYOUT, PREFIX)
MiB = 1024 * 1024
BUDGET = 300 * MiB  # the acceptance bound for reading one damaged manifest or book


def skill_md(name: str, description: str = "Does things") -> bytes:
    return builders.skill_md(name, description, body=f"# {name}\n\nReal instructions of {name}.\n").encode()


def seeded(n: int = 3) -> MemoryObjectStore:
    store = MemoryObjectStore()
    for i in range(n):
        store.put_object(f"{PREFIX}skill-{i}/SKILL.md", skill_md(f"skill-{i}", f"Real description {i}"))
        store.put_object(f"{PREFIX}skill-{i}/notes.md", f"notes {i}".encode())
    return store


def library(store: MemoryObjectStore, **catalog: Any) -> SkillLibrary:
    config = Config(layout=LAYOUT)
    cat = SkillCatalog(store, limits=config.limits, manifest_key=LAYOUT.manifest_key, verify="never", **catalog)
    return SkillLibrary(store, config, catalog=cat, tenant=lambda: ANA)


def header(skills_json: bytes) -> bytes:
    head = {"schema": MANIFEST_SCHEMA, "prefix": PREFIX, "built_at": 1.0, "verified_at": None}
    return json.dumps(head).encode()[:-1] + b',"skills":' + skills_json + b"}"


def inflated_manifest(size: int) -> bytes:
    """A manifest of the right schema whose one entry is `size` bytes of empty objects."""
    junk = b"[" + b"{}," * (size // 3) + b"{}]"
    return header(
        b'{"skill-0":{"key":"' + PREFIX.encode() + b'skill-0/SKILL.md","etag":"x","size":1,"j":' + junk + b"}}"
    )


def inflated_book(size: int) -> bytes:
    return b'{"schema":"' + BOOK_SCHEMA.encode() + b'","files":{"a":' + b"[" + b"[]," * (size // 3) + b"[]]}}"


def peak_of(run: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = run()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def stored_manifest(store: MemoryObjectStore) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(store._get(MANIFEST).data)
    return doc


# -- bounded and never fatal -------------------------------------------------------------------------


def long_text_manifest(size: int) -> bytes:
    """A manifest cheap to decode (one long string) whose entry is far over its cap."""
    entry = {"key": PREFIX + "skill-0/SKILL.md", "etag": "x", "size": 1, "metadata": {"name": "skill-0"}}
    entry["metadata"]["description"] = "a" * size  # type: ignore[index]
    return header(json.dumps({"skill-0": entry}).encode())


@pytest.mark.parametrize("make", [inflated_manifest, long_text_manifest])
def test_an_inflated_40_mib_manifest_costs_under_300_mb_to_read_and_is_rebuilt(make: Callable[[int], bytes]) -> None:
    store = seeded()
    store.put_object(MANIFEST, make(40 * MiB))
    lib = library(store)
    skills, peak = peak_of(lambda: lib.index())
    assert [s.id for s in skills] == ["skill-0", "skill-1", "skill-2"]
    assert peak < BUDGET, f"peak {peak / MiB:.0f} MiB"
    lib.flush()  # the rebuilt manifest is written after the answer
    doc = stored_manifest(store)  # rebuilt from the SKILL.md files, in its place
    assert sorted(doc["skills"]) == ["skill-0", "skill-1", "skill-2"]
    assert "j" not in doc["skills"]["skill-0"]
    assert lib.load("skill-0").instructions.startswith("# skill-0")


def test_an_inflated_30_mib_digest_book_costs_under_300_mb_reads_as_empty_and_is_replaced() -> None:
    store = seeded()
    store.put_object(BOOK, inflated_book(30 * MiB))
    books = DigestBooks(store, LAYOUT)
    records, peak = peak_of(lambda: asyncio.run(books.arecall(PREFIX)))
    assert records == {}
    assert peak < BUDGET, f"peak {peak / MiB:.0f} MiB"
    record = Record("e1", 3, "a" * 64)
    assert asyncio.run(books.aremember(PREFIX, {"skill-0/notes.md": record}))
    assert decode_book(store._get(BOOK).data) == {"skill-0/notes.md": record}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(header(b"[" * 200_000), id="deeply-nested-skills"),
        pytest.param(header(b'{"skill-0":' + b"[" * 200_000 + b"]" * 200_000 + b"}"), id="deeply-nested-entry"),
        pytest.param(header(b'{"skill-0":{"metadata":' + b'{"a":' * 100 + b"1" + b"}" * 101 + b"}"), id="deep-entry"),
        pytest.param(b"[" * 5_000_000, id="five-million-brackets"),
        pytest.param(inflated_manifest(4 * MiB)[:-7], id="truncated"),
        pytest.param(b"\xff\xfe" + b"\x00" * 100, id="not-utf8"),
        pytest.param(header(b"{}")[:-1] + b',"extra":1}', id="unknown-top-level-field"),
    ],
)
def test_a_damaged_manifest_never_fails_the_index_and_is_rebuilt(damage: bytes) -> None:
    store = seeded()
    store.put_object(MANIFEST, damage)
    lib = library(store)
    assert [s.id for s in lib.index()] == ["skill-0", "skill-1", "skill-2"]
    lib.flush()  # the rebuilt manifest is written after the answer
    assert sorted(stored_manifest(store)["skills"]) == ["skill-0", "skill-1", "skill-2"]


def test_a_deeply_nested_or_inflated_book_reads_as_empty_without_raising() -> None:
    for damage in (b"[" * 200_000, b'{"schema":"' + BOOK_SCHEMA.encode() + b'","files":' + b"[" * 200_000, b"\x00"):
        assert decode_book(damage) == {}
    nested = {"etag": "e", "size": 1, "sha256": "a" * 64, "frontmatter": {"name": "n", "description": "d"}}
    cur: dict[str, Any] = nested["frontmatter"]  # type: ignore[assignment]
    for _ in range(200):
        cur["x"] = {}
        cur = cur["x"]
    data = json.dumps({"schema": BOOK_SCHEMA, "files": {"deep": nested}}).encode()
    assert decode_book(data) == {}


# -- lying entries are rebuilt, honest ones kept -------------------------------------------------------


def test_a_lying_manifest_entry_is_rebuilt_from_its_skill_md_and_an_honest_sketch_is_kept() -> None:
    store = seeded(6)
    first = library(store)
    first.index()
    first.flush()
    doc = stored_manifest(store)
    entries = doc["skills"]
    for sid in entries:
        entries[sid]["metadata"]["description"] = "FROM THE MANIFEST"  # a cache may say anything it likes
    entries["skill-0"]["sketch"] = "s" * SKETCH_MAX_CHARS  # an honest sketch: kept
    entries["skill-1"]["sketch"] = "s" * (SKETCH_MAX_CHARS + 1)
    entries["skill-2"]["size"] = -1  # a value no object has
    entries["skill-3"]["warnings"] = ["w" * 100_000]
    entries["skill-4"]["etag"] = "e" * 10_000
    entries["skill-5"]["metadata"]["tags"] = ["t"] * 500_000  # inflated: over the entry's cap
    store.put_object(MANIFEST, json.dumps(doc))
    lib = library(store)
    got = {s.id: s.metadata.description for s in lib.index()}
    assert got["skill-0"] == "FROM THE MANIFEST"
    for i in range(1, 6):
        assert got[f"skill-{i}"] == f"Real description {i}", i
    lib.flush()
    rebuilt = stored_manifest(store)["skills"]
    assert rebuilt["skill-0"]["sketch"] == "s" * SKETCH_MAX_CHARS
    assert rebuilt["skill-1"].get("sketch") != "s" * (SKETCH_MAX_CHARS + 1)  # rebuilt from the body
    assert rebuilt["skill-2"]["size"] > 0


def test_a_book_record_with_a_field_it_has_not_or_over_its_caps_is_dropped() -> None:
    good = {"etag": "e", "size": 1, "sha256": "a" * 64}
    files = {
        "ok.md": good,
        "etag.md": {**good, "etag": "e" * 10_000},
        "problem.md": {**good, "problem": "p" * 100_000},
        "big.md": {**good, "frontmatter": {"name": "n", "description": "d", "tags": ["t"] * 1_000_000}},
        "k" * 2000: good,
    }
    assert list(decode_book(json.dumps({"schema": BOOK_SCHEMA, "files": files}).encode())) == ["ok.md"]
    # A field a record has not is refused before the book is decoded: the whole book reads as empty.
    files = {"ok.md": good, "extra.md": {**good, "owner": "bob"}}
    assert decode_book(json.dumps({"schema": BOOK_SCHEMA, "files": files}).encode()) == {}


def test_the_decoder_refuses_costly_or_deep_json_before_building_it() -> None:
    assert decode_cost(b"[1,2]") < decode_cost(b"[[],[]]") < decode_cost('[[],[],"é€"]'.encode())
    assert load_bounded(b"[" + b"{}," * 1000 + b"{}]", 1000) is None  # more values than 1 per 4 bytes
    assert load_bounded(b'{"a": [1, 2]}', 1000) == {"a": [1, 2]}
    assert load_bounded(b"[" * 100_000, 1 << 20, max_depth=1 << 20) is None  # past the recursion limit
    deep: list[Any] = []
    cur = deep
    for _ in range(100):
        cur.append([])
        cur = cur[0]
    assert weigh(deep, max_depth=50, limit=1 << 30) is None
    assert weigh(deep, max_depth=200, limit=1 << 30) is not None
    assert weigh(["x" * 1000], max_depth=5, limit=500) is None


def test_manifest_decoding_keeps_at_most_max_entries_and_never_raises_on_any_entry_shape() -> None:
    # An entry of a shape no entry has (not an object, a key that is not a string) makes the
    # manifest rebuilt whole; one of the right shape with a wrong value is dropped alone.
    shapes: list[Any] = [None, 1, "x", [], {"key": 1}, {"owner": "bob"}]
    for shape in shapes:
        assert decode_manifest(header(json.dumps({"s": shape}).encode()), PREFIX, "user", max_entries=10) is None
    values: list[Any] = [{"key": PREFIX + "a/SKILL.md", "etag": "e", "size": -1}, {"key": "elsewhere", "size": 1}]
    data = header(json.dumps({f"s{i}": value for i, value in enumerate(values)}).encode())
    manifest = decode_manifest(data, PREFIX, "user", max_entries=10)
    assert manifest is not None
    assert manifest.entries == {}
    assert manifest.dropped == len(values)


# -- caches of decoded data are bounded in bytes ------------------------------------------------------


def test_the_cache_of_decoded_indexes_is_bounded_in_bytes_not_only_in_count() -> None:
    store = MemoryObjectStore()
    users = [f"u{i}" for i in range(12)]
    for user in users:
        for i in range(20):
            fm = {"tags": [f"tag-{user}-{i}-{t}" for t in range(40)]}
            body = builders.skill_md(f"s{i}", "d" * 900, body="x", **fm).encode()
            store.put_object(f"users/{user}/skills/s{i}/SKILL.md", body)
    config = Config(layout=LAYOUT)
    catalog = SkillCatalog(store, limits=config.limits, manifest_key=LAYOUT.manifest_key, max_index_bytes=400_000)
    lib = SkillLibrary(store, config, catalog=catalog)
    for user in users:
        assert len(lib.index(tenant=Tenant(user_id=user))) == 20
        assert catalog.index_bytes <= 400_000 or len([u for u in users if catalog.cached(f"users/{u}/skills/")]) == 1
    held = [u for u in users if catalog.cached(f"users/{u}/skills/")]
    assert 1 <= len(held) < len(users)
    assert held[-1] == users[-1]  # the least recently used went first


def test_the_digest_books_held_are_bounded_in_bytes_not_only_in_count() -> None:
    store = MemoryObjectStore()
    libraries = [f"users/u{i}/skills/" for i in range(10)]
    for lib in libraries:
        records = {f"s/{n}.md": Record(f"e{n}", n, f"{n:064x}") for n in range(2000)}
        store.put_object(book_key(LAYOUT, lib), encode_book(records))
    books = DigestBooks(store, LAYOUT, max_held=64, max_bytes=2 * MiB)
    for lib in libraries:
        assert len(asyncio.run(books.arecall(lib))) == 2000
        assert books.held_bytes <= 2 * MiB or len(books.held) == 1
    assert 1 <= len(books.held) < len(libraries)
    assert books.held[-1] == libraries[-1]


# -- a run that meets one still answers ------------------------------------------------------------------


def test_an_agent_run_over_a_damaged_manifest_and_book_still_loads_and_reads_its_skill() -> None:
    store = seeded()
    store.put_object(MANIFEST, header(b"[" * 200_000))
    store.put_object(BOOK, inflated_book(4 * MiB))
    backend = S3Backend("memory", store=store)
    steps = [
        AIMessage(content="", tool_calls=[tool_call("cargar_habilidad", {"skill_path": "skill-1"})]),
        AIMessage(content="", tool_calls=[tool_call("read_file", {"file_path": "/skills/skill-1/notes.md"})]),
        AIMessage(content="done"),
    ]
    model = ScriptedChatModel(steps=steps)
    agent = create_skills_agent(model, backend)
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )
    texts = [m.text for m in out["messages"] if isinstance(m, ToolMessage)]
    assert texts[0].startswith("Skill 'skill-1' loaded")
    assert "Real instructions of skill-1" in model.system_prompts()[-1]
    assert "notes 1" in texts[1]
    assert out["messages"][-1].text == "done"


async def test_the_mcp_server_over_a_damaged_manifest_and_book_still_lists_gets_and_reads(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    for i in range(3):
        put(s3_client, bucket, f"{PREFIX}skill-{i}/SKILL.md", skill_md(f"skill-{i}", f"Real description {i}"))
        put(s3_client, bucket, f"{PREFIX}skill-{i}/notes.md", f"notes {i}".encode())
    put(s3_client, bucket, MANIFEST, header(b'{"skill-0":' + b"[" * 100_000 + b"}"))
    put(s3_client, bucket, BOOK, inflated_book(2 * MiB))
    async with stdio_session(bucket, moto_endpoint, "ana") as session:
        entries, _ = await list_all(session)
        assert sorted(e["uri"] for e in entries) == [f"skill://skill-{i}/SKILL.md" for i in range(3)]
        skill = await get_skill(session, "skill://skill-1/SKILL.md")
        assert skill["frontmatter"]["description"] == "Real description 1"
        assert await read_bytes(session, "skill://skill-1/notes.md") == b"notes 1"


def test_a_manifest_that_enables_a_disabled_skill_never_opens_its_files() -> None:
    store = seeded()
    store.put_object(
        f"{PREFIX}off/SKILL.md", builders.skill_md("off", "Off.", body="OFF BODY", enabled="false").encode()
    )
    store.put_object(f"{PREFIX}off/ref.md", b"CANARY-DISABLED")
    first = library(store)
    first.index()
    first.flush()
    doc = stored_manifest(store)
    doc["skills"]["off"]["metadata"]["enabled"] = True  # the real ETag, a fresh verification time: a perfect lie
    doc["verified_at"] = time.time()
    store.put_object(MANIFEST, json.dumps(doc))
    backend = S3Backend("memory", store=store)
    got = SYNC_RUN.invoke(
        {
            "op": lambda: {
                "read": backend.read("/skills/off/ref.md"),
                "ls": backend.ls("/skills/off"),
                "grep": backend.grep("CANARY"),
            },
            "loaded_skills": ["off"],  # a client wrote its state
        },
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t1"}},
    )["result"]
    assert got["read"].error == "File '/skills/off/ref.md' not found"
    assert "CANARY" not in repr(got)
    with pytest.raises(SkillError):
        SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda: ANA).open("off", "ref.md")
