"""Cost next to quality in `cirrus report`: the leaderboard's cost columns
from hand-made ``summary.json`` files (every number computed by hand below),
re-pricing from ``usage``, the page's Cost section and chart, and the
"Subtasks (single-turn)" section of a report with a subtask run."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.report import command as command_module
from cirrus.report.command import report_command
from cirrus.report.loading import load_prices, load_runs, run_models
from cirrus.report.tables import leaderboard, run_cost
from tests.test_report_sections import parse
from tests.test_report_tables import (
    RUN_A_CHECKPOINTS,
    RUN_A_TASKS,
    RUN_B_CHECKPOINTS,
    RUN_B_TASKS,
    TASKS,
    write_run,
)

approx = pytest.approx


def _usage(calls: int, entered: int, output: int, cached: int = 0) -> dict:
    return {"calls": calls, "input_tokens": entered, "cached_input_tokens": cached, "output_tokens": output,
            "reasoning_tokens": 0, "cirrus_cache_hits": 0, "batch_calls": 0, "batch_input_tokens": 0,
            "batch_cached_input_tokens": 0, "batch_output_tokens": 0}


def _patch(workspace: Path, run_id: str, summary: dict | None = None, fingerprint: dict | None = None) -> None:
    """Add fields to a hand-made run's summary.json / run.json fingerprint."""
    directory = workspace / "reports" / run_id
    if summary:
        data = json.loads((directory / "summary.json").read_text())
        (directory / "summary.json").write_text(json.dumps({**data, **summary}))
    if fingerprint:
        data = json.loads((directory / "run.json").read_text())
        data["fingerprint"].update(fingerprint)
        (directory / "run.json").write_text(json.dumps(data))


# run a: every role priced by the run itself
A_SUMMARY = {
    "usage": {"agent": _usage(10, 10_000, 2_000, cached=4_000), "judge": _usage(6, 3_000, 300),
              "fluency": _usage(3, 1_000, 30)},
    "cost": {"agent": 0.05, "judge": 0.01, "fluency": 0.002, "total": 0.062, "currency": "USD"},
    "prompt_cache_share": {"agent": 0.4, "judge": 0.0, "fluency": 0.0},
}
# run c: the judge's model had no price when the run was made; no fluency call
C_SUMMARY = {
    "usage": {"agent": _usage(4, 20_000, 1_000), "judge": _usage(5, 3_000, 300, cached=1_000)},
    "cost": {"agent": 0.05, "judge": None, "total": 0.05, "currency": "USD"},
    "prompt_cache_share": {"agent": 0.0, "judge": 0.3333},
}
B_PRICE = {"model-b": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}
JUDGE_PRICE = {"judge-m": {"input_per_mtok": 2.0, "output_per_mtok": 10.0, "cached_input_per_mtok": 0.5}}
# judge-m on run c's judge usage: (3000 - 1000) / 1e6 * 2 + 1000 / 1e6 * 0.5 + 300 / 1e6 * 10
#   = 0.004 + 0.0005 + 0.003 = 0.0075
C_JUDGE = 0.0075


