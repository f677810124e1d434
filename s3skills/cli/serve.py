"""`s3skills mcp`: serve skill libraries over MCP (the skills extension, SEP-2640).

A thin front over `s3skills.serve.mcp.main`, with the CLI's global options (bucket,
endpoint, region, layout; the user for stdio). The MCP SDK is imported only when the
command runs; without the `mcp` extra the command says how to install it.
"""

from __future__ import annotations

import importlib.util

import click

from s3skills.cli.context import CliError, Context, UsageError, global_options, pass_context

__all__ = ["mcp_command"]


@click.command("mcp")
@global_options
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one person's library (--user). http: many tenants, each named by its bearer token.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="http: the address to bind.")
@click.option("--port", type=int, default=8000, show_default=True, help="http: the port.")
@click.option("--tokens", metavar="FILE", help='http: a JSON file {"<token>": "<user id>"} (for development).')
@click.option("--shared-prefix", metavar="NAME", help="An organisation library under every user's.")
@click.option("--page-size", type=int, default=50, show_default=True, help="Skills per page of skills/list.")
@click.option("--channel", metavar="NAME", help="Serve this channel (s3skills channel); default: latest.")
@click.option("--no-tools", is_flag=True, help="Serve only the skills extension, not the MCP tools and prompts.")
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
    shared_prefix: str | None,
    page_size: int,
    no_tools: bool,
    check: bool,
    channel: str | None,
) -> int:
    """Serve skill libraries over MCP: the skills extension (skills/list, skills/get,
    resources/read) and, for hosts without it, tools and prompts."""
    if importlib.util.find_spec("mcp") is None:
        raise CliError('the MCP server needs the mcp package, which is not installed: pip install "s3skills[mcp]"')
    argv = [
        "--bucket",
        ctx.bucket,
        "--transport",
        transport,
        "--layout",
        ctx.layout_name,
        "--page-size",
        str(page_size),
    ]
    if ctx.endpoint_url:
        argv += ["--endpoint-url", ctx.endpoint_url]
    if ctx.settings.region:
        argv += ["--region", ctx.settings.region]
    if ctx.settings.profile:
        argv += ["--profile", ctx.settings.profile]
    if shared_prefix:
        argv += ["--shared-prefix", shared_prefix]
    if no_tools:
        argv.append("--no-tools")
    if channel:
        argv += ["--channel", channel]
    if check:
        argv += ["--check", "--user", ctx.user]
    elif transport == "stdio":
        argv += ["--user", ctx.user]
    else:
        if ctx.settings.user:
            raise UsageError("--user is for stdio; over HTTP each request's token names its user")
        argv += ["--host", host, "--port", str(port)] + (["--tokens", tokens] if tokens else [])
    from s3skills.serve.mcp import main

    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        if exc.code in (0, None):
            return 0
        raise UsageError("invalid options for the MCP server (see above)") from None
