"""`cirrus rescore --batch` and `cirrus judge-eval --batch` against the local
files + batches server (tests/batch_server.py), which answers online chat
calls and batch lines with the same rule: the batch commands must give the
online verdicts, make no online call, and cost the online price less the
batch discount.  Polls do not wait (``CIRRUS_BATCH_POLL_S=0``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.llm.batching import BatchCollector, Deferred, custom_id, run_in_rounds
from tests.batch_server import BatchServer, reply
from tests.scripted_models import agent_reply, between, make_task, write_workspace

KEY_ENV = "CIRRUS_BATCH_KEY"
ENV = {KEY_ENV: "sk-batch-test-0123456789", "COLUMNS": "200", "CIRRUS_BATCH_POLL_S": "0"}
# every judge answer reports 20 input tokens (8 of them cached) and 6 output tokens (tests.batch_server.reply)
PRICES = """
[prices."judge2"]
input_per_mtok = 1.0
cached_input_per_mtok = 0.5
output_per_mtok = 2.0
batch_discount = 0.5
"""
# one judge call: (20 - 8) / 1e6 * 1.0 + 8 / 1e6 * 0.5 + 6 / 1e6 * 2.0 = (12 + 4 + 12) / 1e6 = 28e-6
ONLINE_CALL = 28e-6


def rule(body: dict):
    """Agent models answer by mode (tests.scripted_models); ``judge`` and
    ``judge2`` say Included when the reference is in the candidate, except
    that ``judge2`` also accepts "I am not sure." for checkpoint 2."""
    model = body["model"]
    if model in ("judge", "judge2"):
        user = body["messages"][1]["content"]
        reference, candidate = between(user, "reference_reply"), between(user, "candidate_reply")
        ok = reference in candidate or (model == "judge2" and reference == "ANSWER-2" and
                                        candidate == "I am not sure.")
        return reply(json.dumps({"reason": "rule", "verdict": "Included" if ok else "Not Included"}))
    if model == "fluency":
        return reply(json.dumps({"reason": "rule", "answer": "Yes"}))
    return agent_reply(model, body)


def invoke(*args: str, code: int = 0):
    result = CliRunner().invoke(app, list(args), env=ENV)
    assert result.exit_code == code, result.output
    return result


def rescore_args(ws: Path, server: BatchServer, run_id: str, *extra: str) -> list[str]:
    return ["rescore", run_id, "--judge-model", "judge2", "--judge-base-url", server.base_url,
            "--judge-api-key-env", KEY_ENV, "-w", str(ws), "-q", *extra]


@pytest.fixture
def made(tmp_path: Path):
    """A finished run ``perfect`` (two tasks, distinct questions) in a
    workspace, and the server it was made with."""
    ws = write_workspace(tmp_path / "ws", [make_task(f"T-{n}", n == 1, query_prefix=f"[T-{n}] ") for n in range(2)])
    (ws / "cirrus.toml").write_text(PRICES)
    with BatchServer(rule) as server:
        for model in ("perfect", "failer"):
            invoke("eval", "--model", model, "--base-url", server.base_url, "--api-key-env", KEY_ENV,
                   "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", model, "-w", str(ws), "-q")
        yield ws, server


def copy(ws: Path, name: str) -> Path:
    """A copy of the workspace (its response cache holds only the source run's ``judge`` answers)."""
    return Path(shutil.copytree(ws, ws.parent / name))


def tables(ws: Path, run_id: str) -> tuple[dict, pl.DataFrame, pl.DataFrame]:
    directory = ws / "reports" / run_id
    summary = json.loads((directory / "summary.json").read_text())
    tasks = pl.read_parquet(directory / "tasks.parquet").drop("run_id").sort("task_id", "attempt")
    checkpoints = pl.read_parquet(directory / "checkpoints.parquet").drop("run_id").sort(
        "task_id", "attempt", "checkpoint")
    return summary, tasks, checkpoints


def verdicts(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select([c for c in frame.columns if "wall" not in c])


def test_batch_rescore_gives_the_online_verdicts_at_the_batch_price(made):
    ws, server = made
    online_ws, batch_ws = copy(ws, "online"), copy(ws, "batch")
    before = server.chat_calls
    invoke(*rescore_args(online_ws, server, "failer", "--run-id", "r"))
    online_calls = server.chat_calls - before
    chat_before, batches_before = server.chat_calls, server.batch_creations
    done = invoke(*rescore_args(batch_ws, server, "failer", "--run-id", "r", "--batch"))
    assert server.chat_calls == chat_before  # nothing was sent online
    online, online_tasks, online_checkpoints = tables(online_ws, "r")
    batch, batch_tasks, batch_checkpoints = tables(batch_ws, "r")
    assert verdicts(batch_checkpoints).equals(verdicts(online_checkpoints))
    assert verdicts(batch_tasks).equals(verdicts(online_tasks))
    assert batch_checkpoints["accepted"].to_list() == online_checkpoints["accepted"].to_list()
    # "failer" answers ANSWER-1 then "I am not sure."; the source judge rejected that, so the saved
    # transcript ends after turn 2.  judge2 per task: c1 yes, c2-later no, (fluency reused) c2 yes,
    # c3-later no, then no saved turn 3: truncated with 2 of 3 covered
    assert batch["atpr"] == online["atpr"] == pytest.approx(2 / 3)
    assert batch["rescore"]["truncated"] == online["rescore"]["truncated"] == 2
    # the 4 questions come one after the other per attempt: 4 rounds of one batch (one endpoint)
    assert batch["batch"] == {"rounds": 4, "requests": 8}
    assert server.batch_creations - batches_before == 4
    # 2 tasks x 4 questions, all distinct: 8 calls either way
    assert online_calls == 8
    assert online["usage"]["judge"]["calls"] == batch["usage"]["judge"]["calls"] == 8
    assert batch["usage"]["judge"]["batch_calls"] == 8 and online["usage"]["judge"]["batch_calls"] == 0
    assert online["cost"]["judge"] == pytest.approx(8 * ONLINE_CALL)  # 224e-6
    assert batch["cost"]["judge"] == pytest.approx(8 * ONLINE_CALL * (1 - 0.5))  # 112e-6
    assert "in batches" in done.output and "batch: 8 requests in 4 rounds" in done.output
    # run again: everything is committed, nothing is sent again
    creations = server.batch_creations
    invoke(*rescore_args(batch_ws, server, "failer", "--run-id", "r", "--batch"))
    assert server.batch_creations == creations and server.chat_calls == chat_before


def test_an_interrupted_batch_rescore_resumes_without_sending_round_one_again(made):
    ws, server = made
    server.poll_errors = 100  # the provider stops answering polls: the command gives up after round 1's creation
    failed = invoke(*rescore_args(ws, server, "perfect", "--run-id", "p", "--batch"), code=1)
    assert "run again with the same state file" in failed.output
    assert server.batch_creations == 1 and server.uploads == 1
    states = sorted(p.name for p in (ws / ".cirrus-cache/batches/rescore-p").glob("*.json"))
    assert len(states) == 1 and "-round1-" in states[0]
    assert not (ws / "reports/p/summary.json").exists()
    server.poll_errors = 0
    chat = server.chat_calls
    invoke(*rescore_args(ws, server, "perfect", "--run-id", "p", "--batch"))
    # perfect: c1, c2-later (no), c2, c3-later (no), c3 -> 5 rounds; round 1's batch was polled, not created again
    assert server.batch_creations == 5 and server.uploads == 5
    assert server.chat_calls == chat
    summary, _, _ = tables(ws, "p")
    assert summary["atpr"] == 1.0 and summary["batch"] == {"rounds": 5, "requests": 10}


def test_a_provider_without_batches_is_a_clear_error(made):
    ws, server = made
    server.no_batches = True
    chat = server.chat_calls
    result = invoke(*rescore_args(ws, server, "perfect", "--run-id", "nb", "--batch"), code=2)
    assert "has no Batch API" in result.output and "run without --batch" in result.output
    assert "Traceback" not in result.output
    assert server.chat_calls == chat  # nothing went online instead
    assert not (ws / "reports/nb/attempts.jsonl").exists()


def test_a_request_the_batch_answers_with_an_error_is_an_error_row_as_online(made):
    ws, server = made
    online_ws, batch_ws = copy(ws, "online"), copy(ws, "batch")

    def refusing(body: dict):  # judge2 refuses every question about task T-1
        return 400 if body["model"] == "judge2" and "[T-1]" in json.dumps(body) else rule(body)

    server.answer = refusing
    invoke(*rescore_args(online_ws, server, "perfect", "--run-id", "e"))
    done = invoke(*rescore_args(batch_ws, server, "perfect", "--run-id", "e", "--batch"))
    online, online_tasks, _ = tables(online_ws, "e")
    batch, batch_tasks, _ = tables(batch_ws, "e")
    assert online["errors"] == batch["errors"] == 1
    assert batch_tasks["status"].to_list() == online_tasks["status"].to_list() == ["ok", "error"]
    rows = [json.loads(line) for line in (batch_ws / "reports/e/attempts.jsonl").read_text().splitlines()]
    error = next(r["error"] for r in rows if r["status"] == "error")
    assert "batch request failed: HTTP 400" in error
    # T-0 alone: 5 questions in 5 rounds (T-1's first question failed in round 1)
    assert batch["batch"] == {"rounds": 5, "requests": 6}
    assert "Traceback" not in done.output


def test_judge_eval_batch_gives_the_online_confusion_matrix(tmp_path: Path):
    labels = tmp_path / "labels.jsonl"
    rows = [{"query": f"q{n}", "reference": f"ANSWER-{n}", "candidate": f"ANSWER-{n}" if n % 3 else "no idea",
             "label": "Included" if n % 2 else "Not Included"} for n in range(1, 9)]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "cirrus.toml").write_text(PRICES)
    with BatchServer(rule) as server:
        args = ["judge-eval", str(labels), "--judge-model", "judge2", "--judge-base-url", server.base_url,
                "--judge-api-key-env", KEY_ENV, "-q"]
        online_ws, batch_ws = tmp_path / "a", tmp_path / "b"
        online_ws.mkdir(), batch_ws.mkdir()
        shutil.copy(tmp_path / "cirrus.toml", online_ws), shutil.copy(tmp_path / "cirrus.toml", batch_ws)
        invoke(*args, "-w", str(online_ws), "-o", str(tmp_path / "online.jsonl"))
        chat = server.chat_calls
        done = invoke(*args, "-w", str(batch_ws), "-o", str(tmp_path / "batch.jsonl"), "--batch")
        assert server.chat_calls == chat and server.batch_creations == 1
    online = [json.loads(line) for line in (tmp_path / "online.jsonl").read_text().splitlines()]
    batch = [json.loads(line) for line in (tmp_path / "batch.jsonl").read_text().splitlines()]
    assert [r["predicted"] for r in batch] == [r["predicted"] for r in online]
    # candidates hold the reference except n = 3, 6 -> Included for 1, 2, 4, 5, 7, 8; labels Included for odd n:
    # tp = {1, 5, 7}, fp = {2, 4, 8}, fn = {3}, tn = {6}
    assert "judge: 8 calls (8 in batches)" in done.output
    # 8 batch calls at half of 28e-6 each: 8 * 14e-6 = 0.000112
    assert "cost 0.000112 USD" in done.output
    matrix = [(r["label"], r["predicted"]) for r in batch]
    assert matrix.count(("Included", "Included")) == 3 and matrix.count(("Not Included", "Included")) == 3
    assert matrix.count(("Included", "Not Included")) == 1 and matrix.count(("Not Included", "Not Included")) == 1


class _Client:
    """The parts of a ChatClient the collector reads."""

    class role:  # noqa: N801
        name = "judge"

        class endpoint:  # noqa: N801
            base_url = "http://127.0.0.1:1/v1"
            api_key_env = None

        @staticmethod
        def describe() -> str:
            return "judge"

    @staticmethod
    def _redact(text: str) -> str:
        return text


def test_the_collector_defers_unknown_requests_and_dedupes_them():
    collector = BatchCollector()
    payload = b'{"model":"m","messages":[]}'
    for _ in range(2):
        with pytest.raises(Deferred):
            collector.answer(_Client(), payload)  # type: ignore[arg-type]
    assert list(collector.pending) == [custom_id("http://127.0.0.1:1/v1", payload)]
    # another endpoint, the same body: another request
    assert custom_id("http://other/v1", payload) != custom_id("http://127.0.0.1:1/v1", payload)


def test_rounds_stop_at_the_bound(tmp_path: Path):
    import asyncio

    from cirrus.llm.batching import TooManyRounds

    collector = BatchCollector()
    count = {"n": 0}

    async def dry() -> None:  # asks a new question every pass (a dry pass that never settles)
        count["n"] += 1
        try:
            collector.answer(_Client(), json.dumps({"n": count["n"]}).encode())  # type: ignore[arg-type]
        except Deferred:
            pass

    async def flush(*args, **kwargs) -> int:  # no server: pretend the batch answered nothing
        collector.rounds += 1
        collector.pending.clear()
        return 1

    collector.flush = flush  # type: ignore[method-assign]
    with pytest.raises(TooManyRounds, match="after 2 batch rounds"):
        asyncio.run(run_in_rounds(collector, dry, tmp_path, max_rounds=2))
    assert count["n"] == 3 and not collector.dry


def test_requests_an_expired_batch_left_unanswered_go_in_the_next_round(tmp_path: Path, monkeypatch):
    import asyncio

    from cirrus.llm.client import ClientPool, RoleConfig
    from cirrus.usage import UsageLedger, recording

    monkeypatch.setenv(KEY_ENV, ENV[KEY_ENV])
    monkeypatch.setenv("CIRRUS_BATCH_POLL_S", "0")
    notes: list[str] = []
    questions = [[{"role": "user", "content": f"question {n}"}] for n in range(4)]

    with BatchServer(expire=True) as server:  # an expired batch answers the first half of its lines

        def notify(text: str) -> None:
            notes.append(text)
            if "expired unanswered" in text:
                server.expire = False  # the next batch completes

        async def main() -> tuple[list[str], UsageLedger]:
            async with ClientPool() as pool:
                client = pool.client(RoleConfig.from_options("judge-m", server.base_url, KEY_ENV, name="judge"))
                collector = BatchCollector()
                pool.use_batch(collector)

                async def dry() -> None:
                    for messages in questions:
                        try:
                            await client.complete(messages)
                        except Deferred:
                            pass

                rounds = await run_in_rounds(collector, dry, tmp_path, notify=notify)
                assert rounds == 2 and collector.sent == 4 + 2  # round 2 holds the 2 expired requests
                with recording(UsageLedger()) as ledger:
                    answers = [(await client.complete(messages)).content for messages in questions]
                return answers, ledger

        answers, ledger = asyncio.run(main())
        assert server.batch_creations == 2 and server.chat_calls == 0
    assert answers == [f"echo: question {n}" for n in range(4)]
    assert any("2 requests expired unanswered" in note for note in notes)
    usage = ledger.clients["judge"]
    # 4 answers of 20 input (8 cached) and 6 output tokens each (tests.batch_server.reply), all batch calls
    assert (usage.calls, usage.batch_calls, usage.batch_input_tokens, usage.batch_output_tokens) == (4, 4, 80, 24)
