"""Protocol plumbing of the MCP skills server, kept apart from what it serves.

- The request params of the extension's methods (`skills/get`, `resources/directory/read`).
- `declare_extensions`: a server middleware that puts `capabilities.extensions` in the
  `initialize` result of the 2025-11-25 handshake. mcp 2.3.0's model of that revision's
  `ServerCapabilities` has no `extensions` field, so the SDK drops the declaration there
  (it only reaches 2026-07-28 clients, through `server/discover`), while the TypeScript SDK,
  the conformance suite and the Inspector read it on 2025-11-25 too. The middleware adds it
  back to the wire dict; remove it once the python SDK carries `extensions` on 2025-11-25.
- `tailor_instructions`: the `initialize` result's `instructions` for the client in front
  (the extension's methods to a client that declares the extension, else the tools face).
- `protocol_error`: the protocol error of a failed library call.
- `hide_internal_errors`: an exception that is not a protocol error never reaches the
  client as text (it is logged; the client gets a plain "internal error").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from s3skills.errors import (
    ConfigurationError,
    FileTooLarge,
    InvalidPath,
    NotFound,
    S3SkillsError,
    SkillError,
    TenantError,
)

__all__ = [
    "CACHE_PRIVATE",
    "DirectoryReadParams",
    "GetSkillParams",
    "declare_extensions",
    "finish",
    "hide_internal_errors",
    "is_modern",
    "protocol_error",
    "tailor_instructions",
]

logger = logging.getLogger(__name__)

CACHE_PRIVATE: dict[str, Any] = {"ttlMs": 0, "cacheScope": "private"}
"""Results are per user and may change at any time: never shared, never fresh."""


class GetSkillParams(types.RequestParams):
    """Params of `skills/get`."""

    uri: str


class DirectoryReadParams(types.RequestParams):
    """Params of `resources/directory/read`."""

    uri: str
    cursor: str | None = None


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request is of the 2026-07-28 (stateless) era."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def finish(ctx: ServerRequestContext[Any, Any], result: dict[str, Any]) -> dict[str, Any]:
    """An extension method's result with `ttlMs`/`cacheScope` (both eras; hosts read them)
    and, on 2026-07-28, `resultType`."""
    result = {**result, **CACHE_PRIVATE}
    if is_modern(ctx):
        result = {"resultType": "complete", **result}
    return result


def declare_extensions(extensions: dict[str, dict[str, Any]]) -> Any:
    """A server middleware adding `capabilities.extensions` to a 2025-11-25 `initialize` result."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict) and "extensions" not in capabilities:
                result = {**result, "capabilities": {**capabilities, "extensions": extensions}}
        return result

    return middleware


def client_has_extension(params: Any, extension: str) -> bool:
    """Whether an `initialize` request's params declare `extension` under `capabilities.extensions`."""
    capabilities = params.get("capabilities") if isinstance(params, dict | Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict | Mapping) else None
    return isinstance(extensions, dict | Mapping) and extension in extensions


def tailor_instructions(extension: str, *, with_extension: str, without_extension: str) -> Any:
    """A server middleware choosing the `initialize` result's `instructions` for the client in front.

    A client that declares `extension` among its capabilities reads `with_extension`,
    any other `without_extension` (the server's default `instructions`, which
    `server/discover` and clients of other eras get, should describe both).
    """

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            chosen = with_extension if client_has_extension(ctx.params, extension) else without_extension
            result = {**result, "instructions": chosen}
        return result

    return middleware


def protocol_error(exc: S3SkillsError) -> MCPError:
    """The protocol error a client gets for a failed library call.

    A user the layout refuses is an invalid request; an unknown skill or file, a bad path
    or a file too large are invalid params (with the message); a configuration error
    (`ConfigurationError`: no bucket, no or rejected credentials, access denied) says its
    fix, since trying again will not help; anything else (the store unreachable) is
    "unavailable; try again later".
    """
    if isinstance(exc, TenantError):
        return MCPError(code=INVALID_REQUEST, message=f"This user cannot be served: {exc}")
    if isinstance(exc, ConfigurationError):
        logger.error("skill source misconfigured: %s: %s", exc, exc.fix)
        return MCPError(code=INTERNAL_ERROR, message=f"The skill library is misconfigured on the server: {exc.fix}")
    if isinstance(exc, SkillError | NotFound | InvalidPath | FileTooLarge):
        return MCPError(code=INVALID_PARAMS, message=str(exc))
    logger.warning("skill source failed: %s", exc)
    return MCPError(code=INTERNAL_ERROR, message="The skill library is unavailable; try again later")


async def hide_internal_errors(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """A server middleware: an unexpected exception is logged, and the client gets no text of it."""
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):  # protocol errors; bad params (the SDK answers -32602)
        raise
    except Exception:
        logger.exception("%s failed", ctx.method)
        raise MCPError(code=INTERNAL_ERROR, message="Internal error") from None
