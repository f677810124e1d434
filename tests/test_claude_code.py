"""A real host registers the server: the Claude Code CLI (npm), over stdio and over HTTP.

`@anthropic-ai/claude-code` (pinned; it runs on the system Node, >= 18) is installed from npm
into the test cache (`$S3SKILLS_TEST_CACHE`, default `~/.cache/s3skills-tests`) once and reused.
With `HOME` a temporary folder (no login, no API key: `claude mcp` never calls the model), the
test registers the server with `claude mcp add` exactly as docs/MCP.md tells a user to, and
`claude mcp list` health-checks each registration: it starts the stdio server, and sends the
HTTP server an `initialize` with the bearer token. A wrong token must be reported as failed.

Nothing leaves loopback: Claude Code's non-essential traffic (updates, telemetry, error
reports) is turned off, and its API address points at a loopback port where nothing listens
(it otherwise resolves api.anthropic.com at start). Skipped, with the reason, only when npm is
absent, or outside CI when the registry cannot be reached; a failed install is otherwise a
failure (tests/npm_tools.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_harness import child_env, http_server_process
from npm_tools import cache_dir, npm_failed

pytestmark = pytest.mark.slow

VERSION = "2.1.197"
PACKAGE = f"@anthropic-ai/claude-code@{VERSION}"
CONNECTED = "✔ Connected"
FAILED = "✘ Failed to connect"


def _version_of(claude: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "DISABLE_AUTOUPDATER": "1"}
    return subprocess.run([str(claude), "--version"], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `claude` executable of the pinned version, installed into the cache on first use."""
    home = cache_dir(f"claude-code-{VERSION}")
    exe = home / "node_modules" / ".bin" / "claude"
    scratch = tmp_path_factory.mktemp("claude-version-home")
    if not (exe.exists() and VERSION in _version_of(exe, scratch).stdout):
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed (the Claude Code CLI comes from npm)")
        partial = home.with_name(f"{home.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(partial), PACKAGE],
            capture_output=True,
            text=True,
            timeout=600,
        )
        installed = partial / "node_modules" / ".bin" / "claude"
        if done.returncode != 0 or not installed.exists():
            shutil.rmtree(partial, ignore_errors=True)
            npm_failed("the Claude Code CLI could not be installed from npm", done.stderr)
        shutil.rmtree(home, ignore_errors=True)
        partial.rename(home)  # a half-done install is never taken for the cache
    probe = _version_of(exe, scratch)
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert VERSION in probe.stdout, probe.stdout
    return exe


@contextlib.contextmanager
def _closed_loopback_port() -> Iterator[int]:
    """A loopback port held bound but not listening: a connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


class Claude:
    """`claude` run in a fresh HOME (its config, `~/.claude.json`, lives there), from that folder."""

    def __init__(self, exe: Path, home: Path, api_port: int) -> None:
        self.exe, self.home = exe, home
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANTHROPIC_", "CLAUDE_"))}
        env.pop("PYTHONPATH", None)  # the registration passes what the server needs with -e
        env.update(
            HOME=str(home),
            NO_COLOR="1",
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{api_port}",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            MCP_TIMEOUT="60000",  # the health check's start-up limit, ms: a slow machine still connects
        )
        self.env = env

    def __call__(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [str(self.exe), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"claude {' '.join(args)}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
        return done.stdout

    def statuses(self) -> dict[str, str]:
        """`claude mcp list`, as {server name: its line after the name}."""
        listed = self("mcp", "list", timeout=300)
        lines = (line.partition(": ") for line in listed.splitlines() if ": " in line)
        return {name: rest for name, _, rest in lines}


def _push_a_skill(bucket: str, endpoint: str, tmp: Path) -> None:
    skill = tmp / "library" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Greet a person politely.\n---\nSay hello.\n")
    push = [sys.executable, "-m", "s3skills.cli", "--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint]
    done = subprocess.run(
        [*push, "push", str(tmp / "library")], capture_output=True, text=True, timeout=120, env=child_env()
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_claude_code_connects_to_the_server_over_stdio_and_over_http_and_fails_a_wrong_token(
    claude: Path, bucket: str, moto_endpoint: str, tmp_path: Path
) -> None:
    _push_a_skill(bucket, moto_endpoint, tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    server_env = [f"{k}={v}" for k, v in child_env().items() if k.startswith("AWS_") or k == "PYTHONPATH"]
    with (
        _closed_loopback_port() as api_port,
        http_server_process(bucket, moto_endpoint, {"good-token": "ana"}, tmp_path / "http", cli=True) as (
            url,
            _,
            log,
        ),
    ):
        run = Claude(claude, home, api_port)
        # The installed entry point, as docs/MCP.md registers it (never `python -m`: see there).
        entry_point = str(Path(sys.executable).with_name("s3skills"))
        stdio = [entry_point, "--bucket", bucket, "--user", "ana"]
        env_flags = [arg for item in server_env for arg in ("-e", item)]
        run("mcp", "add", "skills", *env_flags, "--", *stdio, "--endpoint-url", moto_endpoint, "mcp")
        run("mcp", "add", "--transport", "http", "skills-http", url, "--header", "Authorization: Bearer good-token")
        run("mcp", "add", "--transport", "http", "skills-bad", url, "--header", "Authorization: Bearer wrong-token")
        statuses = run.statuses()
    assert statuses.keys() >= {"skills", "skills-http", "skills-bad"}, statuses
    assert statuses["skills"].endswith(CONNECTED), statuses
    assert statuses["skills-http"] == f"{url} (HTTP) - {CONNECTED}", statuses
    assert statuses["skills-bad"] == f"{url} (HTTP) - {FAILED}", statuses
    assert "Traceback" not in log.text()
