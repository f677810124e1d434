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

from s3skills.paths import check_identity

__all__ = ["JsonFileTokenVerifier", "user_of_token"]


def user_of_token(token: AccessToken) -> str:
    """The user id an access token stands for: its `subject`, else its `client_id`.

    Raises:
        InvalidPath: The id is not made of allow-listed characters.
    """
    return check_identity(token.subject or token.client_id, "user id")


def _fingerprint(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class JsonFileTokenVerifier:
    """A `TokenVerifier` reading `{"<token>": "<user id>", ...}` from a JSON file.

    For development and small private deployments: tokens are compared by their SHA-256
    in constant time, each user id is checked when the file is loaded, and the file is
    read once. Use a real verifier (OAuth, JWT) when tokens must expire or be revoked.

    Args:
        path: The JSON file.

    Raises:
        ValueError: The file is not a JSON object of non-empty string tokens to valid
            user ids.
    """

    def __init__(self, path: str | Path) -> None:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
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