@pytest.fixture
def cost_ws(tmp_path: Path) -> Path:
    """Runs a (usage and cost of every role), b (written before usage: no
    usage, no cost) and c (an unpriced judge)."""
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    write_run(tmp_path, "a", "model-a", 2, RUN_A_TASKS, RUN_A_CHECKPOINTS)
    write_run(tmp_path, "b", "model-b", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    write_run(tmp_path, "c", "model-c", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    _patch(tmp_path, "a", A_SUMMARY, {"judge_role": {"model": "judge-a"}, "fluency_role": {"model": "judge-a"}})
    _patch(tmp_path, "c", C_SUMMARY, {"judge_role": {"model": "judge-m"}, "fluency_role": {"model": "judge-m"}})
    return tmp_path


def _rows(board: pl.DataFrame) -> dict[str, dict]:
    return {row["run_id"]: row for row in board.iter_rows(named=True)}


def test_leaderboard_cost_columns_by_hand(cost_ws: Path):
    board = leaderboard(load_runs(cost_ws, ["a", "b", "c"]), prices=B_PRICE)
    # the new columns come last: readers by position keep the old ones where they were
    assert board.columns[-7:] == ["cost_total", "cost_per_attempt", "cost_agent", "cost_judge", "cost_fluency",
                                  "cost_per_success", "agent_label"]  # the agent's label came after them
    rows = _rows(board)
    a = rows["a"]
    assert (a["cost_agent"], a["cost_judge"], a["cost_fluency"]) == approx((0.05, 0.01, 0.002))
    assert a["cost_total"] == approx(0.062)  # 0.05 + 0.01 + 0.002
    assert a["currency"] == "USD"
    # run a: 5 ok attempts, 3 successes (T1/0 2 of 2, T2/1 3 of 3, T3/0 5 of 5)
    assert a["cost_per_attempt"] == approx(0.062 / 5)
    assert a["cost_per_success"] == approx(0.062 / 3)
    assert a["price_input_per_mtok"] is None  # the report's prices know nothing of model-a

    # run b, written before usage: the agent's tokens of its ok attempts at model-b's price
    # input 50 + 60 + 70 + 10 = 190, output 10 + 3 + 5 + 1 = 19: 190 / 1e6 * 1 + 19 / 1e6 * 4 = 0.000266
    b = rows["b"]
    assert b["cost_agent"] == approx(0.000266) and b["cost_total"] == approx(0.000266)
    assert b["cost_judge"] is None and b["cost_fluency"] is None
    assert b["cost_per_success"] == approx(0.000266 / 2)  # T1 and T3 succeeded
    assert b["cost_per_attempt"] == approx(0.000266 / 4)
    assert (b["price_input_per_mtok"], b["currency"]) == (1.0, "USD")

    # run c: the judge is unpriced, so the run's total is unknown; no fluency call costs 0
    c = rows["c"]
    assert c["cost_agent"] == approx(0.05) and c["cost_judge"] is None and c["cost_fluency"] == 0.0
    assert c["cost_total"] is None and c["cost_per_success"] is None and c["cost_per_attempt"] is None
    assert c["currency"] == "USD"


def test_an_unpriced_role_is_priced_again_from_usage(cost_ws: Path):
    runs = load_runs(cost_ws, ["c"])
    c = _rows(leaderboard(runs, prices=JUDGE_PRICE))["c"]
    assert c["cost_judge"] == approx(C_JUDGE)
    assert c["cost_total"] == approx(0.05 + C_JUDGE)  # 0.0575
    assert c["cost_per_success"] == approx((0.05 + C_JUDGE) / 2)
    # a role the run recorded keeps its recorded cost, whatever the report's prices say
    a = _rows(leaderboard(load_runs(cost_ws, ["a"]), prices={"judge-a": {"input_per_mtok": 100.0,
                                                                          "output_per_mtok": 100.0}}))["a"]
    assert a["cost_judge"] == approx(0.01)
    # prices in another currency than the run's cost are not mixed in
    euro = {"judge-m": {**JUDGE_PRICE["judge-m"], "currency": "EUR"}}
    c = _rows(leaderboard(runs, prices=euro))["c"]
    assert c["cost_judge"] is None and c["cost_total"] is None and c["currency"] == "USD"


def test_report_config_reprices_and_warns(cost_ws: Path, monkeypatch):
    # no price table anywhere (cost_ws has no cirrus.toml): the command's own result, kept as `cirrus report`
    # computes it -- one report gives both the warnings and the terminal that shows them
    results = []

    def recorded(*args, **kwargs):
        results.append(real(*args, **kwargs))
        return results[-1]

    real = command_module.report_command
    monkeypatch.setattr(command_module, "report_command", recorded)
    wide = {"COLUMNS": "250"}  # the leaderboard's columns fit; an 80-column worker squeezes their text
    cli = CliRunner().invoke(app, ["report", "a", "c", "-w", str(cost_ws), "--bootstrap", "0"], env=wide)
    monkeypatch.undo()
    assert cli.exit_code == 0, cli.output
    [result] = results
    assert load_prices(cost_ws) == {}  # as report_command(..., prices={}) would price
    assert any("no price for model 'judge-m' (judge of run 'c')" in w for w in result["warnings"])
    assert 'add [prices."judge-m"] to cirrus.toml' in " ".join(cli.output.split())  # not eaten as markup
    assert not any("run 'a'" in w and "price" in w for w in result["warnings"])
    config = cost_ws / "prices.toml"
    config.write_text('[prices."judge-m"]\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0\n'
                      'cached_input_per_mtok = 0.5\n')
    cli = CliRunner().invoke(app, ["report", "a", "c", "-w", str(cost_ws), "--bootstrap", "0", "--config",
                                   str(config)], env=wide)
    assert cli.exit_code == 0, cli.output
    board = _rows(pl.read_parquet(cost_ws / "reports/_compare/a+c/leaderboard.parquet"))
    assert board["c"]["cost_judge"] == approx(C_JUDGE) and board["c"]["cost_total"] == approx(0.0575)
    # the terminal table: total and per success (0.062 / 3 = 0.0207; 0.0575 / 2 = 0.0288)
    assert "cost / success" in cli.output
    assert "0.0620 USD" in cli.output and "0.0207 USD" in cli.output
    assert "0.0575 USD" in cli.output and "0.0288 USD" in cli.output


def test_one_price_warning_names_every_unpriced_model(cost_ws: Path):
    # issue 27: a report of runs against local models showed one "no price" banner per run and role
    write_run(cost_ws, "d", "model-b", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)  # the same unpriced agent as b
    result = report_command(["b", "c", "d"], cost_ws, None, 0, 0, prices=JUDGE_PRICE | {"x": B_PRICE["model-b"]})
    priced = [w for w in result["warnings"] if "price" in w]
    assert priced == ["no price for model 'model-b' (agent of runs 'b', 'd'): the cost columns of those roles and "
                      'cost_total are null (add [prices."model-b"] to cirrus.toml)']
    result = report_command(["b", "c", "d"], cost_ws, None, 0, 0, prices={"x": B_PRICE["model-b"]})
    priced = [w for w in result["warnings"] if "price" in w]
    assert priced == ["no price for 2 models, 'model-b' (agent of runs 'b', 'd') and 'judge-m' (judge of run 'c'): "
                      "the cost columns of those roles and cost_total are null "
                      '(add [prices."model-b"] and [prices."judge-m"] to cirrus.toml)']
    html = result["files"]["report.html"].read_text(encoding="utf-8")
    assert html.count('<div class="warn">warning: no price') == 1  # one banner, not one per run


def test_judge_panel_models_and_member_pricing(cost_ws: Path):
    panel = {"judge_role": {"panel": [{"model": "j1"}, {"model": "j2"}], "rule": "majority"}}
    assert run_models({"fingerprint": {"agent_role": {"model": "m"}, **panel}}) == {
        "agent": "m", "judge[1]": "j1", "judge[2]": "j2"}
    same = {"judge_role": {"panel": [{"model": "j1"}, {"model": "j1"}]}}
    assert run_models({"fingerprint": same})["judge"] == "j1"
    assert run_models({"fingerprint": {"agent_role": {"name": "baseline:oracle"}}}) == {}

    # summary.json sums the panel into "judge"; its members' own usage is in attempts.jsonl
    _patch(cost_ws, "c", fingerprint=panel)
    lines = [{"task_id": "T1", "attempt": 0, "usage": {"judge[1]": _usage(2, 1_000, 100),
                                                       "judge[2]": _usage(2, 1_000, 100)}},
             {"task_id": "T2", "attempt": 0, "usage": {"judge[1]": _usage(1, 500, 50)}},
             {"task_id": "T9", "attempt": 0, "usage": {"judge[2]": _usage(9, 99_000, 9_000)}}]  # no such attempt
    (cost_ws / "reports/c/attempts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    prices = {"j1": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}, "j2": {"input_per_mtok": 3.0,
                                                                             "output_per_mtok": 4.0}}
    c = _rows(leaderboard(load_runs(cost_ws, ["c"]), prices=prices))["c"]
    # judge[1]: 1500 / 1e6 * 1 + 150 / 1e6 * 2 = 0.0018; judge[2]: 1000 / 1e6 * 3 + 100 / 1e6 * 4 = 0.0034
    assert c["cost_judge"] == approx(0.0018 + 0.0034)
    assert c["cost_total"] == approx(0.05 + 0.0052)
    # one member unpriced: the judge stays unknown
    c = _rows(leaderboard(load_runs(cost_ws, ["c"]), prices={"j1": prices["j1"]}))["c"]
    assert c["cost_judge"] is None and c["cost_total"] is None


def test_run_cost_is_pure_and_counts_roles_without_tokens_as_free():
    # an offline baseline with the local judge: no usage at all costs nothing
    cost = run_cost({"usage": {}, "cost": {"total": None, "currency": None}}, {}, {})
    assert cost.roles == {"agent": 0.0, "judge": 0.0, "fluency": 0.0} and cost.total == 0.0
    # no usage in summary.json, no price: nothing is known
    cost = run_cost({"model": "m"}, {"agent": "m"}, {})
    assert cost.total is None and cost.source == "none" and cost.unpriced == (("agent", "m"),)


def _cost_section(html: str):
    page = parse(html)
    section = page.find("section", id="cost")
    assert section is not None
    return page, section


def test_page_cost_section_and_chart(cost_ws: Path):
    result = report_command(["a", "b", "c"], cost_ws, None, 0, 0, prices=B_PRICE)
    html = (result["out_dir"] / "report.html").read_text(encoding="utf-8")
    page, section = _cost_section(html)
    assert page.find("a", href="#cost") is not None  # in the nav
    rows = {row[0]: row for row in section.find("table", cls="costs").rows()[1:]}
    assert set(rows) == {"a", "b", "c"}
    # run, model, agent, judge, fluency, total, per success, per ok attempt, currency, cache share, basis
    assert rows["a"][2:10] == ["0.0500", "0.0100", "0.0020", "0.0620", "0.0207", "0.0124", "USD",
                               "agent 0.40, judge 0.00, fluency 0.00"]
    assert rows["b"][2:9] == ["0.0003", "–", "–", "0.0003", "0.0001", "0.0001", "USD"]
    assert rows["b"][9] == "–" and "before usage was recorded" in rows["b"][10]
    assert rows["c"][2:7] == ["0.0500", "–", "0.0000", "–", "–"]
    # the chart: runs a and b drawn, c (no known total) named under it
    svg = section.find("svg", aria_label="chart-cost-quality")
    assert svg is not None and "cost of the run (USD" in svg.text()
    labels = [t for t in ("a", "b", "c") if any(n.text() == t for n in svg.find_all("text"))]
    assert labels == ["a", "b"]
    note = section.find("p", cls="cost-left-out")
    assert note is not None and note.text().endswith(": c.")
    # the leaderboard's cost cell is still the total
    assert html.count('aria-label="chart-cost-quality"') == 1


def test_page_without_any_known_cost_has_no_chart(cost_ws: Path):
    result = report_command(["c"], cost_ws, None, 0, 0, prices={})
    _, section = _cost_section((result["out_dir"] / "report.html").read_text(encoding="utf-8"))
    assert section.find("svg") is None
    assert section.find("p", cls="cost-left-out").text().endswith(": c.")


# --------------------------------------------------------------------------
# Subtask runs on the page
# --------------------------------------------------------------------------


def _invoke(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def test_subtask_section_only_with_a_subtask_run(sample_ingest_copy: Path):
    ws = sample_ingest_copy
    _invoke("eval", "--model", "baseline:oracle", "--mode", "subtask", "--run-id", "sub", "--limit", "3",
            "-w", str(ws), "-q")
    _invoke("eval", "--model", "baseline:oracle", "--run-id", "walk", "--limit", "3", "-w", str(ws), "-q")

    result = report_command(["walk", "sub"], ws, None, 20, 0, prices={})
    page = parse((result["out_dir"] / "report.html").read_text(encoding="utf-8"))
    section = page.find("section", id="subtasks")
    assert section is not None and page.find("a", href="#subtasks") is not None
    titles = [h.text() for h in section.find_all("h3")]
    assert titles[0].startswith("Table 4") and titles[1].startswith("Figure 6")
    tables = section.find_all("table", cls="subtask")
    bands = pl.read_parquet(result["out_dir"] / "subtask_by_tokens.parquet")
    shown = [row[2] for row in tables[0].rows()[1:]]
    assert shown == bands.filter(pl.col("n_subtasks") > 0)["band"].to_list()  # the bands with subtasks
    assert all(row[0] == "sub" for row in tables[0].rows()[1:])
    # the oracle is accepted everywhere: pass@1 1.000 in every shown row
    assert {row[6].split(" ")[0] for row in tables[1].rows()[1:]} == {"1.000"}
    assert section.find("svg", aria_label="chart-subtask-reply-type") is not None
    # the walk run's own sections are unchanged: the leaderboard has the walk only
    leader = page.find("section", id="leaderboard").find("table").rows()[1:]
    assert [row[0] for row in leader] == ["walk"]

    alone = report_command(["walk"], ws, None, 0, 0, prices={})
    page = parse((alone["out_dir"] / "report.html").read_text(encoding="utf-8"))
    assert page.find("section", id="subtasks") is None and page.find("a", href="#subtasks") is None
    # the baseline called no model: it cost nothing, and says so
    cost = {row[0]: row for row in page.find("table", cls="costs").rows()[1:]}
    assert cost["walk"][5] == "0.0000"
