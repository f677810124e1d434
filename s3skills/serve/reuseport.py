"""Worker processes on listening sockets of their own, all bound to one port (`SO_REUSEPORT`).

One listening socket shared by the worker processes of `s3skills.serve.http.serve_workers`
lets one worker take nearly every connection: the worker whose event loop wakes first accepts
every connection waiting, and keep-alive clients stay where they landed (measured with 50
clients and 2 workers: 49 connections on one worker, 1 on the other). With `SO_REUSEPORT`
each worker listens on a socket of its own bound to the same address, and Linux spreads new
connections over the listening sockets of that group by a hash of each connection's
addresses and ports (nginx's `reuseport`, gunicorn's `--reuse-port`):

- the manager reserves the port with a socket bound with the option that never listens: it
  receives no connections (Linux gives them to listening members only) and holds the port
  chosen for `--port 0`;
- every worker binds a socket of its own when it starts (`WorkerSockets`: what uvicorn's
  manager hands each worker it starts, the first ones and those started again after a
  death), and its server listens on it once its app has started, so a worker joins the
  group when it can serve;
- `listening` counts the sockets listening on the port: the manager says where it listens
  once every worker does.

Only on Linux (`available`): elsewhere the option does not spread connections, and the
workers share one listening socket as before.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

from uvicorn.config import STARTUP_FAILURE

__all__ = ["WorkerSockets", "available", "listening", "own_socket"]


def available() -> bool:
    """True where each worker can listen on a socket of its own: Linux, with `SO_REUSEPORT`."""
    if not sys.platform.startswith("linux") or not hasattr(socket, "SO_REUSEPORT"):
        return False
    try:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    except OSError:  # a kernel or sandbox without it
        return False
    return True


def own_socket(family: int, address: tuple[Any, ...]) -> socket.socket:
    """A TCP socket bound to `address` with `SO_REUSEPORT` (and `SO_REUSEADDR`), not listening.

    Raises:
        OSError: The address cannot be bound (a socket without the option holds it).
    """
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class WorkerSockets(list[socket.socket]):
    """The sockets uvicorn's manager hands every worker it starts: none in the manager; in the
    worker, where this list arrives pickled, one socket of the worker's own (`own_socket`
    on `address`), which the worker's server listens on once its app has started.

    A worker that cannot bind exits with uvicorn's startup-failure status, so the manager
    stops instead of starting it again and again.
    """

    def __init__(self, family: int, address: tuple[Any, ...]) -> None:
        super().__init__()
        self.family, self.address = family, address

    def __reduce__(self) -> tuple[Any, ...]:
        return (_bound_in_worker, (self.family, self.address))


def _bound_in_worker(family: int, address: tuple[Any, ...]) -> list[socket.socket]:
    try:
        return [own_socket(family, address)]
    except OSError as exc:
        print(f"worker {os.getpid()} cannot bind {address[:2]}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        sys.exit(STARTUP_FAILURE)


def listening(port: int) -> int | None:
    """The TCP sockets listening on `port` (IPv4 and IPv6) in this network namespace, read
    from `/proc/net`; None where those tables cannot be read."""
    count, read = 0, False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for row in rows:
            fields = row.split()  # sl local_address rem_address st ...; st 0A: LISTEN
            if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count if read else None
