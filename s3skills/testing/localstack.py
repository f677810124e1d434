"""LocalStack (S3 only) on a free loopback port, run on the host from a venv of its own, no Docker.

LocalStack's runtime is the Python package ``localstack-core``; it needs Python >= 3.13,
which may not be the interpreter running the tests. So `LocalStackServer`:

1. finds a Python >= 3.13 (`find_localstack_python`: on ``PATH``, then under pyenv);
2. builds a venv with `LOCALSTACK_REQUIREMENTS` once and caches it
   (`localstack_venv`, under ``~/.cache/s3skills/``, keyed by the interpreter and the pins);
3. starts ``python -m localstack.runtime.main`` with S3 only, bound to 127.0.0.1 on a free
   port, its files in a temporary directory, no DNS server, no analytics, no downloads;
4. waits until ``/_localstack/health`` says S3 is up, and stops it by process group.

Nothing here imports LocalStack or needs pytest.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, NamedTuple

from s3skills.testing._base import ProcessServer
from s3skills.testing.servers import LOOPBACK, free_port

__all__ = [
    "LOCALSTACK_REQUIREMENTS",
    "LocalStackBucket",
    "LocalStackServer",
    "LocalStackStartupError",
    "find_localstack_python",
    "localstack_venv",
]

MIN_PYTHON = (3, 13)

# The runtime, pinned, and four dependencies its resolver gets wrong on a plain install:
# cbor2 6.x has no `cbor2._decoder`; pyOpenSSL >= 24.3 dropped `X509.add_extensions`, which
# LocalStack's self-signed certificate uses, and drags newer cryptography/service_identity.
LOCALSTACK_REQUIREMENTS = (
    "localstack-core[runtime]==2026.3.0",
    "cbor2<5.7",
    "cryptography>=43,<44",
    "pyopenssl<24.3",
    "service_identity<24.3",
)

_READY_MARKER = ".s3skills-complete"
_PIP_OPTIONS = ("--disable-pip-version-check", "--no-input")


class LocalStackStartupError(RuntimeError):
    """The venv could not be built, or LocalStack exited or never served S3 in time."""


class LocalStackBucket(NamedTuple):
    """A fresh bucket on the session's LocalStack and the (dummy) credentials it accepts."""

    endpoint_url: str
    bucket: str
    access_key: str
    secret_key: str


def _version_of(python: str) -> tuple[int, int] | None:
    """``(major, minor)`` of an interpreter, or None when it does not run (a pyenv shim may not)."""
    try:
        proc = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = proc.stdout.split()
    if proc.returncode != 0 or len(parts) != 2:
        return None
    return int(parts[0]), int(parts[1])


def _release(folder: str) -> tuple[int, ...]:
    """``3.13.0`` -> ``(3, 13, 0)``; a folder that is not a plain release sorts first."""
    parts = folder.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def _candidates() -> list[str]:
    names = [f"python3.{minor}" for minor in range(20, MIN_PYTHON[1] - 1, -1)] + ["python3"]
    found = [path for name in names if (path := shutil.which(name))]
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    pythons = (pyenv_root / "versions").glob("3.*/bin/python3")
    newest_first = sorted(pythons, key=lambda p: _release(p.parent.parent.name), reverse=True)
    return found + [str(p) for p in newest_first]


def find_localstack_python() -> str | None:
    """The first Python >= 3.13 that runs: on ``PATH`` (``python3.N``, ``python3``), then pyenv's.

    ``S3SKILLS_LOCALSTACK_PYTHON`` names one explicitly (it must be >= 3.13). Returns None when
    there is none, which is the only case where LocalStack tests may skip.
    """
    explicit = os.environ.get("S3SKILLS_LOCALSTACK_PYTHON")
    for python in [explicit] if explicit else _candidates():
        version = _version_of(python)
        if version is not None and version >= MIN_PYTHON:
            return python
    return None


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("S3SKILLS_CACHE_DIR") or Path(base) / "s3skills")


def localstack_venv(python: str, *, cache_root: Path | None = None, timeout: float = 1200.0) -> Path:
    """The venv holding LocalStack for ``python``, built on first use and then reused.

    The venv's name hashes the interpreter (its resolved path and version) and
    `LOCALSTACK_REQUIREMENTS`, so a change of either builds a new one. A file lock keeps two
    test sessions from building it at once; a build cut short is removed and redone.

    Raises:
        LocalStackStartupError: ``venv`` or ``pip install`` failed (the message has pip's output).
    """
    root = cache_root or _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    real = os.path.realpath(python)
    key_text = "\n".join([real, str(_version_of(python)), *LOCALSTACK_REQUIREMENTS])
    venv = root / f"localstack-venv-{hashlib.sha256(key_text.encode()).hexdigest()[:12]}"
    with (root / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / _READY_MARKER).is_file():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [real, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *_PIP_OPTIONS, *LOCALSTACK_REQUIREMENTS],
        ]
        for step in steps:
            proc = subprocess.run(
                step, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
            )
            if proc.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                output = (proc.stdout + proc.stderr)[-4000:]
                raise LocalStackStartupError(f"building the LocalStack venv failed: {' '.join(step)}\n{output}")
        (venv / _READY_MARKER).write_text("\n".join(LOCALSTACK_REQUIREMENTS) + "\n")
        return venv


