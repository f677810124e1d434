"""`s3skills console` on SIGTERM: it drains as the MCP server does and ends with status 0.

Slow: each test starts the real command in a process of its own (against the moto server).
"""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from console_browser import ConsoleProcess
from console_harness import write_tokens

pytestmark = pytest.mark.slow


def _ready(url: str) -> int:
    """The status of `/readyz` once the console accepts connections (it prints its address
    just before it listens)."""
    for _ in range(200):
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=10) as answer:
                return int(answer.status)
        except urllib.error.URLError:
            time.sleep(0.05)
    raise AssertionError("the console never accepted a connection")


def _console(moto_endpoint: str, bucket: str, tmp_path: Path, *extra: str) -> ConsoleProcess:
    globals_ = ["--bucket", bucket, "--shared", "org", "--endpoint-url", moto_endpoint]
    return ConsoleProcess(globals_, write_tokens(tmp_path / "tokens.json"), {}, *extra)


def test_sigterm_ends_the_console_with_status_0_after_it_said_it_was_ready(
    moto_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    console = _console(moto_endpoint, bucket, tmp_path, "--drain-seconds", "10")
    try:
        assert _ready(console.url) == 200
        console.proc.send_signal(signal.SIGTERM)
        status = console.proc.wait(timeout=30)
        stderr = console.proc.stderr.read() if console.proc.stderr else ""
    finally:
        console.close()
    assert status == 0, stderr  # uvicorn alone re-raises the signal once shut down: -15
    assert "Traceback" not in stderr


def test_a_drain_deadline_out_of_range_is_refused_before_serving(
    moto_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError, match="drain-seconds"):
        _console(moto_endpoint, bucket, tmp_path, "--drain-seconds", "0")
