"""`s3skills demo` as a new user runs it: a subprocess, no configuration, no network.

The demo runs in a clean environment (no `AWS_*` variables, `HOME` in a temporary
folder). Where the machine allows it (root, `unshare`), it also runs in a network
namespace of its own that has only a loopback interface, which proves that it needs
no network at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from s3skills.cli import main

REPO = Path(__file__).resolve().parents[1]
SKILL = "escrituras/compraventa"


def _isolated_network() -> list[str]:
    """A command prefix that runs its command with loopback only, or [] when not possible."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        return []
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=10, check=False
    )
    if probe.returncode != 0:
        return []
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


NO_NETWORK = _isolated_network()


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3SKILLS_"))}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), NO_COLOR="1", COLUMNS="100")
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        env.pop(name, None)
    return env


def _run(cmd: list[str], home: Path, *, network: bool = False) -> subprocess.CompletedProcess[str]:
    full = cmd if network else [*NO_NETWORK, *cmd]
    return subprocess.run(
        full, capture_output=True, text=True, env=_clean_env(home), cwd=home, timeout=180, check=False
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-home")


def _cli() -> list[str]:
    """The console script, or `python -m s3skills.cli` (the same `main`) when it is not installed."""
    script = Path(sys.executable).with_name("s3skills")
    return [str(script)] if script.exists() else [sys.executable, "-m", "s3skills.cli"]


@pytest.fixture(scope="module")
def text_run(home: Path) -> subprocess.CompletedProcess[str]:
    """`s3skills demo`, as a new user types it."""
    return _run([*_cli(), "demo"], home)


# SLOW_DEMO: a second demo subprocess (~6 s on 2 cores) and its breadth run in .ci/run's slow
# step; the README's command keeps `s3skills demo` in a subprocess (`text_run`) as the smoke test,
# and `demo --json` in-process (test_demo_ignores_the_environment_and_runs_self_contained).


@pytest.fixture(scope="module")
def json_run(home: Path) -> dict[str, Any]:
    proc = _run([*_cli(), "demo", "--json"], home)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_demo_exits_zero_with_no_configuration(text_run: subprocess.CompletedProcess[str]) -> None:
    assert text_run.returncode == 0, text_run.stderr
    assert "Traceback" not in text_run.stderr


def test_transcript_shows_the_progressive_disclosure_flow(text_run: subprocess.CompletedProcess[str]) -> None:
    out = text_run.stdout
    assert "embedded S3 (moto) at http://127.0.0.1:" in out
    # The index the model saw lists compraventa...
    assert "Skills index the model saw" in out
    assert f"<location>{SKILL}</location>" in out
    # ... the model loads it ...
    assert f"cargar_habilidad(skill_path='{SKILL}')" in out
    assert f"Skill '{SKILL}' loaded" in out
    # ... and its SKILL.md is appended to the prompt.
    assert "Appended to the system prompt after cargar_habilidad" in out
    assert f"### Current skill: {SKILL}" in out
    assert "# Escritura de compraventa de inmueble" in out
    # The other files, read only after the load; the PDF comes back as a content block.
    assert "read_file(file_path='/skills/compraventa/disclosure_clausulas.md'" in out
    assert "read_file(file_path='/skills/compraventa/resources/ejemplo.md'" in out
    assert "[file block: application/pdf, " in out
    assert "write_file(file_path='/workspace/borrador.md'" in out
    assert "Updated file /workspace/borrador.md" in out


def test_transcript_reports_s3_requests(text_run: subprocess.CompletedProcess[str]) -> None:
    out = text_run.stdout
    assert "S3 requests per operation" in out
    for operation in ("ListObjectsV2", "GetObject", "PutObject"):
        assert operation in out
    assert "S3 requests: prompt" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("demo ok: 4 skills seeded for ana; compraventa loaded; 3 files read (1 PDF); ")
    assert "borrador.md written" in summary
    assert " S3 requests for 7 tool calls in " in summary


@pytest.mark.slow  # the `demo --json` subprocess: see SLOW_DEMO
def test_json_transcript_has_the_expected_steps(json_run: dict[str, Any]) -> None:
    result = json_run
    assert result["ok"] is True
    assert all(result["checks"].values()), result["checks"]
    assert result["embedded"] is True
    assert result["user"] == "ana"
    assert result["seeded"]["skills"] == [
        "calculos/impuestos-transmision",
        "contratos/arrendamiento",
        "escrituras/compraventa",
        "escrituras/hipoteca",
    ]
    calls = [
        (s["name"], s["args"].get("path") or s["args"].get("file_path") or s["args"].get("skill_path"))
        for s in result["steps"]
    ]
    assert calls == [
        ("ls", "/"),
        ("cargar_habilidad", SKILL),
        ("ls", "/skills"),
        ("read_file", "/skills/compraventa/disclosure_clausulas.md"),
        ("read_file", "/skills/compraventa/resources/ejemplo.md"),
        ("read_file", "/skills/compraventa/resources/plantilla.pdf"),
        ("write_file", "/workspace/borrador.md"),
        ("answer", None),
    ]
    assert all(s["status"] == "ok" for s in result["steps"])
    steps = result["steps"]
    assert "/skills" not in steps[0]["result"]  # nothing loaded yet
    assert steps[2]["result"] == "['/skills/compraventa/']"
    assert steps[5]["block"] == {"type": "file", "mime_type": "application/pdf", "bytes": 2578, "header": "%PDF-1.4"}
    assert "[" in steps[6]["args"]["content"]  # the draft keeps the missing data marked
    assert "/workspace/borrador.md" in result["final_answer"]
    assert SKILL in result["index"]
    assert "### Current skill" not in result["index"]
    assert result["skill_section"].startswith("### Loaded skills")


@pytest.mark.slow  # the `demo --json` subprocess: see SLOW_DEMO
def test_json_request_counts(json_run: dict[str, Any]) -> None:
    """Reads and writes cost one request each, and a file in a skill's subfolder one HEAD more (sent
    with the GET: is that folder another skill's now?); listing / and /skills costs none."""
    steps = {s["index"]: s for s in json_run["steps"]}
    assert steps[1]["tool_requests"] == {}  # ls("/"): the mounts are known without S3
    assert steps[3]["tool_requests"] == {}  # ls("/skills"): the loaded skills are in the state
    assert steps[4]["tool_requests"] == {"GetObject": 1}  # disclosure_clausulas.md: at the top
    for index in (5, 6):  # resources/...: resources/SKILL.md asked for too
        assert steps[index]["tool_requests"] == {"GetObject": 1, "HeadObject": 1}
    assert steps[7]["tool_requests"] == {"PutObject": 1}
    total = json_run["requests"]
    assert json_run["total_requests"] == sum(total.values())
    assert total["PutObject"] == 1  # the agent's write: the seeding push left the manifest in place
    # the example library's 10 files, its digest book, its manifest twice (marked as being
    # written before the first file, then updated, the mark cleared, after the last) and one
    # version record per skill (4)
    assert json_run["seed_requests"]["PutObject"] == 17


def test_quiet_prints_only_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("demo ok: ")


def test_missing_model_key_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["demo", "--model", "anthropic:claude-sonnet-4-5"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "s3skills: error: --model anthropic:claude-sonnet-4-5: set ANTHROPIC_API_KEY to use this provider"
    ]


@pytest.mark.parametrize("spec", ["claude", "openai:", ":gpt"])
def test_malformed_model_is_one_clear_line(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", spec]) == 1
    assert capsys.readouterr().err.startswith("s3skills: error: --model ")


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--endpoint-url", "http://127.0.0.1:9", "--quiet"],
        # The CLI's retries on a refused connection take ~3 s: one side of `demo` is enough here.
        pytest.param(["--endpoint-url", "http://127.0.0.1:9", "demo", "--quiet"], marks=pytest.mark.slow),
    ],
    ids=["after-demo", "before-demo"],
)
def test_unreachable_endpoint_is_one_clear_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """The endpoint is honoured on either side of `demo` (the embedded server would succeed)."""
    # Port 9 on loopback: nothing listens there, and no request leaves the machine.
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("s3skills: error: cannot reach the S3 endpoint http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--bucket", "not a bucket"], "invalid bucket name 'not a bucket'"),
        (["--user", "../bob", "demo"], "Invalid user id '../bob'"),
        (["--endpoint-url", "localhost:4566", "demo"], "invalid endpoint URL 'localhost:4566'"),
        (["demo", "--quiet", "--json"], "--quiet and --json cannot be used together"),
    ],
)
def test_bad_demo_options_are_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"s3skills: error: {message}")


