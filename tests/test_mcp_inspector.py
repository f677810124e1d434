"""The MCP skills server driven by a client written elsewhere: the MCP Inspector CLI (npm).

Skipped, with the reason, when `npx` is absent, or outside CI when the npm registry cannot be
reached; a failed `npx` is otherwise a failure (tests/npm_tools.py).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import digest, server_args
from npm_tools import npm_failed

from s3skills.examples import LIBRARY
from s3skills.seed import seed_example_library
from s3skills.storage import S3ObjectStore as ObjectStore

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"  # the version docs/MCP.md pins


def _inspector() -> list[str]:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (the MCP Inspector CLI comes from npm)")
    probe = subprocess.run([npx, "-y", INSPECTOR, "--help"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        npm_failed("the MCP Inspector is not available from npm", probe.stderr)
    return [npx, "-y", INSPECTOR, "--cli"]


def _run(cli: list[str], bucket: str, endpoint: str, *method: str) -> dict[str, Any]:
    env = [f"{k}={v}" for k, v in os.environ.items() if k.startswith("AWS_")]
    env.append(f"PYTHONPATH={Path(__file__).resolve().parents[1]}")
    flags = [arg for item in env for arg in ("-e", item)]
    cmd = [*cli, *flags, sys.executable, *server_args(bucket, endpoint, "--user", "ana"), *method]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.slow
def test_inspector_cli_lists_and_reads_skill_resources(bucket: str, moto_endpoint: str) -> None:
    cli = _inspector()
    seed_example_library(ObjectStore(bucket, endpoint_url=moto_endpoint), "ana")
    listed = _run(cli, bucket, moto_endpoint, "--method", "resources/list")
    uris = sorted(r["uri"] for r in listed["resources"])
    expected = sorted(f"skill://{p.parent.relative_to(LIBRARY)}/SKILL.md" for p in Path(LIBRARY).rglob("SKILL.md"))
    assert uris == expected
    md = _run(cli, bucket, moto_endpoint, "--method", "resources/read", "--uri", "skill://escrituras/hipoteca/SKILL.md")
    assert md["contents"][0]["text"] == (Path(LIBRARY) / "escrituras/hipoteca/SKILL.md").read_text(encoding="utf-8")
    pdf_uri = "skill://escrituras/compraventa/resources/plantilla.pdf"
    pdf = _run(cli, bucket, moto_endpoint, "--method", "resources/read", "--uri", pdf_uri)
    local = (Path(LIBRARY) / "escrituras/compraventa/resources/plantilla.pdf").read_bytes()
    assert digest(base64.b64decode(pdf["contents"][0]["blob"])) == digest(local)


@pytest.mark.slow
def test_inspector_cli_uses_the_tools_face_and_prompts_of_a_host_without_the_extension(
    bucket: str, moto_endpoint: str
) -> None:
    cli = _inspector()
    seed_example_library(ObjectStore(bucket, endpoint_url=moto_endpoint), "ana")
    tools = _run(cli, bucket, moto_endpoint, "--method", "tools/list")
    assert [t["name"] for t in tools["tools"]] == ["list_skills", "load_skill", "read_skill_file"]
    loaded = _run(
        cli, bucket, moto_endpoint, "--method", "tools/call", "--tool-name", "load_skill", "--tool-arg", "name=hipoteca"
    )
    assert not loaded.get("isError")
    skill_md = (Path(LIBRARY) / "escrituras/hipoteca/SKILL.md").read_text(encoding="utf-8")
    assert loaded["structuredContent"]["skillMd"] == skill_md
    assert skill_md in loaded["content"][0]["text"]
    prompt = _run(cli, bucket, moto_endpoint, "--method", "prompts/get", "--prompt-name", "escrituras/hipoteca")
    assert skill_md in prompt["messages"][0]["content"]["text"]
    templates = _run(cli, bucket, moto_endpoint, "--method", "resources/templates/list")
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["skill://{+path}"]
