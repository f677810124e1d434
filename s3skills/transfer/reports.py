"""What a push or a pull did (or, for a dry run, would do): the reports and the refusal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from s3skills.errors import S3SkillsError
from s3skills.transfer.localtree import Finding, Item

__all__ = ["PullReport", "PushRefused", "PushReport", "names_line"]


def names_line(names: list[str], budget: int = 120) -> str:
    """`a, b, c, +N more`: as many names as fit in about `budget` characters (at least one).

    Every line a push prints stays short (no line over 200 characters), however many
    skills it names; `s3skills validate` and `--json` list them all.
    """
    shown: list[str] = []
    used = 0
    for name in names:
        if shown and used + len(name) + 2 > budget:
            break
        shown.append(name)
        used += len(name) + 2
    more = len(names) - len(shown)
    return ", ".join(shown) + (f", +{more} more" if more else "")


class PushRefused(S3SkillsError, ValueError):
    """The push was refused (`strict`); nothing was written.

    Attributes:
        report: What the scan found (`refused` and `problems` say why).
    """

    def __init__(self, message: str, report: PushReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class PushReport:
    """The outcome (or, with `dry_run`, the plan) of a push.

    Attributes:
        skills: The ids of the skills pushed.
        mapping: Skill id -> its folder relative to the pushed folder (`.` for the folder
            itself): what the mapping rule made of each `SKILL.md`.
        uploaded: Files written (`new` or `changed`); with `dry_run`, to be written.
        skipped: Files already up to date.
        deleted: Remote files removed by `delete` (or to be removed).
        kept_nested: Skills of the library nested in the folder of a mirrored skill
            (`pdf/inner` in `pdf`), which `delete` keeps: a skill is one folder (as `rm`).
        refused: Local files (or skills) left out, with the reason.
        ignored: Junk and files outside any skill.
        problems: `SKILL.md` problems of the pushed skills.
        nested: Skill folders inside another skill folder (each pushed as its own skill).
        conflicts: Skills that clash with the library (`path` is the skill id): a remote
            copy pushed from another folder (its id is in `replaceable`; the reason names
            both sources and the ways out: a category keeps both, `replace` takes it
            over), or an id that nests in or swallows a remote skill's folder. Both are
            left out (in `left_out`, the library's copy kept); `strict` refuses the push
            instead (they are then `blocking`).
        replaceable: The conflicts that `replace` would resolve (copies pushed from
            another folder).
        left_out: Skills of the tree not pushed: no host can read their `SKILL.md` (a
            `fatal` problem, in `problems`), or they clash with the library (in
            `conflicts`). Their copies in the library are kept.
        replaced: Remote skills replaced whose source is unknown (created or edited in
            the bucket): written, and reported.
        disabled: Remote skills that are disabled and stay disabled (`enable` not given).
        switched: Skills whose enabled state `push --enable`/`--disable` changes (in the
            library, or against what the local SKILL.md says for a new skill).
        duplicates: Local skill folders left out as byte-identical copies of another.
        renamed: Local skill folders pushed under the shortest distinguishing id.
        dry_run: Nothing was written.
    """

    skills: list[str] = field(default_factory=list)
    mapping: dict[str, str] = field(default_factory=dict)
    uploaded: list[Item] = field(default_factory=list)
    skipped: list[Item] = field(default_factory=list)
    deleted: list[Item] = field(default_factory=list)
    kept_nested: list[str] = field(default_factory=list)
    refused: list[Item] = field(default_factory=list)
    ignored: list[Item] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    nested: list[Item] = field(default_factory=list)
    conflicts: list[Item] = field(default_factory=list)
    replaceable: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    replaced: list[Item] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    switched: list[str] = field(default_factory=list)
    duplicates: list[Item] = field(default_factory=list)
    renamed: list[Item] = field(default_factory=list)
    dry_run: bool = False

    @property
    def blocking(self) -> list[Item]:
        """The conflicts that stop the push (with `strict`: neither left out nor replaced)."""
        return [c for c in self.conflicts if c.path not in self.left_out]

    def blocking_summary(self) -> str:
        """Why the push is (or would be) refused, naming the skills and the flag for each kind."""
        copies = [c.path for c in self.blocking if c.path in self.replaceable]
        clashes = [c.path for c in self.blocking if c.path not in self.replaceable]
        parts = []
        if copies:
            parts.append(
                f"{len(copies)} skill(s) in the library were pushed from another folder ({names_line(copies, 80)}): "
                "keep both (--category-from-repo) or take them over (--replace)"
            )
        if clashes:
            parts.append(f"{len(clashes)} skill id(s) clash with the library's folders ({names_line(clashes, 80)})")
        return "; ".join(parts)

    @property
    def bytes_uploaded(self) -> int:
        """Bytes in `uploaded`."""
        return sum(item.size for item in self.uploaded)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "bytes_uploaded": self.bytes_uploaded}


@dataclass
class PullReport:
    """The outcome of a pull.

    Attributes:
        downloaded: Files written below the destination.
        skipped: Files already there with the same content.
        refused: Keys not written (unsafe path, too large, in the way of a folder).
        kept: Local files that differ from the library and were kept (not `force`):
            local edits are never lost silently.
        backups: Local files moved aside (`backup`) before the library's version was
            written; `reason` names the backup file.
    """

    downloaded: list[Item] = field(default_factory=list)
    skipped: list[Item] = field(default_factory=list)
    refused: list[Item] = field(default_factory=list)
    kept: list[Item] = field(default_factory=list)
    backups: list[Item] = field(default_factory=list)

    @property
    def bytes_downloaded(self) -> int:
        """Bytes in `downloaded`."""
        return sum(item.size for item in self.downloaded)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "bytes_downloaded": self.bytes_downloaded}
