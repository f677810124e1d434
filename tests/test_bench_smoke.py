"""The bench's smoke mode runs every scenario end to end and writes a complete report.

`bench/run.py --smoke` runs in a subprocess (the index scenario alone: seconds; every
scenario: about half a minute, four fresh interpreters import s3skills for start-up).
These tests check that the bench works and the shape of its JSON, never its numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Minutes-long: run by .ci/run after the README's test command (`pytest -m slow`).
pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parent.parent / "bench"
INDEX_CONTENDERS = {
    "manifest cold",
    "manifest warm",
    "within TTL",
    "no manifest cold",
    "no manifest cold, builds it",
    "seeds' way",
    "raw transfer",
    "deepagents SkillsMiddleware",
}
OBSTORE_CONTENDERS = {"raw transfer (obstore)", "no manifest cold (obstore reads)"}  # when obstore is installed


def obstore_installed() -> bool:
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


MCP_CONTENDERS = {"first listing ever", "cold server, book present", "warm server", "per skill, no book (before)"}


def test_index_smoke_reports_every_contender_at_every_size_and_a_plot(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--scenario", "index", "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (output,) = tmp_path.glob("bench-*-index-*-smoke.json")
    index = json.loads(output.read_text())["index"]
    assert [row["size"] for row in index["sizes"]] == [20, 60]
    for row in index["sizes"]:
        assert set(row["index"]) == INDEX_CONTENDERS | (OBSTORE_CONTENDERS if obstore_installed() else set())
        assert all("seconds" in cell and "requests" in cell for cell in row["index"].values())
        # Every timed run is kept beside the median it gives.
        assert all(min(c["samples"]) <= c["seconds"] <= max(c["samples"]) for c in row["index"].values())
        assert set(row["other"]) == {"middleware per model call (warm index)", "load + SKILL.md read"}
        assert set(row["mcp"]) == MCP_CONTENDERS
        assert all(cell["total"] > 0 for cell in row["mcp"].values())
        assert row["peak_rss_mib"] > 0
    assert index["push"]["skills"] == 20
    assert [row["skills"] for row in index["after_push"]] == [20, 60]
    for row in index["after_push"]:
        for cell in (row["push"], row["first index"], row["first MCP skills/list page"]):
            assert cell["seconds"] > 0
            assert cell["total"] > 0
    assert Path(index["plot"]).stat().st_size > 0
    assert index["targets"] == []  # not asserted in smoke mode


def test_tenants_smoke_reports_each_level_with_rates_latencies_and_requests_per_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--scenario", "tenants", "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (output,) = tmp_path.glob("bench-*-tenants-*-smoke.json")
    tenants = json.loads(output.read_text())["tenants"]
    assert tenants["users"] == 4
    assert [row["concurrency"] for row in tenants["levels"]] == [2, 4]
    for row in tenants["levels"]:
        assert row["errors"] == 0, row["first_errors"]
        assert row["runs"] >= row["concurrency"]
        assert row["runs_per_second"] > 0
        assert 0 < row["p50_seconds"] <= row["p95_seconds"]
        assert row["requests_per_run"] > 0
        assert set(row["requests"]) <= {"GET", "PUT", "HEAD", "POST", "DELETE"}
    assert "runs/s" in done.stdout


def test_tenants_without_manifests_and_with_a_fifth_of_ranged_responses_cut_short_every_run_loads_its_skill(
    tmp_path: Path,
) -> None:
    # Issue 21: with 20 % of the ranged responses truncated, every run still loads its skill (the
    # warm-up's first index of each library reads every SKILL.md head with ranged GETs).
    out = tmp_path / "tenants.json"
    args = ["--users", "6", "--skills-per-user", "5", "--shared-skills", "10", "--concurrency", "6"]
    args += ["--no-manifest", "--truncate-ranged", "0.2", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(BENCH / "tenants.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["manifests"] is False
    assert report["truncated_responses"] > 0
    assert report["warmup_errors"] == 0, report["warmup_first_errors"]
    assert [row["errors"] for row in report["levels"]] == [0]
    _assert_a_results_file(report, "tenants")
    (level,) = report["levels"]
    assert len(level["latencies_seconds"]) == level["runs"]  # every run's latency, not only p50/p95


def test_smoke_mode_runs_every_scenario_and_reports_both_trees(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (output,) = tmp_path.glob("bench-*-smoke.json")
    report = json.loads(output.read_text())

    assert {s["name"] for s in report["scenarios"]} == {
        "grep /workspace",
        "skills index, cold",
        "skills index, warm",
        "read one file",
    }
    assert {row["size"] for row in report["index"]["sizes"]} == {20, 60}
    assert [row["operation"] for row in report["operations"] if row["error"]] == []
    startup = report["startup"]
    assert startup["previous"]["ref"] == "1921cb8"
    for tree in (startup["current"], startup["previous"]):
        assert tree["help_seconds"] > 0
        assert tree["modules"] > 0
    assert Path(startup["current"]["s3skills_from"]).is_relative_to(BENCH.parent)
    assert set(startup["ratio"]) == {"help_seconds", "modules"}
    assert "current / previous" in done.stdout
    _assert_a_results_file(report, "run")
    # Every timed run of every scenario side is kept, not only the median.
    assert [sample["what"] for sample in report["samples"]][:2] == ["backend_grep", "naive_grep"]
    assert all(len(sample["seconds"]) == report["config"]["repeat"] for sample in report["samples"])


def _assert_a_results_file(report: dict[str, Any], bench: str) -> None:
    """What bench/record.py adds: enough to judge a figure (commit, machine, load, command line)."""
    assert report["bench"] == bench
    assert report["machine"]["commit"]
    assert report["machine"]["nproc"] >= 1
    assert report["machine"]["platform"]
    assert len(report["load_average_before"]) == len(report["load_average_after"]) == 3
    assert report["command"][0] == f"{bench}.py"
    assert len(report["command"]) > 1


def test_noisy_runs_each_hostile_scenario_and_writes_every_victims_samples(tmp_path: Path) -> None:
    out = tmp_path / "noisy.json"
    scenarios = ["frontmatters", "frontmatters-cold", "word"]
    args = [sys.executable, str(BENCH / "noisy.py"), "--calls", "5", "--out", str(out)]
    done = subprocess.run(
        [*args, *(a for s in scenarios for a in ("--scenario", s))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert [r["scenario"] for r in report["runs"]] == ["quiet", *scenarios]
    for run in report["runs"]:
        assert len(run["ls_ms"]) == len(run["list_skills_ms"]) == 5
    assert all(run["hostile_calls"] > 0 for run in report["runs"][1:])
    assert "victims' p99 over 150 ms" in done.stdout


def test_noisy_runs_the_channel_flood_against_a_server_process_and_reports_its_rss(tmp_path: Path) -> None:
    out = tmp_path / "noisy-http.json"
    args = [sys.executable, str(BENCH / "noisy.py"), "--calls", "5", "--scenario", "channel-flood", "--out", str(out)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert [r["scenario"] for r in report["runs"]] == ["http-quiet", "channel-flood"]
    for run in report["runs"]:
        assert len(run["list_skills_ms"]) == 5
        assert 0 < run["rss_baseline_mb"] <= run["rss_peak_mb"]
    assert report["runs"][1]["hostile_calls"] > 0
    assert "RSS growth over 150 MB" in done.stdout
