"""`Cli`: the command line run in-process on one moto bucket, for the CLI tests.

Each call runs `s3skills.cli.main` with the global options of one bucket and user in the
seeds' layout, and keeps what it printed (`out`, `err`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3skills.cli import main


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
