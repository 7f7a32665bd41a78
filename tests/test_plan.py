"""The run's start order (cirrus.evaluate.plan): walk lengths learned from the
checkpoints walks reach, the packing of the attempts still waiting, and the
scheduler starting them in that order (issue 28, the load-bound regime)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest

from cirrus.evaluate.plan import (PLAN_LIMIT_PER_SLOT, LengthModel, StartQueue, checkpoint_done, learning,
                                  list_finish, logged_calls, start_order)
from cirrus.evaluate.scheduler import Schedule, run_attempts
from cirrus.evaluate.tasks import TaskIndex, expected_calls
from cirrus.evaluate.types import AgentTurn, ToolCallMade, Verdict
from cirrus.evaluate.walk import walk
from cirrus.replay import ToolReplayer
from cirrus.schema import Task
from cirrus.usage import Usage, UsageLedger, record, recording


def _task_line(task_id: str, checkpoints: list[tuple[int, str]]) -> dict:
    """A task whose checkpoints have these (recorded tool calls, reference reply)."""
    return {"task_id": task_id, "category": "c", "knowledge": [], "tools": [], "history": [], "cassette": None,
            "checkpoints": [{"index": i + 1, "query": f"question {i + 1}", "reply": reply, "reply_type": "Solution",
                             "tool_calls": [{"name": f"lookup_{i + 1}", "arguments": {"n": j}} for j in range(calls)]}
                            for i, (calls, reply) in enumerate(checkpoints)],
            "stats": {"input_tokens": 10, "turns": 2 * len(checkpoints), "checkpoints": len(checkpoints)}}


# --------------------------------------------------------------------------
# the length model
# --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [
    ((0, True),), ((0, True), (2, True), (1, True)), ((3, False),), ((1, False), (0, True)),
    ((0, True), (0, False), (5, True), (0, True)),
])
def test_before_learning_the_model_expects_what_the_log_shows(shape):
    task = Task.model_validate(_task_line("t", [(calls, "reply" if judged else "") for calls, judged in shape]))
    assert LengthModel().calls(shape) == logged_calls(shape) == expected_calls(task)


def test_the_logs_count_skips_the_judge_where_the_reference_has_no_text():
    # agent (1 + 1) + 1; judge on neither the first reference (no text) nor... the second one twice; fluency once
    assert logged_calls(((1, False), (0, True))) == 2 + 1 + (0 + 1 + 1) + 1
    assert logged_calls(((0, True),)) == 2  # one reply, one judge call
    # agent (1 + 0) + (1 + 2) + (1 + 1) = 6; judge 2 x 3 - 1 = 5; fluency 3 - 1 = 2
    assert logged_calls(((0, True), (2, True), (1, True))) == 13


def test_the_model_learns_an_agent_that_makes_its_tool_calls_in_one_round():
    model = LengthModel()
    shape = ((3, True), (0, True))
    for _ in range(200):
        model.observe(shape, 0, 2, 3, outcome="went on")  # three recorded calls, made in one round
        model.observe(shape, 1, 1, 1, outcome="ended")
    assert model.agent_calls(3) == pytest.approx(2.0, abs=0.05)
    assert model.agent_calls(0) == 1.0  # nothing learned against the log there
    assert model.calls(shape) == pytest.approx(2 + 3 + 1 + 1, abs=0.1)
    assert logged_calls(shape) == 4 + 3 + 1 + 1


def test_the_model_learns_knowledge_searches_before_a_plain_reply():
    model = LengthModel()
    for _ in range(100):
        model.observe(((0, True), (0, True)), 0, 2, 3, outcome="went on")
    assert model.agent_calls(0) == pytest.approx(2.0, abs=0.1)


def test_walks_that_stop_early_shorten_long_tasks_more_than_short_ones():
    model = LengthModel()
    shape = ((0, True),) * 2
    for went_on in [True, False] * 50:
        model.observe(shape, 0, 1, 3 if went_on else 1, outcome="went on" if went_on else "stopped")
    short, long = ((0, True),) * 2, ((0, True),) * 12
    assert model.calls(short) < logged_calls(short)
    assert model.calls(long) / logged_calls(long) < model.calls(short) / logged_calls(short)
    assert model.calls(long) < 12  # half the walks stop at each checkpoint: the expected walk is short


def test_checkpoints_a_reply_covers_are_not_expected_to_be_asked():
    model = LengthModel()
    shape = ((0, True),) * 6
    for _ in range(100):
        model.observe(shape, 0, 1, 4, covered_later=1, outcome="went on")
    assert model.calls(shape) < logged_calls(shape) - 5


def test_uncounted_judge_calls_teach_nothing_about_the_judge():
    model, fresh = LengthModel(), LengthModel()
    shape = ((0, True), (0, True))
    for _ in range(50):
        model.observe(shape, 0, 1, None, outcome="went on")
    assert model.calls(shape) == fresh.calls(shape)
    assert model.observations == 50


# --------------------------------------------------------------------------
# packing
# --------------------------------------------------------------------------


def test_the_plan_packs_what_longest_first_leaves_as_a_tail():
    jobs = [("a", 3.0), ("b", 3.0), ("c", 2.0), ("d", 2.0), ("e", 2.0)]
    busy = [0.0, 0.0]
    assert list_finish(busy, [length for _, length in jobs]) == 7.0  # longest first: 3+2+2 on one slot
    order = start_order(busy, jobs)
    length = dict(jobs)
    assert sorted(order) == sorted(length)
    assert list_finish(busy, [length[key] for key in order]) == 6.0  # 3+3 and 2+2+2


def test_the_plan_counts_the_attempts_in_flight():
    jobs = [("short-1", 3.0), ("short-2", 3.0), ("long-1", 5.0), ("long-2", 5.0)]
    busy = [4.0, 0.0]  # one slot is busy for 4 more calls
    length = dict(jobs)
    order = start_order(busy, jobs)
    assert list_finish(busy, [length[key] for key in order]) == 10.0  # 4 + 3 + 3 and 5 + 5
    assert list_finish(busy, [5.0, 5.0, 3.0, 3.0]) == 11.0  # longest first
    blind = start_order([0.0, 0.0], jobs)  # as if no attempt were in flight
    assert list_finish(busy, [length[key] for key in blind]) == 11.0


def test_the_plan_keeps_longest_first_when_it_cannot_do_better():
    jobs = [(f"j{i}", 1.0) for i in range(6)]
    assert start_order([0.0, 0.0, 0.0], jobs) == [key for key, _ in jobs]  # ties in the order given
    assert start_order([], jobs) == [key for key, _ in jobs]
    assert start_order([0.0], []) == []


@pytest.mark.parametrize("seed", range(30))
def test_the_plan_never_ends_after_longest_first(seed):
    import random

    rnd = random.Random(seed)
    slots = rnd.randint(1, 8)
    busy = [rnd.choice([0.0, rnd.uniform(0, 20)]) for _ in range(slots)]
    jobs = [(i, float(rnd.randint(1, 30))) for i in range(rnd.randint(1, 40))]
    order = start_order(busy, jobs)
    length = dict(jobs)
    assert sorted(order) == [key for key, _ in jobs]
    longest_first = sorted((length for _, length in jobs), reverse=True)
    assert list_finish(busy, [length[key] for key in order]) <= list_finish(busy, longest_first) + 1e-9


# --------------------------------------------------------------------------
# the queue
# --------------------------------------------------------------------------


def _queue(keys, slots, lengths=None, ahead=()):
    model = LengthModel()
    lengths = lengths or {}
    return model, StartQueue(keys, slots, model, lambda key: lengths.get(key, 1.0), lambda: list(ahead))


def test_the_first_slots_start_in_the_order_given_then_the_plan_takes_over():
    lengths = {"a": 3.0, "b": 3.0, "c": 2.0, "d": 2.0, "e": 2.0, "f": 1.0}
    model, queue = _queue(list(lengths), 1, lengths)
    assert queue.take() == "a" and queue.plans == 0
    lengths.update({"f": 9.0})  # learned: f is the longest left
    assert queue.take() == "f" and queue.plans == 1
    assert queue.take() == "b" and queue.plans == 1  # nothing more learned: no new plan
    for _ in range(4):
        model.observe(((0, True),), 0, 1, 1, outcome="ended")
    lengths.update({"e": 5.0})
    assert queue.take() == "e" and queue.plans == 2  # four observations: twice as much as none
    assert [queue.take(), queue.take(), queue.take()] == ["c", "d", None]


def test_no_plan_far_from_the_end():
    keys = list(range(PLAN_LIMIT_PER_SLOT * 2 + 3))
    _, queue = _queue(keys, 2)
    taken = [queue.take() for _ in range(3)]
    assert taken == [0, 1, 2] and queue.plans == 0  # 17 left for 2 slots
    queue.take()
    assert queue.plans == 1  # 16 left
    while queue.take() is not None:
        pass
    assert queue.plans == 1


# --------------------------------------------------------------------------
# the walk teaches, the scheduler plans
# --------------------------------------------------------------------------


class _CountedJudge:
    """Included when the reference is in the candidate; each verdict is one call in the usage ledger."""

    name = "counted"

    async def covers(self, history, query, reference, candidate):
        record("judge", Usage(calls=1))
        return Verdict(reference in candidate, "counted")


class _CountedFluency:
    name = "counted"

    async def follows(self, history, next_query):
        record("fluency", Usage(calls=1))
        return Verdict(True, "counted")


class _BatchingAgent:
    """Answers every checkpoint with its reference, making all of a
    checkpoint's recorded tool calls in one round (two counted calls where the
    log made one per tool call and a reply)."""

    name = "batching"

    def __init__(self, task: dict) -> None:
        self.replies = {c["query"]: (c["reply"], c["tool_calls"]) for c in task["checkpoints"]}

    async def respond(self, request, replayer):
        reply, tool_calls = self.replies[request.query]
        rounds = 2 if tool_calls else 1
        made = [ToolCallMade(call["name"], call["arguments"], recorded=True) for call in tool_calls]
        return AgentTurn(text=reply, tool_calls=made, messages=[{"role": "assistant", "content": reply}],
                         model_calls=rounds)


def test_a_walk_teaches_the_run_its_real_length():
    line = _task_line("t", [(3, "first answer"), (1, ""), (2, "third answer")])
    model = LengthModel()
    shape = ((3, True), (1, False), (2, True))

    async def main() -> None:
        with learning(model), recording(UsageLedger()):
            for _ in range(20):
                await walk(line, _BatchingAgent(line), _CountedJudge(), _CountedFluency(), ToolReplayer(None))

    asyncio.run(main())
    assert model.observations == 60
    # the walk made 2 + 2 + 2 agent calls; the judge 1 + 0 + 1 + 1 (the third reference twice: as the next
    # checkpoint's and as its own; the second has no text) and the fluency checker 2
    assert model.calls(shape) == pytest.approx(6 + 3 + 2, abs=0.5)
    assert logged_calls(shape) == 4 + 2 + 3 + 3 + 2


class _JumpingAgent:
    """Answers each checkpoint it is asked with its reference and the next
    one's: every reply covers the next checkpoint too."""

    name = "jumping"

    def __init__(self, task: dict) -> None:
        replies = [c["reply"] for c in task["checkpoints"]]
        self.replies = {c["query"]: " ".join(replies[i:i + 2]) for i, c in enumerate(task["checkpoints"])}

    async def respond(self, request, replayer):
        reply = self.replies[request.query]
        return AgentTurn(text=reply, messages=[{"role": "assistant", "content": reply}], model_calls=1)


