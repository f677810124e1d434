"""The `s3skills` command line against a moto server: every command, its output and exit codes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.cli import main
from s3skills.cli.context import CLI_MAX_ATTEMPTS
from s3skills.errors import BucketNotFound
from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.runner import ScriptRunner
from s3skills.storage import S3ObjectStore as ObjectStore
from s3skills.testing import free_port, skill_md
from s3skills.testing import write_file as write
from s3skills.transfer import PushRefused, pull_tree, push_tree, scan_tree

USER = "alice"
PREFIX = f"{USER}/skills/"


def make_tree(root: Path, count: int) -> Path:
    """`count` skills: half flat (`skill-N`), half in categories (`cat-M/skill-N`), some with files."""
    for i in range(count):
        name = f"skill-{i:03d}"
        rel = name if i % 2 == 0 else f"cat-{i % 5}/{name}"
        write(root, f"{rel}/SKILL.md", skill_md(name))
        if i % 10 == 0:
            write(root, f"{rel}/references/notes.md", f"notes of {name}\n")
    return root


def keys(s3_client: Any, bucket: str, prefix: str = PREFIX) -> dict[str, str]:
    """Key -> ETag of every object under `prefix`."""
    out: dict[str, str] = {}
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.update({o["Key"]: o["ETag"] for o in page.get("Contents", [])})
    return out


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, USER)


@pytest.fixture
def store(moto_endpoint: str, bucket: str) -> ObjectStore:
    return ObjectStore(bucket, endpoint_url=moto_endpoint)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("s3skills: error: "), err
    assert "Traceback" not in err
    return lines[0]


# -- push / list ------------------------------------------------------------------------------


def test_push_92_skills_then_list_shows_them_all(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    # 92 skills and their 10 notes are 102 keys: more than the first LIST page (100 keys) of
    # the cold index `list` builds, so listing must follow the continuation.
    tree = make_tree(tmp_path / "lib", 92)
    report = cli.json("push", str(tree))
    assert len(report["skills"]) == 92
    assert len(report["uploaded"]) == 102
    assert report["skipped"] == []
    assert len(keys(s3_client, bucket)) == 102

    listed = cli.json("list")
    ids = {s["id"] for s in listed["skills"]}
    assert len(ids) == 92
    assert {"skill-000", "cat-1/skill-001"} <= ids
    assert listed["problems"] == []

    # A second push uploads nothing: every file matches its ETag.
    before = keys(s3_client, bucket)
    again = cli.json("push", str(tree))
    assert again["uploaded"] == []
    assert len(again["skipped"]) == 102
    assert keys(s3_client, bucket) == before


def test_push_human_summary_and_list_filters(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 10)
    assert cli("push", str(tree)) == 0
    assert "Uploaded 11 files" in cli.out
    assert "10 skills" in cli.out
    assert cli("list", "--category", "cat-1") == 0
    assert "cat-1/skill-001" in cli.out
    assert "skill-000" not in cli.out
    assert cli.json("list", "--category", "cat-3")["skills"][0]["id"] == "cat-3/skill-003"


def test_dry_run_uploads_nothing(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    tree = make_tree(tmp_path / "lib", 6)
    plan = cli.json("push", "--dry-run", str(tree))
    assert plan["dry_run"] is True
    assert len(plan["uploaded"]) == 7
    assert keys(s3_client, bucket) == {}
    assert cli("push", "--dry-run", str(tree)) == 0
    assert "Would upload 7 files" in cli.out
    assert "  + skill-000/SKILL.md (new, " in cli.out  # the dry run names each file

    cli.json("push", str(tree))
    write(tree, "skill-000/SKILL.md", skill_md("skill-000", "Changed."))
    before = keys(s3_client, bucket)
    plan = cli.json("push", "--dry-run", str(tree))
    assert [(i["path"], i["reason"]) for i in plan["uploaded"]] == [("skill-000/SKILL.md", "changed")]
    assert keys(s3_client, bucket) == before


def test_delete_mirrors_the_tree(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    tree = make_tree(tmp_path / "lib", 6)
    cli.json("push", str(tree))
    # An unrelated object outside any skill is never touched.
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "README.txt", Body=b"keep me")
    (tree / "skill-000/references/notes.md").unlink()
    for path in sorted((tree / "cat-1/skill-001").rglob("*"), reverse=True):
        path.unlink()
    (tree / "cat-1/skill-001").rmdir()

    kept = cli.json("push", str(tree))
    assert kept["deleted"] == []
    assert PREFIX + "cat-1/skill-001/SKILL.md" in keys(s3_client, bucket)

    plan = cli.json("push", "--delete", "--dry-run", str(tree))
    assert {i["path"] for i in plan["deleted"]} == {"skill-000/references/notes.md", "cat-1/skill-001/SKILL.md"}
    mirrored = cli.json("push", "--delete", str(tree))
    assert {i["path"] for i in mirrored["deleted"]} == {"skill-000/references/notes.md", "cat-1/skill-001/SKILL.md"}
    remote = {k[len(PREFIX) :] for k in keys(s3_client, bucket)}
    local = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()}
    assert remote == local | {"README.txt"}
    assert cli("push", "--delete", str(tree)) == 0
    assert cli.out.startswith("Nothing to push: ")


def test_single_skill_folder_is_pushed_as_one_skill(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    make_tree(tmp_path / "lib", 4)
    cli.json("push", str(tmp_path / "lib"))
    single = tmp_path / "work" / "pdf"
    write(single, "SKILL.md", skill_md("pdf"))
    write(single, "scripts/fill.py", "print('{}')\n")
    report = cli.json("push", "--delete", str(single))
    assert report["skills"] == ["pdf"]
    assert report["deleted"] == []  # --delete mirrors only that skill
    remote = keys(s3_client, bucket)
    assert {PREFIX + "pdf/SKILL.md", PREFIX + "pdf/scripts/fill.py", PREFIX + "skill-000/SKILL.md"} <= set(remote)


def test_unreadable_skill_is_left_out_and_named_and_strict_refuses_the_push(
    cli: Cli, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    tree = make_tree(tmp_path / "lib", 3)
    write(tree, "broken/SKILL.md", skill_md("broken"))
    assert cli("push", str(tree)) == 0
    write(tree, "broken/SKILL.md", "no frontmatter at all\n")  # broken locally since
    assert cli("push", "--strict", str(tree)) == 1
    assert "  broken: no frontmatter" in cli.err
    assert cli.err.strip().splitlines()[-1].startswith("s3skills: error: push refused")
    refused = cli.json("push", "--strict", str(tree), expect=1)
    assert refused["ok"] is False
    assert any(p["fatal"] for p in refused["problems"])

    pushed = cli.json("push", "--delete", str(tree))  # stored what hosts load, left the rest out
    assert "broken" not in pushed["skills"]
    assert "broken" in pushed["left_out"]
    assert cli("push", "--delete", str(tree)) == 0
    assert "left out 1 skill no host can read" in cli.err
    assert "  broken: no frontmatter: the file must start with a '---' line" in cli.err
    kept = s3_client.get_object(Bucket=bucket, Key=PREFIX + "broken/SKILL.md")["Body"].read()
    assert b"name: broken" in kept  # the library's copy is kept, even on --delete
    assert cli("push", str(tree / "broken")) == 1  # nothing of it could be pushed
    assert "nothing pushed" in cli.err


def test_push_force_is_gone_and_says_what_replaces_it(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 1)
    assert cli("push", "--force", str(tree)) == 2
    assert "push has no --force" in cli.err
    assert "--strict" in cli.err


def test_unsafe_files_are_refused_and_junk_ignored(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    tree = make_tree(tmp_path / "lib", 2)
    outside = write(tmp_path, "secret.txt", "secret")
    (tree / "skill-000" / "leak.txt").symlink_to(outside)
    write(tree, "skill-000/.git/config", "[core]\n")
    write(tree, "skill-000/__pycache__/x.cpython-311.pyc", b"\0")
    write(tree, "skill-000/.DS_Store", b"\0")
    write(tree, "skill-000/scripts/a.pyc", b"\0")
    write(tree, "Bad Folder/SKILL.md", skill_md("bad-folder"))

    assert cli("push", "--strict", str(tree)) == 1
    assert "  skill-000/leak.txt: symlink to a file outside the tree" in cli.err
    assert "  Bad Folder/SKILL.md: maps to the skill id 'Bad Folder', which is invalid" in cli.err
    assert keys(s3_client, bucket) == {}

    assert cli("push", str(tree)) == 0
    assert "left out 2 files that cannot be pushed safely:" in cli.err
    forced = cli.json("push", str(tree))
    assert {i["path"] for i in forced["refused"]} == {"skill-000/leak.txt", "Bad Folder/SKILL.md"}
    remote = {k[len(PREFIX) :] for k in keys(s3_client, bucket)}
    assert remote == {"skill-000/SKILL.md", "skill-000/references/notes.md", "cat-1/skill-001/SKILL.md"}
    ignored = {i["path"] for i in forced["ignored"]}
    assert {"skill-000/.git/", "skill-000/__pycache__/", "skill-000/.DS_Store", "skill-000/scripts/a.pyc"} <= ignored


def test_oversized_file_is_refused_with_a_clear_reason(tmp_path: Path, store: ObjectStore) -> None:
    tree = make_tree(tmp_path / "lib", 1)
    write(tree, "skill-000/assets/big.bin", b"x" * 2048)
    with pytest.raises(PushRefused) as info:
        push_tree(store, tree, PREFIX, max_file_bytes=1024, strict=True)
    assert info.value.report.refused[0].path == "skill-000/assets/big.bin"
    assert "the file is 2.0 KiB (2048 bytes); the limit is 1.0 KiB" in info.value.report.refused[0].reason


def test_push_reports_progress_and_uploads_skill_md_last(tmp_path: Path, store: ObjectStore) -> None:
    tree = make_tree(tmp_path / "lib", 3)
    calls: list[tuple[str, int, int]] = []
    report = push_tree(store, tree, PREFIX, progress=lambda p, d, t: calls.append((p, d, t)), concurrency=1)
    assert [c[1] for c in calls] == [0, 1, 2, 3, 4]  # from the start
    assert {c[2] for c in calls} == {4}
    assert calls[1][0] == "skill-000/references/notes.md"  # before any SKILL.md
    assert len(report.uploaded) == 4


def test_no_skills_in_folder_is_an_error(cli: Cli, tmp_path: Path) -> None:
    write(tmp_path / "empty", "README.md", "nothing here")
    assert cli("push", str(tmp_path / "empty")) == 1
    assert "no skills found" in one_error_line(cli.err)
    assert cli("push", str(tmp_path / "missing")) == 1
    assert "not a folder" in one_error_line(cli.err)


# -- pull -------------------------------------------------------------------------------------


def test_pull_round_trip(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 12)
    write(tree, "skill-000/assets/logo.png", bytes(range(256)))
    cli.json("push", str(tree))
    dest = tmp_path / "pulled"
    report = cli.json("pull", str(dest))
    assert len(report["downloaded"]) == 15
    original = {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    pulled = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    record = json.loads(pulled.pop(".s3skills-pulled.json"))  # where each folder came from
    assert len(record["skills"]) == 12
    assert pulled == original
    again = cli.json("pull", str(dest))
    assert again["downloaded"] == []
    assert len(again["skipped"]) == 15
    # What was pulled pushes back as the same library.
    assert cli.json("push", str(dest))["uploaded"] == []

    one = tmp_path / "one"
    assert cli("pull", str(one), "--skill", "skill-001") == 0  # resolved by its folder name
    assert {p.relative_to(one).as_posix() for p in one.rglob("*") if p.is_file()} == {
        "cat-1/skill-001/SKILL.md",
        ".s3skills-pulled.json",
    }
    assert cli("pull", str(one), "--skill", "skil-001") == 1
    assert "did you mean" in one_error_line(cli.err)


def test_pull_never_writes_outside_dest(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    write(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf"))
    cli.json("push", str(tmp_path / "lib"))
    for bad in ("pdf/../../escaped.txt", "pdf/../../../etc/x", "pdf//double", "pdf/./dot"):
        s3_client.put_object(Bucket=bucket, Key=PREFIX + bad, Body=b"evil")
    dest = tmp_path / "area" / "dest"
    report = cli.json("pull", str(dest), expect=1)
    assert {i["path"] for i in report["refused"]} == {
        "pdf/../../escaped.txt",
        "pdf/../../../etc/x",
        "pdf//double",
        "pdf/./dot",
    }
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {"lib/pdf/SKILL.md", "area/dest/pdf/SKILL.md", "area/dest/.s3skills-pulled.json"}


# -- info / enable / disable ------------------------------------------------------------------


def test_info_shows_metadata_files_and_etag(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    write(tmp_path / "lib", "docs/pdf/SKILL.md", skill_md("pdf", version="1.2", tags="pdf, forms"))
    write(tmp_path / "lib", "docs/pdf/scripts/fill.py", "x = 1\n")
    cli.json("push", str(tmp_path / "lib"))
    info = cli.json("info", "docs/pdf")
    etag = s3_client.head_object(Bucket=bucket, Key=PREFIX + "docs/pdf/SKILL.md")["ETag"].strip('"')
    assert info["etag"] == etag
    assert info["metadata"]["name"] == "pdf"
    assert info["metadata"]["version"] == "1.2"
    assert info["metadata"]["tags"] == ["pdf", "forms"]
    assert {f["path"]: f["size"] for f in info["files"]} == {
        "SKILL.md": len(skill_md("pdf", version="1.2", tags="pdf, forms")),
        "scripts/fill.py": 6,
    }
    assert info["total_size"] == sum(f["size"] for f in info["files"])
    assert info["problems"] == []

    assert cli("info", "pdf") == 0  # by folder name, human output
    assert "scripts/fill.py" in cli.out
    assert etag in cli.out
    assert cli("info", "pfd") == 1
    assert one_error_line(cli.err) == "s3skills: error: unknown skill 'pfd' (did you mean: docs/pdf?)"


def test_enable_disable_round_trip(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    write(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf", version="2.0"))
    cli.json("push", str(tmp_path / "lib"))
    key = PREFIX + "pdf/SKILL.md"
    assert cli.json("disable", "pdf") == {
        "id": "pdf",
        "enabled": False,
        "changed": True,
        "library": f"s3://{bucket}/{PREFIX}",
        "channels": [],
    }
    text = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    assert "enabled: false" in text
    assert text.endswith("# pdf\n\nInstructions.\n")
    assert "version: '2.0'" in text
    assert cli.json("list")["skills"] == []
    assert cli("list") == 0
    assert "1 disabled skill(s) not shown (pdf); use --all" in cli.err
    assert [s["enabled"] for s in cli.json("list", "--all")["skills"]] == [False]
    assert cli("disable", "pdf") == 0
    assert "already disabled" in cli.out

    assert cli("enable", "pdf") == 0
    assert cli.out.strip() == f"pdf enabled in {USER}'s library (s3://{bucket}/{PREFIX})"
    text = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    assert "enabled" not in text
    assert text.endswith("# pdf\n\nInstructions.\n")
    assert [s["id"] for s in cli.json("list")["skills"]] == ["pdf"]


def test_enable_reports_a_concurrent_change(
    cli: Cli, tmp_path: Path, s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf"))
    cli.json("push", str(tmp_path / "lib"))
    key = PREFIX + "pdf/SKILL.md"
    from s3skills.skills.index import writers

    real_render = writers.render_skill_md

    def render_while_someone_else_writes(*args: Any, **kwargs: Any) -> str:
        s3_client.put_object(Bucket=bucket, Key=key, Body=skill_md("pdf", "Edited by someone else."))
        return real_render(*args, **kwargs)

    monkeypatch.setattr(writers, "render_skill_md", render_while_someone_else_writes)
    assert cli("disable", "pdf") == 1
    assert "changed while it was being edited" in one_error_line(cli.err)
    body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    assert "Edited by someone else." in body
    assert "enabled" not in body


def test_enable_refuses_an_invalid_skill_md(cli: Cli, s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "bad/SKILL.md", Body=b"no frontmatter")
    assert cli("enable", "bad") == 1
    assert "its SKILL.md is invalid" in one_error_line(cli.err)


# -- create -----------------------------------------------------------------------------------


def run_script(script: Path, payload: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["python3", str(script), json.dumps(payload)], capture_output=True, text=True, timeout=30, check=False
    )


def test_create_in_bucket_then_again_is_refused(cli: Cli, s3_client: Any, bucket: str) -> None:
    assert cli("create", "tax-report", "-d", "Builds a tax report. Use for quarterly filings.") == 0
    created = keys(s3_client, bucket)
    assert set(created) == {PREFIX + "tax-report/SKILL.md"}
    assert cli("create", "tax-report") == 1
    assert "already exists" in one_error_line(cli.err)
    assert keys(s3_client, bucket) == created
    assert cli.json("create", "summary", "--category", "finance", "--code", "-d", "Sums. Use for sums.")["code"]
    assert cli("validate", "finance/summary") == 0
    listed = {s["id"]: s for s in cli.json("list")["skills"]}
    assert listed["tax-report"]["description"] == "Builds a tax report. Use for quarterly filings."
    assert listed["finance/summary"]["category"] == "finance"


def test_create_never_overwrites_even_when_racing(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("create", "pdf") == 0
    # A writer that wins between our check and our PUT: the conditional PUT still refuses.
    monkeypatch.setattr(ObjectStore, "alist", _empty_listing)
    assert cli("create", "pdf") == 1
    assert "already exists" in one_error_line(cli.err)


async def _empty_listing(self: ObjectStore, prefix: str, *, delimiter: str | None = None) -> Any:
    return [], []


def test_create_code_scaffold_follows_the_script_contract(cli: Cli, tmp_path: Path) -> None:
    assert cli("create", "number-stats", "--code", "--local", str(tmp_path)) == 0
    folder = tmp_path / "number-stats"
    assert cli("validate", str(folder)) == 0
    # Created without -d: the description is a placeholder, and validate says so.
    assert "1 skill checked: 0 fatal, 0 errors, 1 warning (number-stats)" in cli.out
    assert "placeholder" in cli.out
    result = run_script(folder / "scripts" / "main.py", {"numbers": [3, 1, 2, 10]})
    assert result.returncode == 0, result.stderr
    value = json.loads(result.stdout)  # exactly one JSON value
    assert value == {
        "ok": True,
        "result": {"count": 4, "sum": 16, "mean": 4.0, "median": 2.5, "min": 1, "max": 10},
    }
    bad = run_script(folder / "scripts" / "main.py", {"numbers": ["x"]})
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["ok"] is False
    assert os.access(folder / "scripts" / "main.py", os.X_OK)

    assert cli("create", "number-stats", "--local", str(tmp_path)) == 1
    assert "already exists" in one_error_line(cli.err)


def test_create_code_in_the_bucket_runs_as_downloaded(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    assert cli("create", "echo-stats", "--code") == 0
    script = tmp_path / "main.py"
    script.write_bytes(s3_client.get_object(Bucket=bucket, Key=PREFIX + "echo-stats/scripts/main.py")["Body"].read())
    result = run_script(script, {"numbers": [1.5]})
    assert result.returncode == 0
    assert json.loads(result.stdout)["result"]["count"] == 1


def test_create_code_scaffold_passes_the_script_runner_contract(cli: Cli, moto_endpoint: str, bucket: str) -> None:
    assert cli("create", "echo-stats", "--code", "-d", "Summarises numbers. Use for statistics.") == 0
    backend = S3Backend(bucket, user_id=USER, endpoint_url=moto_endpoint, layout=KeyLayout.seeds())
    try:
        observation = ScriptRunner(backend, timeout=20).run(
            "echo-stats", "main.py", {"numbers": [1, 2, 3]}, loaded=["echo-stats"]
        )
    finally:
        backend.close()
    assert observation.ok, observation
    assert observation.exit_code == 0
    assert observation.result["result"]["count"] == 3


def test_create_rejects_an_over_long_description(cli: Cli, s3_client: Any, bucket: str) -> None:
    assert cli("create", "wordy", "-d", "x" * 1100) == 1
    assert "description is 1100 characters; the limit is 1024" in one_error_line(cli.err)
    assert keys(s3_client, bucket) == {}


@pytest.mark.parametrize("name", ["Bad", "bad_name", "-bad", "bad-", "a--b", "x" * 65, "ñu"])
def test_create_rejects_names_outside_the_spec(cli: Cli, name: str, s3_client: Any, bucket: str) -> None:
    assert cli("create", "--", name) == 2
    assert "invalid skill name" in one_error_line(cli.err)
    assert keys(s3_client, bucket) == {}


# -- validate ---------------------------------------------------------------------------------


def test_validate_local_tree_exit_codes_and_format(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 4)
    assert cli("validate", str(tree)) == 0
    assert "4 skills checked: 0 fatal, 0 errors, 0 warnings" in cli.out

    write(tree, "cat-2/wrong/SKILL.md", skill_md("other-name"))
    write(tree, "broken/SKILL.md", "---\nname: broken\n---\nbody\n")
    assert cli("validate", str(tree)) == 1
    lines = cli.out.strip().splitlines()
    assert f"{tree}/broken/SKILL.md: fatal: missing required field 'description'" in lines
    assert f"{tree}/cat-2/wrong/SKILL.md: error: name 'other-name' does not match folder 'wrong'" in lines
    assert lines[-2] == "6 skills checked: 1 fatal (broken), 1 error (cat-2/wrong), 0 warnings"
    assert cli.json("validate", str(tree), expect=1)["ok"] is False

    # A single SKILL.md file, and a single skill folder.
    assert cli("validate", str(tree / "broken" / "SKILL.md")) == 1
    assert cli.out.startswith(f"{tree}/broken/SKILL.md: fatal: missing required field")
    assert cli("validate", str(tree / "skill-000")) == 0


def test_what_validate_calls_an_error_push_stores_naming_each_skill_and_strict_refuses(
    cli: Cli, tmp_path: Path
) -> None:
    tree = make_tree(tmp_path / "lib", 2)
    write(tree, "cat-2/wrong/SKILL.md", skill_md("other-name"))  # name != folder: an error, loaded
    write(tree, "long/SKILL.md", skill_md("long", description="Does long things. " * 70))  # over 1,024
    checked = cli.json("validate", str(tree), expect=1)
    assert checked["counts"]["error"] == {"problems": 2, "skills": ["cat-2/wrong", "long"]}
    assert {p["skill"]: p["severity"] for p in checked["problems"]} == {"cat-2/wrong": "error", "long": "error"}

    assert cli("push", "--strict", str(tree)) == 1
    assert "--strict refuses 2 skills with errors (cat-2/wrong, long)" in cli.err
    assert cli("push", str(tree)) == 0
    assert "stored 2 skills that break the Agent Skills specification" in cli.err
    assert "  cat-2/wrong: name 'other-name' does not match folder 'wrong'" in cli.err
    assert "  long: description is " in cli.err, cli.err
    assert cli.json("push", str(tree))["skills"] == ["cat-1/skill-001", "cat-2/wrong", "long", "skill-000"]
    cli("push", str(tree))
    assert "break the Agent Skills" not in cli.err  # nothing changed: nothing pushed, no note

    listed = cli.json("list")
    assert listed["counts"]["error"]["skills"] == ["cat-2/wrong", "long"]
    assert {p["id"]: p["severity"] for p in listed["problems"]} == {"cat-2/wrong": "error", "long": "error"}
    assert cli("list") == 0
    assert "problems: 2 errors (cat-2/wrong, long); see 's3skills validate NAME'" in cli.err
    info = cli.json("info", "long")
    assert [p["severity"] for p in info["problems"]] == ["error"]
    assert cli("info", "long") == 0
    assert "SKILL.md: error: description is" in cli.out


def test_validate_and_push_name_the_skills_mcp_will_not_list_and_why(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 1)
    write(tree, "capsule_crm-automation/SKILL.md", skill_md("capsule_crm-automation"))  # '_' breaks the rules
    write(tree, "pdf-tools/SKILL.md", skill_md("pdf"))  # name != folder
    checked = cli.json("validate", str(tree), expect=1)
    unlisted = {item["skill"]: item["reason"] for item in checked["mcp_unlisted"]}
    assert set(unlisted) == {"capsule_crm-automation", "pdf-tools"}
    assert "other than a-z, 0-9 and '-'" in unlisted["capsule_crm-automation"]
    assert "differs from its folder 'pdf-tools'" in unlisted["pdf-tools"]
    assert cli("validate", str(tree)) == 1
    assert "s3skills mcp will not list 2 skills in skills/list" in cli.err
    assert "  pdf-tools: its name 'pdf' differs from its folder 'pdf-tools'" in cli.err

    pushed = cli.json("push", str(tree))
    assert {item["skill"] for item in pushed["mcp_unlisted"]} == {"capsule_crm-automation", "pdf-tools"}
    assert cli.json("validate", "skill-000")["mcp_unlisted"] == []
    assert cli.json("validate", "pdf-tools", expect=1)["mcp_unlisted"][0]["skill"] == "pdf-tools"


def test_validate_skill_in_bucket(cli: Cli, s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "good/SKILL.md", Body=skill_md("good").encode())
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "bad/SKILL.md", Body=skill_md("Bad_Name").encode())
    assert cli("validate", "good") == 0
    assert cli("validate", "bad") == 1
    assert f"s3://{cli.globals[1]}/{PREFIX}bad/SKILL.md: error: name 'Bad_Name' must be" in cli.out
    assert cli("validate", "nothing-like-it") == 1
    assert "unknown skill" in one_error_line(cli.err)


def test_validate_without_a_library_needs_a_local_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "no/such/path"]) == 1
    assert "not a local path" in one_error_line(capsys.readouterr().err)


# -- rm ---------------------------------------------------------------------------------------


def test_rm_deletes_the_whole_folder(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    tree = make_tree(tmp_path / "lib", 2)
    write(tree, "skill-000/scripts/deep/x.py", "")
    cli.json("push", str(tree))
    assert cli("rm", "skill-000") == 2  # stdin is not a terminal: --yes is required
    assert "--yes" in one_error_line(cli.err)
    assert cli("rm", "skill-000", "--yes") == 0
    assert "3 file(s)" in cli.out
    assert set(keys(s3_client, bucket)) == {PREFIX + "cat-1/skill-001/SKILL.md"}
    assert cli("rm", "skill-000", "--yes") == 1


# -- configuration and failure modes ----------------------------------------------------------


def test_missing_bucket_or_user_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("S3SKILLS_BUCKET", raising=False)
    monkeypatch.delenv("S3SKILLS_USER", raising=False)
    assert main(["list"]) == 2
    assert "no bucket: pass --bucket or set S3SKILLS_BUCKET" in one_error_line(capsys.readouterr().err)
    assert main(["--bucket", "b-1", "list"]) == 2
    assert "no user" in one_error_line(capsys.readouterr().err)
    assert main(["--bucket", "b-1", "--user", "../bob", "list"]) == 2
    assert "Invalid user id" in one_error_line(capsys.readouterr().err)
    assert main(["frobnicate"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "no such command 'frobnicate'" in line
    assert line.endswith("(see 's3skills --help')")
    assert main(["list", "--bogus"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "no such option" in line
    assert "--bogus" in line
    assert line.endswith("(see 's3skills list --help')")
    assert main(["info"]) == 2
    assert "missing argument 'NAME'" in one_error_line(capsys.readouterr().err)


def test_environment_configures_bucket_user_and_endpoint(
    moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S3SKILLS_BUCKET", bucket)
    monkeypatch.setenv("S3SKILLS_USER", USER)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    write(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf"))
    assert main(["push", str(tmp_path / "lib"), "--json"]) == 0  # global options after the command too
    capsys.readouterr()
    assert main(["list", "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["skills"]] == ["pdf"]


def test_missing_bucket_is_named(moto_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = ["--bucket", "no-such-bucket", "--user", USER, "--endpoint-url", moto_endpoint]
    assert main([*g, "list"]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("s3skills: error: bucket 'no-such-bucket' does not exist")
    assert "--create-bucket" in line  # says how to create it
    write(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf"))
    assert main([*g, "push", str(tmp_path / "lib")]) == 1
    assert "does not exist" in one_error_line(capsys.readouterr().err)
    assert main([*g, "push", "--create-bucket", str(tmp_path / "lib")]) == 0


def _count_connects(monkeypatch: pytest.MonkeyPatch, port: int) -> list[int]:
    """Count the connections this process opens to `port` on loopback (in a one-item list)."""
    count = [0]
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def counted(address: Any) -> None:
        if isinstance(address, tuple) and address[1] == port:
            count[0] += 1

    def counting_connect(self: socket.socket, address: Any) -> None:
        counted(address)
        connect(self, address)

    def counting_connect_ex(self: socket.socket, address: Any) -> int:
        counted(address)
        return connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", counting_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", counting_connect_ex)
    return count


def test_unreachable_endpoint_fails_fast(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"  # nothing listens there
    attempts = _count_connects(monkeypatch, port)
    assert main(["--bucket", "b-1", "--user", USER, "--endpoint-url", endpoint, "list"]) == 1
    # A person is waiting: two requests (the manifest's GET, then the LIST the index falls back
    # to), each tried CLI_MAX_ATTEMPTS (2) times, not the library's default of 4 with backoff.
    assert attempts == [2 * CLI_MAX_ATTEMPTS]
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"s3skills: error: cannot reach the S3 endpoint {endpoint}")


def test_no_credentials_is_one_line(
    moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    g = ["--bucket", bucket, "--user", USER, "--endpoint-url", moto_endpoint, "list"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "")
    assert main(g) == 1
    assert "no AWS credentials found" in one_error_line(capsys.readouterr().err)

    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    assert main(g) == 1
    assert "AWS profile not found" in one_error_line(capsys.readouterr().err)
    monkeypatch.delenv("AWS_PROFILE")
    assert main(["--profile", "also-missing", *g]) == 1
    assert "(also-missing) could not be found" in one_error_line(capsys.readouterr().err)


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("list", "info", "create", "enable", "disable", "validate", "push", "pull", "rm", "demo"):
        assert f"  {command} " in out
    for option in ("--bucket", "--user", "--endpoint-url", "--profile", "--region", "--layout", "--json", "--debug"):
        assert option in out
    assert main(["push", "--help"]) == 0
    assert "--dry-run" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "s3skills 0.2.0"
    assert main([]) == 2  # no command: the help, on stderr
    assert "Commands:" in capsys.readouterr().err


# -- global options at any position -----------------------------------------------------------


def test_global_options_are_honoured_after_the_command(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S3SKILLS_LAYOUT", "seeds")
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "pdf/SKILL.md", Body=skill_md("pdf").encode())
    argv = ["list", "--bucket", bucket, "--user", USER, "--endpoint-url", moto_endpoint, "--layout", "seeds", "--json"]
    assert main(argv) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["skills"]] == ["pdf"]
    # Split between both positions.
    assert main(["--bucket", bucket, "--json", "info", "pdf", "--user", USER, "--endpoint-url", moto_endpoint]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "pdf"


def test_a_global_option_after_the_command_wins(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S3SKILLS_LAYOUT", "seeds")
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "pdf/SKILL.md", Body=skill_md("pdf").encode())
    g = ["--user", USER, "--endpoint-url", moto_endpoint, "--json"]
    assert main(["--bucket", "no-such-bucket", *g, "list", "--bucket", bucket]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["skills"]] == ["pdf"]
    assert main(["--bucket", bucket, *g, "list", "--bucket", "no-such-bucket"]) == 1
    assert "bucket 'no-such-bucket' does not exist" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("position", ["before", "after"])
def test_debug_shows_the_traceback(moto_endpoint: str, position: str) -> None:
    g = ["--bucket", "no-such-bucket", "--user", USER, "--endpoint-url", moto_endpoint]
    argv = ["--debug", *g, "list"] if position == "before" else [*g, "list", "--debug"]
    with pytest.raises(BucketNotFound):
        main(argv)


def test_layout_option_and_environment(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "pdf/SKILL.md", Body=skill_md("pdf").encode())
    g = ["--bucket", bucket, "--user", USER, "--endpoint-url", moto_endpoint, "--json"]
    monkeypatch.setenv("S3SKILLS_LAYOUT", "seeds")
    assert main([*g, "list"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["skills"]] == ["pdf"]

    assert main([*g, "--layout", "flat", "list"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "'flat' is not one of 'users', 'seeds'" in line
    monkeypatch.setenv("S3SKILLS_LAYOUT", "flat")
    assert main([*g, "list"]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        "s3skills: error: invalid S3SKILLS_LAYOUT 'flat': use one of users, seeds"
    )
    assert main([*g, "list", "--layout", "seeds"]) == 0  # the option wins over the environment
    capsys.readouterr()


def test_the_default_layout_keeps_a_users_library_under_users(
    moto_endpoint: str, bucket: str, s3_client: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("S3SKILLS_LAYOUT", raising=False)
    s3_client.put_object(Bucket=bucket, Key=f"users/{USER}/skills/docx/SKILL.md", Body=skill_md("docx").encode())
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "pdf/SKILL.md", Body=skill_md("pdf").encode())  # seeds' place
    assert main(["--bucket", bucket, "--user", USER, "--endpoint-url", moto_endpoint, "--json", "list"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["skills"]] == ["docx"]


def test_json_prints_exactly_one_document(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 3)
    assert cli("--json", "push", str(tree)) == 0
    assert json.loads(cli.out)["ok"] is True  # json.loads refuses anything after the document
    assert cli("list", "--json") == 0
    assert len(json.loads(cli.out)["skills"]) == 3


def test_scan_tree_is_pure_and_reports_findings(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 2)
    write(tree, "README.md", "top-level readme")
    write(tree, "a/b/c/SKILL.md", skill_md("c"))
    scanned = scan_tree(tree)
    # A SKILL.md at any depth is a skill: its parent folder is the category.
    assert sorted(scanned.skills) == ["b/c", "cat-1/skill-001", "skill-000"]
    assert scanned.mapping["b/c"] == "a/b/c"
    ignored = {i.path: i.reason for i in scanned.ignored}
    assert ignored["README.md"] == "not inside a skill folder"


# -- real processes ---------------------------------------------------------------------------


def test_entry_point_runs_a_command_in_a_real_process(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    """The console script (or `python -m s3skills.cli` when it is not installed)."""
    s3_client.put_object(Bucket=bucket, Key=PREFIX + "pdf/SKILL.md", Body=skill_md("pdf").encode())
    script = Path(sys.executable).with_name("s3skills")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "s3skills.cli"]
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "S3SKILLS_BUCKET": bucket,
        "S3SKILLS_LAYOUT": "seeds",
    }
    argv = ["--user", USER, "--endpoint-url", moto_endpoint, "list", "--json"]
    result = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert [s["id"] for s in json.loads(result.stdout)["skills"]] == ["pdf"]


def test_pull_tree_sync_twin(tmp_path: Path, store: ObjectStore) -> None:
    tree = make_tree(tmp_path / "lib", 2)
    push_tree(store, tree, PREFIX)
    report = pull_tree(store, PREFIX, tmp_path / "out", skill="skill-000")
    assert [i.path for i in report.downloaded] == ["skill-000/SKILL.md", "skill-000/references/notes.md"]


# -- output of big pushes, dry runs, info, list -----------------------------------------------


def test_a_big_push_prints_a_summary_and_a_push_that_changes_nothing_prints_one_line(cli: Cli, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "lib", 12)
    assert cli("push", str(tree)) == 0
    lines = cli.out.strip().replace("\n  ", " ").splitlines()  # a line over 200 characters is wrapped
    assert len(lines) == 2
    assert lines[0].startswith("Uploaded 14 files (")
    assert "of 12 skills" in lines[0]
    assert lines[1].startswith("Changed: cat-0/skill-005, cat-1/skill-001, ")
    assert re.search(r", \+\d+ more \(-v lists each skill with its version\)$", lines[1])  # a bounded line

    assert cli("push", str(tree)) == 0
    assert cli.out.strip().splitlines() == [
        f"Nothing to push: 12 skills in s3://{cli.globals[1]}/{PREFIX} are up to date."
    ]

    write(tree, "skill-000/SKILL.md", skill_md("skill-000", "Changed description. Use it when changed."))
    assert cli("push", "-v", str(tree)) == 0
    lines = cli.out.strip().splitlines()
    assert "of 1 skill to" in lines[0]
    assert len(lines) == 2
    assert lines[1].startswith("skill-000: version ")


def test_info_names_the_two_versions_apart_and_list_marks_disabled_skills(cli: Cli, tmp_path: Path) -> None:
    write(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf", version="1.2"))
    write(tmp_path / "lib", "forms/SKILL.md", skill_md("forms"))
    cli("push", str(tmp_path / "lib"))
    assert cli("info", "pdf") == 0
    assert "version (frontmatter)" in cli.out
    assert "1.2" in cli.out
    assert "content version" in cli.out
    assert cli("disable", "forms") == 0
    assert cli("list", "--all") == 0
    marks = {line.split()[0]: line.split()[1] for line in cli.out.splitlines()[2:]}
    assert marks == {"forms": "no", "pdf": "yes"}  # ON: the disabled one is marked
    assert f"2 skill(s) of {USER}, 1 disabled" in cli.out


def test_migrate_dry_run_names_every_key_it_would_leave(cli: Cli, s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key="ana/skills/pdf/SKILL.md", Body=skill_md("pdf").encode())
    s3_client.put_object(Bucket=bucket, Key="random/notes.txt", Body=b"x")
    s3_client.put_object(Bucket=bucket, Key="threads/t9/a.txt", Body=b"x")
    assert cli("migrate-layout", "--dry-run") == 0
    assert f"would leave s3://{bucket}/random/notes.txt: not a library, thread or ticket" in cli.out
    assert f"would leave s3://{bucket}/threads/t9/a.txt: the seeds' layout does not say whose thread it is" in cli.out
