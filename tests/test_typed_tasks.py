"""Tasks travel as ``schema.Task`` (issue 23, typed data): ``TaskIndex``
validates each line where it reads it and names the line and the field of a
bad one; the walk, subtask mode, the estimate, rescoring, judge-consistency
and report loading read the typed task (a dict given to an entry point is
validated into one); the agent under test is still given the dict of the
task's line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.agents.baselines import OracleAgent
from cirrus.estimate import estimate
from cirrus.evaluate import runner, subtask
from cirrus.evaluate.runner import attempt_row, attempt_transcript, run_eval
from cirrus.evaluate.saved_run import load_source
from cirrus.evaluate.subtask import run_subtasks, subtask_attempt_row, subtask_transcript
from cirrus.evaluate.tasks import TaskFileError, TaskIndex, dataset_hash, load_typed_tasks
from cirrus.evaluate.walk import walk
from cirrus.judges.consistency import ask_again, collect_items, saved_judge_verdict
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker
from cirrus.report import loading
from cirrus.report.extras import load_dataset_stats, load_task_context
from cirrus.report.loading import ReportError, load_runs, load_task_metadata
from cirrus.replay import ToolReplayer
from cirrus.schema import Checkpoint, Task, ToolCallRef, as_task, task_dict
from tests.test_walk import REPLIES, ExactJudge, Fluency, ScriptedAgent, _settings, _task, _workspace

# a line as a person might write it: keys in another order than the model's,
# optional fields left out, a field the contract does not know (extra="allow")
HAND_WRITTEN = {
    "stats": {"checkpoints": 1, "turns": 2, "input_tokens": 7},
    "checkpoints": [{"reply_type": "Solution", "reply": "Reboot it.", "query": "It hangs.", "index": 1}],
    "task_id": "H-1",
    "x_source": "hand",
}


def _line(task_id: str = "T-1", tool_first: bool = False) -> dict[str, Any]:
    """A task line with every field of the contract, as ingest writes one."""
    return {**_task(task_id, tool_first), "channel": "chat", "language": "en"}


def _write_lines(workspace: Path, lines: list[str]) -> Path:
    (workspace / "tickets").mkdir(parents=True, exist_ok=True)
    path = workspace / "tickets/tasks.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _without_times(record: Any) -> Any:
    """``record`` with the wall-clock fields (``wall_s``) masked."""
    if isinstance(record, dict):
        return {k: "<time>" if k == "wall_s" else _without_times(v) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [_without_times(v) for v in record]
    return record


# -- TaskIndex: validated where it is read --------------------------------------------------------------


@pytest.mark.parametrize(("change", "field"), [
    (lambda t: t["checkpoints"][1].pop("query"), "checkpoints.1.query: Field required"),
    (lambda t: t["checkpoints"][0]["tool_calls"].append({"arguments": {"id": "i-1"}}),
     "checkpoints.0.tool_calls.0.name: Field required"),
    (lambda t: t["checkpoints"][2].update(reply_type="Nonsense"), "checkpoints.2.reply_type: Input should be"),
    (lambda t: t.update(stats={"input_tokens": "many", "turns": 6, "checkpoints": 3}), "stats.input_tokens"),
    (lambda t: t.pop("stats"), "stats: Field required"),
])
def test_a_line_that_is_json_but_not_a_task_is_refused_naming_the_line_and_the_field(tmp_path, change, field):
    bad = _task("T-2")
    change(bad)
    path = _write_lines(tmp_path, [json.dumps(_task("T-1")), "", json.dumps(bad)])
    with pytest.raises(TaskFileError) as caught:
        TaskIndex.scan(tmp_path)
    assert str(caught.value).startswith(f"{path}:3: not a valid task ({field}")
    # a run refuses it before it starts: no run folder
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:3: not a valid task"):
        asyncio.run(run_eval(_settings(tmp_path), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    assert not (tmp_path / "reports").exists()


def test_the_index_loads_typed_tasks_and_hashes_the_lines_as_read(tmp_path):
    lines = [json.dumps(HAND_WRITTEN), json.dumps(_task("T-1", tool_first=True), ensure_ascii=False)]
    _write_lines(tmp_path, lines)
    index = TaskIndex.scan(tmp_path)
    raw = [json.loads(line) for line in lines]

    typed = [index.load_task(ref) for ref in index.refs]
    assert all(type(task) is Task for task in typed) and list(index.tasks()) == typed == load_typed_tasks(tmp_path)
    assert typed[0].checkpoints[0].query == "It hangs." and typed[0].stats.input_tokens == 7
    assert typed[1].checkpoints[0].tool_calls == [ToolCallRef(name="Describe", arguments={"id": "i-1"})]
    assert index.refs[0].input_tokens == 7  # scheduling reads the validated stats
    # the dicts of the lines are still there for their readers (agents, the tool server)
    assert [index.load(ref) for ref in index.refs] == list(index) == raw
    # the dataset hash is the hash of the lines as read, not of the model's dump: unchanged by typing
    assert index.dataset_hash == dataset_hash(raw) == "b52eb8b7c64db58c"
    assert dataset_hash([task_dict(task) for task in typed]) != index.dataset_hash  # the dump fills in defaults


def test_as_task_keeps_a_task_and_validates_a_mapping_once():
    task = as_task(_line("T-1"))
    assert type(task) is Task and as_task(task) is task
    assert task_dict(task) == _line("T-1")
    assert task_dict(as_task(HAND_WRITTEN))["x_source"] == "hand"  # fields the contract does not know travel along
    with pytest.raises(ValueError, match="reply_type"):
        as_task({**_task("T-1"), "checkpoints": [{**_task()["checkpoints"][0], "reply_type": "Nonsense"}]})


# -- the walk and subtask mode read a Task -----------------------------------------------------------------


def test_a_walk_over_a_task_gives_the_rows_of_a_walk_over_its_dict():
    for line in (_line("T-1", tool_first=True), _line("T-2")):
        task = Task.model_validate(line)
        rows = []
        for given in (line, task):
            result = asyncio.run(walk(given, ScriptedAgent([REPLIES[0] + " " + REPLIES[1], "off topic"]),
                                      ExactJudge(), Fluency(), ToolReplayer(None)))
            rows.append(_without_times((attempt_row(given, 0, result, None),
                                        attempt_transcript(given, 0, result, None))))
        assert rows[0] == rows[1]
        assert rows[1][0]["turns"] and rows[1][1]["turns"][0]["reference_tool_calls"] == line["checkpoints"][0][
            "tool_calls"]


def test_subtasks_over_a_task_give_the_rows_of_subtasks_over_its_dict(tmp_path):
    line = _line("T-1", tool_first=True)
    rows = []
    for given in (line, Task.model_validate(line)):
        result = asyncio.run(run_subtasks(given, ScriptedAgent(REPLIES), ExactJudge(), tmp_path))
        rows.append(_without_times((subtask_attempt_row(given, 0, result), subtask_transcript(given, 0, result))))
    assert rows[0] == rows[1]
    assert [s["checkpoint"] for s in rows[1][0]["subtasks"]] == [1, 2, 3]


def test_the_runner_hands_the_walk_and_the_subtasks_a_task(tmp_path, monkeypatch):
    workspace = _workspace(tmp_path, [_task("T-1"), _task("T-2")])
    given: list[Any] = []
    real_walk, real_subtasks = runner.walk, subtask.run_subtasks

    async def recording_walk(task, *args, **kwargs):
        given.append(task)
        return await real_walk(task, *args, **kwargs)

    async def recording_subtasks(task, *args, **kwargs):
        given.append(task)
        return await real_subtasks(task, *args, **kwargs)

    monkeypatch.setattr(runner, "walk", recording_walk)
    monkeypatch.setattr(subtask, "run_subtasks", recording_subtasks)
    asyncio.run(run_eval(_settings(workspace), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    asyncio.run(run_eval(_settings(workspace, run_id="s1", mode="subtask"), ScriptedAgent(REPLIES), ExactJudge(),
                         Fluency()))
    assert len(given) == 4 and all(type(task) is Task for task in given)
    assert sorted(task.task_id for task in given) == ["T-1", "T-1", "T-2", "T-2"]


# -- what the agent sees --------------------------------------------------------------------------------


class SeeingOracle(OracleAgent):
    """The oracle, noting every ``request.task`` it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[Any]] = {}

    async def respond(self, request, replayer):
        self.seen.setdefault(request.task["task_id"], []).append(request.task)
        return await super().respond(request, replayer)


