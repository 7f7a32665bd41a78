"""The HTTP agent (cirrus.agents.http_agent) against a scripted agent service
on 127.0.0.1 (tests/agent_server.py): the protocol's bodies, tool rounds,
usage and STL, retries, timeouts, errors and credentials."""

from __future__ import annotations

import asyncio
import json
import socket

import jsonschema
import pytest

from cirrus.agents import http_protocol, prompts
from cirrus.agents.http_agent import HttpAgent, HttpAgentConfig
from cirrus.evaluate.types import InfrastructureError, TurnRequest
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.llm.providers import EndpointError, ModelAuthError
from cirrus.offline import count_tokens
from cirrus.replay import ToolReplayer
from cirrus.schema import ToolExchange
from cirrus.usage import UsageLedger, recording
from tests.agent_factories import RenamedTools
from tests.agent_server import AgentServer, Answer
from tests.moving_clock import moving_clock

TOOLS = [
    {"type": "function", "function": {
        "name": "DescribeInstanceStatus", "description": "State of an instance",
        "parameters": {"type": "object", "properties": {"instance_id": {"type": "string"}},
                       "required": ["instance_id"]}}},
]
STATUS_ARGS = {"instance_id": "i-bp1****x"}
REFERENCE = "REFERENCE-REPLY-never-sent"
TOKEN = "agent-token-0123456789abcdef"


@pytest.fixture
def workspace(tmp_path):
    cassette = build_cassette([ToolExchange("c1", "DescribeInstanceStatus", STATUS_ARGS, [{"status": "Running"}])])
    write_cassette(tmp_path / "tool_mocks" / "T-1.yaml", cassette)
    return tmp_path


def make_task(**overrides):
    task = {
        "task_id": "T-1", "category": "ECS", "channel": "online-chat", "language": "en",
        "knowledge": [{"doc_id": "kb-1", "title": "High CPU", "text": "Check top; upgrade the type."}],
        "tools": TOOLS,
        "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! How can I help?"}],
        "checkpoints": [{"index": 1, "query": "my server is slow", "reply": REFERENCE, "reply_type": "Solution",
                         "tool_calls": [{"name": "DescribeInstanceStatus", "arguments": STATUS_ARGS}]},
                        {"index": 2, "query": "LATER-QUERY-never-sent", "reply": "LATER-REFERENCE",
                         "reply_type": "Solution", "tool_calls": []}],
        "cassette": "tool_mocks/T-1.yaml", "stats": {"input_tokens": 1, "turns": 2, "checkpoints": 2},
    }
    task.update(overrides)
    return task


def config(server: AgentServer, **kw) -> HttpAgentConfig:
    return HttpAgentConfig(kw.pop("url", server.url), **{"retry_initial_wait": 0.01, "max_retries": 1, **kw})


def respond(server, workspace, task=None, *, query="my server is slow", agent=None, **kw):
    """One turn through an HttpAgent; (turn, usage ledger, agent)."""
    task = task or make_task()

    async def main():
        used = agent or HttpAgent(config(server, **kw))
        try:
            with recording(UsageLedger()) as ledger, ToolReplayer.for_task(workspace, task) as replayer:
                turn = await used.respond(TurnRequest(task, task["history"], query, 1), replayer)
        finally:
            await used.aclose()
        return turn, ledger, used
    return asyncio.run(main())


def reply_with_tool_result(body):
    """The real thing: read the tool result Cirrus sent back and answer with it."""
    result = json.loads(body["messages"][-1]["content"])
    return Answer(content=f"Your instance is {result['status']}.",
                  usage={"prompt_tokens": 120, "completion_tokens": 9})


