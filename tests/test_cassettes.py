"""Cassettes (cirrus.ingest.cassettes) and their replay (cirrus.replay)."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import vcr
from vcr.cassette import Cassette
from vcr.persisters.filesystem import FilesystemPersister
from vcr.serializers import yamlserializer

from cirrus.ingest.cassettes import (
    NO_RESULT,
    TOOL_BASE_URL,
    build_cassette,
    canonical_arguments,
    canonical_json,
    normalize_arguments,
    write_cassette,
)
from cirrus.replay import NoRecordedResult, ToolReplayer, replay_tool_call
from cirrus.schema import Task, TaskStats, ToolExchange

SEARCH = {"query": "密码 重置 é", "filters": {"tags": ["a", "b"], "limit": 5}}
RESULTS: list[Any] = ["plain text", ["a", 1, None], {"status": "Stopped", "n": 2}, 3, 2.5, None, True, "数据库 ✓"]


def _exchanges() -> list[ToolExchange]:
    return [
        ToolExchange("c1", "DescribeInstance", {"instance_id": "i-bp1abc", "region": "cn-hangzhou"}, [RESULTS[2]]),
        ToolExchange("c2", "Search", SEARCH, [RESULTS[1]]),
        ToolExchange("c3", "Kinds", {"k": 0}, [RESULTS[0]]),
        ToolExchange("c4", "Kinds", {"k": 3}, [RESULTS[3]]),
        ToolExchange("c5", "Kinds", {"k": 4}, [RESULTS[4]]),
        ToolExchange("c6", "Kinds", {"k": 5}, [RESULTS[5]]),
        ToolExchange("c7", "Kinds", {"k": 6}, [RESULTS[6]]),
        ToolExchange("c8", "Kinds", {"k": 7}, [RESULTS[7]]),
        ToolExchange("c9", "Poll", {"job": "j1"}, ["queued", "running"]),
        ToolExchange("c10", "Poll", {"job": "j1"}, ["done"]),
    ]


@pytest.fixture()
def cassette_path(tmp_path: Path) -> Path:
    cassette = build_cassette(_exchanges())
    assert cassette is not None
    path = tmp_path / "tool_mocks" / "T-1.yaml"
    write_cassette(path, cassette)
    return path


def _task(cassette: str | None) -> Task:
    stats = TaskStats(input_tokens=0, turns=0, checkpoints=0)
    return Task(task_id="T-1", checkpoints=[], stats=stats, cassette=cassette)


# --- building and writing ----------------------------------------------------


def test_no_cassette_without_calls() -> None:
    assert build_cassette([]) is None


def test_a_call_without_a_result_answers_that_nothing_was_recorded(tmp_path: Path) -> None:
    """The log holds the call but no result: replay answers what the task's
    history shows, so an agent making the same call is answered from the
    cassette (and the checkpoint stays passable)."""
    path = tmp_path / "c.yaml"
    write_cassette(path, build_cassette([ToolExchange("c1", "Tool", {"a": 1}, []),
                                         ToolExchange("c2", "Tool", {"a": 2}, ["fine"])]) or {})
    replayer = ToolReplayer(path)
    assert replayer.call("Tool", {"a": 1}) == NO_RESULT == {"error": "no result was recorded"}
    assert replayer.call("Tool", {"a": 2}) == "fine"


def test_an_unanswered_call_does_not_fail_the_oracle_end_to_end(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cirrus.cli import app

    raw = tmp_path / "raw.jsonl"
    raw.write_text(json.dumps({"ticket_id": "T-9", "events": [
        {"role": "customer", "text": "Is my instance i-bp1xyz running? It does not answer."},
        {"role": "tool_call", "call_id": "c1", "name": "DescribeInstanceStatus", "arguments": {"id": "i-bp1xyz"}},
        {"role": "agent", "text": "The status service did not answer; restart the instance from the console."},
        {"role": "customer", "text": "Restarted, it works now. Thanks."},
        {"role": "agent", "text": "Glad to hear it works again."}]}) + "\n")
    workspace = tmp_path / "ws"
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(raw), "-w", str(workspace), "-j", "1", "-q"])
    assert ingested.exit_code == 0, ingested.output
    task = json.loads((workspace / "tickets" / "tasks.jsonl").read_text())
    assert task["checkpoints"][0]["tool_calls"][0]["name"] == "DescribeInstanceStatus"
    evaluated = runner.invoke(app, ["eval", "--model", "baseline:oracle", "--run-id", "o", "-w", str(workspace),
                                    "-q"])
    assert evaluated.exit_code == 0, evaluated.output
    summary = json.loads((workspace / "reports" / "o" / "summary.json").read_text())
    assert summary["atpr"] == 1.0 and summary["errors"] == 0


def test_cassette_has_one_interaction_per_answer_in_order() -> None:
    cassette = build_cassette(_exchanges())
    assert cassette is not None
    assert cassette["version"] == 1
    interactions = cassette["interactions"]
    assert len(interactions) == 11
    polls = [i for i in interactions if i["request"]["uri"].endswith("/tools/Poll")]
    assert [json.loads(i["response"]["body"]["string"])["result"] for i in polls] == ["queued", "running", "done"]
    first = interactions[0]
    assert first["request"] == {
        "body": '{"instance_id":"i-bp1abc","region":"cn-hangzhou"}',
        "headers": {"content-type": ["application/json"]},
        "method": "POST",
        "uri": f"{TOOL_BASE_URL}/tools/DescribeInstance",
    }
    assert first["response"]["status"] == {"code": 200, "message": "OK"}
    assert first["response"]["headers"] == {"content-type": ["application/json"]}
    assert json.loads(first["response"]["body"]["string"]) == {"result": RESULTS[2]}


def test_build_is_pure() -> None:
    exchanges = _exchanges()
    before = [(e.name, json.dumps(e.arguments), json.dumps(e.results)) for e in exchanges]
    assert build_cassette(exchanges) == build_cassette(exchanges)
    assert [(e.name, json.dumps(e.arguments), json.dumps(e.results)) for e in exchanges] == before


def test_tool_names_are_made_valid() -> None:
    cassette = build_cassette([ToolExchange("c1", "ecs.Describe Instance", {}, ["ok"])])
    assert cassette is not None
    assert cassette["interactions"][0]["request"]["uri"] == f"{TOOL_BASE_URL}/tools/ecs_Describe_Instance"


def test_write_is_deterministic_readable_and_atomic(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "one.yaml", tmp_path / "b" / "two.yaml"
    write_cassette(one, build_cassette(_exchanges()) or {})
    write_cassette(two, build_cassette(_exchanges()) or {})
    assert one.read_bytes() == two.read_bytes()
    text = one.read_text(encoding="utf-8")
    assert "密码 重置 é" in text and "数据库 ✓" in text  # unicode kept readable
    assert "&id" not in text  # no YAML anchors
    write_cassette(one, build_cassette(_exchanges()[:1]) or {})  # overwrite in place
    assert len(FilesystemPersister.load_cassette(one, yamlserializer)[0]) == 1
    assert sorted(p.name for p in one.parent.iterdir()) == ["one.yaml"]  # no temp file left


def test_vcrpy_loads_written_cassette(cassette_path: Path) -> None:
    requests, responses = FilesystemPersister.load_cassette(cassette_path, yamlserializer)
    assert len(requests) == len(responses) == 11
    assert requests[0].method == "POST"
    assert requests[0].uri == f"{TOOL_BASE_URL}/tools/DescribeInstance"
    assert requests[0].body == b'{"instance_id":"i-bp1abc","region":"cn-hangzhou"}'
    assert json.loads(responses[0]["body"]["string"]) == {"result": RESULTS[2]}
    cassette = Cassette.load(path=str(cassette_path))
    assert len(cassette) == 11


def test_plain_vcrpy_replays_answers_in_order(cassette_path: Path) -> None:
    """Any vcrpy user (not only cirrus.replay) can replay the cassette."""
    my_vcr = vcr.VCR(record_mode="none", match_on=["method", "uri", "body"])
    with my_vcr.use_cassette(str(cassette_path)), httpx.Client() as client:
        url = f"{TOOL_BASE_URL}/tools/Poll"
        body = canonical_arguments({"job": "j1"})
        answers = [client.post(url, content=body.encode()).json()["result"] for _ in range(3)]
    assert answers == ["queued", "running", "done"]


# --- canonical arguments -----------------------------------------------------


def test_canonical_arguments() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert canonical_arguments('{ "b": 1,\n "a": "é" }') == canonical_arguments({"a": "é", "b": 1})
    assert normalize_arguments(None) == {} == normalize_arguments("  ")
    assert normalize_arguments("i-bp1abc") == {"input": "i-bp1abc"}
    assert normalize_arguments(["x"]) == {"input": ["x"]}
    assert normalize_arguments("{not json") == {"input": "{not json"}


# --- replay ------------------------------------------------------------------


def test_replay_returns_every_recorded_result(cassette_path: Path) -> None:
    replayer = ToolReplayer(cassette_path)
    assert replayer.call("DescribeInstance", {"instance_id": "i-bp1abc", "region": "cn-hangzhou"}) == RESULTS[2]
    assert replayer.call("Search", SEARCH) == RESULTS[1]
    for k, expected in [(0, RESULTS[0]), (3, 3), (4, 2.5), (5, None), (6, True), (7, "数据库 ✓")]:
        result = replayer.call("Kinds", {"k": k})
        assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    "arguments",
    [
        {"region": "cn-hangzhou", "instance_id": "i-bp1abc"},
        '{"region": "cn-hangzhou", "instance_id": "i-bp1abc"}',
        '{\n  "instance_id" :"i-bp1abc",\t"region":"cn-hangzhou"\n}',
    ],
)
def test_key_order_whitespace_and_json_strings_match(cassette_path: Path, arguments: Any) -> None:
    assert ToolReplayer(cassette_path).call("DescribeInstance", arguments) == RESULTS[2]


def test_nested_and_unicode_arguments_match(cassette_path: Path) -> None:
    arguments = '{"filters": {"limit": 5, "tags": ["a", "b"]}, "query": "密码 重置 é"}'
    assert ToolReplayer(cassette_path).call("Search", arguments) == RESULTS[1]
    with pytest.raises(NoRecordedResult):  # list order matters
        ToolReplayer(cassette_path).call("Search", {**SEARCH, "filters": {"tags": ["b", "a"], "limit": 5}})


def test_altered_argument_value_has_no_recorded_result(cassette_path: Path) -> None:
    replayer = ToolReplayer(cassette_path)
    with pytest.raises(NoRecordedResult) as caught:
        replayer.call("DescribeInstance", {"instance_id": "i-bp1abd", "region": "cn-hangzhou"})
    message = str(caught.value)
    assert message.startswith("no recorded result for tool DescribeInstance with arguments ")
    assert '{"instance_id":"i-bp1abd","region":"cn-hangzhou"}' in message
    assert str(cassette_path) in message
    with pytest.raises(NoRecordedResult):  # a missing argument
        replayer.call("DescribeInstance", {"instance_id": "i-bp1abc"})
    with pytest.raises(NoRecordedResult):  # an extra argument
        replayer.call("DescribeInstance", {"instance_id": "i-bp1abc", "region": "cn-hangzhou", "x": 1})
    with pytest.raises(NoRecordedResult):  # a type change
        replayer.call("Kinds", {"k": "0"})
    # the failures left the replayer usable
    assert replayer.call("DescribeInstance", {"instance_id": "i-bp1abc", "region": "cn-hangzhou"}) == RESULTS[2]


def test_unknown_tool_has_no_recorded_result(cassette_path: Path) -> None:
    with pytest.raises(NoRecordedResult, match="no recorded result for tool RebootInstance"):
        ToolReplayer(cassette_path).call("RebootInstance", {"instance_id": "i-bp1abc"})


def test_repeated_call_answers_in_order_then_repeats_last(cassette_path: Path) -> None:
    replayer = ToolReplayer(cassette_path)
    answers = [replayer.call("Poll", {"job": "j1"}) for _ in range(5)]
    assert answers == ["queued", "running", "done", "done", "done"]
    # a call answered once keeps that answer
    assert [replayer.call("Kinds", {"k": 3}) for _ in range(3)] == [3, 3, 3]
    replayer.rewind()
    assert replayer.call("Poll", {"job": "j1"}) == "queued"
    # a new replayer (a new attempt) starts at the first answer
    assert ToolReplayer(cassette_path).call("Poll", {"job": "j1"}) == "queued"


def test_interleaved_calls_keep_their_own_order(cassette_path: Path) -> None:
    replayer = ToolReplayer(cassette_path)
    assert replayer.call("Poll", {"job": "j1"}) == "queued"
    assert replayer.call("Kinds", {"k": 0}) == "plain text"
    assert replayer.call("Poll", '{"job":"j1"}') == "running"
    with pytest.raises(NoRecordedResult):
        replayer.call("Poll", {"job": "j2"})
    assert replayer.call("Poll", {"job": "j1"}) == "done"


def test_concurrent_calls_use_each_answer_once(cassette_path: Path) -> None:
    replayer = ToolReplayer(cassette_path)
    answers: list[Any] = []
    lock = threading.Lock()

    def call() -> None:
        answer = replayer.call("Poll", {"job": "j1"})
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=call) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(answers) == {"queued": 1, "running": 1, "done": 10}


def test_non_object_arguments(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    write_cassette(path, build_cassette([ToolExchange("c1", "Lookup", "i-bp1abc", ["found"])]) or {})
    replayer = ToolReplayer(path)
    assert replayer.call("Lookup", {"input": "i-bp1abc"}) == "found"
    assert replayer.call("Lookup", '{"input": "i-bp1abc"}') == "found"
    assert replayer.call("Lookup", "i-bp1abc") == "found"


def test_no_arguments(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    write_cassette(path, build_cassette([ToolExchange("c1", "Ping", None, ["pong"])]) or {})
    assert ToolReplayer(path).call("Ping", {}) == "pong"
    assert ToolReplayer(path).call("Ping", "") == "pong"
    assert ToolReplayer(path).call("Ping", None) == "pong"


def test_replay_from_task(cassette_path: Path) -> None:
    workspace = cassette_path.parent.parent
    task = _task("tool_mocks/T-1.yaml")
    assert ToolReplayer.for_task(workspace, task).call("Kinds", {"k": 3}) == 3
    as_dict = task.model_dump()
    assert ToolReplayer.for_task(workspace, as_dict).call("Kinds", {"k": 3}) == 3
    assert replay_tool_call(workspace, as_dict, "Poll", {"job": "j1"}) == "queued"
    assert replay_tool_call(workspace, task, "Poll", {"job": "j1"}) == "queued"


def test_task_without_cassette(tmp_path: Path) -> None:
    replayer = ToolReplayer.for_task(tmp_path, _task(None))
    with pytest.raises(NoRecordedResult, match="the task has no cassette"):
        replayer.call("DescribeInstance", {"instance_id": "i-bp1abc"})
    with pytest.raises(NoRecordedResult):
        replay_tool_call(tmp_path, {"cassette": None}, "Anything", {})


def test_missing_cassette_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ToolReplayer.for_task(tmp_path, _task("tool_mocks/missing.yaml"))


def test_no_request_ever_reaches_the_network(cassette_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tool replay touched the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # ignored: trust_env is off
    replayer = ToolReplayer(cassette_path)
    assert replayer.call("Kinds", {"k": 3}) == 3
    with pytest.raises(NoRecordedResult):
        replayer.call("Kinds", {"k": 99})
    with pytest.raises(NoRecordedResult):
        replayer.call("NotRecorded", {})


def test_replay_leaves_httpx_unpatched(cassette_path: Path) -> None:
    """Replay does not monkeypatch httpx, so the evaluator's own requests in
    other threads are never caught by a cassette."""
    before = (httpx.HTTPTransport.handle_request, httpx.AsyncHTTPTransport.handle_async_request)
    replayer = ToolReplayer(cassette_path)
    replayer.call("Kinds", {"k": 3})
    with pytest.raises(NoRecordedResult):
        replayer.call("Kinds", {"k": 99})
    assert (httpx.HTTPTransport.handle_request, httpx.AsyncHTTPTransport.handle_async_request) == before


def test_long_and_awkward_values_round_trip(tmp_path: Path) -> None:
    """Values YAML folds or quotes (long lines, quotes, newlines, '#', ':') survive."""
    arguments = {"text": "word " * 80 + "'quoted' \"double\" #hash key: value\n second line\ttab", "n": -0.0}
    result = {"log": "\n".join(f"line {i}: ok # {'x' * 150}" for i in range(5)), "empty": "", "zero": 0}
    path = tmp_path / "long.yaml"
    write_cassette(path, build_cassette([ToolExchange("c1", "Read", arguments, [result])]) or {})
    assert ToolReplayer(path).call("Read", json.dumps(arguments)) == result
