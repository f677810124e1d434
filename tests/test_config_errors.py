"""Configuration errors fail fast and say the fix; transient faults keep "try again later".

On moto (and a FaultProxy in front of it for 403 and 503 answers): an agent run on a
bucket that does not exist, or whose store denies access, raises the configuration error
instead of telling the model the index is "unavailable right now"; a file tool on a missing
bucket says the storage is misconfigured; the CLI exits 1 with one line naming the fix. A
transient fault (503 SlowDown on every request) still gives the model the "try again
later" note and the run completes.
"""

from __future__ import annotations

from typing import Any

import pytest

from s3skills import S3Backend, create_skills_agent
from s3skills.cli import main
from s3skills.errors import AccessDenied, BucketNotFound, ConfigurationError, CredentialsError, StoreUnavailable
from s3skills.testing import FaultProxy, skill_md
from s3skills.testing.scripted import ScriptedChatModel


def _run(backend: S3Backend, model: ScriptedChatModel) -> dict[str, Any]:
    agent = create_skills_agent(model, backend, system_prompt="You help.")
    result: dict[str, Any] = agent.invoke(
        {"messages": [{"role": "user", "content": "hola"}]},
        context={"user_id": "ana"},
        config={"configurable": {"thread_id": "t-1"}},
    )
    return result


def test_the_error_table_tells_configuration_from_transient() -> None:
    assert issubclass(BucketNotFound, ConfigurationError)
    assert issubclass(AccessDenied, ConfigurationError)
    assert issubclass(CredentialsError, ConfigurationError)
    assert not issubclass(StoreUnavailable, ConfigurationError)
    assert "create it" in BucketNotFound("list: the store answered NoSuchBucket").fix
    assert "AWS_ACCESS_KEY_ID" in CredentialsError("list: no AWS credentials were found").fix
    assert "check the access key" in CredentialsError("list: the store answered InvalidAccessKeyId").fix


def test_an_agent_run_on_a_missing_bucket_raises_the_fix(moto_endpoint: str) -> None:
    backend = S3Backend("no-such-bucket", endpoint_url=moto_endpoint)
    try:
        model = ScriptedChatModel(steps=[])
        with pytest.raises(BucketNotFound) as err:
            _run(backend, model)
        assert "create it" in err.value.fix
        assert model.system_prompts() == []  # the model was never called
    finally:
        backend.close()


def test_an_agent_run_the_store_denies_raises_access_denied(bucket: str, moto_endpoint: str) -> None:
    with FaultProxy(moto_endpoint) as proxy:
        proxy.inject("access_denied", count=None)
        backend = S3Backend(bucket, endpoint_url=proxy.url)
        try:
            with pytest.raises(AccessDenied):
                _run(backend, ScriptedChatModel(steps=[]))
        finally:
            backend.close()


def test_a_transient_fault_still_tells_the_model_to_try_again(bucket: str, moto_endpoint: str) -> None:
    with FaultProxy(moto_endpoint) as proxy:
        proxy.inject("slowdown", count=None)
        backend = S3Backend(bucket, endpoint_url=proxy.url, retry_attempts=1)
        try:
            model = ScriptedChatModel(steps=[])
            _run(backend, model)
            assert "unavailable right now" in model.system_prompts()[0]
            assert "Try again later" in model.system_prompts()[0]
        finally:
            backend.close()


def test_a_file_tool_on_a_missing_bucket_says_misconfigured(moto_endpoint: str) -> None:
    backend = S3Backend("no-such-bucket", endpoint_url=moto_endpoint, user_id="ana", thread_id="t-1")
    try:
        result = backend.read("/workspace/notes.md")
        assert result.error is not None
        assert "misconfigured" in result.error
        assert "create it" in result.error
        assert "not found" not in result.error
    finally:
        backend.close()


def test_the_cli_names_the_fix_for_a_missing_bucket_and_a_denied_one(
    bucket: str, moto_endpoint: str, s3_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--bucket", "no-such-bucket", "--endpoint-url", moto_endpoint, "--user", "ana", "list"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "does not exist" in err
    assert "--create-bucket" in err
    s3_client.put_object(Bucket=bucket, Key="users/ana/skills/pdf/SKILL.md", Body=skill_md("pdf", "Reads PDFs."))
    with FaultProxy(moto_endpoint) as proxy:
        proxy.inject("access_denied", count=None)
        assert main(["--bucket", bucket, "--endpoint-url", proxy.url, "--user", "ana", "list"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "access denied" in err
