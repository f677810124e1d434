"""The organisation library from the CLI (`--shared`), and custom key layouts (`--layout-file`).

On moto, through `s3skills.cli.main` in-process: `--shared NAME` without `--user` acts on
`shared/NAME/skills/`; with `--user`, `list` shows what that user's agent sees (the user's
skills over the shared ones, with their source), which the agent's own library confirms.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from s3skills.aio import run_sync
from s3skills.cli import main
from s3skills.config import Config
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.storage import S3ObjectStore
from s3skills.tenancy import Tenant
from s3skills.testing import skill_md
from s3skills.testing import write_file as write


class Run:
    """`main` in-process on one moto bucket, with the given global options."""

    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--bucket", bucket, "--endpoint-url", endpoint]
        self.capsys = capsys
        self.out = self.err = ""

    def __call__(self, *argv: str) -> int:
        self.capsys.readouterr()
        code = main([*self.base, *argv])
        captured = self.capsys.readouterr()
        self.out, self.err = captured.out, captured.err
        return code

    def json(self, *argv: str) -> Any:
        code = self("--json", *argv)
        assert code == 0, self.err
        return json.loads(self.out)


@pytest.fixture
def run(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(moto_endpoint, bucket, capsys)


def keys(s3_client: Any, bucket: str) -> set[str]:
    return {o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket).get("Contents", [])}


def tree(root: Path, *names: str) -> Path:
    for name in names:
        write(root, f"{name}/SKILL.md", skill_md(name, f"Handles {name} work. Use it for {name}."))
    return root


def test_shared_without_user_acts_on_the_organisation_library(
    run: Run, tmp_path: Path, s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run("--shared", "org", "push", str(tree(tmp_path / "org", "pdf", "forms"))) == 0, run.err
    assert {k for k in keys(s3_client, bucket) if k.endswith("SKILL.md")} == {
        "shared/org/skills/pdf/SKILL.md",
        "shared/org/skills/forms/SKILL.md",
    }
    listed = run.json("--shared", "org", "list")
    assert sorted(s["id"] for s in listed["skills"]) == ["forms", "pdf"]
    assert run("--shared", "org", "disable", "forms") == 0
    monkeypatch.setenv("S3SKILLS_SHARED", "org")  # the environment names it too
    assert [s["id"] for s in run.json("list")["skills"]] == ["pdf"]
    assert run("list") == 0
    assert "of shared library org" in run.out
    assert "1 disabled skill(s) not shown (forms)" in run.err
    assert run.json("info", "pdf")["source"] == "shared"


def test_shared_with_user_lists_what_the_agent_sees_with_the_source(
    run: Run, tmp_path: Path, moto_endpoint: str, bucket: str
) -> None:
    assert run("--shared", "org", "push", str(tree(tmp_path / "org", "pdf", "forms", "sign"))) == 0
    assert run("--user", "bob", "push", str(tree(tmp_path / "bob", "pdf", "notes"))) == 0  # bob's pdf wins

    listed = run.json("--user", "bob", "--shared", "org", "list")
    seen = {s["id"]: s["source"] for s in listed["skills"]}
    assert seen == {"pdf": "user", "notes": "user", "forms": "shared", "sign": "shared"}
    assert [s["id"] for s in run.json("--user", "bob", "list")["skills"]] == ["notes", "pdf"]

    # The agent's own library with the shared library configured sees exactly these.
    store = S3ObjectStore(bucket, endpoint_url=moto_endpoint)
    try:
        agent = SkillLibrary(store, Config(shared_library="org"), tenant=lambda: Tenant(user_id="bob"))
        assert {s.id: s.source for s in agent.index()} == seen
    finally:
        run_sync(store.aclose_all())

    assert run("--user", "bob", "--shared", "org", "list") == 0
    assert "SOURCE" in run.out
    assert "4 skill(s) of bob (over shared library org)" in run.out
    assert run.json("--user", "bob", "--shared", "org", "info", "sign")["source"] == "shared"
    assert run.json("--user", "bob", "--shared", "org", "info", "pdf")["source"] == "user"


def test_a_layout_file_is_used_and_checked_for_isolation(run: Run, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    good = tmp_path / "layout.toml"
    good.write_text(
        '[layout]\nroot = "prod/"\nuser_skills = "people/{user_id}/skills/"\n'
        'workspace = "people/{user_id}/threads/{thread_id}/"\n'
    )
    assert run("--layout-file", str(good), "--user", "ana", "push", str(tree(tmp_path / "lib", "pdf"))) == 0, run.err
    assert "prod/people/ana/skills/pdf/SKILL.md" in keys(s3_client, bucket)
    assert "warning" not in run.err
    assert [s["id"] for s in run.json("--layout-file", str(good), "--user", "ana", "list")["skills"]] == ["pdf"]

    risky = tmp_path / "risky.json"
    risky.write_text(json.dumps({"user_skills": "{user_id}/skills/", "workspace": "threads/{thread_id}/"}))
    assert run("--layout-file", str(risky), "--user", "ana", "list") == 0
    err = " ".join(run.err.split())  # warnings over 200 characters are wrapped
    assert "keys threads by thread id only: whoever knows a thread id reaches its files" in err
    assert "the user id cannot be shared, threads, tickets" in err

    overlapping = tmp_path / "bad.toml"
    overlapping.write_text('user_skills = "lib/{user_id}/"\nworkspace = "lib/{thread_id}/"\n')
    assert run("--layout-file", str(overlapping), "--user", "ana", "list") == 2
    assert "layout file refused" in run.err
    assert "can overlap" in run.err
    unknown = tmp_path / "typo.toml"
    unknown.write_text('user_skill = "u/{user_id}/skills/"\n')
    assert run("--layout-file", str(unknown), "--user", "ana", "list") == 2
    assert "unknown fields ['user_skill']" in run.err
    # The MCP server takes the layout file too (given before `mcp` or after it), never drops it.
    assert run("--layout-file", str(good), "--user", "ana", "mcp", "--check") == 0, run.err
    assert "0 of 1 skills are not listed" in run.err
    assert run("--user", "ana", "mcp", "--layout-file", str(good), "--layout", "seeds", "--check") == 2
    assert "give --layout or --layout-file, not both" in run.err


def test_the_default_layouts_need_no_isolation_note_but_the_seeds_one_does() -> None:
    assert KeyLayout().isolation_notes() == []
    notes = KeyLayout.seeds().isolation_notes()
    assert any("thread id only" in n for n in notes)
