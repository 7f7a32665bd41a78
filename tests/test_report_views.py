"""The report's views (:mod:`cirrus.report.views`): pure functions from
small hand-built polars frames to the rows the page and the terminal show,
every expected value worked out by hand below; and the split itself: the
views read and write no file and draw nothing, and the page's renderer
(``html.py``) computes no table."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import polars as pl
import pytest

from cirrus.report.uncertainty import noise_reason
from cirrus.report.views.breakdowns import breakdown_groups, reply_type_rows
from cirrus.report.views.cells import fmt_value, interval_text, page_value, plain_number, share_text
from cirrus.report.views.cost import cost_chart_runs
from cirrus.report.views.depth import depth_table
from cirrus.report.views.diff import diff_view
from cirrus.report.views.failures import failure_counts, failure_matrix, failure_view
from cirrus.report.views.leaderboard import (
    ci_lookup,
    latency_chart_runs,
    leaderboard_rows,
    overall_interval,
    paired_rows,
    terminal_leaderboard_rows,
    terminal_paired_rows,
)
from cirrus.report.views.noise import noise_lines, noise_marks
from cirrus.report.views.transcripts import Anchors

REPORT = Path(__file__).resolve().parents[1] / "cirrus" / "report"

BOARD = pl.DataFrame({
    "run_id": ["a", "b"], "model": ["m-a", "m-b"], "n_tasks": [30, 30], "errors": [0, 2], "k": [1, 2],
    "sr_pass1": [0.6, 0.5], "sr_pass_at_k": [0.6, 0.55], "pass_hat_k": [0.6, None], "atpr": [0.75, 0.7],
    "amtl": [84.12, None], "cost_total": [0.5, None], "cost_per_success": [None, None], "currency": ["USD", None],
})
INTERVALS = pl.DataFrame({
    "run_id": ["a", "a", "a", "b"], "dimension": ["overall", "overall", "category", "overall"],
    "segment": ["all", "all", "Billing", "all"], "metric": ["sr_pass1", "atpr", "sr_pass1", "sr_pass1"],
    "ci_low": [0.25, None, 0.1, 0.4], "ci_high": [0.75, None, 0.2, 0.6],
})
PAIRED = pl.DataFrame({
    "run_a": ["a", "a", "a"], "run_b": ["b", "b", "b"], "metric": ["sr_pass1", "atpr", "alj"], "k": [1, 1, 1],
    "n_tasks": [30, 30, 30], "estimate_a": [0.6, 0.75, 0.8], "estimate_b": [0.5, 0.7, 0.8],
    "diff": [-0.1, -0.05, 0.0], "ci_low": [-0.3, None, -0.1], "ci_high": [0.1, None, 0.1],
    "p_value": [0.042, None, 1.0], "mdd": [0.2, None, None], "within_noise": [True, None, True],
    "confidence": [0.95, 0.95, 0.95],
    # the interval the verdict reads: SR pass@1 at the Bonferroni 97.5%, widened for the judge
    "test_confidence": [0.975, 0.975, 0.95], "test_low": [-0.35, None, -0.1], "test_high": [0.15, None, 0.1],
    "judge_sd": [0.02, None, None], "verdict": ["inside_noise", None, "inside_noise"],
})
# a significant drop smaller than its MDD (issue 27): not within the noise, shown as "b lower"
DROP = pl.DataFrame({
    "run_a": ["a"], "run_b": ["b"], "metric": ["atpr"], "k": [1], "n_tasks": [32], "estimate_a": [0.6],
    "estimate_b": [0.459], "diff": [-0.141], "ci_low": [-0.266], "ci_high": [-0.031], "p_value": [0.026],
    "mdd": [0.180], "within_noise": [False], "confidence": [0.95], "test_confidence": [0.95],
    "test_low": [-0.266], "test_high": [-0.031], "judge_sd": [None], "verdict": ["lower"],
})


# --------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------


def test_cells_on_the_page_and_in_the_terminal():
    assert [page_value(None), page_value(float("nan")), page_value(0.5), page_value(84.12, 1), page_value(3)] == [
        "–", "–", "0.500", "84.1", "3"]
    assert [fmt_value(None), fmt_value(0.5), fmt_value(0.04213, 4), fmt_value(7)] == ["-", "0.500", "0.0421", "7"]
    assert interval_text(0.5, 0.25, 0.75) == "0.500 [0.25, 0.75]"
    assert interval_text(84.12, 80.0, 90.0, 1) == "84.1 [80.0, 90.0]"
    assert interval_text(0.5, None, 0.75) == "0.500" and interval_text(None, 0.1, 0.2) == "-"
    assert (share_text(1, 8), share_text(1, 0)) == ("12.5%", "–")
    assert (plain_number(2.0), plain_number(2.5), plain_number(None)) == ("2", "2.50", "–")


# --------------------------------------------------------------------------
# Leaderboard and paired differences
# --------------------------------------------------------------------------


def test_ci_lookup_keeps_the_defined_intervals():
    cis = ci_lookup(INTERVALS)
    assert cis == {("a", "overall", "all", "sr_pass1"): (0.25, 0.75),
                   ("a", "category", "Billing", "sr_pass1"): (0.1, 0.2),
                   ("b", "overall", "all", "sr_pass1"): (0.4, 0.6)}  # a's ATPR has no interval
    assert overall_interval(cis, "a", "sr_pass1") == (0.25, 0.75) and overall_interval(cis, "a", "atpr") is None
    assert ci_lookup(None) == {} and ci_lookup(INTERVALS.clear()) == {}


def test_terminal_leaderboard_rows():
    rows = terminal_leaderboard_rows(BOARD, ci_lookup(INTERVALS))
    assert rows == [
        ["a", "m-a", "30 (0)", "0.600 [0.25, 0.75]", "0.600 (K=1)", "0.600 (K=1)", "0.750", "84.1", "0.5000 USD", "-"],
        ["b", "m-b", "30 (2)", "0.500 [0.40, 0.60]", "0.550 (K=2)", "- (K=2)", "0.700", "-", "-", "-"],
    ]
    # without intervals (--bootstrap 0): the values alone
    assert terminal_leaderboard_rows(BOARD, ci_lookup(None))[0][3] == "0.600"


def test_page_leaderboard_rows_carry_intervals_and_marks():
    marks = {("b", "sr_pass1"): "within the noise"}
    a, b = leaderboard_rows(BOARD, ci_lookup(INTERVALS), {"b": True}, marks)
    assert a["sr_pass1"] == {"value": "0.600", "ci": "[0.25, 0.75]", "noise": None}
    assert a["atpr"] == {"value": "0.750", "ci": "", "noise": None}
    assert a["amtl"] == {"value": "84.1", "ci": "", "noise": None} and a["cost"] == "0.5000 USD"
    assert b["sr_pass1"]["noise"] == "within the noise" and b["pass_hat_k"]["value"] == "–"
    assert (a["self_judged"], b["self_judged"], b["cost"], b["judge"]) == (False, True, "–", "–")


def test_terminal_paired_rows_keep_sr_and_atpr():
    assert terminal_paired_rows(PAIRED) == [
        ["a", "b", "sr_pass1", "30", "-0.100", "[-0.300, 0.100]", "0.0420", "0.200",
         "≈ [-0.350, 0.150] @97.5%+judge"],
        ["a", "b", "atpr", "30", "-0.050", "-", "-", "-", "-"],
    ]
    assert terminal_paired_rows(DROP) == [
        ["a", "b", "atpr", "32", "-0.141", "[-0.266, -0.031]", "0.0260", "0.180", "b lower [-0.266, -0.031] @95%"]]
    # the page's table of paired differences reads the same verdicts
    assert [r["reading"] for r in paired_rows(PAIRED)] == ["within the noise", "–", "within the noise"]
    assert paired_rows(DROP)[0]["reading"] == "b lower"


# --------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------


def test_noise_marks_the_runs_within_the_noise_of_the_best():
    marks = noise_marks(BOARD, PAIRED)
    reason = noise_reason(-0.1, 0.2, -0.35, 0.15, 30, 0.975, judge_sd=0.02)
    assert reason == ("difference -0.100; its 97.5% interval, widened for the judge's flip rate, [-0.350, 0.150] "
                      "contains 0; MDD 0.200 at 30 tasks")
    # SR pass@1: b is within the noise of the best run a; ATPR: the pair is beyond the noise
    assert marks == {("b", "sr_pass1"): f"within the noise of this comparison with a, the best SR pass@1: {reason}"}
    assert noise_marks(BOARD, None) == {} and noise_marks(BOARD.head(1), PAIRED) == {}
    assert noise_lines(PAIRED) == [f"SR pass@1: a 0.600 vs b 0.500: within the noise ({reason})"]
    assert noise_lines(PAIRED, "atpr") == [] and noise_lines(None) == []
    # a significant drop below the MDD is never marked within the noise
    assert noise_marks(BOARD, DROP) == {} and noise_lines(DROP, "atpr") == []


# --------------------------------------------------------------------------
# Which runs a chart places
# --------------------------------------------------------------------------


def test_chart_runs_leave_out_what_cannot_be_placed():
    assert latency_chart_runs(BOARD, ["a", "b"]) == (["a"], ["b"])  # b has no AMTL
    board = pl.DataFrame({"run_id": ["a", "b", "c", "d"], "sr_pass1": [0.5, 0.6, 0.7, 0.1],
                          "cost_total": [1.0, None, 2.0, 0.5], "currency": ["USD", None, "EUR", None]})
    # b: no cost; c: another currency than the first drawn run's
    assert cost_chart_runs(board, ["a", "b", "c", "d"]) == (["a", "d"], ["b", "c"], "USD")
    assert cost_chart_runs(board, ["b"]) == ([], ["b"], None)


def test_breakdown_groups_and_reply_type_rows():
    frame = pl.DataFrame({"run_id": ["a", "b", "a", "b", "a"], "segment": ["x", "x", "y", "y", "z"],
                          "segment_order": [1, 1, 0, 0, 2], "n_tasks": [0, 2, 0, 0, 3]})
    groups = breakdown_groups(frame)
    assert (groups.drawn, groups.empty, groups.sizes) == (["x", "z"], ["y"], {"y": 0, "x": 2, "z": 3})
    reply = pl.DataFrame({"run_id": ["a"], "segment": ["Solution"], "n_reference": [4], "n_reached": [3],
                          "n_covered": [2], "n_judged": [3], "n_accepted": [2], "acceptance_rate": [2 / 3],
                          "coverage_rate": [0.5], "extra": [1]})
    assert reply_type_rows(reply) == [{"run_id": "a", "segment": "Solution", "n_reference": 4, "n_reached": 3,
                                       "n_covered": 2, "n_judged": 3, "n_accepted": 2, "acceptance_rate": 0.667,
                                       "coverage_rate": 0.5}]


# --------------------------------------------------------------------------
# Depth, failures, diff
# --------------------------------------------------------------------------


def test_depth_table_counts_ok_attempts_by_depth():
    tasks = pl.DataFrame({"status": ["ok", "ok", "ok", "error"], "checkpoints": [2, 2, 3, 3],
                          "covered": [2, 0, 1, None]})
    frame = depth_table({"r": tasks.lazy()})
    # depth 1: three ok attempts, two covered it; depth 2: three, one; depth 3: one (K = 3), none
    assert frame.rows() == [("r", 1, 3, 2, 2 / 3), ("r", 2, 3, 1, 1 / 3), ("r", 3, 1, 0, 0.0)]
    assert depth_table({}).is_empty()


CHECKPOINTS_A = pl.DataFrame({
    "accepted": [False, False, False, True, True],
    "fluent": [None, None, None, False, True],
    "failure": ["wrong_tool", "wrong_tool", None, "contradiction", None],
})
CHECKPOINTS_B = CHECKPOINTS_A.drop("failure")  # a run written before the failure column


def test_failure_counts_and_view():
    counts, missing = failure_counts({"a": CHECKPOINTS_A, "b": CHECKPOINTS_B})
    assert counts.rows() == [("a", "contradiction", 1), ("a", "wrong_tool", 2)] and missing == ["b"]
    view = failure_view({"a": CHECKPOINTS_A.lazy(), "b": CHECKPOINTS_B.lazy()})
    assert (view["runs"], view["missing"]) == (["a"], ["b"])
    assert view["rows"] == [{"failure": "wrong_tool", "counts": {"a": 2}, "shares": {"a": "66.7%"}},
                            {"failure": "contradiction", "counts": {"a": 1}, "shares": {"a": "33.3%"}}]
    # failed: three rejected turns and one accepted with a fluency No; one of them has no category
    assert (view["categorised"], view["failed"], view["uncategorised"]) == ({"a": 3}, {"a": 4}, {"a": 1})


def test_failure_matrix_of_failures_parquet():
    failures = pl.DataFrame({
        "run_id": ["a", "a", "b", "a"], "reply_type": ["all", "all", "all", "Solution"],
        "failure": ["wrong_tool", "contradiction", "wrong_tool", "wrong_tool"], "failure_order": [1, 5, 1, 1],
        "count": [2, 2, 0, 2], "share": [0.5, 0.5, None, 1.0], "n_failed": [4, 4, 0, 2]})
    assert failure_matrix(failures) == (["a", "b"], [["wrong_tool", "2 (0.50)", "0 (0.00)"],
                                                     ["contradiction", "2 (0.50)", "-"],
                                                     ["failed turns", "4", "0"]])
    assert failure_matrix(failures.with_columns(pl.lit(0).alias("count"))) is None


def test_diff_view_links_the_transcripts():
    anchors = Anchors()
    assert anchors("a", "T 1", 0) == "t-T_1-0-a" and anchors("a", "T_1", 0) == "t-T_1-0-a~2"  # unique ids
    row = {"task_id": "T 1", "attempt": 0, "run_a": "a", "run_b": "b", "tool_calls_a": '[{"name": "f"}]',
           "tool_calls_b": None, "reference_tool_calls": "not json"}
    (view,) = diff_view([row], anchors.get)
    assert (view["link_a"], view["link_b"]) == ("t-T_1-0-a", None)  # b has no transcript on the page
    assert view["tool_calls_a"] == json.dumps([{"name": "f"}], indent=2)
    assert (view["tool_calls_b"], view["reference_tool_calls"]) == (None, "not json")
    assert diff_view([row])[0]["link_a"] is None


# --------------------------------------------------------------------------
# The split: views compute, html.py renders
# --------------------------------------------------------------------------

# what a view never does: read or write a file, render HTML, draw, print
RENDERING_OR_IO = ("jinja2", "matplotlib", "typer", "rich", "cirrus.files", "cirrus.report.extras",
                   "cirrus.report.loading", "cirrus.report.writing", "cirrus.report.html", "cirrus.report.page",
                   "cirrus.report.charts")
IO_CALLS = {"open", "read_parquet", "scan_parquet", "read_parquet_schema", "read_text", "write_text", "read_bytes",
            "write_bytes", "write_parquet", "read_json", "mkdir", "unlink", "savefig"}


def _runtime_nodes(tree: ast.AST):
    """Every node outside ``if TYPE_CHECKING:`` blocks (imports for type hints only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(nodes) -> set[str]:
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _called(nodes) -> set[str]:
    return {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for node in nodes if isinstance(node, ast.Call)}


@pytest.mark.parametrize("path", sorted((REPORT / "views").glob("*.py")), ids=lambda p: p.name)
def test_views_read_no_file_and_render_nothing(path: Path):
    nodes = list(_runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))))
    bad = sorted(name for name in _imports(nodes) if name.startswith(RENDERING_OR_IO))
    assert not bad, f"{path.name} imports {bad}"
    assert not _called(nodes) & IO_CALLS, f"{path.name} calls {sorted(_called(nodes) & IO_CALLS)}"


def test_the_page_renderer_computes_no_table():
    tree = ast.parse((REPORT / "html.py").read_text(encoding="utf-8"))
    nodes = list(_runtime_nodes(tree))
    assert "polars" not in _imports(nodes)  # for type hints only
    computing = {"group_by", "agg", "filter", "select", "with_columns", "pivot", "concat", "sort", "collect", "unique"}
    assert not _called(nodes) & computing
    # the charts module is the only place that draws; nothing imports its private names
    for path in REPORT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cirrus.report"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.relative_to(REPORT)} imports {private} from {node.module}"
