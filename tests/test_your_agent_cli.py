"""`cirrus eval` with your own agent (issue 24): a model behind your own
`[agent]` (prompt template, renamed tools and arguments, the workspace's
whole tool set, a paraphrased free-text argument matched as ignored, a
label), an agent service (`--agent-url`) and a Python factory (`--agent`),
all through the command line against doubles on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.schema import ToolExchange
from tests.agent_server import AgentServer, from_chat_reply
from tests.chat_server import ChatServer, Reply, tool_calls
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY = "sk-your-agent-cli-0123456789"
REFUND_ARGS = {"order_id": "OD-***41", "reason": "the fridge arrived dented"}
REFUND = {"type": "function", "function": {"name": "CreateRefund", "description": "Refund an order", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["order_id", "reason"]}}}
AGENT_TOML = """\
[domain]
description = "an online home-appliance shop"

[agent]
label = "v2.3"
system_prompt = "You are Mia of {{ domain }}. Tools: {% for t in tools %}{{ t.name }} {% endfor %}"
knowledge = "none"

[agent.tools.CreateRefund]
name = "refund_order"
description = "Refund one order"
arguments = { order = "order_id", why = "reason" }
match = { reason = "ignored" }
"""


def refund_task() -> dict:
    return {"task_id": "T-refund", "category": "Returns", "knowledge": [{"doc_id": "kb", "title": "Refunds",
                                                                         "text": "Refunds take 3 days."}],
            "tools": [REFUND], "history": [], "cassette": "tool_mocks/T-refund.yaml",
            "checkpoints": [{"index": 1, "query": "customer question 1: refund my dented fridge please",
                             "reply": "ANSWER-1", "tool_calls": [{"name": "CreateRefund", "arguments": REFUND_ARGS}],
                             "reply_type": "Solution"}],
            "stats": {"input_tokens": 10, "turns": 2, "checkpoints": 1}}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = write_workspace(tmp_path, [make_task("T-plain", False)])
    with (ws / "tickets/tasks.jsonl").open("a") as out:
        out.write(json.dumps(refund_task()) + "\n")
    write_cassette(ws / "tool_mocks/T-refund.yaml", build_cassette([
        ToolExchange("c1", "CreateRefund", REFUND_ARGS, [{"refund_id": "RF-1", "status": "issued"}])]))
    return ws


def your_model(body: dict) -> Reply | str:
    answer = judge_or_fluency(body)
    if answer is not None:
        return answer
    last = body["messages"][-1]
    k = sum(1 for m in body["messages"] if m["role"] == "user")
    if last["role"] == "user" and "refund" in last["content"]:  # your tool names, a paraphrased reason
        return tool_calls(("refund_order", {"order": "OD-***41", "why": "customer says the door is dented"}))
    return Reply(content=f"ANSWER-{k}")


def run(ws: Path, *args: str) -> object:
    result = CliRunner().invoke(app, ["eval", *args, "-w", str(ws), "-q"], env={"YOUR_KEY": KEY})
    return result


def test_your_prompt_tools_and_names_replay_and_score(workspace):
    (workspace / "cirrus.toml").write_text(AGENT_TOML, encoding="utf-8")
    with ChatServer(rule=your_model) as server:
        result = run(workspace, "--model", "mine", "--base-url", server.base_url, "--api-key-env", "YOUR_KEY",
                     "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "mine")
        assert result.exit_code == 0, result.output
        agent_calls = [r for r in server.requests if r["model"] == "mine" and "customer question" in json.dumps(
            r["messages"])]
    system = {r["messages"][0]["content"] for r in agent_calls}
    assert system == {"You are Mia of an online home-appliance shop. Tools: refund_order"}  # rendered, no knowledge
    assert all(len([m for m in r["messages"] if m["role"] == "system"]) == 1 for r in agent_calls)
    # the whole tool set, under your names, in every task (the plain task's ticket called no tool)
    for request in agent_calls:
        (tool,) = request["tools"]
        assert tool["function"]["name"] == "refund_order" and tool["function"]["description"] == "Refund one order"
        assert set(tool["function"]["parameters"]["properties"]) == {"order", "why"}
        assert "x-cirrus-match" not in json.dumps(tool)
    turns = pl.read_parquet(workspace / "reports/mine/checkpoints.parquet")
    refund = turns.filter(pl.col("task_id") == "T-refund").row(0, named=True)
    assert (refund["tia"], refund["tsa"], refund["tev"], refund["accepted"]) == (True, True, True, True)
    transcript = [json.loads(line) for line in (workspace / "reports/mine/transcripts.jsonl").read_text().splitlines()]
    (call,) = next(t for t in transcript if t["task_id"] == "T-refund")["turns"][0]["tool_calls"]
    # replayed, and recorded for the scores, as the recorded call it maps to
    assert call["name"] == "CreateRefund" and call["recorded"] is True and call["result"]["refund_id"] == "RF-1"
    assert call["arguments"] == {"order_id": "OD-***41", "reason": "customer says the door is dented"}
    run_json = json.loads((workspace / "reports/mine/run.json").read_text())
    assert run_json["agent_label"] == "v2.3" and run_json["fingerprint"]["agent_config"]
    # the report shows the label, and warns that the runs evaluate different agent setups
    base = run(workspace, "--model", "baseline:oracle", "--run-id", "base")
    assert base.exit_code == 0, base.output
    assert "agent_config" not in json.loads((workspace / "reports/base/run.json").read_text())["fingerprint"]
    report = CliRunner().invoke(app, ["report", "mine", "base", "-w", str(workspace), "--bootstrap", "0"])
    assert report.exit_code == 0, report.output
    board = pl.read_parquet(workspace / "reports/_compare/mine+base/leaderboard.parquet")
    assert board.select("run_id", "agent_label").rows() == [("mine", "v2.3"), ("base", None)]
    assert "differ in agent configuration" in " ".join(report.output.split())
    page = (workspace / "reports/_compare/mine+base/report.html").read_text(encoding="utf-8")
    assert '<span class="muted" title="agent label">v2.3</span>' in page
    # a resume with another [agent] is refused: the agent would see something else
    (workspace / "cirrus.toml").write_text(AGENT_TOML.replace('knowledge = "none"', 'knowledge = "system"'))
    with ChatServer(rule=your_model) as server:
        again = run(workspace, "--model", "mine", "--base-url", server.base_url, "--api-key-env", "YOUR_KEY",
                    "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "mine")
    assert again.exit_code == 2 and "agent_config" in again.output
    # a template using a variable it does not have fails before the run, naming the ones it may use
    (workspace / "cirrus.toml").write_text(AGENT_TOML.replace("{{ domain }}", "{{ reference_reply }}"))
    bad = run(workspace, "--model", "mine", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "YOUR_KEY",
              "--judge-model", "local", "--run-id", "bad")
    assert bad.exit_code == 2 and "'reference_reply' is undefined" in bad.output
    assert not (workspace / "reports/bad").exists()


def test_an_agent_service_and_a_python_factory_from_the_command_line(workspace):
    with ChatServer(rule=lambda body: judge_or_fluency(body)) as judges, \
            AgentServer(rule=lambda body: from_chat_reply(agent_reply("perfect", body)),
                        info={"protocol": "cirrus-agent/1", "name": "shop-bot", "version": "4.1"}) as service:
        common = ("--judge-model", "judge", "--fluency-model", "fluency", "--base-url", judges.base_url,
                  "--api-key-env", "YOUR_KEY", "--agent-label", "build-77")
        http = run(workspace, "--agent-url", service.url, "--run-id", "svc", *common)
        assert http.exit_code == 0, http.output
        python = run(workspace, "--agent", "tests.agent_factories:make_agent", "--run-id", "py", *common)
        assert python.exit_code == 0, python.output
        both = run(workspace, "--agent", "tests.agent_factories:make_agent", "--model", "m", "--run-id", "x")
        assert both.exit_code == 2 and "--model and --agent were both given" in both.output
        bad = run(workspace, "--agent", "tests.agent_factories", "--run-id", "y", *common)
        assert bad.exit_code == 2 and "is not MODULE:FACTORY:" in bad.output  # printed as written, no emoji
    svc = json.loads((workspace / "reports/svc/run.json").read_text())
    assert (svc["agent_kind"], svc["agent_label"], svc["agent_service"]["version"]) == ("http", "build-77", "4.1")
    assert json.loads((workspace / "reports/py/run.json").read_text())["agent_kind"] == "python"
    for run_id in ("svc", "py"):
        summary = json.loads((workspace / f"reports/{run_id}/summary.json").read_text())
        assert summary["attempts"] == 2 and summary["errors"] == 0
    assert KEY.encode() not in b"".join(p.read_bytes() for p in (workspace / "reports").rglob("*") if p.is_file())


def test_an_agent_service_that_is_not_there_stops_before_the_run(workspace):
    result = run(workspace, "--agent-url", "http://127.0.0.1:9/agent", "--judge-model", "local", "--run-id", "gone")
    assert result.exit_code == 1 and "cannot start" in result.output
    assert not (workspace / "reports/gone").exists()


def test_cirrus_tools_serve_answers_until_stopped(workspace):
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx

    process = subprocess.Popen([sys.executable, "-m", "cirrus.cli", "tools", "serve", "-w", str(workspace),
                                "--port", "0"], stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        line = process.stderr.readline()
        assert "serving the tools of 2 task(s)" in line, line
        url = line.split(" at ")[1].split()[0]
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"{url}/health", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert health.status_code == 200 and url.startswith("http://127.0.0.1:")
        session = httpx.post(f"{url}/sessions", json={"task_id": "T-refund"}).json()
        answer = httpx.post(f"{url}/sessions/{session['session']}/tools/CreateRefund", json=REFUND_ARGS)
        assert answer.json() == {"result": {"refund_id": "RF-1", "status": "issued"}}
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def test_an_agent_that_calls_its_tools_itself_at_the_tool_server(workspace):
    import httpx

    from tests.agent_server import Answer
    made = []

    def calls_its_own_tools(body: dict) -> Answer:
        where = body.get("tool_server")
        assert where is not None and where["url"].startswith("http://127.0.0.1:")
        k = sum(1 for m in body["messages"] if m["role"] == "user")
        if body["task"]["task_id"] == "T-refund" and k == 1:  # the refund, made at the tool server itself
            answer = httpx.post(f"{where['url']}/CreateRefund", json=REFUND_ARGS, timeout=10).json()
            made.append(answer)
            return Answer(content=f"ANSWER-1 (refund {answer['result']['refund_id']})")
        return Answer(content=f"ANSWER-{k}")

    with ChatServer(rule=lambda body: judge_or_fluency(body)) as judges, \
            AgentServer(rule=calls_its_own_tools) as service:
        result = run(workspace, "--agent-url", service.url, "--tool-server", "--run-id", "self", "--judge-model",
                     "judge", "--fluency-model", "fluency", "--base-url", judges.base_url, "--api-key-env", "YOUR_KEY",
                     "--pass-k", "2")
        assert result.exit_code == 0, result.output
    refund = {"result": {"refund_id": "RF-1", "status": "issued"}}
    assert made == [refund] * 2  # once per attempt, each in its own session
    turns = pl.read_parquet(workspace / "reports/self/checkpoints.parquet")
    tool_turns = turns.filter((pl.col("task_id") == "T-refund") & (pl.col("checkpoint") == 1))
    assert tool_turns.select("tia", "tsa", "tev", "accepted").rows() == [(True, True, True, True)] * 2
    summary = json.loads((workspace / "reports/self/summary.json").read_text())
    assert summary["errors"] == 0 and summary["atpr"] == 1.0
    transcript = [json.loads(line) for line in (workspace / "reports/self/transcripts.jsonl").read_text().splitlines()]
    calls = [c for t in transcript if t["task_id"] == "T-refund" for c in t["turns"][0]["tool_calls"]]
    assert [(c["name"], c["recorded"], c["result"]) for c in calls] == [("CreateRefund", True, refund["result"])] * 2


def test_text_tool_calls_from_the_command_line(workspace):
    def writes_calls_as_text(body: dict) -> Reply | str:
        answer = judge_or_fluency(body)
        if answer is not None:
            return answer
        last = body["messages"][-1]
        k = sum(1 for m in body["messages"] if m["role"] == "user")
        if last["role"] == "user" and "refund" in last["content"]:  # as small local models do: JSON in the text
            return Reply(content=json.dumps({"name": "CreateRefund", "arguments": REFUND_ARGS}))
        return Reply(content=f"ANSWER-{k}")

    common = ("--base-url", "", "--api-key-env", "YOUR_KEY", "--judge-model", "judge", "--fluency-model", "fluency")
    with ChatServer(rule=writes_calls_as_text) as server:
        args = tuple(server.base_url if a == "" else a for a in common)
        read = run(workspace, "--model", "small", "--text-tool-calls", "--run-id", "read", *args)
        assert read.exit_code == 0, read.output
        off = run(workspace, "--model", "small", "--run-id", "off", *args)
        assert off.exit_code == 0, off.output
    for run_id, expected in (("read", (True, True, True)), ("off", (False, False, False))):
        turns = pl.read_parquet(workspace / f"reports/{run_id}/checkpoints.parquet")
        refund = turns.filter(pl.col("task_id") == "T-refund").row(0, named=True)
        assert (refund["tia"], refund["tsa"], refund["tev"]) == expected, run_id
    assert json.loads((workspace / "reports/read/run.json").read_text())["fingerprint"]["agent_role"][
        "text_tool_calls"] is True
