"""When a paired difference between two runs counts: the one decision rule
behind the report's marks (``verdict`` and ``within_noise`` of
``paired.parquet``, the ``≈`` of the page) and ``cirrus gate``.

The rule (``docs/noise.md``, "Is a difference significant?"):

1. **The interval.**  The paired bootstrap interval of ``diff = b - a`` on
   the common tasks (:func:`cirrus.report.uncertainty.paired_bootstrap`),
   at the level the comparison states (0.95 by default).
2. **Several metrics.**  When one comparison decides on ``m`` metrics at
   once, each interval is read at the Bonferroni level ``1 - (1 - level) /
   m`` (:func:`corrected_confidence`; two metrics at 95%: 97.5% intervals),
   so that the chance of calling *any* of them significant when none
   differs stays at most ``1 - level``.
3. **The judge's noise.**  Where ``cirrus judge-consistency`` measured the
   judge's verdict flip rate ``f`` of a run, the interval is widened by
   the standard deviation that re-judging could add (:func:`judge_sd`,
   :func:`widen`).
4. **The verdict** (:func:`decide`): the difference is above a tolerated
   drop ``-margin`` when the interval's lower end is above it, below when
   its upper end is, and inside otherwise.  With ``margin = 0`` (the
   report): significantly higher, significantly lower, or within the noise
   (the interval contains 0).  :func:`report_verdict` and
   :func:`gate_verdict` only name the three outcomes.

The minimal detectable difference (MDD) is not part of the rule: it says how
large a *true* difference these tasks would reliably find (a power figure,
for planning), not whether an observed one is real.

Pure functions of numbers; no I/O, no polars.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

__all__ = ["ABOVE", "BELOW", "GATE_VERDICTS", "HIGHER", "INCONCLUSIVE", "INSIDE", "INSIDE_NOISE", "LOWER",
           "NON_INFERIOR", "REGRESSION", "REPORT_VERDICTS", "corrected_confidence", "decide", "gate_verdict",
           "judge_sd", "level_text", "outcome_change_bound", "report_verdict", "two_sided_z", "widen"]

Side = Literal["above", "below", "inside"]
ABOVE: Side = "above"
BELOW: Side = "below"
INSIDE: Side = "inside"

# the report's names (run_b against run_a)
HIGHER, LOWER, INSIDE_NOISE = "higher", "lower", "inside_noise"
REPORT_VERDICTS: dict[Side, str] = {ABOVE: HIGHER, BELOW: LOWER, INSIDE: INSIDE_NOISE}
# cirrus gate's names (candidate against baseline)
NON_INFERIOR, REGRESSION, INCONCLUSIVE = "non_inferior", "regression", "inconclusive"
GATE_VERDICTS: dict[Side, str] = {ABOVE: NON_INFERIOR, BELOW: REGRESSION, INSIDE: INCONCLUSIVE}


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def decide(low: float | None, high: float | None, margin: float = 0.0) -> Side | None:
    """The rule: ``above`` when ``low > -margin``, ``below`` when ``high <
    -margin``, ``inside`` otherwise (the interval holds ``-margin``, its
    ends included); None when the interval is undefined.

    ``low`` .. ``high``: the interval of ``b - a`` read at the comparison's
    (corrected, judge-widened) level; ``margin`` >= 0: the tolerated drop."""
    if not (_finite(margin) and margin >= 0):  # type: ignore[operator]
        raise ValueError(f"margin must be a number >= 0, got {margin!r}")
    if not (_finite(low) and _finite(high)):
        return None
    if low > high:  # type: ignore[operator]
        raise ValueError(f"interval [{low}, {high}] is upside down")
    if low > -margin:  # type: ignore[operator]
        return ABOVE
    if high < -margin:  # type: ignore[operator]
        return BELOW
    return INSIDE


def report_verdict(low: float | None, high: float | None) -> str | None:
    """:func:`decide` with no margin, in the report's words: ``higher``
    (the interval lies above 0), ``lower`` (below 0) or ``inside_noise``."""
    side = decide(low, high)
    return None if side is None else REPORT_VERDICTS[side]


def gate_verdict(low: float | None, high: float | None, margin: float = 0.0) -> str | None:
    """:func:`decide` in ``cirrus gate``'s words: ``non_inferior`` (the
    lower end is above ``-margin``), ``regression`` (the upper end is below
    ``-margin``; with no margin: below 0) or ``inconclusive``."""
    side = decide(low, high, margin)
    return None if side is None else GATE_VERDICTS[side]


def corrected_confidence(confidence: float, metrics: int) -> float:
    """Bonferroni: the level each of ``metrics`` intervals is read at so
    that the family keeps ``confidence``: ``1 - (1 - confidence) / metrics``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if not isinstance(metrics, int) or isinstance(metrics, bool) or metrics < 1:
        raise ValueError(f"metrics must be an int >= 1, got {metrics!r}")
    return 1 - (1 - confidence) / metrics