class LocalStackServer(ProcessServer):
    """LocalStack with S3 only, on a free 127.0.0.1 port, from its cached venv.

    It accepts any credentials (``access_key``/``secret_key`` are the dummy ones the tests
    use). Its state is in memory (``PERSISTENCE=0``) and its files in a temporary directory
    that ``stop()`` removes. The gateway runs on hypercorn, which binds the address it is
    given (LocalStack's default server listens on every interface whatever
    ``GATEWAY_LISTEN`` says); LocalStack's DNS server, analytics and certificate download
    are off, so it opens no socket beyond loopback.
    """

    access_key = "testing"
    secret_key = "testing"  # noqa: S105 - the dummy key LocalStack accepts

    def __init__(self, *, python: str | None = None, startup_timeout: float = 180.0) -> None:
        """Build (or reuse) the venv, start LocalStack and block until its S3 is up.

        Raises:
            FileNotFoundError: No Python >= 3.13 was found (see `find_localstack_python`).
            LocalStackStartupError: The venv build failed, or LocalStack exited or did not
                report S3 ready in time; the message carries the tail of its log.
        """
        interpreter = python or find_localstack_python()
        if interpreter is None:
            raise FileNotFoundError("LocalStack needs Python >= 3.13: none on PATH or under pyenv")
        self.venv = localstack_venv(interpreter)
        self.dir = Path(tempfile.mkdtemp(prefix="s3skills-localstack-"))
        self.log_path = self.dir / "localstack.log"
        port = free_port()
        self.endpoint_url = f"http://{LOOPBACK}:{port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        try:
            self.startup_seconds = self._start(port, startup_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int | None:
        """The runtime's process id (the leader of its process group), None once stopped."""
        return None if self._process is None else self._process.pid

    def _environment(self, port: int) -> dict[str, str]:
        # A clean environment: the test session's AWS_* and any LocalStack settings of the
        # user (DEBUG, SERVICES, ~/.localstack profiles) stay out.
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "PIP_INDEX_URL")
        env = {name: os.environ[name] for name in keep if name in os.environ}
        (self.dir / "config").mkdir()
        (self.dir / "tmp").mkdir()
        env.update(
            GATEWAY_LISTEN=f"{LOOPBACK}:{port}",
            LOCALSTACK_HOST=f"{LOOPBACK}:{port}",
            GATEWAY_SERVER="hypercorn",
            SERVICES="s3",
            EAGER_SERVICE_LOADING="1",
            PERSISTENCE="0",
            DNS_ADDRESS="0",
            DISABLE_EVENTS="1",
            SKIP_SSL_CERT_DOWNLOAD="1",
            SKIP_INFRA_DOWNLOADS="1",
            OVERRIDE_IN_DOCKER="0",  # host paths under FILESYSTEM_ROOT, not /var/lib/localstack
            FILESYSTEM_ROOT=str(self.dir / "fs"),
            CONFIG_DIR=str(self.dir / "config"),
            TMPDIR=str(self.dir / "tmp"),  # its /tmp/localstack, private to this server
        )
        return env

    def _start(self, port: int, timeout: float) -> float:
        command = [str(self.venv / "bin" / "python"), "-m", "localstack.runtime.main"]
        return self._launch(command, self._environment(port), timeout)

    def health(self) -> dict[str, object]:
        """``/_localstack/health`` as JSON (raises ``OSError`` while the gateway is not up)."""
        # The URL is this server's own http://127.0.0.1 endpoint, never user input.
        with urllib.request.urlopen(f"{self.endpoint_url}/_localstack/health", timeout=2) as response:  # noqa: S310
            data = json.loads(response.read())
        return data if isinstance(data, dict) else {}

    def _wait_until_ready(self, deadline: float) -> None:
        last: object = None
        while time.monotonic() < deadline:
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise LocalStackStartupError(f"LocalStack exited with code {code}\n{self.log_tail()}")
            try:
                services = self.health().get("services")
            except (OSError, ValueError) as exc:  # refused while it boots, or a half-written answer
                last = exc
            else:
                last = services
                if isinstance(services, dict) and services.get("s3") in ("available", "running"):
                    return
            time.sleep(0.1)
        where = f"at {self.endpoint_url} in time (last answer: {last!r})"
        raise LocalStackStartupError(f"LocalStack did not report S3 ready {where}\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> None:
        """Terminate the server's process group and delete its directory; idempotent."""
        self._stop_process(timeout)
        shutil.rmtree(self.dir, ignore_errors=True)
