"""`Cli`: the command line run in-process on one moto bucket, for the CLI tests.

Each call runs `s3skills.cli.main` with the global options of one bucket and user in the
seeds' layout, and keeps what it printed (`out`, `err`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from s3skills.cli import main


def table_column(text: str, header: str, anchor: str) -> list[str]:
    """The values of the column `header` of a table the CLI printed (`s3skills.cli.tables`), in
    row order, each joined back whole when it wrapped within its cell.

    `anchor` is a column filled on the first line of every row (a fixed column such as `ON`): a
    line with it blank continues the row above. Columns are told apart by the header line, where
    two spaces or more separate them.
    """
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if re.search(rf"(^|  ){re.escape(header)}(  |$)", line.rstrip()))
    starts = {m.group(): m.start() for m in re.finditer(r"\S+(?: \S+)*", lines[at])}
    edges = sorted(starts.values())

    def cell(line: str, name: str) -> str:
        start = starts[name]
        later = [e for e in edges if e > start]
        return line[start : later[0] - 2 if later else None].strip()

    values: list[str] = []
    for line in lines[at + 1 :]:
        if not line.strip():
            break
        if cell(line, anchor) or not values:
            values.append(cell(line, header))
        else:
            values[-1] += cell(line, header)
    return values


class Cli:
    """Runs `main` in-process with the global options of one bucket and user (seeds' layout)."""

    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], user: str) -> None:
        self.globals = ["--bucket", bucket, "--user", user, "--endpoint-url", endpoint, "--layout", "seeds"]
        self.capsys = capsys
        self.out = ""
        self.err = ""

    def __call__(self, *argv: str) -> int:
        self.capsys.readouterr()
        code = main([*self.globals, *argv])
        captured = self.capsys.readouterr()
        self.out, self.err = captured.out, captured.err
        return code

    def json(self, *argv: str, expect: int = 0) -> Any:
        """The JSON a `--json` run printed, after checking its exit status."""
        code = self("--json", *argv)
        assert code == expect, self.err
        return json.loads(self.out)
