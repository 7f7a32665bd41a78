"""The tool server (issue 24 item 4, docs/tool-server.md): a workspace's
cassettes served over real HTTP on 127.0.0.1, one isolated replay per
session, every call logged for scoring."""

from __future__ import annotations

import json
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from cirrus.agents.prompts import no_recorded_result_content
from cirrus.evaluate.types import ToolCallMade
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.replay import ToolReplayer
from cirrus.schema import ToolExchange
from cirrus.tools import SessionStore, ToolServer, serve_tools
from cirrus.tools.sessions import SessionConflict, TooManySessions, UnknownSession, UnknownTask

ORDER = {"order_id": "A-1001"}
FIRST, SECOND = {"status": "shipped"}, {"status": "delivered"}
REFUND = {"order_id": "A-1001", "amount": 25, "reason": "the kettle arrived with a cracked lid"}
PARAPHRASE = {"order_id": "A-1001", "amount": 25, "reason": "lid was broken on delivery"}

QUERY_ORDER = {"type": "function", "function": {"name": "QueryOrder", "description": "An order's state",
                                                "parameters": {"type": "object", "properties": {
                                                    "order_id": {"type": "string"}}}}}
CREATE_REFUND = {"type": "function", "function": {"name": "CreateRefund", "description": "Refund an order",
                                                  "parameters": {"type": "object", "properties": {
                                                      "order_id": {"type": "string"},
                                                      "amount": {"type": "number"},
                                                      "reason": {"type": "string", "x-cirrus-match": "ignored"}}}}}


def _task(task_id: str, tools: list[dict], cassette: bool = True) -> dict:
    return {"task_id": task_id, "category": "orders", "knowledge": [], "tools": tools, "history": [],
            "checkpoints": [{"index": 1, "query": "where is my order?", "reply": "It was delivered.",
                             "tool_calls": [], "reply_type": "Solution"}],
            "cassette": f"tool_mocks/{task_id}.yaml" if cassette else None,
            "stats": {"input_tokens": 0, "turns": 2, "checkpoints": 1}}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """T1: QueryOrder recorded twice (shipped, then delivered); T2: a refund
    whose free-text reason is matched ``ignored``; T3: no cassette."""
    tasks = [_task("T1", [QUERY_ORDER]), _task("T2", [QUERY_ORDER, CREATE_REFUND]), _task("T3", [], cassette=False)]
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    write_cassette(tmp_path / "tool_mocks/T1.yaml",
                   build_cassette([ToolExchange("c1", "QueryOrder", ORDER, [FIRST, SECOND])]))
    write_cassette(tmp_path / "tool_mocks/T2.yaml",
                   build_cassette([ToolExchange("c1", "CreateRefund", REFUND, [{"refund_id": "R-9"}])]))
    return tmp_path


@pytest.fixture
def server(workspace: Path):
    with serve_tools(workspace) as running:
        yield running


@pytest.fixture
def client(server: ToolServer):
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as http:
        yield http


def _open(client: httpx.Client, task_id: str = "T1", attempt: int = 0) -> str:
    response = client.post("/sessions", json={"task_id": task_id, "attempt": attempt})
    assert response.status_code == 201, response.text
    return response.json()["session"]


def _call(client: httpx.Client, session: str, tool: str, arguments: object) -> httpx.Response:
    return client.post(f"/sessions/{session}/tools/{tool}", content=json.dumps(arguments))


def test_the_server_listens_on_loopback_on_a_free_port(server: ToolServer, client: httpx.Client):
    assert server.host == "127.0.0.1" and server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
    assert client.get("/health").json() == {"status": "ok", "protocol": "cirrus-tools/1", "tasks": 3, "sessions": 0}


def test_recorded_answers_come_in_order_then_the_last_repeats(client: httpx.Client):
    session = _open(client)
    answers = [_call(client, session, "QueryOrder", ORDER) for _ in range(4)]
    assert [a.status_code for a in answers] == [200] * 4
    assert [a.json() for a in answers] == [{"result": FIRST}, {"result": SECOND}, {"result": SECOND},
                                           {"result": SECOND}]
    assert {a.headers["x-cirrus-recorded"] for a in answers} == {"true"}


