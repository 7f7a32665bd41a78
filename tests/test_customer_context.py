"""Customer context from the ticket reaches the agent, de-identified
(issue 24 item 2), and knowledge behind a search tool (``[agent]
knowledge = "tool"``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from cirrus.agents import knowledge_tool
from cirrus.agents.api import public_task
from cirrus.agents.config import AgentConfig, AgentConfigError, parse_agent_config, tool_view
from cirrus.agents.http_protocol import turn_request
from cirrus.agents.openai_agent import OpenAIAgent
from cirrus.evaluate.types import TurnRequest
from cirrus.ingest.context import context_lines, is_field_shaped, mark_context
from cirrus.ingest.readers import native
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from cirrus.replay import ToolReplayer
from cirrus.schema import Event, SourceRef, Ticket, TicketError
from tests.chat_server import ChatServer, text, tool_calls
from tests.test_openai_agent import KEY_ENV, STATUS_ARGS, make_task, workspace  # noqa: F401 (fixture)

ORIGIN = SourceRef("t.jsonl", line=1)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-agent-test")


# --- which system events are context ----------------------------------------------


@pytest.mark.parametrize("line", [
    "Signed-in customer: Jane Roe | Plan: Gold",
    "account=4411; tier=Silver",
    "登录用户：王小明，会员等级：金卡",
    "Order in view: 88213407",
])
def test_fields_are_context(line):
    assert is_field_shaped(line)


@pytest.mark.parametrize("line", [
    "Customer joined the chat",
    "Chat transferred to agent",
    "用户已接入在线客服，排队等待 35 秒",
    "Chat started at 10:02",
    "See https://status.example.com for updates",
    "Customer rated 5 stars",
])
def test_notices_are_not(line):
    assert not is_field_shaped(line)


def test_only_events_before_the_agents_first_word_become_context():
    ticket = Ticket("T-1", [
        Event("system", "Customer joined the chat"),
        Event("system", "Signed-in customer: Jane Roe\nPlan: Gold"),
        Event("customer", "hello"),
        Event("agent", "Hi Jane"),
        Event("system", "Survey: 5 stars"),  # after the agent answered: a notice
    ], ORIGIN)
    marked = mark_context(ticket)
    assert [e.context for e in marked.events] == [False, True, False, False, False]
    assert context_lines(marked) == ["Signed-in customer: Jane Roe", "Plan: Gold"]
    assert mark_context(Ticket("T-2", [Event("customer", "hi")], ORIGIN)).events[0].context is False


def test_the_native_reader_takes_a_context_field_and_a_flag():
    ticket = native.parse({"ticket_id": "T-1", "context": {"customer": "Tom", "orders": ["55102"]},
                           "events": [{"role": "system", "text": "VIP customer", "context": True},
                                      {"role": "customer", "text": "hi"}]}, ORIGIN)
    assert [(e.role, e.text, e.context) for e in ticket.events] == [
        ("system", "customer: Tom", True), ("system", 'orders: ["55102"]', True),
        ("system", "VIP customer", True), ("customer", "hi", False)]
    assert context_lines(native.parse({"ticket_id": "T-2", "context": "Plan Gold since 2021",
                                       "events": [{"role": "customer", "text": "hi"}]}, ORIGIN)) == \
        ["Plan Gold since 2021"]
    with pytest.raises(TicketError, match="context"):
        native.parse({"ticket_id": "T-3", "context": 5, "events": [{"role": "customer", "text": "hi"}]}, ORIGIN)
    with pytest.raises(TicketError, match=r"events\[0\]: context"):
        native.parse({"ticket_id": "T-4", "events": [{"role": "customer", "text": "hi", "context": True}]}, ORIGIN)


def test_ingest_writes_the_context_de_identified(tmp_path, pipeline_config):
    from cirrus.ingest.run import IngestOptions, run_ingest

    raw = tmp_path / "raw"
    raw.mkdir()
    tickets = [
        {"ticket_id": "K-1", "events": [
            {"role": "system", "text": "Customer joined the chat"},
            {"role": "system", "text": "Signed-in customer: Margaret Holloway | Plan: Gold | "
                                       "Email: margaret.holloway@example.org"},
            {"role": "customer", "text": "Hi, my kettle arrived broken, can I get a replacement?"},
            {"role": "agent", "text": "I am sorry about that. I will send a replacement today with a prepaid label."}]},
        {"ticket_id": "K-2", "events": [
            {"role": "system", "text": "Customer joined the chat"},
            {"role": "customer", "text": "Where is my parcel? It was due on Monday."},
            {"role": "agent", "text": "Your parcel left the warehouse yesterday and arrives on Friday."}]},
    ]
    (raw / "t.jsonl").write_text("\n".join(json.dumps(t) for t in tickets) + "\n", encoding="utf-8")
    workspace = tmp_path / "ws"
    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, progress=False))
    tasks = {t["task_id"]: t for t in map(json.loads, (workspace / "tickets" / "tasks.jsonl").open())}
    context = tasks["K-1"]["context"]
    assert len(context) == 1 and "Plan: Gold" in context[0]
    assert "Holloway" not in context[0] and "margaret.holloway@example.org" not in context[0]
    assert tasks["K-1"]["history"] == []  # context is not dialogue
    assert "context" not in tasks["K-2"]  # a notice is not context: nothing written


# --- the agents see it ---------------------------------------------------------------


def _respond(server, workspace, task, **agent_kw):
    async def main():
        role = RoleConfig(Endpoint("agent-model", server.base_url, KEY_ENV), retry_initial_wait=0.01, max_retries=1)
        async with ChatClient(role) as client:
            agent = OpenAIAgent(client, **agent_kw)
            with ToolReplayer.for_task(workspace, task) as replayer:
                return await agent.respond(TurnRequest(task=task, history=[], query="where is it?", attempt=0),
                                           replayer)
    return asyncio.run(main())


CONTEXT = ["Signed-in customer: Ma*** Ho***", "Plan: Gold"]


def test_cirrus_prompt_carries_the_context(workspace):  # noqa: F811
    with ChatServer(["It is on its way."]) as server:
        _respond(server, workspace, make_task(context=CONTEXT))
    system = server.requests[0]["messages"][0]["content"]
    assert "# Customer context" in system and "- Signed-in customer: Ma*** Ho***\n- Plan: Gold" in system
    with ChatServer(["It is on its way."]) as server:
        _respond(server, workspace, make_task())
    assert "# Customer context" not in server.requests[0]["messages"][0]["content"]


def test_a_template_places_the_context_or_gets_it_appended(workspace):  # noqa: F811
    placing = parse_agent_config({"system_prompt": "You help shop customers.\nKnown: {{ context | join('; ') }}"},
                                 "t.toml")
    with ChatServer(["ok"]) as server:
        _respond(server, workspace, make_task(context=CONTEXT), config=placing)
    system = server.requests[0]["messages"][0]["content"]
    assert "Known: Signed-in customer: Ma*** Ho***; Plan: Gold" in system
    assert "# Customer context" not in system  # not twice
    silent = parse_agent_config({"system_prompt": "You help shop customers."}, "t.toml")
    with ChatServer(["ok"]) as server:
        _respond(server, workspace, make_task(context=CONTEXT), config=silent)
    assert "- Plan: Gold" in server.requests[0]["messages"][0]["content"]


def test_services_and_python_agents_get_it():
    task = make_task(context=CONTEXT)
    body = turn_request(session_id="s", request_id="r", round_number=1, max_rounds=4, task=task, attempt=0,
                        messages=[], tools=[], knowledge=[])
    assert body["context"] == CONTEXT
    assert "context" not in turn_request(session_id="s", request_id="r", round_number=1, max_rounds=4,
                                         task=make_task(), attempt=0, messages=[], tools=[], knowledge=[])
    assert public_task(task)["context"] == CONTEXT


# --- knowledge behind a search tool -------------------------------------------------------


DOCS = [{"doc_id": "kb-1", "title": "Returns", "text": "Broken items are replaced free of charge within 30 days."},
        {"doc_id": "kb-2", "title": "Shipping", "text": "Parcels ship within two business days by courier."}]


def test_search_finds_the_passage():
    assert [p["doc_id"] for p in knowledge_tool.search(DOCS, "how long does shipping take", 1)] == ["kb-2"]
    assert knowledge_tool.search(DOCS, "zzz unrelated", 3) == []
    assert knowledge_tool.search([], "shipping", 3) == []


def test_the_model_searches_and_the_search_is_not_a_scored_tool_call(workspace):  # noqa: F811
    config = parse_agent_config({"knowledge": "tool", "knowledge_top_k": 1}, "t.toml")
    task = make_task(knowledge=DOCS)
    script = [tool_calls(("search_knowledge", {"query": "shipping time"})),
              tool_calls(("DescribeInstanceStatus", STATUS_ARGS)),
              text("Parcels ship within two business days.")]
    with ChatServer(script) as server:
        turn = _respond(server, workspace, task, config=config)
    first = server.requests[0]
    assert "search_knowledge" in [t["function"]["name"] for t in first["tools"]]
    assert "Broken items" not in first["messages"][0]["content"]  # not in the prompt
    answer = json.loads(server.requests[1]["messages"][-1]["content"])
    assert [p["doc_id"] for p in answer["results"]] == ["kb-2"]
    assert [c.name for c in turn.tool_calls] == ["DescribeInstanceStatus"]  # the search is not scored
    searched = [n for n in turn.notes if n["kind"] == "knowledge_searched"]
    assert searched == [{"kind": "knowledge_searched", "model_call": 1, "query": "shipping time",
                         "documents": ["kb-2"]}]
    assert [m["role"] for m in turn.messages] == ["assistant", "tool", "assistant", "tool", "assistant"]


def test_knowledge_tool_settings():
    plain = AgentConfig()
    assert plain.digest() == AgentConfig(knowledge_top_k=7).digest()  # meaningless unless knowledge = "tool"
    assert AgentConfig(knowledge="tool").digest() != AgentConfig(knowledge="tool", knowledge_top_k=7).digest()
    clash = AgentConfig(knowledge="tool", knowledge_tool="Lookup")
    tools = [{"type": "function", "function": {"name": "Lookup", "parameters": {"type": "object"}}}]
    with pytest.raises(AgentConfigError, match="knowledge_tool 'Lookup'"):
        tool_view(tools, clash)