def test_demo_ignores_the_environment_and_runs_self_contained(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """S3SKILLS_BUCKET or AWS_ENDPOINT_URL set for the other commands do not redirect the demo."""
    monkeypatch.setenv("S3SKILLS_BUCKET", "somebody-elses-bucket")
    monkeypatch.setenv("S3SKILLS_USER", "bob")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("S3SKILLS_LAYOUT", "seeds")  # the layout does come from the environment
    assert main(["demo", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["embedded"] is True
    assert (result["bucket"], result["user"], result["library"]) == ("s3skills-demo", "ana", "ana/skills/")


@pytest.mark.slow  # a demo subprocess on SeaweedFS (~5 s): see SLOW_DEMO
def test_demo_against_seaweedfs(seaweed_bucket: Any, home: Path) -> None:
    """The same run against a real S3 server, with --endpoint-url/--bucket/--user before `demo`."""
    env_cmd = [
        "env",
        f"AWS_ACCESS_KEY_ID={seaweed_bucket.access_key}",
        f"AWS_SECRET_ACCESS_KEY={seaweed_bucket.secret_key}",
        *_cli(),
        "--endpoint-url",
        seaweed_bucket.endpoint_url,
        "--bucket",
        seaweed_bucket.bucket,
        "--user",
        "lucia",
        "demo",
        "--json",
        "--layout",
        "seeds",
    ]
    proc = _run(env_cmd, home, network=True)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["embedded"] is False
    assert result["user"] == "lucia"
    assert result["library"] == "lucia/skills/"
    assert result["ok"] is True
