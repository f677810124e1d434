"""One library from many repositories (issue 36, item 1), on the shared moto server.

Several small repositories whose skills share ids are pushed one after another into one
user's library, with no flag: each push stores every skill it can and leaves a clashing
one out with one line naming both sources and both ways out (`--category-from-repo`,
`--replace`), and exits 1 only when every skill of the folder was left out. Whatever the
order, every skill that clashes with none is stored. `--category-from-repo` keeps them all.
The name it gives a repository (`s3skills.transfer.repository`) and the source label read
back from the bucket are input: nasty cases below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.errors import SkillError
from s3skills.testing import skill_md
from s3skills.testing import write_file as write
from s3skills.transfer.repository import ORIGIN_KEY, origin_label, repository_name, shown_origin

USER = "ana"
PREFIX = f"{USER}/skills/"  # the seeds layout of `Cli`

# Three repositories: `review` is in all of them, `triage` in two; the rest is each one's own.
REPOS = {
    "anthropics/skills": ["skills/review", "skills/pdf", "skills/docx"],
    "getsentry/skills": ["skills/review", "skills/triage", "skills/sentry-setup"],
    "github/awesome-copilot": ["skills/triage", "skills/review", "skills/copilot-tips"],
}
CLASHING = {"review", "triage"}


def make_repos(root: Path) -> dict[str, Path]:
    out = {}
    for name, folders in REPOS.items():
        repo = root / name
        for folder in folders:
            leaf = folder.rsplit("/", 1)[-1]
            write(repo, f"{folder}/SKILL.md", skill_md(leaf, f"{leaf} as {name} does it. Use it for {leaf}."))
        out[name] = repo
    return out


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, USER)


def ids(cli: Cli) -> set[str]:
    return {s["id"] for s in cli.json("list", "--all")["skills"]}


def descriptions(cli: Cli) -> dict[str, str]:
    return {s["id"]: s["description"] for s in cli.json("list", "--all")["skills"]}


def test_a_clash_with_another_repository_leaves_that_skill_out_and_stores_the_rest(cli: Cli, tmp_path: Path) -> None:
    repos = make_repos(tmp_path)
    assert cli("push", str(repos["anthropics/skills"])) == 0, cli.err
    assert cli("push", str(repos["getsentry/skills"])) == 0, cli.err  # partial: exit 0
    assert "left out 1 skill whose library copy was pushed from another folder (kept):" in cli.err
    line = next(ln for ln in cli.err.splitlines() if ln.startswith("  review:"))
    assert line == (
        "  review: library copy from anthropics-skills/skills/review, this one from "
        "getsentry-skills/skills/review; keep both: --category-from-repo; take it over: --replace"
    )
    assert len(line) <= 200
    assert "Uploaded 2 files (" in cli.out
    assert "of 2 skills to " in cli.out
    assert ids(cli) == {"review", "pdf", "docx", "triage", "sentry-setup"}
    assert descriptions(cli)["review"].endswith("anthropics/skills does it. Use it for review.")
    # --json says the same: ok, the clash in conflicts and left_out, the rest in skills.
    report = cli.json("push", str(repos["getsentry/skills"]))
    assert report["ok"] is True
    assert report["left_out"] == ["review"]
    assert report["replaceable"] == ["review"]
    assert [c["path"] for c in report["conflicts"]] == ["review"]
    assert report["skills"] == ["sentry-setup", "triage"]


@pytest.mark.parametrize("order", [tuple(sorted(REPOS)), tuple(sorted(REPOS, reverse=True))], ids=["a-z", "z-a"])
def test_pushing_repositories_one_after_another_keeps_every_skill_that_clashes_with_none_whatever_the_order(
    cli: Cli, tmp_path: Path, order: tuple[str, ...]
) -> None:
    repos = make_repos(tmp_path)
    for name in order:
        assert cli("push", str(repos[name])) == 0, cli.err
    own = {f.rsplit("/", 1)[-1] for folders in REPOS.values() for f in folders} - CLASHING
    assert ids(cli) == own | CLASHING
    # Each clashing id holds the copy of the first repository pushed that has it.
    for leaf in CLASHING:
        first = next(name for name in order if f"skills/{leaf}" in REPOS[name])
        assert descriptions(cli)[leaf].startswith(f"{leaf} as {first} does it")


def test_every_skill_left_out_exits_1_and_replace_takes_it_over(cli: Cli, tmp_path: Path) -> None:
    repos = make_repos(tmp_path)
    mine = tmp_path / "mine" / "skills"
    write(mine, "review/SKILL.md", skill_md("review", "My review. Use it for my reviews."))
    assert cli("push", str(repos["anthropics/skills"])) == 0
    assert cli("push", str(mine)) == 1
    assert "nothing pushed: every skill of" in cli.err
    assert "this one from mine-skills/review;" in cli.err
    assert cli("push", "--replace", str(mine)) == 0
    assert descriptions(cli)["review"] == "My review. Use it for my reviews."
    # --strict refuses the whole push instead, naming both ways out, and writes nothing.
    assert cli("push", "--strict", str(repos["getsentry/skills"])) == 1
    assert "push refused:" in cli.err
    assert "pushed from another folder (review)" in cli.err
    assert "keep both: --category-from-repo; take it over: --replace" in cli.err
    assert "triage" not in ids(cli)


def test_category_from_repo_keeps_every_skill_of_every_repository(cli: Cli, tmp_path: Path) -> None:
    repos = make_repos(tmp_path)
    assert cli("push", str(repos["anthropics/skills"])) == 0  # the first one as it is
    for name in ("getsentry/skills", "github/awesome-copilot"):
        assert cli("push", "--category-from-repo", str(repos[name])) == 0, cli.err
        assert "left out" not in cli.err
    assert "note: the skills of" in cli.err
    assert "go in the category 'awesome-copilot'" in cli.err
    expected = {"review", "pdf", "docx"}
    expected |= {f"getsentry-skills/{f.rsplit('/', 1)[-1]}" for f in REPOS["getsentry/skills"]}
    expected |= {f"awesome-copilot/{f.rsplit('/', 1)[-1]}" for f in REPOS["github/awesome-copilot"]}
    assert ids(cli) == expected
    assert cli("push", "--category-from-repo", "--category", "x", str(repos["getsentry/skills"])) == 2
    assert "give --category C or --category-from-repo, not both" in cli.err


def test_category_from_repo_gives_folders_that_share_an_id_distinct_ids_under_the_repository(
    cli: Cli, tmp_path: Path
) -> None:
    repo = tmp_path / "deepagents"
    write(repo, "libs/cli/examples/skills/web/SKILL.md", skill_md("web", "Web for the CLI. Use it in the CLI."))
    write(repo, "libs/code/examples/skills/web/SKILL.md", skill_md("web", "Web for code. Use it for code."))
    write(repo, "tools/calc/SKILL.md", skill_md("calc"))
    assert cli("push", "--category-from-repo", str(repo)) == 0, cli.err
    assert ids(cli) == {"deepagents/calc", "deepagents-cli-examples/web", "deepagents-code-examples/web"}


def test_the_repository_name_comes_from_the_git_origin_then_the_folder(tmp_path: Path) -> None:
    repo = tmp_path / "work" / "skills"
    repo.mkdir(parents=True)
    assert repository_name(repo) == "work-skills"  # a container's name gets its parent's first
    assert repository_name(tmp_path / "work") == "work"
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "upstream"]\n\turl = https://example.invalid/x/y.git\n'
        '[remote "origin"]\n\turl = git@github.com:getsentry/skills.git\n\tfetch = +refs/heads/*\n'
    )
    assert repository_name(repo) == "getsentry-skills"
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = https://github.com/anthropics/skills/\n')
    assert repository_name(repo) == "anthropics-skills"
    assert origin_label(repo, "pdf") == "anthropics-skills/pdf"


@pytest.mark.parametrize(
    "config",
    [
        b'[remote "origin"]\n\turl = https://h/\xff\xfe/;rm -rf ~\n',  # bytes that are not UTF-8, shell text
        b'[remote "origin"]\n\turl = ../../..\n',  # only dots: no name
        b"\x00" * 100,
        b'[remote "origin"]\n\turl = ' + b"a" * (70 * 1024) + b"\n",  # over the size read
    ],
)
def test_a_hostile_git_config_never_makes_an_unsafe_category(tmp_path: Path, config: bytes) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_bytes(config)
    name = repository_name(repo)
    assert name
    assert all(c.isalnum() or c in "._-" for c in name)
    assert len(name) <= 64
    assert not name.startswith((".", "-"))


def test_a_symlinked_git_config_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    secret.write_text('[remote "origin"]\n\turl = https://h/evil/name\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").symlink_to(secret)
    assert repository_name(repo) == "repo"


def test_a_folder_with_no_usable_name_asks_for_a_category(tmp_path: Path) -> None:
    odd = tmp_path / "日本"
    odd.mkdir()
    with pytest.raises(SkillError, match="give --category C instead"):
        repository_name(odd)
    accented = tmp_path / "café-skills"
    accented.mkdir()
    assert repository_name(accented) == "cafe-skills"


def test_a_hostile_origin_label_in_the_bucket_prints_as_one_bounded_line(
    cli: Cli, tmp_path: Path, s3_client: Any, bucket: str
) -> None:
    repos = make_repos(tmp_path)
    assert cli("push", str(repos["anthropics/skills"])) == 0
    key = PREFIX + "review/SKILL.md"
    head = s3_client.head_object(Bucket=bucket, Key=key)
    planted = "%0A%1B[31mfake%0Aerror: " + "x" * 5000
    s3_client.copy_object(
        Bucket=bucket,
        Key=key,
        CopySource={"Bucket": bucket, "Key": key},
        Metadata={**head["Metadata"], ORIGIN_KEY: planted},
        MetadataDirective="REPLACE",
    )
    assert cli("push", str(repos["getsentry/skills"])) == 0
    line = next(ln for ln in cli.err.splitlines() if ln.startswith("  review:"))
    assert "\x1b" not in cli.err
    assert "fake" in line
    assert "error:" in line
    assert len(line) <= 200
    assert shown_origin(planted) is not None
    assert len(shown_origin(planted) or "") <= 160
    assert shown_origin("") is None
    assert shown_origin("%00%01") is None


def test_the_origin_is_recorded_on_each_pushed_skill_md(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    repos = make_repos(tmp_path)
    assert cli("push", str(repos["github/awesome-copilot"])) == 0
    meta = s3_client.head_object(Bucket=bucket, Key=PREFIX + "triage/SKILL.md")["Metadata"]
    assert meta[ORIGIN_KEY] == "awesome-copilot/skills/triage"
    assert json.dumps(meta).isascii()
