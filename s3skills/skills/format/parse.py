"""SKILL.md files: parse, check and write the Agent Skills frontmatter (pure, no I/O).

The model these produce lives in `s3skills.skills.format.model`.

A SKILL.md is a YAML frontmatter block between two `---` lines followed by a Markdown
body (agentskills.io/specification). Loading is lenient where that is harmless, as the
specification advises clients to be:

* Loaded with a warning: a `name` that breaks the naming rules or differs from its
  folder (kept as written), over-long fields, a value with an unquoted `: ` (re-read
  with the value quoted), an optional field of the wrong type (ignored), a missing
  `name` when the folder is known (the folder name is used).
* Skipped (`InvalidSkill` with the reason): no frontmatter, unclosed frontmatter,
  YAML that does not parse or is not a mapping, a missing or empty `description`,
  invalid UTF-8, a file over `MAX_SKILL_MD_BYTES` or a frontmatter over
  `MAX_FRONTMATTER_BYTES`, and any YAML alias (`*name`), which is how alias bombs work.

The YAML loader is a `SafeLoader` that refuses aliases and keeps numbers and dates as
the text written (`version: 1.10` is `"1.10"`); only `true`/`false` are booleans
(`yes`/`on` stay text, as in YAML 1.2) and `~`/`null`/empty are null.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import yaml
from pydantic import ValidationError

from s3skills.skills.format.model import (
    COMPATIBILITY_MAX_CHARS,
    DESCRIPTION_MAX_CHARS,
    FRONTMATTER_PARSE_SECONDS,
    MAX_FRONTMATTER_BYTES,
    MAX_FRONTMATTER_NODES,
    MAX_SKILL_MD_BYTES,
    NAME_MAX_CHARS,
    InvalidSkill,
    ParsedSkill,
    Problem,
    SkillMetadata,
    split_tools,
)
from s3skills.skills.format.yaml12 import mend_surrogates

__all__ = [
    "frontmatter_complete",
    "frontmatter_prefix",
    "get_skill_doc",
    "node_bound",
    "over_budget",
    "parse_skill_md",
    "render_skill_md",
    "validate_skill_md",
]

_BODY_MAX_LINES = 500  # The specification's recommendation for the body.


_MAX_DEPTH = 64  # Deeper YAML is refused: PyYAML's scanner is quadratic in flow nesting.


_TOO_MANY = (
    f"the frontmatter holds over {MAX_FRONTMATTER_NODES} YAML values (a skill's needs a few dozen); it was not read"
)
_TOO_SLOW = f"the frontmatter took over {FRONTMATTER_PARSE_SECONDS * 1000:.0f} ms of CPU to read; it was not read"


class _Refused(yaml.YAMLError):
    """YAML that is refused on purpose (aliases, depth, size); the message is the reason."""


class _Budget:
    """Counts a frontmatter's YAML values and the CPU its reading takes; refuses past either bound."""

    def __init__(self) -> None:
        self.nodes = 0
        self.started = time.thread_time()

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_FRONTMATTER_NODES:
            raise _Refused(_TOO_MANY)
        if self.nodes % 64 == 0 and time.thread_time() - self.started > FRONTMATTER_PARSE_SECONDS:
            raise _Refused(_TOO_SLOW)


def node_bound(text: str) -> int:
    """An upper bound of the YAML values `text` can hold, from a count of its indicators (C speed).

    Every value after the first needs a line break, a `,`, `:`, `-`, `?`, `[` or `{` of its
    own, and a single-pair mapping inside a flow sequence at most one more.
    """
    return 2 * sum(map(text.count, ",\n[{:-?")) + 1


class _FrontmatterLoader(yaml.SafeLoader):
    """A SafeLoader that refuses aliases (so nothing can expand: no billion laughs), depth and size."""

    _depth = 0
    _budget: _Budget | None = None

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise _Refused("YAML aliases (*name) are not allowed in a SKILL.md frontmatter")
        if self._budget is None:
            self._budget = _Budget()
        self._budget.count()
        self._depth += 1
        if self._depth > _MAX_DEPTH:
            raise _Refused("the frontmatter is nested too deeply")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# Numbers and dates stay the text written; only YAML 1.2's true/false are booleans ("yes", "on"
