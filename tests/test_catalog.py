"""The skill index (SkillLibrary over SkillCatalog): discovery, layers, problems, request counts."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from s3skills import S3Backend, SkillError
from s3skills._loop import run_sync
from s3skills.config import Config, Limits
from s3skills.layout import KeyLayout
from s3skills.skills import SkillCatalog, SkillLibrary
from s3skills.storage import RequestCounter
from s3skills.storage import S3ObjectStore as ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, skill_md

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout
ALICE = Tenant(user_id="alice")
BOB = Tenant(user_id="bob")


def library(
    store: ObjectStore,
    *,
    shared: str | None = None,
    ttl: float | None = None,
    concurrency: int = 32,
    head_bytes: int = 8192,
    clock: Any = None,
) -> SkillLibrary:
    """A library in the seeds' layout, with an explicit catalog when the test tunes it."""
    config = Config(layout=SEEDS, shared_library=shared, catalog_ttl=ttl, limits=Limits(concurrency=concurrency))
    extra = {"clock": clock} if clock is not None else {}
    catalog = SkillCatalog(store, limits=config.limits, ttl=ttl, head_bytes=head_bytes, **extra)
    return SkillLibrary(store, config, catalog=catalog)


def put(s3_client: Any, bucket: str, key: str, body: bytes | str) -> None:
    s3_client.put_object(Bucket=bucket, Key=key, Body=body)


@pytest.fixture
def store(moto_endpoint: str, bucket: str) -> ObjectStore:
    return ObjectStore(bucket, endpoint_url=moto_endpoint)


@pytest.fixture
def counter(store: ObjectStore) -> RequestCounter:
    counter = RequestCounter()
    store.add_request_hook(counter)
    return counter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_discovers_skills_one_and_two_levels_below_skills(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "Work with PDF files"))
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale deeds"))
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/resources/SKILL.md", skill_md("x", "too deep"))
    put(s3_client, bucket, "alice/skills/a/b/c/SKILL.md", skill_md("c", "three levels: not a skill"))
    put(s3_client, bucket, "alice/skills/notes.md", b"not a skill")
    catalog = library(store)
    skills = catalog.index(tenant=ALICE)
    assert [s.id for s in skills] == ["escrituras/compraventa", "pdf"]
    assert skills[0].category == "escrituras"
    assert skills[1].category is None


def test_user_skill_overrides_shared_skill_with_the_same_id(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "org/skills/pdf/SKILL.md", skill_md("pdf", "shared pdf"))
    put(s3_client, bucket, "org/skills/docx/SKILL.md", skill_md("docx", "shared docx"))
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "alice's pdf"))
    catalog = library(store, shared="org")
    by_id = {s.id: s for s in catalog.index(tenant=ALICE)}
    assert by_id["pdf"].metadata.description == "alice's pdf"
    assert by_id["pdf"].source == "user"
    assert by_id["docx"].source == "shared"
    assert catalog.home("docx", tenant=ALICE).prefix == "org/skills/docx/"
    assert catalog.home("pdf", tenant=ALICE).prefix == "alice/skills/pdf/"
    # bob has no library of his own: he sees the shared one
    assert {s.id for s in catalog.index(tenant=BOB)} == {"docx", "pdf"}


def test_disabled_skills_are_hidden_unless_asked_for(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "PDF", enabled="false"))
    put(s3_client, bucket, "alice/skills/docx/SKILL.md", skill_md("docx", "DOCX"))
    catalog = library(store)
    assert [s.id for s in catalog.index(tenant=ALICE)] == ["docx"]
    assert [s.id for s in catalog.index(tenant=ALICE, include_disabled=True)] == ["docx", "pdf"]
    # Disabled means absent for agents: not found, and never suggested.
    with pytest.raises(SkillError, match="'pdf' not found") as caught:
        catalog.get("pdf", tenant=ALICE)
    assert "Did you mean" not in str(caught.value)


