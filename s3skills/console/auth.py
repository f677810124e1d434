"""Who a console request is for, and what they may do: tokens with roles, sessions, CSRF.

The tokens file is the MCP server's (`s3skills mcp --tokens`): read with the same rule
(`s3skills.paths.read_private_file`: a regular file this process's user owns, mode 600,
never a symlink), where a token may also carry a role:

    {"<token>": "ana", "<token2>": {"user": "bo", "role": "curator"}}

A plain user id is a `reader`; a `curator` may change things (approve, promote, set,
enable, disable). A person logs in once with a token and gets a signed session cookie
(HttpOnly, SameSite=Strict, signed with a key made when the process starts, so a restart
logs everyone out); a script sends `Authorization: Bearer <token>`. Behind an SSO proxy the
user comes from a header, but only on requests from the proxy's own address; their role is
the one the tokens file gives that user (a reader when it names them nowhere).

Every POST carries a CSRF token bound to who sent it (`csrf_token`): a page of another site
cannot read it, so it cannot make a signed-in browser change anything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from itsdangerous import BadSignature, URLSafeTimedSerializer

from s3skills.paths import check_identity, read_private_file

__all__ = [
    "ROLES",
    "Identity",
    "Sessions",
    "TokenRoles",
    "client_is_proxy",
]

Role = Literal["reader", "curator"]
ROLES: tuple[Role, ...] = ("reader", "curator")
_MAX_TOKENS_BYTES = 16 * 1024 * 1024
SESSION_SECONDS = 12 * 3600
"""How long a login lasts."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request is for.

    Attributes:
        user: The user id (checked: allow-listed characters only).
        role: `reader` or `curator`.
        via: `session`, `bearer` or `proxy`: how the user was established.
        nonce: The session's random nonce (the CSRF token is bound to it); "" otherwise.
    """

    user: str
    role: Role
    via: str
    nonce: str = ""

    @property
    def curator(self) -> bool:
        """Whether this user may change the library."""
        return self.role == "curator"


def _fingerprint(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenRoles:
    """The tokens file: token -> (user, role), compared by SHA-256 in constant time.

    Args:
        path: The JSON file.

    Raises:
        ValueError: The file is unsafe (another owner, group- or world-writable, a symlink,
            not a regular file, too large), not UTF-8 JSON, empty, or an entry is not a user
            id or `{"user": ID, "role": "reader"|"curator"}`.
    """

    def __init__(self, path: str | Path) -> None:
        shown = str(path)
        data = read_private_file(path, max_bytes=_MAX_TOKENS_BYTES, what="the tokens file")
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"Cannot read the tokens file {shown!r}: {exc}") from None
        if not isinstance(raw, dict) or not raw:
            raise ValueError(f"The tokens file {shown!r} must be a JSON object {{token: user_id}}")
        self._entries: list[tuple[bytes, str, Role]] = []
        for token, value in raw.items():
            user, role = _entry(value, shown)
            if not token:
                raise ValueError(f"The tokens file {shown!r} has an empty token")
            self._entries.append((_fingerprint(token), user, role))
        self._roles: dict[str, Role] = {}
        for _, user, role in self._entries:  # a user named twice keeps the higher role
            if self._roles.get(user) != "curator":
                self._roles[user] = role

    def check(self, token: str) -> tuple[str, Role] | None:
        """(user, role) of a known token, else None. Every entry is compared (no early exit)."""
        wanted = _fingerprint(token)
        found: tuple[str, Role] | None = None
        for known, user, role in self._entries:
            if hmac.compare_digest(known, wanted):
                found = (user, role)
        return found

    def role_of(self, user: str) -> Role:
        """The role the file gives `user` (for users an SSO proxy names): `reader` when unnamed."""
        return self._roles.get(user, "reader")


def _entry(value: object, shown: str) -> tuple[str, Role]:
    if isinstance(value, str):
        return check_identity(value, "user id"), "reader"
    if isinstance(value, Mapping) and set(value) <= {"user", "role"} and "user" in value:
        role = value.get("role", "reader")
        if role not in ROLES:
            raise ValueError(f"The tokens file {shown!r}: role {str(role)[:40]!r} is not one of {', '.join(ROLES)}")
        return check_identity(value["user"], "user id"), role
    raise ValueError(f'The tokens file {shown!r} maps a token to neither a user id nor {{"user": ..., "role": ...}}')


class Sessions:
    """Signed session cookies and CSRF tokens, with a key made when the process starts.

    Args:
        key: The signing key (tests pass one; by default 32 random bytes).
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)
        self._signer = URLSafeTimedSerializer(self._key, salt="s3skills-console-session")

    def cookie(self, user: str, role: Role) -> str:
        """The value of a new session's cookie."""
        return self._signer.dumps({"u": user, "r": role, "n": secrets.token_urlsafe(16)})

    def identity(self, cookie: str, tokens: TokenRoles) -> Identity | None:
        """Who a session cookie stands for, or None (forged, expired, or the user's role is gone).

        The role is the tokens file's now (`role_of`) when lower than the cookie's, so a
        curator demoted in the file cannot keep curating with an old cookie.
        """
        try:
            doc = self._signer.loads(cookie, max_age=SESSION_SECONDS)
        except BadSignature:
            return None
        if not isinstance(doc, dict) or doc.get("r") not in ROLES:
            return None
        try:
            user = check_identity(doc.get("u"), "user id")
        except ValueError:
            return None
        role: Role = "curator" if doc["r"] == "curator" and tokens.role_of(user) == "curator" else "reader"
        return Identity(user, role, "session", str(doc.get("n", "")))

    def csrf_token(self, who: Identity | str) -> str:
        """The CSRF token of an identity (bound to its session, else to its user), or of a
        login form's nonce (a plain string)."""
        subject = who if isinstance(who, str) else f"{who.via}:{who.user}:{who.nonce}"
        return hmac.new(self._key, b"csrf:" + subject.encode("utf-8"), hashlib.sha256).hexdigest()

    def csrf_ok(self, who: Identity | str, given: str | None) -> bool:
        """Whether `given` is the CSRF token of `who` (constant time)."""
        return bool(given) and hmac.compare_digest(self.csrf_token(who), str(given))


def client_is_proxy(client_host: str | None, trusted: str | None) -> bool:
    """Whether a request came from the trusted proxy's address (exact match)."""
    return bool(trusted) and client_host == trusted
