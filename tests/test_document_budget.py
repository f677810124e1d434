"""Every `.s3skills/` document is decoded within a budget a tenant cannot multiply.

The finding this pins: eve wrote `users/eve/.s3skills/channels/production.json` as a valid
channel plus an extra field of 6.5 million three-letter strings (39 MB, under the old 64 MiB
cap). Each decode took ~900 MB; every concurrent `list_skills` decoded it again. Here:

- that channel, and one under every cap whose extra field holds the bulk, is refused before
  the bulk is built (peak memory of the decode, traced);
- each kind of document refuses a field it has not, at the top and in an entry, and each cap
  (bytes, values, items) holds at its limit and refuses one over it;
- concurrent readers of one (key, ETag) decode once, and a library's reader shares one GET;
- one tenant rewriting her channel before each read holds one decode slot at a time, and
  another tenant's document is decoded while hers wait.
"""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from s3skills.cli.channels import EVENT_DOCUMENT
from s3skills.config import Config
from s3skills.errors import SkillError
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.index.digests import BOOK_DOCUMENT, BOOK_SCHEMA
from s3skills.skills.index.manifest import MANIFEST_DOCUMENT, MANIFEST_SCHEMA
from s3skills.skills.usage_store import USAGE_DOCUMENT, USAGE_SCHEMA
from s3skills.skills.versions.approvals import APPROVAL_DOCUMENT, APPROVAL_SCHEMA
from s3skills.skills.versions.channels import (
    CHANNEL_DOCUMENT,
    CHANNEL_SCHEMA,
    MAX_CHANNEL_BYTES,
    MAX_CHANNEL_SKILLS,
    Channel,
    adecode_channel,
    aread_channel,
)
from s3skills.skills.versions.records import MAX_RECORD_FILES, RECORD_DOCUMENT, RECORD_SCHEMA
from s3skills.storage.decoder import DocumentDecoder, set_default_decoder
from s3skills.storage.documents import STR, WALK_ITEMS, DocumentKind, ListOf, MapOf, count_nodes, decode_document
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md
from s3skills.transfer.provenance import PULL_RECORD_DOCUMENT

LAYOUT = KeyLayout()
EVE_CHANNEL = LAYOUT.channels_prefix(LAYOUT.user_prefix("eve")) + "production.json"
BOB_CHANNEL = LAYOUT.channels_prefix(LAYOUT.user_prefix("bob")) + "production.json"
SHA = "a" * 64


@pytest.fixture
def decoder() -> Iterator[DocumentDecoder]:
    """A decoder of this test's own (its counters start at zero)."""
    fresh = DocumentDecoder()
    previous = set_default_decoder(fresh)
    try:
        yield fresh
    finally:
        set_default_decoder(previous)


def channel_doc(name: str = "production", **extra: Any) -> dict[str, Any]:
    return {"schema": CHANNEL_SCHEMA, "name": name, "updated": None, "actor": None, "skills": {}, **extra}


def thirty_nine_mb_channel() -> bytes:
    """The finding's channel: valid, with 6.5 million three-letter strings in an extra field."""
    head = json.dumps(channel_doc(), separators=(",", ":")).encode()[:-1]
    return head + b',"x":[' + b'"abc",' * 6_499_999 + b'"abc"]}'


def peak_of(call: Callable[[], object]) -> tuple[int, object]:
    """The peak memory (bytes, traced) of `call`, and what it returned or raised."""
    tracemalloc.start()
    try:
        try:
            got: object = call()
        except Exception as exc:
            got = exc
        return tracemalloc.get_traced_memory()[1], got
    finally:
        tracemalloc.stop()


# -- the finding: the bulk is never built ------------------------------------------------------------


def test_the_39_mb_channel_of_the_finding_is_refused_without_decoding_its_bulk() -> None:
    data = thirty_nine_mb_channel()
    assert len(data) > 38_000_000
    assert len(data) > MAX_CHANNEL_BYTES
    peak, got = peak_of(lambda: Channel.decode(data, name="production"))
    assert isinstance(got, SkillError)
    assert "bytes" in str(got)
    assert peak < 64 * 1024  # its size is read, nothing else: decoding it took ~900 MB


