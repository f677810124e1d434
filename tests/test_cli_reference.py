"""docs/CLI.md is generated from the commands (`python -m s3skills.cli.reference`) and kept in sync."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from s3skills.cli import cli
from s3skills.cli.reference import COMMAND, render

DOC = Path(__file__).resolve().parents[1] / "docs" / "CLI.md"


def test_docs_cli_md_is_exactly_what_the_generator_prints() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), f"docs/CLI.md is stale: regenerate it with `{COMMAND}`"


def test_the_generator_runs_as_its_header_says() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "s3skills.cli.reference"], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout == render()
    assert COMMAND in done.stdout


def _commands(group: click.Group, ctx: click.Context, path: str) -> list[tuple[str, click.Command, click.Context]]:
    found = []
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        assert sub is not None
        sub_ctx = click.Context(sub, info_name=name, parent=ctx)
        found.append((f"{path} {name}", sub, sub_ctx))
        if isinstance(sub, click.Group):
            found += _commands(sub, sub_ctx, f"{path} {name}")
    return found


def test_every_command_and_option_the_parser_has_is_in_the_reference() -> None:
    text = render()
    root = click.Context(cli, info_name="s3skills")
    commands = _commands(cli, root, "s3skills")
    assert len(commands) >= 15  # list, info, create, ..., versioning enable|status
    for path, command, ctx in commands:
        assert f"\n## {path}\n" in text, path
        section = text.split(f"\n## {path}\n", 1)[1].split("\n## ", 1)[0]
        assert f"{path} " in section or section.startswith(f"\n```\n{path}"), path  # its usage line
        for param in command.get_params(ctx):
            if isinstance(param, click.Option) and not param.hidden:
                for opt in param.opts:
                    assert f"`{opt}" in text or f", {opt}" in text, f"{path}: {opt} is not documented"
