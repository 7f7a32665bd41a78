"""`cirrus eval` under faults, run as the real command (a child process)
against a local OpenAI-compatible server that plays the agent, the judge and
the fluency checker by rule (tests/chat_server.py).  A run that is neither
killed nor faulted (the uninterrupted run, the same command again after a
kill) is the same command, with the same environment variable and working
directory, in this process (tests/_cli_here.py): no new interpreter and
imports for it.

* killed with SIGKILL in the middle of a run and run again with the same
  command: every (task, attempt) is done exactly once, and the scores are
  those of an uninterrupted run;
* an endpoint that always answers 500 to one task's agent calls: that task's
  rows are errors, left out of the scores and counted in ``errors``; the
  other tasks are scored as usual;
* an agent endpoint that refuses the key (401): the command stops at once,
  names the key's variable, and does not retry.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.llm.client import RoleConfig
from cirrus.schema import ToolExchange
from tests._cli_here import Ran, cli_here
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import TOOL_ARGS, agent_reply, judge_or_fluency, make_task

KEY_ENV = "CIRRUS_FAULT_KEY"
KEY = "sk-cirrus-fault-secret-0123456789"
MODES = ("perfect", "jumper", "failer", "disfluent")
SCORE_KEYS = ("n_tasks", "atpr", "alj", "anei", "amtl", "sr", "pass^2", "errors", "attempts")
ROW_KEYS = ("task_id", "attempt", "category", "checkpoints", "covered", "accepted_turns", "tpr", "lj", "nei", "mtl",
            "success", "status", "output_tokens")
QUERY = re.compile(r"^\[(?P<task>[^:\]]+):(?P<mode>[a-z]+)\]")


# -- the workspace ---------------------------------------------------------------


def _task(task_id: str, mode: str, with_tool: bool) -> dict:
    return make_task(task_id, with_tool, query_prefix=f"[{task_id}:{mode}] ")


def make_workspace(root: Path, n_tasks: int, broken: str | None = None) -> Path:
    """``n_tasks`` tasks of 3 checkpoints; task ``i`` plays ``MODES[i % 4]``,
    even tasks call a tool at checkpoint 1.  ``broken`` adds a task of that id."""
    specs = [(f"T{i:02d}", MODES[i % len(MODES)], i % 2 == 0) for i in range(n_tasks)]
    if broken:
        specs.insert(1, (broken, "perfect", False))
    tasks = [_task(*spec) for spec in specs]
    (root / "tickets").mkdir(parents=True)
    (root / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    cassette = build_cassette([ToolExchange("c1", "DescribeInstance", TOOL_ARGS, [{"status": "Running"}])])
    for task in tasks:
        if task["cassette"]:
            write_cassette(root / task["cassette"], cassette)
    return root


# -- the server's rule -----------------------------------------------------------------


def _task_of(body: dict) -> tuple[str, str]:
    for message in body["messages"]:
        if message["role"] == "user":
            match = QUERY.match(message["content"] or "")
            if match:
                return match["task"], match["mode"]
    return "", "perfect"


def rule(body: dict) -> Reply | str:
    answer = judge_or_fluency(body)
    if answer is not None:
        return answer
    return agent_reply(_task_of(body)[1], body)


# -- running the command -------------------------------------------------------------


def eval_args(workspace: Path, server: ChatServer, run_id: str, *extra: str) -> list[str]:
    return ["eval", "--model", "agent", "--base-url", server.base_url, "--api-key-env", KEY_ENV, "--judge-model",
            "judge", "--fluency-model", "fluency", "--run-id", run_id, "-w", str(workspace), "-q", *extra]


def eval_command(workspace: Path, server: ChatServer, run_id: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cirrus.cli", *eval_args(workspace, server, run_id, *extra)]


def child_env() -> dict[str, str]:
    return {**os.environ, KEY_ENV: KEY, "PYTHONUNBUFFERED": "1"}


def run_eval(workspace: Path, server: ChatServer, run_id: str, *extra: str,
             timeout: float = 120) -> subprocess.CompletedProcess:
    # run from the workspace, so that no cirrus.toml of the current directory changes the roles
    return subprocess.run(eval_command(workspace, server, run_id, *extra), env=child_env(), capture_output=True,
                          text=True, timeout=timeout, cwd=workspace)


def eval_here(workspace: Path, server: ChatServer, run_id: str, *extra: str) -> Ran:
    """:func:`run_eval`'s command in this process, with the child's key
    variable and working directory (the workspace) for the time it runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, KEY)
        patch.chdir(workspace)
        return cli_here(eval_args(workspace, server, run_id, *extra))


def report(workspace: Path, run_id: str) -> Path:
    return workspace / "reports" / run_id


def jsonl(path: Path) -> tuple[list[dict], int]:
    """The readable lines of a JSONL file, and how many lines could not be read."""
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    return rows, bad


