"""Local files and bucket moves fail safe (issue 9, items 1, 5 and 11).

`pull` through planted symlinks writes nothing and creates nothing outside the
destination; `rm` of a skill keeps the skills nested in its folder; `migrate-layout`
copies a seeds-layout bucket to the per-user layout without overwriting anything (moto).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from runs import SYNC_RUN

from s3skills import S3Backend
from s3skills.cli import main
from s3skills.testing import MemoryObjectStore
from s3skills.transfer import pull_tree

PREFIX = "users/ana/skills/"
SKILL = b"---\nname: pdf\ndescription: PDF.\n---\nBody\n"


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under `root` (not following links): file contents, link targets, folders."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_bytes()
    return out


@pytest.fixture
def store() -> MemoryObjectStore:
    store = MemoryObjectStore()
    store.put_object(PREFIX + "pdf/SKILL.md", SKILL)
    store.put_object(PREFIX + "pdf/ok.md", b"OK CONTENT")
    store.put_object(PREFIX + "pdf/refs/deep/x.md", b"DEEP")
    return store


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "outside"
    victim.mkdir()
    (victim / "victim.txt").write_bytes(b"VICTIM")
    return victim


def test_pull_never_writes_through_a_planted_temporary_file_symlink(
    store: MemoryObjectStore, tmp_path: Path, outside: Path
) -> None:
    dest = tmp_path / "dest"
    (dest / "pdf").mkdir(parents=True)
    (dest / "pdf" / ".ok.md.s3skills-tmp").symlink_to(outside / "victim.txt")
    before = snapshot(outside)
    report = pull_tree(store, PREFIX, dest)
    assert snapshot(outside) == before
    assert (dest / "pdf" / "ok.md").read_bytes() == b"OK CONTENT"
    assert os.readlink(dest / "pdf" / ".ok.md.s3skills-tmp") == str(outside / "victim.txt")  # left alone
    assert sorted(i.path for i in report.downloaded) == ["pdf/SKILL.md", "pdf/ok.md", "pdf/refs/deep/x.md"]
    assert [p.name for p in (dest / "pdf").iterdir() if p.name.endswith(".s3skills-tmp")] == [".ok.md.s3skills-tmp"]


def test_pull_refuses_a_symlinked_folder_inside_dest_and_creates_nothing_outside(
    store: MemoryObjectStore, tmp_path: Path, outside: Path
) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "pdf").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    report = pull_tree(store, PREFIX, dest)
    assert snapshot(outside) == before  # no file written, no folder created
    assert report.downloaded == []
    refused = {i.path: i.reason for i in report.refused}
    assert set(refused) == {"pdf/SKILL.md", "pdf/ok.md", "pdf/refs/deep/x.md"}
    for reason in refused.values():
        assert reason == "'pdf' is a symlink or a file, not a folder: nothing is written through it"


def test_pull_refuses_a_symlink_deeper_in_the_tree_and_one_at_the_file_itself(
    store: MemoryObjectStore, tmp_path: Path, outside: Path
) -> None:
    dest = tmp_path / "dest"
    (dest / "pdf").mkdir(parents=True)
    (dest / "pdf" / "refs").symlink_to(outside, target_is_directory=True)
    (dest / "pdf" / "ok.md").symlink_to(outside / "victim.txt")
    before = snapshot(outside)
    report = pull_tree(store, PREFIX, dest)
    assert snapshot(outside) == before
    assert not (outside / "deep").exists()
    refused = {i.path: i.reason for i in report.refused}
    assert refused == {
        "pdf/ok.md": "a symlink is in the way: nothing is written through it",
        "pdf/refs/deep/x.md": "'refs' is a symlink or a file, not a folder: nothing is written through it",
    }
    assert [i.path for i in report.downloaded] == ["pdf/SKILL.md"]
    assert (outside / "victim.txt").read_bytes() == b"VICTIM"


# --- rm keeps nested skills (moto, through the CLI) -----------------------------------------------


def keys(s3_client: Any, bucket: str) -> set[str]:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def test_rm_of_a_skill_keeps_the_skill_nested_in_its_folder(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {
        "users/ana/skills/escrituras/SKILL.md": b"---\nname: escrituras\ndescription: Outer.\n---\nOuter\n",
        "users/ana/skills/escrituras/notes.md": b"outer notes",
        "users/ana/skills/escrituras/compraventa/SKILL.md": b"---\nname: compraventa\ndescription: In.\n---\nIn\n",
        "users/ana/skills/escrituras/compraventa/secret.md": b"nested file",
    }
    for key, body in files.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=body)
    code = main(
        ["--bucket", bucket, "--endpoint-url", moto_endpoint, "--user", "ana", "--json", "rm", "escrituras", "--yes"]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    library = f"s3://{bucket}/users/ana/skills/"
    assert json.loads(captured.out) == {"deleted": "escrituras", "files": 2, "library": library, "channels": []}
    assert "kept the nested skill(s) escrituras/compraventa" in captured.err
    assert {k for k in keys(s3_client, bucket) if "/.s3skills/" not in k} == {  # rm also leaves the manifest
        "users/ana/skills/escrituras/compraventa/SKILL.md",
        "users/ana/skills/escrituras/compraventa/secret.md",
    }


# --- migrate-layout (moto) ----------------------------------------------------------------------------

SEEDS_BUCKET = {
    "ana/skills/pdf/SKILL.md": SKILL,
    "ana/skills/pdf/ref.md": b"ANA REF",
    "org/skills/house/SKILL.md": b"---\nname: house\ndescription: Org.\n---\nHOUSE\n",
    "threads/case-42/ana-private.md": b"ANA PRIVATE",
    "threads/orphan/x.md": b"WHOSE?",
    "tickets/k1/ticket.md": b"TICKET",
    "stray.txt": b"stray",
}


def migrate(bucket: str, endpoint: str, *args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--bucket", bucket, "--endpoint-url", endpoint, "--json", "migrate-layout", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def seeds_bucket(bucket: str, s3_client: Any) -> str:
    for key, body in SEEDS_BUCKET.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=body)
    return bucket


def test_migrate_layout_dry_run_plans_and_writes_nothing(
    seeds_bucket: str, moto_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    owners = tmp_path / "owners.json"
    owners.write_text(json.dumps({"case-42": "ana"}))
    code, out, _ = migrate(
        seeds_bucket, moto_endpoint, "--dry-run", "--shared", "org", "--threads-owner-map", str(owners)
    )
    plan = json.loads(out)
    assert code == 0
    assert keys(s3_client, seeds_bucket) == set(SEEDS_BUCKET)
    assert {c["from"]: c["to"] for c in plan["copies"]} == {
        "ana/skills/pdf/SKILL.md": "users/ana/skills/pdf/SKILL.md",
        "ana/skills/pdf/ref.md": "users/ana/skills/pdf/ref.md",
        "org/skills/house/SKILL.md": "shared/org/skills/house/SKILL.md",
        "threads/case-42/ana-private.md": "users/ana/threads/case-42/ana-private.md",
    }
    assert plan["threads_without_owner"] == ["orphan"]
    assert {item["key"] for item in plan["left"]} == {"threads/orphan/x.md", "tickets/k1/ticket.md", "stray.txt"}


def test_migrate_layout_copies_without_overwriting_and_the_result_is_isolated(
    seeds_bucket: str, moto_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    s3_client.put_object(Bucket=seeds_bucket, Key="users/ana/skills/pdf/ref.md", Body=b"NEWER, KEEP ME")
    owners = tmp_path / "owners.json"
    owners.write_text(json.dumps({"case-42": "ana"}))
    args = ("--yes", "--shared", "org", "--threads-owner-map", str(owners))
    code, out, err = migrate(seeds_bucket, moto_endpoint, *args)
    result = json.loads(out)
    assert code == 1
    assert "not overwritten" in err
    assert result["conflict"] == ["users/ana/skills/pdf/ref.md"]
    assert sorted(result["copied"]) == [
        "shared/org/skills/house/SKILL.md",
        "users/ana/skills/pdf/SKILL.md",
        "users/ana/threads/case-42/ana-private.md",
    ]
    body = s3_client.get_object(Bucket=seeds_bucket, Key="users/ana/skills/pdf/ref.md")["Body"].read()
    assert body == b"NEWER, KEEP ME"
    assert set(SEEDS_BUCKET) <= keys(s3_client, seeds_bucket)  # the seeds' keys are kept
    # Running it again copies nothing: what is there already counts as done.
    _, again, _ = migrate(seeds_bucket, moto_endpoint, *args)
    assert json.loads(again)["copied"] == []
    assert len(json.loads(again)["already"]) == 3

    backend = S3Backend(seeds_bucket, endpoint_url=moto_endpoint, shared_prefix="org")
    try:

        def as_user(user: str) -> Any:
            return SYNC_RUN.invoke(
                {"op": lambda: (backend.read("/workspace/ana-private.md"), backend.load_skills()), "loaded_skills": []},
                context={"user_id": user},
                config={"configurable": {"thread_id": "case-42"}},
            )["result"]

        ana_read, ana_skills = as_user("ana")
        bob_read, bob_skills = as_user("bob")
        assert ana_read.file_data["content"] == "ANA PRIVATE"
        assert ana_skills == ["house", "pdf"]
        assert bob_read.error == "File '/workspace/ana-private.md' not found"
        assert bob_skills == ["house"]
    finally:
        backend.close()


def test_migrate_layout_needs_dry_run_or_yes_and_a_valid_owner_map(
    seeds_bucket: str, moto_endpoint: str, s3_client: Any, tmp_path: Path
) -> None:
    assert migrate(seeds_bucket, moto_endpoint)[0] == 2
    bad = tmp_path / "owners.json"
    bad.write_text(json.dumps({"case-42": "ana\n"}))
    code, _, err = migrate(seeds_bucket, moto_endpoint, "--yes", "--threads-owner-map", str(bad))
    assert code == 2
    assert "Invalid user id" in err
    assert keys(s3_client, seeds_bucket) == set(SEEDS_BUCKET)
