"""What `FaultProxy` injects and what it observes: fault kinds, matchers, rules and the request log.

Nothing here touches the network. `FaultBook` is the proxy's thread-safe state: the
injected rules (tried in order), the request counts per method and the history. The
proxy's I/O thread calls `FaultBook.record` once per request; tests read the rest.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "FaultBook",
    "FaultKind",
    "FaultRule",
    "ProxyRequest",
    "RequestMatcher",
    "RequestRecord",
    "error_response",
    "match_request",
]

FaultKind = Literal["slowdown", "internal_error", "access_denied", "reset", "truncate"]
"""What an injected fault does.

- `slowdown`: answer `503 SlowDown` (S3 throttling), without forwarding.
- `internal_error`: answer `500 InternalError`, without forwarding.
- `access_denied`: answer `403 AccessDenied`, without forwarding.
- `reset`: close the client connection with a TCP reset, without forwarding.
- `truncate`: forward the request (upstream acts on it), then send the response
  head and only half of its body (or half of the head when the body is empty),
  and close the connection.
"""

FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)

# kind -> (status, reason, S3 error code, message)
_ERRORS: dict[str, tuple[int, str, str, str]] = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal_error": (500, "Internal Server Error", "InternalError", "We encountered an internal error."),
    "access_denied": (403, "Forbidden", "AccessDenied", "Access Denied"),
}


def answers_without_forwarding(kind: FaultKind | None) -> bool:
    """True for the faults answered by an S3 error response (nothing reaches upstream)."""
    return kind in _ERRORS


def error_response(kind: FaultKind) -> tuple[int, bytes, list[tuple[str, str]], bytes]:
    """The S3 error answer of `kind`: status, reason, headers and XML body.

    Raises:
        ValueError: `kind` is not answered with an error response (`reset`, `truncate`).
    """
    if kind not in _ERRORS:
        raise ValueError(f"fault {kind!r} has no error response")
    status, reason, code, text = _ERRORS[kind]
    request_id = uuid.uuid4().hex[:16].upper()
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{text}</Message>"
        f"<RequestId>{request_id}</RequestId></Error>"
    ).encode()
    headers = [
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", request_id),
    ]
    return status, reason.encode(), headers, body


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """A request as the proxy saw it, given to match predicates.

    Attributes:
        method: The HTTP method, upper case (`GET`, `PUT`...).
        path: The path, percent-encoded as sent (`/bucket/key`).
        query: The query string without `?` (`list-type=2&prefix=...`).
        headers: The header fields in order, names as sent.
    """

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


RequestMatcher = Callable[[ProxyRequest], bool]
"""A predicate choosing the requests a fault applies to."""


def match_request(
    method: str | Iterable[str] | None = None,
    path: str | None = None,
    query: str | None = None,
) -> RequestMatcher:
    """Build a predicate over requests; every given criterion must hold.

    Args:
        method: A method or several (`"PUT"`, `("GET", "HEAD")`).
        path: A regular expression searched in the path (`r"/notes\\.md$"`).
        query: A regular expression searched in the query string (`"list-type=2"`).

    Returns:
        A function for `FaultProxy.inject(..., match=...)`.
    """
    methods = None if method is None else {method.upper()} if isinstance(method, str) else {m.upper() for m in method}
    path_re = re.compile(path) if path is not None else None
    query_re = re.compile(query) if query is not None else None

    def matcher(request: ProxyRequest) -> bool:
        if methods is not None and request.method not in methods:
            return False
        if path_re is not None and not path_re.search(request.path):
            return False
        return query_re is None or bool(query_re.search(request.query))

    return matcher


@dataclass(slots=True)
class FaultRule:
    """One injected fault: what it does, to which requests, how many more times.

    Returned by `FaultProxy.inject`; read `fired` to see how often it applied.
    """

    kind: FaultKind
    remaining: int | None
    match: RequestMatcher | None = None
    fired: int = 0

    @property
    def exhausted(self) -> bool:
        """True once the rule has fired `count` times (never for `count=None`)."""
        return self.remaining is not None and self.remaining <= 0

    def _applies(self, request: ProxyRequest) -> bool:
        return not self.exhausted and (self.match is None or self.match(request))


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request in the proxy's log, and the fault it met (None: forwarded)."""

    method: str
    path: str
    query: str
    fault: FaultKind | None


class FaultBook:
    """The injected rules, the request counts and the history, behind one lock.

    Written by the proxy's I/O thread (`record`, `connected`), read and configured
    from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._counts: Counter[str] = Counter()
        self._connections = 0
        self._open = 0
        self._log: list[RequestRecord] = []

    def add(self, kind: FaultKind, count: int | None, match: RequestMatcher | None) -> FaultRule:
        """Append a rule (see `FaultProxy.inject`).

        Raises:
            ValueError: An unknown kind, or a negative count.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; use one of {FAULT_KINDS}")
        if count is not None and count < 0:
            raise ValueError("count must be >= 0 or None")
        rule = FaultRule(kind=kind, remaining=count, match=match)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules.clear()

    def record(self, request: ProxyRequest) -> FaultKind | None:
        """Count and log `request`, and return the fault of the first rule that applies."""
        with self._lock:
            fault: FaultKind | None = None
            for rule in self._rules:
                if rule._applies(request):
                    rule.fired += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    fault = rule.kind
                    break
            self._counts[request.method] += 1
            self._log.append(RequestRecord(request.method, request.path, request.query, fault))
            return fault

    def connected(self) -> None:
        """Count one accepted client connection."""
        with self._lock:
            self._connections += 1
            self._open += 1

    def disconnected(self) -> None:
        """Count one client connection closed (its upstream connection is closed first)."""
        with self._lock:
            self._open -= 1

    def open_connections(self) -> int:
        """Client connections open now."""
        with self._lock:
            return self._open

    def counts(self) -> Counter[str]:
        """Requests per method (a copy)."""
        with self._lock:
            return Counter(self._counts)

    def connections(self) -> int:
        """Client connections accepted."""
        with self._lock:
            return self._connections

    def history(self) -> list[RequestRecord]:
        """Every request, in order (a copy)."""
        with self._lock:
            return list(self._log)

    def reset(self) -> None:
        """Forget the counts, the connection count and the history (rules stay)."""
        with self._lock:
            self._counts.clear()
            self._log.clear()
            self._connections = 0