def test_a_tool_round_then_a_reply_that_uses_the_result(workspace):
    script = [Answer(tool_calls=[("DescribeInstanceStatus", STATUS_ARGS)],
                     usage={"prompt_tokens": 100, "completion_tokens": 7,
                            "completion_tokens_details": {"reasoning_tokens": 2}})]
    with AgentServer(script, rule=reply_with_tool_result) as server:
        turn, ledger, _ = respond(server, workspace)
    assert turn.text == "Your instance is Running."
    assert [(c.name, c.arguments, c.result, c.recorded) for c in turn.tool_calls] == [
        ("DescribeInstanceStatus", STATUS_ARGS, {"status": "Running"}, True)]
    assert turn.model_calls == 2 and turn.output_tokens == 7 + 9 and turn.input_tokens == 100 + 120
    assert [m["role"] for m in turn.messages] == ["assistant", "tool", "assistant"]
    usage = ledger.clients["agent"]
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (2, 220, 16, 2)

    first, second = server.requests
    request_schema = http_protocol.schema("request")
    for body in (first, second):
        jsonschema.validate(body, request_schema)
    assert first["protocol"] == "cirrus-agent/1" and first["round"] == 1 and not first["last_round"]
    assert first["task"] == {"task_id": "T-1", "category": "ECS", "channel": "online-chat", "language": "en",
                             "attempt": 1}
    assert first["messages"] == [*make_task()["history"], {"role": "user", "content": "my server is slow"}]
    assert first["tools"] == TOOLS and first["knowledge"] == make_task()["knowledge"]
    assert second["round"] == 2 and second["session_id"] == first["session_id"]
    assert second["request_id"] != first["request_id"]
    assert second["messages"][-2:] == turn.messages[:2]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "t1-0",
                                      "content": json.dumps({"status": "Running"})}
    # never the references, the queries to come or the recording
    sent = json.dumps(server.requests)
    for secret in (REFERENCE, "LATER-QUERY-never-sent", "LATER-REFERENCE", "tool_mocks", "checkpoints"):
        assert secret not in sent


def test_an_unknown_tool_gets_the_no_recorded_result_error_as_model_agents_do(workspace):
    script = [Answer(tool_calls=[("DeleteEverything", {"confirm": True}), ("DescribeInstanceStatus", "{not json")],
                     ids=False),
              "I could not do that."]
    with AgentServer(script) as server:
        turn, _, _ = respond(server, workspace)
    unknown, broken = turn.tool_calls
    assert (unknown.name, unknown.arguments, unknown.recorded) == ("DeleteEverything", {"confirm": True}, False)
    assert "no recorded result" in unknown.error
    assert (broken.arguments, broken.recorded) == ("{not json", False)
    tool_messages = server.requests[1]["messages"][-2:]
    assert [m["content"] for m in tool_messages] == [prompts.no_recorded_result_content()] * 2
    assert [m["tool_call_id"] for m in tool_messages] == ["call_1_0", "call_1_1"]  # made up: the agent sent none
    assert turn.text == "I could not do that."


def test_without_usage_stl_is_counted_and_nothing_is_billed(workspace):
    script = [Answer(tool_calls=[("DescribeInstanceStatus", STATUS_ARGS)]), "It is running."]
    with AgentServer(script) as server:
        turn, ledger, _ = respond(server, workspace)
    call_tokens = count_tokens("DescribeInstanceStatus") + count_tokens(json.dumps(STATUS_ARGS))
    assert turn.output_tokens == call_tokens + count_tokens("It is running.")
    assert turn.input_tokens > 0  # what Cirrus sent, counted
    assert "agent" not in ledger.clients  # no usage reported: no call priced as free


def test_the_turn_ends_after_max_rounds(workspace):
    always_tools = Answer(content="checking", tool_calls=[("DescribeInstanceStatus", STATUS_ARGS)])
    with AgentServer(rule=lambda body: always_tools) as server:
        turn, _, _ = respond(server, workspace, max_rounds=2)
    assert [r["last_round"] for r in server.requests] == [False, True]
    assert [r["max_rounds"] for r in server.requests] == [2, 2]
    assert turn.model_calls == 2 and len(turn.tool_calls) == 2 and turn.text == "checking"
    assert {"kind": "max_rounds", "rounds": 2} in turn.notes


def test_a_500_is_retried_with_the_same_request_id(workspace):
    with AgentServer([500, "fine"]) as server:
        turn, _, _ = respond(server, workspace)
    assert turn.text == "fine"
    assert len(server.requests) == 2 and server.requests[0]["request_id"] == server.requests[1]["request_id"]


def test_a_429_waits_for_retry_after(workspace):
    with AgentServer([Answer(status=429, headers={"Retry-After": "0.3"}), "fine"]) as server:
        turn, _, _ = respond(server, workspace)
    assert turn.text == "fine"
    assert server.times[1] - server.times[0] >= 0.3  # the backoff alone would be ~0.01 s


