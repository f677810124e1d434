"""docs/TROUBLESHOOTING.md quotes the CLI's real error lines: each case is run for real here.

Every configuration error the page shows is produced against a real server (moto, or
SeaweedFS with authentication on) or with no server at all, and the line the CLI printed,
with the bucket and endpoint written as the page writes them, must be one the page quotes.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from s3skills.cli import main
from s3skills.testing import LOOPBACK, SeaweedBucket

DOC = Path(__file__).resolve().parents[1] / "docs" / "TROUBLESHOOTING.md"
DOC_BUCKET = "my-bucket"
DOC_ENDPOINT = "http://127.0.0.1:9000"


_PREFIXES = ("s3skills: error:", "s3skills mcp: error:")


def _quoted_errors() -> set[str]:
    """The `s3skills: error: ...` lines inside the page's code blocks."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    return {line for block in blocks for line in block.splitlines() if line.startswith(_PREFIXES)}


def _error_line(stderr: str, bucket: str | None = None, endpoint: str | None = None) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(_PREFIXES)]
    assert len(lines) == 1, stderr
    line = lines[0]
    if bucket:
        line = line.replace(f"'{bucket}'", f"'{DOC_BUCKET}'")
    if endpoint:
        line = line.replace(endpoint, DOC_ENDPOINT)
    return line


def test_the_page_quotes_the_errors_it_documents() -> None:
    quoted = _quoted_errors()
    assert len(quoted) >= 5, quoted  # no bucket, missing bucket, no credentials, denied, rejected, busy port


def test_no_bucket_is_the_line_the_page_quotes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("S3SKILLS_BUCKET", raising=False)
    assert main(["--user", "ana", "list"]) == 2
    assert _error_line(capsys.readouterr().err) in _quoted_errors()


def test_a_missing_bucket_is_the_line_the_page_quotes(moto_endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    missing = "no-such-bucket-for-the-doc"
    assert main(["--bucket", missing, "--user", "ana", "--endpoint-url", moto_endpoint, "list"]) == 1
    assert _error_line(capsys.readouterr().err, missing, moto_endpoint) in _quoted_errors()


def test_no_credentials_is_the_line_the_page_quotes(
    bucket: str, moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_") and name not in ("AWS_DEFAULT_REGION", "AWS_REGION"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask an instance metadata address
    assert main(["--bucket", bucket, "--user", "ana", "--endpoint-url", moto_endpoint, "list"]) == 1
    assert _error_line(capsys.readouterr().err, bucket, moto_endpoint) in _quoted_errors()


def test_credentials_the_store_rejects_are_the_line_the_page_quotes(
    seaweed_bucket: SeaweedBucket, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-configured-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-its-secret")
    argv = ["--bucket", seaweed_bucket.bucket, "--user", "ana", "--endpoint-url", seaweed_bucket.endpoint_url, "list"]
    assert main(argv) == 1
    line = _error_line(capsys.readouterr().err, seaweed_bucket.bucket, seaweed_bucket.endpoint_url)
    assert line in _quoted_errors()


def test_a_busy_port_is_the_line_the_page_quotes(bucket: str, moto_endpoint: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"a-token-long-enough-for-the-server": "ana"}')
    tokens.chmod(0o600)
    with socket.socket() as holder:
        holder.bind((LOOPBACK, 0))
        holder.listen()
        port = holder.getsockname()[1]
        argv = ["--bucket", bucket, "--endpoint-url", moto_endpoint, "mcp", "--transport", "http"]
        argv += ["--port", str(port), "--tokens", str(tokens)]
        done = subprocess.run(
            [sys.executable, "-m", "s3skills.cli", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert done.returncode != 0, done.stderr
    assert f"port {port} on 127.0.0.1 is busy" in done.stderr
    line = _error_line(done.stderr, bucket, moto_endpoint).replace(f"port {port} ", "port 8000 ")
    assert line in _quoted_errors()