def test_a_channel_under_every_cap_whose_extra_field_holds_the_bulk_is_refused_before_it_is_built() -> None:
    head = json.dumps(channel_doc(), separators=(",", ":")).encode()[:-1]
    data = head + b',"x":[' + b'"abc",' * 299_999 + b'"abc"]}'
    assert len(data) < CHANNEL_DOCUMENT.max_bytes
    assert count_nodes(data) < CHANNEL_DOCUMENT.max_nodes
    peak, got = peak_of(lambda: Channel.decode(data, name="production"))
    assert isinstance(got, SkillError)
    assert "'x'" in str(got)
    # The text is decoded once (1 byte a character); 300,000 strings and their list take ~18 MB.
    assert peak < 1.5 * len(data)
    peak_loads, _ = peak_of(lambda: json.loads(data))
    assert peak_loads > 5 * len(data)  # what building the bulk costs, for scale


def test_an_unknown_field_inside_a_channel_entry_is_refused_before_its_value_is_built() -> None:
    pin = {"version_id": "v1", "etag": '"e"', "size": 1}
    entry = {"version": "x", "record": None, "files": {"SKILL.md": {**pin, "x": ["abc"] * 200_000}}}
    data = json.dumps(channel_doc(skills={"pdf": entry}), separators=(",", ":")).encode()
    peak, got = peak_of(lambda: decode_document(data, CHANNEL_DOCUMENT))
    assert isinstance(got, ValueError)
    assert "'x'" in str(got)
    assert peak < 1.5 * len(data)


# -- every kind: unknown fields, types, caps -------------------------------------------------------

RECORD_FILE = {"path": "SKILL.md", "version_id": "v1", "etag": '"e"', "size": 3}
MANIFEST_ENTRY = {"key": "users/ana/skills/pdf/SKILL.md", "etag": '"e"', "size": 3, "metadata": {"name": "pdf"}}
BOOK_RECORD = {"etag": '"e"', "size": 3, "sha256": SHA}

# kind, a valid document, (its field holding entries, one entry) or None, a string field to pad
KINDS: dict[str, tuple[DocumentKind, dict[str, Any], tuple[str, Any] | None, str]] = {
    "channel": (
        CHANNEL_DOCUMENT,
        channel_doc(),
        ("skills", {"version": "v", "record": None, "files": {"SKILL.md": {"etag": '"e"', "size": 1}}}),
        "updated",
    ),
    "version record": (
        RECORD_DOCUMENT,
        {"schema": RECORD_SCHEMA, "id": "i", "skill": "pdf", "content": "c", "time": "t", "actor": "a", "command": "c"},
        ("files", RECORD_FILE),
        "actor",
    ),
    "approval": (
        APPROVAL_DOCUMENT,
        {"schema": APPROVAL_SCHEMA, "skill": "pdf", "digest": SHA, "scripts": ["run.py"], "actor": "a", "time": "t"},
        None,
        "actor",
    ),
    "manifest": (
        MANIFEST_DOCUMENT,
        {"schema": MANIFEST_SCHEMA, "prefix": "users/ana/skills/", "built_at": 1.0, "verified_at": None, "skills": {}},
        ("skills", MANIFEST_ENTRY),
        "prefix",
    ),
    "digest book": (BOOK_DOCUMENT, {"schema": BOOK_SCHEMA, "files": {}}, ("files", BOOK_RECORD), "schema"),
    "channel event": (
        EVENT_DOCUMENT,
        {"schema": "s3skills.event/1", "id": "i", "action": "channel set", "actor": "a", "channel": "production"},
        None,
        "actor",
    ),
    "usage document": (
        USAGE_DOCUMENT,
        {"schema": USAGE_SCHEMA, "day": "2026-12-02", "writer": "w", "skills": {}},
        ("skills", {"loads": 3, "failures": 1}),
        "writer",
    ),
    "pull record": (
        PULL_RECORD_DOCUMENT,
        {"version": 1, "skills": {}},
        ("skills", {"etag": '"e"', "prefix": "users/ana/skills/", "bucket": "b"}),
        "",
    ),
}


