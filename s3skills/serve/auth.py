"""Who an HTTP request is for: bearer-token verification for the MCP skills server.

The HTTP transport takes the user only from a verified token, never from the request.
Any `mcp.server.auth.provider.TokenVerifier` can be plugged in (an OAuth introspection or
JWT verifier in production); `user_of_token` maps its `AccessToken` to a user id.
`JsonFileTokenVerifier` is the development verifier: a JSON file mapping tokens to users.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from mcp.server.auth.provider import AccessToken

from s3skills.paths import check_identity, read_private_file

__all__ = ["JsonFileTokenVerifier", "user_of_token"]

_MAX_TOKENS_BYTES = 16 * 1024 * 1024


def user_of_token(token: AccessToken) -> str:
    """The user id an access token stands for: its `subject`, else its `client_id`.

    Raises:
        InvalidPath: The id is not made of allow-listed characters.
    """
    return check_identity(token.subject or token.client_id, "user id")


def _read_private(path: Path) -> str:
    """The text of a tokens file that only this process's user can have written (`read_private_file`).

    Raises:
        ValueError: Unreadable, a symlink, not a regular file, owned by another user,
            writable by group or others, too large, or not UTF-8.
    """
    data = read_private_file(path, max_bytes=_MAX_TOKENS_BYTES, what="the tokens file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"The tokens file {str(path)!r} is not UTF-8") from None


def _fingerprint(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class JsonFileTokenVerifier:
    """A `TokenVerifier` reading `{"<token>": "<user id>", ...}` from a JSON file.

    For development and small private deployments: tokens are compared by their SHA-256
    in constant time, each user id is checked when the file is loaded, and the file is
    read once. Use a real verifier (OAuth, JWT) when tokens must expire or be revoked.
    Whoever can write the file can make any token stand for any user, so a file that
    another user owns, that group or others may write, or a symlink is refused: own it
    and `chmod 600` it.

    Args:
        path: The JSON file.

    Raises:
        ValueError: The file is owned by another user, writable by group or others, a
            symlink, not a regular file, or not a JSON object of non-empty string tokens to valid user ids.
    """

    def __init__(self, path: str | Path) -> None:
        text = _read_private(Path(path))
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"Cannot read the tokens file {str(path)!r}: {exc}") from None
        if not isinstance(raw, dict) or not raw:
            raise ValueError(f"The tokens file {str(path)!r} must be a JSON object {{token: user_id}}")
        self._users: list[tuple[bytes, str]] = []
        for token, user in raw.items():
            if not token or not isinstance(user, str):
                raise ValueError(f"The tokens file {str(path)!r} maps an empty token or a non-text user id")
            self._users.append((_fingerprint(token), check_identity(user, "user id")))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token of a known bearer token, or None (the request gets a 401)."""
        wanted = _fingerprint(token)
        found: str | None = None
        for known, user in self._users:  # every entry is compared: no early exit to time
            if hmac.compare_digest(known, wanted):
                found = user
        if found is None:
            return None
        return AccessToken(token=token, client_id=found, subject=found, scopes=[])
