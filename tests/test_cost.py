"""Usage and cost per role of a real run, --estimate and --max-cost, against a
local server that reports usage with cached and reasoning tokens (issue 16).

Every expected figure is computed by hand from the usage the server reports
and the number of requests it saw per model (its own record, not Cirrus's).
The commands run in this process (``tests.test_eval_loud.run_here``: exit
status, stdout and stderr apart): these tests are about what a command
prints and writes, not about a process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace
from tests.test_eval_loud import is_probe, no_traceback, run_here

KEY_ENV = "CIRRUS_LOUD_KEY"  # tests.test_eval_loud.run_here() sets it
USAGE = {
    "agent": {"prompt_tokens": 1000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 600},
              "completion_tokens_details": {"reasoning_tokens": 50}},
    "judge": {"prompt_tokens": 500, "completion_tokens": 30},
    "fluency": {"prompt_tokens": 300, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 100}},
}
PRICES = """
[prices."agent"]
input_per_mtok = 2.0
cached_input_per_mtok = 0.5
output_per_mtok = 8.0

[prices."judge"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"""


def serving(body: dict) -> Reply:
    """A perfect agent, a rule judge and a rule fluency checker, each call
    reporting the usage of ``USAGE`` for its model."""
    answer = judge_or_fluency(body)
    reply = agent_reply("perfect", body) if answer is None else Reply(content=answer)
    reply.usage = USAGE[body["model"]]
    return reply


def workspace(root: Path, tasks: int = 3) -> Path:
    # distinct queries: no two tasks ask the judge the same question
    write_workspace(root, [make_task(f"T-{n}", n % 2 == 0, query_prefix=f"[T-{n}] ") for n in range(tasks)])
    (root / "cirrus.toml").write_text(PRICES)
    return root


def command(ws: Path, base_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cirrus.cli", "eval", "--base-url", base_url, "--api-key-env", KEY_ENV,
            "--model", "agent", "--judge-model", "judge", "--fluency-model", "fluency", "-w", str(ws), "-q", *extra]


def sent(server: ChatServer, model: str) -> int:
    """Requests of ``model`` the server answered, the endpoint check's
    included (billed like the others, issue 22)."""
    return sum(1 for body in server.requests if body["model"] == model)


def test_usage_and_cost_per_role_match_the_servers_count(tmp_path):
    ws = workspace(tmp_path)
    with ChatServer(rule=serving) as server:
        # one attempt per task: no question is asked twice (a second attempt's identical judge questions
        # would be answered from Cirrus's cache, or not, depending on which attempt asks first)
        done = run_here(command(ws, server.base_url, "--run-id", "priced"), ws)
        counts = {model: sent(server, model) for model in USAGE}
        # the same judge questions again (another run id, the same endpoint): from Cirrus's cache
        again = run_here(command(ws, server.base_url, "--run-id", "again"), ws)
        judge_sent = sent(server, "judge") - counts["judge"]
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    summary = json.loads((ws / "reports/priced/summary.json").read_text())
    usage, cost = summary["usage"], summary["cost"]
    assert counts["agent"] and counts["judge"] and counts["fluency"]
    for model, reported in USAGE.items():
        n = counts[model]
        assert usage[model]["calls"] == n
        assert usage[model]["input_tokens"] == n * reported["prompt_tokens"]
        assert usage[model]["cached_input_tokens"] == n * reported.get("prompt_tokens_details", {}).get(
            "cached_tokens", 0)
        assert usage[model]["output_tokens"] == n * reported["completion_tokens"]
        assert usage[model]["reasoning_tokens"] == n * reported.get("completion_tokens_details", {}).get(
            "reasoning_tokens", 0)
        assert usage[model]["cirrus_cache_hits"] == 0
    # agent per call: (1000 - 600) / 1e6 * 2.0 + 600 / 1e6 * 0.5 + 200 / 1e6 * 8.0 = 0.0008 + 0.0003 + 0.0016 = 0.0027
    assert cost["agent"] == pytest.approx(counts["agent"] * 0.0027)
    # judge per call: 500 / 1e6 * 1.0 + 30 / 1e6 * 2.0 = 0.00056
    assert cost["judge"] == pytest.approx(counts["judge"] * 0.00056)
    assert cost["fluency"] is None  # no price for the fluency model
    assert cost["total"] == pytest.approx(counts["agent"] * 0.0027 + counts["judge"] * 0.00056)
    assert cost["currency"] == "USD"
    # the provider's prompt cache served 600 of 1000 agent input tokens, 100 of 300 fluency ones
    assert summary["prompt_cache_share"] == {"agent": 0.6, "judge": 0.0, "fluency": pytest.approx(1 / 3, abs=1e-4)}
    assert "usage and cost" in done.stdout and "estimate:" in done.stderr  # the estimate is shown at the start

    assert again.returncode == 0, again.stderr
    repeated = json.loads((ws / "reports/again/summary.json").read_text())
    assert judge_sent == 1  # the endpoint check: every question from the cache
    assert repeated["usage"]["judge"]["calls"] == 1 and repeated["overhead_usage"]["preflight"]["judge"]["calls"] == 1
    assert repeated["usage"]["judge"]["cirrus_cache_hits"] == counts["judge"] - 1
    assert repeated["cost"]["judge"] == pytest.approx(0.00056)


def test_estimate_calls_no_model(tmp_path):
    ws = workspace(tmp_path)
    with ChatServer(rule=serving) as server:
        done = run_here(command(ws, server.base_url, "--estimate", "--pass-k", "2"), ws)
        assert server.requests == []
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert "estimate: 3 tasks, 9 checkpoints, 2 attempt(s) each" in done.stdout
    for role in ("agent", "judge", "fluency", "total"):
        assert role in done.stdout
    assert "no price" in done.stdout  # the fluency model
    assert not (ws / "reports").exists()


def test_max_cost_stops_cleanly_and_a_higher_budget_resumes(tmp_path):
    ws = workspace(tmp_path, tasks=4)
    (ws / "cirrus.toml").write_text(PRICES + '\n[prices."fluency"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n')
    with ChatServer(rule=serving) as server:
        # one attempt at a time; the endpoint check costs 0.0027 + 0.00056 (agent and judge), every attempt more
        # than 0.005, so the budget is spent after the first
        done = run_here(command(ws, server.base_url, "--run-id", "budget", "--concurrency", "1", "--max-cost", "0.005"),
                        ws)
    no_traceback(done)
    assert done.returncode == 3, done.stderr
    assert "stopped:" in done.stderr and "--max-cost AMOUNT" in done.stderr
    summary = json.loads((ws / "reports/budget/summary.json").read_text())
    assert summary["attempts"] == 1 and summary["budget_stop"]["attempts_left"] == 3
    assert summary["budget_stop"]["spent"] == pytest.approx(summary["cost"]["total"]) and summary["cost"]["total"] > 0.001
    with ChatServer(rule=serving) as server:
        resumed = run_here(command(ws, server.base_url, "--run-id", "budget", "--max-cost", "100"), ws)
    assert resumed.returncode == 0, resumed.stderr
    final = json.loads((ws / "reports/budget/summary.json").read_text())
    assert final["attempts"] == 4 and "budget_stop" not in final
    # the usage of the first session is kept: the run's cost covers all four attempts
    assert final["usage"]["agent"]["calls"] > summary["usage"]["agent"]["calls"]


def test_max_cost_needs_a_price_for_every_model(tmp_path):
    ws = workspace(tmp_path)
    with ChatServer(rule=serving) as server:
        done = run_here(command(ws, server.base_url, "--max-cost", "1"), ws)
        assert [body for body in server.requests if not is_probe(body)] == []
    assert done.returncode == 2
    assert "--max-cost needs a price for every model" in done.stderr and "'fluency'" in done.stderr


def test_attempt_order_keeps_a_tasks_attempts_together_longest_first():
    from cirrus.evaluate.scheduler import attempt_order
    from cirrus.evaluate.tasks import TaskRef

    refs = [TaskRef("short", 1, 0, 1, 2, 100), TaskRef("long", 2, 1, 1, 5, 50), TaskRef("tie", 3, 2, 1, 2, 100)]
    order = [(ref.task_id, attempt) for ref, attempt in attempt_order(refs, 3, {("long", 1)})]
    # most checkpoints first; equal tasks in file order; each task's attempts next to each other, done ones left out
    assert order == [("long", 0), ("long", 2), ("short", 0), ("short", 1), ("short", 2),
                     ("tie", 0), ("tie", 1), ("tie", 2)]


def test_a_tasks_attempts_send_the_same_prefix_one_after_the_other(tmp_path):
    """Prompt-cache friendly: every attempt of a task starts with the same
    request (system prompt with knowledge, tools, history, query), byte for
    byte, and with one attempt in flight at a time the attempts of a task
    follow each other."""
    ws = workspace(tmp_path, tasks=2)
    with ChatServer(rule=serving) as server:
        done = run_here(command(ws, server.base_url, "--run-id", "prefix", "--runs", "3", "--concurrency", "1"), ws)
        bodies = [body for body in server.requests if body["model"] == "agent" and not is_probe(body)]
    assert done.returncode == 0, done.stderr
    firsts = [(body["messages"][-1]["content"], json.dumps(body, sort_keys=True)) for body in bodies
              if len(body["messages"]) == 2]  # system + the first query: the first call of an attempt
    assert len(firsts) == 6
    tasks_in_order = [query.split("]")[0] for query, _ in firsts]
    assert tasks_in_order == [tasks_in_order[0]] * 3 + [tasks_in_order[3]] * 3
    assert len({text for _, text in firsts[:3]}) == 1 and len({text for _, text in firsts[3:]}) == 1