# stay text, as in js-yaml). The lists are fresh, so SafeLoader itself is untouched.
_BOOL_TAG = "tag:yaml.org,2002:bool"
_TEXT_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp", _BOOL_TAG}
_FrontmatterLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _TEXT_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_FrontmatterLoader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))

_CSafeLoader: Any = getattr(yaml, "CSafeLoader", None)


def _may_refuse(text: str) -> bool:
    """Whether `_check_events` could refuse `text` (False: it cannot, skip it).

    An alias needs a `*`. Each level of nesting needs an indicator of its own (`:`, `?` or
    `{` for a mapping, `-` or `[` for a sequence, or a `!` tag on an empty one), so text
    with fewer of them than `_MAX_DEPTH` cannot nest that deep; text whose `node_bound` is
    within `MAX_FRONTMATTER_NODES` cannot hold too many values.
    """
    return "*" in text or sum(map(text.count, ":-?[{!")) + 1 >= _MAX_DEPTH or node_bound(text) > MAX_FRONTMATTER_NODES


def _check_events(text: str, loader: Any) -> None:
    """Aliases, depth and size checked on libyaml's events, as `_FrontmatterLoader.compose_node` does.

    Stops at the first value over the budget: a crafted frontmatter costs at most
    `MAX_FRONTMATTER_NODES` events (or `FRONTMATTER_PARSE_SECONDS` of CPU), never all of it.
    """
    depth = 0
    budget = _Budget()
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise _Refused("YAML aliases (*name) are not allowed in a SKILL.md frontmatter")
        if isinstance(event, yaml.ScalarEvent | yaml.MappingStartEvent | yaml.SequenceStartEvent):
            budget.count()
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > _MAX_DEPTH:
                raise _Refused("the frontmatter is nested too deeply")
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
        elif isinstance(event, yaml.ScalarEvent) and depth + 1 > _MAX_DEPTH:
            raise _Refused("the frontmatter is nested too deeply")


def over_budget(text: str) -> str | None:
    """Why the YAML `text` is refused before it is loaded (aliases, depth, values, CPU), or None.

    Costs a count of indicators for real frontmatters; only text that could be refused is
    walked, and the walk stops at the first value over the budget.
    """
    if not _may_refuse(text):
        return None
    try:
        _check_events(text, _FastLoader or _FrontmatterLoader)
    except _Refused as exc:
        return str(exc)
    except (yaml.YAMLError, RecursionError):
        return None  # not valid YAML: the loader says why
    return None


# libyaml's parser (when PyYAML has it) loads the same YAML with the same resolvers for about
# 1/30 of the CPU: indexing a library of big frontmatters then holds the GIL far less, so other
# tenants' calls on the event loop are held up far less (bench/frontmatter_stall.py: indexing
# 300 frontmatters of ~56 KB took 36 s of pure-Python parsing, 2.4 s with libyaml).
_FastLoader: Any = None
if _CSafeLoader is not None:
    _FastLoader = type("_FastLoader", (_CSafeLoader,), {})
    _FastLoader.yaml_implicit_resolvers = {k: list(v) for k, v in _FrontmatterLoader.yaml_implicit_resolvers.items()}

_OPEN_RE = re.compile(r"\A(?:[ \t]*\n)*---[ \t]*\n")
_CLOSE_RE = re.compile(r"^---[ \t]*$", re.MULTILINE)
_HEAD_OPEN_RE = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:[ \t]*\r?\n)*---[ \t]*\r?\n")
_HEAD_CLOSE_RE = re.compile(rb"^---[ \t]*\r?\n", re.MULTILINE)
_KEY_LINE_RE = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:[ \t]+(\S.*)$")
_NOT_PLAIN = tuple("\"'|>[{&*!%@`#")


