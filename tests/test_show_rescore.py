"""`cirrus show` and `cirrus rescore` on runs made by `cirrus eval` against a
local OpenAI-compatible server (tests/chat_server.py) playing the agent, the
judges and the fluency checkers by rule.  Rescored metrics are checked
against hand-computed expectations, and the agent is never asked again."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from cirrus.cli import app as cirrus_app
from cirrus.commands.rescore import rescore
from cirrus.commands.show import show
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, between, make_task, write_workspace

KEY_ENV = "CIRRUS_RESCORE_KEY"
ENV = {KEY_ENV: "sk-rescore-test-0123456789", "COLUMNS": "200"}
AGENT_MODELS = {"perfect", "failer", "disfluent", "broken"}

app = typer.Typer()


@app.callback()
def _main() -> None:
    pass


app.command("show")(show)
app.command("rescore")(rescore)


def _judge(model: str, user: str) -> bool:
    reference, candidate = between(user, "reference_reply"), between(user, "candidate_reply")
    if model == "strict2" and reference == "ANSWER-2":
        return False
    if model == "lenient2" and reference == "ANSWER-2" and candidate == "I am not sure.":
        return True
    return reference in candidate


def rule(body: dict) -> Reply | str:
    model = body["model"]
    user = body["messages"][1]["content"]  # the question (a repair message would come last)
    if model in ("judge", "judge2", "strict2", "lenient2"):
        return json.dumps({"reason": "rule", "verdict": "Included" if _judge(model, user) else "Not Included"})
    if model == "fluency":
        return json.dumps({"reason": "rule", "answer": "No" if "DISFLUENT" in user else "Yes"})
    if model == "fluency-no":
        return json.dumps({"reason": "rule", "answer": "No"})
    return agent_reply(model, body)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path, [make_task("T-plain", False), make_task("T-tool", True)])


@pytest.fixture
def server():
    with ChatServer(rule=rule) as chat:
        yield chat


def _eval(workspace: Path, server: ChatServer, model: str, *extra: str) -> None:
    result = CliRunner().invoke(cirrus_app, [
        "eval", "--model", model, "--base-url", server.base_url, "--api-key-env", KEY_ENV,
        "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", model, "-w", str(workspace), "-q", *extra,
    ], env=ENV)
    assert result.exit_code == 0, result.output


def _rescore(workspace: Path, server: ChatServer, run_id: str, judge: str, *extra: str, code: int = 0):
    result = CliRunner().invoke(app, ["rescore", run_id, "--judge-model", judge, "--judge-base-url", server.base_url,
                                      "--judge-api-key-env", KEY_ENV, "-w", str(workspace), "-q", *extra], env=ENV)
    assert result.exit_code == code, result.output
    return result


def _agent_requests(server: ChatServer) -> int:
    return sum(1 for r in server.requests if r["model"] in AGENT_MODELS)


def _run(workspace: Path, run_id: str) -> tuple[dict, pl.DataFrame, pl.DataFrame, list[dict]]:
    directory = workspace / "reports" / run_id
    summary = json.loads((directory / "summary.json").read_text())
    tasks = pl.read_parquet(directory / "tasks.parquet").sort("task_id", "attempt")
    checkpoints = pl.read_parquet(directory / "checkpoints.parquet")
    transcripts = [json.loads(line) for line in (directory / "transcripts.jsonl").read_text().splitlines()]
    return summary, tasks, checkpoints, transcripts


# --- rescore ------------------------------------------------------------------------


def test_rescore_with_the_local_judge_reproduces_the_run_without_calling_the_agent(workspace, server):
    _eval(workspace, server, "perfect", "--pass-k", "2")
    before = len(server.requests)
    result = _rescore(workspace, server, "perfect", "local")
    assert len(server.requests) == before  # no agent, no judge, no fluency request: all offline or reused
    source, source_tasks, source_checkpoints, _ = _run(workspace, "perfect")
    summary, tasks, checkpoints, transcripts = _run(workspace, "perfect-rescored-local")
    assert "perfect-rescored-local" in result.output
    for key in ("atpr", "alj", "anei", "amtl", "sr", "pass^2", "errors", "n_tasks", "model", "attempts"):
        assert summary[key] == source[key], key
    assert summary["judge"] == "local-heuristic" and summary["fluency"] == "reused:llm-fluency:fluency"
    assert tasks.drop("truncated", "wall_s", "input_tokens", "run_id").equals(
        source_tasks.drop("wall_s", "input_tokens", "run_id"))
    assert tasks["input_tokens"].to_list() == source_tasks["input_tokens"].to_list()  # every turn replayed
    assert tasks["truncated"].to_list() == [False] * 4
    assert checkpoints.drop("wall_s", "run_id").equals(source_checkpoints.drop("wall_s", "run_id"))
    # each run's tables name their own run
    assert set(tasks["run_id"]) == set(checkpoints["run_id"]) == {"perfect-rescored-local"}
    assert set(source_tasks["run_id"]) == set(source_checkpoints["run_id"]) == {"perfect"}
    assert set(source_tasks["model"]) == set(tasks["model"]) == {summary["model"]}
    assert source_tasks["end_reason"].to_list() == ["completed"] * 4 and source_tasks["end_checkpoint"].to_list() == [3] * 4
    assert {t["source_run"] for t in transcripts} == {"perfect"}
    assert summary["rescore"]["verdict_agreement"] == 1.0 and summary["rescore"]["changed"] == 0


def test_a_stricter_judge_stops_the_walks_earlier(workspace, server):
    _eval(workspace, server, "perfect")
    before = _agent_requests(server)
    _rescore(workspace, server, "perfect", "strict2")
    assert _agent_requests(server) == before
    judged = [r for r in server.requests if r["model"] == "strict2"]
    # per task: turn 1 vs checkpoints 1 and 2, turn 2 vs checkpoint 2 (identical questions may be cached)
    assert 0 < len(judged) <= 2 * 3
    summary, tasks, checkpoints, _ = _run(workspace, "perfect-rescored-strict2")
    # every walk: turn 1 covers checkpoint 1 only, turn 2 is rejected
    assert tasks["covered"].to_list() == [1, 1] and tasks["accepted_turns"].to_list() == [1, 1]
    assert tasks["tpr"].to_list() == pytest.approx([1 / 3, 1 / 3]) and tasks["nei"].to_list() == [1.0, 1.0]
    assert tasks["success"].to_list() == [False, False] and tasks["truncated"].to_list() == [False, False]
    assert tasks["end_reason"].to_list() == ["rejected"] * 2 and tasks["end_checkpoint"].to_list() == [2, 2]
    assert tasks["mtl"].to_list() == [5.0, 8.0]  # T-plain: 5 tokens; T-tool: 3 (tool round) + 5, as saved
    assert summary["atpr"] == pytest.approx(1 / 3) and summary["sr"]["pass@1"] == 0.0
    assert summary["amtl"] == pytest.approx(6.5)
    assert checkpoints.sort("task_id", "checkpoint")["accepted"].to_list() == [True, False, True, False]
    assert checkpoints.filter(pl.col("checkpoint") == 1)["fluent"].to_list() == [True, True]  # reused Yes
    info = summary["rescore"]
    assert info["changed"] == 2 and info["truncated"] == 0 and info["source_atpr"] == 1.0
    # per task: (turn 1, cp 1) and (turn 1, cp 2) agree, (turn 2, cp 2) does not
    assert (info["verdicts_compared"], info["verdict_agreement"]) == (6, pytest.approx(4 / 6))
    comparison = pl.read_parquet(workspace / "reports/perfect-rescored-strict2/rescore.parquet")
    assert comparison["source_covered"].to_list() == [3, 3] and comparison["covered"].to_list() == [1, 1]
    assert comparison["turns_saved"].to_list() == [3, 3] and comparison["turns_replayed"].to_list() == [2, 2]
    assert comparison["run_id"].unique().to_list() == ["perfect-rescored-strict2"]
    assert comparison["model"].unique().to_list() == [summary["model"]]


def test_a_judge_accepting_past_the_saved_transcript_truncates_the_walk(workspace, server):
    _eval(workspace, server, "failer")
    before = _agent_requests(server)
    _rescore(workspace, server, "failer", "lenient2")
    assert _agent_requests(server) == before
    summary, tasks, checkpoints, transcripts = _run(workspace, "failer-rescored-lenient2")
    # turn 1 covers 1; turn 2 ("I am not sure.") now covers 2; checkpoint 3 was never asked: truncated
    assert tasks["covered"].to_list() == [2, 2] and tasks["accepted_turns"].to_list() == [2, 2]
    assert tasks["tpr"].to_list() == pytest.approx([2 / 3, 2 / 3]) and tasks["lj"].to_list() == [0, 0]
    assert tasks["nei"].to_list() == [0.0, 0.0] and tasks["mtl"].to_list() == [5.0, 6.5]
    assert tasks["truncated"].to_list() == [True, True] and tasks["success"].to_list() == [False, False]
    # the walk ended where the saved transcript does: before checkpoint 3; the source run rejected turn 2
    assert tasks["end_reason"].to_list() == ["truncated"] * 2 and tasks["end_checkpoint"].to_list() == [3, 3]
    source_tasks = pl.read_parquet(workspace / "reports/failer/tasks.parquet")
    assert source_tasks["end_reason"].to_list() == ["rejected"] * 2 and source_tasks["end_checkpoint"].to_list() == [2, 2]
    assert tasks["input_tokens"].to_list() == pytest.approx(
        pl.read_parquet(workspace / "reports/failer/tasks.parquet").sort("task_id")["input_tokens"].to_list())
    last = checkpoints.filter(pl.col("checkpoint") == 2)
    assert last["accepted"].to_list() == [True, True] and last["fluent"].to_list() == [None, None]
    kinds = [v["kind"] for v in transcripts[0]["turns"][-1]["verdicts"]]
    assert kinds == ["coverage", "coverage", "truncated"] and transcripts[0]["truncated"] is True
    assert summary["rescore"]["truncated"] == 2 and summary["atpr"] == pytest.approx(2 / 3)
    # with a fluency checker asked again, a Yes still truncates, and is recorded as a Yes
    _rescore(workspace, server, "failer", "lenient2", "--fluency-model", "fluency", "--run-id", "f2")
    _, tasks, checkpoints, transcripts = _run(workspace, "f2")
    assert tasks["truncated"].to_list() == [True, True]
    assert checkpoints.filter(pl.col("checkpoint") == 2)["fluent"].to_list() == [True, True]
    assert [v["kind"] for v in transcripts[0]["turns"][-1]["verdicts"]][-2:] == ["fluency", "truncated"]
    # and a No is a real stop: covered 1, not truncated
    _rescore(workspace, server, "failer", "lenient2", "--fluency-model", "fluency-no", "--run-id", "f3")
    summary, tasks, _, _ = _run(workspace, "f3")
    assert tasks["covered"].to_list() == [1, 1] and tasks["truncated"].to_list() == [False, False]
    assert tasks["end_reason"].to_list() == ["fluency_stop"] * 2 and tasks["end_checkpoint"].to_list() == [2, 2]
    assert summary["fluency"] == "llm-fluency:fluency-no" and _agent_requests(server) == before


def test_saved_fluency_verdicts_are_reused_and_rechecking_can_truncate(workspace, server):
    _eval(workspace, server, "disfluent")
    _rescore(workspace, server, "disfluent", "judge2")
    _, tasks, checkpoints, _ = _run(workspace, "disfluent-rescored-judge2")
    assert tasks["covered"].to_list() == [1, 1] and tasks["truncated"].to_list() == [False, False]
    assert checkpoints["fluent"].to_list() == [False, False]  # the saved No stops the walk again
    _rescore(workspace, server, "disfluent", "judge2", "--fluency-model", "local", "--run-id", "d2")
    summary, tasks, checkpoints, _ = _run(workspace, "d2")
    assert tasks["truncated"].to_list() == [True, True] and checkpoints["fluent"].to_list() == [True, True]
    assert "fluency" in summary["offline_heuristics"] and "judge" not in summary["offline_heuristics"]


def test_rescore_resumes_keeps_source_errors_and_refuses_other_settings(workspace, server):
    _eval(workspace, server, "broken")  # T-tool's agent call fails: an error row
    _rescore(workspace, server, "broken", "strict2", "--run-id", "b2")
    summary, tasks, _, _ = _run(workspace, "b2")
    assert summary["errors"] == 1 and tasks.filter(pl.col("status") == "error")["task_id"].to_list() == ["T-tool"]
    assert "the source run's attempt failed" in tasks.filter(pl.col("task_id") == "T-tool")["error"][0]
    assert tasks.filter(pl.col("task_id") == "T-plain")["covered"].to_list() == [1]
    error_row = tasks.filter(pl.col("task_id") == "T-tool").row(0, named=True)
    assert (error_row["end_reason"], error_row["end_checkpoint"]) == ("error", None)
    asked = len(server.requests)
    _rescore(workspace, server, "broken", "strict2", "--run-id", "b2")  # resume: nothing judged again
    assert len(server.requests) == asked
    result = _rescore(workspace, server, "broken", "lenient2", "--run-id", "b2", code=2)
    assert "other settings" in result.output


def test_rescore_errors_are_clear(workspace, server):
    result = _rescore(workspace, server, "missing", "local", code=2)
    assert "no run 'missing'" in result.output
    _eval(workspace, server, "perfect")
    result = _rescore(workspace, server, "perfect", "local", "--run-id", "perfect", code=2)
    assert "own --run-id" in result.output
    tasks_file = workspace / "tickets/tasks.jsonl"
    tasks_file.write_text(tasks_file.read_text().replace("ANSWER-3", "ANSWER-THREE"))
    result = _rescore(workspace, server, "perfect", "local", code=2)
    assert "not the task set" in result.output
    result = CliRunner().invoke(app, ["rescore", "perfect", "-w", str(workspace)], env=ENV)
    assert result.exit_code == 2 and "--judge-model" in result.output


# --- show -----------------------------------------------------------------------------


def _show(workspace: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["show", *args, "-w", str(workspace)], env=ENV)
    assert result.exit_code == code, result.output
    return result.output


def test_show_prints_the_summary_and_a_walk_with_its_verdicts(workspace, server):
    _eval(workspace, server, "perfect")
    output = _show(workspace, "perfect")
    assert "ATPR" in output and "1.000" in output and "llm-coverage:judge" in output
    assert "T-plain" in output and "T-tool" in output and "all covered" in output
    output = _show(workspace, "perfect", "--task", "T-tool")
    for checkpoint in (1, 2, 3):
        assert f"checkpoint {checkpoint}: ACCEPTED, covers {checkpoint}" in output
        assert f"accepts {checkpoint}?" in output
    assert "DescribeInstance" in output and "answered from the cassette" in output
    assert '"verdict": "Included"' in output and '"verdict": "Not Included"' in output  # the judge's raw answers
    assert "fluent -> 2?" in output and "all checkpoints covered" in output
    assert "RR yes  TIA yes  TSA yes  TEV yes  STL 8" in output


def test_show_failed_lists_only_failing_attempts(workspace, server):
    _eval(workspace, server, "broken")
    output = _show(workspace, "broken", "--failed")
    assert "T-tool" in output and "error" in output and "T-plain" not in output
    output = _show(workspace, "broken")
    assert "T-plain" in output and "T-tool" in output
    output = _show(workspace, "broken", "--task", "T-plain", "--failed")
    assert "no failing attempt" in output
    output = _show(workspace, "broken", "--task", "T-tool", "--failed")
    assert "bad request" in output
    _eval(workspace, server, "failer")
    output = _show(workspace, "failer", "--task", "T-plain", "--failed")
    assert "checkpoint 1: ACCEPTED" in output and "checkpoint 2: REJECTED" in output
    assert "I am not sure." in output and "rejected at checkpoint 2" in output and "checkpoints 2-3 not covered" in output


def test_show_a_truncated_rescore(workspace, server):
    _eval(workspace, server, "failer")
    _rescore(workspace, server, "failer", "lenient2", "--run-id", "t")
    assert "truncated before 3" in _show(workspace, "t")
    output = _show(workspace, "t", "--task", "T-tool")
    assert "continue -> 3?" in output and "truncated" in output and "rescore of" in output


def test_show_unknown_run_task_or_attempt_exits_2(workspace, server):
    _eval(workspace, server, "perfect")
    output = _show(workspace, "perfec", code=2)
    assert "no run 'perfec'" in output and "perfect" in output
    output = _show(workspace, "perfect", "--task", "T-nope", code=2)
    assert "task 'T-nope' is not in run perfect" in output and "ATPR" not in output
    output = _show(workspace, "perfect", "--task", "T-plain", "--attempt", "3", code=2)
    assert "no attempt 3" in output
    assert "needs --task" in _show(workspace, "perfect", "--attempt", "0", code=2)
