"""Governance under attack: a lock is checked by content, input files are bounded, forged
records and channels are reported and never widen what is served.

Through the CLI on the shared moto server, as a user with a library would try it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from s3skills.cli import main

# The classic 128-byte MD5 collision pair (Wang and Yu, 2004): two different byte strings with
# one MD5. S3's ETag of a single-part PUT is the body's MD5, so both halves get the same ETag.
COLLISION_A = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f89"
    "55ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b"
    "d8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0"
    "e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70"
)
COLLISION_B = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f89"
    "55ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b"
    "d8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0"
    "e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70"
)
SKILL = "---\nname: {name}\ndescription: Does {name} things for the tests.\n---\n# {name}\n"


class Cli:
    """The CLI on ana's library, with its output captured."""

    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], root: Path) -> None:
        self.base = ["--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint]
        self.capsys, self.root, self.bucket = capsys, root, bucket

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*self.base, *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def push(self, files: dict[str, bytes | str]) -> None:
        src = self.root / "src"
        for rel, body in files.items():
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body.encode() if isinstance(body, str) else body)
        code, _, err = self("push", str(src))
        assert code == 0, err


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    c = Cli(moto_endpoint, bucket, capsys, tmp_path)
    assert c("versioning", "enable")[0] == 0
    return c


# -- verify --lock by content ----------------------------------------------------------------------


def test_the_collision_pair_has_one_md5_and_two_sha256() -> None:
    assert COLLISION_A != COLLISION_B
    assert hashlib.md5(COLLISION_A).digest() == hashlib.md5(COLLISION_B).digest()  # noqa: S324 - the point
    assert hashlib.sha256(COLLISION_A).digest() != hashlib.sha256(COLLISION_B).digest()


def test_verify_names_a_file_replaced_by_the_other_half_of_an_md5_collision(
    cli: Cli, tmp_path: Path, s3_client: Any
) -> None:
    cli.push({"pdf/SKILL.md": SKILL.format(name="pdf"), "pdf/data.bin": COLLISION_A})
    lock = str(tmp_path / "skills-lock.json")
    assert cli("lock", "-o", lock)[0] == 0
    key = "users/ana/skills/pdf/data.bin"
    before = s3_client.head_object(Bucket=cli.bucket, Key=key)
    s3_client.put_object(Bucket=cli.bucket, Key=key, Body=COLLISION_B)
    after = s3_client.head_object(Bucket=cli.bucket, Key=key)
    assert after["ETag"] == before["ETag"]  # what an ETag comparison sees: nothing changed
    assert after["VersionId"] != before["VersionId"]
    code, out, _ = cli("verify", "--lock", lock)
    assert code == 1, out
    assert "pdf/data.bin: changed (sha256 differs)" in out
    assert "pdf/SKILL.md" not in out


def test_verify_names_another_version_of_the_same_bytes(cli: Cli, tmp_path: Path, s3_client: Any) -> None:
    cli.push({"pdf/SKILL.md": SKILL.format(name="pdf"), "pdf/notes.md": "notes"})
    lock = str(tmp_path / "skills-lock.json")
    assert cli("lock", "-o", lock)[0] == 0
    s3_client.put_object(Bucket=cli.bucket, Key="users/ana/skills/pdf/notes.md", Body=b"notes")
    code, out, _ = cli("verify", "--lock", lock)
    assert code == 1
    assert "pdf/notes.md: another version of the same bytes (VersionId differs)" in out