def test_category_filter(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale"))
    put(s3_client, bucket, "alice/skills/contratos/arrendamiento/SKILL.md", skill_md("arrendamiento", "Lease"))
    catalog = library(store)
    assert [s.id for s in catalog.index(tenant=ALICE, category="contratos")] == ["contratos/arrendamiento"]
    assert len(catalog.index(tenant=ALICE, category="all")) == 2


def test_invalid_skills_are_skipped_and_reported_with_a_reason(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/good/SKILL.md", skill_md("good", "Fine"))
    put(s3_client, bucket, "alice/skills/nodesc/SKILL.md", b"---\nname: nodesc\n---\nbody")
    put(s3_client, bucket, "alice/skills/broken/SKILL.md", b"---\nname: [unclosed\ndescription: x\n---\n")
    put(s3_client, bucket, "alice/skills/Mixed/SKILL.md", skill_md("Mixed", "Uppercase name"))
    catalog = library(store)
    assert [s.id for s in catalog.index(tenant=ALICE)] == ["Mixed", "good"]
    problems = {(p.skill_id, p.level) for p in catalog.problems(ALICE)}
    assert ("nodesc", "error") in problems
    assert ("broken", "error") in problems
    assert ("Mixed", "warning") in problems
    assert all(p.reason for p in catalog.problems(ALICE))


def test_unknown_skill_suggests_the_closest_ids(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale deeds"))
    put(s3_client, bucket, "alice/skills/escrituras/hipoteca/SKILL.md", skill_md("hipoteca", "Mortgage deeds"))
    catalog = library(store)
    with pytest.raises(SkillError, match="escrituras/compraventa"):
        catalog.get("escrituras/compraventas", tenant=ALICE)


def test_an_edited_skill_md_is_picked_up_on_the_next_refresh(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "old description"))
    catalog = library(store)
    assert catalog.get("pdf", tenant=ALICE).metadata.description == "old description"
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "new description"))
    assert catalog.get("pdf", tenant=ALICE).metadata.description == "new description"
    s3_client.delete_object(Bucket=bucket, Key="alice/skills/pdf/SKILL.md")
    assert catalog.index(tenant=ALICE) == []


def _seed(store: ObjectStore, n: int, extra_files: int = 0) -> int:
    """Write n skills (and extra files in each) concurrently; return the number of keys."""
    objects: dict[str, bytes] = {}
    for i in range(n):
        folder = f"alice/skills/cat{i % 3}/skill-{i:04d}/"
        objects[folder + "SKILL.md"] = skill_md(f"skill-{i:04d}", f"S {i}")
        objects.update({f"{folder}references/r{j}.md": b"ref" for j in range(extra_files)})

    async def write_all() -> None:
        sem = asyncio.Semaphore(32)

        async def one(key: str, body: bytes) -> None:
            async with sem:
                await store.aput(key, body)

        await asyncio.gather(*(one(k, b) for k, b in objects.items()))

    run_sync(write_all())
    return len(objects)


