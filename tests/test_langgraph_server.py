"""LangGraph Server glue: the resolver, and examples/langgraph-server under a real `langgraph dev`.

The end-to-end tests start `langgraph dev` (langgraph-cli[inmem]) on a free loopback port as
a subprocess, with the example's own `langgraph.json`, auth handler and graph module, against
the session's moto server, and drive it with `langgraph_sdk` as two users with their own
tokens. The model is the example's scripted model: each run loads the first skill of its
index, reads a file of that skill, /workspace/notes.md and /ticket/brief.md, writes
/workspace/report.md and answers with a JSON report of what it saw.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from s3skills.serve.langgraph import LangGraphAuthResolver, langgraph_auth_identity
from s3skills.tenancy import Identity, thread_skills
from s3skills.testing import LOOPBACK, MotoServer, free_port, make_bucket, make_client, unique_bucket_name

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "langgraph-server"
ALICE_TOKEN = "alice-dev-token-1"
BOB_TOKEN = "bob-dev-token-22"
TOKENS = {ALICE_TOKEN: {"identity": "alice", "ticket_id": "T-100"}, BOB_TOKEN: "bob"}
SKILL = {"alice": "cocina/recetas-alice", "bob": "jardin/plantas-bob"}
STARTUP_SECONDS = 90.0
RUN_TIMEOUT = 60.0
# Variables that could make `langgraph dev` reach a network service: tracing, licence
# and metadata reporting, OpenTelemetry export, proxies.
_SCRUBBED_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "LANGSERVE_", "OTEL_", "DD_")
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


# --- the resolver against config shapes -------------------------------------------------------


class _User:
    """A user object as an auth handler may return it (attributes, like starlette's BaseUser)."""

    def __init__(self, identity: str, *, is_authenticated: bool = True, ticket_id: str | None = None) -> None:
        self.identity = identity
        self.is_authenticated = is_authenticated
        self.display_name = identity
        self.ticket_id = ticket_id


def _config(user: Any, **configurable: Any) -> dict[str, Any]:
    values = {"thread_id": "thread-1", **configurable}
    if user is not None:
        values["langgraph_auth_user"] = user
    return {"configurable": values}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(
            _config({"identity": "alice", "ticket_id": "T-1"}, langgraph_auth_user_id="alice"),
            ("alice", "thread-1", "T-1"),
            id="serialized-user-dict",
        ),
        pytest.param(
            _config(_User("alice", ticket_id="T-1"), langgraph_auth_user_id="alice"),
            ("alice", "thread-1", "T-1"),
            id="user-object",
        ),
        pytest.param(
            _config({"identity": "alice"}, user_id="bob", ticket_id="T-9", langgraph_auth_user_id="alice"),
            ("alice", "thread-1", None),
            id="client-ids-in-configurable-ignored",
        ),
        pytest.param(_config(None, user_id="bob", ticket_id="T-9"), (None, "thread-1", None), id="no-auth-user"),
        pytest.param(_config(_User("alice", is_authenticated=False)), (None, "thread-1", None), id="not-authenticated"),
        pytest.param(_config({"identity": ""}), (None, "thread-1", None), id="empty-identity"),
        pytest.param(_config({"display_name": "alice"}), (None, "thread-1", None), id="no-identity"),
        pytest.param(
            _config({"identity": "alice"}, langgraph_auth_user_id="bob"), (None, "thread-1", None), id="id-mismatch"
        ),
        pytest.param(
            _config({"identity": "langgraph-studio-user", "kind": "StudioUser"}),
            (None, "thread-1", None),
            id="studio-user",
        ),
        pytest.param({"configurable": {}}, (None, None, None), id="empty-configurable"),
        pytest.param({}, (None, None, None), id="no-configurable"),
    ],
)
def test_langgraph_auth_identity_trusts_only_the_authenticated_user(
    config: dict[str, Any], expected: tuple[str | None, ...]
) -> None:
    assert langgraph_auth_identity(None, config) == Identity(*expected)


