"""An agent on a channel serves the channel's versions: index, SKILL.md and files.

End to end on moto with the CLI making the channel and the library (as `S3Backend` and the MCP
server build it) serving it; request counts of a fresh reader's index on a 1,000-skill library
(10,000 in the slow run), as `tests/test_index_after_write.py` counts `latest`'s.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from s3skills import S3Backend
from s3skills._loop import run_sync
from s3skills.cli import main
from s3skills.config import Config
from s3skills.errors import SkillError
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.versions.channels import Channel, acurrent_skills, awrite_channel
from s3skills.storage import RequestCounter, S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore, builders
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()
ANA = Tenant(user_id="ana")
SKILL = "---\nname: {name}\ndescription: {name} version {n}.\n---\n# {name} {n}\n"


def write_tree(root: Path, n: int, names: tuple[str, ...]) -> Path:
    src = root / "src"
    if src.exists():
        shutil.rmtree(src)
    for name in names:
        (src / name).mkdir(parents=True)
        (src / name / "SKILL.md").write_text(SKILL.format(name=name, n=n))
        (src / name / "notes.md").write_text(f"{name} notes {n}")
    return src


class Org:
    """The shared library `org` on moto, written with the CLI."""

    def __init__(self, endpoint: str, bucket: str, root: Path) -> None:
        self.base = ["--bucket", bucket, "--shared", "org", "--endpoint-url", endpoint]
        self.root = root
        self.endpoint, self.bucket = endpoint, bucket

    def __call__(self, *argv: str) -> None:
        assert main([*self.base, *argv]) == 0

    def push(self, n: int, names: tuple[str, ...] = ("pdf", "docx")) -> None:
        self("--actor", "author", "push", "--delete", str(write_tree(self.root, n, names)))

    def library(self, channel: str | None, **config: Any) -> SkillLibrary:
        store = S3ObjectStore(self.bucket, endpoint_url=self.endpoint)
        cfg = Config(**{"shared_library": "org", "channel": channel, "shared_catalog_ttl": None, **config})
        return SkillLibrary(store, cfg, tenant=lambda: ANA)


@pytest.fixture
def org(moto_endpoint: str, bucket: str, tmp_path: Path) -> Org:
    o = Org(moto_endpoint, bucket, tmp_path)
    o("versioning", "enable")
    return o


def test_production_serves_its_versions_after_a_newer_push_and_promote_reaches_a_running_agent(org: Org) -> None:
    org.push(1)
    org("channel", "create", "production", "--from", "latest")
    org.push(2, names=("pdf", "docx", "xlsx"))
    prod, latest = org.library("production"), org.library(None)
    assert {s.id: s.metadata.description for s in prod.index()} == {"pdf": "pdf version 1.", "docx": "docx version 1."}
    assert {s.id for s in latest.index()} == {"pdf", "docx", "xlsx"}
    assert prod.instructions("pdf").strip() == "# pdf 1"
    assert prod.skill_md("pdf").count("version 1.") == 1
    assert prod.open("pdf", "notes.md").data == b"pdf notes 1"
    loaded = prod.load("pdf")
    assert loaded.version is not None
    assert {f.path for f in prod.files("pdf")} == {"SKILL.md", "notes.md"}
    with pytest.raises(SkillError, match="not found"):  # not in the channel: not served
        prod.load("xlsx")
    assert latest.open("pdf", "notes.md").data == b"pdf notes 2"
    # A thread that loaded pdf in production keeps that version after the channel moves on.
    thread = Tenant(user_id="ana", skill_versions={"pdf": loaded.version.pin()})
    org("channel", "promote", "latest", "production")
    # The same running library (no restart): the next query asks again (TTL None) and sees it.
    assert {s.id: s.metadata.description for s in prod.index()}["pdf"] == "pdf version 2."
    assert "xlsx" in {s.id for s in prod.index()}
    assert prod.open("pdf", "notes.md").data == b"pdf notes 2"
    assert prod.open("pdf", "notes.md", tenant=thread).data == b"pdf notes 1"
    # set one skill back, by the id its load recorded: the agent serves it at once
    org("channel", "set", "production", "pdf", "--version", loaded.version.id)
    assert prod.instructions("pdf").strip() == "# pdf 1"
    assert prod.load("pdf").version == loaded.version


def test_a_channel_read_is_trusted_for_the_ttl_then_asked_again(org: Org) -> None:
    org.push(1)
    org("channel", "create", "production", "--from", "latest")
    org.push(2)
    prod = org.library("production", catalog_ttl=3600.0, shared_catalog_ttl=3600.0)
    assert prod.instructions("pdf").strip() == "# pdf 1"
    org("channel", "promote", "latest", "production")
    assert prod.instructions("pdf").strip() == "# pdf 1"  # within the TTL: no request, the channel read
    prod.invalidate()  # what the TTL's end does
    assert prod.instructions("pdf").strip() == "# pdf 2"


def test_a_backend_and_the_mcp_source_take_the_channel(org: Org) -> None:
    org.push(1)
    org("channel", "create", "stable", "--from", "latest")
    org.push(2)
    backend = S3Backend(org.bucket, endpoint_url=org.endpoint, shared_prefix="org", channel="stable", user_id="ana")
    assert backend.config.channel == "stable"
    assert backend.skills.instructions("docx").strip() == "# docx 1"
    from s3skills.serve.mcp import library_source

    source = library_source(org.bucket, endpoint_url=org.endpoint, shared_prefix="org", channel="stable")
    assert source.library.config.channel == "stable"  # type: ignore[attr-defined]


def test_a_shared_library_without_the_channel_serves_nothing_and_a_bad_channel_name_is_refused(org: Org) -> None:
    org.push(1)
    assert org.library("missing").index() == []
    with pytest.raises(ValueError, match="channel name"):
        Config(channel="../x")


def test_a_channel_naming_a_version_with_another_etag_serves_nothing_of_it(org: Org) -> None:
    import json

    org.push(1)
    org("channel", "create", "production", "--from", "latest")
    org.push(2)
    store = S3ObjectStore(org.bucket, endpoint_url=org.endpoint)
    key = LAYOUT.channels_prefix(LAYOUT.shared_prefix("org")) + "production.json"
    doc = json.loads(run_sync(store.aget(key)).data)
    # A library writer points pdf's SKILL.md at the current VersionId but keeps the old ETag.
    versions = run_sync(store.alist_versions(LAYOUT.shared_prefix("org") + "pdf/SKILL.md"))
    doc["skills"]["pdf"]["files"]["SKILL.md"]["version_id"] = next(v.version_id for v in versions if v.is_latest)
    run_sync(store.aput(key, json.dumps(doc).encode()))
    prod = org.library("production")
    assert {s.id for s in prod.index()} == {"docx"}


# -- cost ------------------------------------------------------------------------------------------


def tree(root: Path, count: int) -> Path:
    for i in range(count):
        folder = root / f"cat{i % 4}" / f"skill-{i:05d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_bytes(builders.skill_md(f"skill-{i:05d}", f"Skill number {i}").encode())
    return root


def channel_index_cost(tmp_path: Path, count: int) -> tuple[int, int, dict[str, int]]:
    store = MemoryObjectStore(versioning=True)
    prefix = LAYOUT.user_prefix("ana")
    run_sync(apush_tree(store, tree(tmp_path / "lib", count), prefix, concurrency=64))
    skills = run_sync(acurrent_skills(store, prefix))
    run_sync(awrite_channel(store, LAYOUT.channels_prefix(prefix), Channel("production", skills), actor="t"))
    # A newer push of one skill: the channel serves an older SKILL.md for it.
    changed = tmp_path / "one" / "cat0" / "skill-00000"
    changed.mkdir(parents=True)
    (changed / "SKILL.md").write_bytes(builders.skill_md("skill-00000", "A newer description").encode())
    run_sync(apush_tree(store, tmp_path / "one", prefix, replace=True))
    counter = RequestCounter()
    store.add_request_hook(counter)
    latest = len(SkillLibrary(store, Config(layout=LAYOUT), tenant=lambda: ANA).index())
    latest_cost = counter.total
    counter.reset()
    lib = SkillLibrary(store, Config(layout=LAYOUT, channel="production"), tenant=lambda: ANA)
    served = lib.index()
    assert next(s for s in served if s.id == "cat0/skill-00000").metadata.description == "Skill number 0"
    assert len(served) == latest
    return latest_cost, counter.total, counter.counts


def test_a_channels_index_for_a_fresh_reader_costs_at_most_3_requests_at_1000_skills(tmp_path: Path) -> None:
    latest, served, counts = channel_index_cost(tmp_path, 1000)
    assert latest == 1
    assert served <= 3, counts  # the manifest, the channel, the one older SKILL.md
    assert counts == {"GetObject": 3}


@pytest.mark.slow
def test_a_channels_index_for_a_fresh_reader_costs_at_most_3_requests_at_10000_skills(tmp_path: Path) -> None:
    latest, served, counts = channel_index_cost(tmp_path, 10_000)
    assert latest == 1
    assert served <= 3, counts


def test_a_damaged_channel_serves_nothing_of_the_shared_library_and_never_raises(org: Org) -> None:
    org.push(1)
    org("channel", "create", "production", "--from", "latest")
    store = S3ObjectStore(org.bucket, endpoint_url=org.endpoint)
    key = LAYOUT.channels_prefix(LAYOUT.shared_prefix("org")) + "production.json"
    for junk in (b"[" * 100_000, b'{"schema":"s3skills.channel/1","name":"production","skills":{"../x":{}}}', b"\xff"):
        run_sync(store.aput(key, junk))
        assert org.library("production").index() == []
    assert main([*org.base, "channel", "show", "production"]) == 1
