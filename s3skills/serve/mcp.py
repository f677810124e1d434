"""Run the MCP skills server over stdio (one user) or streamable HTTP (many users).

    python -m s3skills.serve.mcp --bucket skills --user ana                     # stdio
    python -m s3skills.serve.mcp --bucket skills --transport http --tokens tokens.json

stdio serves the library of the user named on the command line: whoever can start the
process owns it. HTTP binds to 127.0.0.1 by default and serves each request for the user
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
import errno
import logging
import socket
import sys
from types import FrameType
from typing import Any

import uvicorn
from botocore.exceptions import ProfileNotFound
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from s3skills._loop import serve_on_running_loop
from s3skills.aio import io_bound
from s3skills.config import Config
from s3skills.errors import AccessDenied, ConfigurationError, InvalidPath, S3SkillsError
from s3skills.layout import KeyLayout
from s3skills.lines import WrappingFormatter, wrap
from s3skills.options import OPTIONS, build_ranker, resolve, resolve_layout, warn_deprecated_flag
from s3skills.paths import check_identity
from s3skills.seed import session_for
from s3skills.serve.auth import JsonFileTokenVerifier
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.skills.format.naming import unservable_skills
from s3skills.storage import S3ObjectStore

__all__ = ["ServerError", "aclose_server", "check_store", "http_app", "library_source", "main", "run_http", "run_stdio"]

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
) -> LibrarySkillSource:
    """A skill source over a bucket's libraries (the default key layout unless given).

    Raises:
        botocore.exceptions.ProfileNotFound: `profile` is not configured.
    """
    session = session_for(endpoint_url, region, profile=profile)
    store = S3ObjectStore(bucket, endpoint_url=endpoint_url, region_name=region, session=session)
    config = Config(layout=layout or KeyLayout(), shared_library=shared_prefix, channel=channel)
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


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` (not yet listening).

    Raises:
        ServerError: The port is busy (another process listens there), or the address
            cannot be bound; the message says so and what to do.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServerError(f"cannot bind to --host {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServerError(
                f"port {port} on {host} is busy: another process listens there; "
                "stop it, or choose another port with --port (0 picks a free one)"
            ) from None
        raise ServerError(f"cannot bind to {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


async def run_http(
    skills: SkillsServer,
    token_verifier: TokenVerifier,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    fail_fast: bool = False,
) -> None:
    """Serve the streamable HTTP transport on `host:port` until interrupted.

    Prints `listening on http://HOST:PORT/mcp` on stderr once connections are accepted
    (with the port chosen when `port` is 0), and closes the S3 clients on the way out.
    With `fail_fast`, the store is asked first (`check_store`).

    Raises:
        ServerError: The port is busy or cannot be bound, or (`fail_fast`) the store's
            configuration is wrong.
    """
    try:
        if fail_fast:
            await check_store(skills)
        sock = bind(host, port)
        app = http_app(skills, token_verifier, host=host, port=port)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        try:
            with serve_on_running_loop():  # library calls run on this loop: no hop to another thread
                await _AnnouncingServer(config).serve(sockets=[sock])
        finally:
            sock.close()
    finally:
        await aclose_server(skills)


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that says where it listens once it accepts connections, and that
    ends normally on SIGINT/SIGTERM (uvicorn raises the signal again after its graceful
    shutdown, which would kill the process before the S3 clients are closed)."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:  # the port could not be bound: uvicorn said why
            return
        bound = [s.getsockname() for listener in self.servers for s in listener.sockets]
        host, port = bound[0][0], bound[0][1]
        shown = f"[{host}]" if ":" in host else host
        print(f"listening on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)


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
        "--no-tools", action="store_true", help="serve only the skills extension, not the tools and prompts face"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="print the skills skills/list leaves out for their names (--user's library), then exit 0 (none) or 1",
    )
    return parser


class ServerError(Exception):
    """The server cannot start as configured; the message is the one line that says why and the fix."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


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
    port), printed as one line `s3skills mcp: error: ...` that says the fix; 2: bad options.
    """
    args = _parser().parse_args(argv)
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


def _serve(args: argparse.Namespace) -> int:
    if args.page_size < 1:
        raise _usage("--page-size must be at least 1")
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
    try:
        source = library_source(
            bucket,
            endpoint_url=endpoint,
            region=resolve("region", args.region),
            profile=args.profile,
            shared_prefix=resolve("shared", args.shared),
            layout=layout,
            channel=args.channel,
        )
    except ValueError as exc:
        raise _usage(str(exc)) from None
    except ProfileNotFound as exc:
        raise ServerError(f"AWS profile not found: {exc}: name a configured profile with --profile") from None
    try:
        ranker = build_ranker(ranker_name)  # before --check too: a ranker that cannot run is a bad option
    except ValueError as exc:
        raise _usage(str(exc)) from None
    user = resolve("user", args.user) if args.transport == "stdio" or args.check else None
    if args.check:
        if not user:
            raise _usage("--check needs --user (or S3SKILLS_USER): the library whose skills are checked")
        return asyncio.run(_check(SkillsServer(source, user_id=_user(user)), _user(user)))
    tools = not args.no_tools
    if args.transport == "stdio":
        if args.tokens:
            raise _usage("--tokens is for --transport http; stdio serves the --user given")
        if not user:
            raise _usage("--user (or S3SKILLS_USER) is required with --transport stdio")
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
    with asyncio.Runner(loop_factory=uvicorn.Config(None).get_loop_factory()) as runner:  # uvloop when installed
        runner.run(run_http(skills, verifier, host=args.host, port=args.port, fail_fast=True))
    return 0


async def _check(skills: SkillsServer, user: str) -> int:
    """`--check`: print the skills of `user` that skills/list leaves out, and why."""
    try:
        listed = await skills.source.list_skills(user)
    except S3SkillsError as exc:
        print(f"s3skills mcp --check: cannot list the skills of {user}: {exc}", file=sys.stderr)
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
