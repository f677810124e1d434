"""`s3skills console`: the web console of one library (`s3skills.console`).

A thin front over `s3skills.console.create_app`, served by uvicorn on `--host` (loopback by
default). The library is the one every command acts on (`--user`, or `--shared NAME`
alone), with the same global options. The console's packages (the `console` extra) are
imported only when the command runs.

SIGTERM (and Ctrl-C) drains as the MCP server does (`s3skills.serve.probes.Drain`): `/readyz`
answers 503 at once, the console stops accepting connections, finishes the requests in
flight within `--drain-seconds`, and exits 0; a second signal stops it at once.
"""

from __future__ import annotations

import importlib.util
import socket

import click

from s3skills.cli.context import CliError, Context, UsageError, global_options_except, pass_context

__all__ = ["console_command"]

_NEEDS = ("starlette", "uvicorn", "jinja2", "markdown_it", "nh3", "pygments", "itsdangerous", "matplotlib")


@click.command("console", short_help="Serve a web console of the library: review, approve, roll out, watch.")
@global_options_except("json")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0 picks a free one.")
@click.option(
    "--tokens",
    metavar="FILE",
    required=True,
    help='JSON {"<token>": "<user>"} (a reader) or {"<token>": {"user": U, "role": "curator"}}; mode 600.',
)
@click.option("--trusted-user-header", metavar="NAME", help="Take the user from this header (an SSO proxy's)...")
@click.option("--trusted-proxy", metavar="IP", help="...only on requests from this address (the proxy's).")
@click.option("--page-size", type=click.IntRange(1, 1000), default=50, show_default=True, help="Skills per page.")
@click.option(
    "--usage-log",
    metavar="FILE",
    help="JSON lines of usage records (s3skills.usage), added to the loads the agents keep in the library.",
)
@click.option(
    "--drain-seconds",
    type=click.FloatRange(1.0, 3600.0),
    default=30.0,
    show_default=True,
    help="On SIGTERM: seconds to finish the requests in flight before exiting.",
)
@pass_context
def console_command(
    ctx: Context,
    host: str,
    port: int,
    tokens: str,
    trusted_user_header: str | None,
    trusted_proxy: str | None,
    page_size: int,
    usage_log: str | None,
    drain_seconds: float,
) -> int:
    """Serve a web console of the library on HOST:PORT until interrupted.

    Readers browse skills, versions, diffs, channels, approvals, the audit and usage;
    curators also enable, disable, approve, set a channel's version and promote, each
    recorded as themselves. See docs/CONSOLE.md.
    """
    if missing := [m for m in _NEEDS if importlib.util.find_spec(m) is None]:
        raise CliError(f'the console needs {", ".join(missing)}: pip install "s3skills[console]"')
    if bool(trusted_user_header) != bool(trusted_proxy):
        raise UsageError("--trusted-user-header and --trusted-proxy go together")
    import uvicorn

    from s3skills.console import ConsoleSource, TokenRoles, create_app
    from s3skills.serve.probes import Drain, drain_lifespan

    roles = TokenRoles(tokens)
    source = ConsoleSource(ctx.settings)
    source.library.index(include_disabled=True)  # the bucket and library are checked before serving
    app = create_app(
        source,
        roles,
        trusted_user_header=trusted_user_header,
        trusted_proxy=trusted_proxy,
        page_size=page_size,
        usage_log=usage_log,
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    ctx.print(f"s3skills console of {source.owner} on http://{shown}:{bound}/ (Ctrl-C to stop)")
    ctx.stdout.flush()
    drain = Drain(app.state.readiness, deadline=drain_seconds)
    drain_lifespan(app, drain)
    graceful = drain.graceful_seconds
    config = uvicorn.Config(app, log_level="warning", server_header=False, timeout_graceful_shutdown=graceful)  # type: ignore[arg-type]
    uvicorn.Server(config).run(sockets=[sock])
    return 0
