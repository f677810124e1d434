"""Push's edges (issue 30, items 4 and 5), through `s3skills push` on a moto server.

* `--delete` mirrors a skill's own files and never a separate skill nested in its folder
  (`pdf/inner/SKILL.md` and its files), the rule `rm` follows (`s3skills.ids.nested_in`);
* a pull record counts only in the pushed folder itself, owned by the pushing user, not
  writable by group or others, and for the bucket and library prefix pushed to: one
  planted in a parent folder (a shared temporary folder) no longer lifts the "pushed
  from another folder" guard;
* with a layout file, the manifest and digest book go to that layout's own keys (or
  nowhere when it has none), never to the default layout's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from s3skills.cli import main
from s3skills.testing import skill_md
from s3skills.testing import write_file as write

USER = "ana"
PREFIX = f"users/{USER}/skills/"
PULL_RECORD = ".s3skills-pulled.json"


class Run:
    """`main` in-process on one moto bucket (default layout, user `ana` unless given)."""

    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--bucket", bucket, "--endpoint-url", endpoint]
        self.capsys = capsys
        self.out = self.err = ""

    def __call__(self, *argv: str, user: str | None = USER) -> int:
        self.capsys.readouterr()
        code = main([*self.base, *(["--user", user] if user else []), *argv])
        captured = self.capsys.readouterr()
        self.out, self.err = captured.out, captured.err
        return code

    def json(self, *argv: str, expect: int = 0, user: str | None = USER) -> Any:
        code = self("--json", *argv, user=user)
        assert code == expect, self.err
        return json.loads(self.out)


@pytest.fixture
def run(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(moto_endpoint, bucket, capsys)


def keys(s3_client: Any, bucket: str) -> set[str]:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def skill(root: Path, rel: str, description: str | None = None, **files: str) -> Path:
    name = rel.rsplit("/", 1)[-1]
    write(root, f"{rel}/SKILL.md", skill_md(name, description or f"Handles {name} work. Use it for {name}."))
    for inner, text in files.items():
        write(root, f"{rel}/{inner}", text)
    return root


NESTED = {
    PREFIX + "pdf/inner/SKILL.md": skill_md("inner", "A separate skill written into pdf's folder. Use it for inner."),
    PREFIX + "pdf/inner/secret.md": "the nested skill's own file",
}


def plant_nested(s3_client: Any, bucket: str) -> None:
    for key, body in NESTED.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=body.encode())


# -- item 4: --delete and nested skills ---------------------------------------------------------


def test_push_delete_of_a_skill_folder_keeps_a_separate_skill_nested_in_it(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    lib = skill(tmp_path / "lib", "pdf", **{"old.md": "stale", "forms.md": "forms"})
    assert run("push", str(lib / "pdf")) == 0, run.err
    plant_nested(s3_client, bucket)
    (lib / "pdf" / "old.md").unlink()

    plan = run.json("push", "--delete", "--dry-run", str(lib / "pdf"))
    assert [i["path"] for i in plan["deleted"]] == ["pdf/old.md"]
    assert plan["kept_nested"] == ["pdf/inner"]
    assert run("push", "--delete", str(lib / "pdf")) == 0, run.err
    assert "kept the nested skill(s) pdf/inner: a skill is one folder" in run.err
    stored = keys(s3_client, bucket)
    assert PREFIX + "pdf/old.md" not in stored  # the pushed skill's own stale file is mirrored away
    assert set(NESTED) <= stored  # the nested skill is another skill: rm pdf keeps it, so does push
    assert PREFIX + "pdf/forms.md" in stored


def test_push_delete_of_a_parent_folder_keeps_nested_skills_and_mirrors_the_rest(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    lib = skill(skill(tmp_path / "lib", "pdf", **{"old.md": "stale"}), "docx")
    assert run("push", str(lib)) == 0, run.err
    plant_nested(s3_client, bucket)
    (lib / "pdf" / "old.md").unlink()
    for path in sorted((lib / "docx").rglob("*"), reverse=True):
        path.unlink()
    (lib / "docx").rmdir()

    report = run.json("push", "--delete", str(lib))
    assert sorted(i["path"] for i in report["deleted"]) == ["docx/SKILL.md", "pdf/old.md"]
    assert report["kept_nested"] == ["pdf/inner"]
    stored = keys(s3_client, bucket)
    assert set(NESTED) <= stored
    assert not any(k.startswith(PREFIX + "docx/") for k in stored)
    # The nested skill is still a skill of the library.
    assert "pdf/inner" in [s["id"] for s in run.json("list")["skills"]]


# -- item 5: the pull record ------------------------------------------------------------------


def pushed_elsewhere(run: Run, tmp_path: Path) -> None:
    """`access` in the library, pushed from another folder (its source stamp is not ours)."""
    assert run("push", str(skill(tmp_path / "team", "access"))) == 0, run.err


def record(etag: str, *, prefix: str = PREFIX, bucket: str) -> str:
    return json.dumps({"version": 1, "skills": {"access": {"etag": etag, "prefix": prefix, "bucket": bucket}}})


def remote_etag(s3_client: Any, bucket: str) -> str:
    return str(s3_client.head_object(Bucket=bucket, Key=PREFIX + "access/SKILL.md")["ETag"].strip('"'))


def test_a_pull_record_planted_in_a_parent_folder_does_not_lift_the_guard(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    pushed_elsewhere(run, tmp_path)
    shared = tmp_path / "tmp"  # a folder every local user can write, like /tmp
    mine = skill(shared / "work", "access", "Mine. Use it for the access system.")
    (shared / PULL_RECORD).write_text(
        json.dumps(
            {"skills": {"work/access": {"etag": remote_etag(s3_client, bucket), "prefix": PREFIX, "bucket": bucket}}}
        )
    )
    assert run("push", str(mine)) == 1
    assert "access: library copy from team/access, this one from " in run.err
    assert "Handles access work" in run.json("info", "access")["metadata"]["description"]


@pytest.mark.parametrize("why", ["other prefix", "other bucket", "no bucket", "group-writable", "a symlink"])
def test_a_pull_record_in_the_pushed_folder_counts_only_when_it_is_ours_and_for_this_library(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str, why: str
) -> None:
    pushed_elsewhere(run, tmp_path)
    mine = skill(tmp_path / "mine", "access", "Mine. Use it for the access system.")
    etag = remote_etag(s3_client, bucket)
    text = {
        "other prefix": record(etag, prefix="users/bob/skills/", bucket=bucket),
        "other bucket": record(etag, bucket=bucket + "-other"),
        "no bucket": json.dumps({"skills": {"access": {"etag": etag, "prefix": PREFIX}}}),
    }.get(why, record(etag, bucket=bucket))
    if why == "a symlink":
        (mine / "elsewhere.json").write_text(text)  # inside the tree: the scan ignores it, the record is refused
        (mine / PULL_RECORD).symlink_to(mine / "elsewhere.json")
    else:
        (mine / PULL_RECORD).write_text(text)
    if why == "group-writable":
        (mine / PULL_RECORD).chmod(0o664)
    assert run("push", str(mine)) == 1
    assert "take it over: --replace" in run.err
    # The same record, as a pull writes it (ours, 0644, this bucket and prefix), lifts the guard.
    (mine / PULL_RECORD).unlink()
    (mine / PULL_RECORD).write_text(record(etag, bucket=bucket))
    (mine / PULL_RECORD).chmod(0o644)
    assert run("push", str(mine)) == 0, run.err
    assert run.json("info", "access")["metadata"]["description"].startswith("Mine.")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_a_pull_record_owned_by_another_user_does_not_lift_the_guard(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    pushed_elsewhere(run, tmp_path)
    mine = skill(tmp_path / "mine", "access", "Mine. Use it for the access system.")
    (mine / PULL_RECORD).write_text(record(remote_etag(s3_client, bucket), bucket=bucket))
    (mine / PULL_RECORD).chmod(0o644)
    os.chown(mine / PULL_RECORD, 65534, 65534)
    assert run("push", str(mine)) == 1
    assert "take it over: --replace" in run.err


def test_pull_then_push_of_the_pulled_folder_still_just_works(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    pushed_elsewhere(run, tmp_path)
    mine = tmp_path / "mine"
    old_umask = os.umask(0o002)  # a group-writable umask: the record is still written 0644
    try:
        assert run("pull", str(mine)) == 0, run.err
    finally:
        os.umask(old_umask)
    written = json.loads((mine / PULL_RECORD).read_text())["skills"]["access"]
    assert written == {"etag": remote_etag(s3_client, bucket), "prefix": PREFIX, "bucket": bucket}
    assert (mine / PULL_RECORD).stat().st_mode & 0o022 == 0
    write(mine, "access/SKILL.md", skill_md("access", "Edited after the pull. Use it for the access system."))
    assert run("push", str(mine)) == 0, run.err
    assert "conflict" not in run.err


# -- item 5: derived data at the layout's own keys -----------------------------------------------


def test_push_with_a_layout_file_writes_derived_data_at_that_layouts_keys(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    # Libraries at a/{user_id}/: the default rule would put ana's manifest at a/.s3skills/...,
    # inside the library of a user named .s3skills; this layout keeps no manifest there.
    flat = tmp_path / "flat.toml"
    flat.write_text('user_skills = "a/{user_id}/"\nworkspace = "w/{user_id}/{thread_id}/"\n')
    lib = skill(tmp_path / "lib", "pdf")
    assert run("--layout-file", str(flat), "push", str(lib)) == 0, run.err
    stored = keys(s3_client, bucket)
    assert "a/ana/pdf/SKILL.md" in stored
    assert not [k for k in stored if "/.s3skills/" in k or k.startswith(".s3skills/")]
    assert [s["id"] for s in run.json("--layout-file", str(flat), "list")["skills"]] == ["pdf"]

    # Libraries under tickets/: the default layout has no manifest key there (its tickets
    # namespace), this one does, so a push writes this layout's manifest and digest book.
    mine = tmp_path / "mine.toml"
    mine.write_text(
        'user_skills = "tickets/{user_id}/skills/"\nworkspace = "w/{user_id}/{thread_id}/"\nticket = "t/{ticket_id}/"\n'
    )
    assert run("--layout-file", str(mine), "push", str(lib)) == 0, run.err
    stored = keys(s3_client, bucket)
    assert {"tickets/ana/.s3skills/manifest.json", "tickets/ana/.s3skills/digests.json"} <= stored
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="tickets/ana/.s3skills/manifest.json")["Body"].read())
    assert "pdf" in json.dumps(manifest)
