"""Usage the agents keep in the library's bucket (`s3skills.skills.usage_store`), and the console
reading it (issue 38). Fast: the in-memory store, and the moto fixture where the agent's tool,
the MCP server and the console are driven for real.

What is pinned: a load counts in the library it came from, with no user id; one PUT per library
with new counts per flush; a write never fails or blocks a load; memory is bounded; a hostile
document is refused with its reason and the others still count; the console's read costs one
LIST per day and one GET per new document, and fewer when it is warm (a test that fails with the
cache off); one library's usage never shows in another's console.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from console_harness import READER, OrgConsole, write_skill
from langchain_core.messages import AIMessage, ToolMessage

from s3skills import S3Backend, create_skills_agent
from s3skills.config import Config
from s3skills.console.usage import sparkline
from s3skills.errors import AccessDenied, StoreError
from s3skills.layout import KeyLayout
from s3skills.serve.mcp import aclose_server, library_source
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary, usage_store
from s3skills.skills.usage_store import USAGE_SCHEMA, UsageReader, UsageRecorder
from s3skills.storage import RequestCounter
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md
from s3skills.testing.scripted import ScriptedChatModel, tool_call

TODAY = date(2026, 12, 2)
ORG, ANA = "shared/org/skills/", "users/ana/skills/"
ORG_USAGE, ANA_USAGE = "shared/org/.s3skills/usage/", "users/ana/.s3skills/usage/"


def arranged(store: MemoryObjectStore) -> MemoryObjectStore:
    store.put_object(ORG + "pdf/SKILL.md", skill_md("pdf", "Fill PDF forms."))
    store.put_object(ORG + "docx/SKILL.md", skill_md("docx", "Edit Word files."))
    store.put_object(ANA + "notes/SKILL.md", skill_md("notes", "Ana's notes."))
    store.put_object("users/bob/skills/bobs/SKILL.md", skill_md("bobs", "Bob's own."))
    return store


def library_for(store: MemoryObjectStore, user: str = "ana", **config: Any) -> SkillLibrary:
    return SkillLibrary(store, Config(shared_library="org", **config), tenant=lambda: Tenant(user_id=user))


async def warm(library: SkillLibrary) -> None:
    """The index read and its manifest written, as in an agent that has answered a turn."""
    await library.aindex()
    await library.aflush()


def documents(store: MemoryObjectStore, prefix: str) -> dict[str, dict[str, Any]]:
    return {k: json.loads(store._get(k).data) for k in store.keys() if k.startswith(prefix)}


def write_doc(store: MemoryObjectStore, day: date, writer: str, skills: dict[str, Any], **extra: Any) -> str:
    doc = {"schema": USAGE_SCHEMA, "day": day.isoformat(), "writer": writer, "skills": skills, **extra}
    return store.put_object(f"{ORG_USAGE}{day.isoformat()}/{writer}.json", json.dumps(doc))


# -- counting and writing ------------------------------------------------------------------------


async def test_a_load_counts_in_the_library_it_came_from_and_one_flush_writes_one_document_per_library() -> None:
    store = arranged(MemoryObjectStore())
    library = library_for(store)
    await warm(library)
    counter = RequestCounter()
    store.add_request_hook(counter)
    for skill, outcome in [("pdf", "ok"), ("pdf", "ok"), ("pdf", "error"), ("notes", "ok"), ("bobs", "ok")]:
        library.count_use(skill, "skill_load", outcome)
    library.count_use("pdf", "script_run", "ok")
    library.count_use("no-such-skill", "skill_load", "error")  # in no library: not counted
    assert counter.counts == {}  # counting costs no request
    await library.aflush()
    assert counter.counts == {"PutObject": 2}  # the shared library's and ana's
    org, ana = documents(store, ORG_USAGE), documents(store, ANA_USAGE)
    ((org_key, org_doc),) = org.items()
    assert org_key == f"{ORG_USAGE}{datetime.now(UTC).date().isoformat()}/{library.usage.writer}.json"
    assert org_doc["skills"] == {"pdf": {"loads": 2, "failures": 1, "script_runs": 1}}
    assert next(iter(ana.values()))["skills"] == {"notes": {"loads": 1}}
    assert not [k for k in store.keys() if k.startswith("users/bob/.s3skills/")]  # bob's skill: not ana's to count
    for data in (json.dumps(org_doc), json.dumps(ana)):
        assert "ana" not in data.replace(ANA_USAGE, "")  # no user id stored, only counts per skill
    counter.reset()
    await library.aflush()
    assert counter.counts == {}  # nothing new: nothing written
    library.count_use("pdf", "skill_load", "ok")
    await library.aflush()
    assert counter.counts == {"PutObject": 1}  # only the library with new counts
    assert documents(store, ORG_USAGE)[org_key]["skills"]["pdf"]["loads"] == 3  # cumulative, overwritten


async def test_a_user_skill_overriding_a_shared_one_counts_in_the_users_library() -> None:
    store = arranged(MemoryObjectStore())
    store.put_object(ANA + "pdf/SKILL.md", skill_md("pdf", "Ana's own PDF skill."))
    library = library_for(store)
    await warm(library)
    library.count_use("pdf", "skill_load", "ok")
    await library.aflush()
    assert not documents(store, ORG_USAGE)
    assert next(iter(documents(store, ANA_USAGE).values()))["skills"] == {"pdf": {"loads": 1}}


async def test_counts_are_written_in_the_background_every_interval() -> None:
    store = arranged(MemoryObjectStore())
    library = library_for(store, usage_flush_interval=0.01)
    await warm(library)
    library.count_use("pdf", "skill_load", "ok")
    for _ in range(500):  # no flush called: the recorder's own timer writes (no wall-clock assertion)
        if documents(store, ORG_USAGE):
            break
        await asyncio.sleep(0.01)
    assert next(iter(documents(store, ORG_USAGE).values()))["skills"] == {"pdf": {"loads": 1}}


async def test_read_only_credentials_never_fail_a_load_and_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    store = arranged(MemoryObjectStore())
    library = library_for(store)
    await warm(library)
    library.count_use("pdf", "skill_load", "ok")
    store.fail_next("PutObject", AccessDenied("PutObject", "shared/org/.s3skills/usage/"))
    with caplog.at_level(logging.WARNING, logger="s3skills.skills.usage_store"):
        await library.aflush()  # never raises
        library.count_use("pdf", "skill_load", "ok")  # that library is not counted any more
        await library.aflush()
    assert [r.getMessage() for r in caplog.records if "read-only" in r.getMessage()].__len__() == 1
    assert not documents(store, ORG_USAGE)
    assert library.usage.writes == 0


async def test_a_failed_write_is_tried_again_at_the_next_flush_with_every_count() -> None:
    store = arranged(MemoryObjectStore())
    library = library_for(store)
    await warm(library)
    library.count_use("pdf", "skill_load", "ok")
    store.fail_next("PutObject", StoreError("PutObject", "slow down"))
    await library.aflush()
    assert not documents(store, ORG_USAGE)
    library.count_use("pdf", "skill_load", "ok")
    await library.aflush()
    assert next(iter(documents(store, ORG_USAGE).values()))["skills"] == {"pdf": {"loads": 2}}


async def test_memory_is_bounded_and_a_past_day_is_forgotten_once_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage_store, "MAX_PENDING", 2)
    store = MemoryObjectStore()
    days = [TODAY]
    recorder = UsageRecorder(store, KeyLayout(), clock=lambda: days[0])
    for skill in ("a", "b", "c", "d"):
        recorder.count(ORG, skill, "skill_load", "ok")
    assert recorder.dropped == 2  # a third and fourth skill-day are not kept
    days[0] = TODAY + timedelta(days=1)
    await recorder.aflush()  # yesterday's last write: final, forgotten
    recorder.count(ORG, "c", "skill_load", "ok")
    assert recorder.dropped == 2  # room again
    await recorder.aflush()
    written = documents(store, ORG_USAGE)
    assert {k.split("/")[-2] for k in written} == {TODAY.isoformat(), days[0].isoformat()}
    assert written[f"{ORG_USAGE}{TODAY.isoformat()}/{recorder.writer}.json"]["skills"] == {
        "a": {"loads": 1},
        "b": {"loads": 1},
    }


async def test_the_opt_out_counts_and_writes_nothing() -> None:
    store = arranged(MemoryObjectStore())
    library = library_for(store, usage_store=False)
    await warm(library)
    library.count_use("pdf", "skill_load", "ok")
    await library.aflush()
    assert not [k for k in store.keys() if "/usage/" in k]


def test_two_recorders_never_write_one_key() -> None:
    store = MemoryObjectStore()
    assert UsageRecorder(store, KeyLayout()).writer != UsageRecorder(store, KeyLayout()).writer


# -- the agents' entry points ------------------------------------------------------------------


def test_cargar_habilidad_counts_the_load_in_the_shared_library(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    s3_client.put_object(Bucket=bucket, Key=ORG + "pdf/SKILL.md", Body=skill_md("pdf", "Fill PDF forms.").encode())
    backend = S3Backend(bucket, endpoint_url=moto_endpoint, shared_prefix="org")
    try:
        steps = [AIMessage(content="", tool_calls=[tool_call("cargar_habilidad", {"skill_path": "pdf"})])]
        agent = create_skills_agent(ScriptedChatModel(steps=steps), backend, system_prompt="Eres un asistente.")
        out = agent.invoke(
            {"messages": [{"role": "user", "content": "rellena el PDF"}]},
            context={"user_id": "ana"},
            config={"configurable": {"thread_id": "t1"}},
        )
        assert "loaded" in next(str(m.content) for m in out["messages"] if isinstance(m, ToolMessage))
        backend.skills.flush()
    finally:
        backend.close()
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=ORG_USAGE).get("Contents", [])]
    (key,) = keys
    body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert json.loads(body)["skills"] == {"pdf": {"loads": 1}}
    assert b"ana" not in body
    assert b"t1" not in body


async def test_the_mcp_servers_load_skill_counts_loads_and_failed_loads(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    from mcp.client.client import Client

    s3_client.put_object(Bucket=bucket, Key=ANA + "notes/SKILL.md", Body=skill_md("notes", "Notes.").encode())
    skills = SkillsServer(library_source(bucket, endpoint_url=moto_endpoint), user_id="ana", tools=True)
    try:
        async with Client(skills.server, mode="legacy") as client:
            assert not (await client.call_tool("load_skill", {"name": "notes"})).is_error
            assert (await client.call_tool("load_skill", {"name": "nope"})).is_error
    finally:
        await aclose_server(skills)  # writes the counts not yet written
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=ANA_USAGE).get("Contents", [])]
    (key,) = keys
    doc = json.loads(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert doc["skills"] == {"notes": {"loads": 1}}  # "nope" is in no library: not counted anywhere


async def test_a_host_reading_a_skill_md_through_the_extension_counts_a_load_and_other_files_do_not(
    bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    from mcp.client.client import Client

    s3_client.put_object(Bucket=bucket, Key=ANA + "notes/SKILL.md", Body=skill_md("notes", "Notes.").encode())
    s3_client.put_object(Bucket=bucket, Key=ANA + "notes/references/a.md", Body=b"a\n")
    skills = SkillsServer(library_source(bucket, endpoint_url=moto_endpoint), user_id="ana")
    try:
        async with Client(skills.server, mode="legacy") as client:
            for _ in range(2):
                await client.read_resource("skill://notes/SKILL.md")
            await client.read_resource("skill://notes/references/a.md")
            with pytest.raises(Exception, match="No resource"):
                await client.read_resource("skill://nope/SKILL.md")
    finally:
        await aclose_server(skills)
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=ANA_USAGE).get("Contents", [])]
    (key,) = keys
    doc = json.loads(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert doc["skills"] == {"notes": {"loads": 2}}  # each SKILL.md read; a reference is not a load


# -- reading: hostile documents ------------------------------------------------------------------

HEAD = b'{"schema":"s3skills.usage/1","day":"D","writer":"W",'
HOSTILE: dict[str, tuple[bytes, str]] = {
    "huge": (b'{"schema":"' + b"x" * (usage_store.MAX_USAGE_BYTES + 1) + b'"}', "bytes; the limit is"),
    "deep": (HEAD + b'"skills":{"a":{"loads":' + b"[" * 50_000 + b"]" * 50_000 + b"}}}", "not an integer"),
    "too many values": (b"[" * 300_000 + b"]" * 300_000, "holds up to"),
    "wrong type": (HEAD + b'"skills":{"a":{"loads":"7"}}}', "not an integer"),
    "a float": (HEAD + b'"skills":{"a":{"loads":1.5}}}', "not an integer"),
    "negative": (HEAD + b'"skills":{"a":{"loads":-1}}}', "from 0 to"),
    "not utf-8": (HEAD + b'"skills":{"\xff":{"loads":1}}}', "not UTF-8"),
    "unknown field": (HEAD + b'"user":"ana","skills":{}}', "'user'"),
    "unknown count": (HEAD + b'"skills":{"a":{"users":3}}}', "'users'"),
    "bad skill id": (HEAD + b'"skills":{"../bob":{"loads":1}}}', "not a skill id"),
    "other day": (b'{"schema":"s3skills.usage/1","day":"2001-01-01","writer":"W","skills":{}}', "another day"),
    "no schema": (b'{"day":"D","writer":"W","skills":{}}', "not a usage document"),
    "not json": (b"{nope", "not JSON"),
}


def million_entries() -> bytes:
    return (
        b'{"schema":"s3skills.usage/1","day":"D","writer":"W","skills":{'
        + b",".join(b'"s%d":{"loads":1}' % i for i in range(1_000_000))
        + b"}}"
    )


@pytest.mark.parametrize("case", [*HOSTILE, "a million entries"])
async def test_a_hostile_usage_document_is_refused_with_its_reason_and_the_others_still_count(case: str) -> None:
    store = MemoryObjectStore()
    writer = "badbadbadbad0001"
    data, reason = HOSTILE[case] if case != "a million entries" else (million_entries(), "bytes; the limit is")
    data = data.replace(b'"day":"D"', b'"day":"%s"' % TODAY.isoformat().encode()).replace(
        b'"W"', b'"%s"' % writer.encode()
    )
    store.put_object(f"{ORG_USAGE}{TODAY.isoformat()}/{writer}.json", data)
    write_doc(store, TODAY, "good000000000001", {"pdf": {"loads": 3}})
    usage = await UsageReader(store).aread(ORG_USAGE, TODAY)
    assert usage.loads == {"pdf": [0] * 29 + [3]}
    (refused,) = usage.refused
    assert refused.startswith(f"{ORG_USAGE}{TODAY.isoformat()}/{writer}.json: ")
    assert reason in refused


async def test_a_document_over_the_size_cap_is_refused_from_its_listing_without_a_get() -> None:
    store = MemoryObjectStore()
    store.put_object(f"{ORG_USAGE}{TODAY.isoformat()}/huge00000000001.json", HOSTILE["huge"][0])
    counter = RequestCounter()
    store.add_request_hook(counter)
    usage = await UsageReader(store).aread(ORG_USAGE, TODAY)
    assert "GetObject" not in counter.counts
    assert "the limit is" in usage.refused[0]


async def test_keys_that_are_not_a_writers_document_are_refused_and_keys_of_other_libraries_never_read() -> None:
    store = MemoryObjectStore()
    day = f"{ORG_USAGE}{TODAY.isoformat()}/"
    store.put_object(day + "notes.txt", "x")
    store.put_object(day + "nested/abcdefab12345678.json", "{}")
    store.put_object(f"shared/orgx/.s3skills/usage/{TODAY.isoformat()}/abcdefab12345678.json", "{}")
    store.put_object(f"{ANA_USAGE}{TODAY.isoformat()}/abcdefab12345678.json", "{}")
    usage = await UsageReader(store).aread(ORG_USAGE, TODAY)
    assert sorted(r.split(":")[0] for r in usage.refused) == [day + "nested/abcdefab12345678.json", day + "notes.txt"]
    assert usage.loads == {}


async def test_a_window_of_documents_over_the_read_budget_keeps_the_newest_and_gets_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryObjectStore()
    for n in range(4):
        write_doc(store, TODAY - timedelta(days=n), f"writer0000000{n:03d}", {"pdf": {"loads": 1}})
    size = len(store._get(f"{ORG_USAGE}{TODAY.isoformat()}/writer0000000000.json").data)
    monkeypatch.setattr(usage_store, "MAX_READ_BYTES", 2 * size)
    counter = RequestCounter()
    store.add_request_hook(counter)
    usage = await UsageReader(store).aread(ORG_USAGE, TODAY)
    assert counter.counts["GetObject"] == 2
    assert usage.loads == {"pdf": [0] * 28 + [1, 1]}  # today and yesterday
    assert len(usage.refused) == 2
    assert all("not read, the window's documents are over" in r for r in usage.refused)


# -- reading: what it costs ------------------------------------------------------------------------


async def test_a_warm_read_lists_today_and_yesterday_only_and_gets_only_changed_documents() -> None:
    store = MemoryObjectStore()
    for n in range(3):
        write_doc(store, TODAY - timedelta(days=n * 5), f"writer0000000{n:03d}", {"pdf": {"loads": n + 1}})
    counter = RequestCounter()
    store.add_request_hook(counter)
    reader = UsageReader(store)
    first = await reader.aread(ORG_USAGE, TODAY)
    assert counter.counts == {"ListObjectsV2": 30, "GetObject": 3}  # one LIST a day, one GET a document
    assert sum(first.loads["pdf"]) == 1 + 2 + 3
    counter.reset()
    again = await reader.aread(ORG_USAGE, TODAY)
    # Days older than yesterday are final: their listings and documents are kept by (key, ETag).
    assert counter.counts == {"ListObjectsV2": 2}
    assert again.loads == first.loads
    write_doc(store, TODAY, "writer0000000000", {"pdf": {"loads": 10}})  # today's writer flushed again
    counter.reset()
    changed = await reader.aread(ORG_USAGE, TODAY)
    assert counter.counts == {"ListObjectsV2": 2, "GetObject": 1}
    assert changed.loads["pdf"][-1] == 10
    # The control: without the cache every read costs what the first did.
    uncached = UsageReader(store, cache=False)
    await uncached.aread(ORG_USAGE, TODAY)
    counter.reset()
    await uncached.aread(ORG_USAGE, TODAY)
    assert counter.counts == {"ListObjectsV2": 30, "GetObject": 3}


# -- the console -----------------------------------------------------------------------------------


@pytest.fixture
def org(moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> OrgConsole:
    o = OrgConsole(moto_endpoint, bucket, tmp_path, capsys)
    write_skill(o.src, "pdf", skill_md("pdf", "Fill PDF forms."))
    write_skill(o.src, "docx", skill_md("docx", "Edit Word files."))
    o.push()
    return o


def agents_load(org: OrgConsole, user: str, *skills: str) -> None:
    """Loads counted by an agent process of `user` (its own library over org's), then written."""
    library = SkillLibrary(org.source.store, Config(shared_library="org"), tenant=lambda: Tenant(user_id=user))
    library.index()
    for skill in skills:
        library.count_use(skill, "skill_load", "ok")
    library.flush()


def test_the_library_page_plots_the_loads_the_agents_counted_with_the_total_as_text(org: OrgConsole) -> None:
    agents_load(org, "ana", "pdf", "pdf", "pdf")
    agents_load(org, "bob", "pdf")  # another replica, another writer: added up
    page = org.client(READER).get("/").text
    row = page.split('skill?id=pdf"')[1].split("</tr>")[0]
    assert '<span class="total">4</span>' in row
    assert '<svg class="spark"' in row
    docx = page.split('skill?id=docx"')[1].split("</tr>")[0]
    assert '<span class="total">0</span>' in docx
    usage = org.client(READER).get("/usage").text
    assert "docx" in usage.split("Never loaded")[1]
    assert "pdf" not in usage.split("Never loaded")[1].split("</aside>")[0]


def test_the_consoles_usage_read_costs_a_list_per_day_then_only_today_and_yesterday(org: OrgConsole) -> None:
    agents_load(org, "ana", "pdf")
    counter = RequestCounter()
    org.source.store.add_request_hook(counter)
    org.source.usage_ttl = 0  # asked again on every view
    today = datetime.now(UTC).date()
    assert sum(org.source.stored_usage(today).loads["pdf"]) == 1
    assert counter.counts == {"ListObjectsV2": 30, "GetObject": 1}
    counter.reset()
    org.source.stored_usage(today)
    assert counter.counts == {"ListObjectsV2": 2}  # the document is kept by its ETag


def test_the_usage_page_costs_the_index_and_the_usage_read(org: OrgConsole) -> None:
    agents_load(org, "ana", "pdf")
    agents_load(org, "bob", "pdf")
    client = org.client(READER)
    client.get("/")  # the index read once
    org.source.usage_ttl = 0
    org.source.usage_reader = None  # nothing of the usage kept yet
    counter = RequestCounter()
    org.source.store.add_request_hook(counter)
    assert client.get("/usage").status_code == 200
    # The index (1 conditional GET), 1 LIST per day and the 2 writers' documents of today.
    assert counter.counts == {"GetObject": 1 + 2, "ListObjectsV2": 30}
    counter.reset()
    assert client.get("/usage").status_code == 200
    assert counter.counts == {"GetObject": 1, "ListObjectsV2": 2}  # the documents are kept by ETag
    org.source.usage_ttl = 30.0
    counter.reset()
    assert client.get("/usage").status_code == 200
    assert counter.counts == {"GetObject": 1}  # within usage_ttl the usage read is kept: the index only


def test_one_librarys_usage_never_shows_in_another_librarys_console(org: OrgConsole, s3_client: Any) -> None:
    s3_client.put_object(Bucket=org.base[1], Key=ANA + "pdf/SKILL.md", Body=skill_md("pdf", "Ana's PDF.").encode())
    agents_load(org, "ana", "pdf", "pdf")  # ana's own pdf overrides org's: counted in ana's library
    page = org.client(READER).get("/").text
    assert '<span class="total">0</span>' in page.split('skill?id=pdf"')[1].split("</tr>")[0]
    assert not org.source.stored_usage(datetime.now(UTC).date()).loads


def test_the_sparkline_holds_numbers_only() -> None:
    svg = str(sparkline([0, 3, 1_000_000, -5] + [0] * 26))
    assert re.fullmatch(r'<svg [A-Za-z0-9 ="\-.]+><polyline [A-Za-z0-9 ="\-.,]+/></svg>', svg), svg
    assert str(sparkline(None)).count(",") == 30


def test_the_mcp_servers_no_usage_store_option_turns_the_counts_off(bucket: str, moto_endpoint: str) -> None:
    from s3skills.serve.mcp import _parser, _source

    base = ["--bucket", bucket, "--endpoint-url", moto_endpoint, "--user", "ana"]
    on, *_ = _source(_parser().parse_args(base))
    off, *_ = _source(_parser().parse_args([*base, "--no-usage-store"]))
    assert on.library.usage.enabled
    assert not off.library.usage.enabled