def _decode(data: str | bytes) -> str:
    """Text with the BOM removed and `\\n` line ends; refuses oversized or non-UTF-8 input."""
    if len(data) > MAX_SKILL_MD_BYTES or (
        isinstance(data, str) and len(data.encode("utf-8", "surrogatepass")) > MAX_SKILL_MD_BYTES
    ):
        raise InvalidSkill(f"SKILL.md is over {MAX_SKILL_MD_BYTES} bytes (10 MiB); it was not parsed")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InvalidSkill(f"SKILL.md is not valid UTF-8 (byte {exc.start})") from exc
    return data.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _split(text: str) -> tuple[str, str] | None:
    """(frontmatter, body), None without an opening `---`; raises when it is never closed."""
    opening = _OPEN_RE.match(text)
    if opening is None:
        return None
    closing = _CLOSE_RE.search(text, opening.end())
    if closing is None:
        raise InvalidSkill("the frontmatter is not closed: add a '---' line after the last field")
    return text[opening.end() : closing.start()], text[closing.end() :].lstrip("\n")


def _yaml_reason(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "the frontmatter is nested too deeply"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 2})" if mark is not None else ""  # +2: 0-based, after '---'
        return f"the frontmatter is not valid YAML: {exc.problem}{where}"
    return f"the frontmatter is not valid YAML: {exc}"


def _flow_depth(text: str) -> int:
    """The deepest `[`/`{` nesting, quotes ignored (an over-estimate, which is safe)."""
    depth = deepest = 0
    for match in re.finditer(r"[\[\]{}]", text):
        depth = depth + 1 if match.group() in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def _quote_colon_values(frontmatter: str) -> tuple[str, list[str]]:
    """Quote top-level plain values that contain `: ` (the commonest YAML mistake)."""
    lines = frontmatter.split("\n")
    out: list[str] = []
    fixed: list[str] = []
    i = 0
    while i < len(lines):
        match = _KEY_LINE_RE.match(lines[i])
        start, i = i, i + 1
        if match is None or match.group(2).startswith(_NOT_PLAIN):
            out.append(lines[start])
            continue
        while i < len(lines) and lines[i][:1] in (" ", "\t") and lines[i].strip():
            i += 1  # Plain continuation lines belong to the value.
        value = " ".join([match.group(2).strip(), *(line.strip() for line in lines[start + 1 : i])])
        if ": " in value or value.endswith(":"):
            out.append(f"{match.group(1)}: {json.dumps(value, ensure_ascii=False)}")
            fixed.append(match.group(1))
        else:
            out.extend(lines[start:i])
    return "\n".join(out), fixed


def _load_yaml(frontmatter: str, problems: list[Problem]) -> object:
    def load(text: str) -> object:
        if _FastLoader is not None:
            try:
                if _may_refuse(text):
                    _check_events(text, _FastLoader)
                return yaml.load(text, Loader=_FastLoader)  # noqa: S506 - a CSafeLoader subclass
            except _Refused:
                raise
            except (yaml.YAMLError, RecursionError):
                if node_bound(text) > MAX_FRONTMATTER_NODES:
                    raise  # libyaml's reason: the pure-Python loader is 30 times slower on big input
                # the pure-Python loader below says why (and repairs what it can), as always
        return yaml.load(text, Loader=_FrontmatterLoader)  # noqa: S506 - a SafeLoader subclass

    if _flow_depth(frontmatter) > _MAX_DEPTH:
        raise InvalidSkill("the frontmatter is nested too deeply")
    try:
        return mend_surrogates(load(frontmatter))
    except _Refused as exc:
        raise InvalidSkill(str(exc)) from exc
    except (yaml.YAMLError, RecursionError) as exc:
        repaired, keys = _quote_colon_values(frontmatter)
        try:
            if not keys:
                raise
            loaded = load(repaired)
        except (yaml.YAMLError, RecursionError):
            raise InvalidSkill(_yaml_reason(exc)) from exc
        for key in keys:
            problems.append(Problem("error", f"the value of '{key}' contains ': ' and must be quoted"))
        return mend_surrogates(loaded)


