"""The findability bench runs end to end on a small generated library (`pytest bench/test_findability.py`).

It checks that the bench measures through the real prompt index and `list_skills`, never
its figures beyond their range.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import findability


def test_bench_reports_both_measures_for_every_skill(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert findability.main(["--skills", "40", "--budget", "1500", "--anonymous", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["skills"] == 40
    for kind in ("named_requests", "anonymous_requests"):
        figures = report[kind]
        assert figures["requests"] == 40
        assert 0 <= figures["in_index_with_description"] <= figures["in_index"] <= 100
        assert 0 <= figures["in_first_search_page"] <= 100
    assert all(e["request"] for e in report["examples"])


def test_requests_come_from_the_body_not_the_description() -> None:
    import random

    body = "# Title\n\n**When to use**: the user wants to archive a ticket in Zorba and link it to the board."
    request, anonymous = findability.request_from_body(body, "composio-skills/zorba-automation", random.Random(1))
    assert "archive a ticket in Zorba" in request
    assert "Zorba" not in anonymous
