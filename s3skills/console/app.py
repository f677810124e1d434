"""The console's ASGI app: its routes, the login and logout, `create_app`.

`create_app` builds a Starlette app (the ASGI stack of the MCP server) serving one library
(`ConsoleSource`). Pages are rendered on the server by Jinja2 (autoescaped); the console
ships no script at all, and the Content-Security-Policy forbids every inline script and
every other origin (`web.SecurityHeaders`). Files of skills are never served as HTML
(`render.served_type`), each with `X-Content-Type-Options: nosniff` and a sandboxing policy
of its own.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from s3skills.aio import run_sync
from s3skills.console.activity import ACTIVITY_ROUTES
from s3skills.console.auth import Sessions, TokenRoles
from s3skills.console.pages import PAGE_ROUTES
from s3skills.console.render import highlight_css
from s3skills.console.source import ConsoleSource
from s3skills.console.views import LIBRARY_VIEWS, LibraryViews
from s3skills.console.web import (
    COOKIE,
    DETAILS_TTL,
    LOGIN_COOKIE,
    Console,
    DetailsCache,
    SecurityHeaders,
    console_of,
    form_of,
)
from s3skills.console.writes import WRITE_ROUTES
from s3skills.errors import S3SkillsError
from s3skills.serve.probes import Probes, Readiness, bucket_check

__all__ = ["console_readiness", "create_app"]

HERE = Path(__file__).parent


def login_page(request: Request) -> Response:
    """The login form: a token, and a CSRF nonce kept in a short-lived cookie."""
    console = console_of(request)
    nonce = secrets.token_urlsafe(16)
    error = request.query_params.get("error")
    response = console.templates.TemplateResponse(
        request,
        "login.html",
        {"csrf": console.sessions.csrf_token("login:" + nonce), "error": error, "who": None},
        status_code=401 if error else 200,
    )
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=600, httponly=True, samesite="strict", path="/login")
    return response


def login(request: Request) -> Response:
    """Check the token and start a session (a signed HttpOnly, SameSite=Strict cookie)."""
    console = console_of(request)
    form = form_of(request) or {}
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    if not nonce or not console.sessions.csrf_ok("login:" + nonce, form.get("csrf")):
        return PlainTextResponse("missing or wrong CSRF token", status_code=403)
    found = console.tokens.check(form.get("token", "").strip()) if form.get("token") else None
    if found is None:
        return RedirectResponse("/login?error=unknown+token", status_code=303)
    response = RedirectResponse("/", status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(
        COOKIE, console.sessions.cookie(*found), httponly=True, samesite="strict", secure=secure, path="/"
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


def logout(request: Request) -> Response:
    """End the session (the cookie is dropped; a POST with the CSRF token)."""
    console = console_of(request)
    who = console.identify(request)
    form = form_of(request) or {}
    if who is None or not console.sessions.csrf_ok(who, form.get("csrf")):
        return PlainTextResponse("missing or wrong CSRF token", status_code=403)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def highlight_stylesheet(_request: Request) -> Response:
    """Pygments' stylesheet for highlighted files."""
    return Response(highlight_css(), media_type="text/css")


def unreadable(_request: Request, exc: Exception) -> Response:
    """A page whose library read failed (the bucket unreachable, access denied): 503, the reason."""
    return PlainTextResponse(f"cannot read the library: {' '.join(str(exc).split())[:300]}", status_code=503)


def console_readiness(source: ConsoleSource, ttl: float = 5.0) -> Readiness:
    """What the console's `/readyz` says: its bucket was listed (1 key) within `ttl` seconds.

    The check runs on the library's I/O loop (as every page's reads), from a worker thread
    so the server's loop never waits for S3; probes in between answer from its outcome.
    """

    async def listed() -> None:
        await bucket_check(source.library)()

    async def check() -> None:
        await asyncio.to_thread(lambda: run_sync(listed()))

    return Readiness(check, ttl=ttl)


def create_app(
    source: ConsoleSource,
    tokens: TokenRoles,
    *,
    trusted_user_header: str | None = None,
    trusted_proxy: str | None = None,
    session_key: bytes | None = None,
    page_size: int = 50,
    usage_log: str | Path | None = None,
    details_ttl: float = DETAILS_TTL,
    library_views: int = LIBRARY_VIEWS,
    readiness: Readiness | None = None,
) -> Starlette:
    """The console of one library, as an ASGI app.

    Args:
        source: The library (`ConsoleSource`).
        tokens: Who may sign in, and their roles (`TokenRoles`).
        trusted_user_header: Take the user from this header (an SSO proxy's), only on
            requests whose peer address is `trusted_proxy`.
        trusted_proxy: The proxy's address (required with `trusted_user_header`).
        session_key: The key signing sessions and CSRF tokens (default: random per process).
        page_size: Skills per page of the library page.
        usage_log: A JSON-lines file of usage records (`s3skills.usage`) for the usage page.
        details_ttl: Seconds the library page keeps a skill's version and last change
            (`web.DetailsCache`; 0 reads them at every view).
        library_views: Versions of the library whose sorted and filtered views the library
            page keeps (`views.LibraryViews`; 0 builds them at every view, over every skill).
        readiness: What `/readyz` says (default: `console_readiness(source)`). `/healthz` and
            `/readyz` answer without authentication, as the MCP server's (`serve.probes.Probes`);
            the app keeps it as `app.state.readiness` (a drain sets it unready).

    Raises:
        ValueError: A trusted header without a trusted proxy address, or a bad page size.
    """
    if bool(trusted_user_header) != bool(trusted_proxy):
        raise ValueError("--trusted-user-header and --trusted-proxy go together")
    if not 1 <= page_size <= 1000:
        raise ValueError("page_size must be between 1 and 1000")
    if library_views < 0:
        raise ValueError("library_views must be 0 or more")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    templates = Jinja2Templates(env=env)
    console = Console(
        source,
        tokens,
        Sessions(session_key),
        templates,
        trusted_user_header,
        trusted_proxy,
        page_size,
        Path(usage_log) if usage_log else None,
        DetailsCache(details_ttl),
        LibraryViews(library_views),
    )
    routes = [
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/static/highlight.css", highlight_stylesheet),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        *PAGE_ROUTES,
        *WRITE_ROUTES,
        *ACTIVITY_ROUTES,
    ]
    app = Starlette(routes=routes, exception_handlers={S3SkillsError: unreadable})
    app.state.console = console
    app.state.readiness = readiness or console_readiness(source)
    app.add_middleware(Probes, readiness=app.state.readiness)
    app.add_middleware(SecurityHeaders)  # outermost of ours: the probes' answers get the headers too
    return app
