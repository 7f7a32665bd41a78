"""No silent self-grading: an LLM agent whose judge or fluency checker is its
own model (same model at the same endpoint), by default or given, makes
`cirrus eval` warn on stderr and record ``self_judged: true`` in run.json
and summary.json; a distinct judge, or a baseline, records false and says
nothing.  Against the scripted local server of tests/chat_server.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.roles import RoleOptions, build_roles
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY_ENV = "CIRRUS_SELF_JUDGE_KEY"
KEY = "sk-cirrus-self-judge-0123456789abcdef"
WARNING = "grades the agent with itself"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path, [make_task("T-plain", False)])


def rule(body: dict) -> Reply | str:
    """``judge`` / ``fluency`` by model name; the agent model ``perfect``
    also answers the judge's and the fluency checker's prompts (by their
    tags) when it judges itself."""
    answer = judge_or_fluency(body)
    if answer is not None:
        return answer
    prompt = " ".join(str(m.get("content") or "") for m in body["messages"])
    if "<reference_reply" in prompt:
        return json.dumps({"reason": "rule", "verdict": "Included"})
    if "<next_customer_message" in prompt:
        return json.dumps({"reason": "rule", "answer": "Yes"})
    return agent_reply(body["model"], body)


def _eval(workspace: Path, server: ChatServer, run_id: str, *extra: str):
    result = CliRunner().invoke(app, [
        "eval", "--model", "perfect", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
        "--run-id", run_id, "-w", str(workspace), "-q", *extra,
    ], env={KEY_ENV: KEY})
    assert result.exit_code == 0, result.output
    directory = workspace / "reports" / run_id
    run = json.loads((directory / "run.json").read_text(encoding="utf-8"))
    summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    return result, run, summary


def test_default_judge_is_the_agent_and_says_so(workspace):
    with ChatServer(rule=rule) as server:
        result, run, summary = _eval(workspace, server, "selfish")
    stderr = " ".join(result.stderr.split())
    assert WARNING in stderr
    assert "--judge-model" in stderr and "[roles.judge]" in stderr and "[roles.fluency]" in stderr
    assert "coverage judge and the fluency checker are the agent's own model 'perfect'" in stderr
    assert WARNING not in result.stdout  # the warning is on stderr only
    assert run["self_judged"] is True and run["self_judged_roles"] == ["judge", "fluency"]
    assert summary["self_judged"] is True
    assert summary["judge"] == "llm-coverage:perfect"


def test_a_distinct_judge_is_not_self_judged(workspace):
    with ChatServer(rule=rule) as server:
        result, run, summary = _eval(workspace, server, "fair", "--judge-model", "judge", "--fluency-model", "fluency")
    assert WARNING not in result.output
    assert run["self_judged"] is False and run["self_judged_roles"] == []
    assert summary["self_judged"] is False


def test_an_explicit_judge_that_is_the_agent_counts(workspace):
    with ChatServer(rule=rule) as server:
        result, run, summary = _eval(workspace, server, "explicit", "--judge-model", "perfect",
                                     "--fluency-model", "fluency")
    stderr = " ".join(result.stderr.split())
    assert WARNING in stderr and "the coverage judge is the agent's own model" in stderr
    assert run["self_judged_roles"] == ["judge"] and summary["self_judged"] is True


def test_cirrus_toml_judge_is_not_self_judged(workspace):
    (workspace / "cirrus.toml").write_text('[roles.judge]\nmodel = "judge"\n\n[roles.fluency]\nmodel = "fluency"\n')
    with ChatServer(rule=rule) as server:
        result, _, summary = _eval(workspace, server, "configured", "--config", str(workspace / "cirrus.toml"))
    assert WARNING not in result.output and summary["self_judged"] is False


def test_a_baseline_is_never_self_judged(workspace):
    result = CliRunner().invoke(app, ["eval", "--model", "baseline:oracle", "--run-id", "b", "-w", str(workspace),
                                      "-q"])
    assert result.exit_code == 0, result.output
    assert WARNING not in result.output
    assert json.loads((workspace / "reports/b/summary.json").read_text())["self_judged"] is False
    assert json.loads((workspace / "reports/b/run.json").read_text())["self_judged"] is False


def test_same_model_at_another_endpoint_is_not_self_judged(workspace, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    agent = RoleOptions("m", "http://127.0.0.1:9/v1", KEY_ENV)
    same = build_roles(agent, None, None, [], workspace)
    other = build_roles(agent, RoleOptions("m", "http://127.0.0.1:10/v1/"), None, [], workspace)
    trailing_slash = build_roles(agent, RoleOptions("m", "http://127.0.0.1:9/v1/"), RoleOptions("local"), [],
                                 workspace)
    try:
        assert same.details["self_judged_roles"] == ["judge", "fluency"]
        assert other.details["self_judged"] is False
        assert trailing_slash.details["self_judged_roles"] == ["judge"]
    finally:
        import asyncio

        for roles in (same, other, trailing_slash):
            asyncio.run(roles.aclose())
