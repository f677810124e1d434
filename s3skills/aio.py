"""The bridge between sync and async code, for front ends and applications.

s3skills runs all its I/O on one private event loop in a daemon thread (see
`s3skills._loop`). These are the public entry points to it:

- `run_sync(coro)`: run a coroutine there and wait for its result (from sync code).
- `sync_method(amethod)`: the sync twin of an `async def` method, same parameters.
- `io_bound(amethod)`: make an `async def` always run on that loop (in the caller's context).
- `gather_limited(jobs, limit)`: run coroutine factories with at most `limit` in flight.
- `serve_on_running_loop()`: make a server's own loop the I/O loop while it serves.
"""

from s3skills._loop import gather_limited, io_bound, run_sync, serve_on_running_loop, sync_method

__all__ = ["gather_limited", "io_bound", "run_sync", "serve_on_running_loop", "sync_method"]