def test_key_order_and_whitespace_of_the_arguments_do_not_matter(client: httpx.Client):
    session = _open(client)
    response = client.post(f"/sessions/{session}/tools/QueryOrder", content=b'{ "order_id" :  "A-1001" }')
    assert response.json() == {"result": FIRST}


def test_two_sessions_of_one_task_replay_independently(client: httpx.Client):
    first, second = _open(client, attempt=0), _open(client, attempt=1)
    assert first != second
    assert _call(client, first, "QueryOrder", ORDER).json() == {"result": FIRST}
    assert _call(client, first, "QueryOrder", ORDER).json() == {"result": SECOND}
    assert _call(client, second, "QueryOrder", ORDER).json() == {"result": FIRST}
    assert len(client.get(f"/sessions/{first}/calls").json()["calls"]) == 2
    assert len(client.get(f"/sessions/{second}/calls").json()["calls"]) == 1


def test_an_unrecorded_call_gets_what_an_in_process_agent_gets(client: httpx.Client):
    session = _open(client)
    for tool, arguments in (("QueryOrder", {"order_id": "B-2"}), ("NoSuchTool", ORDER)):
        response = _call(client, session, tool, arguments)
        assert response.status_code == 200
        assert response.text == no_recorded_result_content()  # byte for byte the tool message content
        assert response.headers["x-cirrus-recorded"] == "false"
    logged = client.get(f"/sessions/{session}/calls").json()["calls"]
    assert [(c["name"], c["recorded"], c["status"]) for c in logged] == [("QueryOrder", False, 200),
                                                                        ("NoSuchTool", False, 200)]
    assert "no recorded result for tool QueryOrder" in logged[0]["error"]
    # an unrecorded call does not move the replay on
    assert _call(client, session, "QueryOrder", ORDER).json() == {"result": FIRST}


def test_a_task_without_a_cassette_answers_every_call_as_unrecorded(client: httpx.Client):
    session = _open(client, "T3")
    assert _call(client, session, "QueryOrder", ORDER).text == no_recorded_result_content()


def test_arguments_that_are_not_a_json_object_are_refused_with_the_reason_and_logged(client: httpx.Client):
    session = _open(client)
    bad = client.post(f"/sessions/{session}/tools/QueryOrder", content=b'{"order_id": "A-1001"')
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"] and "JSON object" in bad.json()["error"]
    array = client.post(f"/sessions/{session}/tools/QueryOrder", content=b'["A-1001"]')
    assert array.status_code == 400 and "a JSON array, not a JSON object" in array.json()["error"]
    not_utf8 = client.post(f"/sessions/{session}/tools/QueryOrder", content=b'{"order_id": "\xff"}')
    assert not_utf8.status_code == 400 and "UTF-8" in not_utf8.json()["error"]
    nan = client.post(f"/sessions/{session}/tools/QueryOrder", content=b'{"amount": NaN}')
    assert nan.status_code == 400 and "NaN" in nan.json()["error"]
    logged = client.get(f"/sessions/{session}/calls").json()["calls"]
    assert [(c["status"], c["recorded"]) for c in logged] == [(400, False)] * 4
    assert logged[0]["arguments"] == '{"order_id": "A-1001"'  # the text received, as transcripts keep it
    assert logged[1]["arguments"] == ["A-1001"]
    # refused calls are not replayed: the first recorded answer is still next
    assert _call(client, session, "QueryOrder", ORDER).json() == {"result": FIRST}


def test_an_empty_body_means_no_arguments(client: httpx.Client):
    session = _open(client)
    response = client.post(f"/sessions/{session}/tools/QueryOrder", content=b"")
    assert response.status_code == 200 and response.headers["x-cirrus-recorded"] == "false"
    assert client.get(f"/sessions/{session}/calls").json()["calls"][0]["arguments"] == {}


def test_an_unknown_session_says_how_to_start_one(client: httpx.Client):
    for response in (_call(client, "nope", "QueryOrder", ORDER), client.get("/sessions/nope/calls"),
                     client.get("/sessions/nope"), client.delete("/sessions/nope")):
        assert response.status_code == 404
        assert "POST /sessions" in response.json()["error"] and "task_id" in response.json()["error"]


