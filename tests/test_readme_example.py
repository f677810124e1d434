"""The documented testing example runs exactly as written (a real agent, a scripted model, in memory).

It lives in docs/TESTING.md ("Testing your application"), marked `<!-- testing-example -->`;
the README links there.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTING = ROOT / "docs" / "TESTING.md"


def test_the_documented_testing_example_runs_as_written() -> None:
    text = TESTING.read_text(encoding="utf-8")
    match = re.search(r"<!-- testing-example -->\n```python\n(.*?)\n```", text, re.DOTALL)
    assert match is not None, "docs/TESTING.md lost its testing example"
    namespace: dict[str, object] = {}
    exec(compile(match.group(1), "docs/TESTING.md", "exec"), namespace)  # its own asserts check the run
    assert namespace["out"]["loaded_skills"] == ["pdf"]  # type: ignore[index]


def test_the_readme_keeps_the_two_commands() -> None:
    # .ci/run and the tests' own instructions depend on these two lines, exactly.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'pip install -e ".[demo]" && s3skills demo' in readme
    assert 'pip install -e ".[test]" && python -m pytest -q' in readme


def test_the_readme_is_a_front_door_of_at_most_300_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move details to docs/"