def test_malformed_json_is_retried_then_an_infrastructure_error_naming_the_url(workspace):
    with AgentServer([Answer(body="{not json"), "fine"]) as server:
        assert respond(server, workspace)[0].text == "fine"
    with AgentServer(rule=lambda body: Answer(body='{"message": {"content": "cut')) as server:
        with pytest.raises(InfrastructureError) as error:
            respond(server, workspace)
    assert len(server.requests) == 2
    assert f"the agent service at {server.url} failed after 2 attempts: malformed answer: the body is not JSON" \
        in str(error.value)


@pytest.mark.parametrize(("body", "problem"), [
    ({"reply": "hi"}, "message: Field required"),
    ({"message": {"content": 5}}, "message.content"),
    ({"message": {"content": None, "tool_calls": [{"function": {"arguments": "{}"}}]}},
     "message.tool_calls.0.function.name: Field required"),
    ({"message": {"content": "x"}, "usage": {"completion_tokens": -1}}, "usage.completion_tokens"),
    (["not", "an", "object"], "a JSON array, not an object"),
])
def test_an_answer_breaking_the_protocol_is_an_infrastructure_error(workspace, body, problem):
    with AgentServer(rule=lambda _: Answer(body=body)) as server:
        with pytest.raises(InfrastructureError) as error:
            respond(server, workspace, max_retries=0)
    assert problem in str(error.value) and server.url in str(error.value)
    assert "docs/agent-protocol.md" in str(error.value) or "not an object" in str(error.value)


def test_a_service_slower_than_the_timeout_is_an_infrastructure_error(workspace):
    with AgentServer(rule=lambda _: Answer(hang=True)) as server:
        with pytest.raises(InfrastructureError) as error:
            respond(server, workspace, timeout=0.2, max_retries=0)
    assert "timed out: no complete answer within the 0.2 s timeout" in str(error.value)
    with moving_clock() as clock, AgentServer([Answer(hang=True), "late but fine"], on_stall=clock.jump) as server:
        assert respond(server, workspace, timeout=30.0)[0].text == "late but fine"


def test_nothing_listening_says_so(workspace):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with AgentServer() as server:
        url = f"http://127.0.0.1:{port}/agent"
        with pytest.raises(InfrastructureError, match=f"nothing listens at {url}"):
            respond(server, workspace, url=url)


def test_401_stops_the_run_and_no_token_is_shown(workspace, monkeypatch):
    monkeypatch.setenv("CIRRUS_TEST_AGENT_TOKEN", TOKEN)
    with AgentServer([Answer(status=401, error_message=f"bad token {TOKEN}")]) as server:
        with pytest.raises(ModelAuthError) as error:
            respond(server, workspace, auth_env="CIRRUS_TEST_AGENT_TOKEN")
    assert len(server.requests) == 1  # never retried
    assert server.headers[0]["authorization"] == f"Bearer {TOKEN}"
    assert "CIRRUS_TEST_AGENT_TOKEN" in str(error.value) and "--agent-auth-env" in str(error.value)
    assert TOKEN not in str(error.value)


def test_a_token_echoed_in_an_error_is_masked_and_a_custom_header_carries_it(workspace, monkeypatch):
    monkeypatch.setenv("CIRRUS_TEST_AGENT_TOKEN", TOKEN)
    with AgentServer(rule=lambda _: Answer(status=500, error_message=f"header was {TOKEN}")) as server:
        with pytest.raises(InfrastructureError) as error:
            respond(server, workspace, auth_env="CIRRUS_TEST_AGENT_TOKEN", auth_header="X-API-Key")
    assert server.headers[0]["x-api-key"] == TOKEN and "authorization" not in server.headers[0]
    assert TOKEN not in str(error.value) and "header was ***" in str(error.value)


def test_a_missing_token_variable_is_named():
    with pytest.raises(EndpointError, match="set the environment variable CIRRUS_NO_SUCH_TOKEN"):
        HttpAgent(HttpAgentConfig("http://127.0.0.1:9/agent", auth_env="CIRRUS_NO_SUCH_TOKEN"))