@pytest.mark.parametrize("mode", ["walk", "subtask"])
def test_the_agent_sees_each_task_as_its_line_of_tasks_jsonl(sample_ingest_copy, mode):
    """On the sample workspace (what ingest writes), in both modes: every
    turn's ``request.task`` is a plain dict equal to the parsed line, in the
    line's key order, and one dict per (task, attempt)."""
    workspace = sample_ingest_copy
    lines = {json.loads(line)["task_id"]: line
             for line in (workspace / "tickets/tasks.jsonl").read_text(encoding="utf-8").splitlines() if line}
    agent = SeeingOracle()
    summary = asyncio.run(run_eval(_settings(workspace, run_id=f"see-{mode}", mode=mode), agent,
                                   LocalCoverageJudge(), LocalFluencyChecker()))
    assert summary["errors"] == 0 and set(agent.seen) == set(lines)
    for task_id, seen in agent.seen.items():
        assert all(type(task) is dict and task is seen[0] for task in seen)
        assert seen[0] == json.loads(lines[task_id])
        assert json.dumps(seen[0], ensure_ascii=False) == json.dumps(json.loads(lines[task_id]), ensure_ascii=False)


def test_the_walk_gives_the_agent_the_dict_of_a_hand_written_line():
    """A line without the optional fields: the agent gets the task's dict with
    the contract's defaults filled in, every field of the line as written."""
    seen: list[dict[str, Any]] = []

    class Seeing(ScriptedAgent):
        async def respond(self, request, replayer):
            seen.append(request.task)
            return await super().respond(request, replayer)

    asyncio.run(walk(HAND_WRITTEN, Seeing(["Reboot it."]), ExactJudge(), Fluency(), ToolReplayer(None)))
    assert seen and seen[0] == {**HAND_WRITTEN, "category": None, "channel": None, "language": "en", "knowledge": [],
                                "tools": [], "history": [], "cassette": None,
                                "checkpoints": [{**HAND_WRITTEN["checkpoints"][0], "tool_calls": []}]}


