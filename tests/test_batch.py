"""The Batch API runner (cirrus.llm.batch) against the local files + batches
server (tests/batch_server.py).  Polling sleeps are injected, so no test
waits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from cirrus.llm.batch import (
    BatchError,
    BatchFailed,
    BatchOutcome,
    BatchRequest,
    BatchStateMismatch,
    BatchStatus,
    BatchUnsupported,
    TokenUsage,
    input_line,
    results_path,
    run_batch,
    split_lines,
    usage_of,
)
from cirrus.llm.client import make_openai_client
from cirrus.llm.providers import Endpoint
from cirrus.pricing import Price
from tests.batch_server import BatchServer, reply

KEY = "sk-test-secret-4242"


def requests_for(*ids: str) -> list[BatchRequest]:
    return [BatchRequest(i, {"model": "judge-m", "messages": [{"role": "user", "content": f"question {i}"}]})
            for i in ids]


class Sleeps:
    """An injected ``sleep`` that records what it was asked to wait."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def run(server: BatchServer | str, requests: list[BatchRequest], state: Path, **kw: Any) -> dict[str, BatchOutcome]:
    """``run_batch`` with a fresh client for ``server`` (or a base URL) and no waiting."""
    kw.setdefault("sleep", Sleeps())
    kw.setdefault("poll_interval_s", 0)

    async def main() -> dict[str, BatchOutcome]:
        async with openai.AsyncOpenAI(base_url=server if isinstance(server, str) else server.base_url, api_key=KEY,
                                      max_retries=0) as client:
            return await run_batch(client, requests, state, **kw)
    return asyncio.run(main())


def content(outcome: BatchOutcome) -> str:
    assert outcome.response is not None, outcome.error
    return outcome.response["choices"][0]["message"]["content"]


def test_happy_path_maps_results_reads_usage_and_matches_online(tmp_path: Path) -> None:
    statuses: list[BatchStatus] = []
    sleeps = Sleeps()
    with BatchServer() as server:
        requests = requests_for("t1-cp2", "t1-cp1", "t2-cp1")

        async def main() -> tuple[dict[str, BatchOutcome], dict[str, Any]]:
            client = make_openai_client(Endpoint("judge-m", server.base_url, None), timeout=10)
            results = await run_batch(client, requests, tmp_path / "state.json", poll_interval_s=0.5, sleep=sleeps,
                                      progress=statuses.append)
            answer = await client.chat.completions.create(**requests[0].body)
            await client.close()
            return results, answer.model_dump()
        results, online_answer = asyncio.run(main())
        uploaded = server.files["file-0001"].data.decode().splitlines()

    assert list(results) == ["t1-cp2", "t1-cp1", "t2-cp1"]  # the caller's order
    assert {c: content(o) for c, o in results.items()} == {
        "t1-cp2": "echo: question t1-cp2", "t1-cp1": "echo: question t1-cp1", "t2-cp1": "echo: question t2-cp1"}
    assert all(o.error is None and o.custom_id == c for c, o in results.items())
    # the default answer reports 20 prompt (8 cached) and 6 completion (2 reasoning) tokens
    assert usage_of(results["t1-cp1"].response) == TokenUsage(20, 8, 6, 2)
    # an online call answered by the same function gives the same message and usage
    assert online_answer["choices"][0]["message"]["content"] == content(results["t1-cp2"])
    assert online_answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 8
    assert server.chat_calls == 1
    # the input file: one POST line per request, sorted by custom_id
    lines = [json.loads(line) for line in uploaded]
    assert [line["custom_id"] for line in lines] == ["t1-cp1", "t1-cp2", "t2-cp1"]
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    assert lines[0]["body"] == requests[1].body
    # validating -> (poll 1) in_progress -> (2) finalizing -> (3) completed: two waits between three polls
    assert [s.status for s in statuses] == ["in_progress", "finalizing", "completed"]
    assert statuses[-1] == BatchStatus("batch-0002", "completed", 3, 0, 3, 1, 1)
    assert sleeps.waits == [0.5, 0.5]
    assert server.uploads == 1 and server.batch_creations == 1 and server.retrievals == 3


