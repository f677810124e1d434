"""Who a call is for behind LangGraph Server: the user its auth handler authenticated.

LangGraph Server (`langgraph dev`, `langgraph up`, LangSmith Deployment) runs every
graph with a `config["configurable"]` built from the request. Most of it is the
client's: whichever of `config={"configurable": {...}}` or `context={...}` the client
sends becomes `configurable` (checked with langgraph-api 0.16), and
`configurable["user_id"]` is the client's value when it sends one (else the
authenticated user's id). None of that may decide whose bucket prefix a call reads.

What the client cannot set: before a run is created the server strips its reserved
keys from the client's `config.configurable` and `context`, then writes, from the
deployment's `@auth.authenticate` handler,

- `configurable["langgraph_auth_user"]`: the authenticated user, as a starlette
  `BaseUser` (a `ProxyUser` around the handler's dict or object, so `.identity`,
  `.is_authenticated`, `.display_name` and the handler's own fields are attributes
  and `.get(name)` keys); None when the request was not authenticated;
- `configurable["langgraph_auth_user_id"]`: `user.identity` as a string;
- `configurable["thread_id"]`: the thread the run belongs to (the server overwrites
  any client value).

`langgraph_auth_identity` reads exactly those. The client's `context` argument is
ignored. With no authenticated user it returns no user id: an agent run then fails with
`UserNotResolved` before the model is called (unless the backend has `allow_anonymous=True`,
and then every user-scoped mount, the library and `/workspace`, is refused); it never falls
back to client ids.

Under `langgraph dev`, a request with the header `x-auth-scheme: langsmith` is let in
as the Studio user (`StudioUser("langgraph-studio-user")`) without the custom handler,
unless `langgraph.json` sets `"auth": {..., "disable_studio_auth": true}`. Such a user
is refused here by default (`allow_studio_user=False`): it is not one of your tenants.

Use it with `S3Backend(bucket, resolver=LangGraphAuthResolver())` (or `resolver=langgraph_auth_identity`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from s3skills.tenancy import Identity

__all__ = [
    "AUTH_USER_ID_KEY",
    "AUTH_USER_KEY",
    "STUDIO_USER_KIND",
    "LangGraphAuthResolver",
    "langgraph_auth_identity",
]

logger = logging.getLogger(__name__)

AUTH_USER_KEY = "langgraph_auth_user"
"""The `configurable` key where LangGraph Server puts the authenticated user."""

AUTH_USER_ID_KEY = "langgraph_auth_user_id"
"""The `configurable` key where LangGraph Server puts the user's identity string."""

STUDIO_USER_KIND = "StudioUser"
"""The `kind` (and class name) of the user `langgraph dev` gives LangGraph Studio."""


def _user_field(user: Any, name: str) -> Any:
    """A field of an auth user: an attribute, else a key (plain dicts, `ProxyUser.get`)."""
    value = getattr(user, name, None)
    if value is None and isinstance(user, Mapping):
        value = user.get(name)
    elif value is None and callable(getattr(user, "get", None)):
        try:
            value = user.get(name)
        except Exception:  # a user object whose `get` means something else
            value = None
    return value


def _is_studio_user(user: Any) -> bool:
    return type(user).__name__ == STUDIO_USER_KIND or _user_field(user, "kind") == STUDIO_USER_KIND


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _authenticated_user_id(configurable: Mapping[str, Any], *, allow_studio_user: bool) -> str | None:
    user = configurable.get(AUTH_USER_KEY)
    if user is None:
        return None
    if _user_field(user, "is_authenticated") is False:
        return None
    if not allow_studio_user and _is_studio_user(user):
        logger.warning("refused the LangGraph Studio user: it is not a tenant (allow_studio_user=False)")
        return None
    identity = _text(_user_field(user, "identity"))
    if identity is None:
        return None
    stated = configurable.get(AUTH_USER_ID_KEY)
    if stated is not None and stated != identity:
        # Both are written by the server from one user; a mismatch means something else wrote one.
        logger.warning("refused a run whose %s does not match its %s", AUTH_USER_ID_KEY, AUTH_USER_KEY)
        return None
    return identity


def _resolve(config: Mapping[str, Any], *, ticket_field: str | None, allow_studio_user: bool) -> Identity:
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, Mapping):
        return Identity()
    thread = configurable.get("thread_id")
    thread_id = str(thread) if thread is not None and thread != "" else None
    user_id = _authenticated_user_id(configurable, allow_studio_user=allow_studio_user)
    if user_id is None:
        return Identity(thread_id=thread_id)
    ticket_id = None
    if ticket_field is not None:
        ticket_id = _text(_user_field(configurable[AUTH_USER_KEY], ticket_field))
    return Identity(user_id, thread_id, ticket_id)


def langgraph_auth_identity(context: Any, config: Mapping[str, Any]) -> Identity:
    """The ids of a call from LangGraph Server's authenticated user.

    Args:
        context: The run's context. Ignored: under LangGraph Server it is the client's.
        config: The run's config; only `configurable["langgraph_auth_user"]`,
            `["langgraph_auth_user_id"]` and `["thread_id"]` are read.

    Returns:
        The `Identity` of the call. `user_id` is the user's `identity`, or
        None when the run has no authenticated user (none, `is_authenticated` false,
        an empty identity, the Studio user, or a user id that contradicts the user).
        `ticket_id` is the user's own `ticket_id` field (set by your auth handler),
        else None. `thread_id` is the run's thread.
    """
    del context
    return _resolve(config, ticket_field="ticket_id", allow_studio_user=False)


class LangGraphAuthResolver:
    """`langgraph_auth_identity` with options, as a callable object.

    Args:
        ticket_field: The field of the auth user that holds the ticket id (None: no
            ticket ever). Your auth handler decides it; clients cannot.
        allow_studio_user: Accept `langgraph dev`'s Studio user as the tenant
            `langgraph-studio-user` (for local debugging in Studio only).
    """

    def __init__(self, *, ticket_field: str | None = "ticket_id", allow_studio_user: bool = False) -> None:
        self.ticket_field = ticket_field
        self.allow_studio_user = allow_studio_user

    def __call__(self, context: Any, config: Mapping[str, Any]) -> Identity:
        """The `Identity` of a call; see `langgraph_auth_identity`."""
        del context
        return _resolve(config, ticket_field=self.ticket_field, allow_studio_user=self.allow_studio_user)

    def __repr__(self) -> str:
        return f"LangGraphAuthResolver(ticket_field={self.ticket_field!r}, allow_studio_user={self.allow_studio_user})"