def test_the_session_may_come_in_a_header(client: httpx.Client):
    session = _open(client)
    response = client.post("/tools/QueryOrder", json=ORDER, headers={"X-Cirrus-Session": session})
    assert response.json() == {"result": FIRST}
    calls = client.get("/calls", headers={"X-Cirrus-Session": session}).json()["calls"]
    assert [c["result"] for c in calls] == [FIRST]
    missing = client.post("/tools/QueryOrder", json=ORDER)
    assert missing.status_code == 400 and "X-Cirrus-Session" in missing.json()["error"]
    unknown = client.post("/tools/QueryOrder", json=ORDER, headers={"X-Cirrus-Session": "nope"})
    assert unknown.status_code == 404


def test_opening_a_session_checks_its_body(client: httpx.Client):
    cases = [(b"{", 400, "not JSON"), (b"[]", 400, "not a JSON object"), (b"{}", 400, "task_id"),
             (b'{"task_id": 7}', 400, "task_id"), (b'{"task_id": "T1", "attempt": -1}', 400, "attempt"),
             (b'{"task_id": "T1", "attempt": "1"}', 400, "attempt"),
             (b'{"task_id": "T1", "session": "has space"}', 400, "letters, digits"),
             (b'{"task_id": "T1", "session": "a/b"}', 400, "letters, digits"),
             (b'{"task_id": "T1", "session": ".."}', 400, "not only dots"),
             (b'{"task_id": "T1", "session": 5}', 400, "session"),
             (b'{"task_id": "NOPE"}', 404, "is not among the 3 tasks")]
    for body, status, words in cases:
        response = client.post("/sessions", content=body)
        assert response.status_code == status, (body, response.text)
        assert words in response.json()["error"], (body, response.text)


def test_a_session_of_ones_own_id_and_its_end(client: httpx.Client):
    opened = client.post("/sessions", json={"task_id": "T1", "attempt": 2, "session": "T1.2"})
    assert opened.status_code == 201
    described = opened.json()
    assert described["session"] == "T1.2" and described["attempt"] == 2 and described["task_id"] == "T1"
    assert described["tools_url"].endswith("/sessions/T1.2/tools/")
    again = client.post("/sessions", json={"task_id": "T1", "session": "T1.2"})
    assert again.status_code == 409 and "already open" in again.json()["error"]
    assert _call(client, "T1.2", "QueryOrder", ORDER).json() == {"result": FIRST}
    assert [s["session"] for s in client.get("/sessions").json()["sessions"]] == ["T1.2"]
    ended = client.delete("/sessions/T1.2")
    assert ended.json() == {"session": "T1.2", "ended": True, "calls": 1}
    assert _call(client, "T1.2", "QueryOrder", ORDER).status_code == 404
    # the id is free again, and a new session starts the replay over
    assert client.post("/sessions", json={"task_id": "T1", "session": "T1.2"}).status_code == 201
    assert _call(client, "T1.2", "QueryOrder", ORDER).json() == {"result": FIRST}


def test_the_call_log_is_read_incrementally_with_its_cursor(client: httpx.Client):
    session = _open(client)
    _call(client, session, "QueryOrder", ORDER)
    page = client.get(f"/sessions/{session}/calls").json()
    assert page["next"] == 1 and page["failure"] is None
    [call] = page["calls"]
    assert {k: call[k] for k in ("index", "name", "arguments", "result", "recorded", "error", "status")} == {
        "index": 0, "name": "QueryOrder", "arguments": ORDER, "result": FIRST, "recorded": True, "error": None,
        "status": 200}
    assert call["time"].endswith("Z")
    assert client.get(f"/sessions/{session}/calls", params={"since": 1}).json() == {
        "session": session, "calls": [], "next": 1, "failure": None}
    _call(client, session, "QueryOrder", ORDER)
    _call(client, session, "QueryOrder", {"order_id": "B-2"})
    later = client.get(f"/sessions/{session}/calls", params={"since": page["next"]}).json()
    assert [(c["index"], c["result"]) for c in later["calls"]] == [(1, SECOND), (2, None)]
    assert later["next"] == 3
    for since in ("-1", "x", "1.5"):
        bad = client.get(f"/sessions/{session}/calls", params={"since": since})
        assert bad.status_code == 400 and "since" in bad.json()["error"]


