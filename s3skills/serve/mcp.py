"""Run the MCP skills server over stdio (one user) or streamable HTTP (many users).

    python -m s3skills.serve.mcp --bucket skills --user ana                     # stdio
    python -m s3skills.serve.mcp --bucket skills --transport http --tokens tokens.json

stdio serves the library of the user named on the command line (`--shared NAME` without
`--user`: the organisation library NAME itself, `s3skills.options.resolve_library`):
whoever can start the process owns it. HTTP binds to 127.0.0.1 by default and serves each request for the user
of its bearer token (`--tokens FILE`, a JSON object `{"<token>": "<user id>"}`; in code,
any `TokenVerifier`); a request without a valid token gets a 401. HTTP is stateless (no
session memory), so several replicas can sit behind one load balancer; it prints
`listening on http://HOST:PORT/mcp` on stderr once it accepts connections (`--port 0`
picks a free port).

Both transports serve the library as MCP tools and prompts too (`--no-tools` to turn it
off), for hosts without the skills extension. `--check` prints the skills `skills/list`
leaves out for their names, then exits: 0 when there are none, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from dataclasses import replace
from typing import Any

from botocore.exceptions import ProfileNotFound
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from s3skills.aio import io_bound
from s3skills.config import Config
from s3skills.errors import AccessDenied, ConfigurationError, InvalidPath, S3SkillsError
from s3skills.layout import KeyLayout
from s3skills.lines import WrappingFormatter, wrap
from s3skills.options import (
    OPTIONS,
    build_ranker,
    flag_value,
    option,
    resolve,
    resolve_layout,
    resolve_library,
    warn_deprecated_flag,
)
from s3skills.paths import check_identity
from s3skills.seed import session_for
from s3skills.serve.auth import JsonFileTokenVerifier
from s3skills.serve.http import (
    HttpSettings,
    Served,
    ServerError,
    loop_factory,
    metrics_dir,
    probed_app,
    serve_app,
    serve_workers,
    worker_count,
)
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.probes import DRAIN_SECONDS, Readiness, bucket_check
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.skills.format.naming import unservable_skills
from s3skills.storage import S3ObjectStore

__all__ = [
    "ServerError",
    "aclose_server",
    "check_store",
    "http_app",
    "library_source",
    "main",
    "run_http",
    "run_stdio",
    "worker_app",
]

logger = logging.getLogger(__name__)


def library_source(
    bucket: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    shared_prefix: str | None = None,
    layout: KeyLayout | None = None,
    channel: str | None = None,
    usage_store: bool = True,
    catalog_ttl: float | None = None,
) -> LibrarySkillSource:
    """A skill source over a bucket's libraries (the default key layout unless given); with
    `usage_store` its loads are counted in each library's `.s3skills/usage/` (`Config.usage_store`).

    `catalog_ttl` is `Config.catalog_ttl`: seconds a user's library index (and the skill
    folders read since its refresh) is trusted without a request; None asks on every call.

    Raises:
        botocore.exceptions.ProfileNotFound: `profile` is not configured.
    """
    session = session_for(endpoint_url, region, profile=profile)
    store = S3ObjectStore(bucket, endpoint_url=endpoint_url, region_name=region, session=session)
    config = Config(
        layout=layout or KeyLayout(),
        shared_library=shared_prefix,
        channel=channel,
        usage_store=usage_store,
        catalog_ttl=catalog_ttl,
    )
    return LibrarySkillSource(SkillLibrary(store, config))


@io_bound
async def _aclose_on_io_loop(store: S3ObjectStore) -> None:
    await store.aclose()


async def aclose_server(skills: SkillsServer) -> None:
    """Close the S3 clients of the server's source (no "Unclosed client session" at exit).

    The manifest writes an index left in the background are waited for first: one that
    ran after the close would open a new client that nobody closes.
    """
    library = getattr(skills.source, "library", None)
    store = getattr(library, "store", None)
    if isinstance(store, S3ObjectStore):
        with contextlib.suppress(Exception):
            if library is not None:  # a manifest an index rebuilt is written after its answer
                await library.aflush()
            await store.aclose()  # the client of this loop (digest books)
            await _aclose_on_io_loop(store)  # the client of the library's I/O loop


async def check_store(skills: SkillsServer) -> None:
    """Ask the store once before serving: a configuration error stops the server, with its fix.

    With a fixed user (stdio) that user's library is listed (and the skills `skills/list`
    leaves out for their names are logged, once). Without one (HTTP) one key of the
    bucket is listed: a missing bucket or bad credentials stop the server, an access
    denied only warns (a policy may grant each user's prefix alone). A transient fault
    (`StoreUnavailable`) only warns: requests then answer "try again later".

    Raises:
        ServerError: The bucket does not exist, or the credentials are missing or refused
            (or, with a fixed user, access to the library is denied).
    """
    library = getattr(skills.source, "library", None)
    try:
        if skills.user_id is not None:
            listed = await skills.source.list_skills(skills.user_id)
            skills.report_unservable(skills.user_id, listed)
        elif library is not None:
            root = library.config.layout.root
            async for _page in library.store.alist_pages(root, page_size=1):
                break
    except ConfigurationError as exc:
        if skills.user_id is None and isinstance(exc, AccessDenied):
            logger.warning("warning: listing the bucket was denied (%s); serving anyway", exc)
            return
        raise ServerError(exc.fix) from None
    except S3SkillsError as exc:
        logger.warning("warning: the store cannot be reached now (%s); serving anyway, requests say try again", exc)


async def run_stdio(skills: SkillsServer, *, fail_fast: bool = False) -> None:
    """Serve one connection on stdin/stdout until the client closes it.

    The user's skills that `skills/list` leaves out for their names are logged first, once.
    With `fail_fast`, the store is asked first (`check_store`), and a configuration
    error raises `ServerError` before any client is served.
    """
    try:
        if fail_fast:
            await check_store(skills)
        elif skills.user_id is not None:
            with contextlib.suppress(MCPError):  # an unreachable library is reported to the client
                await skills.skills(skills.user_id)
        async with stdio_server() as (read_stream, write_stream):
            await skills.server.run(read_stream, write_stream, skills.server.create_initialization_options())
    finally:
        await aclose_server(skills)


def http_app(
    skills: SkillsServer, token_verifier: TokenVerifier, *, host: str = "127.0.0.1", port: int = 8000
) -> Starlette:
    """The ASGI app of the streamable HTTP transport (`/mcp`), every request authenticated.

    Requests without a bearer token that `token_verifier` accepts get a 401. On a loopback
    host, the Host and Origin headers are checked too (DNS-rebinding protection).
    """
    if skills.user_id is not None:
        raise ValueError("An HTTP server takes its users from tokens: build the SkillsServer without user_id")
    base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    auth = AuthSettings(issuer_url=base, resource_server_url=None)  # type: ignore[arg-type]
    return skills.server.streamable_http_app(
        host=host, auth=auth, token_verifier=token_verifier, stateless_http=True, json_response=True
    )


async def run_http(
    skills: SkillsServer,
    token_verifier: TokenVerifier,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    fail_fast: bool = False,
    settings: HttpSettings | None = None,
) -> None:
    """Serve the streamable HTTP transport on `host:port` until SIGTERM/SIGINT, in this process.

    Prints `listening on http://HOST:PORT/mcp` on stderr once connections are accepted
    (with the port chosen when `port` is 0), answers `/healthz` and `/readyz` (and
    `/metrics` with `settings.metrics`), drains on SIGTERM (`s3skills.serve.http`), and
    closes the S3 clients on the way out. With `fail_fast`, the store is asked first
    (`check_store`). `settings` gives the drain and metrics options (its host and port
    are replaced by these).

    Raises:
        ServerError: The port is busy or cannot be bound, or (`fail_fast`) the store's
            configuration is wrong.
    """
    settings = replace(settings or HttpSettings(), host=host, port=port)
    try:
        if fail_fast:
            await check_store(skills)
        with metrics_dir(settings):  # before the metrics are made: they may write files there
            await serve_app(_served(skills, token_verifier, settings), settings)
    finally:
        await aclose_server(skills)


def _served(skills: SkillsServer, token_verifier: TokenVerifier, settings: HttpSettings) -> Served:
    """What one server process serves: the MCP app, its readiness (the bucket check), its metrics."""
    library = getattr(skills.source, "library", None)
    metrics = None
    if settings.metrics:
        from s3skills.serve.metrics import ServerMetrics
        from s3skills.serve.tools import TOOL_NAMES

        metrics = ServerMetrics(TOOL_NAMES)
        metrics.attach(skills.server, library if isinstance(library, SkillLibrary) else None)
    check = bucket_check(library) if isinstance(library, SkillLibrary) else None
    app = http_app(skills, token_verifier, host=settings.host, port=settings.port)
    return Served(app, Readiness(check), metrics, lambda: aclose_server(skills))


class _DeprecatedFlag(argparse.Action):
    """A deprecated spelling of an option: stores the value and warns once."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        warn_deprecated_flag(option_string or "")
        setattr(namespace, self.dest, values)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="s3skills mcp", description="Serve skill libraries over MCP (the skills extension, SEP-2640)."
    )
    for spec in OPTIONS:  # the options every entry point shares (s3skills.options)
        if "mcp" not in spec.entry_points:
            continue
        if not spec.metavar:  # a flag (s3skills.options.flag_value reads its variable)
            parser.add_argument(spec.flag, dest=spec.key, action="store_true", help=spec.help_text())
            continue
        shown = {"choices": spec.choices} if spec.choices else {"metavar": spec.metavar}
        parser.add_argument(spec.flag, dest=spec.key, help=spec.help_text(), **shown)  # type: ignore[arg-type]
        for old in spec.deprecated_flags:
            parser.add_argument(old, dest=spec.key, action=_DeprecatedFlag, help=argparse.SUPPRESS)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="http: the address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="http: the port (default 8000; 0 picks a free one)")
    parser.add_argument("--tokens", help='http: a JSON file {"<token>": "<user id>"} of accepted bearer tokens')
    parser.add_argument("--page-size", type=int, default=50, help="skills per page of skills/list")
    parser.add_argument("--channel", help="serve this channel of the libraries (default: latest)")
    parser.add_argument(
        "--catalog-ttl",
        type=float,
        metavar="SECONDS",
        help="trust a library's index, and the skill folders read since, for SECONDS without asking S3 "
        "(a write shows within it; default: ask on every call)",
    )
    parser.add_argument(
        "--no-tools", action="store_true", help="serve only the skills extension, not the tools and prompts face"
    )
    parser.add_argument(
        "--no-usage-store",
        action="store_true",
        help="do not count loads in the libraries' .s3skills/usage/ (the console's usage)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="print the skills skills/list leaves out for their names (--user's library), then exit 0 (none) or 1",
    )
    return parser


def _usage(message: str) -> ServerError:
    return ServerError(message, 2)


def _user(given: str | None) -> str:
    try:
        return check_identity(given or "", "user id")
    except InvalidPath as exc:
        raise _usage(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    """Run the server from command-line arguments; returns the exit status.

    0: served until the client left (or `--check` found nothing); 1: `--check` found
    skills, or a configuration error (no bucket, no credentials, access denied, a busy
    port), printed as one line `s3skills mcp: error: ...` that says the fix, or (with
    `--workers`) a worker that did not end with status 0, named on stderr; 2: bad options.
    """
    args = _parser().parse_args(argv)
    args.argv = argv
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(WrappingFormatter("s3skills-mcp: %(message)s"))  # no line over 200 characters
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        return _serve(args)
    except ServerError as exc:
        print("\n".join(wrap(f"s3skills mcp: error: {' '.join(str(exc).split())}")), file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        return 130


def _source(args: argparse.Namespace) -> tuple[LibrarySkillSource, bool, Any, str | None]:
    """The skill source, whether the tools face is on, the ranker, and the one library served
    (stdio, `--check`; None over HTTP, where each request's token names its user), from the options.

    Raises:
        ServerError: A bad option (status 2) or a profile that does not exist.
    """
    if args.page_size < 1:
        raise _usage("--page-size must be at least 1")
    if args.catalog_ttl is not None and not 0 <= args.catalog_ttl <= 3600:
        raise _usage("--catalog-ttl must be a number of seconds in [0, 3600]")
    try:
        bucket = resolve("bucket", args.bucket)
        endpoint = resolve("endpoint_url", args.endpoint_url)
        ranker_name = resolve("ranker", args.ranker)
        layout, notes = resolve_layout(args.layout, args.layout_file)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    if not bucket:
        raise _usage("no bucket: pass --bucket or set S3SKILLS_BUCKET")
    for note in notes:
        logger.warning("warning: %s", note)
    user, shared = resolve_library(args.user, args.shared)
    if args.transport == "http" and not args.check:
        user = None  # each request's token names its user, over the shared library
    elif user is None and shared:  # --shared NAME alone (stdio, --check): NAME's library itself
        user, shared, layout = shared.strip("/"), None, layout.shared_as_user()
    try:
        source = library_source(
            bucket,
            endpoint_url=endpoint,
            region=resolve("region", args.region),
            profile=args.profile,
            shared_prefix=shared,
            layout=layout,
            channel=args.channel,
            usage_store=not args.no_usage_store,
            catalog_ttl=args.catalog_ttl,
        )
    except ValueError as exc:
        raise _usage(str(exc)) from None
    except ProfileNotFound as exc:
        raise ServerError(f"AWS profile not found: {exc}: name a configured profile with --profile") from None
    try:
        ranker = build_ranker(ranker_name)  # before --check too: a ranker that cannot run is a bad option
    except ValueError as exc:
        raise _usage(str(exc)) from None
    return source, not args.no_tools, ranker, user


def _serve(args: argparse.Namespace) -> int:
    source, tools, ranker, user = _source(args)
    settings = _http_settings(args)  # a bad value is a usage error whatever the transport
    if args.check:
        if not user:
            raise _usage("--check needs --user (or --shared NAME, or S3SKILLS_USER): the library it checks")
        return asyncio.run(_check(SkillsServer(source, user_id=_user(user)), _user(user)))
    if args.transport == "stdio":
        if args.tokens:
            raise _usage("--tokens is for --transport http; stdio serves the --user given")
        if not user:
            raise _usage("--transport stdio serves one library: pass --user (or --shared NAME), or set S3SKILLS_USER")
        skills = SkillsServer(source, user_id=_user(user), page_size=args.page_size, tools=tools, ranker=ranker)
        asyncio.run(run_stdio(skills, fail_fast=True))
        return 0
    if args.user:
        raise _usage("--user is for stdio; over HTTP each request's token names its user")
    if not args.tokens:
        raise _usage("--transport http needs --tokens FILE (a JSON object of token -> user id)")
    try:
        verifier = JsonFileTokenVerifier(args.tokens)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    skills = SkillsServer(source, page_size=args.page_size, tools=tools, ranker=ranker)
    if settings.workers > 1:  # the parent checks the store once, then each worker builds its own server
        asyncio.run(_checked(skills))
        os.environ[_WORKER_ARGV] = json.dumps(sys.argv[1:] if args.argv is None else args.argv)
        return serve_workers(settings, "s3skills.serve.mcp:worker_app")
    with asyncio.Runner(loop_factory=loop_factory()) as runner:  # uvloop when installed
        runner.run(run_http(skills, verifier, host=args.host, port=args.port, fail_fast=True, settings=settings))
    return 0


_WORKER_ARGV = "S3SKILLS_MCP_WORKER_ARGV"


async def _checked(skills: SkillsServer) -> None:
    try:
        await check_store(skills)
    finally:
        await aclose_server(skills)


def _number(key: str, given: str | None, default: float) -> float:
    value = resolve(key, given)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        spec = option(key)
        raise _usage(f"{spec.flag} ({spec.env[0]}) takes a number of seconds, not {value!r}") from None


def _http_settings(args: argparse.Namespace) -> HttpSettings:
    """The HTTP server's settings from the options (and their variables).

    Raises:
        ServerError: (status 2) a bad value.
    """
    try:
        workers = worker_count(resolve("workers", args.workers))
        metrics = flag_value("metrics", args.metrics)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    drain = _number("drain_seconds", args.drain_seconds, DRAIN_SECONDS)
    unready = _number("unready_seconds", args.unready_seconds, 0.0)
    if not 0 < drain <= 3600 or not 0 <= unready < drain:
        raise _usage("--drain-seconds must be in (0, 3600] and --unready-seconds in [0, --drain-seconds)")
    return HttpSettings(args.host, args.port, workers, metrics, drain, unready)


def worker_app() -> Any:
    """The ASGI app of one worker process (`--workers N`): the server built again from the
    options the parent was given (`S3SKILLS_MCP_WORKER_ARGV`), behind its probes."""
    args = _parser().parse_args(json.loads(os.environ[_WORKER_ARGV]))
    args.argv = None
    source, tools, ranker, _ = _source(args)
    skills = SkillsServer(source, page_size=args.page_size, tools=tools, ranker=ranker)
    settings = _http_settings(args)
    return probed_app(_served(skills, JsonFileTokenVerifier(args.tokens), settings), settings)


async def _check(skills: SkillsServer, user: str) -> int:
    """`--check`: print the skills of `user` that skills/list leaves out, and why."""
    try:
        listed = await skills.source.list_skills(user)
    except S3SkillsError as exc:
        print("\n".join(wrap(f"s3skills mcp --check: cannot list the skills of {user}: {exc}")), file=sys.stderr)
        return 2
    finally:
        await aclose_server(skills)
    refused = unservable_skills(listed)
    for skill_id, reason in refused:
        print("\n".join(wrap(f"{skill_id}: {reason}")))
    served = len(listed) - len(refused)
    print(
        f"{len(refused)} of {len(listed)} skills are not listed by skills/list (the tools face serves them); "
        f"{served} are.",
        file=sys.stderr,
    )
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
