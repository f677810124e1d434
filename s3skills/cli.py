"""The `s3skills` command line: manage a user's skill library in a bucket.

    s3skills [--bucket B] [--user U] [--endpoint-url URL] [--profile P] [--region R] [--json] COMMAND ...

Global options may also come after the command. `--bucket` and `--user` default to
`S3SKILLS_BUCKET` and `S3SKILLS_USER`; the endpoint to `AWS_ENDPOINT_URL_S3`, then
`AWS_ENDPOINT_URL`; credentials come from the standard AWS chain (`--profile` picks
a profile). Every error is one line on stderr: exit status 1 for errors, 2 for usage.
The commands themselves live in `s3skills.cli_commands`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TextIO, TypeVar

from rich.console import Console

from s3skills import __version__
from s3skills._loop import run_sync
from s3skills.errors import (
    AccessDenied,
    BucketNotFound,
    Conflict,
    CredentialsError,
    S3SkillsError,
    StoreUnavailable,
)
from s3skills.layout import KeyLayout
from s3skills.paths import check_identity
from s3skills.storage import S3ObjectStore as ObjectStore

__all__ = ["CliError", "Context", "UsageError", "build_parser", "main"]

T = TypeVar("T")

_BUCKET_RE = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
# The CLI fails fast: a person is waiting. Library defaults are for services.
CLI_MAX_ATTEMPTS = 2
CLI_CONNECT_TIMEOUT = 3.0
CLI_READ_TIMEOUT = 30.0


@functools.cache
def _data_loader() -> Any:
    """botocore's loader of service models (JSON files), shared by every `main` call."""
    from botocore.loaders import create_loader

    return create_loader()


class UsageError(Exception):
    """The command line is wrong (exit status 2)."""


class CliError(Exception):
    """A user-facing failure (exit status 1); the message is the whole line."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, raised instead of printed."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


@dataclass
class Context:
    """What a command needs: the parsed options, the output streams, the store.

    The store is built on first use, so commands that work on local folders need
    neither a bucket nor credentials.
    """

    args: argparse.Namespace
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    _store: ObjectStore | None = None
    _console: Console | None = None

    @property
    def json(self) -> bool:
        """`--json` was given: print one JSON document on stdout."""
        return bool(self.args.json)

    @property
    def console(self) -> Console:
        """A rich console on stdout (no markup or highlighting of data)."""
        if self._console is None:
            self._console = Console(file=self.stdout, highlight=False, soft_wrap=False)
        return self._console

    @property
    def bucket(self) -> str:
        """The bucket (`--bucket` or `S3SKILLS_BUCKET`)."""
        bucket = self.args.bucket or os.environ.get("S3SKILLS_BUCKET")
        if not bucket:
            raise UsageError("no bucket: pass --bucket or set S3SKILLS_BUCKET")
        if not _BUCKET_RE.match(bucket):
            raise UsageError(f"invalid bucket name {bucket!r}")
        return str(bucket)

    @property
    def has_library(self) -> bool:
        """Both a bucket and a user are configured."""
        return bool(
            (self.args.bucket or os.environ.get("S3SKILLS_BUCKET"))
            and (self.args.user or os.environ.get("S3SKILLS_USER"))
        )

    @property
    def user(self) -> str:
        """The user whose library is used (`--user` or `S3SKILLS_USER`)."""
        user = self.args.user or os.environ.get("S3SKILLS_USER")
        if not user:
            raise UsageError("no user: pass --user or set S3SKILLS_USER")
        try:
            return check_identity(user, "user id")
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def prefix(self) -> str:
        """The user's library prefix (`alice/skills/`)."""
        return KeyLayout().user_prefix(self.user)

    @property
    def endpoint_url(self) -> str | None:
        """`--endpoint-url`, else `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`."""
        url = (
            self.args.endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or None
        )
        if url is not None and not url.startswith(("http://", "https://")):
            raise UsageError(f"invalid endpoint URL {url!r}: it must start with http:// or https://")
        return url

    def location(self, key: str = "") -> str:
        """`s3://bucket/key`, for messages."""
        return f"s3://{self.bucket}/{key}"

    @property
    def store(self) -> ObjectStore:
        """The object store, built on first use with the CLI's fail-fast settings."""
        if self._store is None:
            bucket, endpoint = self.bucket, self.endpoint_url
            import aioboto3
            from aiobotocore.session import get_session
            from botocore.exceptions import ProfileNotFound

            core = get_session()
            # The service models are static files: parse them once per process, not per call.
            core.register_component("data_loader", _data_loader())
            try:
                session = aioboto3.Session(
                    botocore_session=core, profile_name=self.args.profile, region_name=self.args.region
                )
            except ProfileNotFound as exc:
                raise CliError(f"AWS profile not found: {exc}") from exc
            self._store = ObjectStore(
                bucket,
                endpoint_url=endpoint,
                region_name=self.args.region,
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
        """One line of plain text on stdout (never interpreted as markup)."""
        print(text, file=self.stdout)

    def warn(self, text: str) -> None:
        """One line on stderr."""
        print(text, file=self.stderr)

    def emit(self, data: Any) -> None:
        """The JSON document of `--json`."""
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=self.stdout)

    def close(self) -> None:
        """Close the store's clients (tests call `main` many times in one process)."""
        if self._store is not None:
            store, self._store = self._store, None
            with contextlib.suppress(Exception):  # closing is best effort
                run_sync(store.aclose_all())


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options valid before and after the command (after it: no defaults, not to override)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("global options")
    group.add_argument("--bucket", default=default(None), help="the bucket (env S3SKILLS_BUCKET)")
    group.add_argument("--user", default=default(None), help="whose library (env S3SKILLS_USER)")
    group.add_argument(
        "--endpoint-url",
        default=default(None),
        help="an S3-compatible endpoint (env AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)",
    )
    group.add_argument("--profile", default=default(None), help="an AWS profile (env AWS_PROFILE)")
    group.add_argument("--region", default=default(None), help="the AWS region")
    group.add_argument("--json", action="store_true", default=default(False), help="print JSON for scripts")
    group.add_argument("--debug", action="store_true", default=default(False), help="show tracebacks")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `s3skills` (every command and option)."""
    from s3skills import cli_commands as c

    parser = _Parser(prog="s3skills", description="Manage skill libraries for LLM agents stored in S3.")
    parser.add_argument("--version", action="version", version=f"s3skills {__version__}")
    _global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    _global_options(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, handler: Callable[[Context], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    p = command("list", c.cmd_list, "list the skills of a user")
    p.add_argument("--category", help="only this category")
    p.add_argument("--all", action="store_true", help="include disabled skills")
    p = command("info", c.cmd_info, "show a skill: metadata, files, problems")
    p.add_argument("name", help="skill id (`pdf`, `category/skill`) or its folder name")
    p = command("create", c.cmd_create, "create a new skill from a template")
    p.add_argument("name", type=c.skill_name, help="the skill name (lowercase letters, digits, hyphens)")
    p.add_argument("--category", type=c.category_name, help="put it in this category folder")
    p.add_argument("-d", "--description", help="what the skill does and when to use it")
    p.add_argument("--code", action="store_true", help="also create scripts/main.py (JSON in, JSON out)")
    p.add_argument("--local", metavar="DIR", help="write into a local folder instead of the bucket")
    for name, enabled in (("enable", True), ("disable", False)):
        p = command(name, c.cmd_enable if enabled else c.cmd_disable, f"{name} a skill (edits SKILL.md)")
        p.add_argument("name", help="skill id or folder name")
    p = command("validate", c.cmd_validate, "check a local skill/tree, or a skill in the bucket")
    p.add_argument("target", metavar="PATH|NAME", help="a local folder or SKILL.md, else a skill id")
    p = command("push", c.cmd_push, "upload a local tree of skills (only what changed)")
    p.add_argument("dir", help="a folder of skills, of categories of skills, or one skill folder")
    p.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    p.add_argument("--delete", action="store_true", help="mirror: delete remote files not in DIR")
    p.add_argument("--force", action="store_true", help="push invalid skills; leave unsafe files out")
    p.add_argument("--create-bucket", action="store_true", help="create the bucket if it does not exist")
    p = command("pull", c.cmd_pull, "download the library (or one skill) to a folder")
    p.add_argument("dir", help="destination folder")
    p.add_argument("--skill", help="only this skill")
    p = command("rm", c.cmd_rm, "delete a skill (its whole folder)")
    p.add_argument("name", help="skill id or folder name")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    sub.add_parser("demo", help="run the self-contained demo (arguments go to the demo)", add_help=False)
    return parser


def _split_demo(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Split off the demo's own arguments, which argparse must not see."""
    takes_value = {"--bucket", "--user", "--endpoint-url", "--profile", "--region"}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in takes_value:
            i += 2
            continue
        if word.startswith("-"):
            i += 1
            continue
        if word == "demo":
            return list(argv[: i + 1]), list(argv[i + 1 :])
        break
    return list(argv), None


