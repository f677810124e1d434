"""Small CLI behaviours a new user meets first, through `s3skills.cli.main` on moto.

`info xero` suggests `xero-automation` (the library's own suggestions, as MCP's load_skill
gives them); `diff` between two identical versions says so; `create` in the bucket says how
to edit its SKILL.md (and that way works); `enable` of a skill whose description is still a
TODO warns; a folder named `cálculos` is refused with a message that says ASCII and
suggests `calculos`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

from s3skills.testing import skill_md, write_file


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, "ana")


def _push(cli: Cli, root: Path, *names: str) -> None:
    for name in names:
        write_file(root, f"{name}/SKILL.md", skill_md(name, f"Automates {name} work. Use it for {name} tasks."))
    assert cli("push", str(root)) == 0, cli.err


def test_info_of_an_unknown_skill_suggests_the_closest_ids(cli: Cli, tmp_path: Path) -> None:
    _push(cli, tmp_path / "lib", "xero-automation", "pdf-tools", "slack-automation")
    assert cli("info", "xero") == 1
    assert "unknown skill 'xero' (did you mean: xero-automation" in cli.err
    assert cli("info", "pdf-tool") == 1
    assert "did you mean: pdf-tools" in cli.err


def test_diff_with_no_change_says_so(cli: Cli, tmp_path: Path, s3_client: Any, bucket: str) -> None:
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    _push(cli, tmp_path / "lib", "pdf")
    versions = [v["version"] for v in cli.json("history", "pdf")["versions"]]
    assert cli("diff", "pdf", "--from", versions[0], "--to", versions[0]) == 0, cli.err
    assert cli.out.strip() == f"No differences: pdf is the same in versions {versions[0]} and {versions[0]}."


def test_create_in_the_bucket_says_how_to_edit_and_enable_warns_of_a_todo(cli: Cli, tmp_path: Path) -> None:
    assert cli("create", "invoices") == 0, cli.err
    assert "To edit it: s3skills pull ./edit --skill invoices" in cli.out
    assert "edit ./edit/invoices/SKILL.md, then s3skills push ./edit" in cli.out

    assert cli("enable", "invoices") == 0, cli.err
    assert "invoices enabled" in cli.out
    assert "warning: the description of invoices is still a TODO placeholder" in cli.err

    # The way the hint gives works: pull, edit, push; then enable says nothing more.
    edit = tmp_path / "edit"
    assert cli("pull", str(edit), "--skill", "invoices") == 0, cli.err
    md = edit / "invoices" / "SKILL.md"
    md.write_text(md.read_text().replace("TODO: say what invoices does", "Issues invoices; use it"))
    assert cli("push", str(edit)) == 0, cli.err
    assert cli("enable", "invoices") == 0, cli.err
    assert "TODO" not in cli.err


def test_a_folder_with_accents_is_refused_with_ascii_and_the_folded_id(cli: Cli, tmp_path: Path) -> None:
    write_file(tmp_path / "lib", "cálculos/SKILL.md", skill_md("calculos", "Computes sums. Use it for sums."))
    assert cli("push", str(tmp_path / "lib")) != 0  # an id that is not ASCII is never stored
    text = cli.out + cli.err
    assert "'cálculos'" in text
    assert "ASCII" in text
    assert "'calculos'" in text