def test_the_workspace_tools_and_a_sessions_tools(client: httpx.Client):
    tools = client.get("/tools").json()["tools"]
    assert [t["function"]["name"] for t in tools] == ["QueryOrder", "CreateRefund"]
    assert "x-cirrus-match" not in json.dumps(tools)  # agents are sent the schemas without the rules
    session = _open(client, "T2")
    own = client.get(f"/sessions/{session}/tools").json()["tools"]
    assert [t["function"]["name"] for t in own] == ["QueryOrder", "CreateRefund"]
    assert "x-cirrus-match" not in json.dumps(own)
    assert client.get(f"/sessions/{_open(client, 'T3')}/tools").json() == {"tools": []}


def test_matching_rules_let_a_paraphrased_free_text_argument_through(client: httpx.Client):
    session = _open(client, "T2")
    assert _call(client, session, "CreateRefund", PARAPHRASE).json() == {"result": {"refund_id": "R-9"}}
    wrong_amount = {**PARAPHRASE, "amount": 30}  # the amount stays exact
    assert _call(client, session, "CreateRefund", wrong_amount).text == no_recorded_result_content()


def test_concurrent_calls_on_different_sessions_do_not_interfere(client: httpx.Client, server: ToolServer):
    sessions = [_open(client, attempt=n) for n in range(8)]

    def walk(session: str) -> list:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as own:
            return [_call(own, session, "QueryOrder", ORDER).json()["result"] for _ in range(3)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(walk, sessions))
    assert results == [[FIRST, SECOND, SECOND]] * 8
    for session in sessions:
        assert [c["result"] for c in client.get(f"/sessions/{session}/calls").json()["calls"]] == [FIRST, SECOND,
                                                                                                  SECOND]


def test_unknown_endpoints_and_methods_answer_json(client: httpx.Client):
    missing = client.get("/nowhere")
    assert missing.status_code == 404 and "/sessions" in missing.json()["error"]
    wrong = client.post("/health")
    assert wrong.status_code == 405 and "error" in wrong.json()
    session = _open(client)
    huge = client.post(f"/sessions/{session}/tools/QueryOrder", content=b" " * (2 << 20))
    assert huge.status_code == 413 and "bytes" in huge.json()["error"]
    no_name = client.post(f"/sessions/{session}/tools/", json=ORDER)
    assert no_name.status_code == 400 and "tool name" in no_name.json()["error"]


# --- in-process use (the evaluator) ----------------------------------------------------------------------------


def test_the_evaluator_reads_a_turns_calls_as_tool_calls(server: ToolServer, client: httpx.Client):
    session = server.sessions.open("T1", 3)
    _call(client, session.id, "QueryOrder", ORDER)
    _call(client, session.id, "QueryOrder", {"order_id": "B-2"})
    first_turn = session.take()
    assert first_turn[0] == ToolCallMade("QueryOrder", ORDER, FIRST, recorded=True, error=None)
    assert first_turn[1].recorded is False and first_turn[1].error.startswith("no recorded result")
    assert session.take() == []  # nothing new
    _call(client, session.id, "QueryOrder", ORDER)
    assert [c.result for c in session.take()] == [SECOND]
    assert [c.index for c in session.calls(1)] == [1, 2]
    ended = server.sessions.end(session.id)
    assert len(ended) == 3  # the log stays readable in-process after the end


def test_a_session_can_replay_with_the_walks_own_replayer(workspace: Path, server: ToolServer,
                                                          client: httpx.Client):
    task = json.loads((workspace / "tickets/tasks.jsonl").read_text().splitlines()[0])
    with ToolReplayer.for_task(workspace, task) as replayer:
        assert replayer.call("QueryOrder", ORDER) == FIRST  # the walk is past the first answer
        session = server.sessions.open(task, 0, replayer=replayer, session_id="walk-1")
        assert _call(client, "walk-1", "QueryOrder", ORDER).json() == {"result": SECOND}
        replayer.rewind()
        assert _call(client, "walk-1", "QueryOrder", ORDER).json() == {"result": FIRST}
        server.sessions.end(session.id)
        assert replayer.call("QueryOrder", ORDER) == SECOND  # not closed with the session


