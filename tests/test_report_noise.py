"""Noise marks of ``cirrus report``: the flip rate of tasks across attempts,
the judge's own noise (``judge_consistency.json``), the minimal detectable
difference (MDD) of a paired comparison and the ``within_noise`` rule, as pure
functions on hand-made numbers, then end to end on the sample workspace's
offline baselines (``noise.parquet``, ``report.json``, the page's marks and
Noise section, the terminal lines)."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import polars as pl
import pytest

from cirrus.commands.report import print_report
from cirrus.evaluate.runner import summarize
from cirrus.judges.calibration import wilson_interval
from cirrus.report import schema as report_schema
from cirrus.report.command import report_command
from cirrus.report.loading import JUDGE_NOISE_COLUMNS, load_runs, parse_judge_consistency
from cirrus.report.uncertainty import (
    attempt_flips,
    flip_counts,
    mdd_multiplier,
    minimal_detectable_difference,
    noise,
    noise_reason,
    paired,
    within_noise,
)
from cirrus.report.views.noise import noise_lines, noise_marks
from tests.test_report_tables import hand_ws  # noqa: F401  (a fixture)

approx = pytest.approx
Z_975, Z_80 = 1.959963984540054, 0.8416212335729143  # standard normal quantiles, from a table


# --------------------------------------------------------------------------
# Minimal detectable difference
# --------------------------------------------------------------------------


def test_mdd_is_z_sum_times_sd_over_root_n_by_hand():
    assert mdd_multiplier() == approx(Z_975 + Z_80) == approx(2.8016, abs=1e-4)
    d = [0.5, -0.5, 0.0, 1.0]
    # mean 0.25; squared deviations 0.0625 + 0.5625 + 0.0625 + 0.5625 = 1.25; / (n - 1) = 5/12
    sd = math.sqrt(1.25 / 3)
    assert minimal_detectable_difference(d) == approx((Z_975 + Z_80) * sd / 2)
    # other alpha and power: z_0.95 + z_0.90
    assert minimal_detectable_difference(d, alpha=0.1, power=0.9) == approx((1.6448536 + 1.2815516) * sd / 2)
    # four times the tasks (16): squared deviations 4 * 1.25 over 15, and sqrt(16) = 4: about half the MDD
    assert minimal_detectable_difference(d * 4) == approx((Z_975 + Z_80) * math.sqrt(5 / 15) / 4)


def test_mdd_is_undefined_without_spread_or_with_under_two_tasks():
    assert minimal_detectable_difference([]) is None
    assert minimal_detectable_difference([0.4]) is None
    assert minimal_detectable_difference([0.0, 0.0, 0.0]) is None  # identical runs
    assert minimal_detectable_difference([-1.0] * 31) is None  # every task differs by the same amount
    assert minimal_detectable_difference([0.1] * 7) is None  # sd 0 up to the rounding of the mean
    assert minimal_detectable_difference([0.0, 1.0]) == approx((Z_975 + Z_80) * math.sqrt(0.5) / math.sqrt(2))
    for bad in ([0.0, float("nan")], [[0.0, 1.0]]):
        with pytest.raises(ValueError):
            minimal_detectable_difference(bad)
    with pytest.raises(ValueError):
        mdd_multiplier(alpha=0.0)


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.01, 0.07, False),    # the interval leaves out 0: significant, whatever the MDD says
    (-0.01, 0.30, True),    # it contains 0: within the noise
    (-0.30, -0.05, False),  # the sign does not matter
    (0.0, 0.20, True),      # an interval ending at 0 contains it
    (-1.0, -1.0, False),    # deterministic runs (sd 0, no MDD): the interval alone
    (0.0, 0.0, True),       # identical runs
    (None, None, None),     # no interval: unknown
    (None, 0.1, None),
])
def test_within_noise_is_the_interval_containing_0(low, high, expected):
    # issue 27: it used to be "|diff| < mdd or the interval contains 0", which called a significant drop
    # (interval [-0.266, -0.031]) noise because it was smaller than the MDD; the MDD no longer decides
    assert within_noise(low, high) is expected


def test_noise_reason_states_the_interval_read_and_the_mdd():
    assert noise_reason(-0.04, 0.11, -0.1, 0.02, 30, 0.975) == (
        "difference -0.040; its 97.5% interval [-0.100, 0.020] contains 0; MDD 0.110 at 30 tasks")
    assert noise_reason(0.2, 0.11, 0.05, 0.3, 30) == (
        "difference +0.200; its 95% interval [0.050, 0.300] leaves out 0; MDD 0.110 at 30 tasks")
    assert noise_reason(0.0, None, 0.0, 0.0, 4) == (
        "difference +0.000; its 95% interval [0.000, 0.000] contains 0; no MDD, at 4 tasks")
    assert noise_reason(-0.1, 0.2, -0.25, 0.01, 30, 0.975, judge_sd=0.03) == (
        "difference -0.100; its 97.5% interval, widened for the judge's flip rate, [-0.250, 0.010] contains 0; "
        "MDD 0.200 at 30 tasks")
    assert noise_reason(0.1, 0.2, None, None, 3) == "difference +0.100, no interval; MDD 0.200 at 3 tasks"


# --------------------------------------------------------------------------
# Flip rate across attempts
# --------------------------------------------------------------------------


def _attempts(rows: list[tuple[str, str, bool | None]]) -> pl.DataFrame:
    return pl.DataFrame([{"task_id": t, "status": s, "success": ok} for t, s, ok in rows],
                        schema={"task_id": pl.Utf8, "status": pl.Utf8, "success": pl.Boolean})


def test_flip_rate_on_a_hand_built_attempt_table():
    table = _attempts([
        ("t1", "ok", True), ("t1", "ok", False),                      # flips
        ("t2", "ok", True), ("t2", "ok", True),                       # agrees
        ("t3", "ok", False), ("t3", "ok", False), ("t3", "ok", True),  # flips, n = 3, c = 1
        ("t4", "ok", True), ("t4", "error", None),                    # one scored attempt: left out
        ("t5", "error", None), ("t5", "error", None),                 # none scored
        ("t6", "ok", False), ("t6", "error", None), ("t6", "ok", False),  # agrees (the error is not a flip)
    ])
    flips = attempt_flips(table)
    assert (flips.tasks_multi, flips.tasks_flipping) == (4, 2)
    assert flips.rate == approx(0.5)
    assert (flips.low, flips.high) == approx(wilson_interval(2, 4))
    # c (n - c) / (n (n - 1)): t1 1/2, t2 0, t3 2/6, t6 0
    assert flips.variance == approx((0.5 + 0 + 1 / 3 + 0) / 4)
    assert attempt_flips(table.lazy()) == flips


def test_flip_rate_is_null_with_one_attempt_per_task():
    flips = attempt_flips(_attempts([("t1", "ok", True), ("t2", "ok", False), ("t3", "error", None)]))
    assert (flips.tasks_multi, flips.tasks_flipping, flips.rate, flips.low, flips.high, flips.variance) == (
        0, 0, None, None, None, None)
    assert flip_counts([], []).rate is None
    none_flip = flip_counts([2, 2, 2], [0, 2, 2])
    assert (none_flip.rate, none_flip.low, none_flip.variance) == (0.0, 0.0, 0.0)
    assert none_flip.high == approx(wilson_interval(0, 3)[1])
    with pytest.raises(ValueError):
        flip_counts([2], [3])


# --------------------------------------------------------------------------
# judge_consistency.json
# --------------------------------------------------------------------------

JUDGE_RECORD = {"run_id": "oracle", "judge": "judge-q", "sample": 40, "repeats": 3, "item_flip_rate": 0.1,
                "item_flip_rate_ci95": [0.04, 0.23], "verdict_flip_rate": 0.05, "verdict_flip_rate_ci95": [0.02, 0.1],
                "self_agreement": 0.9, "failed_calls": 2, "created_at": "2026-01-01T00:00:00+00:00",
                "by_kind": {}, "items": []}


def test_parse_judge_consistency():
    columns = parse_judge_consistency(JUDGE_RECORD)
    assert set(columns) == set(JUDGE_NOISE_COLUMNS)
    assert columns == {"judge_measured": "judge-q", "judge_sample": 40, "judge_repeats": 3,
                       "judge_item_flip_rate": 0.1, "judge_item_flip_rate_low": 0.04,
                       "judge_item_flip_rate_high": 0.23, "judge_verdict_flip_rate": 0.05,
                       "judge_verdict_flip_rate_low": 0.02, "judge_verdict_flip_rate_high": 0.1}
    nothing = parse_judge_consistency({**JUDGE_RECORD, "item_flip_rate": None, "item_flip_rate_ci95": None,
                                       "verdict_flip_rate": None, "verdict_flip_rate_ci95": None})
    assert nothing["judge_item_flip_rate"] is None and nothing["judge_verdict_flip_rate_high"] is None
    for broken in ([], "x", {"judge": "j"}, {**JUDGE_RECORD, "item_flip_rate": "0.1"},
                   {**JUDGE_RECORD, "item_flip_rate": 1.5}, {**JUDGE_RECORD, "verdict_flip_rate": True},
                   {**JUDGE_RECORD, "item_flip_rate_ci95": [0.3, 0.1]}, {**JUDGE_RECORD, "item_flip_rate_ci95": [0.1]},
                   {**JUDGE_RECORD, "sample": -1}, {**JUDGE_RECORD, "repeats": 2.5}, {**JUDGE_RECORD, "judge": 3}):
        with pytest.raises(ValueError):
            parse_judge_consistency(broken)


# --------------------------------------------------------------------------
# Tables on the hand-made runs of test_report_tables
# --------------------------------------------------------------------------


def test_paired_mdd_and_noise_table_on_hand_runs(hand_ws):  # noqa: F811
    runs = load_runs(hand_ws, ["a", "b"])
    table = {r["metric"]: r for r in paired(runs, n_boot=200, seed=1).iter_rows(named=True)}
    # common tasks T1, T2, T3; per task mean over ok attempts (a: T1 1/2, T2 1/2, T3 1; b: 1, 0, 1)
    sr_d = [1 - 0.5, 0 - 0.5, 1 - 1]
    atpr_d = [1 - (1 + 0) / 2, 0 - (1 / 3 + 1) / 2, 1 - 1]
    for metric, d in (("sr_pass1", sr_d), ("atpr", atpr_d)):
        row = table[metric]
        assert row["n_tasks"] == 3
        assert row["mdd"] == approx((Z_975 + Z_80) * statistics.stdev(d) / math.sqrt(3))
        # SR pass@1 and ATPR are decided together: Bonferroni, 97.5% intervals; no judge measured
        assert row["test_confidence"] == approx(0.975) and row["judge_sd"] is None
        assert row["test_low"] <= row["ci_low"] and row["test_high"] >= row["ci_high"]
        assert row["within_noise"] is within_noise(row["test_low"], row["test_high"])
        assert row["within_noise"] is True and row["verdict"] == "inside_noise"
    assert table["sr_pass1"]["diff"] == approx(2 / 3 - 3 / 5)
    for metric in ("sr_pass_at_k", "alj", "tia"):  # each on its own, at the stated 95%
        row = table[metric]
        assert row["mdd"] is None and row["test_confidence"] == 0.95
        assert (row["test_low"], row["test_high"]) == (row["ci_low"], row["ci_high"])
        assert row["within_noise"] is within_noise(row["ci_low"], row["ci_high"])

    frame = noise(runs, {"a": parse_judge_consistency(JUDGE_RECORD), "b": None})
    assert frame.schema == report_schema.polars_schema("noise")
    a, b = frame.iter_rows(named=True)
    # a (K = 2): T1 and T2 have two ok attempts and both flip; T3 has one, T4 none
    assert (a["k"], a["tasks_multi"], a["tasks_flipping"], a["flip_rate"]) == (2, 2, 2, 1.0)
    assert (a["flip_rate_low"], a["flip_rate_high"]) == approx(wilson_interval(2, 2))
    assert a["success_var_within"] == approx(0.5) and a["judge_measured"] == "judge-q"
    # b (K = 1): no flip rate
    assert (b["k"], b["tasks_multi"], b["flip_rate"], b["flip_rate_low"], b["success_var_within"]) == (
        1, 0, None, None, None)
    assert all(b[c] is None for c in JUDGE_NOISE_COLUMNS)


def test_hand_report_marks_k1_and_bootstrap_0(hand_ws):  # noqa: F811
    result = report_command(["a", "b"], hand_ws, None, 100, 0, prices={})
    assert "noise.parquet" in result["files"] and result["noise"].height == 2
    page = result["files"]["report.html"].read_text(encoding="utf-8")
    assert 'id="noise"' in page and 'href="#noise"' in page
    assert "needs K &gt;= 2" in page  # run b has K = 1
    assert page.count('<span class="noise-mark" title=') == 2  # b's SR and ATPR, within the noise of a's
    # no bootstrap: no paired table, so no MDD, no marks, no pairs; the flip rates stay
    result = report_command(["a", "b"], hand_ws, None, 0, 0, prices={})
    manifest = json.loads(result["files"]["report.json"].read_text())
    assert manifest["noise"]["pairs"] == [] and len(manifest["noise"]["runs"]) == 2
    assert (result["out_dir"] / "noise.parquet").is_file() and not (result["out_dir"] / "paired.parquet").exists()
    page = result["files"]["report.html"].read_text(encoding="utf-8")
    assert '<span class="noise-mark" title=' not in page and "No pairwise MDDs" in page
    assert noise_lines(result["paired"]) == []


def test_noise_marks_compare_each_run_with_the_best():
    board = pl.DataFrame({"run_id": ["x", "y", "z"], "sr_pass1": [0.5, 0.7, 0.68], "atpr": [0.9, None, 0.6]})
    # (run_a, run_b, metric, diff, mdd, test_low, test_high, within_noise)
    rows = [("x", "y", "sr_pass1", 0.2, 0.1, 0.1, 0.3, False), ("x", "z", "sr_pass1", 0.18, None, -0.02, 0.3, True),
            ("y", "z", "sr_pass1", -0.02, 0.11, -0.1, 0.05, True),
            # |diff| < MDD but the interval leaves out 0: significant, so no mark (issue 27)
            ("x", "z", "atpr", -0.3, 0.35, -0.5, -0.1, False),
            ("x", "y", "atpr", None, None, None, None, None)]
    frame = pl.DataFrame([dict(zip(("run_a", "run_b", "metric", "diff", "mdd", "test_low", "test_high",
                                    "within_noise"), r),
                               n_tasks=20, confidence=0.95, test_confidence=0.975) for r in rows])
    marks = noise_marks(board, frame)
    assert set(marks) == {("z", "sr_pass1")}  # x is beyond y's noise and z beyond x's on ATPR; the best is never marked
    assert marks[("z", "sr_pass1")].endswith(
        "difference -0.020; its 97.5% interval [-0.100, 0.050] contains 0; MDD 0.110 at 20 tasks")
    assert "with y, the best SR pass@1" in marks[("z", "sr_pass1")]
    assert noise_marks(board.head(1), frame) == {} and noise_marks(board, None) == {}


# --------------------------------------------------------------------------
# End to end on the sample workspace's offline baselines
# --------------------------------------------------------------------------


def _noisy_copy_of_oracle(workspace: Path, flipped: int = 3) -> list[str]:
    """Run ``noisy``: the oracle run with the second attempt of its first
    ``flipped`` tasks turned into a failure at the first checkpoint (the
    summary recomputed); the flipped task ids."""
    source, target = workspace / "reports/oracle", workspace / "reports/noisy"
    shutil.copytree(source, target)
    tasks = pl.read_parquet(target / "tasks.parquet")
    chosen = tasks["task_id"].unique().sort().to_list()[:flipped]
    hit = pl.col("task_id").is_in(chosen) & (pl.col("attempt") == 1)
    changed = {"covered": 0, "accepted_turns": 0, "tpr": 0.0, "lj": 0, "nei": 0.0, "mtl": None, "success": False,
               "end_reason": "rejected", "end_checkpoint": 1}
    tasks = tasks.with_columns(
        *(pl.when(hit).then(pl.lit(value, dtype=tasks.schema[name])).otherwise(pl.col(name)).alias(name)
          for name, value in changed.items()),
        pl.lit("noisy").alias("run_id"))
    tasks.write_parquet(target / "tasks.parquet")
    old = json.loads((target / "summary.json").read_text())
    extra = {key: old[key] for key in ("judge", "fluency", "offline_heuristics", "self_judged") if key in old}
    summary = summarize(tasks.to_dicts(), old["model"], old["k"], {**extra, "run_id": "noisy"})
    (target / "summary.json").write_text(json.dumps(summary))
    return chosen


def test_report_on_the_sample_runs_writes_noise_everywhere(sample_runs_copy, capsys):
    workspace = sample_runs_copy
    _noisy_copy_of_oracle(workspace)
    (workspace / "reports/oracle/judge_consistency.json").write_text(json.dumps(JUDGE_RECORD))
    (workspace / "reports/retrieval/judge_consistency.json").write_text('{"run_id": "retrieval", "item_fl')
    (workspace / "reports/noisy/judge_consistency.json").write_text(json.dumps(JUDGE_RECORD))  # copied: names oracle

    result = report_command(["oracle", "noisy", "retrieval"], workspace, None, 200, 0, prices={})
    out = result["out_dir"]
    broken = [w for w in result["warnings"] if "retrieval/judge_consistency.json" in w]
    assert len(broken) == 1 and "not a readable judge-consistency result" in broken[0]
    assert any("was measured on run 'oracle', not 'noisy'" in w for w in result["warnings"])
    assert not [w for w in result["warnings"] if "summary.json has" in w]  # the noisy run is consistent

    # noise.parquet: one row per run
    frame = pl.read_parquet(out / "noise.parquet")
    assert frame.schema == report_schema.polars_schema("noise")
    assert set(frame["schema_version"]) == {report_schema.SCHEMA_VERSION}
    rows = {r["run_id"]: r for r in frame.iter_rows(named=True)}
    assert list(rows) == ["oracle", "noisy", "retrieval"]
    for run_id, flipping in (("oracle", 0), ("noisy", 3), ("retrieval", 0)):
        row = rows[run_id]
        assert (row["k"], row["tasks_multi"], row["tasks_flipping"]) == (2, 31, flipping)
        assert row["flip_rate"] == approx(flipping / 31)
        assert (row["flip_rate_low"], row["flip_rate_high"]) == approx(wilson_interval(flipping, 31))
        assert row["success_var_within"] == approx(flipping * 0.5 / 31)
    assert rows["oracle"]["judge_measured"] == rows["noisy"]["judge_measured"] == "judge-q"
    assert (rows["oracle"]["judge_item_flip_rate"], rows["oracle"]["judge_sample"]) == (0.1, 40)
    assert all(rows["retrieval"][c] is None for c in JUDGE_NOISE_COLUMNS)

    # paired.parquet: mdd and within_noise
    pairs = {(r["run_a"], r["run_b"], r["metric"]): r for r in pl.read_parquet(out / "paired.parquet").iter_rows(named=True)}
    d = [-0.5] * 3 + [0.0] * 28  # oracle -> noisy, per task: three tasks lose one of their two successes
    close = pairs[("oracle", "noisy", "sr_pass1")]
    assert close["diff"] == approx(-3 / 62)
    assert close["mdd"] == approx((Z_975 + Z_80) * statistics.stdev(d) / math.sqrt(31)) == approx(0.0756, abs=1e-4)
    assert close["within_noise"] is True and pairs[("oracle", "noisy", "atpr")]["within_noise"] is True
    # the judge's measured flip rate (0.05 per verdict, both runs) widens the 97.5% interval
    checkpoints = pl.read_parquet(workspace / "reports/oracle/checkpoints.parquet")
    q = 1 - (1 - JUDGE_RECORD["verdict_flip_rate"]) ** (checkpoints["rr"].is_not_null().sum() / 62)
    assert close["judge_sd"] == approx(math.sqrt(2 * q / 62))
    assert close["test_confidence"] == approx(0.975) and close["verdict"] == "inside_noise"
    assert close["test_low"] < close["ci_low"] and close["test_high"] > close["ci_high"]
    for metric in ("sr_pass1", "atpr"):  # deterministic baselines: every task differs by 1, so no MDD
        far = pairs[("oracle", "retrieval", metric)]
        assert (far["diff"], far["mdd"], far["within_noise"], far["verdict"]) == (-1.0, None, False, "lower")
        assert far["judge_sd"] == approx(math.sqrt(q / 62))  # retrieval's judge file is broken: oracle's alone
        assert far["test_low"] == -1.0  # widened, but a difference of two shares stays in [-1, 1]
        assert pairs[("noisy", "retrieval", metric)]["within_noise"] is False

    # report.json
    manifest = json.loads((out / "report.json").read_text())
    assert "noise.parquet" in manifest["files"]
    assert manifest["noise"]["runs"] == frame.drop("schema_version").to_dicts()
    listed = {(p["run_a"], p["run_b"], p["metric"]): p for p in manifest["noise"]["pairs"]}
    assert len(listed) == 6 and {m for _, _, m in listed} == {"sr_pass1", "atpr"}
    entry = listed[("oracle", "noisy", "sr_pass1")]
    assert {"run_a", "run_b", "metric", "difference", "mdd", "within_noise"} <= set(entry)
    assert (entry["difference"], entry["mdd"], entry["within_noise"]) == (close["diff"], close["mdd"], True)
    assert listed[("oracle", "retrieval", "atpr")]["mdd"] is None

    # report.html: the marks and the Noise section
    page = result["files"]["report.html"].read_text(encoding="utf-8")
    reason = (f"difference -0.048; its 97.5% interval, widened for the judge&#39;s flip rate, "
              f"[{close['test_low']:.3f}, {close['test_high']:.3f}] contains 0; MDD 0.076 at 31 tasks")
    lines = page.splitlines()
    marks = [line for line in lines if '<span class="noise-mark" title=' in line]
    assert len(marks) == 1 and marks[0].count("≈</span>") == 2  # one row's SR pass@1 and ATPR cells
    assert ">noisy</td>" in lines[lines.index(marks[0]) - 1]  # the row of run noisy
    assert f"within the noise of this comparison with oracle, the best SR pass@1: {reason}" in marks[0]
    assert f"within the noise of this comparison with oracle, the best ATPR: {reason}" in marks[0]
    section = page[page.index('<section id="noise">'):]
    section = section[:section.index("</section>")]
    assert 'href="#noise"' in page and "MDD" in section and "flip rate" in section
    assert "judge-q: item flip rate 0.100 [0.04, 0.23], verdict flip rate 0.050 [0.02, 0.10]" in section
    assert section.count("not measured") == 1 and "needs K" not in section
    assert "0.097 [0.03, 0.25]" in section  # noisy: 3 of 31 tasks flip
    assert section.count("within the noise</td>") == 2 and section.count("retrieval lower</td>") == 4
    assert section.count("(97.5% + judge)</td>") == 6

    # the terminal: one line per pair whose SR pass@1 difference is within the noise
    said = reason.replace("&#39;", "'")
    expected = f"SR pass@1: oracle 1.000 vs noisy {59 / 62:.3f}: within the noise ({said})"
    assert noise_lines(result["paired"]) == [expected]
    capsys.readouterr()
    print_report(result)
    printed = capsys.readouterr().out
    assert expected in printed and printed.count("within the noise") == 1
