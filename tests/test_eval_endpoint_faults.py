"""Broken endpoints through ``cirrus eval`` (in process, ``CliRunner``),
against tests/chat_server.py: agent answers that hang, are not JSON, are cut
short or have no choices become error rows of their task and the run
finishes; an endpoint that is down stops the run at its endpoint check (exit
1, no traceback, no run folder); a refused key (agent or judge) stops the run
after one request, naming the endpoint and the option of the key's variable.
The client itself under the same faults: tests/test_endpoint_faults.py; the
endpoint check and interrupts: tests/test_eval_loud.py."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from tests.chat_server import ChatServer, Reply
from tests.moving_clock import moving_clock
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY_ENV = "CIRRUS_EVAL_FAULT_KEY"
KEY = "sk-cirrus-eval-fault-0123456789abcdef"
QUERY = re.compile(r"^\[(?P<task>[^\]]+)\] ")
NO_CHOICES = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "agent", "choices": []}
AGENT_FAULTS = {  # task: (what every agent call of the task gets, what its error row says)
    "T-hang": (Reply(hang=True), "timed out"),
    "T-garbage": (Reply(body=b"<html>502 Bad Gateway</html>"), "malformed answer"),
    "T-cut": (Reply(content="ANSWER-1 and more", truncate=25), "connection failed"),
    "T-empty": (Reply(body=NO_CHOICES), "no choices"),
}


def _task_of(body: dict) -> str:
    for message in body["messages"]:
        match = QUERY.match(message.get("content") or "") if message["role"] == "user" else None
        if match:
            return match["task"]
    return ""


def workspace_of(root: Path, task_ids: list[str], settings: str = "") -> Path:
    """Three-checkpoint tasks (every other one with a tool call); the query
    starts with ``[task id]`` so the server knows whose call it answers."""
    write_workspace(root, [make_task(t, i % 2 == 0, query_prefix=f"[{t}] ") for i, t in enumerate(task_ids)])
    if settings:
        (root / "cirrus.toml").write_text(settings)
    return root


def serving(body: dict, faults: dict | None = None) -> Reply | str:
    """Judge and fluency by rule; a perfect agent, but for the tasks in ``faults``."""
    answer = judge_or_fluency(body)
    if answer is not None:
        return answer
    if faults and _task_of(body) in faults:
        return faults[_task_of(body)]
    return agent_reply("perfect", body)


def cli_eval(workspace: Path, base_url: str, run_id: str, *extra: str, env: dict | None = None):
    return CliRunner().invoke(app, [
        "eval", "--model", "agent", "--base-url", base_url, "--api-key-env", KEY_ENV, "--judge-model", "judge",
        "--fluency-model", "fluency", "--run-id", run_id, "-w", str(workspace), "-q", *extra,
    ], env={KEY_ENV: KEY, **(env or {})})


def assert_no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


BACKOFF_JUMP = 5.0  # s: more than the client's first backoff (1 s + up to 1 s of jitter), far below any timeout


def test_persistently_broken_agent_answers_become_error_rows_of_their_task(tmp_path):
    """Each broken answer is tried twice (max_retries = 1), then its task is
    an error row saying why, and the other tasks are fine.  No wall-clock
    wait: each run's event loops run on a moving clock (tests/moving_clock.py)
    that the server moves 5 s forward shortly after a broken answer, so the
    client's backoff before its second try (1-2 s) ends at once.  These
    jumps add up to 15 s in the first run (3 tasks), 10 s in the second, far
    below every timeout that may be running (120 s; the agent's 30 s in the
    second run), so they cut no request, wherever they fall."""
    # the answers that come at once (not JSON, cut short, no choices), in one run beside two good tasks
    faults = {task: reply for task, (reply, _) in AGENT_FAULTS.items() if task != "T-hang"}
    workspace = workspace_of(tmp_path / "quick", ["T-ok1", *faults, "T-ok2"], "[roles.agent]\nmax_retries = 1\n")
    jumped: set[str] = set()

    def broken_then_jump(body: dict) -> Reply | str:
        task = _task_of(body)
        if task in faults and body["model"] == "agent" and task not in jumped:  # its first try: a backoff follows
            jumped.add(task)
            clock.jump_soon(BACKOFF_JUMP)
        return serving(body, faults)

    with moving_clock() as clock, ChatServer(rule=broken_then_jump) as server:
        result = cli_eval(workspace, server.base_url, "faults", "--concurrency", "8")
        asked = {task: sum(1 for b in server.requests if b["model"] == "agent" and _task_of(b) == task)
                 for task in AGENT_FAULTS}
    # the answer that never comes, in a run of its own: the clock jumps past the 30 s timeout as the server starts
    # to hang, so each try is cut at once, after the server recorded it, instead of after a real timeout; then
    # the backoff's jump.  The hour's jump would cut any request in flight: one attempt at a time
    # (--concurrency 1) and the hanging task first (it has the tool call: longest first), so none is
    hung = workspace_of(tmp_path / "hang", ["T-hang", "T-ok3"], "[roles.agent]\ntimeout = 30\nmax_retries = 1\n")

    def hang_then_jump() -> None:
        clock.jump(3600.0)
        clock.jump_soon(BACKOFF_JUMP)

    with moving_clock() as clock, ChatServer(rule=lambda body: serving(body, {"T-hang": Reply(hang=True)}),
                                             on_stall=hang_then_jump) as server:
        hung_result = cli_eval(hung, server.base_url, "faults", "--concurrency", "1")
        asked["T-hang"] = sum(1 for b in server.requests if b["model"] == "agent" and _task_of(b) == "T-hang")
    for done in (result, hung_result):
        assert_no_traceback(done)
        assert done.exit_code == 0, done.output
    assert asked == {task: 2 for task in AGENT_FAULTS}  # max_retries = 1: two tries each, then given up
    rows = {r["task_id"]: r for folder in (workspace, hung)
            for r in pl.read_parquet(folder / "reports/faults/tasks.parquet").iter_rows(named=True)}
    for task, (_, said) in AGENT_FAULTS.items():
        assert rows[task]["status"] == "error" and rows[task]["tpr"] is None
        assert said in rows[task]["error"] and "agent model 'agent'" in rows[task]["error"], rows[task]["error"]
        assert KEY not in rows[task]["error"]
    assert rows["T-ok1"]["status"] == rows["T-ok2"]["status"] == rows["T-ok3"]["status"] == "ok"
    summaries = [json.loads((folder / "reports/faults/summary.json").read_text()) for folder in (workspace, hung)]
    assert [(s["errors"], s["attempts"]) for s in summaries] == [(len(faults), len(faults) + 2), (1, 2)]
    for summary in summaries:
        assert summary["atpr"] == pytest.approx(1.0)  # over the ok rows only


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_endpoint_that_is_down_stops_the_run_before_any_attempt(tmp_path):
    workspace = workspace_of(tmp_path, ["T-a", "T-b"], "[roles.agent]\nmax_retries = 1\n")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = cli_eval(workspace, url, "down", "--runs", "2")
    assert_no_traceback(result)
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert f"agent model 'agent' at {url}: nothing listens at {url} (connection refused)" in output
    assert not (workspace / "reports/down").exists()  # no run folder: nothing was run


@pytest.mark.parametrize("refusing, option", [("agent", "--api-key-env"), ("judge", "--judge-api-key-env")])
def test_a_refused_key_stops_the_run_after_one_request(tmp_path, refusing, option):
    workspace = workspace_of(tmp_path, ["T-a", "T-b", "T-c"])
    judge_env = "CIRRUS_EVAL_FAULT_JUDGE_KEY"

    def rule(body: dict) -> Reply | str:
        if body["model"] == refusing:
            return Reply(status=401, error_message="Incorrect API key provided")
        return serving(body)

    with ChatServer(rule=rule) as server:
        result = cli_eval(workspace, server.base_url, "refused", "--runs", "2", "--concurrency", "1",
                          "--judge-api-key-env", judge_env, env={judge_env: KEY + "-judge"})
        refused = sum(1 for b in server.requests if b["model"] == refusing)
    assert_no_traceback(result)
    assert result.exit_code == 1, result.output  # the run could not start
    assert refused == 1  # the endpoint check's one request, not retried; no attempt started
    output = " ".join(result.output.split())
    assert f"{refusing} model '{refusing}' at {server.base_url}" in output and "HTTP 401" in output
    assert option in output and (judge_env if refusing == "judge" else KEY_ENV) in output
    assert KEY not in output
    assert not (workspace / "reports/refused").exists()
