"""What every console handler shares: the `Console`, who a request is for, the guards of
pages and changes, and the security headers of every response.

A page is for any signed-in user (`reader`); a change is for a curator with the CSRF token
of their session (`curator`). Every response carries a Content-Security-Policy that allows
no inline script and no other origin, `nosniff`, and no framing (`SecurityHeaders`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from s3skills.console.auth import Identity, Sessions, TokenRoles, client_is_proxy
from s3skills.console.source import ConsoleSource
from s3skills.console.views import LibraryViews
from s3skills.paths import check_identity

__all__ = [
    "COOKIE",
    "CSP",
    "DETAILS_TTL",
    "FILE_CSP",
    "LOGIN_COOKIE",
    "Console",
    "DetailsCache",
    "SecurityHeaders",
    "console_of",
    "curator",
    "form_of",
    "reader",
]

COOKIE = "s3skills_console"
LOGIN_COOKIE = "s3skills_console_login"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
FILE_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
"""The policy of a skill's file served raw: nothing in it runs, even opened on its own."""

MAX_FORM_BYTES = 64 * 1024
DETAILS_TTL = 60.0
"""Seconds the library page keeps a skill's version and last change (see `DetailsCache`)."""


class DetailsCache:
    """What the library page shows of each skill beyond the index, kept `ttl` seconds while
    the skill's `SKILL.md` keeps its ETag (bounded: `MAX_DETAILS` skills)."""

    MAX_DETAILS = 20_000

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[float, str, Any]] = {}

    def get(self, now: float, etags: dict[str, str]) -> dict[str, Any]:
        """The kept details of the skills of `etags` (id -> SKILL.md ETag) still valid at `now`."""
        with self._lock:
            return {
                sid: hit[2]
                for sid, etag in etags.items()
                if (hit := self._kept.get(sid)) is not None and hit[1] == etag and now - hit[0] < self.ttl
            }

    def put(self, now: float, found: dict[str, tuple[str, Any]]) -> None:
        """Keep `found` (id -> (SKILL.md ETag, details)) as of `now`."""
        with self._lock:
            if len(self._kept) + len(found) > self.MAX_DETAILS:
                self._kept.clear()
            self._kept.update((sid, (now, etag, value)) for sid, (etag, value) in found.items())

    def clear(self) -> None:
        """Forget everything (after a change made through the console)."""
        with self._lock:
            self._kept.clear()


@dataclass
class Console:
    """What every handler shares: the library, the tokens, the sessions, the options."""

    source: ConsoleSource
    tokens: TokenRoles
    sessions: Sessions
    templates: Jinja2Templates
    trusted_user_header: str | None = None
    trusted_proxy: str | None = None
    page_size: int = 50
    usage_log: Path | None = None
    details: DetailsCache = field(default_factory=lambda: DetailsCache(DETAILS_TTL))
    views: LibraryViews = field(default_factory=LibraryViews)

    def identify(self, request: Request) -> Identity | None:
        """Who the request is for: the SSO proxy's header (from its address only), a bearer
        token, or the session cookie; None when none of them checks out."""
        header = self.trusted_user_header
        if header and client_is_proxy(request.client.host if request.client else None, self.trusted_proxy):
            named = request.headers.get(header)
            if named:
                try:
                    user = check_identity(named.strip(), "user id")
                except ValueError:
                    return None
                return Identity(user, self.tokens.role_of(user), "proxy")
        auth = request.headers.get("authorization", "")
        if auth:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return None
            found = self.tokens.check(token.strip())
            return Identity(found[0], found[1], "bearer") if found else None
        cookie = request.cookies.get(COOKIE)
        return self.sessions.identity(cookie, self.tokens) if cookie else None

    def page(self, request: Request, who: Identity, template: str, status: int = 200, **values: Any) -> Response:
        """A page rendered for `who` (with the CSRF token its forms carry)."""
        context = {
            "who": who,
            "csrf": self.sessions.csrf_token(who),
            "owner": self.source.owner,
            **values,
        }
        return self.templates.TemplateResponse(request, template, context, status_code=status)


Handler = Callable[[Request, Console, Identity], Response]


def console_of(request: Request) -> Console:
    """The `Console` of the app serving `request`."""
    found: Console = request.app.state.console
    return found


def reader(handler: Handler) -> Callable[[Request], Response]:
    """A GET page for any signed-in user: others are sent to the login page (401 for scripts)."""

    def endpoint(request: Request) -> Response:
        console = console_of(request)
        who = console.identify(request)
        if who is None:
            if "authorization" in request.headers:
                return PlainTextResponse("unauthorized", status_code=401, headers={"WWW-Authenticate": "Bearer"})
            return RedirectResponse("/login", status_code=303)
        return handler(request, console, who)

    return endpoint


def curator(handler: Callable[[Request, Console, Identity, dict[str, str]], Response]) -> Callable[[Request], Response]:
    """A POST that changes the library: a curator's, with the CSRF token of their session.

    The form is read here (at most `MAX_FORM_BYTES`): a POST without the token, with a
    wrong one, or from a reader is refused with 403 before anything is read from S3.
    """

    def endpoint(request: Request) -> Response:
        console = console_of(request)
        who = console.identify(request)
        if who is None:
            return PlainTextResponse("unauthorized", status_code=401)
        form = form_of(request)
        if form is None:
            return PlainTextResponse("form too large or malformed", status_code=400)
        if not console.sessions.csrf_ok(who, form.get("csrf") or request.headers.get("x-csrf-token")):
            return PlainTextResponse("missing or wrong CSRF token", status_code=403)
        if not who.curator:
            return PlainTextResponse(f"{who.user} is a reader: only a curator may change the library", 403)
        return handler(request, console, who, form)

    return endpoint


def form_of(request: Request) -> dict[str, str] | None:
    """The urlencoded form of a POST (its body was read by `SecurityHeaders`), None when too large or malformed."""
    body: bytes = getattr(request.state, "body", b"")
    if len(body) > MAX_FORM_BYTES:
        return None
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=100))
    except (UnicodeDecodeError, ValueError):
        return None


class SecurityHeaders:
    """Adds the security headers to every response (a handler's own CSP wins), and reads a
    POST's body (bounded) before the handler's thread runs.

    An exception that escapes the app before its response started is answered here with a
    plain 500 carrying the headers (then raised again for the server's log): Starlette's own
    500 page is sent outside every middleware, without them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "POST":
            body = bytearray()
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > MAX_FORM_BYTES:
                    break
            scope.setdefault("state", {})["body"] = bytes(body)

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                for name, value in (
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                ):
                    if name not in names:
                        headers.append((name, value))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if not started:
                await PlainTextResponse("internal error", status_code=500)(scope, receive, send_with_headers)
            raise
