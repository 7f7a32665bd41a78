"""The decision rule of the report's marks and of ``cirrus gate``
(:mod:`cirrus.report.significance`, ``docs/noise.md``): a difference is
significant when its paired interval, at the stated level (Bonferroni over
the metrics decided together) and widened by the judge's measured flip
rate, leaves out 0; the minimal detectable difference (MDD) plays no part.
Checked on intervals given by hand, then on constructed per-task data whose
answer is known, the issue's case among them (issue 27: SR pass@1 0.344 ->
0.188 on 32 tasks, interval [-0.266, -0.031], was called noise because the
drop was below the MDD)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cirrus.report.loading import load_runs
from cirrus.report.significance import (
    corrected_confidence,
    decide,
    gate_verdict,
    judge_sd,
    level_text,
    outcome_change_bound,
    report_verdict,
    two_sided_z,
    widen,
)
from cirrus.report.uncertainty import minimal_detectable_difference, paired, paired_bootstrap, within_noise
from tests.constructed_runs import judge_consistency, make_tasks, outcomes, write_run, write_workspace

approx = pytest.approx


# --------------------------------------------------------------------------
# The rule on intervals given by hand
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("low", "high", "margin", "side", "report", "gate"), [
    (0.02, 0.30, 0.0, "above", "higher", "non_inferior"),        # leaves out 0, above
    (-0.30, -0.02, 0.0, "below", "lower", "regression"),         # leaves out 0, below
    (-0.10, 0.10, 0.0, "inside", "inside_noise", "inconclusive"),
    (0.0, 0.10, 0.0, "inside", "inside_noise", "inconclusive"),  # an end at 0 holds it
    (-1.0, -1.0, 0.0, "below", "lower", "regression"),           # a degenerate interval decides too
    (-0.04, -0.01, 0.05, "above", None, "non_inferior"),         # significantly lower, within the margin
    (-0.08, -0.01, 0.05, "inside", None, "inconclusive"),        # may be more than the margin: cannot tell
    (-0.20, -0.06, 0.05, "below", None, "regression"),           # lower by more than the margin
    (None, 0.1, 0.0, None, None, None),                          # no interval: no verdict
])
def test_the_rule(low, high, margin, side, report, gate):
    assert decide(low, high, margin) == side
    assert gate_verdict(low, high, margin) == gate
    if margin == 0:
        assert report_verdict(low, high) == report
        assert within_noise(low, high) is (None if report is None else report == "inside_noise")


def test_the_issues_case_is_a_significant_drop_below_the_mdd():
    # ATPR fell by 0.141 with a 95% interval [-0.266, -0.031] (p = 0.026) and an MDD of 0.180: the interval
    # leaves out 0, so the drop is significant; being smaller than the MDD says nothing against it
    diff, low, high, mdd = -0.141, -0.266, -0.031, 0.180
    assert abs(diff) < mdd
    assert report_verdict(low, high) == "lower" and within_noise(low, high) is False
    assert gate_verdict(low, high) == "regression"
    assert gate_verdict(low, high, margin=0.05) == "inconclusive"  # it may or may not be more than 5 points
    assert gate_verdict(low, high, margin=0.3) == "non_inferior"


def test_bad_inputs():
    with pytest.raises(ValueError):
        decide(0.1, -0.1)  # upside down
    with pytest.raises(ValueError):
        decide(-0.1, 0.1, margin=-0.01)
    with pytest.raises(ValueError):
        corrected_confidence(0.95, 0)
    with pytest.raises(ValueError):
        outcome_change_bound(1.5, 2)
    assert decide(float("nan"), 0.1) is None


def test_bonferroni_levels_and_z():
    assert corrected_confidence(0.95, 1) == approx(0.95)
    assert corrected_confidence(0.95, 2) == approx(0.975)
    assert corrected_confidence(0.90, 4) == approx(0.975)
    assert two_sided_z(0.95) == approx(1.959964, abs=1e-6) and two_sided_z(0.975) == approx(2.241403, abs=1e-6)
    assert [level_text(0.95), level_text(0.975), level_text(1 - 0.05 / 3)] == ["95%", "97.5%", "98.33%"]


def test_judge_noise_bound_and_widening():
    # a 5% verdict flip rate, 3 verdicts per attempt: an attempt's outcome changes with chance <= 1 - 0.95^3
    q = 1 - 0.95 ** 3
    assert outcome_change_bound(0.05, 3) == approx(q) == approx(0.142625)
    assert outcome_change_bound(0.0, 3) == 0.0 and outcome_change_bound(0.2, 0) == 0.0
    # both runs measured (64 and 60 scored attempts), or one: sqrt(q_a / n_a + q_b / n_b)
    assert judge_sd(((0.05, 3, 64), (0.05, 3, 60))) == approx(math.sqrt(q / 64 + q / 60))
    assert judge_sd(((0.05, 3, 64), (None, 3, 60))) == approx(math.sqrt(q / 64))
    assert judge_sd(((None, 3, 64), (None, 3, 60))) is None
    # the interval grows by z * sd in quadrature on each side, around the difference
    low, high = widen(-0.1, -0.2, -0.02, 0.03, 0.95)
    z = two_sided_z(0.95)
    assert low == approx(-0.1 - math.hypot(0.1, z * 0.03)) and high == approx(-0.1 + math.hypot(0.08, z * 0.03))
    assert widen(-0.1, -0.2, -0.02, None, 0.95) == (-0.2, -0.02)
    assert widen(-0.98, -1.0, -0.95, 0.05, 0.95)[0] == -1.0  # a difference of shares stays in [-1, 1]


# --------------------------------------------------------------------------
# On constructed per-task data with a known answer
# --------------------------------------------------------------------------


def _issue_pair() -> tuple[np.ndarray, np.ndarray]:
    """32 tasks, one attempt each: the baseline solves 11 (SR 0.344), the
    candidate 6 of those (0.188): five tasks lost, none gained."""
    base = np.zeros(32)
    base[:11] = 1
    cand = base.copy()
    cand[6:11] = 0
    return base, cand


def test_the_issues_sr_drop_is_significant_though_smaller_than_its_mdd():
    base, cand = _issue_pair()
    ones = np.ones(32)
    result = paired_bootstrap(base, ones, cand, ones, n_boot=4000, seed=0, test_confidence=0.975)
    diff = float(result.diff[0])
    assert (float(result.estimate_a[0]), float(result.estimate_b[0])) == approx((11 / 32, 6 / 32))
    assert diff == approx(-5 / 32) == approx(-0.156, abs=1e-3)
    mdd = minimal_detectable_difference(cand - base)
    assert mdd == approx(0.183, abs=1e-3) and abs(diff) < mdd  # the old rule called this "within the noise"
    # a replicate shows no loss only when none of the 5 lost tasks is drawn: (27/32)^32 = 0.4% of the time,
    # under the 2.5% (and the Bonferroni 1.25%) tail, so both intervals end below 0
    assert (27 / 32) ** 32 < 0.0125
    for low, high in ((result.low[0], result.high[0]), (result.test_low[0], result.test_high[0])):
        assert high < 0 and low < diff < high
        assert report_verdict(low, high) == "lower" and gate_verdict(low, high) == "regression"


def test_symmetric_swaps_are_inside_the_noise_and_a_shift_is_not():
    ones = np.ones(40)
    base = np.zeros(40)
    base[:20] = 1
    swapped = base.copy()
    swapped[[0, 1, 2]] = 0
    swapped[[20, 21, 22]] = 1  # three tasks lost, three gained: no true difference
    result = paired_bootstrap(base, ones, swapped, ones, n_boot=2000, seed=0)
    assert result.diff[0] == 0 and report_verdict(result.low[0], result.high[0]) == "inside_noise"
    shifted = base.copy()
    shifted[20:32] = 1  # twelve tasks gained, none lost
    result = paired_bootstrap(base, ones, shifted, ones, n_boot=2000, seed=0)
    assert result.diff[0] == approx(0.3) and report_verdict(result.low[0], result.high[0]) == "higher"


@pytest.fixture
def constructed(tmp_path: Path) -> Path:
    """40 tasks, K = 2: ``base`` fails tasks 0-3; ``drop`` also fails 4-11
    (8 more: SR -0.2); ``swap`` fails 0-1 and 4-5 instead (no difference)."""
    tasks = make_tasks(40)
    ws = write_workspace(tmp_path, tasks)
    write_run(ws, "base", tasks, outcomes(tasks, 2, {i: [0, 0] for i in range(4)}))
    write_run(ws, "drop", tasks, outcomes(tasks, 2, {i: [0, 0] for i in range(12)}))
    write_run(ws, "swap", tasks, outcomes(tasks, 2, {i: [0, 0] for i in (0, 1, 4, 5)}))
    return ws


def test_paired_table_verdicts_on_constructed_runs(constructed: Path):
    runs = load_runs(constructed, ["base", "drop", "swap"])
    table = {(r["run_a"], r["run_b"], r["metric"]): r for r in paired(runs, n_boot=2000, seed=0).iter_rows(named=True)}
    drop = table[("base", "drop", "sr_pass1")]
    assert drop["diff"] == approx(-0.2) and drop["test_confidence"] == approx(0.975)
    assert drop["verdict"] == "lower" and drop["within_noise"] is False and drop["test_high"] < 0
    swap = table[("base", "swap", "sr_pass1")]
    assert swap["diff"] == 0 and swap["verdict"] == "inside_noise" and swap["within_noise"] is True
    back = table[("drop", "swap", "atpr")]  # swap is 0.2 higher than drop
    assert back["diff"] == approx(0.2) and back["verdict"] == "higher"
    # a metric outside the family (the report decides SR pass@1 and ATPR) is read at the stated 95%
    tia = table[("base", "drop", "tia")]
    assert tia["test_confidence"] == 0.95 and (tia["test_low"], tia["test_high"]) == (tia["ci_low"], tia["ci_high"])


def test_the_judges_flip_rate_can_turn_a_drop_into_noise(constructed: Path):
    runs = load_runs(constructed, ["base", "drop"])
    plain = {r["metric"]: r for r in paired(runs, n_boot=2000, seed=0).iter_rows(named=True)}["sr_pass1"]
    noisy = {r["metric"]: r for r in paired(runs, n_boot=2000, seed=0, judge_flips={"base": 0.2, "drop": 0.2})
             .iter_rows(named=True)}["sr_pass1"]
    # base: 36 tasks x 2 attempts cover both checkpoints (2 verdicts), 4 x 2 are rejected at the first (1)
    q_base = outcome_change_bound(0.2, (72 * 2 + 8) / 80)
    q_drop = outcome_change_bound(0.2, (56 * 2 + 24) / 80)
    assert noisy["judge_sd"] == approx(math.sqrt(q_base / 80 + q_drop / 80))
    assert (noisy["ci_low"], noisy["ci_high"]) == (plain["ci_low"], plain["ci_high"])  # the bootstrap's own
    assert noisy["test_low"] < plain["test_low"] and noisy["test_high"] > plain["test_high"]
    assert plain["verdict"] == "lower" and noisy["verdict"] == "inside_noise"
    # the report reads the rate from judge_consistency.json
    judge_consistency(constructed, "base", 0.2)
    judge_consistency(constructed, "drop", 0.2)
    from cirrus.report.command import report_command

    result = report_command(["base", "drop"], constructed, None, 2000, 0, prices={})
    row = {r["metric"]: r for r in result["paired"].iter_rows(named=True)}["sr_pass1"]
    assert row["judge_sd"] == approx(noisy["judge_sd"]) and row["verdict"] == "inside_noise"
