"""`OrgConsole`: a shared library on one moto bucket, its CLI, and the console's TestClient.

The console is driven by Starlette's TestClient (in-process, no server); the library is
written by the CLI (`s3skills.cli.main`), as a team's authors would.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from s3skills.cli import Settings, main
from s3skills.console import ConsoleSource, TokenRoles, create_app

CURATOR, READER = "tok-curator-0123456789", "tok-reader-0123456789"
CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


def write_tokens(path: Path, entries: dict[str, object] | None = None) -> Path:
    """A tokens file (mode 600): a curator `cora` and a reader `rita` by default."""
    path.write_text(json.dumps(entries or {CURATOR: {"user": "cora", "role": "curator"}, READER: "rita"}))
    path.chmod(0o600)
    return path


def write_skill(root: Path, sid: str, skill_md: str, files: dict[str, str | bytes] | None = None) -> None:
    folder = root / sid
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md)
    for rel, body in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            (folder / rel).write_bytes(body)
        else:
            (folder / rel).write_text(body)


class OrgConsole:
    """The shared library `org` on a bucket, its CLI, and a console of it."""

    def __init__(self, endpoint: str, bucket: str, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--bucket", bucket, "--shared", "org", "--endpoint-url", endpoint]
        self.root, self.capsys = root, capsys
        self.src = root / "src"
        self.tokens = write_tokens(root / "tokens.json")
        self.source = ConsoleSource(Settings(bucket=bucket, shared="org", endpoint_url=endpoint))
        self.app = create_app(self.source, TokenRoles(self.tokens), trusted_user_header="X-Forwarded-User",
                              trusted_proxy="10.9.8.7")  # fmt: skip

    def cli(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*self.base, *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def push(self, actor: str = "author") -> None:
        code, _, err = self.cli("--actor", actor, "push", str(self.src))
        assert code == 0, err

    def client(self, token: str | None = CURATOR) -> TestClient:
        """A TestClient signed in through the login page with `token` (None: not signed in)."""
        client = TestClient(self.app, base_url="http://testserver", follow_redirects=False)
        if token is not None:
            page = client.get("/login")
            csrf = CSRF_RE.search(page.text)
            assert csrf, page.text
            done = client.post("/login", data={"token": token, "csrf": csrf.group(1)})
            assert done.status_code == 303, done.text
            assert done.headers["location"] == "/"
        return client

    @staticmethod
    def csrf(client: TestClient, path: str = "/") -> str:
        found = CSRF_RE.search(client.get(path).text)
        assert found
        return found.group(1)