def with_entry(doc: dict[str, Any], entries: tuple[str, Any] | None) -> dict[str, Any]:
    if entries is None:
        return doc
    field, entry = entries
    return {**doc, field: [entry] if isinstance(doc.get(field, []), list) else {"one": entry}}


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_decodes_what_its_writers_write_and_refuses_a_field_it_has_not(name: str) -> None:
    kind, doc, entries, _ = KINDS[name]
    full = with_entry(doc, entries)
    assert decode_document(json.dumps(full).encode(), kind) == full
    with pytest.raises(ValueError, match="'owner'"):
        decode_document(json.dumps({**full, "owner": ["abc"] * 1000}).encode(), kind)
    if entries is not None:
        field, entry = entries
        with pytest.raises(ValueError, match="'owner'"):
            decode_document(json.dumps(with_entry(doc, (field, {**entry, "owner": "bob"}))).encode(), kind)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_refuses_a_value_of_the_wrong_type_before_decoding_it(name: str) -> None:
    kind, doc, _, _ = KINDS[name]
    first = next(iter(doc))
    wrong = 7 if isinstance(doc[first], str) else "seven"
    with pytest.raises(ValueError, match=r"is not|none of"):
        decode_document(json.dumps({**doc, first: wrong}).encode(), kind)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_is_decoded_at_its_byte_cap_and_refused_one_byte_over(name: str) -> None:
    kind, doc, _, _ = KINDS[name]
    data = json.dumps(doc).encode()
    at_cap = data + b" " * (kind.max_bytes - len(data))
    assert decode_document(at_cap, kind) == doc
    with pytest.raises(ValueError, match="bytes"):
        decode_document(at_cap + b" ", kind)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_is_decoded_at_its_value_cap_and_refused_one_value_over(name: str) -> None:
    kind, doc, _, field = KINDS[name]

    def padded(n: int) -> dict[str, Any]:
        if not field:  # no string field: a pull record pads an entry's folder name
            return {**doc, "skills": {"," * n: {"etag": "e", "prefix": "p", "bucket": "b"}}}
        return {**doc, field: "," * n}

    base = count_nodes(json.dumps(padded(0)).encode())
    at_cap = json.dumps(padded(kind.max_nodes - base)).encode()
    assert count_nodes(at_cap) == kind.max_nodes
    assert decode_document(at_cap, kind) == padded(kind.max_nodes - base)
    with pytest.raises(ValueError, match="values"):
        decode_document(json.dumps(padded(kind.max_nodes - base + 1)).encode(), kind)


@pytest.mark.parametrize("shape", ["map", "list", "map walked", "list walked"])
def test_a_collection_holds_at_most_its_item_cap_whether_matched_or_walked(shape: str) -> None:
    cap = 3 if "walked" not in shape else WALK_ITEMS + 1  # over WALK_ITEMS: read item by item
    kind = DocumentKind("test", MapOf(STR, cap) if "map" in shape else ListOf(STR, cap), 1 << 20, 1 << 20)

    def doc(n: int) -> Any:
        return {f"k{i}": "v" for i in range(n)} if "map" in shape else ["v"] * n

    assert decode_document(json.dumps(doc(cap)).encode(), kind) == doc(cap)
    with pytest.raises(ValueError, match=f"more than {cap}|not an? "):
        decode_document(json.dumps(doc(cap + 1)).encode(), kind)


def test_the_item_caps_of_each_kind_are_those_its_readers_check() -> None:
    channel_skills = CHANNEL_DOCUMENT.shape.fields["skills"]  # type: ignore[union-attr]
    assert isinstance(channel_skills, MapOf)
    assert channel_skills.max_items == MAX_CHANNEL_SKILLS
    scripts = APPROVAL_DOCUMENT.shape.fields["scripts"]  # type: ignore[union-attr]
    assert isinstance(scripts, ListOf)
    assert scripts.max_items == 1000
    files = RECORD_DOCUMENT.shape.fields["files"]  # type: ignore[union-attr]
    assert isinstance(files, ListOf)
    assert files.max_items == MAX_RECORD_FILES


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b'{"schema":"s3skills.channel/1",}', b'{"schema":"a","schema":"b"}', b"\xff", b"[" * 100_000, b"{} x"],
)
def test_damaged_documents_are_refused_with_a_reason_and_never_raise_anything_else(data: bytes) -> None:
    for kind, *_ in KINDS.values():
        with pytest.raises(ValueError, match=r"the (document|\w+)"):
            decode_document(data, kind)


# -- single flight, results kept, fairness ---------------------------------------------------------------


async def test_concurrent_readers_of_one_channel_version_decode_it_once(decoder: DocumentDecoder) -> None:
    store = MemoryObjectStore()
    await store.aput(EVE_CHANNEL, json.dumps(channel_doc()).encode())
    prefix = LAYOUT.channels_prefix(LAYOUT.user_prefix("eve"))
    channels = await asyncio.gather(*(aread_channel(store, prefix, "production") for _ in range(20)))
    assert decoder.decodes == 1
    assert decoder.joined + decoder.hits == 19
    # Each reader has a channel of its own: changing one changes no other.
    channels[0].skills["x"] = channels[1].skills.get("x")  # type: ignore[assignment]
    assert "x" not in channels[1].skills
    await aread_channel(store, prefix, "production")
    assert decoder.decodes == 1  # kept by (key, ETag)