def test_output_lines_in_any_order_are_mapped_by_custom_id(tmp_path: Path) -> None:
    ids = [f"r{i}" for i in range(8)]
    with BatchServer(shuffle=3) as server:
        results = run(server, requests_for(*ids), tmp_path / "state.json")
        output = server.files[server.batches["batch-0002"].output_file_id or ""].data.decode().splitlines()
    written = [json.loads(line)["custom_id"] for line in output]
    assert sorted(written) == ids and written != ids  # the server really shuffled them
    assert {c: content(o) for c, o in results.items()} == {i: f"echo: question {i}" for i in ids}


def test_duplicate_custom_ids_are_refused_before_anything_is_sent(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BatchServer() as server:
        with pytest.raises(ValueError, match="duplicate custom_id.*'b'"):
            run(server, requests_for("a", "b", "c", "b"), state)
        assert server.uploads == 0 and server.batch_creations == 0
    assert not state.exists()


class Interrupt(Exception):
    pass


def test_resume_after_interruption_polls_the_same_batch(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    requests = requests_for("a", "b", "c")

    def stop_after_first_poll(status: BatchStatus) -> None:
        raise Interrupt(status.status)

    with BatchServer() as server:
        with pytest.raises(Interrupt, match="in_progress"):
            run(server, requests, state, progress=stop_after_first_poll)
        saved = json.loads(state.read_text())
        assert saved["parts"][0]["batch_id"] == "batch-0002"
        assert saved["parts"][0]["status"] == "in_progress"
        assert not results_path(state).exists()
        # the same requests in another order are the same input
        results = run(server, list(reversed(requests)), state)
        assert server.uploads == 1 and server.batch_creations == 1  # nothing sent twice
        assert server.retrievals == 3  # 1 before the interruption + finalizing + completed
    assert {c: content(o) for c, o in results.items()} == {i: f"echo: question {i}" for i in "abc"}
    assert json.loads(state.read_text())["parts"][0]["downloaded"] is True


def test_resume_after_upload_does_not_upload_again(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BatchServer(no_batches=True) as server:
        with pytest.raises(BatchUnsupported):
            run(server, requests_for("a", "b"), state)
        assert json.loads(state.read_text())["parts"][0]["file_id"] == "file-0001"
        server.no_batches = False
        results = run(server, requests_for("a", "b"), state)
        assert server.uploads == 1 and server.batch_creations == 1
        assert server.batches["batch-0002"].input_file_id == "file-0001"
    assert content(results["b"]) == "echo: question b"


def test_a_state_file_of_other_requests_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state.json"

    def stop(status: BatchStatus) -> None:
        raise Interrupt

    with BatchServer() as server:
        with pytest.raises(Interrupt):
            run(server, requests_for("a", "b"), state, progress=stop)
        before = state.read_text()
        with pytest.raises(BatchStateMismatch, match=f"{state} was written for other requests.*delete {state}"):
            run(server, requests_for("a", "b", "c"), state)
        changed = [BatchRequest("a", {"model": "other", "messages": []}), *requests_for("b")]
        with pytest.raises(BatchStateMismatch, match="other requests"):
            run(server, changed, state)
        assert server.uploads == 1 and server.batch_creations == 1
    assert state.read_text() == before  # left as it was


def test_results_are_read_from_the_cache_without_a_server(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BatchServer() as server:
        base_url = server.base_url
        first = run(server, requests_for("a", "b"), state)
    assert results_path(state) == tmp_path / "state.json.results.jsonl"
    assert results_path(state).exists()
    # the server is gone: any request would fail to connect
    again = run(base_url, requests_for("b", "a"), state)
    assert again == first


def test_keys_are_never_stored(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BatchServer() as server:
        run(server, requests_for("a"), state)
        assert server.headers[0]["authorization"] == f"Bearer {KEY}"  # it was sent...
    stored = state.read_text() + results_path(state).read_text()
    assert KEY not in stored  # ...but not written


def test_provider_without_batch_api(tmp_path: Path) -> None:
    with BatchServer(no_batches=True) as server:
        with pytest.raises(BatchUnsupported) as caught:
            run(server, requests_for("a"), tmp_path / "state.json")
        assert server.batch_creations == 0
    message = str(caught.value)
    assert f"the provider at {server.base_url} has no Batch API" in message
    assert "HTTP 404" in message and "run without --batch" in message


def test_failed_batch_names_the_batch_and_the_provider_errors(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BatchServer(fail=True) as server:
        with pytest.raises(BatchFailed) as caught:
            run(server, requests_for("a", "b"), state)
        assert caught.value.batch_id == "batch-0002" and caught.value.status == "failed"
        assert "batch batch-0002" in str(caught.value) and "ended failed" in str(caught.value)
        assert "scripted_failure: the batch was told to fail" in str(caught.value)
        assert f"Delete {state}" in str(caught.value)
        assert {o.error for o in caught.value.outcomes.values()} == {"batch batch-0002 ended failed"}
        retrievals = server.retrievals
        with pytest.raises(BatchFailed, match="told to fail"):  # a re-run says the same, without asking again
            run(server, requests_for("a", "b"), state)
        assert server.retrievals == retrievals and server.uploads == 1


def test_expired_batch_returns_the_finished_part(tmp_path: Path) -> None:
    with BatchServer(expire=True) as server:
        results = run(server, requests_for("d", "c", "b", "a"), tmp_path / "state.json")
    # the input is sent sorted (a, b, c, d); the server finished the first half: a and b
    assert content(results["a"]) == "echo: question a" and content(results["b"]) == "echo: question b"
    assert results["c"] == BatchOutcome("c", None, "batch batch-0002 expired before this request was answered")
    assert results["d"].error == "batch batch-0002 expired before this request was answered"


def test_cancelled_batch_raises_with_the_answers_it_has(tmp_path: Path) -> None:
    with BatchServer() as server:
        def cancel(status: BatchStatus) -> None:
            if status.status == "in_progress":
                server.batches[status.batch_id].status = "cancelling"

        with pytest.raises(BatchFailed, match="ended cancelled") as caught:
            run(server, requests_for("a", "b", "c", "d"), tmp_path / "state.json", progress=cancel)
    outcomes = caught.value.outcomes
    assert caught.value.status == "cancelled"
    assert [c for c, o in outcomes.items() if o.response is not None] == ["a", "b"]  # 4 // 2 done
    assert outcomes["d"].error == "batch batch-0002 ended cancelled"


def test_per_request_errors(tmp_path: Path) -> None:
    def answer(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["content"] == "question e":
            return 429  # the answer function itself may fail a request
        return reply("fine", prompt=30, cached=None, completion=4, reasoning=None)

    with BatchServer(answer, request_errors={"b": 400, "c": "the model is overloaded"}) as server:
        results = run(server, requests_for("a", "b", "c", "d", "e"), tmp_path / "state.json")
        assert server.batches["batch-0002"].failed == 3
    assert content(results["a"]) == "fine" and content(results["d"]) == "fine"
    assert usage_of(results["a"].response) == TokenUsage(30, None, 4, None)
    assert results["b"] == BatchOutcome("b", None, "HTTP 400: invalid_request_error: scripted request failure")
    assert results["c"] == BatchOutcome("c", None, "server_error: the model is overloaded")
    assert results["e"].error == "HTTP 429: rate_limit_exceeded: scripted failure"


def test_passing_poll_errors_are_tolerated(tmp_path: Path) -> None:
    sleeps = Sleeps()
    with BatchServer(poll_errors=2) as server:
        results = run(server, requests_for("a"), tmp_path / "state.json", sleep=sleeps,
                      poll_interval_s=1)
        # 2 refused polls + in_progress + finalizing + completed; a wait after each poll but the last
        assert server.retrievals == 5 and sleeps.waits == [1, 1, 1, 1]
    assert content(results["a"]) == "echo: question a"


def test_large_inputs_are_split_into_several_batches(tmp_path: Path) -> None:
    statuses: list[BatchStatus] = []
    ids = [f"r{i}" for i in range(5)]
    with BatchServer() as server:
        results = run(server, requests_for(*ids), tmp_path / "state.json", max_requests=2,
                      progress=statuses.append)
        sizes = [len(f.data.splitlines()) for f in server.files.values() if f.purpose == "batch"]
    # 5 requests, at most 2 a batch: 2 + 2 + 1
    assert sizes == [2, 2, 1]
    assert server.uploads == 3 and server.batch_creations == 3
    assert {c: content(o) for c, o in results.items()} == {i: f"echo: question {i}" for i in ids}
    assert {(s.part, s.parts) for s in statuses} == {(1, 3), (2, 3), (3, 3)}
    saved = json.loads((tmp_path / "state.json").read_text())
    assert [p["requests"] for p in saved["parts"]] == [2, 2, 1]


def test_split_lines_keeps_to_both_limits() -> None:
    lines = [b"x" * 4 + b"\n"] * 5  # 5 bytes each
    assert [len(g) for g in split_lines(lines, max_requests=10, max_bytes=12)] == [2, 2, 1]  # 10 <= 12 < 15
    assert [len(g) for g in split_lines(lines, max_requests=3, max_bytes=100)] == [3, 2]
    with pytest.raises(ValueError, match="over the limit of 4 bytes"):
        split_lines(lines, max_requests=3, max_bytes=4)
    line = input_line(BatchRequest("a", {"model": "m"}))
    assert json.loads(line) == {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": "m"}}


def test_usage_of_and_the_batch_price() -> None:
    assert usage_of({"choices": []}) == TokenUsage(None, None, None, None)
    assert usage_of({"usage": {"prompt_tokens": 5, "prompt_tokens_details": None}}) == TokenUsage(5, None, None, None)
    usage = usage_of({"usage": {"prompt_tokens": 1_000_000, "completion_tokens": 200_000,
                                "prompt_tokens_details": {"cached_tokens": 400_000},
                                "completion_tokens_details": {"reasoning_tokens": 50_000}}}).as_usage()
    assert (usage.batch_calls, usage.batch_input_tokens, usage.batch_cached_input_tokens,
            usage.batch_output_tokens, usage.reasoning_tokens) == (1, 1_000_000, 400_000, 200_000, 50_000)
    price = Price(input_per_mtok=2.0, output_per_mtok=10.0, cached_input_per_mtok=0.5, batch_discount=0.5)
    # online: 0.6 M uncached * 2 + 0.4 M cached * 0.5 + 0.2 M out * 10 = 1.2 + 0.2 + 2.0 = 3.4; half of it: 1.7
    assert price.usage_cost(usage) == pytest.approx(1.7)


def test_a_state_file_of_another_provider_or_unreadable_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BatchServer() as first:
        run(first, requests_for("a"), state)
    with BatchServer() as second:  # another port: another provider, which never heard of the batch
        with pytest.raises(BatchStateMismatch, match=f"belongs to batches at {first.base_url}, not {second.base_url}"):
            run(second, requests_for("a"), state)
        state.write_text("{not json")
        with pytest.raises(BatchStateMismatch, match=f"{state} cannot be read.*delete {state}"):
            run(second, requests_for("a"), state)
        assert second.uploads == 0


def test_a_batch_the_provider_does_not_know_says_to_start_again(tmp_path: Path) -> None:
    state = tmp_path / "state.json"

    def stop(status: BatchStatus) -> None:
        raise Interrupt

    with BatchServer() as server:
        with pytest.raises(Interrupt):
            run(server, requests_for("a"), state, progress=stop)
        server.batches.clear()  # the provider deleted it
        with pytest.raises(BatchError, match=f"batch batch-0002 is unknown at .*delete {state}"):
            run(server, requests_for("a"), state)
