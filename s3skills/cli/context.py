"""What every command shares: the global options, the run's `Context`, the CLI's errors.

The global options (`--bucket`, `--user`, `--shared`, `--endpoint-url`, `--profile`,
`--region`, `--layout`, `--layout-file`, `--json`, `--debug`) are declared once here and put on the group and on
every command, so they are honoured before or after the command name; a value given
after the command wins. Each option records only what was written on the command line
(`Settings`); the environment is consulted by the `Context` when a command asks for a
value, so a command can tell "given" from "configured" (the demo uses only what was
given). The key layout is built in one place, `build_layout` (or from `--layout-file`).

Which library a command acts on (`s3skills.options.resolve_library`): `--user U` is U's
library; `--shared NAME` without `--user` is the organisation library `NAME` (every
command, reads and writes, `mcp` included), even when `S3SKILLS_USER` is set: a flag beats a
variable; both together keep writes on U's library while `list` shows what U's agent sees
(U's skills over NAME's, with their source) and `info` finds a skill in either.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click
from rich.console import Console

from s3skills.aio import run_sync
from s3skills.cli.tables import terminal_width
from s3skills.layout import KeyLayout
from s3skills.lines import wrap
from s3skills.options import LAYOUTS, OPTIONS, resolve, resolve_layout, resolve_library
from s3skills.paths import check_identity
from s3skills.tenancy import Tenant

if TYPE_CHECKING:  # the store module imports aioboto3: only the commands that connect pay for it
    from s3skills.skills import SkillLibrary
    from s3skills.storage import S3ObjectStore as ObjectStore

__all__ = [
    "LAYOUTS",
    "CliError",
    "Context",
    "Settings",
    "UsageError",
    "build_layout",
    "check_bucket",
    "check_endpoint_url",
    "global_options",
    "global_options_except",
    "pass_context",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_BUCKET_RE = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
# The CLI fails fast: a person is waiting. Library defaults are for services.
CLI_MAX_ATTEMPTS = 2
CLI_CONNECT_TIMEOUT = 3.0
CLI_READ_TIMEOUT = 30.0


class UsageError(Exception):
    """The command line or the configuration is wrong (exit status 2)."""


class CliError(Exception):
    """A user-facing failure (exit status 1); the message is the whole line."""


def build_layout(name: str) -> KeyLayout:
    """The key layout called `name` (`--layout`, `S3SKILLS_LAYOUT`): the CLI's one place for it.

    Raises:
        UsageError: `name` is not one of `LAYOUTS`.
    """
    if name not in LAYOUTS:
        raise UsageError(f"invalid layout {name!r}: use one of {', '.join(LAYOUTS)}")
    return KeyLayout.named(name)


def check_bucket(name: str) -> str:
    """`name` if it can be a bucket name.

    Raises:
        UsageError: It cannot.
    """
    if not _BUCKET_RE.match(name):
        raise UsageError(f"invalid bucket name {name!r}")
    return name


def check_endpoint_url(url: str | None) -> str | None:
    """`url` (or None) if it is an http:// or https:// URL.

    Raises:
        UsageError: It is not.
    """
    if url is not None and not url.startswith(("http://", "https://")):
        raise UsageError(f"invalid endpoint URL {url!r}: it must start with http:// or https://")
    return url


@dataclass
class Settings:
    """The global options exactly as written on the command line (None / False: not given)."""

    bucket: str | None = None
    user: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    layout: str | None = None
    layout_file: str | None = None
    shared: str | None = None
    json: bool = False
    debug: bool = False
    actor: str | None = None


@functools.cache
def _data_loader() -> Any:
    """botocore's loader of service models (JSON files), shared by every `main` call."""
    from botocore.loaders import create_loader

    return create_loader()


