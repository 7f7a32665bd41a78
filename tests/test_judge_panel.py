"""Judge panels: ``--judge-model`` given several times (or a comma list, or a
list under ``[roles.judge]``) makes every member judge every checkpoint; the
strict majority decides (a tie is Not Included); every member's verdict is
kept in the transcript and ``checkpoints.parquet``; ``summary.json`` and the
terminal report the members' agreement (pairwise Cohen's kappa, Krippendorff's
alpha); ``cirrus rescore`` takes a panel too.  Against the scripted local
server of tests/chat_server.py, whose judges differ by model name."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.roles import RoleError, panel_members
from cirrus.evaluate.types import InfrastructureError, Verdict
from cirrus.judges.agreement import cohen_kappa, krippendorff_alpha, panel_agreement, votes_of_rows
from cirrus.judges.panel import JudgePanel, majority
from cirrus.settings import Settings
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, between, make_task, write_workspace

KEY_ENV = "CIRRUS_PANEL_KEY"
KEY = "sk-cirrus-panel-key-0123456789abcdef"


# --- pure parts ------------------------------------------------------------------------------


def test_majority_is_strict_and_a_tie_is_not_included():
    assert majority([True, True, False]) and not majority([True, False, False])
    assert not majority([True, False]) and majority([True, True])
    with pytest.raises(ValueError):
        majority([])


def test_agreement_figures_against_hand_computation():
    a, b = [True, True, False, True], [True, False, False, True]
    # p_o = 3/4, p_e = 3/4 * 2/4 + 1/4 * 2/4 = 1/2: kappa = (0.75 - 0.5) / 0.5
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    # coincidences: o_11 = 4, o_00 = 2, o_01 = o_10 = 1; n = 8, n_1 = 5, n_0 = 3
    # alpha = 1 - D_o / D_e = 1 - (2/8) / (2*5*3 / (8*7)) = 1 - 14/30
    assert krippendorff_alpha([[x, y] for x, y in zip(a, b)]) == pytest.approx(1 - 14 / 30)
    assert cohen_kappa([True] * 3, [True] * 3) is None and cohen_kappa([], []) is None
    assert krippendorff_alpha([[False, False]] * 4) is None and krippendorff_alpha([]) is None
    info = panel_agreement(["x", "y", "z"], [[True, True, False], [False, False, False], [True, True, True]])
    assert info["questions"] == 3 and info["unanimous"] == pytest.approx(2 / 3)
    assert [(p["a"], p["b"], p["agreement"]) for p in info["pairwise"]] == [
        ("x", "y", 1.0), ("x", "z", pytest.approx(2 / 3)), ("y", "z", pytest.approx(2 / 3))]
    assert info["pairwise"][0]["cohen_kappa"] == pytest.approx(1.0)
    assert info["included_rate"] == {"x": pytest.approx(2 / 3), "y": pytest.approx(2 / 3), "z": pytest.approx(1 / 3)}
    with pytest.raises(ValueError):
        panel_agreement(["x", "y"], [[True]])


def test_votes_of_rows_keeps_questions_every_member_answered():
    rows = [{"turns": [{"judge_votes": [
        {"checkpoint": 1, "judge": "a", "ok": True}, {"checkpoint": 1, "judge": "b", "ok": False},
        {"checkpoint": 2, "judge": "a", "ok": True}]}, {"judge_votes": None}]}]
    assert votes_of_rows(rows, ["a", "b"]) == [[True, False]]


def test_panel_member_lists():
    assert panel_members("a") == ["a"] and panel_members(" a , b ") == ["a", "b"]
    for bad in ("a,,b", "a,a", ","):
        with pytest.raises(RoleError):
            panel_members(bad)
    assert Settings.model_validate({"roles": {"judge": {"model": ["a", "b"]}}}).role("judge").model == "a,b"
    with pytest.raises(ValueError, match="only \\[roles.judge\\]"):
        Settings.model_validate({"roles": {"fluency": {"model": ["a", "b"]}}})


class _Fixed:
    def __init__(self, name: str, ok: bool | None) -> None:
        self.name, self.ok = name, ok

    async def covers(self, history, query, reference, candidate):
        if self.ok is None:
            raise InfrastructureError("the endpoint answered 500 five times")
        return Verdict(self.ok, f"{self.name} says {self.ok}")


def test_panel_verdict_carries_every_vote_and_a_failing_member_fails_the_question():
    panel = JudgePanel([_Fixed("a", True), _Fixed("b", False), _Fixed("c", True)])
    verdict = asyncio.run(panel.covers([], "q", "r", "c"))
    assert verdict.ok and "2 of 3" in verdict.raw
    assert [(v["judge"], v["ok"]) for v in verdict.votes] == [("a", True), ("b", False), ("c", True)]
    # a judge without covers_later is asked the plain question about the later checkpoint
    assert asyncio.run(panel.covers_later([], "q", "c", "later q", "later r")).ok
    tie = asyncio.run(JudgePanel([_Fixed("a", True), _Fixed("b", False)]).covers([], "q", "r", "c"))
    assert not tie.ok
    with pytest.raises(InfrastructureError, match="panel member b"):
        asyncio.run(JudgePanel([_Fixed("a", True), _Fixed("b", None)]).covers([], "q", "r", "c"))
    with pytest.raises(ValueError):
        JudgePanel([_Fixed("a", True)])


# --- a run with a panel -------------------------------------------------------------------


def rule(body: dict) -> Reply | str:
    """Judges by model name: ``strict`` (Included when the reference is in the
    candidate), ``lenient`` (always Included, in a tag), ``grumpy`` (never,
    in markdown); ``fluency`` always Yes; ``broken`` always 500."""
    model = body["model"]
    prompt = body["messages"][-1]["content"]
    if model == "broken":
        return Reply(status=500, error_message="overloaded")
    if model == "strict":
        included = between(prompt, "reference_reply") in between(prompt, "candidate_reply")
        return json.dumps({"reason": "rule", "verdict": "Included" if included else "Not Included"})
    if model == "lenient":
        return "<verdict>Included</verdict>"
    if model == "grumpy":
        return "The reply is vague.\n\n**Verdict:** Not Included"
    if model == "fluency":
        return json.dumps({"reason": "rule", "answer": "Yes"})
    return agent_reply(model, body)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path, [make_task("T-1", False), make_task("T-2", False)])


def _eval(workspace: Path, server: ChatServer, run_id: str, model: str, *judges: str, code: int = 0):
    result = CliRunner().invoke(app, [
        "eval", "--model", model, "--base-url", server.base_url, "--api-key-env", KEY_ENV,
        "--fluency-model", "fluency", "--run-id", run_id, "-w", str(workspace), "-q",
        *[word for judge in judges for word in ("--judge-model", judge)],
    ], env={KEY_ENV: KEY, "COLUMNS": "200"})
    assert result.exit_code == code, result.output
    return result, workspace / "reports" / run_id


def test_a_panel_run_keeps_every_vote_and_reports_agreement(workspace):
    with ChatServer(rule=rule) as server:
        # the "failer" agent answers checkpoint 1 right, then fails
        result, run = _eval(workspace, server, "panel", "failer", "strict", "lenient,grumpy")
        judged = {body["model"] for body in server.requests}
    assert {"strict", "lenient", "grumpy"} <= judged
    summary = json.loads((run / "summary.json").read_text())
    assert summary["judge"] == "panel(llm-coverage:strict, llm-coverage:lenient, llm-coverage:grumpy)"
    # checkpoint 1: strict and lenient say Included (2 of 3): accepted; the jump to 2: strict says no: 1 of 3;
    # checkpoint 2 ("I am not sure."): strict no, lenient yes, grumpy no: rejected
    assert summary["atpr"] == pytest.approx(1 / 3)
    panel = summary["judge_panel"]
    assert panel["members"] == ["llm-coverage:strict", "llm-coverage:lenient", "llm-coverage:grumpy"]
    assert panel["questions"] == 6 and panel["unanimous"] == 0.0  # lenient and grumpy always differ
    pairs = {(p["a"], p["b"]): p for p in panel["pairwise"]}
    assert pairs[("llm-coverage:lenient", "llm-coverage:grumpy")]["agreement"] == 0.0
    assert pairs[("llm-coverage:strict", "llm-coverage:lenient")]["agreement"] == pytest.approx(2 / 6)
    # lenient says Included throughout: its agreement with strict is what chance gives
    assert pairs[("llm-coverage:strict", "llm-coverage:lenient")]["cohen_kappa"] == pytest.approx(0.0)
    assert panel["krippendorff_alpha"] is not None and panel["krippendorff_alpha"] < 0
    assert "Krippendorff's alpha" in result.stdout and "Cohen's kappa" in result.stdout

    transcript = json.loads((run / "transcripts.jsonl").read_text().splitlines()[0])
    first = transcript["turns"][0]["verdicts"][0]
    assert first["kind"] == "coverage" and first["ok"] is True
    assert [(v["judge"], v["ok"]) for v in first["votes"]] == [
        ("llm-coverage:strict", True), ("llm-coverage:lenient", True), ("llm-coverage:grumpy", False)]
    assert all(v["raw"] for v in first["votes"])

    checkpoints = pl.read_parquet(run / "checkpoints.parquet").sort(["task_id", "attempt", "checkpoint"])
    votes = json.loads(checkpoints["judge_votes"].to_list()[0])
    assert sorted((v["checkpoint"], v["judge"], v["ok"]) for v in votes) == sorted([
        (1, "llm-coverage:strict", True), (1, "llm-coverage:lenient", True), (1, "llm-coverage:grumpy", False),
        (2, "llm-coverage:strict", False), (2, "llm-coverage:lenient", True), (2, "llm-coverage:grumpy", False)])
    run_json = json.loads((run / "run.json").read_text())
    assert [m.get("model") for m in run_json["fingerprint"]["judge_role"]["panel"]] == ["strict", "lenient", "grumpy"]


def test_a_tied_panel_does_not_accept(workspace):
    with ChatServer(rule=rule) as server:
        _, run = _eval(workspace, server, "tie", "perfect", "lenient", "grumpy")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["atpr"] == 0.0 and summary["judge_panel"]["unanimous"] == 0.0


def test_a_failing_member_makes_the_attempts_errors_not_fails(workspace):
    (workspace / "cirrus.toml").write_text("[roles.judge]\nmax_retries = 0\n")  # fail at once
    with ChatServer(rule=rule) as server:
        result, run = _eval(workspace, server, "broken", "perfect", "strict", "broken", code=1)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["errors"] == summary["attempts"] == 2
    assert "panel member llm-coverage:broken" in " ".join(result.stderr.split())
    assert KEY not in result.output


def test_rescore_takes_a_panel(workspace):
    with ChatServer(rule=rule) as server:
        _eval(workspace, server, "single", "perfect", "strict")
        result = CliRunner().invoke(app, [
            "rescore", "single", "--judge-model", "strict", "--judge-model", "grumpy", "--judge-model", "lenient",
            "--judge-base-url", server.base_url, "--judge-api-key-env", KEY_ENV, "--run-id", "again",
            "-w", str(workspace), "-q"], env={KEY_ENV: KEY, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    summary = json.loads((workspace / "reports/again/summary.json").read_text())
    assert summary["judge"].startswith("panel(") and summary["judge_panel"]["questions"] > 0
    # the perfect agent's replies: strict and lenient accept, grumpy does not, so the panel accepts all
    assert summary["atpr"] == 1.0 and summary["rescore"]["verdict_agreement"] == 1.0
    assert "Krippendorff's alpha" in result.stdout


def test_panel_from_cirrus_toml(workspace):
    (workspace / "cirrus.toml").write_text('[roles.judge]\nmodel = ["strict", "lenient", "grumpy"]\n')
    with ChatServer(rule=rule) as server:
        result = CliRunner().invoke(app, [
            "eval", "--model", "perfect", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
            "--fluency-model", "fluency", "--run-id", "toml", "-w", str(workspace), "-q",
            "--config", str(workspace / "cirrus.toml")], env={KEY_ENV: KEY})
    assert result.exit_code == 0, result.output
    assert json.loads((workspace / "reports/toml/summary.json").read_text())["judge_panel"]["members"] == [
        "llm-coverage:strict", "llm-coverage:lenient", "llm-coverage:grumpy"]


def test_rescore_says_when_the_new_judge_is_the_agent(workspace):
    with ChatServer(rule=rule) as server:
        _eval(workspace, server, "src", "strict", "lenient")  # the agent "strict" (answers as a judge would)

        def rescore(run_id: str, *judges: str):
            result = CliRunner().invoke(app, [
                "rescore", "src", *[w for j in judges for w in ("--judge-model", j)],
                "--judge-base-url", server.base_url, "--judge-api-key-env", KEY_ENV, "--run-id", run_id,
                "-w", str(workspace), "-q"], env={KEY_ENV: KEY, "COLUMNS": "200"})
            assert result.exit_code == 0, result.output
            summary = json.loads((workspace / f"reports/{run_id}/summary.json").read_text())
            run = json.loads((workspace / f"reports/{run_id}/run.json").read_text())
            return " ".join(result.stderr.split()), summary, run

        stderr, summary, run = rescore("by-itself", "grumpy", "strict")
        assert "grades the agent with itself" in stderr and "--judge-model" in stderr
        assert summary["self_judged"] is True and run["self_judged_roles"] == ["judge"]
        stderr, summary, run = rescore("by-others", "grumpy", "lenient")
        assert "grades the agent with itself" not in stderr
        assert summary["self_judged"] is False and run["self_judged_roles"] == []