async def test_a_refused_channel_is_not_decoded_again_at_the_same_etag(decoder: DocumentDecoder) -> None:
    data = json.dumps(channel_doc(x=["abc"] * 10)).encode()
    for _ in range(5):
        with pytest.raises(SkillError, match="'x'"):
            await adecode_channel(data, key=EVE_CHANNEL, etag='"1"', name="production")
    assert decoder.decodes == 1
    assert decoder.hits == 4


async def test_six_concurrent_indexes_on_a_channel_share_its_reads_and_decode_it_once(decoder: DocumentDecoder) -> None:
    store = MemoryObjectStore()
    store.put_object("users/eve/skills/pdf/SKILL.md", skill_md("pdf", "PDF."))
    head = json.dumps(channel_doc(), separators=(",", ":")).encode()[:-1]
    store.put_object(EVE_CHANNEL, head + b',"x":[' + b'"abc",' * 99_999 + b'"abc"]}')
    channel_gets = 0
    get = store.aget

    async def counted(key: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal channel_gets
        channel_gets += key == EVE_CHANNEL
        return await get(key, *args, **kwargs)

    store.aget = counted  # type: ignore[method-assign]
    library = SkillLibrary(store, Config(channel="production"))
    eve = Tenant("eve", "t1")
    await asyncio.gather(*(library.aindex(tenant=eve) for _ in range(6)))
    assert decoder.decodes == 1  # every read of that version after the first is shared or kept
    assert channel_gets < 6  # a read in flight is shared (before: one 39 MB GET per caller)


async def test_one_tenant_rewriting_her_channel_holds_one_decode_slot_and_others_go_first(
    decoder: DocumentDecoder,
) -> None:
    rewrites = 12
    eve_done: list[int] = []
    lock = threading.Lock()
    bulk: dict[str, Any] = {f"s{i:05d}": {"version": "v", "record": None, "files": {}} for i in range(2_000)}

    async def eve(n: int) -> None:
        data = json.dumps(channel_doc(skills=bulk, actor=f"eve {n}")).encode()  # one byte differs each time
        with pytest.raises(SkillError):  # its entries are not valid: refused after a whole decode
            await adecode_channel(data, key=EVE_CHANNEL, etag=f'"{n}"', name="production")
        with lock:
            eve_done.append(n)

    async def bob() -> int:
        await asyncio.sleep(0)  # after eve's rewrites are all queued
        channel = await adecode_channel(
            json.dumps(channel_doc()).encode(), key=BOB_CHANNEL, etag='"b"', name="production"
        )
        assert channel.skills == {}
        with lock:
            return len(eve_done)

    *_, eve_before_bob = await asyncio.gather(*(eve(n) for n in range(rewrites)), bob())
    assert isinstance(eve_before_bob, int)
    assert decoder.decodes == rewrites + 1
    assert decoder.peak_by_library["users/eve"] == 1
    assert decoder.peak_active <= decoder.workers
    assert eve_before_bob < rewrites - 1  # bob was not queued behind eve's documents


@pytest.mark.parametrize("strings", [100_000, 3_000_000], ids=["damaged under the caps", "over the byte cap"])
async def test_a_refused_channel_is_read_again_only_as_a_304_while_it_is_unchanged(
    decoder: DocumentDecoder, strings: int
) -> None:
    store = MemoryObjectStore()
    store.put_object("users/eve/skills/pdf/SKILL.md", skill_md("pdf", "PDF."))
    head = json.dumps(channel_doc(), separators=(",", ":")).encode()[:-1]
    store.put_object(EVE_CHANNEL, head + b',"x":[' + b'"abc",' * (strings - 1) + b'"abc"]}')
    outcomes: list[str] = []
    get = store.aget

    async def counted(key: str, *args: Any, **kwargs: Any) -> Any:
        try:
            got = await get(key, *args, **kwargs)
        except Exception as exc:
            if key == EVE_CHANNEL:
                outcomes.append(type(exc).__name__)
            raise
        if key == EVE_CHANNEL:
            outcomes.append("body")
        return got

    store.aget = counted  # type: ignore[method-assign]
    library = SkillLibrary(store, Config(channel="production"))
    for _ in range(5):
        await library.aindex(tenant=Tenant("eve", "t1"))
    assert outcomes[0] == ("body" if strings < 1_000_000 else "FileTooLarge")
    assert outcomes[1:] == ["NotModified"] * 4  # its bytes are not sent again, nor decoded
    assert decoder.decodes == (1 if strings < 1_000_000 else 0)
