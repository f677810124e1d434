"""Exact version records: every writer records each new version; history, diff and rollback read them.

Pushes made back to back land within one second of each other (S3's LastModified keeps
seconds), where history inferred from write times merges them; with records they stay
apart on every server. A record is input from anyone who can write the library: one that
lies is ignored and reported.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from s3skills.cli import main
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.skills.versions.history import find_version, read_version, restore
from s3skills.skills.versions.records import (
    RECORD_SCHEMA,
    VersionRecord,
    aread_records,
    awrite_records,
    load_bounded,
    new_record_id,
    record_key,
)
from s3skills.storage import ObjectStore
from s3skills.tenancy import Tenant
from s3skills.transfer import apush_tree

LAYOUT = KeyLayout()
PREFIX = LAYOUT.user_prefix("ana")
RECORDS = LAYOUT.records_prefix(PREFIX)
SKILL = "---\nname: pdf\ndescription: Fills PDF forms.\n---\n# PDF {}\n"


@pytest.fixture(
    params=[
        "moto",
        pytest.param("seaweedfs", marks=pytest.mark.seaweedfs),
        pytest.param("localstack", marks=(pytest.mark.localstack, pytest.mark.slow)),
    ]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[ObjectStore]:
    """A versioned bucket on moto, SeaweedFS or LocalStack."""
    s3 = request.getfixturevalue("s3_store_on")(request.param)
    await s3.aput_versioning(True)
    yield s3
    await s3.aclose()


def tree(root: Path, version: int, extra: dict[str, str]) -> Path:
    """The local tree of a push: one folder, rewritten for each version (a push mirrors it)."""
    folder = root / "src" / "pdf"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL.format(version))
    for name, text in extra.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder.parent


def library(store: ObjectStore, actor: str = "ana@example") -> SkillLibrary:
    return SkillLibrary(store, Config(actor=actor), tenant=lambda: Tenant(user_id="ana"))


async def test_pushes_back_to_back_are_each_a_version_in_history_diff_and_rollback(
    store: ObjectStore, tmp_path: Path
) -> None:
    # Three pushes, back to back: the second adds a file, the third edits it and SKILL.md.
    await apush_tree(store, tree(tmp_path, 1, {}), PREFIX, delete=True, actor="ci:alice")
    await apush_tree(store, tree(tmp_path, 2, {"a.md": "a"}), PREFIX, delete=True, actor="ci:bob")
    await apush_tree(store, tree(tmp_path, 3, {"a.md": "aa"}), PREFIX, delete=True, actor="ci:carol")
    lib = library(store)
    versions = await lib.ahistory("pdf")
    assert len(versions) == 3
    assert [v.actor for v in versions] == ["ci:carol", "ci:bob", "ci:alice"]
    assert all(v.record is not None and not v.inferred and v.command == "push" for v in versions)
    assert [sorted(f.path for f in v.files) for v in versions] == [
        ["SKILL.md", "a.md"],
        ["SKILL.md", "a.md"],
        ["SKILL.md"],
    ]
    assert versions[0].latest
    # diff: each version reads its own bytes by VersionId.
    v3, v2, v1 = versions
    assert (await read_version(store, v1.file("SKILL.md"))).data == SKILL.format(1).encode()  # type: ignore[arg-type]
    assert (await read_version(store, v2.file("a.md"))).data == b"a"  # type: ignore[arg-type]
    assert (await read_version(store, v3.file("a.md"))).data == b"aa"  # type: ignore[arg-type]
    # rollback to the middle one (no file to delete: LocalStack answers 501 to a conditional
    # DeleteObject), recorded as a rollback.
    assert sorted(await restore(store, v2, v3)) == ["SKILL.md", "a.md"]
    await lib.anote_changed(["pdf"], command="rollback")
    after = await lib.ahistory("pdf")
    assert [v.id for v in after] == [v2.id, v3.id, v2.id, v1.id]
    assert after[0].command == "rollback"
    assert after[0].actor == "ana@example"
    assert (await lib.aopen("pdf", "a.md")).data == b"a"
    assert find_version(after, v1.id[:6]) == after[3]
    assert find_version(after, after[1].record[:15] + after[1].record[15:21]) == after[1]  # type: ignore[index]


async def test_every_library_writer_records_its_command(store: ObjectStore) -> None:
    lib = library(store, actor="arn:aws:iam::123456789012:user/ana")
    await lib.acreate("pdf", {"SKILL.md": SKILL.format(1).encode()})
    await lib.aset_enabled("pdf", False)
    await lib.aset_enabled("pdf", True)
    await lib.aremove("pdf")
    records, problems = await aread_records(store, RECORDS, "pdf")
    assert problems == []
    assert [r.command for r in records] == ["create", "disable", "enable", "rm"]
    assert {r.actor for r in records} == {"arn:aws:iam::123456789012:user/ana"}
    assert records[-1].removed
    assert records[-1].files == ()


async def test_a_record_key_is_never_overwritten_and_ids_sort_by_time(store: ObjectStore) -> None:
    ids = [new_record_id() for _ in range(200)]
    assert len(set(ids)) == 200
    assert ids == sorted(ids)
    await store.aput(PREFIX + "pdf/SKILL.md", SKILL.format(1).encode())
    written = await awrite_records(store, PREFIX, RECORDS, ["pdf"], actor="a", command="push")
    key = record_key(RECORDS, "pdf", written[0].id)
    body = (await store.aget(key)).data
    from s3skills.errors import Conflict

    with pytest.raises(Conflict):  # IfNoneMatch="*": exact on every server here
        await store.aput(key, b"{}", if_none_match=True)
    assert (await store.aget(key)).data == body


async def test_versions_written_before_records_are_inferred_and_marked(store: ObjectStore, tmp_path: Path) -> None:
    await store.aput(PREFIX + "pdf/SKILL.md", SKILL.format(0).encode())  # no record: written outside s3skills
    await apush_tree(store, tree(tmp_path, 1, {"a.md": "a"}), PREFIX, delete=True, actor="ci")
    versions = await library(store).ahistory("pdf")
    assert [(v.inferred, v.record is None) for v in versions] == [(False, False), (True, True)]
    # A write outside s3skills after that: the current state is shown, marked inferred.
    await store.aput(PREFIX + "pdf/SKILL.md", SKILL.format(9).encode())
    versions = await library(store).ahistory("pdf")
    assert versions[0].inferred
    assert versions[0].latest
    assert [v.inferred for v in versions[1:]] == [False, True]


def forged(record: VersionRecord, **changes: Any) -> bytes:
    doc = record.to_json()
    doc.update(changes)
    return json.dumps(doc).encode()


async def test_a_record_that_lies_is_ignored_and_reported(store: ObjectStore, tmp_path: Path) -> None:
    await apush_tree(store, tree(tmp_path, 1, {}), PREFIX, actor="ci")
    await apush_tree(store, tree(tmp_path, 2, {}), PREFIX, actor="ci")
    real, _ = await aread_records(store, RECORDS, "pdf")
    base = real[-1]
    listed = await store.alist_versions(PREFIX + "pdf/")
    old_md = next(v for v in listed if v.key.endswith("SKILL.md") and not v.is_latest)
    liars = {
        # names the old SKILL.md VersionId with the new one's ETag
        "swapped": [{**f, "version_id": old_md.version_id} for f in base.to_json()["files"]],
        # names a file outside the skill
        "escape": [*base.to_json()["files"], {"path": "../other/SKILL.md", "version_id": None, "etag": "x", "size": 1}],
        # names a VersionId the bucket never had
        "unknown": [{**f, "version_id": "3HL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY"} for f in base.to_json()["files"]],
    }
    for files in liars.values():
        rid = new_record_id()
        await store.aput(record_key(RECORDS, "pdf", rid), forged(base, id=rid, files=files), if_none_match=True)
    rid = new_record_id()  # a content id that is not its files'
    await store.aput(record_key(RECORDS, "pdf", rid), forged(base, id=rid, content="000000000000"))
    await store.aput(RECORDS + "pdf/not-a-record.json", b"{}")
    await store.aput(record_key(RECORDS, "pdf", new_record_id()), b"[" * 100_000)
    records, problems = await aread_records(store, RECORDS, "pdf")
    assert len(records) == 2 + 2  # the swapped and unknown ones decode: the listing refutes them
    assert any("not-a-record.json" in p for p in problems)
    assert any("not a bounded JSON document" in p for p in problems)
    assert any("content id" in p for p in problems)
    assert any("not plainly inside the skill" in p for p in problems)
    lib = library(store)
    versions = await lib.ahistory("pdf")
    assert [v.record for v in versions] == [real[1].id, real[0].id]


def test_bounded_decoding_refuses_deep_or_large_documents() -> None:
    assert load_bounded(b"[" * 7 + b"]" * 7, 1000) is None
    assert load_bounded(b'["[[[[[[[[[["]', 1000) == ["[[[[[[[[[["]
    assert load_bounded(b"{}" * 10, 5) is None
    assert load_bounded(b"\xff", 10) is None


def test_a_record_must_name_its_key_and_a_plain_schema() -> None:
    rid = new_record_id()
    doc = {
        "schema": RECORD_SCHEMA,
        "id": rid,
        "skill": "pdf",
        "content": "",
        "actor": "a",
        "command": "rm",
        "files": [],
    }
    assert isinstance(VersionRecord.decode(json.dumps(doc).encode(), skill_id="pdf", record_id=rid), VersionRecord)
    assert "another skill" in str(VersionRecord.decode(json.dumps(doc).encode(), skill_id="docx", record_id=rid))
    bad = {**doc, "files": [{"path": "a.md", "version_id": None, "etag": "e", "size": 1}], "content": "x"}
    assert "no SKILL.md" in str(VersionRecord.decode(json.dumps(bad).encode(), skill_id="pdf", record_id=rid))
    long = {**doc, "actor": "x" * 10_000}
    assert "too long" in str(VersionRecord.decode(json.dumps(long).encode(), skill_id="pdf", record_id=rid))


def test_record_prefixes_sit_beside_the_library_in_every_layout() -> None:
    assert KeyLayout().records_prefix("users/ana/skills/") == "users/ana/.s3skills/records/"
    assert KeyLayout.seeds().records_prefix("ana/skills/") == "ana/.s3skills/records/"
    assert KeyLayout().channels_prefix("shared/org/skills/") == "shared/org/.s3skills/channels/"
    layout = KeyLayout(user_skills="u/{user_id}/lib/")
    assert layout.records_prefix("u/ana/lib/") == "u/ana/.s3skills/records-lib/"
    with pytest.raises(ValueError, match="no records"):
        KeyLayout().records_prefix("/")


def test_cli_history_shows_each_push_with_its_actor(
    moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--bucket", bucket, "--user", "ana", "--endpoint-url", moto_endpoint]
    assert main([*base, "versioning", "enable"]) == 0
    for n, who in ((1, "alice"), (2, "bob")):
        assert main([*base, "--actor", who, "push", str(tree(tmp_path, n, {"x.md": str(n)}))]) == 0
    capsys.readouterr()
    assert main([*base, "--json", "history", "pdf"]) == 0
    versions = json.loads(capsys.readouterr().out)["versions"]
    assert [(v["actor"], v["command"], v["inferred"]) for v in versions] == [
        ("bob", "push", False),
        ("alice", "push", False),
    ]
    assert main([*base, "diff", "pdf"]) == 0
    out = capsys.readouterr().out
    assert "-# PDF 1" in out
    assert "+# PDF 2" in out
    assert main([*base, "--actor", "carol", "rollback", "pdf", "--to", versions[1]["version"]]) == 0
    capsys.readouterr()
    assert main([*base, "--json", "history", "pdf"]) == 0
    versions = json.loads(capsys.readouterr().out)["versions"]
    assert (versions[0]["actor"], versions[0]["command"]) == ("carol", "rollback")


async def test_a_push_that_changes_only_a_file_beside_skill_md_is_a_version(store: ObjectStore, tmp_path: Path) -> None:
    await apush_tree(store, tree(tmp_path, 1, {"refs/a.md": "one"}), PREFIX, actor="ci")
    (tmp_path / "src" / "pdf" / "refs" / "a.md").write_text("two")  # SKILL.md unchanged: not uploaded
    report = await apush_tree(store, tmp_path / "src", PREFIX, actor="ci")
    assert [i.path for i in report.uploaded] == ["pdf/refs/a.md"]
    versions = await library(store).ahistory("pdf")
    assert len(versions) == 2
    assert all(v.record is not None for v in versions)
