"""The Ray executor writes exactly the workspace the local executor writes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests._ingest_speed_subset import KB_FILES
from tests.conftest import RAY_WORKER_KEY_ENV, SAMPLE_KB, SAMPLE_RAW, workspace_snapshot

# one worker runs this module and the other Ray tests, one after the other (pytest-xdist
# --dist loadgroup): the tests that ask for shared_ray (conftest) run on one Ray, started once;
# they come first, so that it is shut down before the test that has cirrus start a Ray of its own
pytestmark = pytest.mark.xdist_group("ray")

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'cirrus[ray]'")


@pytest.fixture(autouse=True)
def _no_usage_report(monkeypatch):
    # cirrus' Ray executor os.environ.setdefault()s this for good; set here first,
    # it is undone after each test (a CLI run in-process reaches that code too)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")


# Part of the sample input, all of its formats (a JSON list, an OpenAI chat
# export, JSONL, gzipped JSONL in a sub-folder), to keep each Ray run short:
# Ray and the local executor run the same stages, what is compared is how
# the executors split, order and gather the work.
SMALL_RAW_FILES = ("billing.json", "chat_export.json", "sms.jsonl", "archive/older.jsonl.gz")


@pytest.fixture(scope="module")
def raw_with_cross_file_duplicates(tmp_path_factory) -> Path:
    """Part of the sample input plus a later file repeating one ticket of an
    earlier one: a duplicate the Ray readers (one task per file) cannot see alone."""
    raw = tmp_path_factory.mktemp("raw")
    for name in SMALL_RAW_FILES:
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE_RAW / name, raw / name)
    first_line = next(line for line in (raw / "sms.jsonl").read_text().splitlines() if line.strip())
    (raw / "zz_repeat.jsonl").write_text(first_line + "\n")
    return raw


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> Path:
    """Three of the sample's knowledge documents: every process that settles
    tickets (each Ray actor) de-identifies all of them before its first ticket."""
    folder = tmp_path_factory.mktemp("kb")
    for name in KB_FILES:
        shutil.copy(SAMPLE_KB / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def local_workspace(tmp_path_factory, raw_with_cross_file_duplicates, kb, pipeline_config) -> dict[str, bytes]:
    """What the local executor writes for ``raw_with_cross_file_duplicates``
    (one process: test_ingest_e2e shows serial and parallel runs agree)."""
    workspace = tmp_path_factory.mktemp("local") / "ws"
    _ingest(raw_with_cross_file_duplicates, kb, workspace, pipeline_config, "local", jobs=1)
    return workspace_snapshot(workspace)


def _ingest(raw: Path, kb: Path, workspace: Path, pipeline_config, executor: str, jobs: int = 2) -> dict:
    from cirrus.ingest.run import IngestOptions, run_ingest

    options = IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, kb_dir=kb,
                            jobs=jobs, executor=executor, progress=False)
    return run_ingest(options).manifest


# --- on a Ray that cirrus finds running (shared_ray: started once for these tests) ---


def test_one_worker_gives_the_same_workspace_and_leaves_a_ray_it_did_not_start_running(
        tmp_path, shared_ray, pipeline_config, raw_with_cross_file_duplicates, kb, local_workspace):
    # one actor on a Ray this process initialised (as a user's own Ray or a cluster is):
    # cirrus uses it and does not shut it down; two actors on a Ray of cirrus' own: the last tests
    node = shared_ray.get_runtime_context().get_node_id()
    _ingest(raw_with_cross_file_duplicates, kb, tmp_path / "one", pipeline_config, "ray", jobs=1)
    assert workspace_snapshot(tmp_path / "one") == local_workspace
    assert shared_ray.is_initialized() and shared_ray.get_runtime_context().get_node_id() == node
    assert shared_ray.get(shared_ray.put("still running")) == "still running"


def _annotated(tmp_path: Path, pipeline_config, base_url: str, key_env: str, raw: Path):
    from cirrus.ingest.pipeline import AnnotatorSpec
    from cirrus.ingest.run import IngestOptions
    from cirrus.llm.providers import Endpoint

    # one actor: how an actor's error reaches the driver does not depend on how many
    # there are (each actor starts a process that loads the models; the CLI test
    # below settles tickets on two)
    return IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config, jobs=1,
                         executor="ray", progress=False, annotator=AnnotatorSpec(Endpoint("annot", base_url, key_env)))


def test_a_refused_annotator_key_stops_the_ray_run_with_the_same_error(tmp_path, shared_ray, pipeline_config,
                                                                      raw_with_cross_file_duplicates):
    from cirrus.ingest.run import run_ingest
    from cirrus.llm.providers import ModelAuthError
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI([401] * 100) as server:
        with pytest.raises(ModelAuthError, match=f"HTTP 401.*{RAY_WORKER_KEY_ENV}"):
            run_ingest(_annotated(tmp_path, pipeline_config, server.base_url, RAY_WORKER_KEY_ENV,
                                  raw_with_cross_file_duplicates))
    # a worker stops its batch at the first refusal: one request per batch at most, no retries
    assert 1 <= len(server.requests) <= len([p for p in raw_with_cross_file_duplicates.rglob("*") if p.is_file()])
    assert not (tmp_path / "ws" / "tickets" / "tasks.jsonl").exists()
    assert shared_ray.is_initialized()  # an error does not shut down a Ray cirrus did not start either


def test_a_key_the_ray_workers_lack_stops_the_run_and_says_where_it_is_missing(tmp_path, shared_ray, pipeline_config,
                                                                                monkeypatch, raw_with_cross_file_duplicates):
    from cirrus.ingest.run import run_ingest
    from cirrus.llm.providers import EndpointError
    from tests.fake_openai import FakeOpenAI

    monkeypatch.setenv("CIRRUS_KEY_ONLY_ON_THE_DRIVER", "sk-test-driver-only-000000000")  # after ray.init
    with FakeOpenAI() as server:
        with pytest.raises(EndpointError, match="CIRRUS_KEY_ONLY_ON_THE_DRIVER.*Ray workers"):
            run_ingest(_annotated(tmp_path, pipeline_config, server.base_url, "CIRRUS_KEY_ONLY_ON_THE_DRIVER",
                                  raw_with_cross_file_duplicates))
    assert server.requests == []
    assert shared_ray.is_initialized()


# --- on a Ray that cirrus starts (no shared_ray: it is not running here) ---


def test_ray_and_local_executors_write_identical_workspaces(tmp_path, raw_with_cross_file_duplicates, kb,
                                                            local_workspace):
    """`cirrus ingest --executor ray` starts a Ray of its own (no --ray-address),
    settles the tickets on two actors, finds the duplicate across files,
    writes what the local executor writes and shuts its Ray down."""
    from typer.testing import CliRunner

    from cirrus.cli import app

    assert not ray.is_initialized()  # shared_ray runs only for the tests that ask for it
    workspace = tmp_path / "ray"
    result = CliRunner().invoke(app, ["ingest", str(raw_with_cross_file_duplicates), "--kb", str(kb), "-w",
                                      str(workspace), "--executor", "ray", "--jobs", "2", "-q"])
    assert result.exit_code == 0, result.output[-2000:]
    assert not ray.is_initialized()
    manifest = json.loads((workspace / "tickets" / "manifest.json").read_text())
    assert manifest["counts"]["tasks"] > 10
    duplicates = [q for q in manifest["quarantined"] if q["reason"].startswith("duplicate ticket_id")]
    assert "zz_repeat.jsonl" in [q["source"] for q in duplicates]
    assert workspace_snapshot(workspace) == local_workspace


def test_missing_ray_is_a_clear_error(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cirrus.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    result = CliRunner().invoke(app, ["ingest", str(SAMPLE_RAW), "-w", str(tmp_path), "--executor", "ray", "-q"])
    assert result.exit_code == 2
    assert "pip install 'cirrus[ray]'" in result.output
    assert not (tmp_path / "tickets" / "tasks.jsonl").exists()


def test_unknown_executor_is_refused(tmp_path):
    from typer.testing import CliRunner

    from cirrus.cli import app

    result = CliRunner().invoke(app, ["ingest", str(SAMPLE_RAW), "-w", str(tmp_path), "--executor", "spark"])
    assert result.exit_code == 2
    assert "--executor" in result.output