def test_a_walk_whose_replies_cover_the_next_checkpoint_teaches_shorter_walks():
    line = _task_line("t", [(0, f"answer {i}") for i in range(6)])
    shape = ((0, True),) * 6
    model = LengthModel()

    async def main() -> None:
        with learning(model), recording(UsageLedger()):
            for _ in range(20):
                result = await walk(line, _JumpingAgent(line), _CountedJudge(), _CountedFluency(), ToolReplayer(None))
                assert [turn.covered_through for turn in result.turns] == [2, 4, 6]

    asyncio.run(main())
    # per walk: 3 agent calls, the judge 3 + 3 + 2 (each reply on its own reference, the covered one, and the one
    # after) and the fluency checker 2: 13, where the log expects 22
    assert model.calls(shape) == pytest.approx(13, abs=1.5)


def test_the_scheduler_starts_the_waiting_attempts_by_what_the_run_learned(tmp_path: Path):
    tasks = [_task_line("first", [(0, f"reply {i}") for i in range(6)]),  # 22 calls by the log: started first
             _task_line("tools", [(10, "done")]),  # 12 by the log, 3 or so once tool calls come in one round
             _task_line("talk", [(0, "a"), (0, "b"), (0, "c")])]  # 10 by the log and in truth
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    index = TaskIndex.scan(tmp_path)
    assert [ref.expected_calls for ref in index.refs] == [22, 12, 10]
    started: list[str] = []

    async def run_attempt(task, attempt):
        started.append(task.task_id)
        if task.task_id == "first":  # what the first walk taught: an agent that batches its tool calls
            for _ in range(30):
                checkpoint_done(((4, True),), 0, 2, 1, outcome="ended")
        return {"task_id": task.task_id, "attempt": attempt, "status": "ok"}, {"task_id": task.task_id,
                                                                              "attempt": attempt}

    schedule = Schedule(tmp_path / "reports" / "r", {"x": 1}, {}, 1, 1, "test", progress=False)
    asyncio.run(run_attempts(schedule, index, run_attempt))
    assert started == ["first", "talk", "tools"]


