"""Run the MCP skills server over stdio (one user) or streamable HTTP (many users).

    python -m s3skills.serve.mcp --bucket skills --user ana                     # stdio
    python -m s3skills.serve.mcp --bucket skills --transport http --tokens tokens.json

stdio serves the library of the user named on the command line: whoever can start the
process owns it. HTTP binds to 127.0.0.1 by default and serves each request for the user
of its bearer token (`--tokens FILE`, a JSON object `{"<token>": "<user id>"}`; in code,
any `TokenVerifier`); a request without a valid token gets a 401.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

import uvicorn
from botocore.exceptions import ProfileNotFound
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette

from s3skills.config import Config
from s3skills.errors import InvalidPath
from s3skills.layout import KeyLayout
from s3skills.paths import check_identity
from s3skills.seed import session_for
from s3skills.serve.auth import JsonFileTokenVerifier
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.storage import S3ObjectStore

__all__ = ["http_app", "library_source", "main", "run_http", "run_stdio"]

logger = logging.getLogger(__name__)


def library_source(
    bucket: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    shared_prefix: str | None = None,
    layout: KeyLayout | None = None,
) -> LibrarySkillSource:
    """A skill source over a bucket's libraries (the default key layout unless given).

    Raises:
        botocore.exceptions.ProfileNotFound: `profile` is not configured.
    """
    session = session_for(endpoint_url, region, profile=profile)
    store = S3ObjectStore(bucket, endpoint_url=endpoint_url, region_name=region, session=session)
    config = Config(layout=layout or KeyLayout(), shared_library=shared_prefix)
    return LibrarySkillSource(SkillLibrary(store, config))


async def run_stdio(skills: SkillsServer) -> None:
    """Serve one connection on stdin/stdout until the client closes it."""
    async with stdio_server() as (read_stream, write_stream):
        await skills.server.run(read_stream, write_stream, skills.server.create_initialization_options())


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
    return skills.server.streamable_http_app(host=host, auth=auth, token_verifier=token_verifier)


async def run_http(
    skills: SkillsServer, token_verifier: TokenVerifier, *, host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Serve the streamable HTTP transport on `host:port` until interrupted."""
    app = http_app(skills, token_verifier, host=host, port=port)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


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
        )
    except ValueError as exc:
        parser.error(str(exc))
    except ProfileNotFound as exc:
        parser.error(f"AWS profile not found: {exc}")
    if args.transport == "stdio":
        if args.tokens:
            parser.error("--tokens is for --transport http; stdio serves the --user given")
        if not args.user:
            parser.error("--user is required with --transport stdio")
        try:
            user = check_identity(args.user, "user id")
        except InvalidPath as exc:
            parser.error(str(exc))
        asyncio.run(run_stdio(SkillsServer(source, user_id=user, page_size=args.page_size)))
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
        asyncio.run(run_http(SkillsServer(source, page_size=args.page_size), verifier, host=args.host, port=args.port))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
