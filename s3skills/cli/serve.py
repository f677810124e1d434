"""`s3skills mcp`: serve skill libraries over MCP (the skills extension, SEP-2640).

A thin front over `s3skills.serve.mcp.main`, with the CLI's global options (bucket, user,
shared library, endpoint, region, profile, layout or layout file: `s3skills.options`, the
same table the server reads), given before or after `mcp`. The MCP SDK is imported only when the
command runs; without the `mcp` extra the command says how to install it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

import click

from s3skills.cli.context import CliError, Context, UsageError, global_options_except, pass_context
from s3skills.options import option, warn_deprecated_flag

__all__ = ["mcp_command"]

F = TypeVar("F", bound=Callable[..., Any])


def _ranker_option(command: F) -> F:
    spec = option("ranker")
    return click.option(
        spec.flag, "ranker", type=click.Choice(spec.choices or ()), metavar=spec.metavar, help=spec.help_text()
    )(command)


def _serving_options(command: F) -> F:
    """`--workers`, `--metrics`, `--drain-seconds`, `--unready-seconds` (s3skills.options), passed on as given."""
    for key in ("unready_seconds", "drain_seconds", "metrics", "workers"):
        spec = option(key)
        if spec.metavar:
            command = click.option(spec.flag, key, metavar=spec.metavar, help=spec.help_text())(command)
        else:
            command = click.option(spec.flag, key, is_flag=True, help=spec.help_text())(command)
    return command


def _deprecated_shared_prefix(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        warn_deprecated_flag("--shared-prefix")
        ctx.ensure_object(Context).settings.shared = value


@click.command("mcp")
@global_options_except("json")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one person's library (--user). http: many tenants, each named by its bearer token.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="http: the address to bind.")
@click.option("--port", type=int, default=8000, show_default=True, help="http: the port (0 picks a free one).")
@click.option("--tokens", metavar="FILE", help='http: a JSON file {"<token>": "<user id>"} (for development).')
@click.option("--shared-prefix", metavar="NAME", hidden=True, expose_value=False, callback=_deprecated_shared_prefix)
@_ranker_option
@_serving_options
@click.option("--page-size", type=int, default=50, show_default=True, help="Skills per page of skills/list.")
@click.option("--channel", metavar="NAME", help="Serve this channel (s3skills channel); default: latest.")
@click.option(
    "--catalog-ttl",
    type=click.FloatRange(0, 3600),
    metavar="SECONDS",
    help="Trust a library's index, and the skill folders read since, for SECONDS without asking S3 "
    "(a write shows within it). Default: ask on every call.",
)
@click.option("--no-tools", is_flag=True, help="Serve only the skills extension, not the MCP tools and prompts.")
@click.option(
    "--no-usage-store",
    is_flag=True,
    help="Do not count loads in the libraries' .s3skills/usage/ (what the console's usage shows).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Print the skills of --user that skills/list leaves out (names), then exit 0 (none) or 1.",
)
@pass_context
def mcp_command(
    ctx: Context,
    transport: str,
    host: str,
    port: int,
    tokens: str | None,
    ranker: str | None,
    page_size: int,
    no_tools: bool,
    no_usage_store: bool,
    check: bool,
    channel: str | None,
    catalog_ttl: float | None,
    workers: str | None,
    metrics: bool,
    drain_seconds: str | None,
    unready_seconds: str | None,
) -> int:
    """Serve skill libraries over MCP: the skills extension (skills/list, skills/get,
    resources/read) and, for hosts without it, tools and prompts.

    Every global option applies, before or after `mcp`: `s3skills --shared acme --user ana mcp`
    serves ana's library over acme's; `s3skills --shared acme mcp` serves acme's library itself
    (`--channel`, `--check` too)."""
    if importlib.util.find_spec("mcp") is None:
        raise CliError('the MCP server needs the mcp package, which is not installed: pip install "s3skills[mcp]"')
    argv = ["--bucket", ctx.bucket, "--transport", transport, "--page-size", str(page_size)]
    if ctx.layout_file is not None:  # the server checks it (and refuses it together with --layout)
        argv += ["--layout-file", ctx.layout_file]
        if ctx.settings.layout:
            argv += ["--layout", ctx.settings.layout]
    else:
        argv += ["--layout", ctx.layout_name]
    if ctx.endpoint_url:
        argv += ["--endpoint-url", ctx.endpoint_url]
    if ctx.region:
        argv += ["--region", ctx.region]
    if ctx.settings.profile:
        argv += ["--profile", ctx.settings.profile]
    if ctx.shared:
        argv += ["--shared", ctx.shared]
    if ranker:
        argv += ["--ranker", ranker]
    if no_tools:
        argv.append("--no-tools")
    if no_usage_store:
        argv.append("--no-usage-store")
    if channel:
        argv += ["--channel", channel]
    if catalog_ttl is not None:
        argv += ["--catalog-ttl", str(catalog_ttl)]
    for flag, value in (
        ("--workers", workers),
        ("--drain-seconds", drain_seconds),
        ("--unready-seconds", unready_seconds),
    ):
        if value is not None:
            argv += [flag, value]
    if metrics:
        argv.append("--metrics")
    if check or transport == "stdio":  # one library: --shared NAME alone is NAME's library itself
        argv += (["--check"] if check else []) + ([] if ctx.shared_only else ["--user", ctx.user])
    else:
        if ctx.settings.user:
            raise UsageError("--user is for stdio; over HTTP each request's token names its user")
        argv += ["--host", host, "--port", str(port)] + (["--tokens", tokens] if tokens else [])
    from s3skills.serve.mcp import main

    return main(argv)  # the server prints its own one-line errors (`s3skills mcp: error: ...`)