def test_without_anything_learned_the_scheduler_keeps_longest_first(tmp_path: Path):
    tasks = [_task_line(f"t{n}", [(0, "r")] * n) for n in (2, 5, 3, 4)]
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    index = TaskIndex.scan(tmp_path)
    started: list[tuple[str, int]] = []

    async def run_attempt(task, attempt):
        started.append((task.task_id, attempt))
        return {"task_id": task.task_id, "attempt": attempt, "status": "ok"}, {"task_id": task.task_id,
                                                                              "attempt": attempt}

    schedule = Schedule(tmp_path / "reports" / "r", {"x": 1}, {}, 2, 1, "test", progress=False)
    asyncio.run(run_attempts(schedule, index, run_attempt))
    assert started == list(itertools.product(["t5", "t4", "t3", "t2"], [0, 1]))


def test_the_walk_counts_the_judges_calls_sent_not_its_cache_hits():
    from cirrus.usage import calls_sent

    assert calls_sent("judge") is None  # no ledger open
    ledger = UsageLedger()
    with recording(ledger):
        record("judge[1]", Usage(calls=2))  # a panel's members are the judge
        record("judge[2]", Usage(calls=1))
        record("judge", Usage(cirrus_cache_hits=5))  # answered from the cache: no time spent
        record("fluency", Usage(calls=1))
        record("agent", Usage(calls=4))
        assert calls_sent("judge", "fluency") == 4
        assert calls_sent("agent") == 4