def test_credentials_in_the_url_are_masked_everywhere(workspace):
    with AgentServer(rule=lambda _: 503) as server:
        url = server.url.replace("http://", "http://user:s3cr3t-pass@") + "?token=s3cr3t-query"
        agent = HttpAgent(config(server, url=url, max_retries=0))
        with pytest.raises(InfrastructureError) as error:
            respond(server, workspace, agent=agent)
    shown = json.dumps([str(error.value), agent.name, agent.fingerprint(), agent.details()])
    assert "s3cr3t" not in shown and "***@127.0.0.1" in shown and "token=***" in shown


def test_fingerprint_and_details():
    agent = HttpAgent(HttpAgentConfig("http://127.0.0.1:9/agent", max_rounds=3, name="helpdesk-bot"))
    assert agent.name == "helpdesk-bot" and agent.offline is False
    assert agent.fingerprint() == {"kind": "http", "url": "http://127.0.0.1:9/agent", "protocol": "cirrus-agent/1",
                                   "max_rounds": 3}
    assert HttpAgent(HttpAgentConfig("http://127.0.0.1:9/agent")).name == "agent@127.0.0.1:9/agent"
    for bad in ("ftp://host/x", "not a url", "http:///path", "http://[bad"):
        with pytest.raises(ValueError, match="not an http"):
            HttpAgentConfig(bad)


def test_describe_reads_the_services_info_and_refuses_another_protocol():
    async def describe(server):
        async with HttpAgent(HttpAgentConfig(server.url, retry_initial_wait=0.01, max_retries=0)) as agent:
            return await agent.describe(), agent.details()

    with AgentServer(info={"protocol": "cirrus-agent/1", "name": "helpdesk", "version": "2.3.1"}) as server:
        info, details = asyncio.run(describe(server))
    assert info == {"protocol": "cirrus-agent/1", "name": "helpdesk", "version": "2.3.1"}
    assert details["agent_service"] == info and details["agent_url"] == server.url
    with AgentServer(info=404) as server:
        assert asyncio.run(describe(server)) == (None, {**details, "agent_url": server.url, "agent_service": None})
    with AgentServer(info={"protocol": "cirrus-agent/2"}) as server:
        with pytest.raises(InfrastructureError, match="speaks 'cirrus-agent/2'"):
            asyncio.run(describe(server))
    with AgentServer(info=401) as server:
        with pytest.raises(ModelAuthError):
            asyncio.run(describe(server))


def test_the_agent_reported_in_answers_is_kept_and_a_change_is_noted(workspace):
    one = {"name": "helpdesk", "version": "1.0"}
    with AgentServer([Answer(content="a", agent=one), Answer(content="b", agent={**one, "version": "1.1"})]) as server:
        async def main():
            async with HttpAgent(config(server)) as agent:
                task = make_task()
                turns = []
                with ToolReplayer.for_task(workspace, task) as replayer:
                    for query in ("q1", "q2"):
                        turns.append(await agent.respond(TurnRequest(task, [], query, 0), replayer))
                return agent, turns
        agent, (first, second) = asyncio.run(main())
    assert agent.info == one and first.notes == []
    assert second.notes == [{"kind": "agent_changed", "expected": one, "answered": {**one, "version": "1.1"}}]
    # one walk, one session id
    assert server.requests[0]["session_id"] == server.requests[1]["session_id"]


def test_concurrency_bounds_the_requests_in_flight(workspace):
    with AgentServer(rule=lambda _: Answer(content="ok", delay=0.05)) as server:
        async def main():
            async with HttpAgent(config(server, concurrency=1)) as agent:
                task = make_task()
                replayers = [ToolReplayer.for_task(workspace, task) for _ in range(3)]
                turns = await asyncio.gather(*(agent.respond(TurnRequest(task, [], "q", i), r)
                                               for i, r in enumerate(replayers)))
                for replayer in replayers:
                    replayer.close()
                return turns
        turns = asyncio.run(main())
    assert [t.text for t in turns] == ["ok"] * 3
    gaps = [b - a for a, b in zip(server.times, server.times[1:])]
    assert all(gap >= 0.04 for gap in gaps)  # one at a time: each waited for the one before
    assert len({r["session_id"] for r in server.requests}) == 3  # one per walk