def level_text(confidence: float) -> str:
    """``95%``, ``97.5%``: a confidence level as the page and the terminal write it."""
    return f"{confidence * 100:.4g}%"


def two_sided_z(confidence: float) -> float:
    """``z_{1 - (1 - confidence) / 2}``: 1.960 for 0.95, 2.241 for 0.975."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def outcome_change_bound(flip_rate: float, verdicts_per_attempt: float) -> float:
    """The chance that re-judging changes an attempt's outcome, at most:
    ``1 - (1 - f) ** m`` for a verdict flip rate ``f`` and ``m`` judge
    verdicts per attempt (any one flipped verdict may change it)."""
    if not (_finite(flip_rate) and 0 <= flip_rate <= 1):
        raise ValueError(f"flip_rate must be between 0 and 1, got {flip_rate!r}")
    if not (_finite(verdicts_per_attempt) and verdicts_per_attempt >= 0):
        raise ValueError(f"verdicts_per_attempt must be >= 0, got {verdicts_per_attempt!r}")
    return 1 - (1 - flip_rate) ** verdicts_per_attempt


def judge_sd(sides: tuple[tuple[float | None, float, int], tuple[float | None, float, int]]) -> float | None:
    """The standard deviation the judge's measured noise can add to a
    difference of two per-attempt means in [0, 1] (SR pass@1, ATPR).

    ``sides``: per run ``(f, m, n)``: its judge's verdict flip rate (None
    when not measured), verdicts per scored attempt, scored attempts.  An
    attempt's value changes under re-judging with chance at most ``q =``
    :func:`outcome_change_bound` ``(f, m)``, and by at most 1, so the
    run's mean moves with variance at most ``q / n``; the two runs are
    judged independently: ``sqrt(q_a / n_a + q_b / n_b)``.  A run without a
    measured flip rate adds nothing; None when neither has one."""
    if all(flip is None for flip, _, _ in sides):
        return None
    variance = 0.0
    for flip, verdicts, attempts in sides:
        if flip is None or attempts <= 0:
            continue
        variance += outcome_change_bound(flip, verdicts) / attempts
    return math.sqrt(variance)


def widen(diff: float, low: float, high: float, extra_sd: float | None, confidence: float,
          limits: tuple[float, float] = (-1.0, 1.0)) -> tuple[float, float]:
    """The interval ``low`` .. ``high`` around ``diff`` with an independent
    error of standard deviation ``extra_sd`` added: each half-width ``h``
    becomes ``sqrt(h**2 + (z * extra_sd)**2)``, ``z`` of the interval's
    two-sided ``confidence``, then kept inside ``limits`` (a difference of
    two shares lies in [-1, 1]).  Unchanged without ``extra_sd`` (or 0)."""
    if not extra_sd:
        return low, high
    spread = two_sided_z(confidence) * extra_sd
    wide_low, wide_high = diff - math.hypot(diff - low, spread), diff + math.hypot(high - diff, spread)
    return max(limits[0], wide_low), min(limits[1], wide_high)
