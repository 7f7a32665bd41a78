"""Single-turn subtask mode (`cirrus eval --mode subtask`, docs/subtasks.md):
the real history, the scores and the Table 4 / Figure 6 tables from plain
rows with hand-computed values, and the command end to end (the offline
oracle on the sample workspace; a scripted agent over 127.0.0.1)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.agents.prompts import SYSTEM_PROMPT, no_recorded_result_content, request_tokens, system_message
from cirrus.cli import app
from cirrus.evaluate.subtask import (
    SUBTASK_COLUMNS,
    message_tokens,
    reference_histories,
    reference_history,
    subtask_scores,
)
from cirrus.offline import count_tokens
from cirrus.replay import NoRecordedResult
from cirrus.report import schema as report_schema
from cirrus.report.subtask import FINE_BANDS, by_reply_type, by_tokens, task_sums, token_band, token_bands
from cirrus.report.uncertainty import ratio_bootstrap
from tests.chat_server import ChatServer, Reply, tool_calls
from tests.scripted_models import TOOL_ARGS, judge_or_fluency, make_task, write_workspace

# -- the real history ----------------------------------------------------------------------


class FakeReplay:
    """Answers by (name, canonical arguments), each recorded answer once in
    order, then the last again (as ToolReplayer does); unknown calls raise."""

    def __init__(self, answers: dict[tuple[str, str], list[Any]]) -> None:
        self.answers = {key: list(values) for key, values in answers.items()}
        self.played: dict[tuple[str, str], int] = {}
        self.calls: list[tuple[str, str]] = []

    def call(self, name: str, arguments: Any) -> Any:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        key = (name, json.dumps(json.loads(args), sort_keys=True))
        self.calls.append(key)
        if key not in self.answers:
            raise NoRecordedResult(name, args, None)
        index = self.played.get(key, 0)
        self.played[key] = index + 1
        return self.answers[key][min(index, len(self.answers[key]) - 1)]


X_ARGS = {"id": "i-1"}
X_KEY = ("X", json.dumps(X_ARGS, sort_keys=True))

HISTORY = [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "h1", "type": "function", "function": {"name": "X", "arguments": json.dumps(X_ARGS)}}]},
    {"role": "tool", "tool_call_id": "h1", "content": '{"state": "first"}'},
]
TASK = {
    "task_id": "T", "history": HISTORY,
    "checkpoints": [
        {"index": 1, "query": "q1", "reply": "r1", "tool_calls": [{"name": "X", "arguments": X_ARGS}],
         "reply_type": "Solution"},
        # a turn of tool calls only (empty reply), a call the cassette cannot answer, and context before it
        {"index": 2, "query": "q2", "reply": "", "tool_calls": [{"name": "Y", "arguments": {"a": 1}}],
         "reply_type": "Standard", "context": [{"role": "assistant", "content": "one moment please"}]},
        {"index": 3, "query": "q3", "reply": "r3", "tool_calls": [], "reply_type": "Inquire",
         "context": [{"role": "user", "content": "are you there?"}]},
    ],
    "stats": {"input_tokens": 0, "turns": 10, "checkpoints": 3},
}


def test_reference_history_follows_the_real_dialogue():
    replay = FakeReplay({X_KEY: [{"state": "first"}, {"state": "second"}]})
    h1 = list(HISTORY)
    turn1 = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "ref-1-0", "type": "function", "function": {"name": "X", "arguments": '{"id": "i-1"}'}}]},
        # the history's own call of X took the first answer: checkpoint 1's reference call gets the second
        {"role": "tool", "tool_call_id": "ref-1-0", "content": '{"state": "second"}'},
        {"role": "assistant", "content": "r1"},
    ]
    context2 = [{"role": "assistant", "content": "one moment please"}]
    turn2 = [
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "ref-2-0", "type": "function", "function": {"name": "Y", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "ref-2-0", "content": no_recorded_result_content()},
        # no assistant message: the reference reply is empty
    ]
    context3 = [{"role": "user", "content": "are you there?"}]
    assert reference_histories(TASK, replay) == [h1, h1 + turn1 + context2, h1 + turn1 + context2 + turn2 + context3]
    # X: the history's call, then checkpoint 1's; Y: checkpoint 2's
    assert replay.calls == [X_KEY, X_KEY, ("Y", '{"a": 1}')]


def test_reference_history_of_one_checkpoint_and_its_bounds():
    assert reference_history(TASK, 1, FakeReplay({})) == HISTORY
    third = reference_history(TASK, 3, FakeReplay({X_KEY: [{"state": "only"}]}))
    assert [m["role"] for m in third] == ["assistant", "tool", "user", "assistant", "tool", "assistant", "assistant",
                                          "user", "assistant", "tool", "user"]
    assert third[4]["content"] == '{"state": "only"}'  # one recording: repeated for the second call
    for k in (0, 4):
        with pytest.raises(ValueError, match="not in 1..3"):
            reference_history(TASK, k, FakeReplay({}))
    bare = {"task_id": "B", "checkpoints": [{"index": i, "query": "q", "reply": "r", "reply_type": "Solution"}
                                            for i in (1, 2)],
            "stats": {"input_tokens": 0, "turns": 4, "checkpoints": 2}}  # no history, no tool_calls key
    assert reference_history(bare, 2, FakeReplay({})) == [{"role": "user", "content": "q"},
                                                          {"role": "assistant", "content": "r"}]


def test_message_tokens_counts_text_and_tool_calls_like_ingest():
    messages = [{"role": "user", "content": "hello there"}, HISTORY[0]]
    expected = count_tokens("hello there\n" + json.dumps(HISTORY[0]["tool_calls"]))
    assert message_tokens(messages) == expected > count_tokens("hello there")


# -- scores and tables from plain rows -------------------------------------------------------


def row(task: str, checkpoint: int, attempt: int, accepted: bool | None, *, status: str = "ok",
        tia: bool | None = True, tsa: bool | None = None, stl: int | None = 5, tokens: int = 100,
        reply_type: str = "Solution") -> dict[str, Any]:
    ok = status == "ok"
    return {"task_id": task, "checkpoint": checkpoint, "attempt": attempt, "status": status,
            "accepted": accepted if ok else None, "tia": tia if ok else None, "tsa": tsa if ok else None,
            "tev": tsa if ok else None, "rr": accepted if ok else None, "stl": stl if ok else None,
            "input_tokens": tokens, "reply_type": reply_type}


# T1 checkpoint 1 (500 tokens, Solution): accepted, rejected, accepted; reference calls; STL 10, 4, 20
# T1 checkpoint 2 (1,500 tokens, Inquire): rejected, rejected, error; no reference calls
# T2 checkpoint 1 (9,000 tokens, Solution): accepted, error, error; STL 30
ROWS = [
    row("T1", 1, 0, True, tsa=True, stl=10, tokens=500), row("T1", 1, 1, False, tia=False, tsa=False, stl=4, tokens=500),
    row("T1", 1, 2, True, tsa=True, stl=20, tokens=500),
    row("T1", 2, 0, False, tokens=1500, reply_type="Inquire"), row("T1", 2, 1, False, tokens=1500, reply_type="Inquire"),
    row("T1", 2, 2, None, status="error", tokens=1500, reply_type="Inquire"),
    row("T2", 1, 0, True, stl=30, tokens=9000), row("T2", 1, 1, None, status="error", tokens=9000),
    row("T2", 1, 2, None, status="error", tokens=9000),
]


def test_subtask_scores_by_hand():
    scores = subtask_scores(ROWS, 2)
    # per subtask (n ok, c accepted): T1/1 (3, 2), T1/2 (2, 0), T2/1 (1, 1)
    assert scores["pass@1"] == pytest.approx((2 / 3 + 0 + 1) / 3)  # = 5/9
    # pass@2: T1/1: 1 - C(1,2)/C(3,2) = 1; T1/2: 1 - C(2,2)/C(2,2) = 0; T2/1 has n = 1 < 2: left out
    assert scores["pass@2"] == pytest.approx(0.5) and scores["n_subtasks_k"] == 2
    assert scores["atia"] == pytest.approx(5 / 6)  # ok rows: T, F, T, T, T, T
    assert scores["atia_tool"] == pytest.approx(2 / 3)  # ok rows whose reference calls a tool (T1/1): T, F, T
    assert scores["atsa"] == pytest.approx(2 / 3) == scores["atev"]  # defined on T1/1 only: T, F, T
    assert scores["arr"] == pytest.approx(3 / 6)
    assert scores["amtl"] == pytest.approx((10 + 20 + 30) / 3)  # STL of the accepted ok rows
    assert (scores["n_tasks"], scores["n_subtasks"], scores["n_ok"], scores["subtask_errors"]) == (2, 3, 6, 3)
    assert [key for key in subtask_scores(ROWS, 1) if key.startswith("pass@")] == ["pass@1"]
    with pytest.raises(ValueError):
        subtask_scores(ROWS, 0)
    empty = subtask_scores([], 2)
    assert empty["pass@1"] is None and empty["pass@2"] is None and empty["amtl"] is None


def test_token_bands_have_fixed_labelled_edges():
    # the paper's Table 4 bands by default
    assert [token_band(t) for t in (0, 7999, 8000, 15999, 16000, 10**6, None)] == [
        "0-8k", "0-8k", "8k-16k", "8k-16k", "16k+", "16k+", "unknown"]
    assert [token_band(t, FINE_BANDS) for t in (0, 999, 1000, 1999, 2000, 3999, 4000, 7999, 8000, 16000, None)] == [
        "<1k", "<1k", "1k-2k", "1k-2k", "2k-4k", "2k-4k", "4k-8k", "4k-8k", "8k-16k", "16k+", "unknown"]
    assert token_bands("fine") is FINE_BANDS
    with pytest.raises(ValueError, match="choose paper or fine"):
        token_bands("coarse")


def test_table_4_in_the_papers_bands_and_both_tia_populations():
    table = {r["segment"]: r for r in by_tokens(ROWS, 2, n_boot=0)}
    assert list(table) == ["0-8k", "8k-16k", "16k+"]
    low = table["0-8k"]  # T1/1 (reference calls a tool: T, F, T) and T1/2 (no tool needed: T, T)
    assert (low["n_tasks"], low["n_subtasks"], low["n_ok"], low["errors"]) == (1, 2, 5, 1)
    assert low["tia"] == pytest.approx(4 / 5)  # every ok subtask attempt
    assert low["tia_tool"] == pytest.approx(2 / 3)  # only those whose reference calls a tool
    assert low["tsa"] == pytest.approx(2 / 3)
    high = table["8k-16k"]  # T2/1: no tool needed, so no tool population
    assert (high["tia"], high["tia_tool"], high["tsa"]) == (1.0, None, None)
    assert table["16k+"]["n_subtasks"] == 0
    # an explicit needs_tool wins over the old rows' "TSA is defined" reading
    marked = [{**r, "needs_tool": r["task_id"] == "T2"} for r in ROWS]
    assert {r["segment"]: r["tia_tool"] for r in by_tokens(marked, 2, n_boot=0)} == {
        "0-8k": None, "8k-16k": 1.0, "16k+": None}


def test_table_4_by_fine_token_band_by_hand():
    table = {r["segment"]: r for r in by_tokens(ROWS, 2, FINE_BANDS, n_boot=0)}
    assert list(table) == ["<1k", "1k-2k", "2k-4k", "4k-8k", "8k-16k", "16k+"] and [
        r["segment_order"] for r in table.values()] == [0, 1, 2, 3, 4, 5]
    low = table["<1k"]  # T1/1 only
    assert (low["n_tasks"], low["n_subtasks"], low["n_ok"], low["errors"]) == (1, 1, 3, 0)
    assert low["pass_at_1"] == pytest.approx(2 / 3) and low["pass_at_k"] == 1.0
    assert low["tia"] == pytest.approx(2 / 3) and low["tsa"] == pytest.approx(2 / 3)
    mid = table["1k-2k"]  # T1/2: rejected twice, no reference calls
    assert (mid["pass_at_1"], mid["pass_at_k"], mid["tia"], mid["tsa"], mid["errors"]) == (0.0, 0.0, 1.0, None, 1)
    assert table["2k-4k"]["n_subtasks"] == 0 and table["2k-4k"]["pass_at_1"] is None
    high = table["8k-16k"]  # T2/1: one ok attempt, accepted
    assert (high["pass_at_1"], high["pass_at_k"], high["tia"]) == (1.0, None, 1.0)
    assert all(r[f"{m}_low"] is None for r in table.values() for m in ("pass_at_1", "tia"))  # no bootstrap asked


def test_figure_6_by_reply_type_by_hand():
    table = {r["segment"]: r for r in by_reply_type(ROWS, 2, n_boot=0)}
    assert list(table) == ["Solution", "Standard", "Inquire", "Clarify", "Appease"]
    solution = table["Solution"]  # T1/1 (c/n = 2/3) and T2/1 (1/1)
    assert solution["pass_at_1"] == pytest.approx((2 / 3 + 1) / 2) and solution["pass_at_k"] == 1.0
    assert solution["amtl"] == pytest.approx(20.0) and (solution["n_tasks"], solution["n_subtasks"]) == (2, 2)
    assert (table["Inquire"]["pass_at_1"], table["Inquire"]["amtl"]) == (0.0, None)
    assert table["Standard"]["n_subtasks"] == 0
    odd = by_reply_type([{**ROWS[0], "reply_type": None}, {**ROWS[6], "reply_type": "Other"}], 1, n_boot=0)
    assert [r["segment"] for r in odd][5:] == ["Other", "unknown"]


def test_intervals_resample_tasks_with_the_seed():
    rows = by_reply_type(ROWS, 2, n_boot=400, seed=7)
    solution = rows[0]
    # per task (sum, count) of pass@1 over Solution: T1 (2/3, 1), T2 (1, 1): the task-level bootstrap
    sums = task_sums([r for r in ROWS if r["reply_type"] == "Solution"], 2)
    assert sums["T1"]["pass_at_1"] == pytest.approx((2 / 3, 1)) and sums["T2"]["pass_at_1"] == (1.0, 1)
    direct = ratio_bootstrap([[2 / 3], [1.0]], [[1.0], [1.0]], n_boot=400, seed=7)
    assert solution["pass_at_1_low"] == pytest.approx(direct.low[0]) and solution["pass_at_1_high"] == pytest.approx(
        direct.high[0])
    # replicates can only be 2/3, 5/6 or 1 (which tasks were drawn)
    assert 2 / 3 - 1e-9 <= solution["pass_at_1_low"] < solution["pass_at_1_high"] <= 1 + 1e-9
    assert by_reply_type(ROWS, 2, n_boot=400, seed=7) == rows  # seeded: the same again
    with pytest.raises(ValueError, match="unknown subtask metrics"):
        task_sums(ROWS, 2, ("pass_at_3",))


# -- end to end: the offline oracle on the sample workspace ------------------------------------


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env)


def test_oracle_subtask_run_resume_refusal_and_report(sample_ingest_copy):
    ws = sample_ingest_copy
    tasks = [json.loads(line) for line in (ws / "tickets/tasks.jsonl").read_text().splitlines() if line.strip()]
    total = sum(len(t["checkpoints"]) for t in tasks)
    command = ("eval", "--model", "baseline:oracle", "--mode", "subtask", "--pass-k", "2", "--run-id", "sub",
               "-w", str(ws), "-q")
    result = invoke(*command)
    assert result.exit_code == 0, result.output
    run = ws / "reports/sub"
    assert not (run / "tasks.parquet").exists() and not (run / "checkpoints.parquet").exists()
    frame = pl.read_parquet(run / "subtasks.parquet")
    assert frame.columns == list(SUBTASK_COLUMNS) and frame.height == 2 * total
    assert frame.schema == pl.Schema({n: getattr(pl, t)() for n, t in SUBTASK_COLUMNS.items()})
    assert set(frame["status"]) == {"ok"} and set(frame["run_id"]) == {"sub"}
    # the local judge accepts the oracle's reference replies, and its reference calls, everywhere
    assert frame["accepted"].all() and frame["tia"].all()
    assert frame["api_input_tokens"].null_count() == frame.height  # an offline baseline reports no usage
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["mode"], summary["n_tasks"], summary["n_subtasks"], summary["errors"]) == (
        "subtask", len(tasks), total, 0)
    assert summary["pass@1"] == 1.0 == summary["pass@2"] and summary["arr"] == 1.0
    # STL: the reference reply's tokens; input: the real history + query, growing with the checkpoint
    first = tasks[0]
    one = frame.filter((pl.col("task_id") == first["task_id"]) & (pl.col("attempt") == 0)).sort("checkpoint")
    assert one["stl"].to_list() == [count_tokens(c["reply"]) for c in first["checkpoints"]]
    text = [m.get("content") or json.dumps(m.get("tool_calls", "")) for m in first.get("history", [])]
    assert one["dialogue_tokens"][0] == count_tokens("\n".join([*text, first["checkpoints"][0]["query"]]))
    assert one["dialogue_tokens"].is_sorted() and one["dialogue_tokens"].n_unique() == len(first["checkpoints"])
    # input_tokens: what the agent is sent (system prompt and knowledge, tools, then the dialogue)
    seen = [*first.get("history", []), {"role": "user", "content": first["checkpoints"][0]["query"]}]
    system = system_message(first, SYSTEM_PROMPT)
    assert one["input_tokens"][0] == request_tokens(system, first.get("tools"), seen, count_tokens) == (
        count_tokens(system) + (count_tokens(json.dumps(first["tools"], ensure_ascii=False)) if first.get("tools")
                                else 0) + sum(count_tokens(m["content"]) for m in seen))
    assert (one["input_tokens"] - one["dialogue_tokens"]).min() >= count_tokens(system)
    assert one["needs_tool"].to_list() == [bool(c["tool_calls"]) for c in first["checkpoints"]]
    assert summary["amtl"] == pytest.approx(frame["stl"].mean())
    transcripts = [json.loads(line) for line in (run / "transcripts.jsonl").read_text().splitlines()]
    assert len(transcripts) == 2 * len(tasks) and {t["mode"] for t in transcripts} == {"subtask"}

    # resume: a run cut short asks only the attempts not committed
    lines = (run / "attempts.jsonl").read_text().splitlines(keepends=True)
    (run / "attempts.jsonl").write_text("".join(lines[:5]))
    (run / "summary.json").unlink()
    result = invoke(*command)
    assert result.exit_code == 0, result.output
    assert f"resuming run sub: 5 of {2 * len(tasks)} attempts already done" in result.output
    again = pl.read_parquet(run / "subtasks.parquet").drop("wall_s")
    assert again.equals(frame.drop("wall_s"))
    assert len((run / "attempts.jsonl").read_text().splitlines()) == 2 * len(tasks)

    # another mode on the same run id is refused, both ways
    result = invoke("eval", "--model", "baseline:oracle", "--pass-k", "2", "--run-id", "sub", "-w", str(ws), "-q")
    assert result.exit_code == 2 and "started with --mode subtask" in result.output
    walk = invoke("eval", "--model", "baseline:oracle", "--run-id", "walk", "--limit", "3", "-w", str(ws), "-q")
    assert walk.exit_code == 0, walk.output
    result = invoke("eval", "--model", "baseline:oracle", "--mode", "subtask", "--run-id", "walk", "--limit", "3",
                    "-w", str(ws), "-q")
    assert result.exit_code == 2 and "started with --mode walk" in result.output
    assert invoke("eval", "--model", "baseline:oracle", "--mode", "turns", "-w", str(ws)).exit_code == 2

    # report of the subtask run alone: the two tables, no walk leaderboard
    result = invoke("report", "sub", "-w", str(ws), "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    assert "Table 4" in result.output and "Figure 6" in result.output
    out = ws / "reports/sub/report"
    assert {p.name for p in out.iterdir()} == {"subtask_by_tokens.parquet", "subtask_by_reply_type.parquet",
                                               "report.json"}
    bands = pl.read_parquet(out / "subtask_by_tokens.parquet")
    assert bands.schema == report_schema.polars_schema("subtask_by_tokens")
    assert bands["band"].to_list() == ["0-8k", "8k-16k", "16k+"]  # the paper's Table 4 bands
    assert bands["n_subtasks"].sum() == total and bands["n_ok"].sum() == 2 * total
    present = bands.filter(pl.col("n_subtasks") > 0)
    assert present["pass_at_1"].to_list() == [1.0] * present.height == present["pass_at_1_low"].to_list()
    kinds = pl.read_parquet(out / "subtask_by_reply_type.parquet")
    assert kinds.schema == report_schema.polars_schema("subtask_by_reply_type")
    assert kinds["n_subtasks"].sum() == total and set(kinds["k"]) == {2}
    manifest = json.loads((out / "report.json").read_text())
    assert manifest["runs"] == [] and [r["run_id"] for r in manifest["subtask_runs"]] == ["sub"]

    # with a walk run: the leaderboard holds the walk only, the subtask tables sit beside it
    result = invoke("report", "walk", "sub", "-w", str(ws), "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    both = ws / "reports/_compare/walk+sub"
    assert pl.read_parquet(both / "leaderboard.parquet")["run_id"].to_list() == ["walk"]
    assert set(pl.read_parquet(both / "subtask_by_tokens.parquet")["run_id"]) == {"sub"}

    from cirrus.report.loading import ReportError, load_run

    with pytest.raises(ReportError, match="is a subtask run"):
        load_run(ws, "sub")


# -- end to end: a scripted agent over 127.0.0.1 ----------------------------------------------

KEY = "sk-cirrus-subtask-0123456789"


def test_scripted_agent_usage_history_and_error_policy(tmp_path):
    ws = write_workspace(tmp_path, [make_task("T-tool", True)])
    state = {"fail": True}

    def rule(body: dict) -> Reply | str:
        answer = judge_or_fluency(body)
        if answer is not None:
            return answer
        messages = body["messages"]
        k = sum(1 for m in messages if m["role"] == "user")
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "customer question 2" and state["fail"]:
            return Reply(status=500, headers={"retry-after-ms": "1"}, error_message="overloaded")
        if body.get("tools") and k == 1 and messages[-1]["role"] == "user":
            return tool_calls(("DescribeInstance", TOOL_ARGS), completion_tokens=3, prompt_tokens=50)
        return Reply(content=f"ANSWER-{k} from the agent", completion_tokens=7, prompt_tokens=100 + k)

    command = ("eval", "--model", "agent", "--base-url", "", "--api-key-env", "SUBTASK_KEY", "--judge-model", "judge",
               "--mode", "subtask", "--run-id", "s", "-w", str(ws), "-q")
    with ChatServer(rule=rule) as server:
        command = tuple(server.base_url if part == "" else part for part in command)
        result = invoke(*command, env={"SUBTASK_KEY": KEY})
        assert result.exit_code == 0, result.output
        first = pl.read_parquet(ws / "reports/s/subtasks.parquet").sort("checkpoint")
        # one failed subtask: the others are kept and scored, the attempt row is an error
        assert first["status"].to_list() == ["ok", "error", "ok"]
        assert "500" in first["error"][1] and first["accepted"].to_list() == [True, None, True]
        summary = json.loads((ws / "reports/s/summary.json").read_text())
        assert (summary["errors"], summary["subtask_errors"], summary["pass@1"]) == (1, 1, 1.0)
        # a resume asks the whole attempt again
        state["fail"] = False
        asked = len(server.requests)
        result = invoke(*command, env={"SUBTASK_KEY": KEY})
        assert result.exit_code == 0, result.output
        agent_calls = [b for b in server.requests[asked:]  # not the endpoint check before the run
                       if b["model"] == "agent" and "customer question" in json.dumps(b["messages"])]
        fluency_calls = [b for b in server.requests if b["model"] == "fluency"]
    assert not fluency_calls  # a subtask run asks no fluency question
    # checkpoint 1: a tool round and a text round; 2 and 3: one text round each
    assert len(agent_calls) == 4
    frame = pl.read_parquet(ws / "reports/s/subtasks.parquet").sort("checkpoint")
    assert frame["status"].to_list() == ["ok"] * 3 and frame["accepted"].all()
    # usage from the API: checkpoint 1 = 50 + 101 prompt tokens, 3 + 7 output tokens
    assert frame["api_input_tokens"].to_list() == [150 + 1, 102, 103]
    assert frame["stl"].to_list() == [10, 7, 7]
    assert (frame["tia"].to_list(), frame["tsa"].to_list(), frame["tev"].to_list()) == (
        [True, True, True], [True, None, None], [True, None, None])
    # the real history of checkpoint 2: the reference call with its recorded result, the reference reply
    second = next(b for b in agent_calls if b["messages"][-1]["content"] == "customer question 2")
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second["messages"][2]["tool_calls"][0]["function"]["name"] == "DescribeInstance"
    assert json.loads(second["messages"][3]["content"]) == {"status": "Running"}
    assert second["messages"][4]["content"] == "ANSWER-1"  # the reference, not the agent's own reply
    assert json.loads((ws / "reports/s/summary.json").read_text())["amtl"] == pytest.approx(8.0)  # (10 + 7 + 7) / 3
    assert KEY.encode() not in b"".join(p.read_bytes() for p in (ws / "reports").rglob("*") if p.is_file())


def test_html_section_rows_and_figure_6_svg(tmp_path):
    from cirrus.report.html import subtask_html_section
    from cirrus.report.subtask import SubtaskRun, subtask_tables

    tables = subtask_tables([SubtaskRun("r", tmp_path, {"model": "m", "k": 2}, {}, ROWS)], n_boot=50)
    section = subtask_html_section(tables)
    tokens, kinds = section["tables"]
    assert [r[2] for r in tokens["rows"]] == ["0-8k", "8k-16k"]  # empty bands are not shown
    solution, inquire = kinds["rows"]
    assert solution[:6] == ["r", "m", "Solution", "2", "2", "2"]  # T2/1 failed twice
    assert solution[6].startswith("0.833 [") and solution[7].startswith("1.000 [") and solution[7].endswith("(K=2)")
    assert inquire[2] == "Inquire" and inquire[8] == "-"  # nothing accepted: no AMTL
    assert section["figure6"].startswith("<svg") and 'aria-label="chart-subtask-reply-type"' in section["figure6"]
    assert subtask_html_section({}) is None


# -- a call the ticket repeats gets the answer recorded at that point ------------------------

BALANCE_ARGS = {"account": "AC-***1"}
TRANSFER_ARGS = {"account": "AC-***1", "amount": 1500}


def banking_task() -> dict:
    """A ticket that checks a balance, transfers money and checks again: the
    same call (GetBalance, same arguments) recorded twice with two answers."""
    checkpoints = [
        {"index": 1, "query": "what is my balance?", "reply": "Your balance is 3,948.16.",
         "tool_calls": [{"name": "GetBalance", "arguments": BALANCE_ARGS}], "reply_type": "Solution"},
        {"index": 2, "query": "please transfer 1500 to my savings", "reply": "Done: the transfer went through.",
         "tool_calls": [{"name": "Transfer", "arguments": TRANSFER_ARGS}], "reply_type": "Solution"},
        {"index": 3, "query": "and what is my balance now?", "reply": "Your balance is 2,448.16.",
         "tool_calls": [{"name": "GetBalance", "arguments": BALANCE_ARGS}], "reply_type": "Solution"},
    ]
    schema = [{"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": {}}}} for name in ("GetBalance", "Transfer")]
    return {"task_id": "BANK-1", "category": "Billing", "knowledge": [], "tools": schema, "history": [],
            "checkpoints": checkpoints, "cassette": "tool_mocks/BANK-1.yaml",
            "stats": {"input_tokens": 30, "turns": 6, "checkpoints": 3}}


def test_subtask_agent_gets_the_answer_recorded_at_its_checkpoint(tmp_path):
    from cirrus.ingest.cassettes import build_cassette, write_cassette
    from cirrus.schema import ToolExchange

    task = banking_task()
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text(json.dumps(task) + "\n")
    write_cassette(tmp_path / task["cassette"], build_cassette([
        ToolExchange("c1", "GetBalance", BALANCE_ARGS, [{"balance": "3,948.16"}]),
        ToolExchange("c2", "Transfer", TRANSFER_ARGS, [{"ok": True}]),
        ToolExchange("c3", "GetBalance", BALANCE_ARGS, [{"balance": "2,448.16"}])]))

    def rule(body: dict) -> Reply | str:
        answer = judge_or_fluency(body)
        if answer is not None:
            return answer
        last = body["messages"][-1]
        if last["role"] == "user":  # call the tool the question needs
            if "transfer" in last["content"]:
                return tool_calls(("Transfer", TRANSFER_ARGS))
            return tool_calls(("GetBalance", BALANCE_ARGS))
        result = json.loads(last["content"])  # report truthfully what the tool said
        if "balance" in result:
            return Reply(content=f"Your balance is {result['balance']}.")
        return Reply(content="Done: the transfer went through.")

    with ChatServer(rule=rule) as server:
        result = invoke("eval", "--model", "agent", "--base-url", server.base_url, "--api-key-env", "SUBTASK_KEY",
                        "--judge-model", "judge", "--mode", "subtask", "--run-id", "bank", "-w", str(tmp_path), "-q",
                        env={"SUBTASK_KEY": KEY})
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(tmp_path / "reports/bank/subtasks.parquet").sort("checkpoint")
    assert frame["status"].to_list() == ["ok"] * 3
    transcript = json.loads((tmp_path / "reports/bank/transcripts.jsonl").read_text().splitlines()[0])
    got = [[c["result"] for c in s["tool_calls"]] for s in transcript["subtasks"]]
    # checkpoint 3 comes after the first balance check: it gets the second recording, as the ticket did
    assert got == [[{"balance": "3,948.16"}], [{"ok": True}], [{"balance": "2,448.16"}]]
    assert frame["accepted"].to_list() == [True, True, True]


def test_replayer_position_and_seek(tmp_path):
    from cirrus.ingest.cassettes import build_cassette, write_cassette
    from cirrus.replay import ToolReplayer
    from cirrus.schema import ToolExchange

    path = tmp_path / "tool_mocks/x.yaml"
    write_cassette(path, build_cassette([ToolExchange("a", "X", {"id": 1}, [1]),
                                         ToolExchange("b", "X", {"id": 1}, [2])]))
    with ToolReplayer(path) as replayer:
        start = replayer.position()
        assert replayer.call("X", {"id": 1}) == 1
        after_first = replayer.position()
        assert replayer.call("X", {"id": 1}) == 2 and replayer.call("X", {"id": 1}) == 2  # then the last forever
        replayer.seek(after_first)
        assert replayer.call("X", {"id": 1}) == 2
        replayer.seek(start)
        assert replayer.call("X", {"id": 1}) == 1
    assert ToolReplayer(None).position() == {}


def test_report_token_bands_option_and_runs_written_before_whole_input_counts(sample_ingest_copy):
    ws = sample_ingest_copy
    result = invoke("eval", "--model", "baseline:oracle", "--mode", "subtask", "--run-id", "sub", "--limit", "3",
                    "-w", str(ws), "-q")
    assert result.exit_code == 0, result.output
    result = invoke("report", "sub", "-w", str(ws), "--bootstrap", "0", "--token-bands", "fine")
    assert result.exit_code == 0, result.output
    out = ws / "reports/sub/report"
    bands = pl.read_parquet(out / "subtask_by_tokens.parquet")
    assert bands["band"].to_list() == ["<1k", "1k-2k", "2k-4k", "4k-8k", "8k-16k", "16k+"]
    assert json.loads((out / "report.json").read_text())["token_bands"] == "fine"
    assert "tia_tool" in bands.columns and "written before" not in result.output
    bad = invoke("report", "sub", "-w", str(ws), "--token-bands", "coarse")
    assert bad.exit_code == 2 and "choose paper or fine" in bad.output
    # a run written before input_tokens counted the whole input: read, with a warning
    table = ws / "reports/sub/subtasks.parquet"
    pl.read_parquet(table).drop("dialogue_tokens", "needs_tool").write_parquet(table)
    result = invoke("report", "sub", "-w", str(ws), "--bootstrap", "0")
    assert result.exit_code == 0, result.output
    assert "written before input_tokens counted the agent's whole input" in " ".join(result.output.split())
    assert pl.read_parquet(out / "subtask_by_tokens.parquet")["n_subtasks"].sum() > 0
