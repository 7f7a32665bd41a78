"""`cirrus report`: the tables on hand-made runs (exact numbers), on real
baseline runs of the sample workspace (agreement with summary.json, files,
schema, DuckDB), and the bootstrap's properties."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from cirrus.commands.report import report
from cirrus.evaluate.runner import summarize
from cirrus.evaluate.tasks import dataset_hash
from cirrus.evaluate.store import CHECKPOINT_SCHEMA, TASK_SCHEMA
from cirrus.metrics import AttemptRow, dataset_metrics
from cirrus.report import schema as report_schema
from cirrus.report import uncertainty
from cirrus.report.command import report_command
from cirrus.report.loading import Price, ReportError, load_prices, load_run, load_runs
from cirrus.report.tables import (
    DIMENSIONS,
    HEADLINE_METRICS,
    breakdown_by,
    leaderboard,
    summary_mismatches,
    task_stats,
)
from cirrus.report.uncertainty import bootstrap_mean, intervals, paired, paired_bootstrap, ratio_bootstrap
from cirrus.report.writing import default_out_dir
from tests.conftest import REPO, copy_workspace

approx = pytest.approx


# --------------------------------------------------------------------------
# Hand-made runs
# --------------------------------------------------------------------------


def _meta(task_id: str, category: str, tokens: int, checkpoints: list[tuple[str, int]]) -> dict:
    return {"task_id": task_id, "category": category, "knowledge": [], "tools": [], "history": [],
            "checkpoints": [{"index": i, "query": f"q{i}", "reply": f"r{i}", "reply_type": rtype,
                             "tool_calls": [{"name": "Describe", "arguments": {"id": str(i)}}] * calls}
                            for i, (rtype, calls) in enumerate(checkpoints, 1)],
            "cassette": None, "stats": {"input_tokens": tokens, "turns": 2 * len(checkpoints),
                                        "checkpoints": len(checkpoints)}}


TASKS = [
    _meta("T1", "A", 1_000, [("Solution", 1), ("Standard", 0)]),
    _meta("T2", "A", 9_000, [("Inquire", 0), ("Solution", 0), ("Standard", 0)]),
    _meta("T3", "B", 20_000, [("Solution", 1), ("Solution", 0), ("Solution", 0), ("Standard", 0), ("Appease", 0)]),
    _meta("T4", "B", 500, [("Clarify", 0)]),
]
CATEGORY = {t["task_id"]: t["category"] for t in TASKS}
K_OF = {t["task_id"]: len(t["checkpoints"]) for t in TASKS}


def ok(task: str, attempt: int, covered: int, accepted: int, stl: list[int], tokens=(0, 0), wall=0.0) -> dict:
    k = K_OF[task]
    lj = covered - accepted
    nei = lj / (covered - 1) if covered > 1 else (1.0 if covered == 1 else 0.0)
    return {"task_id": task, "attempt": attempt, "category": CATEGORY[task], "checkpoints": k, "covered": covered,
            "accepted_turns": accepted, "tpr": covered / k, "lj": lj, "nei": float(nei),
            "mtl": sum(stl) / len(stl) if stl else None, "success": covered == k, "status": "ok", "error": None,
            "input_tokens": tokens[0], "output_tokens": tokens[1], "wall_s": wall}


def error(task: str, attempt: int) -> dict:
    return {"task_id": task, "attempt": attempt, "category": CATEGORY[task], "checkpoints": K_OF[task],
            "covered": None, "accepted_turns": None, "tpr": None, "lj": None, "nei": None, "mtl": None,
            "success": None, "status": "error", "error": "APIError: boom", "input_tokens": None,
            "output_tokens": None, "wall_s": None}


def cp(task: str, attempt: int, k: int, rtype: str, accepted: bool, through: int | None, tia: bool,
       tsa: bool | None, tev: bool | None, rr: bool, stl: int, fluent: bool | None) -> dict:
    return {"task_id": task, "attempt": attempt, "checkpoint": k, "reply_type": rtype, "accepted": accepted,
            "covered_through": through, "tia": tia, "tsa": tsa, "tev": tev, "rr": rr, "stl": stl, "fluent": fluent,
            "tool_calls": 1 if tsa is not None and tia else 0, "wall_s": 0.1}


RUN_A_TASKS = [
    ok("T1", 0, 2, 1, [10], (100, 10), 1.0),
    ok("T1", 1, 0, 0, [], (100, 7), 2.0),
    ok("T2", 0, 1, 1, [20], (200, 25), 3.0),
    ok("T2", 1, 3, 2, [30, 40], (300, 70), 4.0),
    ok("T3", 0, 5, 5, [1, 2, 3, 4, 5], (500, 15), 5.0),
    error("T3", 1),
    error("T4", 0),
    error("T4", 1),
]
RUN_A_CHECKPOINTS = [
    cp("T1", 0, 1, "Solution", True, 2, True, True, True, True, 10, None),
    cp("T1", 1, 1, "Solution", False, None, False, False, False, True, 7, None),
    cp("T2", 0, 1, "Inquire", True, 1, True, None, None, True, 20, True),
    cp("T2", 0, 2, "Solution", False, None, True, None, None, False, 5, None),
    cp("T2", 1, 1, "Inquire", True, 2, True, None, None, True, 30, True),
    cp("T2", 1, 3, "Standard", True, 3, True, None, None, True, 40, None),
    cp("T3", 0, 1, "Solution", True, 1, True, True, True, True, 1, True),
    cp("T3", 0, 2, "Solution", True, 2, True, None, None, True, 2, True),
    cp("T3", 0, 3, "Solution", True, 3, True, None, None, True, 3, True),
    cp("T3", 0, 4, "Standard", True, 4, False, None, None, True, 4, True),
    cp("T3", 0, 5, "Appease", True, 5, True, None, None, True, 5, None),
]
RUN_B_TASKS = [
    ok("T1", 0, 2, 2, [5, 5], (50, 10), 1.0),
    ok("T2", 0, 0, 0, [], (60, 3), 1.0),
    ok("T3", 0, 5, 5, [1, 1, 1, 1, 1], (70, 5), 1.0),
    ok("T4", 0, 0, 0, [], (10, 1), 1.0),
]
RUN_B_CHECKPOINTS = [
    cp("T1", 0, 1, "Solution", True, 1, True, True, True, True, 5, True),
    cp("T1", 0, 2, "Standard", True, 2, True, None, None, True, 5, None),
    cp("T2", 0, 1, "Inquire", False, None, True, None, None, False, 3, None),
    *(cp("T3", 0, i, rt, True, i, True, True if i == 1 else None, True if i == 1 else None, True, 1,
         True if i < 5 else None)
      for i, rt in enumerate(["Solution", "Solution", "Solution", "Standard", "Appease"], 1)),
    cp("T4", 0, 1, "Clarify", False, None, True, None, None, False, 1, None),
]


def write_run(workspace: Path, run_id: str, model: str, k: int, tasks: list[dict], checkpoints: list[dict]) -> None:
    directory = workspace / "reports" / run_id
    directory.mkdir(parents=True)
    pl.DataFrame(tasks, schema=TASK_SCHEMA).write_parquet(directory / "tasks.parquet")
    pl.DataFrame(checkpoints, schema=CHECKPOINT_SCHEMA).write_parquet(directory / "checkpoints.parquet")
    summary = summarize(tasks, model, k, {"judge": "judge-x", "fluency": "fluency-x", "run_id": run_id})
    (directory / "summary.json").write_text(json.dumps(summary))
    fingerprint = {"agent": model, "dataset": dataset_hash(TASKS), "agent_role": {"model": model}}
    (directory / "run.json").write_text(json.dumps({"fingerprint": fingerprint, "run_id": run_id,
                                                    "tasks": len(TASKS)}))


@pytest.fixture
def hand_ws(tmp_path: Path) -> Path:
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    write_run(tmp_path, "a", "model-a", 2, RUN_A_TASKS, RUN_A_CHECKPOINTS)
    write_run(tmp_path, "b", "model-b", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    return tmp_path


def _rows(frame: pl.DataFrame, key: str = "segment") -> dict:
    return {row[key]: row for row in frame.iter_rows(named=True)}


def test_leaderboard_exact_numbers(hand_ws):
    runs = load_runs(hand_ws, ["a", "b"])
    board = leaderboard(runs, prices={"model-a": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}})
    a, b = board.iter_rows(named=True)
    assert (a["run_id"], a["model"], a["judge"], a["fluency_checker"], a["k"]) == ("a", "model-a", "judge-x",
                                                                                 "fluency-x", 2)
    assert (a["n_tasks"], a["n_attempts"], a["n_ok"], a["errors"], a["n_tasks_k"]) == (4, 8, 5, 3, 2)
    assert a["atpr"] == approx(2 / 3)
    assert a["sr_pass1"] == approx(0.6)
    assert a["alj"] == approx(0.5)
    assert a["anei"] == approx(0.625)
    assert a["amtl"] == approx(17.0)
    assert a["sr_pass_at_k"] == approx(1.0) and a["pass_hat_k"] == approx(0.0)
    assert a["n_turns"] == 11
    assert a["tia"] == approx(9 / 11) and a["rr"] == approx(10 / 11)
    assert a["tsa"] == approx(2 / 3) and a["tev"] == approx(2 / 3)
    assert a["fluent"] == approx(1.0)
    assert (a["total_input_tokens"], a["total_output_tokens"]) == (1200, 127)
    assert a["avg_input_tokens"] == approx(240) and a["avg_output_tokens"] == approx(25.4)
    assert a["avg_wall_s"] == approx(3.0) and a["total_wall_s"] == approx(15.0)
    assert a["dataset"] == dataset_hash(TASKS)
    assert (a["price_input_per_mtok"], a["price_output_per_mtok"], a["currency"]) == (2.0, 10.0, "USD")
    assert a["cost_total"] == approx(1200 / 1e6 * 2 + 127 / 1e6 * 10)
    assert a["cost_per_attempt"] == approx(a["cost_total"] / 5)
    # run b: K = 1, no price
    assert (b["k"], b["n_tasks"], b["n_ok"], b["errors"]) == (1, 4, 4, 0)
    assert b["sr_pass1"] == approx(0.5) and b["sr_pass_at_k"] == approx(0.5) and b["pass_hat_k"] == approx(0.5)
    assert b["cost_total"] is None and b["price_input_per_mtok"] is None and b["currency"] is None
    # the scores are dataset_metrics on the same rows, i.e. summary.json
    for run, row in zip(runs, board.iter_rows(named=True)):
        assert summary_mismatches(run, row) == []
    assert board["schema_version"].to_list() == [report_schema.SCHEMA_VERSION] * 2
    assert board.schema == report_schema.polars_schema("leaderboard")


def test_k_override_and_undefined_pass_at_k(hand_ws):
    board = leaderboard(load_runs(hand_ws, ["a", "b"]), k=2)
    a, b = board.iter_rows(named=True)
    assert a["k"] == b["k"] == 2
    assert b["sr_pass_at_k"] is None and b["pass_hat_k"] is None and b["n_tasks_k"] == 0  # one attempt per task
    with pytest.raises(ValueError):
        leaderboard(load_runs(hand_ws, ["a"]), k=0)


def test_breakdowns_exact_numbers(hand_ws):
    runs = load_runs(hand_ws, ["a"])
    category = _rows(breakdown_by(runs, "category"))
    assert list(category) == ["A", "B"]
    assert (category["A"]["n_tasks"], category["A"]["n_attempts"], category["A"]["n_ok"], category["A"]["errors"]) == (2, 4, 4, 0)
    assert category["A"]["atpr"] == approx(7 / 12) and category["A"]["sr_pass1"] == approx(0.5)
    assert category["A"]["alj"] == approx(2 / 3) and category["A"]["anei"] == approx(5 / 6)
    assert category["A"]["amtl"] == approx(65 / 3) and category["A"]["sr_pass_at_k"] == approx(1.0)
    assert (category["B"]["n_ok"], category["B"]["errors"], category["B"]["n_tasks_k"]) == (1, 3, 0)
    assert category["B"]["atpr"] == approx(1.0) and category["B"]["sr_pass_at_k"] is None
    assert category["B"]["tia"] == approx(4 / 5) and category["B"]["n_turns"] == 5

    checkpoints = breakdown_by(runs, "checkpoints")
    assert checkpoints["segment"].to_list() == ["1", "2", "3", "4", "5+"]
    assert checkpoints["segment_order"].to_list() == [0, 1, 2, 3, 4]
    rows = _rows(checkpoints)
    assert (rows["1"]["n_ok"], rows["1"]["errors"], rows["1"]["atpr"]) == (0, 2, None)
    assert (rows["4"]["n_tasks"], rows["4"]["n_attempts"], rows["4"]["atpr"], rows["4"]["n_turns"]) == (0, 0, None, 0)
    assert rows["2"]["atpr"] == approx(0.5) and rows["3"]["atpr"] == approx(2 / 3) and rows["5+"]["atpr"] == 1.0

    tokens = _rows(breakdown_by(runs, "input_tokens"))
    assert list(tokens) == ["0-8k", "8k-16k", "16k+"]
    assert (tokens["0-8k"]["n_tasks"], tokens["0-8k"]["n_ok"], tokens["0-8k"]["errors"]) == (2, 2, 2)
    assert tokens["0-8k"]["atpr"] == approx(0.5) and tokens["8k-16k"]["atpr"] == approx(2 / 3)
    assert tokens["16k+"]["sr_pass1"] == 1.0

    tools = _rows(breakdown_by(runs, "tools"))
    assert list(tools) == ["with_tool_calls", "without_tool_calls"]
    assert tools["with_tool_calls"]["atpr"] == approx(2 / 3) and tools["with_tool_calls"]["sr_pass1"] == approx(2 / 3)
    assert tools["without_tool_calls"]["atpr"] == approx(2 / 3) and tools["without_tool_calls"]["errors"] == 2
    assert tools["without_tool_calls"]["tsa"] is None  # no tool checkpoint there

    # every attempt is in exactly one group of a task-level dimension
    for dimension in ("category", "checkpoints", "input_tokens", "tools"):
        frame = breakdown_by(runs, dimension)
        assert frame["n_attempts"].sum() == 8 and frame["errors"].sum() == 3
        assert frame.schema == report_schema.polars_schema("breakdown")


def test_reply_type_breakdown_exact_numbers(hand_ws):
    frame = breakdown_by(load_runs(hand_ws, ["a"]), "reply_type")
    assert frame["segment"].to_list() == ["Solution", "Standard", "Inquire", "Clarify", "Appease"]
    assert frame.schema == report_schema.polars_schema("breakdown_reply_type")
    rows = _rows(frame)
    sol = rows["Solution"]
    assert (sol["n_tasks"], sol["n_ok"], sol["errors"]) == (3, 5, 1)
    assert (sol["n_reference"], sol["n_reached"], sol["n_covered"], sol["n_judged"], sol["n_accepted"]) == (7, 7, 5, 6, 4)
    assert sol["acceptance_rate"] == approx(4 / 6) and sol["coverage_rate"] == approx(5 / 7)
    assert sol["reach_rate"] == approx(1.0) and sol["tia"] == approx(5 / 6) and sol["avg_stl"] == approx(4.0)
    std = rows["Standard"]
    assert (std["n_reference"], std["n_reached"], std["n_covered"], std["n_judged"], std["n_accepted"]) == (5, 3, 3, 2, 2)
    assert std["coverage_rate"] == approx(0.6) and std["reach_rate"] == approx(0.6) and std["acceptance_rate"] == 1.0
    inq = rows["Inquire"]
    assert (inq["n_tasks"], inq["n_reference"], inq["n_covered"], inq["n_judged"], inq["n_accepted"]) == (1, 2, 2, 2, 2)
    cla = rows["Clarify"]
    assert (cla["n_tasks"], cla["n_ok"], cla["errors"], cla["n_reference"], cla["acceptance_rate"]) == (1, 0, 2, 0, None)
    app = rows["Appease"]
    assert (app["n_reference"], app["n_judged"], app["coverage_rate"]) == (1, 1, 1.0)


def test_prices_from_cirrus_toml(hand_ws):
    (hand_ws / "cirrus.toml").write_text('[prices."model-b"]\ninput_per_mtok = 1\noutput_per_mtok = 4\ncurrency = "EUR"\n')
    assert load_prices(hand_ws) == {"model-b": Price(1.0, 4.0, "EUR")}
    result = report_command(["a", "b"], hand_ws, None, 50, 0)
    b = result["leaderboard"].row(1, named=True)
    assert b["cost_total"] == approx((50 + 60 + 70 + 10) / 1e6 + (10 + 3 + 5 + 1) / 1e6 * 4)
    assert b["currency"] == "EUR"
    assert any("no price for model 'model-a' (agent of run 'a')" in w for w in result["warnings"])
    (hand_ws / "cirrus.toml").write_text('[prices."model-b"]\ninput_per_mtok = -1\noutput_per_mtok = 4\n')
    with pytest.raises(ReportError, match="input_per_mtok"):
        load_prices(hand_ws)
    (hand_ws / "cirrus.toml").write_text('[prices."model-b"]\ninput = 1\n')
    with pytest.raises(ReportError, match="unknown key"):
        load_prices(hand_ws)
    with pytest.raises(ReportError, match="does not exist"):
        load_prices(hand_ws, hand_ws / "nope.toml")


def test_task_stats_reproduce_the_tables(hand_ws):
    runs = load_runs(hand_ws, ["a", "b"])
    board = _rows(leaderboard(runs), "run_id")
    stats = task_stats(runs, "overall")
    assert set(stats.filter(pl.col("run_id") == "a")["task_id"]) == {"T1", "T2", "T3"}  # T4: errors only
    for run_id, part in stats.partition_by("run_id", as_dict=True).items():
        for metric in HEADLINE_METRICS:
            n = part[f"{metric}__n"].sum()
            value = part[f"{metric}__sum"].sum() / n if n else None
            assert value == approx(board[run_id[0]][metric]), metric
    category = _rows(breakdown_by(runs[:1], "category"))
    by_category = task_stats(runs[:1], "category")
    for group, part in by_category.partition_by("segment", as_dict=True).items():
        assert part["atpr__sum"].sum() / part["atpr__n"].sum() == approx(category[group[0]]["atpr"])


def test_bootstrap_replicates_equal_dataset_metrics_on_resampled_tasks(hand_ws):
    """A replicate's ratio w @ S / w @ N is dataset_metrics of the dataset in
    which each task appears as often as it was drawn."""
    run = load_run(hand_ws, "a")
    stats = task_stats([run], "overall", 2).sort("task_id")
    metrics = ("atpr", "sr_pass1", "alj", "anei", "amtl", "sr_pass_at_k", "pass_hat_k")
    sums, counts = uncertainty._arrays(stats, metrics)
    tasks = run.tasks.filter(pl.col("status") == "ok").collect()
    fields = ("task_id", "attempt", "status", "covered", "checkpoints", "accepted_turns", "tpr", "lj", "nei", "mtl",
              "success")
    weights = next(uncertainty.resample_counts(len(stats), 40, seed=7))
    replicates = uncertainty._replicates(sums, counts, 40, 7)
    names = {"sr_pass1": "sr_pass1", "sr_pass_at_k": "pass_at_k", "pass_hat_k": "pass_hat_k"}
    for b, w in enumerate(weights):
        rows = []
        for task_id, times in zip(stats["task_id"], w):
            for copy in range(int(times)):
                for row in tasks.filter(pl.col("task_id") == task_id).select(fields).iter_rows(named=True):
                    rows.append(AttemptRow(**{**row, "task_id": f"{task_id}#{copy}"}))
        expected = dataset_metrics(rows, 2)
        for i, metric in enumerate(metrics):
            want = getattr(expected, names.get(metric, metric))
            got = replicates[b, i]
            assert (want is None and math.isnan(got)) or got == approx(want), (b, metric)


def test_paired_and_intervals_on_hand_runs(hand_ws):
    runs = load_runs(hand_ws, ["a", "b"])
    table = _rows(paired(runs, n_boot=200, seed=1), "metric")
    sr = table["sr_pass1"]
    assert (sr["run_a"], sr["run_b"], sr["k"], sr["n_tasks"]) == ("a", "b", 1, 3)  # T4 has no ok attempt in a
    assert sr["estimate_a"] == approx(0.6) and sr["estimate_b"] == approx(2 / 3)
    assert sr["diff"] == approx(2 / 3 - 0.6)
    assert sr["ci_low"] <= sr["diff"] <= sr["ci_high"] and 0 < sr["p_value"] <= 1
    table = intervals(runs, n_boot=100, seed=3)
    assert table.schema == report_schema.polars_schema("intervals")
    overall = table.filter(pl.col("dimension") == "overall")
    board = _rows(leaderboard(runs), "run_id")
    for row in overall.iter_rows(named=True):
        want = board[row["run_id"]][row["metric"]]
        assert (want is None and row["estimate"] is None) or row["estimate"] == approx(want)
        if row["estimate"] is not None:
            assert row["ci_low"] <= row["estimate"] + 1e-12 and row["estimate"] - 1e-12 <= row["ci_high"]
    # groups: only those with an ok attempt; reply-type metrics; k only for task-level dimensions
    assert set(table.filter((pl.col("run_id") == "a") & (pl.col("dimension") == "checkpoints"))["segment"]) == {"2", "3", "5+"}
    reply = table.filter(pl.col("dimension") == "reply_type")
    assert set(reply["metric"]) == {"acceptance_rate", "coverage_rate", "reach_rate"} and reply["k"].null_count() == len(reply)
    assert intervals(runs, n_boot=100, seed=3).equals(table)  # the same seed gives the same intervals


def test_report_command_writes_files_and_cleans_up(hand_ws):
    result = report_command(["a", "b"], hand_ws, None, 100, 0, prices={})
    out = hand_ws / "reports/_compare/a+b"
    assert result["out_dir"] == out == default_out_dir(hand_ws, ["a", "b"])
    expected = set(report_schema.FILES) | {"report.json", "report.html", "stats.json"}
    assert set(result["files"]) == expected and {p.name for p in out.iterdir()} == expected
    for name, table in report_schema.FILES.items():
        frame = pl.read_parquet(out / name)
        assert frame.schema == report_schema.polars_schema(table), name
        assert set(frame["schema_version"]) == {report_schema.SCHEMA_VERSION}
    manifest = json.loads((out / "report.json").read_text())
    assert manifest["schema_version"] == report_schema.SCHEMA_VERSION and manifest["bootstrap"] == 100
    # no bootstrap: the uncertainty files of the earlier report go
    result = report_command(["a", "b"], hand_ws, None, 0, 0)
    assert not (out / "intervals.parquet").exists() and not (out / "paired.parquet").exists()
    assert result["intervals"] is None and result["paired"] is None
    # one run: its own folder, no paired table
    result = report_command(["a"], hand_ws, None, 20, 0)
    assert result["out_dir"] == hand_ws / "reports/a/report" and "paired.parquet" not in result["files"]
    # an explicit folder
    assert report_command(["b"], hand_ws, hand_ws / "elsewhere", 10, 0)["out_dir"] == hand_ws / "elsewhere"
    long = default_out_dir(hand_ws, [f"run-{i:03d}-{'x' * 40}" for i in range(5)])
    assert len(long.name) < 130 and long.name.startswith("run-000-") and "4-more-" in long.name


def test_errors_name_the_problem(hand_ws):
    with pytest.raises(ReportError, match=r"no run 'zzz'.*runs there: a, b"):
        load_runs(hand_ws, ["a", "zzz"])
    with pytest.raises(ReportError, match="given twice"):
        load_runs(hand_ws, ["a", "a"])
    with pytest.raises(ReportError, match="letters, digits"):
        load_runs(hand_ws, ["../a"])
    (hand_ws / "reports/a/tasks.parquet").rename(hand_ws / "reports/a/tasks.bak")
    with pytest.raises(ReportError, match=r"run 'a' has no tasks.parquet.*not finished"):
        load_run(hand_ws, "a")
    (hand_ws / "reports/a/tasks.bak").rename(hand_ws / "reports/a/tasks.parquet")
    pl.read_parquet(hand_ws / "reports/b/checkpoints.parquet").drop("tia").write_parquet(
        hand_ws / "reports/b/checkpoints.parquet")
    with pytest.raises(ReportError, match=r"checkpoints.parquet: missing columns tia"):
        load_run(hand_ws, "b")
    (hand_ws / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS[:2]))
    with pytest.raises(ReportError, match=r"2 task\(s\) that .*tasks.jsonl does not have \(T3, T4\)"):
        load_run(hand_ws, "a")
    (hand_ws / "tickets/tasks.jsonl").unlink()
    with pytest.raises(ReportError, match="tasks.jsonl does not exist"):
        load_run(hand_ws, "a")


def test_changed_task_file_warns(hand_ws):
    changed = [{**TASKS[0], "category": "Z"}, *TASKS[1:]]
    (hand_ws / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in changed))
    run = load_run(hand_ws, "a")
    assert any("changed since run 'a'" in w for w in run.warnings)
    first = run.tasks.filter(pl.col("task_id") == "T1").collect()
    assert first["category"].to_list() == ["A"] * first.height and first.height > 0  # the run's own category wins


def test_cli_wrapper(hand_ws):
    app = typer.Typer()
    app.command("report")(report)
    app.command("other")(lambda: None)  # a multi-command app, as cirrus's
    runner = CliRunner()
    # wide enough for every leaderboard column (an 80-column worker would squeeze their text)
    result = runner.invoke(app, ["report", "a", "b", "-w", str(hand_ws), "--bootstrap", "50"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    # every table of the report schema (noise.parquet among them), report.html, report.json, stats.json
    wrote = f"wrote {len(report_schema.FILES) + 3} files"
    assert "model-a" in result.output and "sr_pass1" in result.output and wrote in result.output
    result = runner.invoke(app, ["report", "nope", "-w", str(hand_ws)])
    assert result.exit_code == 2 and "no run 'nope'" in result.output
    result = runner.invoke(app, ["report", "a", "-w", str(hand_ws), "--k", "0"])
    assert result.exit_code == 2


# --------------------------------------------------------------------------
# The sample workspace: real runs
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory, sample_runs) -> Path:
    workspace = copy_workspace(sample_runs, tmp_path_factory.mktemp("report-sample") / "ws")
    shutil.copytree(workspace / "reports/oracle", workspace / "reports/oracle2")  # an identical run
    return workspace


def test_sample_leaderboard_agrees_with_summary(sample):
    runs = load_runs(sample, ["oracle", "retrieval"])
    board = leaderboard(runs)
    for run, row in zip(runs, board.iter_rows(named=True)):
        summary = json.loads((sample / "reports" / run.run_id / "summary.json").read_text())
        assert summary_mismatches(run, row) == []
        assert row["n_tasks"] == summary["n_tasks"] == 31 and row["errors"] == summary["errors"]
        assert row["atpr"] == summary["atpr"] and row["sr_pass1"] == summary["sr"]["pass@1"]
        assert row["sr_pass_at_k"] == summary["sr"]["pass@2"] and row["pass_hat_k"] == summary["pass^2"]
        assert row["amtl"] == summary["amtl"] and row["alj"] == summary["alj"] and row["anei"] == summary["anei"]
    for dimension in DIMENSIONS:
        frame = breakdown_by(runs, dimension)
        assert not frame.is_empty()
        if dimension != "reply_type":
            assert frame.group_by("run_id").agg(pl.col("n_attempts").sum())["n_attempts"].to_list() == [62, 62]
    reply = _rows(breakdown_by(runs[:1], "reply_type"))
    assert reply["Solution"]["coverage_rate"] == 1.0 and reply["Solution"]["n_reference"] > 0


def test_sample_report_bootstrap_and_duckdb(sample):
    duckdb = pytest.importorskip("duckdb")
    result = report_command(["oracle", "retrieval", "oracle2"], sample, None, 500, 0, prices={})
    out = result["out_dir"]
    assert out == sample / "reports/_compare/oracle+retrieval+oracle2"
    pairs = {(r["run_a"], r["run_b"], r["metric"]): r for r in result["paired"].iter_rows(named=True)}
    gap = pairs[("oracle", "retrieval", "sr_pass1")]
    assert gap["diff"] == -1.0 and gap["p_value"] < 0.05 and gap["n_tasks"] == 31
    same = pairs[("oracle", "oracle2", "atpr")]
    assert same["diff"] == 0.0 and same["p_value"] == approx(1.0) and same["ci_low"] == same["ci_high"] == 0.0
    # oracle is perfect: a constant metric has a zero-width interval
    ci = result["intervals"].filter((pl.col("run_id") == "oracle") & (pl.col("dimension") == "overall")
                                    & (pl.col("metric") == "sr_pass1")).row(0, named=True)
    assert ci["estimate"] == ci["ci_low"] == ci["ci_high"] == 1.0 and ci["n_tasks"] == 31

    con = duckdb.connect()

    def query(sql: str) -> list[tuple]:
        return con.execute(sql).fetchall()  # DB-API: the same in DuckDB 1.x and 2.x

    for name, table in report_schema.FILES.items():
        path = str(out / name)
        cursor = con.execute(f"SELECT * FROM read_parquet('{path}')")
        frame = pl.read_parquet(path)
        assert [d[0] for d in cursor.description] == frame.columns
        assert cursor.fetchall() == frame.rows(), name
        types = {r[0]: r[1] for r in query(f"DESCRIBE SELECT * FROM read_parquet('{path}')")}
        assert types == {c.name: report_schema._DUCKDB_TYPES[type(c.dtype)] for c in report_schema.TABLES[table]}
        metadata = dict(query(f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{path}')"))
        assert metadata["cirrus.report.schema_version"] == str(report_schema.SCHEMA_VERSION)
    # DuckDB SQL straight from the run files gives the polars numbers
    leaderboard_path, tasks_path = out / "leaderboard.parquet", sample / "reports/retrieval/tasks.parquet"
    checkpoints_path = sample / "reports/retrieval/checkpoints.parquet"
    [(atpr, sr, tokens)] = query(f"SELECT avg(tpr), avg(success::INT), avg(output_tokens) "
                                 f"FROM read_parquet('{tasks_path}') WHERE status = 'ok'")
    [(tia, n_turns)] = query(f"SELECT avg(tia::INT), count(*) FROM read_parquet('{checkpoints_path}')")
    [row] = query(f"SELECT atpr, sr_pass1, avg_output_tokens, tia, n_turns FROM read_parquet('{leaderboard_path}') "
                  "WHERE run_id = 'retrieval'")
    assert row == approx((atpr, sr, tokens, tia, n_turns))
    by_category = dict(query(f"SELECT category, avg(output_tokens) FROM read_parquet('{tasks_path}') "
                             "WHERE status = 'ok' GROUP BY category"))
    from_file = dict(query(f"SELECT segment, avg_output_tokens FROM read_parquet('{out / 'breakdown_category.parquet'}') "
                           "WHERE run_id = 'retrieval'"))
    assert from_file == approx(by_category)
    # and the leaderboard's cross-run view in SQL equals the polars one
    ranked = query(f"SELECT run_id, atpr FROM read_parquet('{leaderboard_path}') ORDER BY atpr DESC, run_id")
    expected = result["leaderboard"].sort(["atpr", "run_id"], descending=[True, False]).select("run_id", "atpr").rows()
    assert ranked == expected


def test_schema_doc_is_up_to_date():
    doc = (REPO / "docs/report-schema.md").read_text(encoding="utf-8")
    assert report_schema.render_doc(doc) == doc, "run: python -m cirrus.report.schema docs/report-schema.md"
    for table, columns in report_schema.TABLES.items():
        assert columns[0].name == "schema_version", table
        assert len({c.name for c in columns}) == len(columns), table


# --------------------------------------------------------------------------
# Bootstrap properties
# --------------------------------------------------------------------------


def test_constant_metric_gives_zero_width_interval():
    for value in (0.0, 1.0, 0.37):
        result = bootstrap_mean(np.full(50, value), n_boot=300, seed=0)
        assert result.estimate[0] == approx(value)
        assert result.high[0] - result.low[0] <= 1e-12 and result.se[0] <= 1e-12
    # a ratio metric whose per-attempt value is constant, whatever the attempts per task
    counts = np.array([1, 2, 3, 4, 5], dtype=float)
    result = ratio_bootstrap(0.5 * counts, counts, n_boot=300)
    assert result.low[0] == result.high[0] == 0.5


def test_interval_width_matches_the_normal_approximation():
    rng = np.random.default_rng(42)
    values = rng.integers(0, 2, size=400).astype(float)
    result = bootstrap_mean(values, n_boot=4000, seed=1)
    p = values.mean()
    half = 1.96 * math.sqrt(p * (1 - p) / len(values))
    assert result.low[0] == approx(p - half, abs=0.01) and result.high[0] == approx(p + half, abs=0.01)
    assert result.se[0] == approx(math.sqrt(p * (1 - p) / len(values)), rel=0.1)


def test_seed_and_chunking_reproducibility(monkeypatch):
    values = np.random.default_rng(0).random((37, 3))
    first = bootstrap_mean(values, n_boot=500, seed=5)
    again = bootstrap_mean(values, n_boot=500, seed=5)
    other = bootstrap_mean(values, n_boot=500, seed=6)
    assert np.array_equal(first.low, again.low) and not np.array_equal(first.low, other.low)
    monkeypatch.setattr(uncertainty, "_CELLS_PER_CHUNK", 37 * 7)  # chunks of 7 replicates
    chunked = bootstrap_mean(values, n_boot=500, seed=5)
    # the same replicates, summed in blocks of another shape: numpy may order
    # the additions differently (2.4 differs by ~1e-17), so equal to rounding
    assert np.allclose(first.low, chunked.low, rtol=1e-12, atol=0)
    assert np.allclose(first.high, chunked.high, rtol=1e-12, atol=0)
    assert not np.allclose(first.low, other.low, rtol=1e-12, atol=0)


def test_clear_gap_has_small_p_value_and_identical_runs_p_one():
    rng = np.random.default_rng(3)
    a = (rng.random(100) < 0.3).astype(float)
    b = (rng.random(100) < 0.8).astype(float)
    ones = np.ones(100)
    gap = paired_bootstrap(a, ones, b, ones, n_boot=2000, seed=0)
    assert gap.diff[0] == approx(b.mean() - a.mean()) and gap.p_value[0] < 0.05 and gap.low[0] > 0
    same = paired_bootstrap(a, ones, a, ones, n_boot=2000, seed=0)
    assert same.diff[0] == 0 and same.p_value[0] == 1.0 and same.low[0] == same.high[0] == 0
    # a small, noisy difference is not significant
    noisy = a.copy()
    noisy[np.flatnonzero(a == 0)[:2]] = 1.0
    weak = paired_bootstrap(a, ones, noisy, ones, n_boot=2000, seed=0)
    assert weak.p_value[0] > 0.05


def test_bootstrap_edge_cases():
    empty = ratio_bootstrap(np.zeros((0, 2)), np.zeros((0, 2)))
    assert np.isnan(empty.estimate).all() and (empty.n_valid == 0).all()
    # a metric defined in only some replicates: n_valid counts them; never defined: NaN
    sums = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    counts = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    result = ratio_bootstrap(sums, counts, n_boot=400, seed=0)
    assert result.estimate[0] == 1.0 and 0 < result.n_valid[0] < 400 and np.isnan(result.estimate[1])
    with pytest.raises(ValueError):
        ratio_bootstrap([1.0, np.nan], [1.0, 1.0])
    with pytest.raises(ValueError):
        ratio_bootstrap([1.0], [1.0], n_boot=0)
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0], [1.0, 2.0], [1.0, 1.0])


def test_bootstrap_is_fast():
    import time

    values = np.random.default_rng(0).random((5000, 11))
    started = time.perf_counter()
    bootstrap_mean(values, n_boot=2000, seed=0)
    assert time.perf_counter() - started < 5.0


def test_command_defaults_match_the_library():
    from cirrus.report import command

    assert (command.DEFAULT_N_BOOT, command.DEFAULT_SEED, command.DEFAULT_CONFIDENCE) == (
        uncertainty.DEFAULT_N_BOOT, uncertainty.DEFAULT_SEED, uncertainty.DEFAULT_CONFIDENCE)


def test_a_run_without_rows_gives_empty_but_well_typed_tables(hand_ws):
    write_run(hand_ws, "empty", "model-e", 1, [], [])
    result = report_command(["empty"], hand_ws, None, 50, 0, prices={})
    board = result["leaderboard"].row(0, named=True)
    assert (board["n_tasks"], board["n_attempts"], board["atpr"], board["n_turns"]) == (0, 0, None, 0)
    for name, table in report_schema.FILES.items():
        if name in result["files"]:
            assert pl.read_parquet(result["files"][name]).schema == report_schema.polars_schema(table), name
    assert result["intervals"].is_empty()
    assert pl.read_parquet(result["files"]["breakdown_checkpoints.parquet"])["n_tasks"].to_list() == [0] * 5
