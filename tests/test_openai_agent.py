from __future__ import annotations

import asyncio
import json

import pytest

from cirrus.agents import prompts
from cirrus.agents.openai_agent import OpenAIAgent
from cirrus.evaluate.types import InfrastructureError, TurnRequest
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from cirrus.offline import count_tokens
from cirrus.replay import ToolReplayer
from cirrus.schema import ToolExchange
from tests.chat_server import OMIT, ChatServer, Reply, text, tool_calls

KEY_ENV = "CIRRUS_TEST_AGENT_KEY"

TOOLS = [
    {"type": "function", "function": {
        "name": "DescribeInstanceStatus", "description": "State of an instance",
        "parameters": {"type": "object", "properties": {"instance_id": {"type": "string"}},
                       "required": ["instance_id"]}}},
    {"type": "function", "function": {
        "name": "GetMetrics", "description": "A metric of an instance",
        "parameters": {"type": "object",
                       "properties": {"instance_id": {"type": "string"}, "metric": {"type": "string"}}}}},
]
STATUS_ARGS = {"instance_id": "i-bp1****x"}
METRIC_ARGS = {"instance_id": "i-bp1****x", "metric": "cpu"}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-agent-test")


@pytest.fixture
def workspace(tmp_path):
    cassette = build_cassette([
        ToolExchange("c1", "DescribeInstanceStatus", STATUS_ARGS, [{"status": "Running"}]),
        ToolExchange("c2", "GetMetrics", METRIC_ARGS, [{"cpu": 97.5}]),
    ])
    write_cassette(tmp_path / "tool_mocks" / "T-1.yaml", cassette)
    return tmp_path


def make_task(**overrides):
    task = {
        "task_id": "T-1", "category": "ECS", "channel": "online-chat", "language": "en",
        "knowledge": [{"doc_id": "kb-1", "title": "High CPU on an instance", "text": "Check top; upgrade the type."}],
        "tools": TOOLS,
        "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! How can I help?"}],
        "checkpoints": [], "cassette": "tool_mocks/T-1.yaml", "stats": {},
    }
    task.update(overrides)
    return task


def respond(server, workspace, task, query="my server i-bp1****x is slow", history=None, **agent_kw):
    async def main():
        role = RoleConfig(Endpoint("agent-model", server.base_url, KEY_ENV), temperature=0.2,
                          retry_initial_wait=0.01, max_retries=1)
        async with ChatClient(role) as client:
            agent = OpenAIAgent(client, **agent_kw)
            with ToolReplayer.for_task(workspace, task) as replayer:
                request = TurnRequest(task=task, history=task["history"] if history is None else history,
                                      query=query, attempt=0)
                return await agent.respond(request, replayer)
    return asyncio.run(main())


def test_two_tool_rounds_then_text(workspace):
    task = make_task()
    script = [
        tool_calls(("DescribeInstanceStatus", STATUS_ARGS), prompt_tokens=100, completion_tokens=30,
                   reasoning_tokens=20),
        tool_calls(("GetMetrics", METRIC_ARGS), content="Let me look at the CPU.", prompt_tokens=150,
                   completion_tokens=25, reasoning_tokens=10),
        text("Your instance is running but its CPU is at 97.5%.", prompt_tokens=200, completion_tokens=40,
             reasoning_tokens=12),
    ]
    with ChatServer(script) as server:
        turn = respond(server, workspace, task)
    assert turn.text == "Your instance is running but its CPU is at 97.5%."
    assert turn.model_calls == 3
    # STL: usage.completion_tokens of every call, which already holds the reasoning tokens
    assert turn.output_tokens == 30 + 25 + 40
    assert turn.input_tokens == 100 + 150 + 200
    assert turn.wall_s > 0 and turn.ttft_s is None
    assert [(c.name, c.arguments, c.result, c.recorded) for c in turn.tool_calls] == [
        ("DescribeInstanceStatus", STATUS_ARGS, {"status": "Running"}, True),
        ("GetMetrics", METRIC_ARGS, {"cpu": 97.5}, True),
    ]
    assert [m["role"] for m in turn.messages] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert turn.messages[1] == {"role": "tool", "tool_call_id": turn.messages[0]["tool_calls"][0]["id"],
                                "content": json.dumps({"status": "Running"})}
    assert turn.messages[2]["content"] == "Let me look at the CPU."

    first, second, third = server.requests
    assert first["model"] == "agent-model" and first["temperature"] == 0.2 and first["tools"] == TOOLS
    assert "tool_choice" not in first
    system = first["messages"][0]
    assert system["role"] == "system" and prompts.SYSTEM_PROMPT in system["content"]
    assert "High CPU on an instance" in system["content"] and "Check top; upgrade the type." in system["content"]
    assert first["messages"][1:] == [*task["history"], {"role": "user", "content": "my server i-bp1****x is slow"}]
    assert second["messages"][-2:] == turn.messages[:2]
    assert third["messages"][-4:] == turn.messages[:4]
    # the turn's messages are valid history for the next turn
    with ChatServer(["Anything else?"]) as server:
        history = [*task["history"], {"role": "user", "content": "q"}, *turn.messages]
        later = respond(server, workspace, task, query="thanks", history=history)
    assert later.text == "Anything else?"
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "thanks"}


