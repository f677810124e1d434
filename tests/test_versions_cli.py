"""The version commands' edges: no versioning, one version, binary files, unknown versions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3skills.cli import main

FOLDER = "ana/skills/pdf/"
SKILL = "---\nname: pdf\ndescription: Fills PDF forms.\n---\n# PDF {}\n"


class Cli:
    def __init__(self, endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.globals = ["--bucket", bucket, "--user", "ana", "--endpoint-url", endpoint, "--layout", "seeds"]
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*self.globals, *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err


@pytest.fixture
def cli(moto_endpoint: str, bucket: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto_endpoint, bucket, capsys)


def put(s3_client: Any, bucket: str, files: dict[str, bytes]) -> None:
    for path, body in files.items():
        s3_client.put_object(Bucket=bucket, Key=FOLDER + path, Body=body)


def test_without_versioning_history_shows_one_version_and_says_why(cli: Cli, s3_client: Any, bucket: str) -> None:
    put(s3_client, bucket, {"SKILL.md": SKILL.format(1).encode()})
    put(s3_client, bucket, {"SKILL.md": SKILL.format(2).encode()})
    code, out, err = cli("history", "pdf")
    assert code == 0
    assert "1 version(s) of pdf" in out
    assert "versioning is off" in err
    assert "s3skills versioning enable" in err
    code, _, err = cli("diff", "pdf")
    assert code == 1
    assert "one version only" in err


def test_rollback_to_a_version_written_before_versioning_was_enabled_works(
    cli: Cli, s3_client: Any, bucket: str
) -> None:
    put(s3_client, bucket, {"SKILL.md": SKILL.format(1).encode()})
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    # SKILL.md last, as writers put it: a file written after it (a second later, under load)
    # would be a version of its own.
    put(s3_client, bucket, {"forms.md": b"f", "SKILL.md": SKILL.format(2).encode()})
    versions = json.loads(cli("--json", "history", "pdf")[1])["versions"]
    assert len(versions) == 2
    code, out, err = cli("rollback", "pdf", "--to", versions[1]["version"])
    assert code == 0, err
    assert f"Rolled back pdf to version {versions[1]['version']}" in out
    assert s3_client.get_object(Bucket=bucket, Key=FOLDER + "SKILL.md")["Body"].read() == SKILL.format(1).encode()


def test_diff_names_binary_files_and_an_unknown_version_is_an_error(cli: Cli, s3_client: Any, bucket: str) -> None:
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put(s3_client, bucket, {"logo.png": b"\x89PNG\x00\x01", "SKILL.md": SKILL.format(1).encode()})
    put(s3_client, bucket, {"logo.png": b"\x89PNG\x00\x02", "SKILL.md": SKILL.format(2).encode()})
    code, out, _ = cli("diff", "pdf")
    assert code == 0
    assert "Binary file logo.png differs" in out
    assert "-# PDF 1" in out
    assert "+# PDF 2" in out
    code, _, err = cli("rollback", "pdf", "--to", "deadbeef")
    assert code == 1
    assert "No version 'deadbeef'" in err


def test_rollback_restores_a_deleted_file_and_history_keeps_the_later_version(
    cli: Cli, s3_client: Any, bucket: str
) -> None:
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put(s3_client, bucket, {"extra.md": b"e", "SKILL.md": SKILL.format(1).encode()})
    s3_client.delete_object(Bucket=bucket, Key=FOLDER + "extra.md")
    put(s3_client, bucket, {"SKILL.md": SKILL.format(2).encode()})
    v2, v1 = (v["version"] for v in json.loads(cli("--json", "history", "pdf")[1])["versions"])
    rolled = json.loads(cli("--json", "rollback", "pdf", "--to", v1)[1])
    assert rolled["version"] == v1
    assert sorted(rolled["changed"]) == ["SKILL.md", "extra.md"]
    assert s3_client.get_object(Bucket=bucket, Key=FOLDER + "extra.md")["Body"].read() == b"e"
    info = json.loads(cli("--json", "info", "pdf")[1])
    assert info["version_id"] == v1
    code, out, _ = cli("rollback", "pdf", "--to", v1)
    assert code == 0
    assert f"already at version {v1}" in out
    assert [v["version"] for v in json.loads(cli("--json", "history", "pdf")[1])["versions"]] == [v1, v2, v1]