def describe(exc: BaseException, ctx: Context) -> str:
    """The one line shown for an exception raised by a command."""
    return " ".join(_describe(exc, ctx).split())  # one line, whatever the message


def _describe(exc: BaseException, ctx: Context) -> str:
    text = str(exc)
    if isinstance(exc, BucketNotFound):
        return f"bucket '{ctx.args.bucket or os.environ.get('S3SKILLS_BUCKET')}' does not exist"
    cause = exc.__cause__
    if type(cause).__name__ == "ProfileNotFound":
        return f"AWS profile not found: {cause}"
    if isinstance(exc, CredentialsError):
        if "no AWS credentials" in text:
            return "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use --profile"
        return f"the store rejected the credentials ({text})"
    if isinstance(exc, StoreUnavailable):
        where = ctx.args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return f"cannot reach the S3 endpoint {where or '(AWS)'}: {text}"
    if isinstance(exc, AccessDenied):
        return f"access denied: {text} (check the permissions of your credentials)"
    if isinstance(exc, Conflict):
        return f"the object changed or already exists: {text}"
    if isinstance(exc, OSError) and not isinstance(exc, S3SkillsError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return text or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return the exit status (0 ok, 1 error, 2 usage)."""
    raw = sys.argv[1:] if argv is None else list(argv)
    parsed_argv, demo_args = _split_demo(raw)
    try:
        parser = build_parser()
        args = parser.parse_args(parsed_argv)
    except UsageError as exc:
        print(f"s3skills: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if demo_args is not None:
        from s3skills.cli_commands import cmd_demo

        args.handler, args.demo_args = cmd_demo, demo_args
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    ctx = Context(args)
    try:
        status: int = args.handler(ctx)
        return status
    except UsageError as exc:
        print(f"s3skills: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("s3skills: interrupted", file=sys.stderr)
        return 130
    except (CliError, S3SkillsError, OSError, ValueError) as exc:
        if args.debug:
            raise
        print(f"s3skills: error: {describe(exc, ctx)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if args.debug:
            raise
        text = " ".join(str(exc).split())
        print(f"s3skills: error: unexpected {type(exc).__name__}: {text} (rerun with --debug)", file=sys.stderr)
        return 1
    finally:
        ctx.close()


if __name__ == "__main__":
    # Through the package module, so that the commands and this entry point share one
    # set of exception classes (run as a script, this file is `__main__`, not `s3skills.cli`).
    from s3skills.cli import main as _main

    raise SystemExit(_main())
