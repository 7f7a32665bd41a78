from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TAU_BENCH = SHARED_DATA / "tau-bench-airline" / "gpt-4o-airline.json"
PII_SET = SHARED_DATA / "presidio-synth" / "synth_dataset_v2.json"
ABCD = SHARED_DATA / "abcd-sample" / "abcd_sample.json"
SAMPLE_RAW = REPO / "tickets" / "raw"
SAMPLE_KB = REPO / "tickets" / "kb"


def needs_shared(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} is absent (../shared/data is not checked out beside the repo)")


@pytest.fixture(scope="session")
def pipeline_config():
    from cirrus.config import load_pipeline

    return load_pipeline()


@pytest.fixture(scope="session")
def deidentifier(pipeline_config):
    from cirrus.ingest.deid.deidentify import Deidentifier

    return Deidentifier(pipeline_config.deid)


def sample_with_baseline_runs(workspace: Path, pipeline_config) -> Path:
    """Ingest the sample workspace into ``workspace`` and evaluate both
    offline baselines on it (runs ``oracle`` and ``retrieval``, K = 2)."""
    from typer.testing import CliRunner

    from cirrus.cli import app
    from cirrus.ingest.run import IngestOptions, run_ingest

    run_ingest(IngestOptions(raw_path=SAMPLE_RAW, workspace=workspace, pipeline=pipeline_config, kb_dir=SAMPLE_KB,
                             progress=False))
    runner = CliRunner()
    for model, run_id in (("baseline:oracle", "oracle"), ("baseline:retrieval", "retrieval")):
        result = runner.invoke(app, ["eval", "--model", model, "-w", str(workspace), "--run-id", run_id,
                                     "--pass-k", "2", "-q"])
        assert result.exit_code == 0, result.output
    return workspace


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
