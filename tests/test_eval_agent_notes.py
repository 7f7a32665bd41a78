"""Agent notes through a whole run: a model that writes its tool call as text
(as Qwen2.5-Coder-0.5B does through llama.cpp's server) is noted in the
transcript, the attempt row and summary.json, with the reading off (the
default of `cirrus eval`) and on (OpenAIAgent(text_tool_calls=True)); a
rescore keeps the notes of the turns it judges again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from cirrus.agents.openai_agent import OpenAIAgent
from cirrus.evaluate.runner import EvalSettings, run_eval
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import TOOL_ARGS, judge_or_fluency, make_task, write_workspace

KEY_ENV = "CIRRUS_NOTES_KEY"
AS_TEXT = json.dumps({"name": "DescribeInstance", "arguments": TOOL_ARGS})


def rule(body: dict) -> Reply | str:
    """Judge and fluency by rule; the agent writes its first tool call as text."""
    answer = judge_or_fluency(body)
    if answer is not None:
        return answer
    messages = body["messages"]
    k = sum(1 for m in messages if m["role"] == "user")
    if body.get("tools") and k == 1 and messages[-1]["role"] == "user":
        return Reply(content=AS_TEXT)
    return Reply(content=f"ANSWER-{k}")


def workspace_with_a_tool_task(root: Path) -> Path:
    return write_workspace(root, [make_task("T-tool", True)])


def read(directory: Path) -> tuple[dict, dict, dict]:
    transcript = json.loads((directory / "transcripts.jsonl").read_text().splitlines()[0])
    row = json.loads((directory / "attempts.jsonl").read_text().splitlines()[0])
    return transcript, row, json.loads((directory / "summary.json").read_text())


def test_off_the_text_is_judged_and_noted_in_transcript_row_and_summary(tmp_path, monkeypatch):
    from cirrus.cli import app

    monkeypatch.setenv(KEY_ENV, "sk-notes")
    workspace = workspace_with_a_tool_task(tmp_path)
    with ChatServer(rule=rule) as server:
        result = CliRunner().invoke(app, [
            "eval", "--model", "agent", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
            "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "off", "-w", str(workspace), "-q"])
    assert result.exit_code == 0, result.output
    transcript, row, summary = read(workspace / "reports" / "off")
    [turn] = transcript["turns"]
    assert turn["agent_text"] == AS_TEXT and turn["tool_calls"] == [] and not turn["accepted"]
    assert turn["agent_notes"] == [{"kind": "tool_call_as_text", "model_call": 1, "form": "json",
                                    "tools": ["DescribeInstance"]}]
    assert row["agent_notes"] == {"tool_call_as_text": 1}
    assert summary["agent_notes"] == {"tool_call_as_text": 1}

    rescored = CliRunner().invoke(app, ["rescore", "off", "--judge-model", "local", "--run-id", "off-local",
                                        "-w", str(workspace), "-q"])
    assert rescored.exit_code == 0, rescored.output
    transcript, _, _ = read(workspace / "reports" / "off-local")
    assert transcript["turns"][0]["agent_notes"] == turn["agent_notes"]


def test_on_the_call_is_replayed_and_marked_read_from_text(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-notes")
    workspace = workspace_with_a_tool_task(tmp_path)

    async def main(server: ChatServer) -> dict:
        role = RoleConfig(Endpoint("agent", server.base_url, KEY_ENV), retry_initial_wait=0.01)
        async with ChatClient(role) as client:
            agent = OpenAIAgent(client, text_tool_calls=True)
            settings = EvalSettings(workspace=workspace, run_id="on", runs=1, pass_k=1, concurrency=1,
                                    progress=False, fingerprint_extra={"agent_role": agent.fingerprint()})
            return await run_eval(settings, agent, LocalCoverageJudge(), LocalFluencyChecker())

    with ChatServer(rule=rule) as server:
        summary = asyncio.run(main(server))
    transcript, row, _ = read(workspace / "reports" / "on")
    first = transcript["turns"][0]
    assert first["accepted"] and first["agent_text"] == "ANSWER-1"
    assert first["tool_calls"] == [{"name": "DescribeInstance", "arguments": TOOL_ARGS,
                                    "result": {"status": "Running"}, "recorded": True, "error": None,
                                    "read_from_text": "json"}]
    assert first["agent_notes"][0]["kind"] == "tool_call_read_from_text"
    assert row["agent_notes"] == {"tool_call_read_from_text": 1} and row["turns"][0]["tia"]
    assert summary["agent_notes"] == {"tool_call_read_from_text": 1}
    run = json.loads((workspace / "reports" / "on" / "run.json").read_text())
    assert run["fingerprint"]["agent_role"]["text_tool_calls"] is True
