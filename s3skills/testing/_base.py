"""What the local servers of `s3skills.testing` share: `with server:` stops it on the way out."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Stoppable"]


class Stoppable:
    """A context manager whose exit calls `stop()` (started by the constructor)."""

    def stop(self) -> None:
        """Stop the server; safe to call more than once."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
