"""The name of a pushed repository, and the readable source a push records with each skill.

One library is often built from several repositories (anthropics/skills, getsentry/skills,
github/awesome-copilot...) whose skills can share an id (`security-review`). A push stores
every skill it can and leaves a clashing one out, naming where the library's copy came
from and where this one comes from; `push --category-from-repo` keeps both by putting a
repository's skills under a category named for it (`repository_name`).

`repository_name` reads, in this order: the `origin` remote of the folder's own git
configuration (`DIR/.git/config`: `https://github.com/getsentry/skills.git` ->
`getsentry-skills`), else the folder's name, its parent's name put first when the folder
is a generic container of the mapping rule (`getsentry/skills` -> `getsentry-skills`, since a clone of
getsentry/skills and one of anthropics/skills are both folders named `skills`). The git
configuration is a local input: read only from a regular file (no symlink followed), at
most `MAX_GIT_CONFIG_BYTES`; anything unreadable falls back to the folder's name.

`origin_label` is the readable source of one skill folder (`getsentry-skills/skills/pdf`),
recorded on its `SKILL.md` as `x-amz-meta-s3skills-origin`, percent-encoded (S3 metadata is
ASCII) and at most `MAX_ORIGIN_CHARS` characters. A library copy's label is input from the
bucket: `shown_origin` decodes it, drops control characters and bounds it before a line
prints it.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import quote, unquote

from s3skills.errors import SkillError
from s3skills.transfer.localfiles import Unreadable, read_checked
from s3skills.transfer.localtree import GENERIC_CONTAINERS

__all__ = [
    "MAX_GIT_CONFIG_BYTES",
    "MAX_ORIGIN_CHARS",
    "ORIGIN_KEY",
    "origin_label",
    "repository_name",
    "shown_origin",
]

ORIGIN_KEY = "s3skills-origin"
"""The user-metadata name (`x-amz-meta-s3skills-origin`) of a pushed skill's readable source."""
MAX_GIT_CONFIG_BYTES = 64 * 1024
MAX_ORIGIN_CHARS = 160
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SECTION = re.compile(r'^\s*\[\s*remote\s+"origin"\s*\]\s*$')
_URL = re.compile(r"^\s*url\s*=\s*(\S+)\s*$")
_MAX_NAME = 64


def _clean(name: str) -> str:
    """`name` as a category segment: ASCII letters, digits, `.`, `_`, `-` (others become `-`)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _UNSAFE.sub("-", folded).strip("-.")[:_MAX_NAME].strip("-.")


def _origin_url(root: Path) -> str | None:
    """The `url` of `[remote "origin"]` in `root/.git/config`, or None."""
    try:
        text = read_checked(root / ".git" / "config", MAX_GIT_CONFIG_BYTES, None).decode("utf-8", "replace")
    except (Unreadable, SkillError, OSError):
        return None
    inside = False
    for line in text.splitlines():
        if line.lstrip().startswith("["):
            inside = bool(_SECTION.match(line))
        elif inside and (found := _URL.match(line)):
            return found.group(1)
    return None


def _from_url(url: str) -> str:
    """`owner-name` of a remote URL (`git@github.com:owner/name.git`, `https://.../owner/name`)."""
    parts = [p for p in re.split(r"[/:\\]+", url.rstrip("/")) if p]
    if not parts:
        return ""
    last = parts[-1].removesuffix(".git")
    return _clean(f"{parts[-2]}-{last}" if len(parts) >= 2 else last)


def repository_name(root: Path) -> str:
    """The category `push --category-from-repo` puts a repository's skills in (module docstring).

    Raises:
        SkillError: No usable name (a folder named only with characters a category
            cannot hold): the caller should give `--category C`.
    """
    folder = Path(root).expanduser().resolve()
    url = _origin_url(folder)
    name = _from_url(url) if url else ""
    if not name:
        name = _clean(folder.name)
        if folder.name.casefold() in GENERIC_CONTAINERS and folder.parent.name:
            name = _clean(f"{folder.parent.name}-{folder.name}")
    if not name:
        raise SkillError(f"{root}: cannot name a category after this folder; give --category C instead")
    return name


def origin_label(root: Path, folder: str) -> str:
    """The readable source of the skill folder `folder` (relative to `root`), for the metadata."""
    try:
        name = repository_name(root)
    except SkillError:
        name = "."
    label = f"{name}/{folder}" if folder and folder != "." else name
    return quote(label[:MAX_ORIGIN_CHARS], safe="/-_.~@+:")


def shown_origin(value: str | None) -> str | None:
    """A library copy's recorded label, decoded and safe to print (None when absent or empty)."""
    if not value:
        return None
    text = unquote(value[: MAX_ORIGIN_CHARS * 3], errors="replace")
    text = "".join(c for c in text if c.isprintable())[:MAX_ORIGIN_CHARS]
    return text or None
