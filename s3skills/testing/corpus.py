"""The real-skills corpus: 682 public skills (7 repositories), unpacked once into a cache.

The archive is test data that lives outside the project (`../shared/corpus/real-skills.tar.gz`
beside the repository, or the file named by `S3SKILLS_REAL_SKILLS`); it is never copied into
the project or the package. `real_skills_root()` unpacks it into
`~/.cache/s3skills/real-skills/<sha256 prefix>/` (or `$S3SKILLS_CACHE`) on first use and returns
the folder that holds one folder per owner (`<root>/<owner>/<repo>/...`).

Unpacking is safe against a hostile archive: members are extracted with tarfile's `data` filter
(no absolute paths, no `..`, no links out of the tree, no device files).
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CORPUS_ENV",
    "CORPUS_MISSING",
    "REPOSITORY_NAMES",
    "CorpusNotFound",
    "RealRepository",
    "find_corpus_archive",
    "real_repositories",
    "real_repository",
    "real_skills_root",
]

CORPUS_ENV = "S3SKILLS_REAL_SKILLS"
_ARCHIVE_NAME = "real-skills.tar.gz"
_TOP = "real-skills"
REPOSITORY_NAMES = (
    "K-Dense-AI/claude-scientific-skills",
    "getsentry/skills",
    "github/awesome-copilot",
    "hashicorp/agent-skills",
    "langchain-ai/deepagents",
    "mattpocock/skills",
    "obra/superpowers",
)
"""The corpus's repositories (`owner/name`), sorted: what tests parametrise over before it is unpacked."""
CORPUS_MISSING = (
    f"the real-skills corpus is not on this machine: set {CORPUS_ENV} to {_ARCHIVE_NAME} "
    "(docs/TESTING.md says how to build it from the 7 repositories)"
)
"""The one line a test that needs the corpus skips with when it is missing (allowed outside CI only)."""


class CorpusNotFound(FileNotFoundError):
    """The real-skills archive is not where it is looked for (see `find_corpus_archive`)."""


@dataclass(frozen=True)
class RealRepository:
    """One repository of the corpus: `owner/name` and its folder (the repository's root)."""

    name: str
    root: Path

    def skill_folders(self) -> list[Path]:
        """Every folder of the repository that holds a `SKILL.md`, sorted."""
        return sorted(p.parent for p in self.root.rglob("SKILL.md") if p.is_file())


def find_corpus_archive(start: Path | None = None) -> Path:
    """The archive's path: `$S3SKILLS_REAL_SKILLS`, else `shared/corpus/` beside the repository.

    Raises:
        CorpusNotFound: neither exists.
    """
    named = os.environ.get(CORPUS_ENV)
    if named:
        path = Path(named).expanduser()
        if path.is_file():
            return path
        raise CorpusNotFound(f"{CORPUS_ENV}={named} is not a file")
    here = (start or Path(__file__)).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "corpus" / _ARCHIVE_NAME
        if candidate.is_file():
            return candidate
    raise CorpusNotFound(
        f"{_ARCHIVE_NAME} not found in a shared/corpus/ folder above {here}; set {CORPUS_ENV} to its path "
        "(docs/TESTING.md says how to build it)"
    )


def _cache_dir() -> Path:
    base = os.environ.get("S3SKILLS_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "s3skills"


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()[:16]


def real_skills_root(archive: Path | None = None) -> Path:
    """The unpacked corpus (`<cache>/real-skills/<digest>/real-skills`), unpacking it if needed.

    Concurrent callers (pytest-xdist workers) are safe: each unpacks into its own temporary
    folder and the first rename wins.
    """
    source = archive or find_corpus_archive()
    target = _cache_dir() / "real-skills" / _digest(source)
    done = target / _TOP
    if done.is_dir():
        return done
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    with tarfile.open(source, "r:gz") as tar:
        tar.extractall(scratch, filter="data")
    try:
        scratch.rename(target)
    except OSError:
        if not done.is_dir():
            raise
        _remove_tree(scratch)  # another worker finished first
    return done


def real_repositories(root: Path | None = None) -> list[RealRepository]:
    """The corpus's repositories (`owner/name`), sorted by name."""
    base = root or real_skills_root()
    repos = []
    for owner in sorted(p for p in base.iterdir() if p.is_dir()):
        for repo in sorted(p for p in owner.iterdir() if p.is_dir()):
            repos.append(RealRepository(f"{owner.name}/{repo.name}", repo))
    return repos


def real_repository(name: str) -> RealRepository:
    """One repository of the corpus by `owner/name` (one of `REPOSITORY_NAMES`).

    Raises:
        CorpusNotFound: The archive is missing.
        KeyError: No such repository in the corpus.
    """
    return {repo.name: repo for repo in real_repositories()}[name]


def _remove_tree(path: Path) -> None:
    for folder, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(folder, name))
        for name in dirs:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                os.unlink(full)
            else:
                os.rmdir(full)
    os.rmdir(path)
