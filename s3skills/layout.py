"""`KeyLayout`: where each namespace lives in the bucket, with no two able to meet.

The default layout keeps everything a user owns under that user's prefix:

    users/{user_id}/skills/...            the user's library
    users/{user_id}/threads/{thread_id}/  a thread's /workspace
    shared/{library}/skills/...           an organisation library
    tickets/{ticket_id}/                  a ticket's /ticket

`KeyLayout.seeds()` is the seed documents' layout (`{user_id}/skills/`,
`threads/{thread_id}/`, `tickets/{ticket_id}/`, `{library}/skills/`), for buckets
already organised that way. There a thread's files are keyed by thread id only,
so the application must use thread ids that are unguessable and owned by one user.

Every layout is checked when it is built: placeholders are whole segments, and for
each pair of namespaces the ids that would make one prefix reach into the other
are worked out. If no ids are needed for that (the layout always overlaps) it is
refused; otherwise those ids are refused at run time by `check_ids` (with the seeds'
layout: a user id `threads` or `tickets`, or equal to the shared library's name).

A custom layout can come from a file (`KeyLayout.from_file`, the CLI's `--layout-file`:
TOML or JSON of the templates). `isolation_notes` says, with the reason, where a layout
keeps users apart less well than the default (threads keyed by thread id only, ids the
layout must refuse at run time), so the CLI warns of them.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from s3skills.errors import TenantError
from s3skills.paths import check_identity

__all__ = ["PLACEHOLDERS", "KeyLayout"]

PLACEHOLDERS = ("user_id", "thread_id", "ticket_id", "library")
"""The identity parts a template may use, each as a whole segment (`{user_id}`)."""

_NAMESPACES = ("user_skills", "shared_skills", "workspace", "ticket")
_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")
# Per namespace: the placeholder it must hold, and the ones it may hold.
_PLACEHOLDERS_OF = {
    "user_skills": ("user_id", {"user_id"}),
    "shared_skills": ("library", {"library"}),
    "workspace": ("thread_id", {"user_id", "thread_id"}),
    "ticket": ("ticket_id", {"ticket_id", "user_id"}),
}

_MISSING = {
    "user_id": "No user id for this call: pass user_id= to S3Backend, or run the agent with context={'user_id': ...}",
    "thread_id": "No thread id for this call: run the agent with config={'configurable': {'thread_id': ...}}",
    "ticket_id": "No ticket id for this call",
    "library": "No shared library is configured",
}


def _segments(template: str, what: str) -> tuple[str, ...]:
    if template == "":
        return ()
    if not template.endswith("/"):
        raise ValueError(f"KeyLayout.{what} must end with '/'")
    segments = tuple(template[:-1].split("/"))
    for seg in segments:
        names = _PLACEHOLDER_RE.findall(seg)
        if names:
            if seg != "{" + names[0] + "}" or len(names) != 1:
                raise ValueError(f"KeyLayout.{what}: a placeholder must be a whole segment, not {seg!r}")
            if names[0] not in PLACEHOLDERS:
                raise ValueError(f"KeyLayout.{what}: unknown placeholder {seg!r}; use one of {PLACEHOLDERS}")
        else:
            try:
                check_identity(seg, f"KeyLayout.{what} segment")
            except ValueError as exc:
                raise ValueError(str(exc)) from None
    return segments


def _is_identity(segment: str) -> bool:
    try:
        check_identity(segment, "id")
    except ValueError:
        return False
    return True


def _var(segment: str) -> str | None:
    return segment[1:-1] if segment.startswith("{") else None


@dataclass(frozen=True)
class KeyLayout:
    """Key templates, one per namespace; each yields a prefix ending in `/`.

    Attributes:
        root: A fixed prefix in front of every key (e.g. `prod/`).
        user_skills: A user's library.
        shared_skills: An organisation library (`{library}` is its name).
        workspace: A thread's files.
        ticket: A ticket's context files.

    Raises:
        ValueError: A template is malformed (not ending in `/`, a placeholder that is
            not a whole segment, unknown, repeated, missing its namespace's own
            placeholder or not available to that namespace), or two namespaces
            always overlap.
    """

    root: str = ""
    user_skills: str = "users/{user_id}/skills/"
    shared_skills: str = "shared/{library}/skills/"
    workspace: str = "users/{user_id}/threads/{thread_id}/"
    ticket: str = "tickets/{ticket_id}/"
    reserved: Mapping[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    distinct: frozenset[tuple[str, str]] = field(init=False, repr=False, compare=False)

    @classmethod
    def seeds(cls, root: str = "") -> KeyLayout:
        """The seed documents' layout (threads keyed by thread id only)."""
        return cls(
            root=root,
            user_skills="{user_id}/skills/",
            shared_skills="{library}/skills/",
            workspace="threads/{thread_id}/",
            ticket="tickets/{ticket_id}/",
        )

    @classmethod
    def named(cls, name: str) -> KeyLayout:
        """`users` (the default) or `seeds`, as the CLI's `--layout` and `S3SKILLS_LAYOUT` say."""
        if name == "users":
            return cls()
        if name == "seeds":
            return cls.seeds()
        raise ValueError(f"Unknown key layout {name!r}: use 'users' or 'seeds'")

    def __post_init__(self) -> None:
        root = self.root if self.root == "" or self.root.endswith("/") else self.root + "/"
        object.__setattr__(self, "root", root)
        if any(_var(s) for s in _segments(root, "root")):
            raise ValueError("KeyLayout.root cannot hold placeholders")
        # Old spelling of the library placeholder.
        object.__setattr__(self, "shared_skills", self.shared_skills.replace("{shared_prefix}", "{library}"))
        templates = {name: _segments(getattr(self, name), name) for name in _NAMESPACES}
        for name, segments in templates.items():
            used = [v for s in segments if (v := _var(s)) is not None]
            needed, allowed = _PLACEHOLDERS_OF[name]
            if needed not in used:
                why = f"without it every {needed.replace('_', ' ')} shares one prefix"
                raise ValueError(f"KeyLayout.{name} must hold {{{needed}}}: {why}")
            if len(set(used)) != len(used):
                raise ValueError(f"KeyLayout.{name}: a placeholder appears twice")
            if stray := sorted(set(used) - allowed):
                raise ValueError(f"KeyLayout.{name} cannot use {', '.join(stray)}: use {sorted(allowed)}")
        reserved: dict[str, set[str]] = {}
        distinct: set[tuple[str, str]] = set()
        for (a, ta), (b, tb) in combinations(templates.items(), 2):
            condition = _meeting_condition(ta, tb)
            if condition is None:
                continue
            # Ids of different calls can meet, so only a literal or the (fixed) library name
            # can be kept apart per call; two per-call ids at one position cannot.
            enforceable = [c for c in condition if c[0] == "eq" or "library" in c[1:]]
            if not enforceable:
                raise ValueError(f"KeyLayout: {a} ({getattr(self, a)!r}) and {b} ({getattr(self, b)!r}) can overlap")
            kind, x, y = enforceable[0]
            if kind == "eq":
                reserved.setdefault(x, set()).add(y)
            else:
                distinct.add((min(x, y), max(x, y)))
        object.__setattr__(self, "reserved", {k: frozenset(v) for k, v in reserved.items()})
        object.__setattr__(self, "distinct", frozenset(distinct))

    @classmethod
    def from_file(cls, path: str | Path) -> KeyLayout:
        """A layout from a TOML or JSON file of its templates (`root`, `user_skills`, ...).

        The templates may sit at the top level or in a `[layout]` table (`"layout"` key).
        A `.json` file is read as JSON, anything else as TOML.

        Raises:
            ValueError: The file cannot be read or parsed, names an unknown field, holds a
                value that is not text, or the layout is refused (see the class).
        """
        file = Path(path).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the layout file {str(file)!r}: {exc}") from None
        try:
            data: object = json.loads(text) if file.suffix.lower() == ".json" else tomllib.loads(text)
        except ValueError as exc:
            raise ValueError(
                f"the layout file {str(file)!r} is not valid {file.suffix.lstrip('.') or 'TOML'}: {exc}"
            ) from None
        if isinstance(data, dict) and isinstance(data.get("layout"), dict):
            data = data["layout"]
        if not isinstance(data, dict):
            raise ValueError(f"the layout file {str(file)!r} must hold a table of templates")
        fields = ("root", *_NAMESPACES)
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"the layout file names unknown fields {unknown}: use {list(fields)}")
        if bad := sorted(k for k, v in data.items() if not isinstance(v, str)):
            raise ValueError(f"the layout file's {', '.join(bad)} must be text")
        return cls(**data)

    def isolation_notes(self) -> list[str]:
        """Where this layout keeps users apart less well than the default, each with the reason.

        Empty for the default layout. Not errors: the layout is valid, but the
        application must then do what the note says.
        """
        notes = []
        if "{user_id}" not in self.workspace:
            notes.append(
                f"workspace ({self.workspace!r}) keys threads by thread id only: whoever knows a thread id "
                "reaches its files, so thread ids must be unguessable and each owned by one user"
            )
        for name, values in sorted(self.reserved.items()):
            notes.append(
                f"the {name.replace('_', ' ')} cannot be {', '.join(sorted(values))}: such an id would reach into "
                "another namespace, so it is refused at run time"
            )
        for x, y in sorted(self.distinct):
            notes.append(
                f"the {x.replace('_', ' ')} and the {y.replace('_', ' ')} must differ: equal, they would share "
                "one prefix (refused at run time)"
            )
        return notes

    def shared_as_user(self) -> KeyLayout:
        """This layout with the user library where the shared libraries are (`{library}` as `{user_id}`).

        With it, the library of the "user" NAME is the shared library NAME, so every tool
        made for a user's library (index, enable, create, remove) works on a shared one.
        """
        return KeyLayout(
            root=self.root,
            user_skills=self.shared_skills.replace("{library}", "{user_id}"),
            shared_skills=self.shared_skills,
            workspace=self.workspace,
            ticket=self.ticket,
        )

    # -- ids ------------------------------------------------------------------------------

    def check_ids(self, **ids: str | None) -> None:
        """Refuse ids that would make two namespaces meet in this layout.

        Args:
            **ids: Any of `user_id`, `thread_id`, `ticket_id`, `library` (None: unknown).

        Raises:
            TenantError: An id is reserved by the layout, or equals another that must differ.
        """
        for name, value in ids.items():
            if value is not None and value in self.reserved.get(name, ()):
                raise TenantError(
                    f"The {name.replace('_', ' ')} {value!r} is reserved by the key layout "
                    "(it would reach into another namespace)"
                )
        for x, y in self.distinct:
            if ids.get(x) is not None and ids.get(x) == ids.get(y):
                raise TenantError(
                    f"The {x.replace('_', ' ')} and the {y.replace('_', ' ')} cannot be equal in this key layout"
                )

    # -- prefixes -----------------------------------------------------------------------

    def _format(self, template: str, **ids: str | None) -> str:
        values: dict[str, str] = {}
        for name in _PLACEHOLDER_RE.findall(template):
            value = ids.get(name)
            if value is None:
                raise TenantError(_MISSING[name])
            values[name] = check_identity(value, name.replace("_", " "))
        self.check_ids(**values)
        return self.root + template.format(**values)

    def user_prefix(self, user_id: str | None) -> str:
        """The prefix of a user's library."""
        return self._format(self.user_skills, user_id=user_id)

    def shared_prefix(self, library: str | None) -> str:
        """The prefix of an organisation library."""
        return self._format(self.shared_skills, library=library)

    def workspace_prefix(self, user_id: str | None, thread_id: str | None) -> str:
        """The prefix of a thread's files."""
        return self._format(self.workspace, user_id=user_id, thread_id=thread_id)

    def ticket_prefix(self, ticket_id: str | None, user_id: str | None = None) -> str:
        """The prefix of a ticket's files."""
        return self._format(self.ticket, ticket_id=ticket_id, user_id=user_id)

    def manifest_key(self, library_prefix: str) -> str:
        """The key of a library's manifest: a sibling of its `skills/` folder, never inside it.

        `users/ana/skills/` gives `users/ana/.s3skills/manifest.json` (a library folder
        not named `skills` gives `.s3skills/manifest-{name}.json`). A dot-folder inside
        `skills/` would be a category name; this key is outside every library, workspace
        and ticket of this layout, whatever their ids.

        Raises:
            ValueError: `library_prefix` is not a folder prefix, or the key would fall
                inside a namespace of this layout.
        """
        return self._derived(library_prefix, "manifest", ".json")

    def records_prefix(self, library_prefix: str) -> str:
        """Where a library's version records live (`users/ana/.s3skills/records/`), checked as
        `manifest_key` is: `.s3skills/records-{name}/` for a library folder not named `skills`."""
        return self._derived(library_prefix, "records", "/")

    def events_prefix(self, library_prefix: str) -> str:
        """Where a library's other audit events (channel changes) live (`.s3skills/events/`)."""
        return self._derived(library_prefix, "events", "/")

    def channels_prefix(self, library_prefix: str) -> str:
        """Where a library's channels live (`.s3skills/channels/`; one object per channel)."""
        return self._derived(library_prefix, "channels", "/")

    def approvals_prefix(self, library_prefix: str) -> str:
        """Where a library's script approvals live by default (`.s3skills/approvals/`).

        A deployment that restricts approvals to its approvers gives its own prefix
        instead (`Config.approvals_prefix`), outside every library.
        """
        return self._derived(library_prefix, "approvals", "/")

    def usage_prefix(self, library_prefix: str) -> str:
        """Where agents count a library's skill loads (`.s3skills/usage/`: one folder per day, one
        object per writing process; see `s3skills.skills.usage_store`)."""
        return self._derived(library_prefix, "usage", "/")

    def _derived(self, library_prefix: str, kind: str, suffix: str) -> str:
        """`{parent}/.s3skills/{kind}{-name}{suffix}`: a sibling of the library folder, checked."""
        if not library_prefix.endswith("/") or library_prefix in ("/", self.root):
            raise ValueError(f"no {kind} for the library prefix {library_prefix!r}")
        parent, _, leaf = library_prefix[:-1].rpartition("/")
        name = (kind if leaf == "skills" else f"{kind}-{leaf}") + suffix
        key = (parent + "/" if parent else "") + ".s3skills/" + name
        segments = key.rstrip("/").split("/")
        for namespace in _NAMESPACES:
            template = _segments(self.root + getattr(self, namespace), namespace)
            if len(template) < len(segments) + (1 if key.endswith("/") else 0) and all(
                seg == t or (_var(t) is not None and _is_identity(seg))
                for seg, t in zip(segments, template, strict=False)
            ):
                raise ValueError(f"KeyLayout: the {kind} key {key!r} would fall inside {namespace}")
        return key


Condition = list[tuple[str, str, str]]


def _meeting_condition(a: tuple[str, ...], b: tuple[str, ...]) -> Condition | None:
    """When can a prefix of template `a` and one of `b` be equal or nested?

    Returns None when never (two different literals at one position); else the
    conjunction of what must hold, each `("eq", var, literal)` or `("same", x, y)`;
    an empty list means always.
    """
    condition: Condition = []
    for sa, sb in zip(a, b, strict=False):
        va, vb = _var(sa), _var(sb)
        if va is None and vb is None:
            if sa != sb:
                return None
        elif va is not None and vb is not None:
            if va != vb:
                condition.append(("same", va, vb))
        elif va is not None:
            condition.append(("eq", va, sb))
        else:
            assert vb is not None
            condition.append(("eq", vb, sa))
    return condition
