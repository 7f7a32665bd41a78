"""The failure taxonomy of rejected checkpoints (docs/failures.md): the pure
classifier and its precedence, the judge's new ``problem`` / ``missing``
field (prompt, strict schema, lenient reader, LLM judge, panel, offline
judge), the ``failure`` column of ``checkpoints.parquet`` for eval and
rescore, old runs, the report's ``failures.parquet`` and ``cirrus show``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.failures import (
    FAILURE_CATEGORIES,
    FAILURE_NAMES,
    TurnFacts,
    agent_reply_type,
    classify,
    failure_of,
    needs_agent_type,
    transcript_facts,
)
from cirrus.evaluate.store import CHECKPOINT_FILE_SCHEMA
from cirrus.evaluate.types import AgentTurn, ToolCallMade, Verdict
from cirrus.evaluate.walk import JudgedTurn, _verdict_record
from cirrus.files import read_jsonl
from cirrus.judges import prompts, schemas
from cirrus.judges.local import LocalCoverageJudge, find_problem
from cirrus.judges.panel import JudgePanel, majority_problem
from cirrus.judges.verdicts import read_coverage, read_problem
from cirrus.metrics import CheckpointDecision

# --------------------------------------------------------------------------
# classify: every category, and the precedence
# --------------------------------------------------------------------------

REJECTED_REPLY = dict(accepted=False, rr=False, tia=True)  # a turn without reference tool calls, RR false


def test_the_categories_are_the_documented_list_in_precedence_order():
    assert FAILURE_NAMES == ("missed_tool_call", "wrong_tool", "unrecorded_call", "wrong_arguments",
                             "premature_solution", "contradiction", "missing_information", "not_followable")
    assert all(name.isidentifier() and name == name.lower() for name in FAILURE_NAMES)
    assert all(description.endswith(".") for _, description in FAILURE_CATEGORIES)
    doc = (Path(__file__).parents[1] / "docs" / "failures.md").read_text(encoding="utf-8")
    positions = [doc.index(f"| `{name}` |") for name in FAILURE_NAMES]
    assert positions == sorted(positions)  # the doc's table lists them in the same order
    for number, name in enumerate(FAILURE_NAMES, 1):
        assert f"{number}. **`{name}`**" in doc  # an example of each


@pytest.mark.parametrize(("facts", "expected"), [
    # 1: the reference called a tool, the turn none; everything else wrong too: tools come first
    (TurnFacts(accepted=False, rr=False, tia=False, tsa=False, tev=False, reference_calls=1, calls_made=0,
               judge_problem="contradiction", reference_type="Inquire", agent_type="Solution"), "missed_tool_call"),
    # 2: a call, but not the reference's tool name
    (TurnFacts(accepted=False, rr=False, tia=True, tsa=False, tev=False, reference_calls=1, calls_made=1,
               unrecorded_calls=1, judge_problem="contradiction"), "wrong_tool"),
    # 3: the right name, a call replay could not answer (RR true: the reply itself was fine)
    (TurnFacts(accepted=False, rr=True, tia=True, tsa=True, tev=False, reference_calls=1, calls_made=2,
               unrecorded_calls=1), "unrecorded_call"),
    # 4: the right name, every call answered from the cassette, yet not the reference call
    (TurnFacts(accepted=False, rr=True, tia=True, tsa=True, tev=False, reference_calls=1, calls_made=1,
               unrecorded_calls=0), "wrong_arguments"),
    # unknown recorded flags (None): the calls cannot be said to be unrecorded
    (TurnFacts(accepted=False, rr=True, tia=True, tsa=True, tev=False, reference_calls=1, calls_made=1,
               unrecorded_calls=None), "wrong_arguments"),
    # 5: the reference asks, the agent answers with a solution: before the judge's contradiction
    (TurnFacts(**REJECTED_REPLY, reference_type="Inquire", agent_type="Solution", judge_problem="contradiction"),
     "premature_solution"),
    (TurnFacts(**REJECTED_REPLY, reference_type="Clarify", agent_type="Solution"), "premature_solution"),
    # ... but not when the agent also asked, or the reference gives a solution
    (TurnFacts(**REJECTED_REPLY, reference_type="Inquire", agent_type="Inquire", judge_problem="contradiction"),
     "contradiction"),
    (TurnFacts(**REJECTED_REPLY, reference_type="Solution", agent_type="Solution"), "missing_information"),
    # 6 / 7: the judge's words; missing is the default
    (TurnFacts(**REJECTED_REPLY, judge_problem="contradiction"), "contradiction"),
    (TurnFacts(**REJECTED_REPLY, judge_problem="missing"), "missing_information"),
    (TurnFacts(**REJECTED_REPLY), "missing_information"),
    # an extra tool call where the reference made none is no tool failure
    (TurnFacts(accepted=False, rr=False, tia=False, reference_calls=0, calls_made=2, unrecorded_calls=2),
     "missing_information"),
    # all tool checks passed and RR false: the reply is what failed
    (TurnFacts(accepted=False, rr=False, tia=True, tsa=True, tev=True, reference_calls=1, calls_made=1,
               judge_problem="contradiction"), "contradiction"),
    # 8: accepted, but the next query cannot follow
    (TurnFacts(accepted=True, rr=True, tia=True, fluent=False), "not_followable"),
    # no failure: accepted and followable, or no fluency asked (last checkpoint)
    (TurnFacts(accepted=True, rr=True, tia=True, fluent=True), None),
    (TurnFacts(accepted=True, rr=True, tia=True, fluent=None), None),
])
def test_classify(facts, expected):
    assert classify(facts) == expected


def test_the_agent_text_is_labelled_only_when_it_can_matter():
    assert needs_agent_type(TurnFacts(**REJECTED_REPLY, reference_type="Inquire"))
    assert not needs_agent_type(TurnFacts(**REJECTED_REPLY, reference_type="Solution"))
    assert not needs_agent_type(TurnFacts(accepted=True, reference_type="Inquire"))
    assert not needs_agent_type(TurnFacts(accepted=False, tia=False, reference_calls=1, reference_type="Clarify"))


def test_the_agent_reply_type_uses_the_ingest_rules_for_the_language():
    assert agent_reply_type("Could you please provide the instance ID?") == "Inquire"
    assert agent_reply_type("Run `systemctl restart nginx` on i-bp***c, then reload port 443.") == "Solution"
    assert agent_reply_type("", ["DescribeInstanceStatus"]) == "Solution"  # tool calls only: acting
    assert agent_reply_type("请提供一下您的实例ID。", language="zh") == "Inquire"


# --------------------------------------------------------------------------
# the facts of a judged turn of the walk, and of a saved transcript turn
# --------------------------------------------------------------------------

TASK = {"task_id": "T", "language": "en", "checkpoints": [
    {"index": 1, "query": "Is i-bp***c running?", "reply": "It is stopped.", "reply_type": "Solution",
     "tool_calls": [{"name": "DescribeInstanceStatus", "arguments": {"instance_id": "i-bp***c"}}]},
    {"index": 2, "query": "My site is slow.", "reply": "Could you tell me the instance ID?", "reply_type": "Inquire",
     "tool_calls": []},
], "stats": {"input_tokens": 0, "turns": 4, "checkpoints": 2}}


def _judged(checkpoint, text, calls, decision, verdicts=(), fluent=None):
    turn = AgentTurn(text=text, tool_calls=list(calls))
    return JudgedTurn(checkpoint, TASK["checkpoints"][checkpoint - 1]["reply_type"], turn, decision,
                      fluent=fluent, verdicts=list(verdicts))


def test_failure_of_a_judged_turn():
    wrong_id = ToolCallMade("DescribeInstanceStatus", {"instance_id": "i-bp***x"}, recorded=False,
                            error="no recorded result")
    unrecorded = _judged(1, "It seems stopped.", [wrong_id],
                         CheckpointDecision(accepted=False, rr=True, tia=True, tsa=True, tev=False))
    assert failure_of(unrecorded, TASK) == "unrecorded_call"
    recorded = ToolCallMade("DescribeInstanceStatus", {"instance_id": "i-bp***y"}, recorded=True)
    assert failure_of(_judged(1, "Stopped.", [recorded], unrecorded.decision), TASK) == "wrong_arguments"
    rejected = CheckpointDecision(accepted=False, rr=False, tia=True, tsa=None, tev=None)
    solution = "Upgrade the instance type in the console under Instance > Change Type to 8 vCPU."
    assert failure_of(_judged(2, solution, [], rejected), TASK) == "premature_solution"
    asked = "Could you please provide the instance ID first?"
    said = [_verdict_record("coverage", 2, Verdict(False, "x", problem="contradiction"), False)]
    assert failure_of(_judged(2, asked, [], rejected, said), TASK) == "contradiction"
    assert failure_of(_judged(2, asked, [], rejected), TASK) == "missing_information"
    accepted = CheckpointDecision(accepted=True, rr=True, tia=True, tsa=None, tev=None)
    assert failure_of(_judged(2, asked, [], accepted, fluent=False), TASK) == "not_followable"
    assert failure_of(_judged(2, asked, [], accepted, fluent=True), TASK) is None


def test_the_verdict_record_carries_the_problem_only_when_stated():
    record = _verdict_record("coverage", 3, Verdict(False, "raw", problem="missing", missing="the ID request"), False)
    assert (record["problem"], record["missing"]) == ("missing", "the ID request")
    plain = _verdict_record("coverage", 3, Verdict(True, "raw"), True)
    assert "problem" not in plain and "missing" not in plain
    assert _verdict_record("coverage", 3, None, True)["raw"] is None


def test_transcript_facts_read_a_saved_turn():
    turn = {"checkpoint": 2, "query": "My site is slow.", "accepted": False, "fluent": None,
            "agent_text": "Could you please send the instance ID?", "reference_tool_calls": [],
            "tool_calls": [{"name": "Ping", "recorded": False}],
            "verdicts": [{"kind": "coverage", "checkpoint": 2, "ok": False, "raw": "...", "problem": "contradiction"}]}
    stats = {"rr": False, "tia": False, "tsa": None, "tev": None, "reply_type": "Inquire"}
    facts = transcript_facts(turn, stats)
    assert (facts.calls_made, facts.unrecorded_calls, facts.judge_problem, facts.agent_type) == (
        1, 1, "contradiction", "Inquire")
    assert classify(facts) == "contradiction"
    old = {**turn, "verdicts": [{"kind": "coverage", "checkpoint": 2, "ok": False, "raw": "..."}]}
    assert classify(transcript_facts(old, stats)) == "missing_information"  # a verdict from before the field


# --------------------------------------------------------------------------
# the judge's new field: prompt, schema, reader
# --------------------------------------------------------------------------


def test_the_prompt_and_strict_schema_ask_for_the_field_reason_first_verdict_last():
    schema = schemas.COVERAGE_RESPONSE_FORMAT["json_schema"]["schema"]
    assert list(schema["properties"]) == ["reason", "missing", "problem", "verdict"]
    assert schema["required"] == ["reason", "missing", "problem", "verdict"]
    assert schema["properties"]["problem"]["enum"] == ["none", "missing", "contradiction"]
    fluency = schemas.FLUENCY_RESPONSE_FORMAT["json_schema"]["schema"]
    assert fluency["required"] == ["reason", "answer"]  # unchanged
    for system in (prompts.COVERAGE_SYSTEM, prompts.COVERAGE_LATER_SYSTEM):
        assert '"missing":' in system and '"problem": "none" or "missing" or "contradiction"' in system
        assert system.index('{"reason"') < system.index('"missing": "<') < system.index('"verdict": "Included"')
    assert '"problem"' in prompts.COVERAGE_REPAIR


@pytest.mark.parametrize(("raw", "expected"), [
    # the JSON the prompt asks for
    ('{"reason": "r", "missing": "the instance ID request", "problem": "missing", "verdict": "Not Included"}',
     ("missing", "the instance ID request")),
    ('{"reason": "r", "missing": "port 22 (says 3389)", "problem": "contradiction", "verdict": "Not Included"}',
     ("contradiction", "port 22 (says 3389)")),
    ('{"reason": "r", "missing": "", "problem": "none", "verdict": "Included"}', (None, None)),
    # without the field: as before, nothing stated
    ('{"reason": "all the steps are there", "verdict": "Not Included"}', (None, None)),
    ("Not Included", (None, None)),
    # other phrasings of the field
    ('{"reason": "r", "problem": "Contradiction", "verdict": "Not Included"}', ("contradiction", None)),
    ('{"reason": "r", "problem": "contradicts the reference", "verdict": "Not Included"}', ("contradiction", None)),
    ('{"reason": "r", "problem": "missing info", "verdict": "Not Included"}', ("missing", None)),
    ('{"reason": "r", "problem": "missing_information", "verdict": "Not Included"}', ("missing", None)),
    ('{"reason": "r", "missing": ["the ID", "the screenshot"], "verdict": "Not Included"}',
     ("missing", "the ID; the screenshot")),
    ('{"reason": "r", "contradicted": "the restart time", "verdict": "Not Included"}',
     ("contradiction", "the restart time")),
    ('```json\n{"analysis": {"problem": "contradiction"}, "verdict": "Not Included"}\n```', ("contradiction", None)),
    # prose and reasons without the field
    ('{"reason": "The reply contradicts the reference: another port.", "verdict": "Not Included"}',
     ("contradiction", None)),
    ("The candidate gives the wrong port.\nVerdict: Not Included", ("contradiction", None)),
    ("It does not contradict anything, but it omits the request for the ID.\nVerdict: Not Included",
     ("missing", None)),
    ("The reply never asks for the instance ID.\n**Not Included**", ("missing", None)),
    # Chinese
    ('{"reason": "r", "problem": "矛盾", "verdict": "不包含"}', ("contradiction", None)),
    ('{"理由": "r", "问题": "缺少信息", "缺失": "实例ID", "结论": "不包含"}', ("missing", "实例ID")),
    ("候选回复与参考回复矛盾：端口不同。\n结论：不包含", ("contradiction", None)),
    ("两者并不矛盾，但候选回复缺少实例ID的请求。\n结论：不包含", ("missing", None)),
])
def test_read_problem(raw, expected):
    assert read_problem(raw) == expected


CORPUS = Path(__file__).parent / "data" / "verdict_phrasings.jsonl"
PROBLEM_ROWS = [row for row in map(json.loads, CORPUS.read_text(encoding="utf-8").splitlines())
                if "problem" in row]


def test_the_phrasings_corpus_holds_answers_with_the_failure_fields():
    assert len(PROBLEM_ROWS) >= 4
    for row in PROBLEM_ROWS:
        assert read_coverage(row["answer"]) is (row["expected"] == "Included"), row["note"]
        assert read_problem(row["answer"])[0] == row["problem"], row["note"]


def test_read_problem_ignores_echoed_data_and_the_verdict_reads_as_before():
    boundary = "b0123456789abcde"
    raw = (f'<candidate_reply id="{boundary}">It contradicts the docs; nothing is missing.'
           f'</candidate_reply id="{boundary}">\n{{"reason": "The ID request is absent.", "verdict": "Not Included"}}')
    assert read_problem(raw, boundary=boundary) == ("missing", None)  # "absent" in the judge's own reason
    echo = "Port 3389 is wrong here, we contradict the manual"
    assert read_problem(f"{echo}\nVerdict: Not Included", echoes=[echo]) == (None, None)
    answer = '{"reason": "r", "missing": "Included", "problem": "missing", "verdict": "Not Included"}'
    assert read_coverage(answer) is False  # the new fields never give the verdict
    assert read_coverage('{"reason": "r", "missing": "", "problem": "none", "verdict": "Included"}') is True


def test_verdict_equality_is_ok_and_raw():
    # problem and missing are read from raw: old comparisons of verdicts hold
    assert Verdict(False, "x", problem="missing", missing="y") == Verdict(False, "x")


# --------------------------------------------------------------------------
# the LLM judge, the panel, the offline judge
# --------------------------------------------------------------------------


def test_the_llm_judge_fills_the_problem_of_a_not_included_verdict(monkeypatch):
    from cirrus.judges.llm import LLMCoverageJudge
    from cirrus.llm.client import ChatClient, RoleConfig
    from cirrus.llm.providers import Endpoint
    from tests.chat_server import ChatServer

    monkeypatch.setenv("CIRRUS_FAILURE_TEST_KEY", "sk-failure-test-0123456789")
    answers = ['{"reason": "r", "missing": "port 22", "problem": "contradiction", "verdict": "Not Included"}',
               '{"reason": "the restart step is missing", "verdict": "Not Included"}',
               '{"reason": "no contradiction, all there", "missing": "", "problem": "none", "verdict": "Included"}']
    with ChatServer(answers) as server:
        async def ask():
            role = RoleConfig(Endpoint("judge-model", server.base_url, "CIRRUS_FAILURE_TEST_KEY"), temperature=0.0,
                              retry_initial_wait=0.01, max_retries=1)
            async with ChatClient(role) as client:
                judge = LLMCoverageJudge(client, cache=False)
                first = await judge.covers([], "q", "Open port 22.", "Open port 3389.")
                later = await judge.covers_later([], "q", "Open it.", "and then?", "Restart it.")
                third = await judge.covers([], "q", "Open port 22.", "Open port 22.")
                return first, later, third

        first, later, third = asyncio.run(ask())
    assert (first.ok, first.problem, first.missing) == (False, "contradiction", "port 22")
    assert (later.ok, later.problem, later.missing) == (False, "missing", None)  # from its reason
    assert (third.ok, third.problem, third.missing) == (True, None, None)
    assert server.requests[0]["response_format"] == schemas.COVERAGE_RESPONSE_FORMAT


class _Says:
    def __init__(self, name, ok, problem=None, missing=None):
        self.name, self.ok, self.problem, self.missing = name, ok, problem, missing

    async def covers(self, history, query, reference, candidate):
        return Verdict(self.ok, f"{self.name}", problem=self.problem, missing=self.missing)


def test_the_panel_names_the_majority_problem_of_its_not_included_members():
    c, m = "contradiction", "missing"
    # 2 of the 3 naming members say contradiction: 2 * 2 > 3
    assert majority_problem([Verdict(False, "", problem=c, missing="a"), Verdict(False, "", problem=m),
                             Verdict(False, "", problem=c, missing="b")]) == (c, "a")
    # a tie (1 : 1) is missing; the member that named nothing does not count
    assert majority_problem([Verdict(False, "", problem=c), Verdict(False, ""),
                             Verdict(False, "", problem=m, missing="the ID")]) == (m, "the ID")
    assert majority_problem([Verdict(True, "", problem=c), Verdict(False, "")]) == (None, None)
    panel = JudgePanel([_Says("a", False, c, "port 22"), _Says("b", True), _Says("c", False, c)])
    verdict = asyncio.run(panel.covers([], "q", "r", "x"))
    assert (verdict.ok, verdict.problem, verdict.missing) == (False, c, "port 22")
    accepted = asyncio.run(JudgePanel([_Says("a", True), _Says("b", True), _Says("c", False, c)]).covers(
        [], "q", "r", "x"))
    assert accepted.ok and accepted.problem is None


def test_the_local_judge_says_what_is_missing_or_contradicted():
    judge = LocalCoverageJudge()
    wrong = asyncio.run(judge.covers([], "q", "Please open port 22 in the security group.",
                                     "Please open port 3389 in the security group."))
    assert (wrong.ok, wrong.problem, wrong.missing) == (False, "contradiction", "port 22 (the reply says 3389)")
    assert wrong.raw.endswith("; contradicts: port 22 (the reply says 3389)")
    absent = asyncio.run(judge.covers([], "q", "Send the instance ID i-bp***c and run `df -h`.",
                                      "Thanks for waiting, we are looking into it."))
    # the key items in order of appearance: the acronym ID, the masked id, the command
    assert (absent.ok, absent.problem, absent.missing) == (False, "missing", "ID, i-bp***c, df -h")
    same = asyncio.run(judge.covers([], "q", "Open port 22.", "Open port 22."))
    assert same.ok and same.problem is None and "missing" not in same.raw
    assert find_problem("You do not need to restart the instance after resizing.",
                        "You need to restart the instance after resizing.")[0] == "contradiction"
    assert find_problem("请在安全组中放行22端口。", "请在安全组中放行3389端口。") == (
        "contradiction", "22 端口 (the reply says 3389)")


# --------------------------------------------------------------------------
# end to end: eval, rescore, old runs, report, show
# --------------------------------------------------------------------------


def _invoke(args):
    return CliRunner().invoke(app, args)


def test_failure_is_the_last_column_of_checkpoints_parquet():
    assert list(CHECKPOINT_FILE_SCHEMA)[-1] == "failure"
    from cirrus.report.schema import RUN_TABLES

    assert RUN_TABLES["checkpoints"][-1].name == "failure"


def test_every_failed_turn_of_an_eval_has_a_category_and_no_other_turn_has(sample_runs):
    for run_id in ("retrieval", "oracle"):
        turns = pl.read_parquet(sample_runs / "reports" / run_id / "checkpoints.parquet")
        rejected = turns.filter(~pl.col("accepted"))
        stopped = turns.filter(pl.col("accepted") & (pl.col("fluent") == False))  # noqa: E712
        fine = turns.filter(pl.col("accepted") & (pl.col("fluent").is_null() | pl.col("fluent")))
        assert rejected["failure"].null_count() == 0
        assert set(rejected["failure"]) <= set(FAILURE_NAMES) - {"not_followable"}
        assert set(stopped["failure"]) <= {"not_followable"} and stopped["failure"].null_count() == 0
        assert fine["failure"].null_count() == fine.height
    retrieval = pl.read_parquet(sample_runs / "reports/retrieval/checkpoints.parquet")
    assert retrieval.filter(~pl.col("accepted")).height > 0  # the baseline fails: the check above meant something
    # the retrieval baseline calls no tools: a rejected turn where the reference called one missed it
    tasks = {t["task_id"]: t for t in read_jsonl(sample_runs / "tickets" / "tasks.jsonl")}
    for row in retrieval.filter(~pl.col("accepted")).iter_rows(named=True):
        reference_calls = tasks[row["task_id"]]["checkpoints"][row["checkpoint"] - 1]["tool_calls"]
        assert row["tool_calls"] == 0
        assert (row["failure"] == "missed_tool_call") == bool(reference_calls), row


def test_saved_transcripts_classify_to_the_stored_failure(sample_runs):
    run = sample_runs / "reports" / "retrieval"
    rows = {(r["task_id"], r["attempt"]): r for r in read_jsonl(run / "attempts.jsonl")}
    compared = 0
    for transcript in read_jsonl(run / "transcripts.jsonl"):
        row = rows[(transcript["task_id"], transcript["attempt"])]
        for turn, stats in zip(transcript["turns"], row["turns"]):
            assert classify(transcript_facts(turn, stats, "en")) == stats["failure"]
            compared += 1
    assert compared == sum(len(r["turns"]) for r in rows.values()) > 0


def test_rescore_fills_the_failure_column(sample_runs_copy):
    result = _invoke(["rescore", "retrieval", "--judge-model", "local", "--run-id", "re", "-w", str(sample_runs_copy),
                      "-q"])
    assert result.exit_code == 0, result.output
    keys = ["task_id", "attempt", "checkpoint"]
    source = pl.read_parquet(sample_runs_copy / "reports/retrieval/checkpoints.parquet").sort(keys)
    rescored = pl.read_parquet(sample_runs_copy / "reports/re/checkpoints.parquet").sort(keys)
    # the same offline judge on the same saved turns: the same verdicts, so the same categories
    assert rescored.select(*keys, "failure").equals(source.select(*keys, "failure"))
    assert rescored["failure"].null_count() < rescored.height


def test_the_report_table_counts_the_failed_turns(sample_runs_copy):
    result = _invoke(["report", "retrieval", "oracle", "-w", str(sample_runs_copy), "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    assert "failed turns by category" in result.stdout and "missed_tool_call" in result.stdout
    table = pl.read_parquet(sample_runs_copy / "reports/_compare/retrieval+oracle/failures.parquet")
    assert table.columns == ["schema_version", "run_id", "model", "reply_type", "failure", "failure_order", "count",
                             "n_failed", "share"]
    for run_id in ("retrieval", "oracle"):
        turns = pl.read_parquet(sample_runs_copy / "reports" / run_id / "checkpoints.parquet")
        rejected = turns.filter(~pl.col("accepted")).height
        not_fluent = turns.filter(pl.col("accepted") & (pl.col("fluent") == False)).height  # noqa: E712
        overall = table.filter((pl.col("run_id") == run_id) & (pl.col("reply_type") == "all"))
        assert overall["failure"].to_list() == list(FAILURE_NAMES)  # every category, in order, zeros included
        assert overall["count"].sum() == rejected + not_fluent == overall["n_failed"][0]
        assert overall.filter(pl.col("failure") != "not_followable")["count"].sum() == rejected
        for failure in FAILURE_NAMES:  # each count is the number of turns with that failure
            expected = turns.filter(pl.col("failure") == failure).height
            assert overall.filter(pl.col("failure") == failure)["count"][0] == expected
        by_type = table.filter((pl.col("run_id") == run_id) & (pl.col("reply_type") != "all"))
        assert by_type["count"].sum() == overall["count"].sum()  # the reply types split the same turns
        if rejected + not_fluent:
            assert overall["share"].sum() == pytest.approx(1.0)
        else:
            assert overall["share"].null_count() == overall.height
    retrieval = table.filter((pl.col("run_id") == "retrieval") & (pl.col("reply_type") == "all"))
    assert retrieval["n_failed"][0] > 0


def test_old_runs_load_with_a_null_failure_and_count_as_unclassified(sample_runs_copy):
    from cirrus.report.loading import load_run
    from cirrus.report.tables import failure_breakdown

    path = sample_runs_copy / "reports/retrieval/checkpoints.parquet"
    turns = pl.read_parquet(path)
    rejected = turns.filter(~pl.col("accepted")).height
    turns.drop("failure").write_parquet(path)  # as Cirrus wrote it before the column
    run = load_run(sample_runs_copy, "retrieval")
    loaded = run.checkpoints.collect()
    assert loaded["failure"].dtype == pl.Utf8 and loaded["failure"].null_count() == loaded.height == turns.height
    table = failure_breakdown([run]).filter(pl.col("reply_type") == "all")
    assert table["failure"].to_list() == [*FAILURE_NAMES, "unclassified"]
    assert table.filter(pl.col("failure") == "unclassified")["count"][0] == rejected == table["count"].sum()


def test_show_names_the_failure_of_a_rejected_turn(sample_runs):
    rows = read_jsonl(sample_runs / "reports/retrieval/attempts.jsonl")
    row = next(r for r in rows if r["attempt"] == 0 and r["turns"] and r["turns"][-1]["failure"])
    failure = row["turns"][-1]["failure"]
    result = _invoke(["show", "retrieval", "-w", str(sample_runs), "-t", row["task_id"], "--attempt", "0",
                      "--width", "400"])
    assert result.exit_code == 0, result.output
    assert f"REJECTED ({failure})" in result.stdout
    assert f"rejected at checkpoint {row['turns'][-1]['checkpoint']} ({failure})" in result.stdout
    listing = _invoke(["show", "retrieval", "-w", str(sample_runs)])
    assert f"({failure})" in listing.stdout
    assert json.dumps(failure)  # a plain string category
