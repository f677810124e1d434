"""`push --enable` / `--disable` win over the SKILL.md frontmatter and say what they changed.

Through `s3skills.cli.main` on moto: a skill disabled in the library and pulled (its local
SKILL.md then says `enabled: false`) is enabled by `push ./pulled --enable`, and the output
names it; `--disable` disables again; a push that changes no state says so; a new skill
whose SKILL.md says `enabled: false` is stored enabled with `--enable`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_harness import Cli

from s3skills.testing import skill_md, write_file


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys, "ana")


def _enabled(cli: Cli) -> dict[str, bool]:
    return {s["id"]: s["enabled"] for s in cli.json("list", "--all")["skills"]}


def test_push_enable_wins_over_a_pulled_enabled_false(cli: Cli, tmp_path: Path) -> None:
    write_file(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf", "Reads PDF files. Use it for PDFs."))
    write_file(tmp_path / "lib", "csv/SKILL.md", skill_md("csv", "Reads CSV files. Use it for CSVs."))
    assert cli("push", str(tmp_path / "lib")) == 0, cli.err
    assert cli("disable", "pdf") == 0, cli.err
    pulled = tmp_path / "pulled"
    assert cli("pull", str(pulled)) == 0, cli.err
    assert "enabled: false" in (pulled / "pdf" / "SKILL.md").read_text()

    assert cli("push", str(pulled)) == 0, cli.err  # without a flag: nothing changes
    assert "Nothing to push" in cli.out
    assert _enabled(cli) == {"csv": True, "pdf": False}

    assert cli("push", str(pulled), "--enable") == 0, cli.err
    assert "1 skill now enabled (--enable wins over the SKILL.md frontmatter): pdf" in cli.out
    assert _enabled(cli) == {"csv": True, "pdf": True}

    assert cli("push", str(pulled), "--enable") == 0, cli.err
    assert "Every pushed skill was already enabled (--enable)." in cli.out
    assert "Nothing to push" in cli.out

    assert cli("push", str(pulled), "--disable") == 0, cli.err
    assert "2 skills now disabled (--disable wins over the SKILL.md frontmatter): csv, pdf" in cli.out
    assert _enabled(cli) == {"csv": False, "pdf": False}


def test_push_enable_stores_a_new_skill_enabled_whatever_its_frontmatter_says(cli: Cli, tmp_path: Path) -> None:
    text = skill_md("notes", "Takes notes. Use it for notes.", enabled=False)
    write_file(tmp_path / "lib", "notes/SKILL.md", text)
    assert cli("push", str(tmp_path / "lib"), "--enable", "--dry-run") == 0, cli.err
    assert "1 skill would be enabled" in cli.out
    assert cli("push", str(tmp_path / "lib"), "--enable") == 0, cli.err
    assert "1 skill now enabled" in cli.out
    assert _enabled(cli) == {"notes": True}
    assert (tmp_path / "lib" / "notes" / "SKILL.md").read_text() == text  # the local tree is not touched


def test_push_enable_and_disable_together_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    write_file(tmp_path / "lib", "pdf/SKILL.md", skill_md("pdf", "Reads PDF files. Use it for PDFs."))
    assert cli("push", str(tmp_path / "lib"), "--enable", "--disable") == 2
    assert "give --enable or --disable, not both" in cli.err