@dataclass
class Context:
    """What a command needs: the options, the output streams, the store (built on first use).

    Commands that work on local folders need neither a bucket nor credentials, since
    nothing is checked or connected until a property asks for it.
    """

    settings: Settings = field(default_factory=Settings)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    _store: ObjectStore | None = None
    _library: SkillLibrary | None = None
    _layout: KeyLayout | None = None
    _console: Console | None = None
    emitted: bool = False
    """A JSON document was printed (`main` then prints no second one for an error)."""

    @property
    def json(self) -> bool:
        """`--json` was given: print one JSON document on stdout."""
        return self.settings.json

    @property
    def console(self) -> Console:
        """A rich console on stdout (no markup or highlighting of data), as wide as the terminal
        (`s3skills.cli.tables.terminal_width`: `COLUMNS`, the terminal's width, else 80; at most 200)."""
        if self._console is None:
            width = terminal_width(self.stdout)
            self._console = Console(file=self.stdout, width=width, highlight=False, soft_wrap=False)
        return self._console

    @property
    def configured_bucket(self) -> str | None:
        """`--bucket`, else `S3SKILLS_BUCKET`, unchecked (None when neither is set)."""
        return resolve("bucket", self.settings.bucket)

    @property
    def configured_endpoint(self) -> str | None:
        """`--endpoint-url`, else the endpoint variables (`s3skills.options`), unchecked."""
        return resolve("endpoint_url", self.settings.endpoint_url)

    @property
    def region(self) -> str | None:
        """`--region`, else `S3SKILLS_REGION`, `AWS_REGION`, `AWS_DEFAULT_REGION` (None: botocore's default)."""
        return resolve("region", self.settings.region)

    @property
    def bucket(self) -> str:
        """The bucket (`--bucket` or `S3SKILLS_BUCKET`).

        Raises:
            UsageError: None is configured, or the name is not a bucket name.
        """
        bucket = self.configured_bucket
        if not bucket:
            raise UsageError("no bucket: pass --bucket or set S3SKILLS_BUCKET")
        return check_bucket(bucket)

    @property
    def has_library(self) -> bool:
        """A bucket and a library (a user, or a shared library) are configured."""
        return bool(self.configured_bucket and (self._configured_user or self._configured_shared))

    @property
    def _configured_user(self) -> str | None:
        """`--user`, else `S3SKILLS_USER` unless `--shared` was given alone (`resolve_library`)."""
        return resolve_library(self.settings.user, self.settings.shared)[0]

    @property
    def _configured_shared(self) -> str | None:
        return resolve("shared", self.settings.shared)

    @property
    def shared(self) -> str | None:
        """The organisation library (`--shared` or `S3SKILLS_SHARED`), checked; None when not set.

        Raises:
            UsageError: The name is not allow-listed.
        """
        name = self._configured_shared
        if name is None:
            return None
        try:
            return check_identity(name.strip("/"), "shared library name")
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def shared_only(self) -> bool:
        """`--shared` without a user: commands act on the shared library itself."""
        return self._configured_shared is not None and self._configured_user is None

    @property
    def user(self) -> str:
        """The user whose library is used (`--user` or `S3SKILLS_USER`).

        Raises:
            UsageError: None is configured, or the id is not allow-listed.
        """
        user = self._configured_user
        if not user:
            raise UsageError("no user: pass --user (or --shared NAME for an organisation library) or set S3SKILLS_USER")
        try:
            return check_identity(user, "user id")
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def owner(self) -> str:
        """Whose library, for titles: `ana`, `shared library org`, or `ana (over shared library org)`."""
        if self.shared_only:
            return f"shared library {self.shared}"
        return self.user + (f" (over shared library {self.shared})" if self.shared else "")

    @property
    def target(self) -> str:
        """The library a write goes to, for its message: `ana's library (s3://b/ana/skills/)` or
        `shared library org (s3://b/shared/org/skills/)` (with `--user` too, writes are the user's)."""
        who = f"shared library {self.shared}" if self.shared_only else f"{self.user}'s library"
        return f"{who} ({self.location(self.prefix)})"

    @property
    def layout_file(self) -> str | None:
        """`--layout-file`, else `S3SKILLS_LAYOUT_FILE` (None when neither is set)."""
        return resolve("layout_file", self.settings.layout_file)

    @property
    def layout_name(self) -> str:
        """`--layout`, else `S3SKILLS_LAYOUT`, else `users` (a layout file, if any, wins over it).

        Raises:
            UsageError: `S3SKILLS_LAYOUT` names no layout.
        """
        try:
            return resolve("layout", self.settings.layout) or LAYOUTS[0]
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def layout(self) -> KeyLayout:
        """The key layout: from `--layout-file` (or `S3SKILLS_LAYOUT_FILE`), else named by `layout_name`.

        A layout file's isolation notes (`KeyLayout.isolation_notes`) are printed on
        stderr once, as warnings.

        Raises:
            UsageError: Both a layout file and `--layout` were given, or the file is refused.
        """
        if self._layout is None:
            try:
                self._layout, notes = resolve_layout(self.settings.layout, self.settings.layout_file)
            except ValueError as exc:
                raise UsageError(str(exc)) from exc
            for note in notes:
                self.warn(f"warning: {note}")
        return self._layout

    @property
    def prefix(self) -> str:
        """The library prefix commands act on: the user's (`alice/skills/`), or with `--shared`
        and no user the shared library's (`shared/org/skills/`)."""
        if self.shared_only:
            return self.layout.shared_prefix(self.shared)
        return self.layout.user_prefix(self.user)

    @property
    def shared_prefix(self) -> str | None:
        """The shared library's prefix, when `--shared` is set."""
        name = self.shared
        return None if name is None else self.layout.shared_prefix(name)

    @property
    def library(self) -> SkillLibrary:
        """The library as the CLI sees it (`SkillLibrary`), in the CLI's layout, on the CLI's store.

        A user's library (over the shared one with `--shared`, as the user's agent sees
        it), or with `--shared` and no user the shared library itself.
        """
        if self._library is None:
            from s3skills.config import Config
            from s3skills.skills import SkillLibrary

            store = self.store  # the bucket's errors first, then the user's
            if self.shared_only:
                shared = self.shared
                assert shared is not None
                config = Config(layout=self.layout.shared_as_user(), actor=self.settings.actor)
                tenant = Tenant(user_id=shared)
            else:
                config = Config(layout=self.layout, shared_library=self.shared, actor=self.settings.actor)
                tenant = Tenant(user_id=self.user)
            self._library = SkillLibrary(store, config, tenant=lambda: tenant)
        return self._library

    @property
    def endpoint_url(self) -> str | None:
        """The configured endpoint (see `configured_endpoint`), checked to be an http(s) URL.

        Raises:
            UsageError: The value is not an http:// or https:// URL.
        """
        return check_endpoint_url(self.configured_endpoint)

    def location(self, key: str = "") -> str:
        """`s3://bucket/key`, for messages."""
        return f"s3://{self.bucket}/{key}"

    @property
    def store(self) -> ObjectStore:
        """The object store, built on first use with the CLI's fail-fast settings.

        Raises:
            UsageError: The bucket or the endpoint is missing or malformed.
            CliError: The AWS profile does not exist.
        """
        if self._store is None:
            bucket, endpoint = self.bucket, self.endpoint_url
            import aioboto3
            from aiobotocore.session import get_session
            from botocore.exceptions import ProfileNotFound

            from s3skills.storage import S3ObjectStore as ObjectStore

            core = get_session()
            # The service models are static files: parse them once per process, not per call.
            core.register_component("data_loader", _data_loader())
            region = self.region
            try:
                session = aioboto3.Session(
                    botocore_session=core, profile_name=self.settings.profile, region_name=region
                )
            except ProfileNotFound as exc:
                raise CliError(f"AWS profile not found: {exc}") from exc
            self._store = ObjectStore(
                bucket,
                endpoint_url=endpoint,
                region_name=region,
                session=session,
                max_attempts=CLI_MAX_ATTEMPTS,
                connect_timeout=CLI_CONNECT_TIMEOUT,
                read_timeout=CLI_READ_TIMEOUT,
            )
        return self._store

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the I/O loop and return its result."""
        return run_sync(coro)

    def print(self, text: str = "") -> None:
        """One line of plain text on stdout (never interpreted as markup); over `MAX_LINE`
        characters, it is wrapped (`s3skills.lines.wrap`)."""
        print("\n".join(wrap(text)), file=self.stdout)

    def warn(self, text: str) -> None:
        """One line on stderr, wrapped like `print`."""
        print("\n".join(wrap(text)), file=self.stderr)

    def emit(self, data: Any) -> None:
        """The JSON document of `--json`."""
        self.emitted = True
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=self.stdout)

    def close(self) -> None:
        """Close the store's clients (tests call `main` many times in one process)."""
        if self._store is not None:
            store, library, self._store, self._library = self._store, self._library, None, None
            with contextlib.suppress(Exception):  # closing is best effort
                if library is not None:
                    library.flush()  # a manifest its index rebuilt, stored for the next command
                run_sync(store.aclose_all())


