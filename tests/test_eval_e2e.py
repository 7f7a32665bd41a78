"""`cirrus eval` end to end against a local OpenAI-compatible server that
plays the agent, the judge and the fluency checker by rule; the metrics are
checked against hand-computed expectations."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY = "sk-cirrus-e2e-secret-0123456789abcdef"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path, [make_task("T-plain", False), make_task("T-tool", True)])


def rule(body: dict) -> Reply | str:
    answer = judge_or_fluency(body)
    if answer is not None:
        return answer
    return agent_reply(body["model"], body)


def _eval(workspace: Path, server: ChatServer, model: str, *extra: str) -> dict:
    result = CliRunner().invoke(app, [
        "eval", "--model", model, "--base-url", server.base_url, "--api-key-env", "CIRRUS_E2E_KEY",
        "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", model, "-w", str(workspace), "-q", *extra,
    ], env={"CIRRUS_E2E_KEY": KEY})
    assert result.exit_code == 0, result.output
    return json.loads((workspace / "reports" / model / "summary.json").read_text())


EXPECTED = {  # per task: covered, accepted_turns, tpr, lj, nei, success
    "perfect": (3, 3, 1.0, 0, 0.0, True),
    "jumper": (3, 2, 1.0, 1, 0.5, True),
    "failer": (1, 1, 1 / 3, 0, 1.0, False),
    "disfluent": (1, 1, 1 / 3, 0, 1.0, False),
}


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_metrics_match_hand_computed_expectations(workspace, mode):
    with ChatServer(rule=rule) as server:
        summary = _eval(workspace, server, mode, "--pass-k", "2")
    covered, accepted, tpr, lj, nei, success = EXPECTED[mode]
    tasks = pl.read_parquet(workspace / "reports" / mode / "tasks.parquet")
    assert tasks.height == 4 and set(tasks["status"]) == {"ok"}
    for row in tasks.iter_rows(named=True):
        assert (row["covered"], row["accepted_turns"], row["lj"], row["success"]) == (covered, accepted, lj, success)
        assert row["tpr"] == pytest.approx(tpr) and row["nei"] == pytest.approx(nei)
    assert summary["atpr"] == pytest.approx(tpr)
    assert summary["sr"]["pass@1"] == (1.0 if success else 0.0) == summary["sr"]["pass@2"] == summary["pass^2"]
    # STL: 5 output tokens per text answer, plus 3 for the tool-calling round of T-tool's first turn
    tool_row = tasks.filter((pl.col("task_id") == "T-tool") & (pl.col("attempt") == 0)).row(0, named=True)
    assert tool_row["mtl"] == pytest.approx((8 + 5 * (accepted - 1)) / accepted)
    checkpoints = pl.read_parquet(workspace / "reports" / mode / "checkpoints.parquet")
    first_tool_turn = checkpoints.filter((pl.col("task_id") == "T-tool") & (pl.col("checkpoint") == 1)).row(0, named=True)
    assert (first_tool_turn["tia"], first_tool_turn["tsa"], first_tool_turn["tev"]) == (True, True, True)
    if mode == "disfluent":
        assert checkpoints.filter(pl.col("checkpoint") == 1)["fluent"].to_list() == [False] * 4


def test_no_api_key_is_written_and_the_run_resumes_from_cache(workspace):
    with ChatServer(rule=rule) as server:
        _eval(workspace, server, "perfect")
        calls_first = len(server.requests)
        assert calls_first > 0
        _eval(workspace, server, "perfect")  # everything done: nothing is asked again
        assert len(server.requests) == calls_first
    written = b"".join(p.read_bytes() for p in workspace.rglob("*") if p.is_file())
    assert KEY.encode() not in written
    run = json.loads((workspace / "reports/perfect/run.json").read_text())
    assert "prompt_sha256" in json.dumps(run["fingerprint"]) and run["fingerprint"]["dataset"]


def test_resume_with_another_model_is_refused(workspace):
    with ChatServer(rule=rule) as server:
        _eval(workspace, server, "perfect")
        result = CliRunner().invoke(app, [
            "eval", "--model", "jumper", "--base-url", server.base_url, "--api-key-env", "CIRRUS_E2E_KEY",
            "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "perfect", "-w", str(workspace), "-q",
        ], env={"CIRRUS_E2E_KEY": KEY})
    assert result.exit_code == 2 and "other settings" in result.output


def test_cirrus_toml_adds_a_provider_and_role_parameters(workspace, monkeypatch):
    from cirrus.llm import providers

    monkeypatch.setattr(providers, "_extra_providers", [])
    with ChatServer(rule=rule) as server:
        (workspace / "cirrus.toml").write_text(
            f'[[providers]]\nname = "test"\nbase_url = "{server.base_url}"\napi_key_env = "CIRRUS_E2E_KEY"\n'
            'prefixes = ["perf", "judge", "fluency"]\n\n[roles.agent]\ntemperature = 0.7\nextra_body = { top_k = 5 }\n\n'
            '[roles.judge]\nmodel = "judge"\n\n[roles.fluency]\nmodel = "fluency"\n')
        result = CliRunner().invoke(app, ["eval", "--model", "perfect", "-w", str(workspace), "-q", "--run-id", "t"],
                                    env={"CIRRUS_E2E_KEY": KEY})
        assert result.exit_code == 0, result.output
        agent_calls = [r for r in server.requests if r["model"] == "perfect"]
    assert agent_calls and all(r["temperature"] == 0.7 and r["top_k"] == 5 for r in agent_calls)
    assert json.loads((workspace / "reports/t/summary.json").read_text())["atpr"] == 1.0
    (workspace / "cirrus.toml").write_text("[[providers]]\nname = 1\n")
    result = CliRunner().invoke(app, ["eval", "--model", "perfect", "-w", str(workspace), "-q"])
    assert result.exit_code == 2 and "cirrus.toml" in result.output


def test_runs_write_the_papers_algorithm_1_mtl_beside_mtl(sample_runs):
    import json as _json

    import polars as _pl

    tasks = _pl.read_parquet(sample_runs / "reports" / "oracle" / "tasks.parquet")
    assert tasks.columns[-3:] == ["mtl_alg1", "language", "channel"]  # added at the end: older readers keep their positions
    ok = tasks.filter(_pl.col("covered") >= 1)
    # the oracle is never rejected: Algorithm 1 divides the accepted turns' tokens by covered, so
    # mtl_alg1 * covered == mtl * accepted_turns on every row
    for row in ok.iter_rows(named=True):
        assert abs(row["mtl_alg1"] * row["covered"] - row["mtl"] * row["accepted_turns"]) < 1e-6
    summary = _json.loads((sample_runs / "reports" / "oracle" / "summary.json").read_text())
    assert summary["amtl_alg1"] is not None and summary["amtl_alg1"] <= summary["amtl"]


def test_tasks_parquet_carries_the_tickets_language_and_channel(sample_runs):
    """Issue 27 item 5: compare English and Chinese tickets without a join."""
    import json as _json

    import polars as _pl

    tasks = _pl.read_parquet(sample_runs / "reports" / "oracle" / "tasks.parquet")
    lines = [_json.loads(line) for line in (sample_runs / "tickets" / "tasks.jsonl").open(encoding="utf-8")]
    expected = {t["task_id"]: (t.get("language", "en"), t.get("channel")) for t in lines}
    got = {row["task_id"]: (row["language"], row["channel"]) for row in tasks.iter_rows(named=True)}
    assert got == {task_id: expected[task_id] for task_id in got} and len(got) == len(expected)