def test_missing_usage_falls_back_to_tiktoken(workspace):
    task = make_task()
    script = [
        tool_calls(("DescribeInstanceStatus", STATUS_ARGS), usage=OMIT),
        text("It is running.", usage=OMIT),
    ]
    with ChatServer(script) as server:
        turn = respond(server, workspace, task)
    call_tokens = count_tokens("DescribeInstanceStatus") + count_tokens(json.dumps(STATUS_ARGS))
    assert turn.output_tokens == call_tokens + count_tokens("It is running.")
    assert turn.input_tokens > 0  # estimated from the request's messages


def test_usage_without_completion_tokens_counts_only_that_call(workspace):
    task = make_task(tools=[])
    with ChatServer([Reply(content="Hello there", usage={"prompt_tokens": 5, "total_tokens": 5})]) as server:
        turn = respond(server, workspace, task)
    assert turn.output_tokens == count_tokens("Hello there")
    assert "tools" not in server.requests[0]


def test_unrecorded_call_gets_a_no_recorded_result_tool_message(workspace):
    task = make_task()
    script = [
        tool_calls(("DescribeInstanceStatus", {"instance_id": "i-unknown"}), ("Reboot", "{not json")),
        text("I could not find that instance."),
    ]
    with ChatServer(script) as server:
        turn = respond(server, workspace, task)
    unknown, broken = turn.tool_calls
    assert unknown.name == "DescribeInstanceStatus" and unknown.arguments == {"instance_id": "i-unknown"}
    assert not unknown.recorded and unknown.result is None and "no recorded result" in unknown.error
    assert broken.name == "Reboot" and broken.arguments == "{not json" and not broken.recorded
    tool_messages = [m for m in turn.messages if m["role"] == "tool"]
    assert len(tool_messages) == 2
    for message in tool_messages:
        assert "no recorded result" in json.loads(message["content"])["error"]
    assert turn.text == "I could not find that instance."
    assert server.requests[1]["messages"][-2:] == tool_messages


def test_task_without_cassette(workspace):
    task = make_task(cassette=None)
    with ChatServer([tool_calls(("DescribeInstanceStatus", STATUS_ARGS)), text("done")]) as server:
        turn = respond(server, workspace, task)
    assert not turn.tool_calls[0].recorded and turn.text == "done"


def test_tool_call_limit_ends_the_turn(workspace):
    task = make_task()
    always_calls = lambda body: tool_calls(("DescribeInstanceStatus", STATUS_ARGS), completion_tokens=3)  # noqa: E731
    with ChatServer(rule=always_calls) as server:
        turn = respond(server, workspace, task, max_model_calls=4)
    assert turn.model_calls == 4 and len(server.requests) == 4
    assert [r.get("tool_choice") for r in server.requests] == [None, None, None, "none"]
    assert turn.text == "" and turn.output_tokens == 12
    # the server ignored tool_choice="none": the calls it made anyway are still replayed and recorded
    assert len(turn.tool_calls) == 4 and all(c.recorded for c in turn.tool_calls)
    assert turn.tool_calls[-1].result == {"status": "Running"}  # the last recorded answer, repeated


def test_last_allowed_call_asks_for_text(workspace):
    task = make_task()

    def rule(body):
        if body.get("tool_choice") == "none":
            return "Here is what I found."
        return tool_calls(("DescribeInstanceStatus", STATUS_ARGS))

    with ChatServer(rule=rule) as server:
        turn = respond(server, workspace, task)  # default limit: 8 model calls
    assert turn.model_calls == 8 and turn.text == "Here is what I found."
    assert len(turn.tool_calls) == 7 and turn.messages[-1] == {"role": "assistant", "content": "Here is what I found."}


def test_api_failure_is_an_infrastructure_error(workspace):
    with ChatServer(rule=lambda body: 503) as server:
        with pytest.raises(InfrastructureError, match="503"):
            respond(server, workspace, make_task())


def test_fingerprint_changes_with_the_prompt_and_parameters():
    role = RoleConfig(Endpoint("agent-model", "http://127.0.0.1:9/v1", None), temperature=0.2)
    base = OpenAIAgent(ChatClient(role)).fingerprint()
    assert base == OpenAIAgent(ChatClient(role)).fingerprint()
    assert base != OpenAIAgent(ChatClient(role), system_prompt="other").fingerprint()
    assert base != OpenAIAgent(ChatClient(role.with_params(temperature=0.9))).fingerprint()
    assert base != OpenAIAgent(ChatClient(role), max_model_calls=3).fingerprint()


@pytest.mark.parametrize("raw", ['{"size": 1e999}', '{"size": NaN}', '{"size": -Infinity}'])
def test_arguments_json_cannot_hold_stay_raw_text_so_transcripts_stay_json(raw):
    """A model's ``1e999`` must not become a float that is written as a bare
    ``Infinity`` (refused by other JSON parsers) in transcripts.jsonl."""
    from cirrus.agents.openai_agent import OpenAIAgent
    from cirrus.evaluate.types import AgentTurn
    from cirrus.replay import ToolReplayer

    turn = AgentTurn("")
    message = OpenAIAgent._run_tool({"id": "c1", "function": {"name": "Resize", "arguments": raw}},
                                    ToolReplayer(None), turn)
    assert turn.tool_calls[0].arguments == raw and message["role"] == "tool"
    json.dumps({"arguments": turn.tool_calls[0].arguments}, allow_nan=False)  # standard JSON
