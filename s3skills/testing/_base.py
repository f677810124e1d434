"""What the local servers of `s3skills.testing` share: `with server:` stops it on the way out,
and the servers run as a child process group (`ProcessServer`) log and stop one way."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = ["ProcessServer", "Stoppable"]


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


class ProcessServer(Stoppable):
    """A server run as its own process group, logging to `log_path` (SeaweedFS, LocalStack)."""

    log_path: Path
    dir: Path
    _process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def _wait_until_ready(self, deadline: float) -> None:
        """Return once the server answers; raise if it exits or `deadline` (monotonic) passes."""
        raise NotImplementedError

    def _launch(self, command: list[str], env: Mapping[str, str], timeout: float) -> float:
        """Start `command` in `dir` as its own process group, logging to `log_path`, and wait
        until it is ready; the seconds that took."""
        self._log = self.log_path.open("wb")
        started = time.monotonic()
        self._process = subprocess.Popen(
            command,
            cwd=self.dir,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop() reaches every child
        )
        self._wait_until_ready(started + timeout)
        return time.monotonic() - started

    def log_tail(self, max_chars: int = 4000) -> str:
        """Return the end of the server log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        return text[-max_chars:]

    def _stop_process(self, timeout: float) -> None:
        """SIGTERM the process group, SIGKILL it after `timeout` seconds; close the log. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
