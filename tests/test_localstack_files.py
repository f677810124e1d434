"""docker-compose.yml and the LocalStack init hook, checked without a Docker engine.

The compose file is parsed and its structure checked; the hook is syntax-checked with
`bash -n` and then run for real, minus the container: against the moto (and SeaweedFS)
fixtures, with `S3SKILLS_PYTHON` pointing at this interpreter so it skips the install.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from s3skills.examples import LIBRARY

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
HOOK = REPO / "localstack" / "init" / "ready.d" / "seed.sh"
NOTES = REPO / "localstack" / "README.md"
LIBRARY_FILES = sorted(p.relative_to(LIBRARY).as_posix() for p in LIBRARY.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


# -- docker-compose.yml --------------------------------------------------------------------------


def test_localstack_service(compose: dict[str, Any]) -> None:
    service = compose["services"]["localstack"]
    assert service["image"] == "localstack/localstack:4.14.0"
    assert "profiles" not in service  # started by a plain `docker compose up`
    assert _environment(service)["SERVICES"] == "s3"
    assert service["ports"] == ["127.0.0.1:4566:4566"]
    volumes = [str(v) for v in service["volumes"]]
    assert any(v.split(":")[:2] == ["./localstack/init/ready.d", "/etc/localstack/init/ready.d"] for v in volumes)
    project = [v for v in volumes if v.split(":")[1:] == ["/opt/s3skills", "ro"]]
    assert project
    assert project[0].split(":")[0] == "."
    health = service["healthcheck"]
    assert "4566" in " ".join(health["test"])
    assert health["retries"] > 0


def test_the_pinned_localstack_tag_is_explained() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    assert "last LocalStack image that runs without an auth token" in text


def test_seaweedfs_profile(compose: dict[str, Any]) -> None:
    service = compose["services"]["seaweedfs"]
    assert service["profiles"] == ["seaweedfs"]
    image, _, tag = service["image"].partition(":")
    assert image == "chrislusf/seaweedfs"
    assert tag
    assert tag != "latest"
    assert tag[0].isdigit()
    assert "-s3" in service["command"].split() or service["command"].split()[0] == "mini"
    assert service["ports"] == ["127.0.0.1:8333:8333"]
    assert "healthcheck" in service


def test_every_port_is_bound_to_loopback(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


# -- the init hook -------------------------------------------------------------------------------


def test_hook_is_an_executable_strict_bash_script() -> None:
    text = HOOK.read_text(encoding="utf-8")
    assert text.startswith("#!/bin/bash\n")
    assert "set -euo pipefail" in text
    assert os.access(HOOK, os.X_OK)
    subprocess.run(["bash", "-n", str(HOOK)], check=True, capture_output=True)
    # It seeds with the project's own code, not with a copy of the logic in shell.
    assert '-m s3skills.seed --endpoint-url "$endpoint" --bucket "$bucket" --user "$user"' in text
    assert "/opt/s3skills" in text


def _run_hook(endpoint: str, bucket: str, user: str, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3SKILLS_"))}
    env.update(
        HOME=str(tmp_path),
        PYTHONPATH=str(REPO),
        S3SKILLS_PYTHON=sys.executable,
        S3SKILLS_ENDPOINT_URL=endpoint,
        S3SKILLS_BUCKET=bucket,
        S3SKILLS_USER=user,
        **extra,
    )
    return subprocess.run(
        ["bash", str(HOOK)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180, check=False
    )


def _keys(client: Any, bucket: str, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(obj["Key"][len(prefix) :] for page in pages for obj in page.get("Contents", []))


def test_hook_creates_the_bucket_and_seeds_the_library(moto_endpoint: str, s3_client: Any, tmp_path: Path) -> None:
    proc = _run_hook(moto_endpoint, "s3skills", "ana", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "s3skills seed: seeding the library of user ana in s3://s3skills (users layout)" in proc.stderr
    assert "Seeded 4 skills into s3://s3skills/users/ana/skills/: 10 files uploaded" in proc.stdout
    assert _keys(s3_client, "s3skills", "users/ana/skills/") == LIBRARY_FILES
    pdf = s3_client.get_object(Bucket="s3skills", Key="users/ana/skills/escrituras/compraventa/resources/plantilla.pdf")
    assert pdf["Body"].read() == (LIBRARY / "escrituras/compraventa/resources/plantilla.pdf").read_bytes()
    assert pdf["ContentType"] == "application/pdf"


_STUB_PYTHON3 = """#!/bin/bash
# Stands in for the container's python3: `python3 -m venv DIR` makes stub pip/python that log.
[[ "$1 $2" == "-m venv" ]] || exit 1
mkdir -p "$3/bin"
printf '#!/bin/bash\\necho "pip $*" >> "%s"; ls -A "${@: -1}" >> "%s"\\n' "$LOG" "$LOG" > "$3/bin/pip"
printf '#!/bin/bash\\necho "python $*" >> "%s"\\n' "$LOG" > "$3/bin/python"
chmod +x "$3/bin/pip" "$3/bin/python"
"""


def test_hook_installs_the_mounted_project_then_seeds(tmp_path: Path) -> None:
    """The container path, offline: copy the read-only project, pip install it, run the seeder."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "python3").write_text(_STUB_PYTHON3)
    (stubs / "python3").chmod(0o755)
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3SKILLS_"))}
    env.update(HOME=str(tmp_path), PATH=f"{stubs}:{env['PATH']}", LOG=str(log), S3SKILLS_SOURCE=str(REPO))
    proc = subprocess.run(["bash", str(HOOK)], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("pip install ")
    copied = set(calls[1:-1])
    assert {"pyproject.toml", "s3skills", "middleware", "tools"} <= copied
    assert not copied & {".git", ".venv", ".mypy_cache"}
    assert (
        calls[-1]
        == "python -m s3skills.seed --endpoint-url http://localhost:4566 --bucket s3skills --user ana --layout users"
    )
    scratch = Path(calls[0].split()[-1]).parent
    assert scratch.name.startswith("s3skills-seed.")
    assert not scratch.exists()  # removed on exit


def test_hook_without_the_project_fails_clearly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3SKILLS_"))}
    env.update(HOME=str(tmp_path), S3SKILLS_SOURCE=str(tmp_path / "nowhere"))
    proc = subprocess.run(["bash", str(HOOK)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 1
    assert "no project at" in proc.stderr


def test_hook_seeds_seaweedfs(seaweed_bucket: Any, tmp_path: Path) -> None:
    from s3skills.testing import make_client

    proc = _run_hook(
        seaweed_bucket.endpoint_url,
        seaweed_bucket.bucket,
        "ana",
        tmp_path,
        AWS_ACCESS_KEY_ID=seaweed_bucket.access_key,
        AWS_SECRET_ACCESS_KEY=seaweed_bucket.secret_key,
    )
    assert proc.returncode == 0, proc.stderr
    client = make_client(
        seaweed_bucket.endpoint_url, access_key=seaweed_bucket.access_key, secret_key=seaweed_bucket.secret_key
    )
    assert _keys(client, seaweed_bucket.bucket, "users/ana/skills/") == LIBRARY_FILES


# -- the seeding code in process -------------------------------------------------------------------


def _store(endpoint: str, bucket: str) -> Any:
    import aioboto3

    from s3skills.storage import S3ObjectStore as ObjectStore

    session = aioboto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    return ObjectStore(bucket, endpoint_url=endpoint, region_name="us-east-1", session=session)


def test_seeding_twice_uploads_nothing_new(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    from s3skills.seed import seed_example_library

    store = _store(moto_endpoint, bucket)
    first = seed_example_library(store, "ana")
    assert len(first.uploaded) == len(LIBRARY_FILES)
    second = seed_example_library(store, "ana")
    assert second.uploaded == []
    assert len(second.skipped) == len(LIBRARY_FILES)
    assert _keys(s3_client, bucket, "users/ana/skills/") == LIBRARY_FILES


async def test_seeding_the_shared_library(moto_endpoint: str, bucket: str, s3_client: Any) -> None:
    from s3skills.seed import aseed_example_library

    report = await aseed_example_library(_store(moto_endpoint, bucket), "org", shared=True)
    assert report.skills == [
        "calculos/impuestos-transmision",
        "contratos/arrendamiento",
        "escrituras/compraventa",
        "escrituras/hipoteca",
    ]
    assert _keys(s3_client, bucket, "shared/org/skills/") == LIBRARY_FILES


@pytest.mark.parametrize("user", ["", "../bob", "a/b", "ana bob"])
def test_seeding_refuses_unsafe_user_ids(user: str) -> None:
    from s3skills.errors import InvalidPath
    from s3skills.seed import library_prefix

    with pytest.raises(InvalidPath):
        library_prefix(user)


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://localhost:4566", True),
        ("http://127.0.0.1:9000", True),
        ("http://[::1]:8333", True),
        ("https://s3.eu-west-1.amazonaws.com", False),
        ("http://10.0.0.5:4566", False),
        (None, False),
    ],
)
async def test_loopback_endpoints_get_dummy_credentials_only(
    url: str | None, loopback: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3skills.seed import is_loopback_url, session_for

    assert is_loopback_url(url) is loopback
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    credentials = await session_for(url, "us-east-1").get_credentials()
    if loopback:
        assert credentials is not None
        assert (await credentials.get_frozen_credentials()).access_key == "test"
    else:  # the usual AWS chain, which finds nothing in the test session's scrubbed environment
        assert credentials is None


def test_notes_explain_how_to_run_and_point_at_the_servers() -> None:
    text = NOTES.read_text(encoding="utf-8")
    for needle in (
        "docker compose up -d",
        "docker compose --profile seaweedfs up -d",
        "S3SKILLS_TEST_ENDPOINT=http://localhost:4566",
        "pytest -m live",
        "s3skills --endpoint-url http://localhost:4566 --bucket",
        "python -m s3skills.seed",
    ):
        assert needle in text, needle