pass_context = click.make_pass_decorator(Context, ensure=True)
"""Decorator: pass the run's `Context` as a command's first argument."""


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """A callback that records an option in `Settings`, only when it was written."""

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return  # not given here: keep what an earlier position set
        setattr(ctx.ensure_object(Context).settings, name, value)

    return callback


def _value(flag: str, name: str, metavar: str, help_text: str, **extra: Any) -> Callable[[F], F]:
    return click.option(
        flag, name, metavar=metavar, expose_value=False, callback=_remember(name), help=help_text, **extra
    )


def _flag(flag: str, name: str, help_text: str) -> Callable[[F], F]:
    return click.option(flag, name, is_flag=True, expose_value=False, callback=_remember(name), help=help_text)


def _table_option(key: str) -> Callable[[F], F]:
    spec = next(o for o in OPTIONS if o.key == key)
    extra: dict[str, Any] = {"type": click.Choice(spec.choices)} if spec.choices else {}
    return _value(spec.flag, spec.key, spec.metavar, spec.help_text(), **extra)


_OPTION_NAMES = (*(o.key for o in OPTIONS if "cli" in o.entry_points), "json", "debug", "actor")
"""The global options, by name: the CLI's options of the table (`s3skills.options`), two flags, the actor."""

_GLOBAL_OPTIONS: tuple[Callable[[F], F], ...] = (
    *(_table_option(key) for key in _OPTION_NAMES[:-3]),
    _flag("--json", "json", "Print one JSON document, for scripts."),
    _flag("--debug", "debug", "Show the traceback of an error."),
    _value(
        "--actor", "actor", "WHO", "Who the records of writes name (default: the AWS caller ARN, else the OS user)."
    ),
)


def global_options(command: F) -> F:
    """Add the global options to a command or group (they are valid at every position)."""
    for option in reversed(_GLOBAL_OPTIONS):
        command = option(command)
    return command


def global_options_except(*names: str) -> Callable[[F], F]:
    """`global_options` without some (a command with its own option of that name)."""

    def decorate(command: F) -> F:
        for name, option in reversed(list(zip(_OPTION_NAMES, _GLOBAL_OPTIONS, strict=True))):
            if name not in names:
                command = option(command)
        return command

    return decorate
