"""SkillCatalog: discovery, layers, problems, and the request counts of a refresh."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from s3skills import S3Backend, SkillCatalog, SkillError
from s3skills._sync import run_sync
from s3skills.store import ObjectStore, RequestCounter


def skill_md(name: str, description: str, **extra: str) -> bytes:
    lines = [f"name: {name}", f"description: {description}", *(f"{k}: {v}" for k, v in extra.items())]
    return ("---\n" + "\n".join(lines) + "\n---\n# " + name + "\n\nInstructions.\n").encode()


def put(s3_client: Any, bucket: str, key: str, body: bytes) -> None:
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
    catalog = SkillCatalog(store)
    skills = catalog.skills("alice")
    assert [s.id for s in skills] == ["escrituras/compraventa", "pdf"]
    assert skills[0].category == "escrituras"
    assert skills[1].category is None


def test_user_skill_overrides_shared_skill_with_the_same_id(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "org/skills/pdf/SKILL.md", skill_md("pdf", "shared pdf"))
    put(s3_client, bucket, "org/skills/docx/SKILL.md", skill_md("docx", "shared docx"))
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "alice's pdf"))
    catalog = SkillCatalog(store, shared_prefix="org")
    by_id = {s.id: s for s in catalog.skills("alice")}
    assert by_id["pdf"].metadata.description == "alice's pdf"
    assert by_id["pdf"].source == "user"
    assert by_id["docx"].source == "shared"
    assert catalog.home("alice", "docx") == "org/skills/docx/"
    assert catalog.home("alice", "pdf") == "alice/skills/pdf/"
    # bob has no library of his own: he sees the shared one
    assert {s.id for s in catalog.skills("bob")} == {"docx", "pdf"}


def test_disabled_skills_are_hidden_unless_asked_for(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "PDF", enabled="false"))
    put(s3_client, bucket, "alice/skills/docx/SKILL.md", skill_md("docx", "DOCX"))
    catalog = SkillCatalog(store)
    assert [s.id for s in catalog.skills("alice")] == ["docx"]
    assert [s.id for s in catalog.skills("alice", include_disabled=True)] == ["docx", "pdf"]
    with pytest.raises(SkillError, match="disabled"):
        catalog.get("alice", "pdf")


def test_category_filter(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale"))
    put(s3_client, bucket, "alice/skills/contratos/arrendamiento/SKILL.md", skill_md("arrendamiento", "Lease"))
    catalog = SkillCatalog(store)
    assert [s.id for s in catalog.skills("alice", category="contratos")] == ["contratos/arrendamiento"]
    assert len(catalog.skills("alice", category="all")) == 2


def test_invalid_skills_are_skipped_and_reported_with_a_reason(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/good/SKILL.md", skill_md("good", "Fine"))
    put(s3_client, bucket, "alice/skills/nodesc/SKILL.md", b"---\nname: nodesc\n---\nbody")
    put(s3_client, bucket, "alice/skills/broken/SKILL.md", b"---\nname: [unclosed\ndescription: x\n---\n")
    put(s3_client, bucket, "alice/skills/Mixed/SKILL.md", skill_md("Mixed", "Uppercase name"))
    catalog = SkillCatalog(store)
    assert [s.id for s in catalog.skills("alice")] == ["Mixed", "good"]
    problems = {(p.skill_id, p.level) for p in catalog.problems("alice")}
    assert ("nodesc", "error") in problems
    assert ("broken", "error") in problems
    assert ("Mixed", "warning") in problems
    assert all(p.reason for p in catalog.problems("alice"))


def test_unknown_skill_suggests_the_closest_ids(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale deeds"))
    put(s3_client, bucket, "alice/skills/escrituras/hipoteca/SKILL.md", skill_md("hipoteca", "Mortgage deeds"))
    catalog = SkillCatalog(store)
    with pytest.raises(SkillError, match="escrituras/compraventa"):
        catalog.get("alice", "escrituras/compraventas")


def test_an_edited_skill_md_is_picked_up_on_the_next_refresh(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "old description"))
    catalog = SkillCatalog(store)
    assert catalog.get("alice", "pdf").metadata.description == "old description"
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "new description"))
    assert catalog.get("alice", "pdf").metadata.description == "new description"
    s3_client.delete_object(Bucket=bucket, Key="alice/skills/pdf/SKILL.md")
    assert catalog.skills("alice") == []


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
    catalog = SkillCatalog(store)
    assert len(catalog.skills("alice")) == 40
    assert counter.counts == {"ListObjectsV2": math.ceil(keys / 1000), "GetObject": 40}


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
    catalog = SkillCatalog(store, concurrency=32)
    assert len(catalog.skills("alice")) == 64
    assert peak >= 32


def test_warm_unchanged_index_costs_only_the_list(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    _seed(store, 30)
    catalog = SkillCatalog(store)
    catalog.skills("alice")
    counter.reset()
    catalog.skills("alice")
    assert counter.counts == {"ListObjectsV2": 1}


def test_warm_index_within_the_ttl_costs_nothing(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    _seed(store, 30)
    clock = Clock()
    catalog = SkillCatalog(store, ttl=60, clock=clock)
    catalog.skills("alice")
    counter.reset()
    clock.now += 59
    catalog.skills("alice")
    assert counter.total == 0
    clock.now += 2
    catalog.skills("alice")
    assert counter.counts == {"ListObjectsV2": 1}


def test_one_edited_skill_costs_the_list_and_one_get(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    _seed(store, 30)
    catalog = SkillCatalog(store)
    catalog.skills("alice")
    put(s3_client, bucket, "alice/skills/cat0/skill-0000/SKILL.md", skill_md("skill-0000", "edited"))
    counter.reset()
    skills = {s.id: s for s in catalog.skills("alice")}
    assert skills["cat0/skill-0000"].metadata.description == "edited"
    assert counter.counts == {"ListObjectsV2": 1, "GetObject": 1}


def test_a_frontmatter_longer_than_the_head_is_read_whole(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    long_description = "x " * 500
    put(s3_client, bucket, "alice/skills/big/SKILL.md", skill_md("big", long_description.strip()))
    catalog = SkillCatalog(store, head_bytes=256)
    (skill,) = catalog.skills("alice")
    assert skill.metadata.description == long_description.strip()
    assert counter.counts == {"ListObjectsV2": 1, "GetObject": 2}  # the head, then the whole file


def test_skill_md_bodies_are_cached_by_etag(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "PDF"))
    catalog = SkillCatalog(store)
    catalog.skill_md("alice", "pdf")
    counter.reset()
    _, text = catalog.skill_md("alice", "pdf")
    assert "# pdf" in text
    assert counter.counts == {"ListObjectsV2": 1}


def test_oversized_skill_md_is_reported_without_being_read(
    s3_client: Any, bucket: str, store: ObjectStore, counter: RequestCounter
) -> None:
    put(s3_client, bucket, "alice/skills/huge/SKILL.md", skill_md("huge", "big") + b"x" * (11 * 1024 * 1024))
    catalog = SkillCatalog(store)
    assert catalog.skills("alice") == []
    (problem,) = catalog.problems("alice")
    assert "limit" in problem.reason
    assert counter.counts == {"ListObjectsV2": 1}


def test_backend_seed_catalog_api(s3_client: Any, bucket: str, moto_endpoint: str) -> None:
    put(s3_client, bucket, "alice/skills/escrituras/compraventa/SKILL.md", skill_md("compraventa", "Sale deeds"))
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "PDF <tools> & more"))
    backend = S3Backend(bucket, user_id="alice", endpoint_url=moto_endpoint)
    assert [s.id for s in backend.load_skills()] == ["escrituras/compraventa", "pdf"]
    assert [s.id for s in backend.load_skills("escrituras")] == ["escrituras/compraventa"]
    frontmatter = backend.load_skills_frontmatter()
    assert "name: compraventa" in frontmatter
    assert "Sale deeds" in frontmatter
    grouped = backend.load_all_skills_formatted()
    assert "escrituras" in grouped
    assert "compraventa" in grouped
    assert backend.load_skill_content("pdf").startswith("---\nname: pdf")
    with pytest.raises(SkillError):
        backend.load_skill_content("nope")


async def test_catalog_async_api_matches_the_sync_one(s3_client: Any, bucket: str, store: ObjectStore) -> None:
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "Work with PDF files"))
    catalog = SkillCatalog(store)
    skills = await catalog.askills("alice")
    assert [s.id for s in skills] == [s.id for s in catalog.skills("alice")]
    ranked = await catalog.amatch("alice", "fill a pdf form")
    assert ranked
    assert ranked[0][0].id == "pdf"


def test_with_a_shared_library_a_skill_file_read_costs_one_get_once_the_index_is_warm(
    s3_client: Any, bucket: str, moto_endpoint: str
) -> None:
    put(s3_client, bucket, "org/skills/docx/SKILL.md", skill_md("docx", "shared docx"))
    put(s3_client, bucket, "org/skills/docx/guide.md", b"shared guide")
    put(s3_client, bucket, "alice/skills/pdf/SKILL.md", skill_md("pdf", "alice's pdf"))
    backend = S3Backend(bucket, user_id="alice", endpoint_url=moto_endpoint, shared_prefix="org")
    backend.load_skill("docx")
    backend.load_skill("pdf")
    counter = RequestCounter()
    backend.store.add_request_hook(counter)
    assert backend.read("/skills/docx/guide.md").file_data["content"] == "shared guide"  # type: ignore[index]
    assert "alice's pdf" in backend.read("/skills/pdf/SKILL.md").file_data["content"]  # type: ignore[index]
    assert counter.counts == {"GetObject": 2}
    backend.close()
