"""The deployment's auth handler: a bearer token names the user (development tokens).

Every request must carry `Authorization: Bearer <token>`; the token is looked up in a
table of development tokens and the request runs as that user. The user becomes
`config["configurable"]["langgraph_auth_user"]` in the graph, which is the only
identity the skills backend trusts. Replace `authenticate` with your identity
provider's check (JWT, OAuth introspection, ...) for anything beyond development.

Tokens come from `S3SKILLS_DEV_TOKENS` (a JSON object) or the JSON file named by
`S3SKILLS_DEV_TOKENS_FILE`, read at start-up. Each entry maps a token to a user id,
or to `{"identity": "<user id>", "ticket_id": "<ticket>"}` to give the user a
/ticket folder:

    {"alice-dev-token": "alice", "bob-dev-token": {"identity": "bob", "ticket_id": "T-7"}}

Threads are private to the user who created them (an `owner` metadata filter), and
assistants can be read but not created or changed through the API.
"""

from __future__ import annotations

import hmac
import json
import os
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth

TOKENS_ENV = "S3SKILLS_DEV_TOKENS"
TOKENS_FILE_ENV = "S3SKILLS_DEV_TOKENS_FILE"


def load_tokens() -> dict[str, dict[str, str]]:
    """The token table from the environment, checked; an error names what is wrong."""
    text = os.environ.get(TOKENS_ENV)
    source = TOKENS_ENV
    if text is None and (path := os.environ.get(TOKENS_FILE_ENV)):
        text, source = Path(path).read_text(encoding="utf-8"), path
    if text is None:
        raise RuntimeError(f"no development tokens: set {TOKENS_ENV} (JSON) or {TOKENS_FILE_ENV} (a JSON file)")
    raw = json.loads(text)
    if not isinstance(raw, dict) or not raw:
        raise RuntimeError(f"{source}: expected a non-empty JSON object of token -> user")
    table: dict[str, dict[str, str]] = {}
    for token, user in raw.items():
        entry: Any = {"identity": user} if isinstance(user, str) else user
        if not isinstance(entry, dict) or not isinstance(entry.get("identity"), str) or not entry["identity"]:
            raise RuntimeError(f"{source}: each token maps to a user id or an object with an 'identity'")
        if len(token) < 8:
            raise RuntimeError(f"{source}: tokens must be at least 8 characters")
        table[token] = {k: v for k, v in entry.items() if isinstance(v, str)}
    return table


TOKENS = load_tokens()

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user of a request, from its bearer token; 401 without a known token."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing bearer token")
    found = None
    for known, user in TOKENS.items():  # compare every entry, in constant time each
        if hmac.compare_digest(known.encode(), token.strip().encode()):
            found = user
    if found is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return found  # type: ignore[return-value]  # identity plus the handler's own fields


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    """Threads (and their runs) belong to their creator: tag on create, filter otherwise."""
    owner = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata.update(owner)
    return owner


@auth.on.assistants.read
async def read_assistants(ctx: Auth.types.AuthContext, value: Auth.types.AssistantsRead) -> None:
    """Anyone authenticated may read the deployment's assistants."""


@auth.on.assistants.search
async def search_assistants(ctx: Auth.types.AuthContext, value: Auth.types.AssistantsSearch) -> None:
    """Anyone authenticated may list the deployment's assistants."""


@auth.on
async def deny_the_rest(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """Everything not allowed above (assistant writes, crons, the store) is refused."""
    raise Auth.exceptions.HTTPException(status_code=403, detail=f"{ctx.resource}.{ctx.action} is not allowed")
