"""Usage records reach OpenTelemetry as spans when the API is installed (the `otel` extra)."""

from __future__ import annotations

from typing import Any

import opentelemetry.sdk.trace as sdk_trace  # the test extra has the SDK
import opentelemetry.sdk.trace.export as export
import opentelemetry.sdk.trace.export.in_memory_span_exporter as in_memory
import pytest

from s3skills.skills.usage import log_usage, reset_usage


@pytest.fixture(scope="module")
def spans() -> Any:
    from opentelemetry import trace

    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # once per process: the global provider cannot be replaced
    # Nothing else in the suite installs one; if something does, these tests cannot see spans.
    assert trace.get_tracer_provider() is provider, "another tracer provider was installed earlier in this process"
    return exporter


def test_a_load_becomes_a_span_with_the_skill_version_and_who(spans: Any) -> None:
    spans.clear()
    reset_usage()
    log_usage("skill_load", skill="pdf", user="ana", thread="t1", duration_ms=12.5, outcome="ok", version="abc123")
    log_usage("script_run", skill="pdf", user="ana", thread="t1", duration_ms=3, outcome="timeout", version="abc123")
    load, script = spans.get_finished_spans()
    assert load.name == "s3skills.skill_load"
    assert dict(load.attributes or {}) == {
        "s3skills.event": "skill_load",
        "s3skills.skill": "pdf",
        "s3skills.version": "abc123",
        "s3skills.user_id": "ana",
        "s3skills.thread_id": "t1",
        "s3skills.duration_ms": 12.5,
        "s3skills.outcome": "ok",
    }
    assert load.end_time is not None
    assert load.start_time is not None
    assert load.end_time - load.start_time == 12_500_000
    assert script.name == "s3skills.script_run"
    assert script.status.status_code.name == "ERROR"
