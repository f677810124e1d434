"""Pushing and pulling trees shaped like public skill repositories (issue 11, items 1-6, 12-16).

The library side is a `MemoryObjectStore` for the transfer functions and a moto server
for the command line; every tree is generated in `tmp_path`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.cli import main
from s3skills.fs import S3Backend
from s3skills.layout import KeyLayout
from s3skills.skills import SkillLibrary
from s3skills.testing import DEFAULT_DESCRIPTION, MemoryObjectStore, builders
from s3skills.testing import write_file as write
from s3skills.transfer import PushRefused, pull_tree, push_tree, scan_tree

SEEDS = KeyLayout.seeds()
USER = "alice"
PREFIX = f"{USER}/skills/"


def skill_md(name: str, description: str = DEFAULT_DESCRIPTION) -> str:
    return builders.skill_md(name, description, body=f"\n# {name}\n\nInstructions for {name}.\n")


def skill(root: Path, rel: str, *, files: dict[str, str] | None = None, description: str | None = None) -> None:
    name = rel.rsplit("/", 1)[-1]
    write(root, f"{rel}/SKILL.md", skill_md(name, description or f"Handles {name}. Use it for {name} work."))
    for inner, text in (files or {}).items():
        write(root, f"{rel}/{inner}", text)


def library(store: MemoryObjectStore) -> SkillLibrary:
    return S3Backend("memory", user_id=USER, store=store, layout=SEEDS).skills


# -- items 1, 2, 4: the mapping rule ----------------------------------------------------------


def test_plugin_repo_skills_at_any_depth_map_to_plugin_category(tmp_path: Path) -> None:
    repo = tmp_path / "claude-plugins-official"
    skill(repo, "plugins/sentry/skills/triage", files={"references/guide.md": "guide"})
    skill(repo, "plugins/hashicorp/skills/terraform-style")
    skill(repo, "external_plugins/acme/skills/access")
    write(repo, "README.md", "a repo readme")
    write(repo, ".git/config", "[core]")
    write(repo, "plugins/sentry/node_modules/x/SKILL.md", skill_md("x"))

    store = MemoryObjectStore()
    report = push_tree(store, repo, PREFIX, dry_run=True)
    assert report.mapping == {
        "acme/access": "external_plugins/acme/skills/access",
        "hashicorp/terraform-style": "plugins/hashicorp/skills/terraform-style",
        "sentry/triage": "plugins/sentry/skills/triage",
    }
    assert store.keys() == []  # a dry run writes nothing

    push_tree(store, repo, PREFIX)
    lib = library(store)
    assert [s.id for s in lib.index()] == ["acme/access", "hashicorp/terraform-style", "sentry/triage"]
    assert lib.instructions("triage").strip().endswith("Instructions for triage.")
    stored = store.keys()
    assert PREFIX + "sentry/triage/references/guide.md" in stored
    assert not any("node_modules" in k or ".git" in k for k in stored)


def test_dot_folder_categories_are_pushed_loaded_and_readable(tmp_path: Path) -> None:
    repo = tmp_path / "openai-skills"
    skill(repo, "skills/.curated/gh-fix-ci", files={"scripts/run.sh": "echo hi\n"})
    skill(repo, "skills/.system/skill-creator")
    store = MemoryObjectStore()
    report = push_tree(store, repo, PREFIX)
    assert report.skills == [".curated/gh-fix-ci", ".system/skill-creator"]

    backend = S3Backend("memory", user_id=USER, store=store, layout=SEEDS)
    backend.load_skill("gh-fix-ci")
    assert backend.loaded_skills == [".curated/gh-fix-ci"]
    read = backend.read("/skills/gh-fix-ci/scripts/run.sh")
    assert read.error is None, read.error
    assert read.file_data is not None
    assert "echo hi" in read.file_data["content"]


def test_nested_skill_is_its_own_skill_never_a_file_of_the_parent(tmp_path: Path) -> None:
    repo = tmp_path / "awesome-copilot"
    skill(repo, "skills/qdrant-scaling", files={"notes.md": "outer notes"})
    skill(repo, "skills/qdrant-scaling/minimize-latency", files={"tips.md": "inner tips"})
    store = MemoryObjectStore()
    report = push_tree(store, repo, PREFIX)
    assert report.skills == ["minimize-latency", "qdrant-scaling"]
    (nested,) = report.nested
    assert nested.path == "skills/qdrant-scaling/minimize-latency/SKILL.md"
    assert "separate skill 'minimize-latency'" in nested.reason
    stored = store.keys()
    assert sorted(k[len(PREFIX) :] for k in stored if k.startswith(PREFIX)) == [
        "minimize-latency/SKILL.md",
        "minimize-latency/tips.md",
        "qdrant-scaling/SKILL.md",
        "qdrant-scaling/notes.md",
    ]
    assert {s.id for s in library(store).index()} == {"minimize-latency", "qdrant-scaling"}


def test_a_skill_that_is_also_a_category_is_refused_with_every_clash_listed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    skill(repo, "a/skills/common", description="Common things, first. Use it for the first.")  # -> a/common
    skill(repo, "b/a/common", description="Common things, second. Use it for the second.")  # -> a/common too
    skill(repo, "tools")  # a skill ...
    skill(repo, "x/tools/calc")  # ... and a category
    skill(repo, "fine")
    store = MemoryObjectStore()
    with pytest.raises(PushRefused) as info:
        push_tree(store, repo, PREFIX, strict=True)
    refused = {i.path: i.reason for i in info.value.report.refused}
    assert "both a skill" in refused["tools/SKILL.md"]
    assert "both a skill" in refused["x/tools/calc/SKILL.md"]
    assert "a/skills/common/SKILL.md" not in refused  # differing folders got distinct ids instead
    assert store.keys() == []
    # Without --strict the ambiguous folders are left out (named) and the rest is pushed.
    report = push_tree(store, repo, PREFIX, dry_run=True)
    assert {i.path for i in report.refused} == {"tools/SKILL.md", "x/tools/calc/SKILL.md"}
    assert "fine" in report.skills
    assert "tools" not in report.skills

    # --category puts every skill in one category; two differing folders then stay ambiguous.
    tree = scan_tree(repo, category="mine")
    assert {"mine/fine", "mine/calc", "mine/tools"} <= set(tree.skills)
    assert any("mine/common" in c for c in tree.clashes)


def test_identical_copies_collapse_and_differing_folders_get_the_shortest_distinguishing_id(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "deepagents"
    for root in ("examples", "libs/cli/examples", "libs/code/examples"):
        skill(repo, f"{root}/skills/web-research", files={"notes.md": "same notes"})  # three identical copies
    skill(repo, "libs/cli/examples/skills/report", description="Reports for the CLI. Use it in the CLI.")
    skill(repo, "libs/code/examples/skills/report", description="Reports for code. Use it for code.")
    store = MemoryObjectStore()
    report = push_tree(store, repo, PREFIX)
    assert report.skills == ["cli-examples/report", "code-examples/report", "examples/web-research"]
    assert report.mapping["examples/web-research"] == "examples/skills/web-research"  # the shortest path is kept
    assert sorted(i.path for i in report.duplicates) == [
        "libs/cli/examples/skills/web-research/SKILL.md",
        "libs/code/examples/skills/web-research/SKILL.md",
    ]
    assert all("byte-identical copy of examples/skills/web-research" in i.reason for i in report.duplicates)
    assert {i.path: i.reason for i in report.renamed}["libs/cli/examples/skills/report/SKILL.md"].endswith(
        "pushed as 'cli-examples/report' (the shortest distinguishing id)"
    )
    descriptions = {s.id: s.metadata.description for s in library(store).index()}
    assert descriptions["cli-examples/report"].startswith("Reports for the CLI")
    assert descriptions["code-examples/report"].startswith("Reports for code")
    assert PREFIX + "examples/web-research/notes.md" in store.keys()


def test_delete_never_removes_the_remote_copy_of_a_refused_skill(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    skill(repo, "a/common")
    skill(repo, "keep")
    store = MemoryObjectStore()
    push_tree(store, repo, PREFIX, category="lib")
    skill(repo, "b/skills/common", description="Another common. Use it elsewhere.")  # lib/common twice: refused
    report = push_tree(store, repo, PREFIX, delete=True, category="lib")  # the clash is left out
    assert report.skills == ["lib/keep"]
    assert report.deleted == []
    stored = store.keys()
    assert PREFIX + "lib/common/SKILL.md" in stored


def test_duplicate_leaf_across_pushes_is_left_out_naming_both_sources_not_a_silent_overwrite(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    skill(first, "skills/access", description="Grants access to the first system. Use for system one.")
    skill(second, "skills/access", description="Grants access to the second system. Use for system two.")
    skill(second, "skills/billing")
    store = MemoryObjectStore()
    push_tree(store, first, PREFIX)

    plan = push_tree(store, second, PREFIX, dry_run=True)  # a dry run lists the conflict
    assert [c.path for c in plan.conflicts] == ["access"]
    report = push_tree(store, second, PREFIX)  # the clash is left out, the rest is stored
    assert report.left_out == ["access"]
    assert report.skills == ["billing"]
    (conflict,) = report.conflicts
    assert conflict.reason.startswith("library copy from one/skills/access, this one from two/skills/access;")
    assert "keep both: --category-from-repo; take it over: --replace" in conflict.reason
    descriptions = {s.id: s.metadata.description for s in library(store).index()}
    assert "system one" in descriptions["access"]
    assert set(descriptions) == {"access", "billing"}

    # Pushing the first folder again is no conflict; --strict does not replace, --replace does.
    assert push_tree(store, first, PREFIX).conflicts == []
    with pytest.raises(PushRefused, match=r"take them over \(--replace\)"):
        push_tree(store, second, PREFIX, strict=True)
    push_tree(store, second, PREFIX, replace=True)
    lib = S3Backend("memory", user_id=USER, store=store, layout=SEEDS, catalog_ttl=None).skills
    assert "system two" in lib.index(refresh=True)[0].metadata.description


def test_skill_nested_under_a_remote_skill_is_left_out_and_strict_refuses_it(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    skill(tmp_path / "one", "tools")
    push_tree(store, tmp_path / "one", PREFIX)
    skill(tmp_path / "two", "tools/calc")
    skill(tmp_path / "two", "other")
    with pytest.raises(PushRefused) as info:
        push_tree(store, tmp_path / "two", PREFIX, strict=True)
    (conflict,) = info.value.report.conflicts
    assert conflict.path == "tools/calc"
    assert "is a skill in the library" in conflict.reason
    assert PREFIX + "other/SKILL.md" not in store.keys()

    report = push_tree(store, tmp_path / "two", PREFIX)
    assert report.left_out == ["tools/calc"]
    assert report.skills == ["other"]
    assert PREFIX + "tools/calc/SKILL.md" not in store.keys()
    assert PREFIX + "tools/SKILL.md" in store.keys()


# -- item 5: disable survives push --------------------------------------------------------------


def test_disable_survives_a_push_of_the_unchanged_tree(tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    skill(tree, "tools/calc")
    store = MemoryObjectStore()
    push_tree(store, tree, PREFIX)
    lib = library(store)
    lib_key = PREFIX + "tools/calc/SKILL.md"
    body = store.keys()
    assert lib_key in body
    _disable(store, lib_key)

    plan = push_tree(store, tree, PREFIX, dry_run=True)
    assert plan.disabled == ["tools/calc"]
    report = push_tree(store, tree, PREFIX)
    assert report.uploaded == []
    assert [i.reason for i in report.skipped] == ["unchanged (kept disabled)"]
    assert lib.index(include_disabled=True, refresh=True)[0].metadata.enabled is False

    # A local edit is pushed, still disabled; --enable enables.
    write(tree, "tools/calc/SKILL.md", skill_md("calc", "Calculates. Use it for sums and products."))
    push_tree(store, tree, PREFIX)
    (info,) = lib.index(include_disabled=True, refresh=True)
    assert info.metadata.enabled is False
    assert "products" in info.metadata.description
    push_tree(store, tree, PREFIX, enable=True)
    assert lib.index(refresh=True)[0].metadata.enabled is True


def _disable(store: MemoryObjectStore, key: str) -> None:
    """What `s3skills disable` writes: the SKILL.md re-rendered with `enabled: false`."""
    from s3skills.aio import run_sync
    from s3skills.skills import parse_skill_md, render_skill_md

    body = run_sync(store.aget(key))
    parsed = parse_skill_md(body.data)
    text = render_skill_md(parsed.metadata.model_copy(update={"enabled": False}), parsed.body)
    store.put_object(key, text)


# -- item 6: pull keeps local edits -------------------------------------------------------------


def test_pull_keeps_local_edits_unless_force_or_backup(tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    skill(tree, "pdf", files={"notes.md": "remote notes"})
    store = MemoryObjectStore()
    push_tree(store, tree, PREFIX)
    dest = tmp_path / "copy"
    assert len(pull_tree(store, PREFIX, dest).downloaded) == 2

    write(dest, "pdf/SKILL.md", "my local edit")
    report = pull_tree(store, PREFIX, dest)
    assert [i.path for i in report.kept] == ["pdf/SKILL.md"]
    assert (dest / "pdf/SKILL.md").read_text() == "my local edit"

    report = pull_tree(store, PREFIX, dest, backup=True)
    assert [i.reason for i in report.backups] == ["SKILL.md.s3skills-backup"]
    assert (dest / "pdf/SKILL.md.s3skills-backup").read_text() == "my local edit"
    assert "Instructions for pdf" in (dest / "pdf/SKILL.md").read_text()
    # The backup is never pushed back.
    assert "pdf/SKILL.md.s3skills-backup" in {i.path for i in scan_tree(dest).ignored}

    write(dest, "pdf/notes.md", "edited again")
    report = pull_tree(store, PREFIX, dest, force=True)
    assert [i.path for i in report.downloaded] == ["pdf/notes.md"]
    assert (dest / "pdf/notes.md").read_text() == "remote notes"


# -- the command line ---------------------------------------------------------------------------


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, USER)


def test_cli_disable_then_push_keeps_it_disabled(cli: Cli, tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    skill(tree, "tools/calc")
    assert cli("push", str(tree)) == 0
    assert cli("disable", "calc") == 0
    assert cli("push", "--dry-run", str(tree)) == 0
    assert "kept disabled (use --enable to enable): tools/calc" in cli.err
    assert cli("push", str(tree)) == 0
    assert cli.out.startswith("Nothing to push: 1 skill in ")  # kept disabled: nothing to write
    assert cli("--json", "list", "--all") == 0
    assert json.loads(cli.out)["skills"][0]["enabled"] is False
    # disable kept the recorded source: editing and pushing again is no "unknown source" replace.
    write(tree, "tools/calc/SKILL.md", skill_md("calc", "Calculates better. Use it for sums."))
    assert cli("--json", "push", str(tree)) == 0
    pushed = json.loads(cli.out)
    assert pushed["replaced"] == []
    assert pushed["disabled"] == ["tools/calc"]


def test_cli_dry_run_lists_a_conflict_and_exits_1(cli: Cli, tmp_path: Path) -> None:
    skill(tmp_path / "one", "skills/access", description="First access. Use it for the first system.")
    skill(tmp_path / "two", "skills/access", description="Second access. Use it for the second system.")
    assert cli("push", str(tmp_path / "one")) == 0
    assert cli("push", "--dry-run", str(tmp_path / "two")) == 1  # every skill of DIR would be left out
    assert "left out 1 skill whose library copy was pushed from another folder (kept):" in cli.err
    assert "access: library copy from one/skills/access, this one from " in cli.err
    assert cli("push", str(tmp_path / "two")) == 1
    assert "take it over: --replace" in cli.err
    assert "keep both: --category-from-repo" in cli.err
    assert "validate" not in cli.err  # the skills are valid: the message names the flag that helps
    assert cli("push", "--strict", "--dry-run", str(tmp_path / "two")) == 1
    assert "the push would be refused: 1 skill(s) in the library were pushed from another folder (access)" in cli.err
    assert cli("push", "--strict", str(tmp_path / "two")) == 1
    assert "--category-from-repo" in cli.err
    assert "--replace" in cli.err
    assert cli("push", "--replace", str(tmp_path / "two")) == 0


def test_pull_edit_push_just_works_and_a_push_by_someone_else_since_is_a_conflict(cli: Cli, tmp_path: Path) -> None:
    skill(tmp_path / "team", "skills/access", description="Grants access. Use it for the access system.")
    assert cli("push", str(tmp_path / "team")) == 0
    mine = tmp_path / "mine"
    assert cli("pull", str(mine)) == 0
    write(mine, "access/SKILL.md", skill_md("access", "Grants access, edited. Use it for the access system."))
    assert cli("push", str(mine)) == 0, cli.err
    assert "conflict" not in cli.err
    assert "edited" in cli.json("info", "access")["metadata"]["description"]

    # Someone pushes from the team folder after my pull: my next push must not overwrite it silently.
    assert cli("pull", str(mine)) == 0
    skill(tmp_path / "team", "skills/access", description="Grants access, the team's. Use it for the access system.")
    assert cli("push", "--replace", str(tmp_path / "team")) == 0
    write(mine, "access/SKILL.md", skill_md("access", "Grants access, mine again. Use it for the access system."))
    assert cli("push", str(mine)) == 1
    assert "access: library copy from team/skills/access, this one from " in cli.err


def test_cli_pull_reports_kept_files_and_exits_1(cli: Cli, tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    skill(tree, "pdf")
    assert cli("push", str(tree)) == 0
    dest = tmp_path / "copy"
    assert cli("pull", str(dest)) == 0
    write(dest, "pdf/SKILL.md", "edited")
    assert cli("pull", str(dest)) == 1
    assert "kept" in cli.err
    assert "--force or --backup" in cli.err
    assert (dest / "pdf/SKILL.md").read_text() == "edited"
    assert cli("pull", "--backup", str(dest)) == 0
    assert (dest / "pdf/SKILL.md.s3skills-backup").read_text() == "edited"


def test_missing_bucket_says_how_to_create_it_and_dry_run_previews(
    moto_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "lib"
    skill(tree, "pdf")
    g = ["--bucket", "not-created-yet", "--user", USER, "--endpoint-url", moto_endpoint]
    assert main([*g, "push", str(tree)]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert "--create-bucket" in err
    assert main([*g, "push", "--dry-run", "--create-bucket", str(tree)]) == 0
    out = capsys.readouterr().out
    assert "Would upload 1 file" in out
    assert "+ pdf/SKILL.md (new" in out


def test_json_errors_are_json_on_stdout(moto_endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    g = ["--bucket", "not-created-yet", "--user", USER, "--endpoint-url", moto_endpoint]
    assert main([*g, "--json", "list"]) == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["ok"] is False
    assert "does not exist" in document["error"]
    assert captured.err.startswith("s3skills: error: ")
    assert main(["--json", "list", "--no-such-flag"]) == 2
    assert json.loads(capsys.readouterr().out)["status"] == 2


@pytest.mark.parametrize("output", [["--json"], []])
@pytest.mark.slow
def test_piped_to_head_there_is_no_broken_pipe(
    moto_endpoint: str, bucket: str, s3_client: Any, output: list[str]
) -> None:
    long = "Does a thing with many words. " * 15  # ~200 KB of output: more than a pipe holds
    for i in range(300):
        body = skill_md(f"skill-{i:03d}", long.strip())
        s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}skill-{i:03d}/SKILL.md", Body=body)
    env_args = ["--bucket", bucket, "--user", USER, "--endpoint-url", moto_endpoint, "--layout", "seeds"]
    command = [sys.executable, "-m", "s3skills.cli", *env_args, "list", *output]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as producer:
        assert producer.stdout is not None
        assert producer.stderr is not None
        producer.stdout.readline()  # like `head -1`
        producer.stdout.close()
        err = producer.stderr.read().decode()
        producer.wait(timeout=120)
    assert "Broken pipe" not in err
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err


def test_dry_run_names_files_mapping_and_ignored(cli: Cli, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    skill(repo, "plugins/x/skills/y", files={"scripts/run.py": "print(1)\n"})
    write(repo, "README.md", "readme")
    assert cli("push", "--dry-run", str(repo)) == 0
    assert "x/y <- plugins/x/skills/y" in cli.out
    assert "+ x/y/scripts/run.py (new" in cli.out
    assert "README.md: not inside a skill folder" in cli.out
    assert "Would upload 2 files" in cli.out


def test_create_without_description_is_disabled_and_validate_warns(cli: Cli) -> None:
    assert cli("create", "draft-skill") == 0
    assert "(disabled)" in cli.out
    assert "s3skills enable draft-skill" in cli.out
    assert cli("--json", "list") == 0
    assert json.loads(cli.out)["skills"] == []  # an agent never sees a TODO skill
    assert cli("validate", "draft-skill") == 0
    assert "warning: the description is a placeholder" in cli.out
    assert "1 skill checked: 0 fatal, 0 errors, 1 warning (draft-skill)" in cli.out


def test_create_refuses_a_leaf_that_exists_in_another_category(cli: Cli) -> None:
    assert cli("create", "calc", "--category", "tools", "-d", "Calculates. Use it for sums.") == 0
    assert cli("create", "calc", "-d", "Another calc. Use it for other sums.") == 1
    assert "a skill named 'calc' already exists: tools/calc" in cli.err


def test_a_name_starting_with_a_hyphen_is_accepted_after_double_dash(cli: Cli, s3_client: Any, bucket: str) -> None:
    body = skill_md("2chat-automation")
    s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}-2chat-automation/SKILL.md", Body=body)
    assert cli("info", "-2chat-automation") == 2
    assert "put '--' before it" in cli.err
    assert cli("info", "--", "-2chat-automation") == 0
    assert cli("disable", "--", "-2chat-automation") == 0
    assert cli("enable", "--", "-2chat-automation") == 0
    # validate reads it, and reports what the Agent Skills name rule says of its folder name.
    assert cli("validate", "--", "-2chat-automation") == 1
    assert "1 skill checked" in cli.out
    assert cli("history", "--", "-2chat-automation") == 0
    assert cli("diff", "--", "-2chat-automation") == 1
    assert "-2chat-automation has one version only" in cli.err  # found; nothing to compare yet
    assert cli("rm", "--yes", "--", "-2chat-automation") == 0
    assert cli("info", "--", "-2chat-automation") == 1  # removed