def _check(meta: SkillMetadata, folder: str | None) -> list[Problem]:
    """The specification's rules the loader tolerates."""
    found: list[str] = []
    name = meta.name
    if len(name) > NAME_MAX_CHARS:
        found.append(f"name is {len(name)} characters; the limit is {NAME_MAX_CHARS}")
    if name != name.lower() or not all(ch.isalnum() or ch == "-" for ch in name):
        found.append(f"name {name!r} must be lowercase letters, digits and hyphens")
    elif name.startswith("-") or name.endswith("-"):
        found.append(f"name {name!r} must not start or end with a hyphen")
    elif "--" in name:
        found.append(f"name {name!r} must not contain consecutive hyphens")
    if folder is not None and name != folder:
        found.append(f"name {name!r} does not match folder {folder!r}")
    for field, limit in (("description", DESCRIPTION_MAX_CHARS), ("compatibility", COMPATIBILITY_MAX_CHARS)):
        value = getattr(meta, field)
        if value is not None and len(value) > limit:
            found.append(f"{field} is {len(value)} characters; the limit is {limit}")
    return [Problem("error", message) for message in found]


def _build(raw: dict[str, Any], problems: list[Problem]) -> SkillMetadata | None:
    """Validate the mapping; a bad optional field is dropped, a bad name/description is fatal."""
    for _ in range(len(raw) + 1):
        try:
            return SkillMetadata.model_validate(raw)
        except ValidationError as exc:
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                message = error["msg"].removeprefix("Value error, ")
                if field in ("name", "description"):
                    problems.append(Problem("error", f"'{field}': {message}", fatal=True))
                    continue
                for key in (field, field.replace("-", "_"), field.replace("_", "-")):
                    if key in raw:
                        del raw[key]
                        problems.append(Problem("error", f"ignored '{key}': {message}"))
                        break
            if any(p.fatal for p in problems):
                return None
    problems.append(Problem("error", "the frontmatter fields could not be read", fatal=True))
    return None