def agent_requests(server: ChatServer, task: str | None = None) -> int:
    return sum(1 for body in server.requests if body.get("model") == "agent" and (task is None or _task_of(body)[0] == task))


def task_rows(workspace: Path, run_id: str) -> list[dict]:
    frame = pl.read_parquet(report(workspace, run_id) / "tasks.parquet").sort(["task_id", "attempt"])
    return [{k: row[k] for k in ROW_KEYS} for row in frame.iter_rows(named=True)]


# -- (a) killed and resumed ------------------------------------------------------------

N_TASKS, RUNS, CONCURRENCY = 12, 2, 4
KILL_EXTRA = ("--runs", str(RUNS), "--pass-k", "2", "--concurrency", str(CONCURRENCY))


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> tuple[Path, int]:
    """An uninterrupted run of the same command, for the expected scores (own
    workspace, run id and cache), and how many agent calls it made.  The
    server's rule is deterministic, so one clean run serves every kill point
    (a delay only paces the killed runs, below)."""
    with ChatServer(rule=rule) as server:
        clean_ws = make_workspace(tmp_path_factory.mktemp("faults-clean") / "clean", N_TASKS)
        clean = eval_here(clean_ws, server, "clean", *KILL_EXTRA)
        assert clean.returncode == 0, clean.stderr
        return clean_ws, agent_requests(server)


