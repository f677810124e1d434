"""The bench's smoke mode runs every scenario end to end and writes a complete report.

Run with `pytest bench/test_smoke.py` (about half a minute: four fresh interpreters
import s3skills for the start-up scenario). It checks that the bench works, never its
numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent


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
    assert [row["operation"] for row in report["operations"] if row["error"]] == []
    startup = report["startup"]
    assert startup["previous"]["ref"] == "1921cb8"
    for tree in (startup["current"], startup["previous"]):
        assert tree["help_seconds"] > 0
        assert tree["modules"] > 0
    assert Path(startup["current"]["s3skills_from"]).is_relative_to(BENCH.parent)
    assert set(startup["ratio"]) == {"help_seconds", "modules"}
    assert "current / previous" in done.stdout