def _analyse(data: str | bytes, folder: str | None) -> tuple[SkillMetadata | None, str, list[Problem]]:
    problems: list[Problem] = []
    if folder is not None:
        folder = folder.rstrip("/").rsplit("/", 1)[-1]
    try:
        parts = _split(_decode(data))
        if parts is None:
            raise InvalidSkill("no frontmatter: the file must start with a '---' line")
        frontmatter, body = parts
        if len(frontmatter.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
            raise InvalidSkill(f"the frontmatter is over {MAX_FRONTMATTER_BYTES} bytes")
        raw = _load_yaml(frontmatter, problems)
        if raw is None:
            raise InvalidSkill("the frontmatter is empty: it needs 'name' and 'description'")
        if not isinstance(raw, dict):
            raise InvalidSkill(f"the frontmatter must be a mapping of fields, not a {type(raw).__name__}")
    except InvalidSkill as exc:
        return None, "", [*problems, Problem("error", exc.reason, fatal=True)]
    fields: dict[str, Any] = {str(key): value for key, value in raw.items()}
    name = fields.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        if folder is None:
            return None, body, [*problems, Problem("error", "missing required field 'name'", fatal=True)]
        problems.append(Problem("error", f"missing 'name'; using the folder name {folder!r}"))
        fields["name"] = folder
    if fields.get("description") is None:
        return None, body, [*problems, Problem("error", "missing required field 'description'", fatal=True)]
    if isinstance(fields.get("metadata"), dict):
        for key, value in list(fields["metadata"].items()):
            if isinstance(value, dict | list):
                problems.append(Problem("error", f"metadata {str(key)!r} is not a string; ignored"))
                del fields["metadata"][key]
    meta = _build(fields, problems)
    if meta is None:
        return None, body, problems
    problems.extend(_check(meta, folder))
    problems.extend(Problem("warning", f"unknown field {key!r} (kept)") for key in meta.model_extra or {})
    if not body.strip():
        problems.append(Problem("warning", "the body is empty: write the instructions below the frontmatter"))
    elif (lines := len(body.splitlines())) > _BODY_MAX_LINES:
        problems.append(Problem("warning", f"the body is {lines} lines; the advice is {_BODY_MAX_LINES} at most"))
    return meta, body, problems


def parse_skill_md(data: str | bytes, *, folder: str | None = None) -> ParsedSkill:
    """Parse a SKILL.md, leniently (see the module docstring for what is tolerated).

    Args:
        data: The file's content; bytes are decoded as UTF-8 (a BOM is dropped).
        folder: The name of the folder holding the SKILL.md (a path: its last segment).
            Used to check `name` and as the name when the frontmatter has none.

    Returns:
        The metadata, the body (Markdown after the frontmatter, leading blank lines
        removed, `\\n` line ends) and the tolerated problems as warning lines.

    Raises:
        InvalidSkill: The skill must be skipped; `reason` says why.
    """
    meta, body, problems = _analyse(data, folder)
    if meta is None:
        raise InvalidSkill("; ".join(p.message for p in problems if p.fatal))
    return ParsedSkill(meta, body, tuple(p.message for p in problems if p.level == "error"))


def validate_skill_md(data: str | bytes, *, folder: str | None = None) -> list[Problem]:
    """Every problem of a SKILL.md, for a `validate` command (empty when it is clean).

    Args:
        data: The file's content.
        folder: The name of the folder holding it (checked against `name`).

    Returns:
        Errors (specification violations; `fatal` ones make the loader skip the skill)
        and warnings (advice), in the order found.
    """
    return _analyse(data, folder)[2]


def get_skill_doc(data: str | bytes) -> str:
    """The Markdown body without its frontmatter (the whole text if there is none).

    Raises:
        InvalidSkill: The input is over the size limit or is not UTF-8.
    """
    text = _decode(data)
    try:
        parts = _split(text)
    except InvalidSkill:
        return text
    return text if parts is None else parts[1]


def frontmatter_prefix(head: bytes) -> bytes | None:
    """The bytes of `head` up to and including the closing `---` line, if it is there.

    `head` is the start of a SKILL.md (a ranged GET); parsing the returned prefix gives
    the same metadata as parsing the whole file. The cut never falls inside a character.
    """
    opening = _HEAD_OPEN_RE.match(head)
    if opening is None:
        return None
    closing = _HEAD_CLOSE_RE.search(head, opening.end())
    return None if closing is None else head[: closing.end()]


def frontmatter_complete(head: bytes) -> bool:
    """True when `head` holds the whole frontmatter (opening and closing `---` lines).

    A closing line counts only once its line end is in `head`, so a cut anywhere,
    even inside a multi-byte character, is safe. When the ranged read returned the
    whole (short) file, parse it directly whatever this says.
    """
    return frontmatter_prefix(head) is not None


class _Dumper(yaml.SafeDumper):
    """Writes text with control characters or Unicode line breaks double-quoted (escaped):
    PyYAML's other styles write them raw, and they do not read back the same."""


def _represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if _AWKWARD_RE.search(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_AWKWARD_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_Dumper.add_representer(str, _represent_text)


def render_skill_md(metadata: SkillMetadata, body: str) -> str:
    """Write a SKILL.md that `parse_skill_md` reads back to the same metadata and body.

    Known fields equal to their default or None are omitted; unknown fields are written
    as they are. `allowed-tools` is written as the specification's space-separated
    string when that reads back the same. A `body` starting with blank lines reads back
    without them.
    """
    extra = metadata.model_extra or {}
    fields = metadata.model_dump(by_alias=True, exclude_defaults=True, exclude_none=True, exclude=set(extra))
    fields.update(extra)  # Unknown fields verbatim, even when null.
    tools = metadata.allowed_tools
    if tools and split_tools(" ".join(tools)) == tools:
        fields["allowed-tools"] = " ".join(tools)
    frontmatter = yaml.dump(fields, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100_000)
    return f"---\n{frontmatter}---\n" + (f"\n{body}" if body else "")
