"""The one table of connection options every entry point reads, and their environment variables.

`s3skills ...` (its global options), `s3skills mcp`, `python -m s3skills.serve.mcp` and the
LangGraph example (`examples/langgraph-server/agent.py`) take the same options under the
same names, from the same variables, resolved the same way: a value on the command line
wins, then the option's variables in the order listed (the first is the canonical one),
then a deprecated alias, which still works and prints a one-line warning on stderr once
per process. `S3Backend` takes the same values under its keyword names
(`Option.backend_keyword`).

| option           | variables (first wins)                                   | S3Backend keyword |
|------------------|----------------------------------------------------------|-------------------|
| `--bucket`       | S3SKILLS_BUCKET                                          | (positional)      |
| `--user`         | S3SKILLS_USER                                            | `user_id`         |
| `--shared`       | S3SKILLS_SHARED (deprecated: S3SKILLS_SHARED_PREFIX)     | `shared_prefix`   |
| `--endpoint-url` | S3SKILLS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL | `endpoint_url` |
| `--region`       | S3SKILLS_REGION, AWS_REGION, AWS_DEFAULT_REGION          | `region_name`     |
| `--profile`      | AWS_PROFILE                                              | (a session)       |
| `--layout`       | S3SKILLS_LAYOUT (`users` or `seeds`)                     | `layout`          |
| `--layout-file`  | S3SKILLS_LAYOUT_FILE                                     | `layout`          |
| `--ranker`       | S3SKILLS_RANKER (`lexical` or `hybrid`)                  | (agent's `ranker`) |
| `--workers`      | S3SKILLS_WORKERS (`s3skills mcp` over HTTP: N or `auto`) | (none)            |
| `--metrics`      | S3SKILLS_METRICS (a flag; the variable: 1/true/yes/on)   | (none)            |
| `--drain-seconds`| S3SKILLS_DRAIN_SECONDS (HTTP: SIGTERM to exit, at most)  | (none)            |
| `--unready-seconds`| S3SKILLS_UNREADY_SECONDS (HTTP: unready before closing) | (none)          |

`--shared-prefix` is the deprecated spelling of `--shared` (the MCP server's old flag).

Which library (`resolve_library`, one rule for the CLI and `s3skills mcp`): a flag beats a
variable there too. `--shared NAME` without `--user` is the organisation library NAME itself,
whatever `S3SKILLS_USER` says (`S3SKILLS_USER=alice s3skills --shared org channel create ...`
acts on org); `--user U` (or `S3SKILLS_USER` with no `--shared` flag) is U's library, over
the shared one when a shared library is configured; `S3SKILLS_SHARED` alone is the
organisation library.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from s3skills.layout import KeyLayout

if TYPE_CHECKING:
    from s3skills.skills import Ranker

__all__ = [
    "LAYOUTS",
    "OPTIONS",
    "RANKERS",
    "Option",
    "backend_keywords",
    "build_ranker",
    "env_value",
    "flag_value",
    "option",
    "resolve",
    "resolve_layout",
    "resolve_library",
    "warn_deprecated_flag",
]

LAYOUTS = ("users", "seeds")
"""The names `--layout` accepts; the first is the default."""

RANKERS = ("lexical", "hybrid")
"""The names `--ranker` accepts; the first is the default."""


@dataclass(frozen=True, slots=True)
class Option:
    """One connection option: its flag, its variables, where it applies.

    Attributes:
        key: The Python name (`shared`), also the `Settings` field of the CLI.
        flag: The command-line flag (`--shared`).
        metavar: What the flag's value is called in help texts.
        summary: One sentence for help texts (the variables are appended by `help_text`).
        env: The variables read, in order; the first is the canonical name.
        deprecated_env: Old variable names still read (after `env`), with a warning.
        deprecated_flags: Old flags still accepted, hidden from help, with a warning.
        choices: The accepted values, or None for free text.
        backend_keyword: The `S3Backend` keyword taking the value, if any.
        entry_points: Where the option applies: `cli`, `mcp` (both MCP front ends), `langgraph`.

    An empty `metavar` makes the option a flag: given, its value is `"1"`; its variable
    is read by `flag_value`.
    """

    key: str
    flag: str
    metavar: str
    summary: str
    env: tuple[str, ...] = ()
    deprecated_env: tuple[str, ...] = ()
    deprecated_flags: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    backend_keyword: str | None = None
    entry_points: frozenset[str] = frozenset({"cli", "mcp", "langgraph"})

    def help_text(self) -> str:
        """`summary` followed by the variables it is read from."""
        if not self.env:
            return self.summary
        return f"{self.summary} (env {', then '.join(self.env)})."


_ALL = frozenset({"cli", "mcp", "langgraph"})

OPTIONS: tuple[Option, ...] = (
    Option("bucket", "--bucket", "NAME", "The bucket of the libraries", env=("S3SKILLS_BUCKET",)),
    Option(
        "user",
        "--user",
        "ID",
        "Whose library (the MCP server: stdio only)",
        env=("S3SKILLS_USER",),
        backend_keyword="user_id",
        entry_points=frozenset({"cli", "mcp"}),
    ),
    Option(
        "shared",
        "--shared",
        "NAME",
        "The organisation library NAME, under every user's library; without --user, CLI commands act on it",
        env=("S3SKILLS_SHARED",),
        deprecated_env=("S3SKILLS_SHARED_PREFIX",),
        deprecated_flags=("--shared-prefix",),
        backend_keyword="shared_prefix",
    ),
    Option(
        "endpoint_url",
        "--endpoint-url",
        "URL",
        "An S3-compatible endpoint (MinIO, SeaweedFS, LocalStack, moto); AWS when unset",
        env=("S3SKILLS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        backend_keyword="endpoint_url",
    ),
    Option(
        "region",
        "--region",
        "NAME",
        "The AWS region",
        env=("S3SKILLS_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
        backend_keyword="region_name",
    ),
    Option(
        "profile",
        "--profile",
        "NAME",
        "An AWS profile for the credentials",
        env=("AWS_PROFILE",),
        entry_points=frozenset({"cli", "mcp"}),
    ),
    Option(
        "layout",
        "--layout",
        "|".join(LAYOUTS),
        f"The key layout (default {LAYOUTS[0]})",
        env=("S3SKILLS_LAYOUT",),
        choices=LAYOUTS,
        backend_keyword="layout",
    ),
    Option(
        "layout_file",
        "--layout-file",
        "FILE",
        "A custom key layout: a TOML or JSON file of KeyLayout's templates",
        env=("S3SKILLS_LAYOUT_FILE",),
        backend_keyword="layout",
    ),
    Option(
        "ranker",
        "--ranker",
        "|".join(RANKERS),
        "How list_skills ranks a query: lexical (BM25F, the default) or hybrid "
        '(with MiniLM embeddings; pip install "s3skills[embeddings]")',
        env=("S3SKILLS_RANKER",),
        choices=RANKERS,
        entry_points=frozenset({"mcp", "langgraph"}),
    ),
    Option(
        "workers",
        "--workers",
        "N|auto",
        "http: worker processes, each a whole server (auto: one per CPU; default 1)",
        env=("S3SKILLS_WORKERS",),
        entry_points=frozenset({"mcp"}),
    ),
    Option(
        "metrics",
        "--metrics",
        "",
        "http: serve Prometheus metrics at /metrics (unauthenticated: keep the path internal)",
        env=("S3SKILLS_METRICS",),
        entry_points=frozenset({"mcp"}),
    ),
    Option(
        "drain_seconds",
        "--drain-seconds",
        "SECONDS",
        "http: after SIGTERM, exit within this many seconds, in-flight calls finished or not (default 30)",
        env=("S3SKILLS_DRAIN_SECONDS",),
        entry_points=frozenset({"mcp"}),
    ),
    Option(
        "unready_seconds",
        "--unready-seconds",
        "SECONDS",
        "http: after SIGTERM, serve this long with /readyz failing before closing the port (default 0)",
        env=("S3SKILLS_UNREADY_SECONDS",),
        entry_points=frozenset({"mcp"}),
    ),
)
"""Every connection option, in the order help texts show them."""

_BY_KEY = {o.key: o for o in OPTIONS}
_warned: set[str] = set()


def option(key: str) -> Option:
    """The option called `key` (`shared`, `endpoint_url`, ...).

    Raises:
        KeyError: No such option.
    """
    return _BY_KEY[key]


def _deprecated(old: str, new: str) -> None:
    if old not in _warned:
        _warned.add(old)
        print(f"s3skills: warning: {old} is deprecated; use {new}", file=sys.stderr)


def _from_env(key: str, environ: Mapping[str, str] | None) -> tuple[str, str] | None:
    """(variable, value) of the first variable of the option that is set and not empty."""
    env = os.environ if environ is None else environ
    spec = _BY_KEY[key]
    for name in spec.env:
        if value := env.get(name):
            return name, value
    for name in spec.deprecated_env:
        if value := env.get(name):
            _deprecated(name, spec.env[0])
            return name, value
    return None


def env_value(key: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The option's value from the environment (None when no variable of it is set or all are empty).

    A deprecated variable is read last and warns once (one line on stderr).
    """
    found = _from_env(key, environ)
    return None if found is None else found[1]


