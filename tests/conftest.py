from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TAU_BENCH = SHARED_DATA / "tau-bench-airline" / "gpt-4o-airline.json"
PII_SET = SHARED_DATA / "presidio-synth" / "synth_dataset_v2.json"
ABCD = SHARED_DATA / "abcd-sample" / "abcd_sample.json"
SAMPLE_RAW = REPO / "tickets" / "raw"
SAMPLE_KB = REPO / "tickets" / "kb"


# --------------------------------------------------------------------------
# CI: no silent skips, reproducible property tests
# --------------------------------------------------------------------------


def in_ci() -> bool:
    """Whether the suite runs in CI (CI sets ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the current test for ``reason`` -- except in CI, where a missing
    prerequisite (../shared, chromium) must not turn a test into a silent
    skip: there the test fails, with the same reason."""
    if in_ci():
        pytest.fail(f"{reason} [CI=true: a missing prerequisite fails instead of skipping]", pytrace=False)
    pytest.skip(reason)


def shared_missing_reason(path: Path) -> str:
    return f"{path} is absent (../shared/data is not checked out beside the repo)"


def needs_shared(path: Path):
    """Mark a test that reads ``path`` under ../shared/data: skipped when it is
    absent, failed when it is absent in CI (see :func:`skip_or_fail`)."""
    return pytest.mark.shared_data(path)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: a run without xdist (-p no:xdist) does not know it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the test command's): one worker per core, plus one.  A
    quarter of the suite's time is spent waiting on child processes (CLI
    runs, chromium, Ray) and local servers, so a worker per core leaves the
    cores idle that long: on 2 cores, 3 workers ran the suite in 242 s, 2 in
    268 s and 4 in 255 s (README, "Set-up")."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "shared_data(path): needs that file under ../shared/data (skipped when "
                                       "absent; failed when absent in CI)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep a module whose tests share a module-scoped fixture on one xdist
    worker (``--dist loadgroup``: an ``xdist_group`` named after the module),
    so that the fixture -- often an ingest or an evaluation -- is built once,
    not once on each worker.  A test that names its own group keeps it.
    Groups go out before single tests (xdist orders work units by size), so a
    large module starts early instead of running alone at the end."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        definitions = info.name2fixturedefs.values() if info is not None else ()
        if any(chain and chain[-1].scope == "module" for chain in definitions):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("shared_data"):
        for path in mark.args:
            if not Path(path).exists():
                skip_or_fail(shared_missing_reason(Path(path)))


# Property tests draw new random examples on every run unless derandomized:
# in CI every run draws the same examples (a failure reproduces), never times
# out on a slow runner, and prints the blob that replays a failure.  Explicit
# @settings(...) of a test inherit what they leave out from the profile loaded
# here (conftest is imported before the test modules).
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
if in_ci():
    settings.load_profile("ci")


# --------------------------------------------------------------------------
# Shared fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pipeline_config():
    from cirrus.config import load_pipeline

    return load_pipeline()


@pytest.fixture(scope="session")
def deidentifier(pipeline_config):
    from cirrus.ingest.deid.deidentify import Deidentifier

    return Deidentifier(pipeline_config.deid)


def ingest_sample(workspace: Path, pipeline_config) -> dict:
    """Ingest the sample input (tickets/raw, --kb tickets/kb) into
    ``workspace``; the manifest."""
    from cirrus.ingest.run import IngestOptions, run_ingest

    return run_ingest(IngestOptions(raw_path=SAMPLE_RAW, workspace=workspace, pipeline=pipeline_config,
                                    kb_dir=SAMPLE_KB, progress=False)).manifest


def evaluate_baselines(workspace: Path) -> Path:
    """Evaluate both offline baselines on an ingested ``workspace`` (runs
    ``oracle`` and ``retrieval``, K = 2)."""
    from typer.testing import CliRunner

    from cirrus.cli import app

    runner = CliRunner()
    for model, run_id in (("baseline:oracle", "oracle"), ("baseline:retrieval", "retrieval")):
        result = runner.invoke(app, ["eval", "--model", model, "-w", str(workspace), "--run-id", run_id,
                                     "--pass-k", "2", "-q"])
        assert result.exit_code == 0, result.output
    return workspace


def sample_with_baseline_runs(workspace: Path, pipeline_config) -> Path:
    """Ingest the sample workspace into ``workspace`` and evaluate both
    offline baselines on it (runs ``oracle`` and ``retrieval``, K = 2).
    Tests use the shared ``sample_runs`` fixture instead (built once)."""
    ingest_sample(workspace, pipeline_config)
    return evaluate_baselines(workspace)


def copy_workspace(source: Path, target: Path) -> Path:
    """A private copy of a shared workspace, for a test that writes to it."""
    shutil.copytree(source, target)
    return target


def workspace_snapshot(workspace: Path) -> dict[str, bytes]:
    """Every file of a workspace by relative path, the manifest without its
    creation time: what two ingests of the same input must agree on."""
    files = {}
    for path in sorted(p for p in workspace.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "manifest.json":
            manifest = json.loads(data)
            manifest.pop("created_at")
            data = json.dumps(manifest, sort_keys=True).encode()
        files[path.relative_to(workspace).as_posix()] = data
    return files


def _unchanged(workspace: Path, before: dict[str, bytes], fixture: str) -> None:
    after = workspace_snapshot(workspace)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, (f"a test wrote into the shared {fixture} workspace (use copy_workspace or "
                         f"{fixture}_copy): {changed[:10]}")


# Built once per test process (pytest-xdist: once per worker) and shared:
# read only.  A test that writes gets its own copy (``*_copy`` fixtures, or
# copy_workspace for a module-scoped fixture); a shared workspace a test
# changed fails the session at teardown.


@pytest.fixture(scope="session")
def sample_ingest(tmp_path_factory) -> Path:
    """The sample workspace: tickets/raw ingested with --kb tickets/kb.

    That is the workspace committed in the repository (tasks, manifest,
    cassettes): test_ingest_e2e's byte-for-byte test ingests tickets/raw
    and fails, naming the files, when the committed one is not what ingest
    writes, so the other tests can start from a copy of it instead of
    loading the models and ingesting again in every test process."""
    workspace = tmp_path_factory.mktemp("sample-ingest") / "ws"
    (workspace / "tickets").mkdir(parents=True)
    for name in ("tasks.jsonl", "manifest.json"):
        shutil.copy2(REPO / "tickets" / name, workspace / "tickets" / name)
    shutil.copytree(REPO / "tool_mocks", workspace / "tool_mocks")
    before = workspace_snapshot(workspace)
    yield workspace
    _unchanged(workspace, before, "sample_ingest")


@pytest.fixture(scope="session")
def sample_runs(tmp_path_factory, sample_ingest) -> Path:
    """The sample workspace with both offline baselines evaluated on it
    (runs ``oracle`` and ``retrieval``, K = 2)."""
    workspace = copy_workspace(sample_ingest, tmp_path_factory.mktemp("sample-runs") / "ws")
    evaluate_baselines(workspace)
    before = workspace_snapshot(workspace)
    yield workspace
    _unchanged(workspace, before, "sample_runs")


@pytest.fixture(scope="session")
def tau_bench_ingest(tmp_path_factory, pipeline_config) -> tuple[Path, dict]:
    """The tau-bench airline transcripts (../shared/data) ingested with two
    worker processes: the workspace (read only) and its manifest.  Tests
    that use it share the ``tau-bench`` xdist group, so it is built once."""
    from cirrus.ingest.run import IngestOptions, run_ingest

    if not TAU_BENCH.exists():
        skip_or_fail(shared_missing_reason(TAU_BENCH))
    workspace = tmp_path_factory.mktemp("tau-bench") / "ws"
    manifest = run_ingest(IngestOptions(raw_path=TAU_BENCH, workspace=workspace, pipeline=pipeline_config, jobs=2,
                                        progress=False)).manifest
    before = workspace_snapshot(workspace)
    yield workspace, manifest
    _unchanged(workspace, before, "tau_bench_ingest")


@pytest.fixture
def sample_ingest_copy(sample_ingest, tmp_path) -> Path:
    """This test's own copy of ``sample_ingest`` (``tmp_path / "ws"``)."""
    return copy_workspace(sample_ingest, tmp_path / "ws")


@pytest.fixture
def sample_runs_copy(sample_runs, tmp_path) -> Path:
    """This test's own copy of ``sample_runs`` (``tmp_path / "ws"``)."""
    return copy_workspace(sample_runs, tmp_path / "ws")


# --------------------------------------------------------------------------
# One local Ray for the Ray tests (xdist group "ray")
# --------------------------------------------------------------------------

# A fake key in the environment of every process of the shared Ray: its workers
# inherit the environment it starts with, not what a test sets later.
RAY_WORKER_KEY_ENV = "CIRRUS_TEST_KEY"
_RAY_FIXTURE = "shared_ray"
_running_ray: list[pytest.MonkeyPatch] = []  # the environment set for the shared Ray while it runs


@pytest.fixture
def shared_ray():
    """A local Ray with 2 CPUs, already initialised when cirrus' Ray executor
    runs -- as a user's own Ray, or a cluster they connected to, is: cirrus
    runs on it and leaves it running.  Started by the first test that asks
    for it, kept for the tests right after it that ask for it too (the "ray"
    xdist group runs them one after the other), shut down after the last of
    them (``pytest_runtest_teardown``): one Ray start -- seconds, and its
    first run's cold worker processes -- for the group, not one per test.
    A test that does not ask for it never sees it running.  The ``ray``
    module."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'cirrus[ray]'")
    if not _running_ray:
        assert not ray.is_initialized(), "a Ray that shared_ray did not start is running in this test process"
        env = pytest.MonkeyPatch()
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")  # offline: no usage report
        env.setenv(RAY_WORKER_KEY_ENV, "sk-test-not-a-real-key-0000000000")
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        except BaseException:
            env.undo()
            raise
        _running_ray.append(env)
    return ray


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield  # the test's fixtures are torn down
    if _running_ray and (nextitem is None or _RAY_FIXTURE not in getattr(nextitem, "fixturenames", ())):
        import ray

        env = _running_ray.pop()
        try:
            ray.shutdown()
        finally:
            env.undo()