def test_langgraph_auth_identity_ignores_the_client_context() -> None:
    context = SimpleNamespace(user_id="bob", ticket_id="T-9", thread_id="other")
    assert langgraph_auth_identity(context, _config({"identity": "alice"})) == Identity("alice", "thread-1", None)
    assert langgraph_auth_identity({"user_id": "bob"}, _config(None)) == Identity(None, "thread-1", None)


def test_resolver_options_choose_the_ticket_field_and_the_studio_user() -> None:
    user = {"identity": "alice", "ticket_id": "T-1", "case": "C-7"}
    assert LangGraphAuthResolver(ticket_field="case")(None, _config(user)) == Identity("alice", "thread-1", "C-7")
    assert LangGraphAuthResolver(ticket_field=None)(None, _config(user)) == Identity("alice", "thread-1", None)
    studio = {"identity": "langgraph-studio-user", "kind": "StudioUser"}
    allowed = LangGraphAuthResolver(allow_studio_user=True)
    assert allowed(None, _config(studio)) == Identity("langgraph-studio-user", "thread-1", None)


# The users exactly as langgraph-api builds them: its own auth-response normalisation, its
# merge of the auth context into a run's config, its Studio user and its round trip through
# serialisation (persisted runs). Run in a child process: langgraph_api reads its settings
# from the environment at import time, as `langgraph dev` sets them.
_SERVER_SHAPES = r"""
import json, os, sys
os.environ.update(DATABASE_URI=":memory:", REDIS_URI="fake", MIGRATIONS_PATH="__inmem",
                  LANGSMITH_LANGGRAPH_API_VARIANT="local_dev", LANGGRAPH_RUNTIME_EDITION="inmem")
from langgraph_sdk import Auth
from langgraph_api.auth.custom import _normalize_auth_response, normalize_user
from langgraph_api.auth.studio_user import StudioUser
from langgraph_api.encryption.middleware import _serialize_user_for_encryption
from langgraph_api.utils import merge_auth
from s3skills.serve.langgraph import langgraph_auth_identity

def run(user):
    client = {"configurable": {"user_id": "bob", "ticket_id": "T-9", "thread_id": "thread-1"}}
    config = merge_auth(client, Auth.types.BaseAuthContext(permissions=[], user=user))
    found = langgraph_auth_identity({"user_id": "bob"}, config)
    return [found.user_id, found.thread_id, found.ticket_id]

_, handler_dict = _normalize_auth_response({"identity": "alice", "ticket_id": "T-1"})
_, handler_obj = _normalize_auth_response(type("U", (), {"identity": "carol", "permissions": []})())
restored = normalize_user(_serialize_user_for_encryption(handler_dict))
json.dump({
    "handler_dict": [type(handler_dict).__name__, run(handler_dict)],
    "handler_object": [type(handler_obj).__name__, run(handler_obj)],
    "restored": [type(restored).__name__, run(restored)],
    "studio": [type(StudioUser("langgraph-studio-user")).__name__, run(StudioUser("langgraph-studio-user"))],
}, sys.stdout)
"""


