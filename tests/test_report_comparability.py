"""`cirrus report` with several runs says when they are not comparable: runs
that differ in judge or fluency model, prompt hashes, K, dataset or Cirrus
version, or a self-judged run, are named in the terminal, in report.json's
``warnings`` and at the top of report.html; pass@K / pass^K cells of runs
with different K each name their K."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.report.command import report_command
from cirrus.report.comparability import comparability_warnings
from tests.conftest import copy_workspace


def _eval(workspace: Path, model: str, run_id: str, k: int) -> None:
    result = CliRunner().invoke(app, ["eval", "--model", model, "-w", str(workspace), "--run-id", run_id,
                                      "--pass-k", str(k), "-q"])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def mixed_k(tmp_path_factory, sample_runs) -> Path:
    """The sample workspace with oracle runs of K = 2 (``oracle``) and K = 1
    (``k1``) and a retrieval run of K = 2 (``retrieval``): the shared
    ``sample_runs`` (its two K = 2 runs, evaluated once per test process)
    and one more evaluation."""
    workspace = copy_workspace(sample_runs, tmp_path_factory.mktemp("comparability") / "ws")
    _eval(workspace, "baseline:oracle", "k1", 1)
    return workspace


def _report(workspace: Path, *run_ids: str, extra: tuple[str, ...] = ()):
    out = workspace / "out" / "+".join(run_ids + extra)
    result = CliRunner().invoke(app, ["report", *run_ids, "-w", str(workspace), "--bootstrap", "0",
                                      "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return result, manifest, (out / "report.html").read_text(encoding="utf-8")


def _k_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "differ in K" in w]


def test_runs_of_different_k_are_named_everywhere(mixed_k):
    result, manifest, html = _report(mixed_k, "oracle", "k1")
    (warning,) = _k_warnings(manifest["warnings"])
    assert "oracle: 2" in warning and "k1: 1" in warning and "labelled per run" in warning
    assert " ".join(warning.split()) in " ".join(result.output.split())  # the terminal (stderr) too
    top = html[:html.index('<section id="leaderboard">')]
    assert "differ in K" in top
    assert [r["k"] for r in manifest["runs"]] == [2, 1]
    # every pass@K and pass^K cell names its run's K; the chart leaves them out
    leaderboard = html[html.index('<section id="leaderboard">'):html.index("</table>")]
    assert leaderboard.count('<span class="muted">(K=2)</span>') == 2
    assert leaderboard.count('<span class="muted">(K=1)</span>') == 2
    assert "the runs differ in K" in html
    # the terminal table labels both columns per run as well
    assert result.output.count("(K=2)") >= 2 and result.output.count("(K=1)") >= 2


def test_one_k_for_every_run_is_said(mixed_k):
    _, manifest, _ = _report(mixed_k, "oracle", "k1", extra=("--k", "1"))
    (warning,) = _k_warnings(manifest["warnings"])
    assert "K=1 for every run (--k)" in warning


def test_comparable_runs_have_no_warning(mixed_k):
    result, manifest, html = _report(mixed_k, "oracle", "retrieval")
    assert manifest["warnings"] == []
    assert "warning" not in result.output
    assert 'class="warn' not in html
    assert all(run["self_judged"] is False for run in manifest["runs"])


def _edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    path.write_text(json.dumps(data), encoding="utf-8")


def test_judge_prompt_version_and_self_judging_are_named(mixed_k, tmp_path):
    workspace = copy_workspace(mixed_k, tmp_path / "ws")
    run = workspace / "reports" / "retrieval"
    # retrieval as an LLM-judged, self-judged run of another Cirrus version
    _edit(run / "summary.json", judge="llm-coverage:m", fluency="llm-fluency:m", cirrus_version="0.0.1",
          self_judged=True)
    _edit(run / "run.json", self_judged=True,
          fingerprint={"judge_role": {"model": "m", "prompt_sha256": "a" * 64},
                       "agent_role": {"model": "m", "prompt_sha256": "b" * 64}})
    _edit(workspace / "reports" / "oracle" / "run.json",
          fingerprint={"agent_role": {"model": "m", "prompt_sha256": "c" * 64}})
    result = report_command(["oracle", "retrieval"], workspace, tmp_path / "out", 0)
    warnings = result["warnings"]
    text = "\n".join(warnings)
    judge = next(w for w in warnings if "differ in judge model" in w)
    assert "oracle: local" in judge and "retrieval: llm-coverage:m" in judge
    assert any("differ in fluency model" in w for w in warnings)
    version = next(w for w in warnings if "differ in Cirrus version" in w)
    assert "retrieval: 0.0.1" in version
    agent_prompt = next(w for w in warnings if "differ in agent prompt hash" in w)
    assert "cccccccccccc" in agent_prompt and "bbbbbbbbbbbb" in agent_prompt
    # a prompt hash only one run recorded is not a difference
    assert "judge prompt hash" not in text
    assert any("'retrieval' is self-judged" in w for w in warnings)
    manifest = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert manifest["warnings"] == warnings
    assert {r["run_id"]: r["self_judged"] for r in manifest["runs"]} == {"oracle": False, "retrieval": True}
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    top = html[:html.index('<section id="leaderboard">')]
    assert "self-judged-banner" in top and "Self-judged: retrieval" in top
    assert "differ in judge model" in top
    assert '<span class="self-judged">(self-judged)</span>' in html


def test_a_single_self_judged_run_is_flagged(mixed_k, tmp_path):
    workspace = copy_workspace(mixed_k, tmp_path / "ws")
    _edit(workspace / "reports" / "k1" / "summary.json", self_judged=True)
    result = report_command(["k1"], workspace, tmp_path / "out", 0)
    assert [w for w in result["warnings"] if "self-judged" in w] and not _k_warnings(result["warnings"])
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Self-judged: k1" in html[:html.index('<section id="leaderboard">')]


def test_dataset_difference_is_named():
    class FakeRun:
        def __init__(self, run_id: str, dataset: str) -> None:
            self.run_id, self.dataset, self.k, self.model = run_id, dataset, 1, "m"
            self.summary = {"judge": "local", "fluency": "local", "cirrus_version": "1"}
            self.config = {"fingerprint": {"dataset": dataset}}
            self.self_judged = False

    (warning,) = comparability_warnings([FakeRun("a", "d1"), FakeRun("b", "d2")])
    assert "dataset hash" in warning and "a: d1" in warning and "b: d2" in warning
    assert "tasks they have in common" in warning
    assert comparability_warnings([FakeRun("a", "d1"), FakeRun("b", "d1")]) == []


def test_judge_input_limits_and_jump_prompts_are_compared(mixed_k, tmp_path):
    workspace = copy_workspace(mixed_k, tmp_path / "ws")
    limits = {"candidate_chars": 8000, "reference_chars": 8000, "history_chars": 24000}
    for run_id, cap, later in (("oracle", 8000, "d" * 64), ("retrieval", 2000, "e" * 64)):
        _edit(workspace / "reports" / run_id / "run.json", fingerprint={"judge_role": {
            "model": "m", "prompt_sha256": "a" * 64, "later_prompt_sha256": later,
            "input_limits": {**limits, "candidate_chars": cap}}})
    warnings = report_command(["oracle", "retrieval"], workspace, tmp_path / "out", 0)["warnings"]
    cut = next(w for w in warnings if "differ in judge input limits" in w)
    assert '"candidate_chars": 2000' in cut and '"candidate_chars": 8000' in cut
    assert any("differ in judge logical-jump prompt hash" in w for w in warnings)
    assert not any("differ in judge prompt hash" in w for w in warnings)
