"""The README's testing example runs exactly as written (a real agent, a scripted model, in memory)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_testing_example_runs_as_written() -> None:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- testing-example -->\n```python\n(.*?)\n```", text, re.DOTALL)
    assert match is not None, "the README lost its testing example"
    namespace: dict[str, object] = {}
    exec(compile(match.group(1), "README.md", "exec"), namespace)  # its own asserts check the run
    assert namespace["out"]["loaded_skills"] == ["pdf"]  # type: ignore[index]


def test_the_docs_never_point_outside_the_repository() -> None:
    root = README.parent
    for doc in [README, *sorted((root / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        assert "../shared" not in text, doc.name
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (doc.parent / target).resolve().is_relative_to(root), f"{doc.name} -> {target}"
            assert (doc.parent / target).exists(), f"{doc.name} links to a missing {target}"