# -- the estimate and rescoring read a Task ---------------------------------------------------------------


def test_the_estimate_of_a_task_is_the_estimate_of_its_dict():
    def words(text: str) -> int:
        return len(text.split())

    seen: list[Any] = []

    def system(task):  # the agent's system message is rendered from the dict the agent gets
        seen.append(task)
        return "you are helpful"

    line = _line("T-1", tool_first=True)
    results = [estimate([given], 2, words, system=system, coverage=lambda h, q, r, c: f"{len(h)} {q} {r} {c}",
                        fluency=lambda h, q: f"{len(h)} {q}", models={"agent": "m", "judge": "j", "fluency": "f"},
                        prices={}).to_dict() for given in (line, Task.model_validate(line))]
    assert results[0] == results[1] and results[0]["roles"]["agent"]["calls"] == 2 * 4
    assert seen == [line, line] and all(type(task) is dict for task in seen)


def test_a_saved_run_holds_typed_tasks_and_rescoring_reads_them(tmp_path):
    workspace = _workspace(tmp_path, [_line("T-1"), _line("T-2", tool_first=True)])
    asyncio.run(run_eval(_settings(workspace, runs=2, pass_k=2), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    source = load_source(workspace, "r1")
    assert [type(task) for task in source.tasks] == [Task, Task]
    saved = source.saved[("T-2", 1)]
    assert type(saved.typed_task) is Task and isinstance(saved.typed_task.checkpoints[0], Checkpoint)
    assert saved.typed_task == Task.model_validate(_line("T-2", tool_first=True))
    assert not hasattr(saved, "task")  # no dict of the line any more: judge-consistency reads the typed task too
    assert saved.turns and saved.turns[0].query == "question 1"


# -- judge-consistency reads the typed checkpoints -----------------------------------------------------------


class RecordingJudge(ExactJudge):
    """:class:`ExactJudge`, noting the reference of every question."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def covers(self, history, query, reference, candidate):
        self.asked.append((query, reference))
        return await super().covers(history, query, reference, candidate)


def test_judge_consistency_collects_and_asks_with_the_tasks_checkpoints(tmp_path):
    workspace = _workspace(tmp_path, [_line("T-1"), _line("T-2", tool_first=True)])
    asyncio.run(run_eval(_settings(workspace), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    source = load_source(workspace, "r1")
    items, _ = collect_items(source)
    assert items and {item.task_id for item in items} == {"T-1", "T-2"}
    tasks = {task.task_id: task for task in source.tasks}
    for item in items:  # the task's own Checkpoint objects, not copies or dicts
        checkpoints = tasks[item.task_id].checkpoints
        assert type(item.answered) is Checkpoint and item.answered is checkpoints[item.turn_checkpoint - 1]
        assert type(item.judged) is Checkpoint and item.judged is checkpoints[item.judged_checkpoint - 1]
    judge = RecordingJudge()
    assert asyncio.run(ask_again(judge, items, repeats=2)) == []
    assert all(item.fresh == [item.saved, item.saved] for item in items)  # a deterministic judge agrees with itself
    assert judge.asked == [(item.judged.query, item.judged.reply) for item in items for _ in range(2)]


def test_the_saved_verdict_reads_the_checkpoints_reference_tool_calls():
    checkpoint = Checkpoint(index=1, query="q", reply="r", reply_type="Solution",
                            tool_calls=[ToolCallRef(name="Describe", arguments={"id": "i-1"})])
    record = {"kind": "coverage", "checkpoint": 1, "ok": False, "raw": "Included"}
    right = {"checkpoint": 1, "tool_calls": [{"name": "Describe", "arguments": {"id": "i-1"}, "recorded": True}]}
    assert saved_judge_verdict(record, right, checkpoint) is False  # the calls were right: ok is the judge's
    assert saved_judge_verdict(record, {"checkpoint": 1, "tool_calls": []}, checkpoint) is True  # the raw answer


# -- report loading reads typed tasks ---------------------------------------------------------------------------


def test_report_loading_builds_its_frames_from_typed_tasks(tmp_path, monkeypatch):
    lines = [HAND_WRITTEN, _line("T-1", tool_first=True)]
    workspace = _workspace(tmp_path, lines)
    asyncio.run(run_eval(_settings(workspace), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    given: list[Any] = []
    real = loading.task_frames

    def recording(tasks):
        tasks = list(tasks)
        given.extend(tasks)
        return real(tasks)

    monkeypatch.setattr(loading, "task_frames", recording)
    [run] = load_runs(workspace, ["r1"])
    assert [type(task) for task in given] == [Task, Task] and given == load_typed_tasks(workspace)
    monkeypatch.undo()
    metadata = load_task_metadata(workspace)
    assert [type(task) for task in metadata.typed_tasks()] == [Task, Task]
    assert list(metadata.typed_tasks()) == given
    # what the frames say comes from the tasks' attributes: the contract's defaults for what a line leaves out
    assert metadata.tasks.to_dicts() == [
        {"task_id": "H-1", "task_category": None, "task_input_tokens": 7, "ref_tool_calls": 0,
         "has_tool_calls": False, "task_language": "en", "task_channel": None},
        {"task_id": "T-1", "task_category": "ECS", "task_input_tokens": 0, "ref_tool_calls": 1,
         "has_tool_calls": True, "task_language": "en", "task_channel": "chat"}]
    assert metadata.reference.filter(pl.col("task_id") == "T-1").to_dicts() == [
        {"task_id": "T-1", "checkpoint": 1, "ref_reply_type": "Solution", "ref_tool_calls": 1},
        {"task_id": "T-1", "checkpoint": 2, "ref_reply_type": "Solution", "ref_tool_calls": 0},
        {"task_id": "T-1", "checkpoint": 3, "ref_reply_type": "Solution", "ref_tool_calls": 0}]
    assert run.tasks.select("task_id", "language", "channel").unique().sort("task_id").collect().to_dicts() == [
        {"task_id": "H-1", "language": "en", "channel": None}, {"task_id": "T-1", "language": "en", "channel": "chat"}]
    assert not run.warnings
    # the dataset hash is the lines' as read, whole and for a run made on the first tasks only
    assert metadata.dataset_hash(None) == metadata.dataset_hash(5) == dataset_hash(lines)
    assert metadata.dataset_hash(1) == dataset_hash(lines[:1]) != dataset_hash([task_dict(given[0])])
    # the page's task context and the dataset statistics read the typed tasks too
    assert load_task_context(workspace) == {task.task_id: task_dict(task) for task in given}
    stats, problem = load_dataset_stats(workspace)
    assert problem is None and stats is not None


def test_a_report_on_the_first_tasks_hashes_only_those_lines(tmp_path):
    workspace = _workspace(tmp_path, [_line("T-1"), _line("T-2")])
    asyncio.run(run_eval(_settings(workspace, limit=1), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    assert not load_runs(workspace, ["r1"])[0].warnings
    _workspace(tmp_path, [_line("T-1"), {**_line("T-2"), "category": "EVS"}])  # a line the run did not walk
    assert not load_runs(workspace, ["r1"])[0].warnings
    _workspace(tmp_path, [{**_line("T-1"), "category": "EVS"}, _line("T-2")])  # the line it walked
    [warning] = load_runs(workspace, ["r1"])[0].warnings
    assert "changed since run 'r1' was made" in warning


def test_a_malformed_task_line_fails_the_report_naming_the_line_and_the_field(tmp_path):
    from cirrus.cli import app

    workspace = _workspace(tmp_path, [_line("T-1"), _line("T-2")])
    asyncio.run(run_eval(_settings(workspace), ScriptedAgent(REPLIES), ExactJudge(), Fluency()))
    bad = _line("T-2")
    bad["checkpoints"][1]["reply_type"] = "Nonsense"
    path = _write_lines(workspace, [json.dumps(_line("T-1")), json.dumps(bad)])
    with pytest.raises(ReportError) as caught:
        load_runs(workspace, ["r1"])
    assert str(caught.value).startswith(f"{path}:2: not a valid task (checkpoints.1.reply_type: Input should be")
    result = CliRunner().invoke(app, ["report", "r1", "-w", str(workspace), "--out", str(tmp_path / "out")],
                                env={"COLUMNS": "1000"})
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"error: {path}:2: not a valid task (checkpoints.1.reply_type: Input should be" in said
    assert not (tmp_path / "out").exists()


def test_a_task_file_changed_after_the_metadata_was_read_is_said_so(tmp_path):
    workspace = _workspace(tmp_path, [_line("T-1"), _line("T-2")])
    metadata = load_task_metadata(workspace)
    _workspace(tmp_path, [_line("X-1"), _line("T-2")])
    for read in (lambda: metadata.dataset_hash(1), lambda: list(metadata.typed_tasks())):
        with pytest.raises(ReportError, match=r"tasks\.jsonl changed while the report read it"):
            read()