def resolve(key: str, given: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The option's value: `given` (from the command line) when set, else `env_value`.

    Raises:
        ValueError: The value is not one of the option's choices (the message names
            the flag or the variable it came from).
    """
    spec = _BY_KEY[key]
    found = (spec.flag, given) if given else _from_env(key, environ)
    if found is None:
        return None
    source, value = found
    if spec.choices is not None and value not in spec.choices:
        raise ValueError(f"invalid {source} {value!r}: use one of {', '.join(spec.choices)}")
    return value


def resolve_library(
    user: str | None, shared: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """`(user, shared)`: whose library, and the shared library under it (module docstring).

    `user` is None when the shared library itself is meant: `--shared` given without
    `--user` (a flag beats `S3SKILLS_USER`), or only `S3SKILLS_SHARED` set. Values are not
    checked here (callers check identities with `s3skills.paths.check_identity`).

    Args:
        user: `--user` as given on the command line (None: not given).
        shared: `--shared` as given on the command line (None: not given).
        environ: The environment (`os.environ` by default).
    """
    shared_name = resolve("shared", shared, environ)
    if shared and not user:
        return None, shared_name
    return resolve("user", user, environ), shared_name


def flag_value(key: str, given: bool, environ: Mapping[str, str] | None = None) -> bool:
    """A flag option's value: on when given, else from its variable (1/true/yes/on, 0/false/no/off).

    Raises:
        ValueError: The variable holds something else (the message names it).
    """
    if given:
        return True
    found = _from_env(key, environ)
    if found is None:
        return False
    name, value = found
    if value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"invalid {name} {value!r}: use 1 or 0")


def warn_deprecated_flag(flag: str) -> None:
    """Warn (once) that `flag` is a deprecated spelling; says the current one."""
    for spec in OPTIONS:
        if flag in spec.deprecated_flags:
            _deprecated(flag, spec.flag)
            return


def resolve_layout(
    name: str | None, file: str | None, environ: Mapping[str, str] | None = None
) -> tuple[KeyLayout, list[str]]:
    """The key layout every entry point uses, and the layout file's isolation notes.

    A layout file (`--layout-file`, else `S3SKILLS_LAYOUT_FILE`) wins over the layout's
    name from the environment; giving both `--layout` and a layout file is an error.

    Raises:
        ValueError: Both were given, the name is unknown, or the file is refused.
    """
    path = resolve("layout_file", file, environ)
    if path is None:
        layout_name = resolve("layout", name, environ) or LAYOUTS[0]
        return KeyLayout.named(layout_name), []
    if name is not None:
        raise ValueError("give --layout or --layout-file, not both")
    try:
        layout = KeyLayout.from_file(path)
    except ValueError as exc:
        raise ValueError(f"layout file refused: {exc}") from exc
    return layout, [f"layout file {path}: {note}" for note in layout.isolation_notes()]


def backend_keywords(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The `S3Backend` keywords the environment configures: `endpoint_url`, `region_name`,
    `shared_prefix` and `layout` (from `S3SKILLS_LAYOUT_FILE` or `S3SKILLS_LAYOUT`).

    Raises:
        ValueError: A layout variable names an unknown layout or a refused file.
    """
    layout, notes = resolve_layout(None, None, environ)
    for note in notes:
        print(f"s3skills: warning: {note}", file=sys.stderr)
    return {
        "endpoint_url": env_value("endpoint_url", environ),
        "region_name": env_value("region", environ),
        "shared_prefix": env_value("shared", environ),
        "layout": layout,
    }


def build_ranker(name: str | None) -> Ranker | None:
    """The ranker `--ranker` / `S3SKILLS_RANKER` names: None for `lexical` (the default ranker).

    Raises:
        ValueError: `hybrid` without the embeddings extra installed (the message says how).
    """
    if name in (None, "lexical"):
        return None
    if name != "hybrid":
        raise ValueError(f"invalid ranker {name!r}: use one of {', '.join(RANKERS)}")
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is None:
        raise ValueError(
            '--ranker hybrid (S3SKILLS_RANKER=hybrid) needs the embeddings extra: pip install "s3skills[embeddings]"'
        )
    from s3skills.skills.ranking.embedding import HybridRanker, MiniLMEncoder

    return HybridRanker(MiniLMEncoder())
