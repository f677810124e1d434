"""The CLI reference (docs/CLI.md), generated from the commands themselves.

    python -m s3skills.cli.reference > docs/CLI.md

`render` walks the click group that `s3skills` runs (`s3skills.cli.app.cli`): every
command and sub-command, its usage line, its help text and each option's help record as
`--help` prints it (names, value, default, environment). The global options are listed
once; a command's section lists only its own options, and says which global ones it lacks.
The output depends on nothing but the commands (no terminal width, no environment), so
`tests/test_cli_reference.py` can require docs/CLI.md to be exactly `render()`.
"""

from __future__ import annotations

import inspect
import sys
import textwrap

import click

from s3skills.cli.app import PROG, cli

__all__ = ["COMMAND", "main", "render"]

COMMAND = "python -m s3skills.cli.reference > docs/CLI.md"
"""How docs/CLI.md is made (printed in its header)."""


def render() -> str:
    """The Markdown of docs/CLI.md for the commands as they are now."""
    root = click.Context(cli, info_name=PROG, **cli.context_settings)
    global_records = [r for r in _records(cli, root) if not _is_help(r) and not r[0].startswith("--version")]
    sections = list(_walk(cli, root, ()))
    out = [
        "# CLI reference",
        "",
        f"<!-- Generated from the commands by `{COMMAND}`; do not edit by hand:",
        "     tests/test_cli_reference.py fails when this file differs from the generator's output. -->",
        "",
        f"`{PROG}` (also `python -m s3skills.cli`) manages skill libraries in a bucket, pushes and pulls",
        "them, serves them over MCP and runs the demo. This page is the text of each command's",
        f"`--help`, gathered in one place; `{PROG} COMMAND --help` prints the same.",
        "",
        "## Global options",
        "",
        _paragraphs(cli.help or ""),
        "",
        "Valid before or after the command name, by every command unless its section says otherwise.",
        "",
        _table(global_records),
        "",
        "`--version` (before any command) prints the version; `-h`, `--help` after any command prints its help.",
        "",
        "## Commands",
        "",
    ]
    for path, command, _ctx in sections:
        summary = command.get_short_help_str(limit=200)
        out.append(f"- [`{' '.join(path)}`](#{_anchor(path)}): {summary}")
    for path, command, ctx in sections:
        out += ["", f"## {' '.join(path)}", "", "```", _usage(command, ctx), "```", ""]
        if command.help:
            out += [_paragraphs(command.help), ""]
        records = _records(command, ctx)
        own = [r for r in records if r not in global_records and not _is_help(r)]
        missing = [r[0].split()[0] for r in global_records if r not in records]
        if missing:
            out += ["Global options it does not take: " + ", ".join(f"`{m}`" for m in missing) + ".", ""]
        if isinstance(command, click.Group):
            out += ["Commands: " + ", ".join(f"`{name}`" for name in command.list_commands(ctx)) + ".", ""]
        out.append(_table(own) if own else "No options of its own.")
    return "\n".join(out).rstrip("\n") + "\n"


def _walk(
    command: click.Command, ctx: click.Context, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every sub-command below `command`, depth first, in the order `--help` lists them."""
    found: list[tuple[tuple[str, ...], click.Command, click.Context]] = []
    if not isinstance(command, click.Group):
        return found
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        sub_path = (*(path or (PROG,)), name)
        sub_ctx = click.Context(sub, info_name=name, parent=ctx, **sub.context_settings)
        found.append((sub_path, sub, sub_ctx))
        found += _walk(sub, sub_ctx, sub_path)
    return found


def _records(command: click.Command, ctx: click.Context) -> list[tuple[str, str]]:
    """Each visible option's (names and value, help) exactly as `--help` shows it."""
    records = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option):
            continue  # arguments are in the usage line
        record = param.get_help_record(ctx)
        if record is not None:
            records.append((record[0], " ".join(record[1].split())))
    return records


def _is_help(record: tuple[str, str]) -> bool:
    return "--help" in record[0].split(", ")


def _usage(command: click.Command, ctx: click.Context) -> str:
    return f"{ctx.command_path} {' '.join(command.collect_usage_pieces(ctx))}".rstrip()


def _paragraphs(text: str) -> str:
    """click's help text as Markdown: paragraphs re-joined; a `\\b` paragraph kept as written."""
    text = inspect.cleandoc(text.split("\f", 1)[0])
    blocks = []
    for block in text.split("\n\n"):
        if block.startswith("\b\n"):
            blocks.append("```\n" + block[2:] + "\n```")
        else:
            blocks.append(textwrap.fill(" ".join(block.split()), width=100, break_on_hyphens=False))
    return "\n\n".join(blocks)


def _table(records: list[tuple[str, str]]) -> str:
    lines = ["| option | what |", "|---|---|"]
    lines += [f"| `{_cell(names)}` | {_cell(text)} |" for names, text in records]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _anchor(path: tuple[str, ...]) -> str:
    """The anchor GitHub gives the heading `## s3skills versioning enable`."""
    return "-".join(path).lower()


def main() -> int:
    """Print the reference on stdout."""
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