def _require(*modules: str) -> None:
    """Fail (never skip) without LangGraph Server's packages: the test extra installs them."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: pip install -e '.[test]' (langgraph-cli[inmem])")


def test_resolver_reads_the_users_langgraph_api_builds() -> None:
    _require("langgraph_api")
    done = subprocess.run(
        [sys.executable, "-c", _SERVER_SHAPES], capture_output=True, text=True, timeout=120, env=_server_env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shapes = json.loads(done.stdout)
    assert shapes == {
        "handler_dict": ["ProxyUser", ["alice", "thread-1", "T-1"]],
        "handler_object": ["ProxyUser", ["carol", "thread-1", None]],
        "restored": ["ProxyUser", ["alice", "thread-1", "T-1"]],
        "studio": ["StudioUser", [None, "thread-1", None]],
    }


def _example_agent_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("s3skills_example_agent", EXAMPLE / "agent.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("raw", ["-1", "soon", "nan", "inf", ""])
def test_the_example_refuses_a_shared_catalog_ttl_that_is_not_seconds(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    agent = _example_agent_module()
    monkeypatch.setenv("S3SKILLS_SHARED_CATALOG_TTL", raw)
    if raw == "":  # an empty variable counts as unset
        assert agent._shared_catalog_ttl() == agent.SHARED_CATALOG_TTL
        return
    with pytest.raises(agent.ConfigError, match="S3SKILLS_SHARED_CATALOG_TTL"):
        agent._shared_catalog_ttl()


def test_the_example_takes_the_shared_catalog_ttl_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _example_agent_module()
    monkeypatch.delenv("S3SKILLS_SHARED_CATALOG_TTL", raising=False)
    assert agent._shared_catalog_ttl() == agent.SHARED_CATALOG_TTL
    monkeypatch.setenv("S3SKILLS_SHARED_CATALOG_TTL", "0")
    assert agent._shared_catalog_ttl() == 0.0


def test_the_example_serves_the_channel_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _example_agent_module()
    monkeypatch.setenv("S3SKILLS_BUCKET", "skills")
    monkeypatch.setenv("S3SKILLS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("S3SKILLS_CHANNEL", "production")
    assert agent.backend().config.channel == "production"
    other = _example_agent_module()
    monkeypatch.delenv("S3SKILLS_CHANNEL")
    assert other.backend().config.channel is None


# --- `langgraph dev` with the example --------------------------------------------------------


def _server_env(**extra: str) -> dict[str, str]:
    """This session's (already AWS-isolated) environment, minus what could reach a network."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_SCRUBBED_PREFIXES) and k not in _PROXY_VARS and not k.endswith("_API_KEY")
    }
    env.update(
        LANGGRAPH_CLI_NO_ANALYTICS="1",  # the CLI's usage report
        LANGGRAPH_NO_VERSION_CHECK="true",  # the server's PyPI version check
        LANGSMITH_TRACING="false",
        NO_PROXY="*",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class DevServer:
    """`langgraph dev` for the example in its own process group, on a free loopback port."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.env = env
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = workdir / "langgraph-dev.log"
        self._process: subprocess.Popen[bytes] | None = None

    def config_file(self) -> Path:
        """The example's langgraph.json with its paths made absolute (they are relative to the cwd)."""
        config = json.loads((EXAMPLE / "langgraph.json").read_text())

        def absolute(spec: str) -> str:
            path, _, name = spec.rpartition(":")
            return f"{(EXAMPLE / path).resolve()}:{name}"

        config["dependencies"] = [str((EXAMPLE / dep).resolve()) for dep in config["dependencies"]]
        config["graphs"] = {graph_id: absolute(spec) for graph_id, spec in config["graphs"].items()}
        config["auth"]["path"] = absolute(config["auth"]["path"])
        target = self.workdir / "langgraph.json"
        target.write_text(json.dumps(config))
        return target

    def start(self) -> None:
        command = [sys.executable, "-m", "langgraph_cli", "dev", "--config", str(self.config_file())]
        command += ["--host", LOOPBACK, "--port", str(self.port), "--no-browser", "--no-reload"]
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                cwd=self.workdir,  # the in-memory runtime keeps its files in ./.langgraph_api
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so stop() reaches every child
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with code {self._process.returncode}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        raise RuntimeError(f"langgraph dev did not answer {self.url}/ok in {STARTUP_SECONDS}s\n{self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the server's log, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"<no log: {exc}>"

    def stop(self) -> None:
        """Terminate the process group (SIGKILL if it lingers); idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


class Deployment(SimpleNamespace):
    """The running example: `url`, `bucket`, `s3` (a boto3 client) and `server`."""


def _put(s3: Any, bucket: str, key: str, text: str) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=text.encode())


def _seed_libraries(s3: Any, bucket: str) -> None:
    for user, skill in SKILL.items():
        leaf = skill.rsplit("/", 1)[-1]
        body = f"---\nname: {leaf}\ndescription: The {user} skill.\n---\n# {leaf}\nMARKER-SKILL-{user.upper()}\n"
        _put(s3, bucket, f"users/{user}/skills/{skill}/SKILL.md", body)
        _put(s3, bucket, f"users/{user}/skills/{skill}/references/private.md", f"SECRET-{user.upper()}")
    _put(s3, bucket, "tickets/T-100/brief.md", "TICKET-T-100")
    _put(s3, bucket, "tickets/T-999/brief.md", "TICKET-T-999")


@pytest.fixture(scope="module")
def deployment(moto_server: MotoServer) -> Iterator[Deployment]:
    """The example served by `langgraph dev`, over a fresh bucket with two users' libraries."""
    _require("langgraph_cli", "langgraph_api")
    bucket = make_bucket(moto_server.endpoint_url, unique_bucket_name("lgserver"))
    s3 = make_client(moto_server.endpoint_url)
    _seed_libraries(s3, bucket)
    workdir = Path(tempfile.mkdtemp(prefix="s3skills-lgdev-"))
    env = _server_env(
        S3SKILLS_BUCKET=bucket,
        S3SKILLS_ENDPOINT_URL=moto_server.endpoint_url,
        S3SKILLS_SCRIPTED="1",
        S3SKILLS_DEV_TOKENS=json.dumps(TOKENS),
    )
    server = DevServer(workdir, env)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name in _PROXY_VARS:  # the test's own client talks to loopback directly
                patch.delenv(name, raising=False)
            server.start()
            yield Deployment(url=server.url, bucket=bucket, s3=s3, server=server)
    finally:
        server.stop()
        s3.close()
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def _clients(url: str) -> Iterator[Any]:
    """`client(token, **headers)`: `langgraph_sdk` sync clients on `url`, closed on exit."""
    from langgraph_sdk import get_sync_client

    with contextlib.ExitStack() as clients:

        def client(token: str | None, **headers: str) -> Any:
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            made = get_sync_client(url=url, api_key=None, headers=headers, timeout=RUN_TIMEOUT)
            return clients.enter_context(made)

        yield client


@pytest.fixture
def connect(deployment: Deployment) -> Iterator[Any]:
    """`connect(token, **headers)`: a `langgraph_sdk` sync client, closed after the test."""
    with _clients(deployment.url) as client:
        yield client


def _run(deployment: Deployment, client: Any, thread_id: str, **kwargs: Any) -> dict[str, Any]:
    """One run to its end; the scripted model's JSON report."""
    values = client.runs.wait(
        thread_id, "skills", input={"messages": [{"role": "user", "content": "What can I see?"}]}, **kwargs
    )
    assert isinstance(values, dict), f"{values!r}\n{deployment.server.log_tail()}"
    assert "messages" in values, f"{values!r}\n{deployment.server.log_tail()}"
    report: dict[str, Any] = json.loads(values["messages"][-1]["content"])
    return report


def _result(report: dict[str, Any], path: str) -> str:
    found = [r["result"] for r in report["results"] if path in json.dumps(r["args"])]
    assert found, f"no tool call on {path}: {report['results']}"
    return str(found[-1])


def _object(deployment: Deployment, key: str) -> str | None:
    try:
        body = deployment.s3.get_object(Bucket=deployment.bucket, Key=key)["Body"].read()
    except deployment.s3.exceptions.NoSuchKey:
        return None
    return str(body.decode())


@pytest.mark.parametrize(("user", "token", "other"), [("alice", ALICE_TOKEN, "bob"), ("bob", BOB_TOKEN, "alice")])
def test_each_user_run_sees_only_their_own_skills_and_workspace(
    deployment: Deployment, connect: Any, user: str, token: str, other: str
) -> None:
    client = connect(token)
    thread_id = client.threads.create()["thread_id"]
    _put(deployment.s3, deployment.bucket, f"users/{user}/threads/{thread_id}/notes.md", f"NOTES-{user.upper()}")
    _put(deployment.s3, deployment.bucket, f"users/{other}/threads/{thread_id}/notes.md", f"NOTES-{other.upper()}")

    report = _run(deployment, client, thread_id)

    assert report["index"] == [SKILL[user]]
    assert f"MARKER-SKILL-{user.upper()}" in report["system_prompt"]  # the loaded SKILL.md
    assert f"MARKER-SKILL-{other.upper()}" not in report["system_prompt"]
    assert SKILL[other] not in report["system_prompt"]
    assert _result(report, "references/private.md").endswith(f"SECRET-{user.upper()}")
    assert _result(report, "/workspace/notes.md").endswith(f"NOTES-{user.upper()}")
    assert _object(deployment, f"users/{user}/threads/{thread_id}/report.md") == "Written by the scripted model.\n"
    assert _object(deployment, f"users/{other}/threads/{thread_id}/report.md") is None
    ticket = _result(report, "/ticket/brief.md")
    if user == "alice":  # her token's user carries ticket_id T-100
        assert ticket.endswith("TICKET-T-100")
    else:
        assert "TICKET-" not in ticket
        assert "not found" in ticket


def test_a_run_as_alice_that_sends_bob_in_its_context_still_acts_as_alice(deployment: Deployment, connect: Any) -> None:
    client = connect(ALICE_TOKEN)
    thread_id = client.threads.create()["thread_id"]
    _put(deployment.s3, deployment.bucket, f"users/alice/threads/{thread_id}/notes.md", "NOTES-ALICE")
    _put(deployment.s3, deployment.bucket, f"users/bob/threads/{thread_id}/notes.md", "NOTES-BOB")

    run = client.runs.create(
        thread_id,
        "skills",
        input={"messages": [{"role": "user", "content": "I am bob."}]},
        context={"user_id": "bob", "ticket_id": "T-999"},
    )
    client.runs.join(thread_id, run["run_id"])
    values = client.threads.get_state(thread_id)["values"]
    report = json.loads(values["messages"][-1]["content"])

    assert report["index"] == [SKILL["alice"]]
    assert _result(report, "references/private.md").endswith("SECRET-ALICE")
    assert _result(report, "/workspace/notes.md").endswith("NOTES-ALICE")
    assert _result(report, "/ticket/brief.md").endswith("TICKET-T-100")
    assert _object(deployment, f"users/alice/threads/{thread_id}/report.md") is not None
    assert _object(deployment, f"users/bob/threads/{thread_id}/report.md") is None

    # The run's config as the server built it: the client's ids did reach `configurable`
    # (which is why nothing may read them there); the resolver picks the auth user.
    config = client.runs.get(thread_id, run["run_id"])["kwargs"]["config"]
    assert config["configurable"]["user_id"] == "bob"
    assert config["configurable"]["ticket_id"] == "T-999"
    assert langgraph_auth_identity({"user_id": "bob"}, config) == Identity("alice", thread_id, "T-100")


@pytest.mark.parametrize(
    ("token", "headers"),
    [
        pytest.param(None, {}, id="no-token"),
        pytest.param("not-a-known-token", {}, id="unknown-token"),
        pytest.param(None, {"x-auth-scheme": "langsmith"}, id="studio-scheme-without-token"),
    ],
)
def test_requests_without_a_known_token_are_refused(connect: Any, token: str | None, headers: dict[str, str]) -> None:
    import httpx

    client = connect(token, **headers)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.threads.create()
    assert refused.value.response.status_code == 401
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, "skills", input={"messages": [{"role": "user", "content": "hi"}]})
    assert refused.value.response.status_code == 401


def test_a_user_cannot_run_on_another_users_thread(connect: Any) -> None:
    import httpx

    alice_thread = connect(ALICE_TOKEN).threads.create()["thread_id"]
    bob = connect(BOB_TOKEN)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        bob.runs.wait(alice_thread, "skills", input={"messages": [{"role": "user", "content": "hi"}]})
    assert refused.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as refused:
        bob.threads.get(alice_thread)
    assert refused.value.response.status_code == 404


# --- graph state is client input (issue 22), through `langgraph dev` -------------------------

SHARED_SKILL = "shared/org/skills/guia/"


def _version_of(s3: Any, bucket: str, key: str, text: str) -> tuple[str, str]:
    """Write `text` at `key`; its (ETag, VersionId)."""
    out = s3.put_object(Bucket=bucket, Key=key, Body=text.encode())
    return str(out["ETag"]).strip('"'), str(out["VersionId"])


SHARED_MANIFEST = "shared/org/.s3skills/manifest.json"


def _push_guia(s3: Any, bucket: str, version: str) -> tuple[str, str]:
    """A push of guia's SKILL.md from outside s3skills; dropping the manifest makes the server see it now."""
    pushed = _version_of(s3, bucket, SHARED_SKILL + "SKILL.md", _guia(version))
    s3.delete_object(Bucket=bucket, Key=SHARED_MANIFEST)
    return pushed


def _guia(version: str) -> str:
    return f"---\nname: guia\ndescription: The shared guide.\n---\n# guia\nGUIA-TEXT-{version}\n"


# SLOW_SHARED: the tests on `shared_deployment` start a second `langgraph dev` (~5 s) and run
# threads on it (2-3 s each), so they run in .ci/run's slow step; test_security_state.py pins
# the same hostile state writes and forged pins in-process in the README's command, and the
# tests on `deployment` above keep `langgraph dev` and its tenancy there.


@pytest.fixture(scope="module")
def shared_deployment(moto_server: MotoServer) -> Iterator[Deployment]:
    """The example over a versioned bucket whose only skill is a shared one, pushed twice.

    `versions` holds the (ETag, VersionId) of each SKILL.md push: V0 (withdrawn), then VA.
    """
    _require("langgraph_cli", "langgraph_api")
    bucket = make_bucket(moto_server.endpoint_url, unique_bucket_name("lgstate"))
    s3 = make_client(moto_server.endpoint_url)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    versions = {}
    for version in ("V0", "VA"):
        _put(s3, bucket, SHARED_SKILL + "references/private.md", f"GUIA-REF-{version}")
        versions[version] = _version_of(s3, bucket, SHARED_SKILL + "SKILL.md", _guia(version))
    workdir = Path(tempfile.mkdtemp(prefix="s3skills-lgstate-"))
    env = _server_env(
        S3SKILLS_BUCKET=bucket,
        S3SKILLS_ENDPOINT_URL=moto_server.endpoint_url,
        S3SKILLS_SHARED="org",
        # The tests push to the shared library between runs and expect the next run to see it.
        S3SKILLS_SHARED_CATALOG_TTL="0",
        S3SKILLS_SCRIPTED="1",
        S3SKILLS_DEV_TOKENS=json.dumps(TOKENS),
    )
    server = DevServer(workdir, env)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name in _PROXY_VARS:
                patch.delenv(name, raising=False)
            server.start()
            yield Deployment(url=server.url, bucket=bucket, s3=s3, server=server, versions=versions)
    finally:
        server.stop()
        s3.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _report_only(deployment: Deployment, client: Any, thread_id: str, **input_keys: Any) -> dict[str, Any]:
    """A run whose scripted model only reports what its prompt shows (no load, no tool call)."""
    values = client.runs.wait(
        thread_id, "skills", input={"messages": [{"role": "user", "content": "REPORT-ONLY"}], **input_keys}
    )
    assert isinstance(values, dict), f"{values!r}\n{deployment.server.log_tail()}"
    assert "messages" in values, f"{values!r}\n{deployment.server.log_tail()}"
    report: dict[str, Any] = json.loads(values["messages"][-1]["content"])
    return report


@pytest.fixture
def connect_shared(shared_deployment: Deployment) -> Iterator[Any]:
    """`connect` for the shared-library deployment."""
    with _clients(shared_deployment.url) as client:
        yield client


@pytest.mark.slow  # a second `langgraph dev`: see SLOW_SHARED
def test_the_served_graph_does_not_take_the_skills_keys_as_input(
    shared_deployment: Deployment, connect_shared: Any
) -> None:
    client = connect_shared(BOB_TOKEN)
    assistant = client.assistants.search(graph_id="skills")[0]
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    inputs = set(schemas["input_schema"]["properties"])
    assert "messages" in inputs
    assert not inputs & {"loaded_skills", "current_skill", "skill_versions"}

    # Sent anyway in a run's input, they are dropped: nothing is mounted or shown.
    thread_id = client.threads.create()["thread_id"]
    forged = {"guia": {"version": "x", "files": {"SKILL.md": {"etag": "e", "version_id": "v"}}}}
    report = _report_only(
        shared_deployment, client, thread_id, loaded_skills=["guia"], current_skill="guia", skill_versions=forged
    )
    assert "GUIA-TEXT" not in report["system_prompt"]
    assert "### Loaded skills" not in report["system_prompt"]
    values = client.threads.get_state(thread_id)["values"]
    assert not values.get("loaded_skills")
    assert not values.get("skill_versions")


@pytest.mark.parametrize(
    "values",
    [
        {"loaded_skills": {"__overwrite__": "notalist"}},
        {"loaded_skills": ["../../x", "a/b/c", ""]},
        {"skill_versions": {"__overwrite__": "notadict"}},
        {"current_skill": "../../users/alice/skills/x"},
    ],
    ids=["overwrite-notalist", "bad-ids", "overwrite-notadict", "current-escape"],
)
@pytest.mark.slow  # a second `langgraph dev`: see SLOW_SHARED
def test_a_hostile_update_state_never_breaks_a_served_thread(
    shared_deployment: Deployment, connect_shared: Any, values: dict[str, Any]
) -> None:
    client = connect_shared(BOB_TOKEN)
    thread_id = client.threads.create()["thread_id"]
    _run(shared_deployment, client, thread_id)  # loads guia
    client.threads.update_state(thread_id, values)
    client.threads.get_state(thread_id)  # answers (it was a 500 with "notadict")

    # The next run ends normally (reloading guia when the write dropped it), guia still mounted.
    report = _run(shared_deployment, client, thread_id)
    assert "- guia: /skills/guia/" in report["system_prompt"]
    assert "users/alice" not in json.dumps(report)
    state = client.threads.get_state(thread_id)["values"]
    assert state["loaded_skills"] == ["guia"]
    # An `__overwrite__` skips the reducers, so a raw value may stay in the channel: readers drop it.
    assert set(thread_skills(state).pins) <= {"guia"}


@pytest.mark.slow  # a second `langgraph dev`: see SLOW_SHARED
def test_a_forged_pin_through_update_state_never_changes_another_users_prompt(
    shared_deployment: Deployment, connect_shared: Any
) -> None:
    s3, bucket = shared_deployment.s3, shared_deployment.bucket
    etag_a, vid_a = shared_deployment.versions["VA"]
    etag_0, vid_0 = shared_deployment.versions["V0"]
    alice, bob = connect_shared(ALICE_TOKEN), connect_shared(BOB_TOKEN)

    alice_thread = alice.threads.create()["thread_id"]
    _run(shared_deployment, alice, alice_thread)  # alice loads guia at VA
    pinned = alice.threads.get_state(alice_thread)["values"]["skill_versions"]["guia"]["files"]["SKILL.md"]
    assert pinned == {"etag": etag_a, "version_id": vid_a}
    try:
        _push_guia(s3, bucket, "VC")  # a new push: VA is now an older version

        bob_thread = bob.threads.create()["thread_id"]
        _run(shared_deployment, bob, bob_thread)  # bob loads guia at VC
        forged = {"guia": {"version": "forged", "files": {"SKILL.md": {"etag": etag_a, "version_id": vid_0}}}}
        bob.threads.update_state(bob_thread, {"skill_versions": {"__overwrite__": forged}})
        bob_report = _report_only(shared_deployment, bob, bob_thread)
        assert "GUIA-TEXT-V0" not in bob_report["system_prompt"]
        assert "GUIA-TEXT-VA" not in bob_report["system_prompt"]
        assert "reload it with cargar_habilidad" in bob_report["system_prompt"]

        alice_report = _report_only(shared_deployment, alice, alice_thread)
        assert "GUIA-TEXT-VA" in alice_report["system_prompt"]
        assert "GUIA-TEXT-V0" not in alice_report["system_prompt"]

        # Only a pin whose ETag really is that version's shows it (a version bob's library holds).
        genuine = {"guia": {"version": "old", "files": {"SKILL.md": {"etag": etag_0, "version_id": vid_0}}}}
        bob.threads.update_state(bob_thread, {"skill_versions": genuine})
        assert "GUIA-TEXT-V0" in _report_only(shared_deployment, bob, bob_thread)["system_prompt"]
        alice_report = _report_only(shared_deployment, alice, alice_thread)
        assert "GUIA-TEXT-VA" in alice_report["system_prompt"]
        assert "GUIA-TEXT-V0" not in alice_report["system_prompt"]
    finally:  # the other tests of this module expect VA current
        _push_guia(s3, bucket, "VA")
