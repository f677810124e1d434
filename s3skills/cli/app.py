"""The `s3skills` command group, its error handling and exit statuses.

    s3skills [GLOBAL OPTIONS] COMMAND [ARGS] [GLOBAL OPTIONS]

The global options (see `s3skills.cli.context`) are valid before and after the
command, the demo's included. Every error is one line on stderr, `s3skills: error:
...` (wrapped, never cut, if over 200 characters; `--debug` shows the traceback
instead); the exit status is 0 on success, 1 on an error, 2 on a usage error, 130
when interrupted.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from s3skills import __version__
from s3skills.cli.channels import channel_group
from s3skills.cli.console import console_command
from s3skills.cli.context import CliError, Context, Settings, UsageError, global_options
from s3skills.cli.demo import demo_command
from s3skills.cli.evals import eval_command
from s3skills.cli.find import find_command
from s3skills.cli.governance import approvals_command, approve_command, audit_command
from s3skills.cli.library import disable_command, enable_command, info_command, list_command, rm_command
from s3skills.cli.lock import lock_command, verify_command
from s3skills.cli.migrate import migrate_command
from s3skills.cli.scaffold import create_command
from s3skills.cli.serve import mcp_command
from s3skills.cli.transfer import pull_command, push_command, validate_command
from s3skills.cli.versions import diff_command, history_command, rollback_command, versioning_group
from s3skills.errors import (
    AccessDenied,
    BucketNotFound,
    Conflict,
    CredentialsError,
    EndpointError,
    S3SkillsError,
    StoreUnavailable,
)
from s3skills.lines import wrap

__all__ = ["cli", "describe", "main"]

PROG = "s3skills"


@click.group(
    PROG,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
@global_options
@click.pass_context
def cli(click_ctx: click.Context) -> None:
    """Manage skill libraries for LLM agents stored in S3.

    --bucket and --user also come from S3SKILLS_BUCKET and S3SKILLS_USER, the endpoint
    from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, credentials from the standard AWS
    chain. Global options may also follow the command.
    """
    if click_ctx.invoked_subcommand is None:
        click.echo(click_ctx.get_help(), err=True)
        click_ctx.exit(2)


for _command in (
    list_command,
    info_command,
    find_command,
    eval_command,
    create_command,
    enable_command,
    disable_command,
    validate_command,
    push_command,
    pull_command,
    rm_command,
    demo_command,
    mcp_command,
    migrate_command,
    history_command,
    rollback_command,
    diff_command,
    versioning_group,
    channel_group,
    lock_command,
    verify_command,
    approve_command,
    approvals_command,
    audit_command,
    console_command,
):
    cli.add_command(_command)


def describe(exc: BaseException, ctx: Context) -> str:
    """The one line shown for an exception raised by a command."""
    return " ".join(_describe(exc, ctx).split())  # one line, whatever the message


def _describe(exc: BaseException, ctx: Context) -> str:
    text = str(exc)
    if isinstance(exc, BucketNotFound):
        return (
            f"bucket '{ctx.configured_bucket}' does not exist at {ctx.configured_endpoint or 'AWS'}: "
            "create it with 's3skills push --create-bucket DIR' (preview with --dry-run), "
            "or check --bucket and --endpoint-url"
        )
    cause = exc.__cause__
    if type(cause).__name__ == "ProfileNotFound":
        return f"AWS profile not found: {cause}"
    if isinstance(exc, CredentialsError):
        if "no AWS credentials" in text:
            return "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use --profile"
        return f"the store rejected the credentials ({text})"
    if isinstance(exc, EndpointError):
        return f"{ctx.configured_endpoint or 'the endpoint'}: {exc.fix}"
    if isinstance(exc, StoreUnavailable):
        return f"cannot reach the S3 endpoint {ctx.configured_endpoint or '(AWS)'}: {text}"
    if isinstance(exc, AccessDenied):
        return f"access denied: {text} (check the permissions of your credentials)"
    if isinstance(exc, Conflict):
        return f"the object changed or already exists: {text}"
    if isinstance(exc, OSError) and not isinstance(exc, S3SkillsError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return text or type(exc).__name__


def _usage_line(exc: click.UsageError) -> str:
    """click's message as one line, with where to find help."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    message = message[:1].lower() + message[1:]
    where = exc.ctx.command_path if exc.ctx is not None else PROG
    name = getattr(exc, "option_name", None)
    if isinstance(exc, click.NoSuchOption) and name and not name.startswith("--"):
        # `-2chat-automation` is a real skill name: say how to pass a name starting with '-'.
        return f"{message}; to pass a name starting with '-', put '--' before it: {where} -- {name}..."
    return f"{message} (see '{where} --help')"


def _fail(message: str, ctx: Context | None = None, status: int = 1) -> None:
    """The error line on stderr; with --json, also `{"ok": false, "error": ...}` on stdout."""
    print("\n".join(wrap(f"{PROG}: error: {message}")), file=sys.stderr)
    if ctx is not None and ctx.settings.json and not ctx.emitted:
        ctx.emit({"ok": False, "error": message, "status": status})


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (`s3skills list | head`): exit without a traceback.

    Python would report the failed flush at exit; pointing stdout at /dev/null stops that.
    """
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return the exit status (0 ok, 1 error, 2 usage, 130 interrupted).

    Args:
        argv: The arguments after the program name; `sys.argv[1:]` when None.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    ctx = Context(Settings())
    try:
        status = cli.main(args, prog_name=PROG, obj=ctx, standalone_mode=False)
        return status if isinstance(status, int) else 0
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 0
    except click.UsageError as exc:
        _fail(_usage_line(exc), ctx, 2)
        return 2
    except UsageError as exc:
        _fail(" ".join(str(exc).split()), ctx, 2)
        return 2
    except (KeyboardInterrupt, click.Abort):
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except click.ClickException as exc:  # click's other errors (a file option it could not open, ...)
        _fail(" ".join(exc.format_message().split()), ctx, exc.exit_code)
        return exc.exit_code
    except (CliError, S3SkillsError, OSError, ValueError) as exc:
        if ctx.settings.debug:
            raise
        _fail(describe(exc, ctx), ctx)
        return 1
    except Exception as exc:
        if ctx.settings.debug:
            raise
        text = " ".join(str(exc).split())
        _fail(f"unexpected {type(exc).__name__}: {text} (rerun with --debug)", ctx)
        return 1
    finally:
        ctx.close()
        try:
            sys.stdout.flush()  # here rather than at exit, where a closed pipe prints a traceback
        except BrokenPipeError:
            _quiet_broken_pipe()