def test_cold_index_costs_list_pages_plus_one_ranged_get_per_skill(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    keys = _seed(store, 40, extra_files=25)  # 1,040 keys: 2 LIST pages
    counter.reset()
    catalog = library(store)
    assert len(catalog.index(tenant=ALICE)) == 40
    # A small first page (the reads start a round trip in), then the listing in pages of 1,000.
    assert counter.counts == {"ListObjectsV2": 1 + math.ceil(keys / 1000), "GetObject": 40}


def test_cold_index_gets_are_issued_concurrently(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    _seed(store, 64)
    in_flight = 0
    peak = 0
    original = store.aget_range

    async def tracking(key: str, start: int, length: int) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0)  # yield so that the other loads can start
            return await original(key, start, length)
        finally:
            in_flight -= 1

    store.aget_range = tracking  # type: ignore[method-assign]
    catalog = library(store, concurrency=32)
    assert len(catalog.index(tenant=ALICE)) == 64
    assert peak >= 32


def test_warm_unchanged_index_costs_only_the_list(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    _seed(store, 30)
    catalog = library(store)
    catalog.index(tenant=ALICE)
    counter.reset()
    catalog.index(tenant=ALICE)
    assert counter.counts == {"ListObjectsV2": 1}


def test_warm_index_within_the_ttl_costs_nothing(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    _seed(store, 30)
    clock = Clock()
    catalog = library(store, ttl=60, clock=clock)
    catalog.index(tenant=ALICE)
    counter.reset()
    clock.now += 59
    catalog.index(tenant=ALICE)
    assert counter.total == 0
    clock.now += 2
    catalog.index(tenant=ALICE)
    assert counter.counts == {"ListObjectsV2": 1}


def test_one_edited_skill_costs_the_list_and_one_get(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    _seed(store, 30)
    catalog = library(store)
    catalog.index(tenant=ALICE)
    put(s3_client, bucket, "alice/skills/cat0/skill-0000/SKILL.md", skill_md("skill-0000", "edited"))
    counter.reset()
    skills = {s.id: s for s in catalog.index(tenant=ALICE)}
    assert skills["cat0/skill-0000"].metadata.description == "edited"
    assert counter.counts == {"ListObjectsV2": 1, "GetObject": 1}


def test_a_frontmatter_longer_than_the_head_is_read_whole(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    long_description = "x " * 500
    put(s3_client, bucket, "alice/skills/big/SKILL.md", skill_md("big", long_description.strip()))
    catalog = library(store, head_bytes=256)
    (skill,) = catalog.index(tenant=ALICE)
    assert skill.metadata.description == long_description.strip()
    assert counter.counts == {"ListObjectsV2": 1, "GetObject": 2}  # the head, then the whole file


def test_skill_md_bodies_are_cached_by_etag(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "PDF"))
    catalog = library(store)
    catalog.skill_md("pdf", tenant=ALICE)
    counter.reset()
    text = catalog.skill_md("pdf", tenant=ALICE)
    assert "# pdf" in text
    assert counter.counts == {"ListObjectsV2": 1}


def test_oversized_skill_md_is_reported_without_being_read(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    put(s3_client, bucket, "alice/skills/huge/SKILL.md", skill_md("huge", "big").encode() + b"x" * (11 * 1024 * 1024))
    catalog = library(store)
    assert catalog.index(tenant=ALICE) == []
    (problem,) = catalog.problems(ALICE)
    assert "limit" in problem.reason
    assert counter.counts == {"ListObjectsV2": 1}


def test_backend_seed_catalog_api(s3_client: Any, bucket: str, moto_endpoint: str) -> None:
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale deeds"))
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "PDF <tools> & more"))
    backend = S3Backend(bucket, user_id="alice", endpoint_url=moto_endpoint, layout=SEEDS)
    assert backend.load_skills() == ["escrituras/compraventa", "pdf"]
    assert backend.load_skills("escrituras") == ["escrituras/compraventa"]
    frontmatter = backend.load_skills_frontmatter()
    assert "name: compraventa" in frontmatter
    assert "Sale deeds" in frontmatter
    grouped = backend.load_all_skills_formatted()
    assert "escrituras" in grouped
    assert "compraventa" in grouped
    assert backend.load_skill_content("pdf").startswith("---\nname: pdf")
    assert backend.load_skill_content("nope") is None


async def test_catalog_async_api_matches_the_sync_one(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "Work with PDF files"))
    catalog = library(store)
    skills = await catalog.aindex(tenant=ALICE)
    assert [s.id for s in skills] == [s.id for s in catalog.index(tenant=ALICE)]
    page = await catalog.asearch("fill a pdf form", tenant=ALICE)
    assert page.skills
    assert page.skills[0].id == "pdf"


def test_with_a_shared_library_a_skill_file_read_costs_one_get_once_the_index_is_warm(
    s3_client: Any, bucket: str, moto_endpoint: str
) -> None:
    put(s3_client, bucket, "org/skills/docx/SKILL.md", skill_md("docx", "shared docx"))
    put(s3_client, bucket, "org/skills/docx/guide.md", b"shared guide")
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "alice's pdf"))
    backend = S3Backend(bucket, user_id="alice", endpoint_url=moto_endpoint, shared_prefix="org", layout=SEEDS)
    backend.load_skill("docx")
    backend.load_skill("pdf")
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    assert backend.read("/skills/docx/guide.md").file_data["content"] == "shared guide"  # type: ignore[index]
    assert "alice's pdf" in backend.read("/skills/pdf/SKILL.md").file_data["content"]  # type: ignore[index]
    assert counter.counts == {"GetObject": 2}
    backend.close()


async def test_reading_the_entry_of_a_big_skill_md_costs_one_ranged_get() -> None:
    store = MemoryObjectStore()
    body = "Paso largo.\n" * 2000  # ~24 KB: larger than the 8 KiB head, the frontmatter inside it
    store.put_object("users/ana/skills/grande/SKILL.md", skill_md("grande", "A big one.", body=body))
    counter = RequestCounter()
    store.add_request_hook(counter)

    entries = await SkillCatalog(store).aread_entries("user", "users/ana/skills/", ["grande"])

    entry = entries["grande"]
    assert entry is not None
    assert entry.info is not None
    assert entry.info.metadata.description == "A big one."
    assert counter.counts == {"GetObject": 1}
