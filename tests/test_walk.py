"""The walk (contract section 4), the run store and runner, the offline
baselines and judges."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest

from cirrus.agents.baselines import OracleAgent, RetrievalAgent
from cirrus.evaluate.runner import EvalSettings, run_eval
from cirrus.evaluate.store import RunMismatch
from cirrus.evaluate.types import AgentTurn, InfrastructureError, ToolCallMade, Verdict
from cirrus.evaluate.walk import walk
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker, coverage, key_items
from cirrus.replay import ToolReplayer
from tests.conftest import TAU_BENCH, copy_workspace, needs_shared

REPLIES = ["Reboot i-bp***c from the console.", "Port 22 must be open in sg-uf***x.", "Your refund of 20 USD is done."]


def _task(task_id: str = "T-1", tool_first: bool = False) -> dict:
    checkpoints = [{"index": i + 1, "query": f"question {i + 1}", "reply": reply, "tool_calls": [],
                    "reply_type": "Solution"} for i, reply in enumerate(REPLIES)]
    if tool_first:
        checkpoints[0]["tool_calls"] = [{"name": "Describe", "arguments": {"id": "i-1"}}]
    return {"task_id": task_id, "category": "ECS", "knowledge": [], "tools": [], "history": [],
            "checkpoints": checkpoints, "cassette": None,
            "stats": {"input_tokens": 0, "turns": 2 * len(checkpoints), "checkpoints": len(checkpoints)}}


class ExactJudge:
    """Included when the reference text appears in the candidate."""

    name = "exact"

    async def covers(self, history, query, reference, candidate):
        return Verdict(reference in candidate, "exact")


class Fluency:
    name = "scripted"

    def __init__(self, ok: bool = True) -> None:
        self.ok = ok
        self.asked: list[str] = []

    async def follows(self, history, next_query):
        self.asked.append(next_query)
        return Verdict(self.ok, "scripted")


class ScriptedAgent:
    """Answers turn n with ``script[n]``; ``tokens`` output tokens each."""

    offline = True

    def __init__(self, script: list[str], tokens: int = 10, calls: list[ToolCallMade] | None = None) -> None:
        self.name = "scripted"
        self.script = script
        self.tokens = tokens
        self.calls = calls or []
        self.turns = 0

    async def respond(self, request, replayer):
        text = self.script[min(self.turns, len(self.script) - 1)]
        self.turns += 1
        calls = self.calls if self.turns == 1 else []
        return AgentTurn(text=text, tool_calls=calls, messages=[{"role": "assistant", "content": text}],
                         output_tokens=self.tokens)


def _walk(task, agent, fluency=None):
    return asyncio.run(walk(task, agent, ExactJudge(), fluency or Fluency(), ToolReplayer(None)))


def test_perfect_agent_covers_every_checkpoint_one_by_one():
    result = _walk(_task(), ScriptedAgent(REPLIES, tokens=7))
    o = result.outcome
    assert (o.covered, o.accepted_turns, o.stl_accepted) == (3, 3, (7, 7, 7))
    assert [t.checkpoint for t in result.turns] == [1, 2, 3]
    assert [t.fluent for t in result.turns] == [True, True, None]


def test_jumping_agent_covers_two_checkpoints_with_one_reply():
    fluency = Fluency()
    result = _walk(_task(), ScriptedAgent([REPLIES[0] + " " + REPLIES[1], REPLIES[2]]), fluency)
    o = result.outcome
    assert (o.covered, o.accepted_turns) == (3, 2)
    assert [(t.checkpoint, t.covered_through) for t in result.turns] == [(1, 2), (3, 3)]
    assert fluency.asked == ["question 3"]  # checkpoint 2 was skipped, its query never asked


def test_one_reply_covering_everything_ends_the_walk():
    fluency = Fluency()
    result = _walk(_task(), ScriptedAgent([" ".join(REPLIES)]), fluency)
    assert (result.outcome.covered, result.outcome.accepted_turns) == (3, 1)
    assert fluency.asked == [] and len(result.turns) == 1


def test_rejected_reply_stops_the_walk():
    result = _walk(_task(), ScriptedAgent([REPLIES[0], "something else entirely"]))
    assert (result.outcome.covered, result.outcome.accepted_turns) == (1, 1)
    assert [t.decision.accepted for t in result.turns] == [True, False]
    assert result.turns[1].covered_through is None


def test_failed_fluency_check_stops_after_the_accepted_turn():
    result = _walk(_task(), ScriptedAgent(REPLIES), Fluency(ok=False))
    assert (result.outcome.covered, result.outcome.accepted_turns) == (1, 1)
    assert result.turns[0].fluent is False and len(result.turns) == 1


def test_reference_tool_calls_must_be_made_and_answered():
    task = _task(tool_first=True)
    without_call = _walk(task, ScriptedAgent(REPLIES))
    assert without_call.outcome.covered == 0
    assert (without_call.turns[0].decision.tia, without_call.turns[0].decision.tsa) == (False, False)
    unanswered = ToolCallMade("Describe", {"id": "i-1"}, None, recorded=False, error="no recorded result")
    assert _walk(task, ScriptedAgent(REPLIES, calls=[unanswered])).turns[0].decision.tev is False
    answered = ToolCallMade("Describe", {"id": "i-1"}, {"ok": 1}, recorded=True)
    assert _walk(task, ScriptedAgent(REPLIES, calls=[answered])).outcome.covered == 3


# --- local heuristics -----------------------------------------------------------

def test_local_judge_includes_the_reference_and_rejects_other_topics():
    judge = LocalCoverageJudge()
    reference = "Open port 22 in security group sg-uf***x, then run `systemctl restart sshd`."
    assert asyncio.run(judge.covers([], "q", reference, reference)).ok
    assert asyncio.run(judge.covers([], "q", reference, "Sure: " + reference.lower() + " Anything else?")).ok
    assert not asyncio.run(judge.covers([], "q", reference, "Your invoice was sent by e-mail.")).ok
    missing_id = "Open port 22 in the security group, then restart the ssh service."
    assert coverage(reference, missing_id).key_coverage < 0.6
    assert "systemctl restart sshd" in key_items(reference) and "sg-uf***x" in key_items(reference)


def test_local_fluency_rejects_dead_ends_only():
    checker = LocalFluencyChecker()
    assert asyncio.run(checker.follows([{"role": "assistant", "content": "Restarted it."}], "thanks")).ok
    assert not asyncio.run(checker.follows([{"role": "assistant", "content": "Sorry, I can't help with that."}], "q")).ok
    assert not asyncio.run(checker.follows([{"role": "assistant", "content": ""}], "q")).ok


# --- runner and store --------------------------------------------------------------

def _workspace(tmp_path: Path, tasks: list[dict]) -> Path:
    (tmp_path / "tickets").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return tmp_path


def _settings(workspace: Path, **kwargs) -> EvalSettings:
    values = {"run_id": "r1", "runs": 1, "pass_k": 1, "concurrency": 4, "progress": False} | kwargs
    return EvalSettings(workspace=workspace, **values)


class SlowAgent(ScriptedAgent):
    def __init__(self, delay: float, fail_on: set[str] = frozenset()) -> None:
        super().__init__(REPLIES)
        self.delay = delay
        self.fail_on = fail_on
        self.calls_by_task: dict[str, int] = {}

    async def respond(self, request, replayer):
        await asyncio.sleep(self.delay)
        task_id = request.task["task_id"]
        if task_id in self.fail_on:
            raise InfrastructureError("endpoint kept answering 503")
        index = sum(1 for m in request.history if m["role"] == "user")
        self.calls_by_task[task_id] = self.calls_by_task.get(task_id, 0) + 1
        text = REPLIES[index]
        return AgentTurn(text=text, messages=[{"role": "assistant", "content": text}], output_tokens=5)


def test_runner_writes_contract_outputs_and_excludes_errors(tmp_path):
    workspace = _workspace(tmp_path, [_task(f"T-{i}") for i in range(4)])
    summary = asyncio.run(run_eval(_settings(workspace, runs=2, pass_k=2), SlowAgent(0, fail_on={"T-3"}),
                                   ExactJudge(), Fluency()))
    run = workspace / "reports/r1"
    tasks = pl.read_parquet(run / "tasks.parquet")
    assert tasks.height == 8 and tasks.filter(pl.col("status") == "error").height == 2
    assert summary["errors"] == 2 and summary["atpr"] == 1.0 and summary["sr"] == {"pass@1": 1.0, "pass@2": 1.0}
    assert summary["pass^2"] == 1.0 and summary["n_tasks"] == 4 and summary["amtl"] == 5.0
    checkpoints = pl.read_parquet(run / "checkpoints.parquet")
    assert checkpoints.height == 3 * 6 and checkpoints["accepted"].all()
    assert tasks.filter(pl.col("status") == "ok")["mtl"].null_count() == 0
    transcripts = [json.loads(line) for line in (run / "transcripts.jsonl").read_text().splitlines()]
    assert len(transcripts) == 8 and transcripts[0]["turns"][0]["verdicts"][0]["raw"] == "exact"


def test_resume_runs_only_what_is_missing_and_refuses_other_settings(tmp_path):
    workspace = _workspace(tmp_path, [_task(f"T-{i}") for i in range(3)])
    first = SlowAgent(0, fail_on={"T-2"})
    asyncio.run(run_eval(_settings(workspace), first, ExactJudge(), Fluency()))
    attempts = workspace / "reports/r1/attempts.jsonl"
    with attempts.open("a") as handle:
        handle.write('{"task_id": "T-0", "attem')  # a line cut short by a crash
    second = SlowAgent(0)
    summary = asyncio.run(run_eval(_settings(workspace), second, ExactJudge(), Fluency()))
    assert set(second.calls_by_task) == {"T-2"}  # only the error row is walked again
    assert summary["errors"] == 0 and summary["attempts"] == 3
    assert pl.read_parquet(workspace / "reports/r1/tasks.parquet").height == 3
    with pytest.raises(RunMismatch, match="attempts"):
        asyncio.run(run_eval(_settings(workspace, runs=2), SlowAgent(0), ExactJudge(), Fluency()))


class GateAgent(SlowAgent):
    """Holds every first call until ``width`` attempts are waiting at once:
    a serial runner never gets there (each call then times out)."""

    def __init__(self, width: int) -> None:
        super().__init__(0)
        self.width, self.waiting, self.most_waiting = width, 0, 0
        self.all_in = asyncio.Event()
        self.seen: set[str] = set()

    async def respond(self, request, replayer):
        if request.task["task_id"] not in self.seen:
            self.seen.add(request.task["task_id"])
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
            if self.waiting == self.width:
                self.all_in.set()
            await asyncio.wait_for(self.all_in.wait(), timeout=30)
        return await super().respond(request, replayer)


def test_attempts_run_concurrently(tmp_path):
    workspace = _workspace(tmp_path, [_task(f"T-{i}") for i in range(20)])
    agent = GateAgent(20)
    summary = asyncio.run(run_eval(_settings(workspace, concurrency=20), agent, ExactJudge(), Fluency()))
    assert agent.most_waiting == 20 and summary["errors"] == 0


@pytest.fixture(scope="module")
def sample_workspace(tmp_path_factory, sample_ingest):
    return copy_workspace(sample_ingest, tmp_path_factory.mktemp("eval-sample") / "ws")  # the runs write into it


def test_oracle_scores_one_and_retrieval_runs_on_the_sample_workspace(sample_workspace):
    oracle = asyncio.run(run_eval(_settings(sample_workspace, run_id="oracle"), OracleAgent(),
                                  LocalCoverageJudge(), LocalFluencyChecker()))
    assert oracle["atpr"] == 1.0 and oracle["sr"]["pass@1"] == 1.0 and oracle["errors"] == 0
    from cirrus.evaluate.tasks import load_tasks

    retrieval = asyncio.run(run_eval(_settings(sample_workspace, run_id="retrieval"),
                                     RetrievalAgent(load_tasks(sample_workspace)), LocalCoverageJudge(),
                                     LocalFluencyChecker()))
    assert retrieval["errors"] == 0 and retrieval["atpr"] < oracle["atpr"]


@needs_shared(TAU_BENCH)
@pytest.mark.xdist_group("tau-bench")  # shares the tau-bench ingest with test_ingest_e2e
def test_oracle_scores_one_on_tau_bench(tmp_path, tau_bench_ingest):
    tmp_path = copy_workspace(tau_bench_ingest[0], tmp_path / "ws")
    summary = asyncio.run(run_eval(_settings(tmp_path, run_id="tau-oracle", concurrency=16), OracleAgent(),
                                   LocalCoverageJudge(), LocalFluencyChecker()))
    assert summary["n_tasks"] == 84 and summary["atpr"] == 1.0 and summary["errors"] == 0
    checkpoints = pl.read_parquet(tmp_path / "reports/tau-oracle/checkpoints.parquet")
    assert checkpoints.filter(pl.col("tev").is_not_null())["tev"].all()
