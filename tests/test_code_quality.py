"""The codebase's own bar, checked where CI runs: ruff lint and format, and mypy --strict.

Each tool runs in a subprocess from the repository root, as a developer would run it;
a finding fails the test with the tool's own report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Minutes-long: run by .ci/run after the README's test command (`pytest -m slow`).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("argv", [("ruff", "check", "."), ("ruff", "format", "--check", ".")], ids=["lint", "format"])
def test_ruff_finds_nothing(argv: tuple[str, ...]) -> None:
    done = run(*argv)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_strict_finds_nothing(tmp_path: Path) -> None:
    done = run("mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout
