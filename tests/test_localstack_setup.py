"""How the LocalStack fixture finds its Python >= 3.13, without starting LocalStack (fast).

Real interpreters only: this session's own Python (3.11 or 3.13 in CI), and stand-ins written
as shell scripts that answer the version probe the way an interpreter does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from s3skills.testing import LOCALSTACK_REQUIREMENTS, find_localstack_python


def _interpreter(path: Path, major: int, minor: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {major} {minor}\n")
    path.chmod(0o755)
    return path


def test_an_interpreter_older_than_3_13_is_never_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    older = _interpreter(tmp_path / "bin" / "python3.12", 3, 12)
    monkeypatch.setenv("S3SKILLS_LOCALSTACK_PYTHON", str(older))
    assert find_localstack_python() is None  # where LocalStack tests skip, saying why


def test_the_projects_own_python_is_used_exactly_when_it_is_3_13_or_newer(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI runs the suite on 3.11 (too old for LocalStack) and on 3.13 (new enough).
    monkeypatch.setenv("S3SKILLS_LOCALSTACK_PYTHON", sys.executable)
    expected = sys.executable if sys.version_info[:2] >= (3, 13) else None
    assert find_localstack_python() == expected


def test_the_newest_pyenv_release_is_found_when_path_has_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    versions = tmp_path / "pyenv" / "versions"
    _interpreter(versions / "3.9.18" / "bin" / "python3", 3, 9)
    _interpreter(versions / "3.12.1" / "bin" / "python3", 3, 12)
    _interpreter(versions / "3.13.0" / "bin" / "python3", 3, 13)
    newest = _interpreter(versions / "3.14.2" / "bin" / "python3", 3, 14)
    broken_shim = tmp_path / "bin" / "python3.13"  # a pyenv shim for a version not activated
    broken_shim.parent.mkdir()
    broken_shim.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    broken_shim.chmod(0o755)
    monkeypatch.delenv("S3SKILLS_LOCALSTACK_PYTHON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert find_localstack_python() == str(newest)


def test_no_python_3_13_anywhere_is_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _interpreter(tmp_path / "pyenv" / "versions" / "3.12.1" / "bin" / "python3", 3, 12)
    monkeypatch.delenv("S3SKILLS_LOCALSTACK_PYTHON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert find_localstack_python() is None


def test_the_documented_host_runtime_commands_match_what_the_fixture_runs() -> None:
    """docs/LOCAL_SERVERS.md's LocalStack-without-Docker commands install the same pins, on loopback."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "LOCAL_SERVERS.md").read_text(encoding="utf-8")
    section = doc.split("## LocalStack without Docker", 1)[1].split("\n## ", 1)[0]
    for requirement in LOCALSTACK_REQUIREMENTS:
        assert f'"{requirement}"' in section
    for setting in ("GATEWAY_LISTEN=127.0.0.1:", "GATEWAY_SERVER=hypercorn", "DNS_ADDRESS=0", "DISABLE_EVENTS=1"):
        assert setting in section
    assert "OVERRIDE_IN_DOCKER=0" in section
    assert "python -m pytest -q -m localstack" in section
