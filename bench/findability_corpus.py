"""The real-skills corpus as the findability bench pushes it: one library, and what push leaves out.

`findability_real.py` (the bench) and `request_shape.py` (the request sets' measures) both
read it; it lives here so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from s3skills.testing.corpus import real_repositories
from s3skills.transfer.localtree import scan_tree

__all__ = ["Corpus", "load_corpus"]


@dataclass
class Corpus:
    """The corpus as one library: id -> SKILL.md text, where each came from, what was left out."""

    skills: dict[str, str] = field(default_factory=dict)
    repo_of: dict[str, str] = field(default_factory=dict)
    folder_of: dict[str, str] = field(default_factory=dict)
    excluded: list[dict[str, str]] = field(default_factory=list)
    collapsed: list[dict[str, str]] = field(default_factory=list)


def load_corpus(repositories: Mapping[str, str]) -> Corpus:
    """Every corpus skill under the id `s3skills push --category <short>` gives it, per repository.

    A folder push leaves out (an ambiguous id, an invalid one, a fatal `SKILL.md` problem) is
    in `excluded`; a byte-identical copy of another folder is in `collapsed` (pushed once).

    Raises:
        KeyError: A corpus repository has no short name in `repositories`.
    """
    corpus = Corpus()
    for repo in real_repositories():
        tree = scan_tree(repo.root, category=repositories[repo.name])
        fatal = {f.path for f in tree.problems if f.fatal}
        for item in tree.refused:
            if item.path.endswith("SKILL.md"):
                corpus.excluded.append(
                    {"repo": repo.name, "folder": item.path[: -len("/SKILL.md")], "why": item.reason}
                )
        for item in tree.duplicates:
            corpus.collapsed.append({"repo": repo.name, "folder": item.path[: -len("/SKILL.md")], "why": item.reason})
        for skill_id, data in tree.skill_md.items():
            folder = tree.mapping[skill_id]
            if f"{folder}/SKILL.md" in fatal:
                corpus.excluded.append({"repo": repo.name, "folder": folder, "why": "a fatal SKILL.md problem"})
                continue
            corpus.skills[skill_id] = data.decode("utf-8", errors="replace")
            corpus.repo_of[skill_id] = repo.name
            corpus.folder_of[skill_id] = folder
    return corpus
