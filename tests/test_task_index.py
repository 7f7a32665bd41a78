"""The evaluator reads tasks by reference: the scan checks every line, an
attempt reads its task when it starts, and a run holds no more tasks than
it has attempts in flight."""

from __future__ import annotations

import asyncio
import json

import pytest

from cirrus.evaluate.runner import run_eval
from cirrus.evaluate.store import RunStore
from cirrus.evaluate.tasks import TaskFileError, TaskIndex, dataset_hash, load_tasks
from tests.test_walk import ExactJudge, Fluency, SlowAgent, _settings, _task, _workspace


def test_a_reference_reads_back_exactly_its_line_and_the_hash_matches_the_list(tmp_path):
    tasks = [_task(f"T-{i}") for i in range(5)]
    tasks[3]["checkpoints"] = tasks[3]["checkpoints"][:1]
    tasks[3]["stats"] = {"input_tokens": 1234, "turns": 2, "checkpoints": 1}
    tasks[4]["checkpoints"][0]["reply"] = "réponse — 回复"  # multi-byte: offsets are bytes
    workspace = _workspace(tmp_path, tasks)
    index = TaskIndex.scan(workspace)

    assert [index.load(ref) for ref in reversed(index.refs)] == tasks[::-1]
    assert list(index) == tasks == load_tasks(workspace)
    assert index.dataset_hash == dataset_hash(tasks)
    assert (index.refs[3].checkpoints, index.refs[3].input_tokens) == (1, 1234)
    assert index.refs[0].input_tokens == 0  # no count recorded: it only orders the walks
    assert [ref.task_id for ref in TaskIndex.scan(workspace, limit=2).refs] == ["T-0", "T-1"]
    assert TaskIndex.scan(workspace, limit=2).dataset_hash == dataset_hash(tasks[:2])


def test_blank_lines_are_skipped_and_bad_lines_are_named(tmp_path):
    workspace = _workspace(tmp_path, [_task("T-0")])
    path = workspace / "tickets/tasks.jsonl"
    path.write_text(path.read_text() + "\n" + json.dumps(_task("T-1")) + "\n")
    assert [ref.line for ref in TaskIndex.scan(workspace).refs] == [1, 3]

    for bad, reason in (('{"task_id": "T-9", "checkpoints": [', "not valid JSON"),
                        ('{"task_id": "T-9", "checkpoints": []}', "not a task"),
                        (json.dumps({**_task("T-9"), "checkpoints": "many"}), "not a task"),
                        (json.dumps({**_task("T-9"), "task_id": 9}), "not a task"),
                        (json.dumps(_task("T-0")), "task_id 'T-0' repeats line 1")):
        path.write_text(json.dumps(_task("T-0")) + "\n" + json.dumps(_task("T-1")) + "\n" + bad + "\n")
        with pytest.raises(TaskFileError, match=f"tasks.jsonl:3: {reason}"):
            TaskIndex.scan(workspace)
    path.write_bytes(json.dumps(_task("T-0")).encode() + b"\n\xff\xfe\n")
    with pytest.raises(TaskFileError, match="tasks.jsonl:2: not valid JSON"):
        TaskIndex.scan(workspace)


def test_a_task_file_rewritten_after_the_scan_is_an_error_not_a_wrong_task(tmp_path):
    workspace = _workspace(tmp_path, [_task("T-0"), _task("T-1")])
    index = TaskIndex.scan(workspace)
    _workspace(tmp_path, [_task("T-1"), _task("T-0")])  # same sizes, other order
    with pytest.raises(TaskFileError, match="changed during the run"):
        index.load(index.refs[0])
    with pytest.raises(TaskFileError, match="changed during the run"):
        list(index)
    (workspace / "tickets/tasks.jsonl").write_text(json.dumps(_task("T-0")) + "\n")  # cut short
    with pytest.raises(TaskFileError, match="line 2 is no longer task 'T-1'"):
        index.load(index.refs[1])


def test_a_run_holds_at_most_its_concurrency_of_tasks_and_still_walks_longest_first(tmp_path, monkeypatch):
    tasks = [_task(f"T-{i}") for i in range(12)]
    for i in (4, 9):
        tasks[i]["checkpoints"] = tasks[i]["checkpoints"][:1]  # short walks go last
    workspace = _workspace(tmp_path, tasks)
    held = {"now": 0, "most": 0}
    started: list[str] = []
    load = TaskIndex.load
    append = RunStore.append

    def counting_load(self, ref):
        held["now"] += 1
        held["most"] = max(held["most"], held["now"])
        started.append(ref.task_id)
        return load(self, ref)

    def counting_append(self, row, transcript):
        held["now"] -= 1
        return append(self, row, transcript)

    monkeypatch.setattr(TaskIndex, "load", counting_load)
    monkeypatch.setattr(RunStore, "append", counting_append)
    summary = asyncio.run(run_eval(_settings(workspace, concurrency=3, runs=2, pass_k=2), SlowAgent(0.01),
                                   ExactJudge(), Fluency()))

    assert summary["attempts"] == 24 and summary["errors"] == 0
    assert held["most"] == 3 and held["now"] == 0
    assert set(started[-4:]) == {"T-4", "T-9"}