# --- the JSON Schemas --------------------------------------------------------

VALID_ANSWERS = [
    {"message": {"content": "hi"}},
    {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "T", "arguments": "{\"x\": 1}"}}]}},
    {"message": {"content": "", "tool_calls": [{"function": {"name": "T", "arguments": {"x": 1}}}]}},
    {"message": {"content": "x", "tool_calls": None}, "usage": {"prompt_tokens": 3, "completion_tokens": 0,
                                                             "total_tokens": 3}, "agent": {"version": "1"}},
    {"message": {}, "extra": "ignored", "usage": None, "agent": None},
]
INVALID_ANSWERS = [
    {},
    {"message": "hi"},
    {"message": {"role": "user", "content": "hi"}},
    {"message": {"content": ["parts"]}},
    {"message": {"tool_calls": [{"function": {"name": ""}}]}},
    {"message": {"tool_calls": [{"type": "code", "function": {"name": "T"}}]}},
    {"message": {"tool_calls": [{"function": {"name": "T", "arguments": 5}}]}},
    {"message": {"tool_calls": {"function": {"name": "T"}}}},
    {"message": {}, "usage": {"prompt_tokens": "3"}},
    {"message": {}, "usage": {"completion_tokens": True}},
    {"message": {}, "agent": {"version": 2}},
    [],
]


@pytest.mark.parametrize("kind", ["request", "response", "info"])
def test_the_schemas_are_valid_json_schemas_shipped_with_the_package(kind):
    jsonschema.Draft202012Validator.check_schema(http_protocol.schema(kind))
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert "schemas/*.json" in pyproject["tool"]["setuptools"]["package-data"]["cirrus.agents"]


@pytest.mark.parametrize("answer", VALID_ANSWERS + INVALID_ANSWERS)
def test_the_response_schema_and_the_reader_agree(answer):
    validator = jsonschema.Draft202012Validator(http_protocol.schema("response"))
    try:
        http_protocol.read_answer(answer, 1)
        read = True
    except http_protocol.ProtocolError:
        read = False
    assert read == validator.is_valid(answer) == (answer in VALID_ANSWERS)


def test_read_answer_normalises_ids_and_arguments():
    answer = http_protocol.read_answer({"message": {"content": None, "tool_calls": [
        {"id": "x", "function": {"name": "A", "arguments": {"k": "值"}}},
        {"id": "x", "function": {"name": "B"}}]}}, 3)
    assert answer.tool_calls == [
        {"id": "x", "type": "function", "function": {"name": "A", "arguments": '{"k": "值"}'}},
        {"id": "call_3_1", "type": "function", "function": {"name": "B", "arguments": "{}"}}]
    assert answer.assistant_message() == {"role": "assistant", "content": None, "tool_calls": answer.tool_calls}


def test_the_tools_are_sent_without_cirrus_replay_rules(workspace):
    ruled = json.loads(json.dumps(TOOLS))
    ruled[0]["function"]["parameters"]["properties"]["instance_id"]["x-cirrus-match"] = "normalized"
    with AgentServer(["ok"]) as server:
        respond(server, workspace, make_task(tools=ruled))
    assert server.requests[0]["tools"] == TOOLS


def test_a_tool_view_offers_the_agents_own_names_and_replays_the_recorded_call(workspace):
    script = [Answer(tool_calls=[("lookup_instance", {"id": STATUS_ARGS["instance_id"]})]), "It is running."]
    with AgentServer(script) as server:
        agent = HttpAgent(config(server), tool_view=lambda task: RenamedTools())
        turn, _, _ = respond(server, workspace, agent=agent)
    assert server.requests[0]["tools"] == [{"type": "function", "function": {"name": "lookup_instance", "parameters": {
        "type": "object", "properties": {"id": {"type": "string"}}}}}]
    assert [(c.name, c.arguments, c.recorded) for c in turn.tool_calls] == [
        ("DescribeInstanceStatus", STATUS_ARGS, True)]  # what TIA/TSA/TEV compare with the reference
    assert turn.messages[0]["tool_calls"][0]["function"]["name"] == "lookup_instance"  # the agent's own words
    assert server.requests[1]["messages"][-1]["content"] == json.dumps({"status": "Running"})