# at the start, early, near the end.  The attempts are alike, so the workers
# commit them in bursts of CONCURRENCY; "near the end" stops inside the
# next-to-last burst, leaving a whole burst (several sequential model calls)
# for the kill to land before: a count inside the last burst could see the
# run finish before the signal arrives
@pytest.mark.parametrize("kill_after", [1, 3, N_TASKS * RUNS - CONCURRENCY - 1])
def test_a_killed_run_resumes_to_the_same_result(tmp_path, kill_after, clean_run):
    workspace = make_workspace(tmp_path / "ws", N_TASKS)
    pairs = {(f"T{i:02d}", a) for i in range(N_TASKS) for a in range(RUNS)}
    extra = KILL_EXTRA
    clean_ws, clean_agent_calls = clean_run
    with ChatServer(rule=rule, delay=0.05) as server:
        # the same run, killed once `kill_after` attempts are committed
        before = len(server.requests)
        attempts_file = report(workspace, "r") / "attempts.jsonl"
        proc = subprocess.Popen(eval_command(workspace, server, "r", *extra), env=child_env(), cwd=workspace,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        committed_at_kill = 0
        while proc.poll() is None and time.monotonic() < deadline:
            if attempts_file.exists():
                committed_at_kill = len(jsonl(attempts_file)[0])
                if committed_at_kill >= kill_after:
                    proc.send_signal(signal.SIGKILL)
                    break
            time.sleep(0.005)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL, f"not killed in time (exit {proc.returncode}): {proc.stderr.read()}"
        proc.stderr.close()
        rows_at_kill, _ = jsonl(attempts_file)
        assert kill_after <= len(rows_at_kill) < len(pairs)
        assert not (report(workspace, "r") / "summary.json").exists()
        killed_agent_calls = agent_requests(server)

        # the same command again, to the end (not killed, so in this process and not paced)
        server.delay = 0.0
        calls_before_resume = len(server.requests)
        resumed = eval_here(workspace, server, "r", *extra)
        assert resumed.returncode == 0, resumed.stderr
        resumed_agent_calls = agent_requests(server) - killed_agent_calls
        assert len(server.requests) > calls_before_resume > before

    out = report(workspace, "r")
    # every (task, attempt) committed exactly once: the resume re-ran none of the attempts done before the kill
    committed, unreadable = jsonl(out / "attempts.jsonl")
    keys = [(row["task_id"], row["attempt"]) for row in committed]
    assert len(keys) == len(set(keys)) == len(pairs) and set(keys) == pairs
    assert unreadable <= 1  # at most one line cut short by the kill
    assert {(r["task_id"], r["attempt"]) for r in rows_at_kill} <= set(keys)
    # the agent was asked again only for the attempts in flight at the kill (at most --concurrency of them,
    # each at most 4 agent calls: a tool round and a text answer at checkpoint 1, one answer at 2 and 3),
    # and once more for the resumed run's endpoint check
    assert clean_agent_calls <= killed_agent_calls + resumed_agent_calls <= clean_agent_calls + CONCURRENCY * 4 + 1
    # one row per pair in tasks.parquet, one transcript line per pair
    rows = task_rows(workspace, "r")
    assert sorted((r["task_id"], r["attempt"]) for r in rows) == sorted(pairs)
    transcripts, bad = jsonl(out / "transcripts.jsonl")
    assert bad == 0 and sorted((t["task_id"], t["attempt"]) for t in transcripts) == sorted(pairs)
    assert all(t["status"] == "ok" for t in transcripts)
    # the summary agrees with the rows and with the uninterrupted run
    summary = json.loads((out / "summary.json").read_text())
    clean_summary = json.loads((report(clean_ws, "clean") / "summary.json").read_text())
    assert summary["attempts"] == len(pairs) and summary["errors"] == 0 and summary["n_tasks"] == N_TASKS
    assert summary["atpr"] == pytest.approx(sum(r["tpr"] for r in rows) / len(rows))
    assert {k: summary[k] for k in SCORE_KEYS} == {k: clean_summary[k] for k in SCORE_KEYS}
    assert rows == task_rows(clean_ws, "clean")
    assert not list(out.glob(".*.tmp"))  # no temporary file of the killed run left behind
    checkpoints = pl.read_parquet(out / "checkpoints.parquet").drop("wall_s", "run_id").sort(["task_id", "attempt", "checkpoint"])
    clean_checkpoints = pl.read_parquet(report(clean_ws, "clean") / "checkpoints.parquet").drop("wall_s", "run_id").sort(
        ["task_id", "attempt", "checkpoint"])
    assert checkpoints.equals(clean_checkpoints)
    # hand-computed: perfect 1, jumper 1, failer 1/3, disfluent 1/3 -> ATPR 2/3; half the tasks succeed
    assert summary["atpr"] == pytest.approx(2 / 3) and summary["sr"]["pass@1"] == pytest.approx(0.5)


# -- (b) one task's agent calls always fail -----------------------------------------------

BROKEN = "T-broken"


def test_b_server_errors_on_one_task_make_error_rows_for_that_task_only(tmp_path):
    workspace = make_workspace(tmp_path / "ws", 4, broken=BROKEN)

    def failing_rule(body: dict) -> Reply | str:
        if body["model"] == "agent" and _task_of(body)[0] == BROKEN:
            # retried by the client; "retry-after-ms" replaces its exponential backoff so the test stays fast
            return Reply(status=500, headers={"retry-after-ms": "1"}, error_message="model overloaded")
        return rule(body)

    started = time.monotonic()
    with ChatServer(rule=failing_rule, delay=0.01) as server:
        result = run_eval(workspace, server, "b", "--runs", "2", "--pass-k", "2", "--concurrency", "4")
        broken_calls = agent_requests(server, BROKEN)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    tries = RoleConfig.__dataclass_fields__["max_retries"].default + 1
    assert broken_calls == 2 * tries  # every attempt: the first try and every retry, then given up

    rows = pl.read_parquet(report(workspace, "b") / "tasks.parquet")
    errors = rows.filter(pl.col("status") == "error")
    assert sorted(errors["task_id"].to_list()) == [BROKEN, BROKEN]
    assert set(errors["attempt"].to_list()) == {0, 1}
    assert all("500" in message and "model overloaded" in message for message in errors["error"].to_list())
    assert errors["tpr"].null_count() == errors.height and errors["covered"].null_count() == errors.height
    ok = rows.filter(pl.col("status") == "ok")
    assert ok.height == 8 and BROKEN not in ok["task_id"].to_list() and ok["error"].null_count() == ok.height
    checkpoints = pl.read_parquet(report(workspace, "b") / "checkpoints.parquet")
    assert BROKEN not in checkpoints["task_id"].to_list()

    summary = json.loads((report(workspace, "b") / "summary.json").read_text())
    assert summary["errors"] == 2 and summary["attempts"] == 10 and summary["n_tasks"] == 5
    # scored over the ok rows only: T00 perfect (1), T01 jumper (1), T02 failer (1/3), T03 disfluent (1/3)
    assert summary["atpr"] == pytest.approx(ok["tpr"].mean()) == pytest.approx(2 / 3)
    assert summary["sr"]["pass@1"] == pytest.approx(0.5) and summary["pass^2"] == pytest.approx(0.5)
    transcripts, _ = jsonl(report(workspace, "b") / "transcripts.jsonl")
    broken = [t for t in transcripts if t["task_id"] == BROKEN]
    assert len(broken) == 2 and all(t["status"] == "error" and t["turns"] == [] for t in broken)


# -- (c) the agent's key is refused ----------------------------------------------------------


def test_c_refused_key_stops_the_run_at_once_naming_the_variable(tmp_path):
    workspace = make_workspace(tmp_path / "ws", N_TASKS)

    def refusing_rule(body: dict) -> Reply | str:
        if body["model"] == "agent":
            return Reply(status=401, error_message="Incorrect API key provided")
        return rule(body)

    started = time.monotonic()
    with ChatServer(rule=refusing_rule, delay=0.01) as server:
        result = run_eval(workspace, server, "c", "--runs", str(RUNS), "--concurrency", str(CONCURRENCY),
                          timeout=60)
        requests = len(server.requests)
    elapsed = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert KEY_ENV in output and "401" in output
    assert KEY not in output
    # no retries: at most one request per attempt that was already in flight when the first 401 came back
    assert requests <= CONCURRENCY, f"{requests} requests to an endpoint that refused the key"
    assert elapsed < 30
    assert not (report(workspace, "c") / "summary.json").exists()