def test_a_replay_that_breaks_is_an_infrastructure_failure_of_the_session(workspace: Path):
    class Broken:
        def call(self, name: str, arguments: object) -> object:
            raise KeyError("interactions")

    with serve_tools(workspace, replayer_factory=lambda ws, task: Broken()) as server, \
            httpx.Client(base_url=server.url, trust_env=False) as http:
        session = _open(http)
        response = _call(http, session, "QueryOrder", ORDER)
        assert response.status_code == 500 and "replaying tool call QueryOrder failed" in response.json()["error"]
        assert server.sessions.get(session).failure == response.json()["error"]
        assert http.get(f"/sessions/{session}/calls").json()["failure"] == response.json()["error"]


def test_a_cassette_that_cannot_be_read_fails_the_session_start_with_the_reason(workspace: Path):
    (workspace / "tool_mocks/T1.yaml").write_text("interactions: [oops", encoding="utf-8")
    with serve_tools(workspace) as server, httpx.Client(base_url=server.url, trust_env=False) as http:
        response = http.post("/sessions", json={"task_id": "T1"})
        assert response.status_code == 500
        assert "task 'T1' cannot be loaded" in response.json()["error"] and "T1.yaml" in response.json()["error"]


def test_the_store_refuses_what_it_cannot_keep(workspace: Path):
    store = SessionStore(workspace, max_sessions=2)
    store.open("T1")
    store.open("T1", session_id="mine")
    with pytest.raises(TooManySessions, match="DELETE"):
        store.open("T2")
    with pytest.raises(SessionConflict):
        store.open("T2", session_id="mine")
    with pytest.raises(UnknownTask):
        store.open("T9")
    store.end("mine")
    assert store.open("T2").task_id == "T2"
    store.close()
    assert len(store) == 0
    with pytest.raises(UnknownSession):
        store.get("mine")


# --- the runner ------------------------------------------------------------------------------------------------


def test_the_server_stops_cleanly_and_frees_its_port(workspace: Path):
    with serve_tools(workspace) as server:
        port = server.port
        with httpx.Client(base_url=server.url, trust_env=False) as http:  # a kept-alive connection
            session = _open(http)
            assert _call(http, session, "QueryOrder", ORDER).status_code == 200
            assert server.running
        store = server.sessions
    assert not server.running and len(store) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_port_in_use_is_refused_with_a_message(workspace: Path):
    with serve_tools(workspace) as server:
        with pytest.raises(OSError, match="choose another port"):
            ToolServer(SessionStore(workspace), port=server.port)


def test_the_terminal_gets_method_path_and_status_only(workspace: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    with serve_tools(workspace) as server, httpx.Client(base_url=server.url, trust_env=False) as http:
        session = _open(http, "T2")
        _call(http, session, "CreateRefund", PARAPHRASE)
    access = [r.getMessage() for r in caplog.records if r.name == "cirrus.tools.access"]
    assert access == ["POST /sessions 201", f"POST /sessions/{session}/tools/CreateRefund 200"]
    assert "A-1001" not in caplog.text and "broken" not in caplog.text  # no argument values anywhere
    assert not [r for r in caplog.records if r.name == "uvicorn.access"]


def test_another_host_can_be_named(workspace: Path):
    with serve_tools(workspace, host="localhost") as server, \
            httpx.Client(base_url=server.url, trust_env=False) as http:
        assert server.url == f"http://localhost:{server.port}"
        assert http.get("/health").json()["status"] == "ok"


def test_a_task_file_changed_under_the_server_is_said_so(workspace: Path):
    with serve_tools(workspace) as server, httpx.Client(base_url=server.url, trust_env=False) as http:
        tasks = workspace / "tickets/tasks.jsonl"
        tasks.write_text(tasks.read_text().replace('"T1"', '"X1"'), encoding="utf-8")
        response = http.post("/sessions", json={"task_id": "T1"})
        assert response.status_code == 500 and "changed" in response.json()["error"]