# --------------------------------------------------------------------------
# subtask mode: each checkpoint asked alone
# --------------------------------------------------------------------------


def test_a_subtask_attempt_is_expected_to_cost_the_agent_and_the_judge_per_checkpoint():
    model = LengthModel()
    shape = ((0, True), (2, True), (1, False))
    assert model.subtask_calls(shape) == (1 + 1) + (3 + 1) + (2 + 0)
    for _ in range(100):
        model.observe_agent(2, 2)  # two recorded calls made in one round
    assert model.subtask_calls(shape) == pytest.approx((1 + 1) + (2 + 1) + (2 + 0), abs=0.1)


def test_subtasks_teach_the_run_the_agents_rounds(tmp_path: Path):
    from cirrus.evaluate.subtask import run_subtasks

    line = _task_line("t", [(3, "first answer"), (0, "second answer")])
    model = LengthModel()

    async def main() -> None:
        with learning(model):
            for _ in range(30):
                attempt = await run_subtasks(line, _BatchingAgent(line), _CountedJudge(), tmp_path)
                assert attempt.error is None and len(attempt.subtasks) == 2

    asyncio.run(main())
    assert model.observations == 60
    assert model.agent_calls(3) == pytest.approx(2.0, abs=0.2)  # the batching agent: one round for three calls


@pytest.mark.parametrize("subtasks, expected", [(False, ["talk", "tools"]), (True, ["tools", "talk"])])
def test_subtask_mode_starts_the_longest_subtask_attempts_first(tmp_path: Path, subtasks, expected):
    tasks = [_task_line("talk", [(0, "a"), (0, "b"), (0, "c"), (0, "d")]),  # a walk of 14 calls, subtasks 8
             _task_line("tools", [(9, "done")])]  # 11 either way
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    index = TaskIndex.scan(tmp_path)
    started: list[str] = []

    async def run_attempt(task, attempt):
        started.append(task.task_id)
        return {"task_id": task.task_id, "attempt": attempt, "status": "ok"}, {"task_id": task.task_id,
                                                                              "attempt": attempt}

    schedule = Schedule(tmp_path / "reports" / "r", {"x": 1}, {}, 1, 1, "test", progress=False, subtasks=subtasks)
    asyncio.run(run_attempts(schedule, index, run_attempt))
    assert started == expected


def test_a_plan_that_ends_on_its_horizon_is_kept_when_it_beats_longest_first():
    """The plan is weighed against longest first, not against the horizon it was packed into: here it ends
    exactly on that horizon (15), and longest first at 16."""
    jobs = [("a", 5.0), ("b", 5.0), ("c", 7.0), ("d", 6.0)]
    busy = [5.0, 0.0]
    length = dict(jobs)
    assert list_finish(busy, [7.0, 6.0, 5.0, 5.0]) == 16.0
    assert list_finish(busy, [length[key] for key in start_order(busy, jobs)]) == 15.0
