"""The same agent behaviour evaluated three ways -- a model on an
OpenAI-compatible endpoint (OpenAIAgent + tests/chat_server.py), an agent
service over the HTTP agent protocol (HttpAgent + tests/agent_server.py) and
an agent written in Python (``--agent module:factory``) -- walks to the same
scores with the same judge, through ``run_eval``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest

from cirrus.agents.http_agent import HttpAgent, HttpAgentConfig
from cirrus.agents.loader import load_agent
from cirrus.evaluate.roles import RoleOptions, build_roles
from cirrus.evaluate.runner import EvalSettings, run_eval
from tests.agent_server import AgentServer, Answer, from_chat_reply
from tests.chat_server import ChatServer
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY_ENV = "CIRRUS_PATHS_E2E_KEY"
TASK_COLUMNS = ["task_id", "attempt", "status", "covered", "accepted_turns", "tpr", "lj", "nei", "mtl", "success",
                "output_tokens"]
TURN_COLUMNS = ["task_id", "attempt", "checkpoint", "accepted", "covered_through", "tia", "tsa", "tev", "stl",
                "fluent", "tool_calls"]
SUMMARY_KEYS = ["atpr", "sr", "pass^2", "attempts"]
EXPECTED_ATPR = {"perfect": 1.0, "jumper": 1.0, "failer": 1 / 3, "disfluent": 1 / 3}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-paths-e2e")
    return write_workspace(tmp_path, [make_task("T-plain", False), make_task("T-tool", True)])


def judges(body: dict):
    return judge_or_fluency(body) or agent_reply(body["model"], body)


def evaluate(workspace: Path, chat: ChatServer, run_id: str, agent_kind: str, mode: str,
             service: AgentServer | None = None) -> tuple[dict, pl.DataFrame, pl.DataFrame]:
    async def main() -> dict:
        agent_options = RoleOptions(mode, chat.base_url, KEY_ENV) if agent_kind == "model" \
            else RoleOptions("baseline:oracle")
        roles = build_roles(agent_options, RoleOptions("judge", chat.base_url, KEY_ENV),
                            RoleOptions("fluency", chat.base_url, KEY_ENV), [], workspace)
        agent = roles.agent
        if agent_kind == "http":
            agent = HttpAgent(HttpAgentConfig(service.url, name=mode, retry_initial_wait=0.01))
        elif agent_kind == "python":
            agent = load_agent("tests.agent_factories:ScriptedAgent", mode=mode, workspace=workspace)
        settings = EvalSettings(workspace, run_id, runs=2, pass_k=2, concurrency=4, progress=False)
        try:
            return await run_eval(settings, agent, roles.judge, roles.fluency)
        finally:
            await roles.aclose()
            if isinstance(agent, HttpAgent):
                await agent.aclose()

    summary = asyncio.run(main())
    run = workspace / "reports" / run_id
    tasks = pl.read_parquet(run / "tasks.parquet").select(TASK_COLUMNS).sort("task_id", "attempt")
    turns = pl.read_parquet(run / "checkpoints.parquet").select(TURN_COLUMNS).sort("task_id", "attempt", "checkpoint")
    return summary, tasks, turns


@pytest.mark.parametrize("mode", ["perfect", "jumper", "failer", "disfluent"])
def test_model_http_and_python_agents_score_the_same(workspace, mode):
    with ChatServer(rule=judges) as chat, \
            AgentServer(rule=lambda body: from_chat_reply(agent_reply(mode, body))) as service:
        model = evaluate(workspace, chat, "model", "model", mode)
        http = evaluate(workspace, chat, "http", "http", mode, service)
        python = evaluate(workspace, chat, "python", "python", mode)
    (model_summary, model_tasks, model_turns) = model
    assert set(model_tasks["status"]) == {"ok"} and model_tasks.height == 4
    for summary, tasks, turns in (http, python):
        assert tasks.equals(model_tasks), (tasks, model_tasks)
        assert turns.equals(model_turns), (turns, model_turns)
        assert {k: summary[k] for k in SUMMARY_KEYS} == {k: model_summary[k] for k in SUMMARY_KEYS}
        # the usage the agent reported is the model's, call for call and token for token
        assert summary["usage"]["agent"] == model_summary["usage"]["agent"]
    # the tool turn's calls were replayed and scored (TIA/TSA/TEV) the same through each path
    first_tool_turn = model_turns.filter((pl.col("task_id") == "T-tool") & (pl.col("checkpoint") == 1))
    assert first_tool_turn.select("tia", "tsa", "tev").rows() == [(True, True, True)] * 2
    assert model_summary["atpr"] == pytest.approx(EXPECTED_ATPR[mode])  # tests/test_eval_e2e.py's hand count
    assert '"agent_text":"ANSWER-1' in (workspace / "reports" / "http" / "transcripts.jsonl").read_text()
    assert json.loads((workspace / "reports" / "http" / "run.json").read_text())["fingerprint"]["agent"] == mode


def run_http(workspace: Path, chat: ChatServer, service: AgentServer, run_id: str) -> dict:
    async def main() -> dict:
        roles = build_roles(RoleOptions("baseline:oracle"), RoleOptions("judge", chat.base_url, KEY_ENV),
                            RoleOptions("fluency", chat.base_url, KEY_ENV), [], workspace)
        settings = EvalSettings(workspace, run_id, runs=1, pass_k=1, concurrency=2, progress=False)
        async with HttpAgent(HttpAgentConfig(service.url, max_retries=0)) as agent:
            try:
                return await run_eval(settings, agent, roles.judge, roles.fluency)
            finally:
                await roles.aclose()
    return asyncio.run(main())


def test_a_broken_service_makes_error_rows_and_a_refused_token_stops_the_run(workspace):
    from cirrus.llm.providers import ModelAuthError

    with ChatServer(rule=judges) as chat:
        with AgentServer(rule=lambda body: Answer(body="<html>oops</html>")) as service:
            summary = run_http(workspace, chat, service, "broken")
        tasks = pl.read_parquet(workspace / "reports" / "broken" / "tasks.parquet")
        assert set(tasks["status"]) == {"error"}
        (reason, count), = summary["error_reasons"]
        assert count == 2 and f"the agent service at {service.url} failed: malformed answer: the body is not JSON" \
            in reason
        with AgentServer(rule=lambda body: 401) as service:
            with pytest.raises(ModelAuthError, match="refused the request"):
                run_http(workspace, chat, service, "refused")
