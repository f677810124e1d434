"""`/metrics` in multiprocess mode while a worker starts (`s3skills.serve.metrics`).

The Prometheus client creates a worker's file empty and sizes it a moment later; a scrape that
reads the folder in between used to fail on the empty file (`struct.error`, seen in the slow
balancer test when a replica's workers were restarted). The figures here are written by a real
second process through `ServerMetrics`, the way a worker writes them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from s3skills.serve.metrics import ServerMetrics

WORKER = """
from s3skills.serve.metrics import ServerMetrics
metrics = ServerMetrics(("load_skill",))
metrics.calls.labels("tools/call", "load_skill", "ok").inc(3)
"""


def _calls(text: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "s3skills_mcp_calls_total" and sample.labels.get("tool") == "load_skill":
                total += sample.value
    return total


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files of one worker process that counted 3 calls (written once for the module)."""
    where = tmp_path_factory.mktemp("worker")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(where)}
    subprocess.run([sys.executable, "-c", WORKER], env=env, check=True, timeout=60)
    assert list(where.glob("counter_*.db"))
    return where


@pytest.fixture
def folder(written: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's multiprocess folder, holding a copy of the worker's files."""
    for file in written.iterdir():
        shutil.copy(file, tmp_path / file.name)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    return tmp_path


def test_a_scrape_merges_the_files_every_worker_wrote(folder: Path) -> None:
    body, content_type = ServerMetrics().exposition()
    assert content_type.startswith("text/plain")
    assert _calls(body.decode()) == 3


def test_a_scrape_while_a_worker_is_creating_its_file_answers_with_the_other_workers_figures(folder: Path) -> None:
    (folder / "counter_999999.db").touch()  # created, not yet sized: the moment the client leaves open
    (folder / "histogram_999999.db").write_bytes(b"\0\0")
    body, _ = ServerMetrics().exposition()
    assert _calls(body.decode()) == 3
