"""docs/TROUBLESHOOTING.md quotes the CLI's real error lines: each case is run for real here.

Every configuration error the page shows is produced against a real server (moto, or
SeaweedFS with authentication on) or with no server at all, and the line the CLI printed,
with the bucket and endpoint written as the page writes them, must be one the page quotes.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from s3skills.cli import main
from s3skills.testing import LOOPBACK, SeaweedBucket, SeaweedServer

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


def test_a_busy_port_is_the_line_the_page_quotes(
    bucket: str, moto_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"a-token-long-enough-for-the-server": "ana"}')
    tokens.chmod(0o600)
    with socket.socket() as holder:
        holder.bind((LOOPBACK, 0))
        holder.listen()
        port = holder.getsockname()[1]
        argv = ["--bucket", bucket, "--endpoint-url", moto_endpoint, "mcp", "--transport", "http"]
        # In this process (the same `main` the console script runs): the port is refused before
        # anything is served, and a server subprocess cost ~3 s of start-up on 2 cores.
        code = main([*argv, "--port", str(port), "--tokens", str(tokens)])
    err = capsys.readouterr().err
    assert code != 0, err
    assert f"port {port} on 127.0.0.1 is busy" in err
    line = _error_line(err, bucket, moto_endpoint).replace(f"port {port} ", "port 8000 ")
    assert line in _quoted_errors()


# -- the last configuration errors (issue 36, item 6) ---------------------------------------------


def _whole(text: str) -> str:
    """One error as one line: its wrapped continuation lines joined, spaces collapsed."""
    return " ".join(text.split())


def _quoted_whole() -> set[str]:
    """Each error the page quotes (a prefixed line and its indented continuations), as one line."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    found = set()
    for block in blocks:
        for part in re.split(r"\n(?! )", block):
            if part.startswith((*_PREFIXES, "s3skills.errors.")):
                found.add(_whole(part))
    return found


def _error_whole(stderr: str) -> str:
    parts = [p for p in re.split(r"\n(?! )", stderr) if p.startswith(_PREFIXES)]
    assert len(parts) == 1, stderr
    return _whole(parts[0])


class _NotS3(BaseHTTPRequestHandler):
    """Any web server: 404 and an HTML page for every request."""

    def do_GET(self) -> None:
        body = b"<html><body>404 page not found</body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_an_endpoint_that_is_not_s3_names_the_cause_and_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    server = ThreadingHTTPServer((LOOPBACK, 0), _NotS3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://{LOOPBACK}:{server.server_address[1]}"
    try:
        assert main(["--bucket", DOC_BUCKET, "--user", "ana", "--endpoint-url", endpoint, "list"]) == 1
    finally:
        server.shutdown()
        server.server_close()
    line = _error_whole(capsys.readouterr().err).replace(endpoint, "http://127.0.0.1:9333")
    assert "not S3" in line
    assert "S3 port" in line
    assert line in _quoted_whole()


def test_the_seaweedfs_master_and_filer_ports_are_not_s3(
    seaweed_bucket: SeaweedBucket, seaweed_server: SeaweedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    for endpoint in (seaweed_server.master_url, seaweed_server.filer_url):
        argv = ["--bucket", seaweed_bucket.bucket, "--user", "ana", "--endpoint-url", endpoint, "list"]
        assert main(argv) == 1
        line = _error_whole(capsys.readouterr().err).replace(endpoint, "http://127.0.0.1:9333")
        assert line in _quoted_whole()


def test_tls_on_a_plain_http_port_names_the_cause_and_the_fix(
    bucket: str, moto_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = moto_endpoint.replace("http://", "https://")
    assert main(["--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint, "list"]) == 1
    line = _error_whole(capsys.readouterr().err).replace(endpoint, "https://127.0.0.1:8333")
    assert "does not speak TLS" in line
    assert line in _quoted_whole()


def test_an_agent_on_a_missing_bucket_raises_with_the_bucket_and_the_fix(moto_endpoint: str) -> None:
    from s3skills import S3Backend, create_skills_agent
    from s3skills.errors import BucketNotFound
    from s3skills.testing.scripted import ScriptedChatModel

    backend = S3Backend(DOC_BUCKET, endpoint_url=moto_endpoint)
    try:
        agent = create_skills_agent(ScriptedChatModel(steps=[]), backend, system_prompt="You help.")
        with pytest.raises(BucketNotFound) as raised:
            agent.invoke(
                {"messages": [{"role": "user", "content": "hola"}]},
                context={"user_id": "ana"},
                config={"configurable": {"thread_id": "t-1"}},
            )
    finally:
        backend.close()
    line = f"s3skills.errors.BucketNotFound: {raised.value}"
    assert f"bucket '{DOC_BUCKET}'" in line
    assert "create it" in line
    assert _whole(line) in _quoted_whole()


def test_creating_a_channel_that_exists_says_so_and_how_to_change_it(
    bucket: str, moto_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "lib" / "pdf").mkdir(parents=True)
    (tmp_path / "lib" / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: PDFs. Use it for PDFs.\n---\n")
    base = ["--bucket", bucket, "--endpoint-url", moto_endpoint, "--shared", "org"]
    assert main([*base, "push", str(tmp_path / "lib")]) == 0
    assert main([*base, "channel", "create", "production", "--from", "latest"]) == 0
    capsys.readouterr()
    assert main([*base, "channel", "create", "production", "--from", "latest"]) == 1
    line = _error_whole(capsys.readouterr().err).replace(f"s3://{bucket}/", f"s3://{DOC_BUCKET}/")
    assert "already exists" in line
    assert line in _quoted_whole()
