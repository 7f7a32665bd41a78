"""Bootstrap uncertainty: how much a score would move on another draw of
tasks.

The unit resampled is the **task**: a replicate draws as many tasks as there
are, with replacement, and all attempts (and judged turns) of a drawn task go
with it, since attempts of one task are not independent.  Every metric of
the report is a ratio of per-task sums, ``sum_t S_t / sum_t N_t`` (see
:func:`cirrus.report.tables.task_stats`), so a replicate with task counts
``w`` (how often each task was drawn) is ``w @ S / w @ N``: the whole
bootstrap is a few matrix products, computed in chunks to bound memory.

Core functions (pure numpy, no I/O):

* :func:`ratio_bootstrap`: percentile confidence intervals of ratio metrics;
* :func:`paired_bootstrap`: the difference of two runs on common tasks, with
  the same resampled tasks for both, and a two-sided p-value;
* :func:`bootstrap_mean`: the interval of a plain mean of per-task values;
* :func:`minimal_detectable_difference`: how large a true paired difference
  these tasks would reliably detect (a power figure, not a test);
* :func:`within_noise`: whether an observed difference is within the noise,
  by the rule of :mod:`cirrus.report.significance` (its interval contains 0);
* :func:`flip_counts` / :func:`attempt_flips`: how often a task's outcome
  changes between attempts of one run.

Table builders: :func:`intervals`, :func:`paired` and :func:`noise` (schemas
``intervals``, ``paired`` and ``noise`` of :mod:`cirrus.report.schema`).
What the noise figures mean and how to read them: ``docs/noise.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import NormalDist

import numpy as np
import polars as pl

from cirrus.judges.calibration import wilson_interval
from cirrus.report.loading import JUDGE_NOISE_COLUMNS, Run
from cirrus.report.schema import conform, empty
from cirrus.report.significance import (
    INSIDE_NOISE,
    corrected_confidence,
    judge_sd,
    level_text,
    report_verdict,
    widen,
)
from cirrus.report.tables import (
    DIMENSIONS,
    HEADLINE_METRICS,
    OVERALL,
    REPLY_TYPE_METRICS,
    TASK_DIMENSIONS,
    check_k,
    ordered_groups,
    task_stats,
)

from cirrus.report.defaults import DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, DEFAULT_SEED  # noqa: F401  (re-exported)
MDD_ALPHA = 0.05  # two-sided level of the test the minimal detectable difference is for
MDD_POWER = 0.80  # the chance of detecting a true difference of that size
MDD_METRICS = ("sr_pass1", "atpr")  # the paired metrics with a minimal detectable difference
# the metrics the report decides on together (Bonferroni over them; docs/noise.md)
DECISION_METRICS = MDD_METRICS
# per-attempt means in [0, 1] whose interval can take the judge's measured noise (significance.judge_sd)
JUDGED_METRICS = ("sr_pass1", "atpr")
_CELLS_PER_CHUNK = 1 << 22  # replicates x tasks held at once (32 MiB of float64)


@dataclass(frozen=True)
class Interval:
    """Per metric (arrays of shape ``(M,)``; NaN where undefined):
    ``estimate`` on the data, percentile interval ``low`` .. ``high``,
    bootstrap standard error ``se``, and ``n_valid`` replicates in which the
    metric was defined."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    se: np.ndarray
    n_valid: np.ndarray


@dataclass(frozen=True)
class PairedDifference:
    """Per metric: ``estimate_a``, ``estimate_b`` on the common tasks,
    ``diff = estimate_b - estimate_a``, its percentile interval ``low`` ..
    ``high``, two-sided ``p_value`` of "no difference", ``n_valid``; and
    ``test_low`` .. ``test_high``: the percentile interval of the same
    replicates at ``test_confidence`` (the level a decision reads, e.g.
    Bonferroni-corrected; :mod:`cirrus.report.significance`), equal to
    ``low`` .. ``high`` when none was asked."""

    estimate_a: np.ndarray
    estimate_b: np.ndarray
    diff: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    n_valid: np.ndarray
    test_low: np.ndarray | None = None
    test_high: np.ndarray | None = None
    test_confidence: float | None = None


def _check(n_boot: int, confidence: float) -> None:
    if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1, got {n_boot!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


def _as_matrix(values: np.ndarray | Sequence, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name} must be a (tasks,) or (tasks, metrics) array")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def resample_counts(n_items: int, n_boot: int, seed: int | np.random.Generator) -> Iterator[np.ndarray]:
    """Chunks of a ``(n_boot, n_items)`` matrix of bootstrap counts: row
    ``b`` says how often each item was drawn in replicate ``b`` (``n_items``
    draws with replacement; each row sums to ``n_items``).  The same seed
    gives the same matrix whatever the chunking."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    chunk = max(1, min(n_boot, _CELLS_PER_CHUNK // max(n_items, 1)))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        drawn = rng.integers(0, n_items, size=(size, n_items))
        offsets = (drawn + np.arange(size)[:, None] * n_items).ravel()
        yield np.bincount(offsets, minlength=size * n_items).reshape(size, n_items).astype(np.float64)


def _ratios(numerators: np.ndarray, denominators: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominators > 0, numerators / np.where(denominators > 0, denominators, 1.0), np.nan)


def _replicates(sums: np.ndarray, counts: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, M)`` replicate ratios, NaN where a replicate's count is 0."""
    out = np.empty((n_boot, sums.shape[1]))
    start = 0
    for weights in resample_counts(sums.shape[0], n_boot, seed):
        out[start:start + len(weights)] = _ratios(weights @ sums, weights @ counts)
        start += len(weights)
    return out


def _percentiles(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    alpha = (1 - confidence) / 2
    valid = np.isfinite(replicates)
    n_valid = valid.sum(axis=0)
    low = np.full(replicates.shape[1], np.nan)
    high = low.copy()
    se = low.copy()
    for m in np.flatnonzero(n_valid):
        column = replicates[valid[:, m], m]
        low[m], high[m] = np.quantile(column, [alpha, 1 - alpha])
        se[m] = column.std(ddof=1) if len(column) > 1 else 0.0
    return low, high, se, n_valid


def ratio_bootstrap(sums: np.ndarray | Sequence, counts: np.ndarray | Sequence, *, n_boot: int = DEFAULT_N_BOOT,
                    seed: int = DEFAULT_SEED, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Percentile bootstrap intervals of the ratio metrics
    ``sum_t sums[t, m] / sum_t counts[t, m]``, resampling the rows (tasks).

    ``sums``, ``counts``: ``(T, M)`` (or ``(T,)`` for one metric) arrays of
    finite values, counts >= 0.  A metric with no count is NaN throughout.
    """
    _check(n_boot, confidence)
    sums, counts = _as_matrix(sums, "sums"), _as_matrix(counts, "counts")
    if sums.shape != counts.shape:
        raise ValueError(f"sums {sums.shape} and counts {counts.shape} differ in shape")
    estimate = _ratios(sums.sum(axis=0), counts.sum(axis=0))
    if sums.shape[0] == 0:
        nan = np.full(sums.shape[1], np.nan)
        return Interval(estimate, nan, nan.copy(), nan.copy(), np.zeros(sums.shape[1], dtype=np.int64))
    low, high, se, n_valid = _percentiles(_replicates(sums, counts, n_boot, seed), confidence)
    return Interval(estimate, low, high, se, n_valid)


def bootstrap_mean(values: np.ndarray | Sequence, *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                   confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The interval of the mean of one value per task (``(T,)`` or
    ``(T, M)``)."""
    values = _as_matrix(values, "values")
    return ratio_bootstrap(values, np.ones_like(values), n_boot=n_boot, seed=seed, confidence=confidence)


def paired_bootstrap(sums_a: np.ndarray | Sequence, counts_a: np.ndarray | Sequence,
                     sums_b: np.ndarray | Sequence, counts_b: np.ndarray | Sequence, *,
                     n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                     confidence: float = DEFAULT_CONFIDENCE,
                     test_confidence: float | None = None) -> PairedDifference:
    """Paired bootstrap of ``metric(b) - metric(a)`` over the same tasks
    (row ``t`` of every array is the same task): each replicate draws tasks
    once and scores both runs on them, so what the runs share (a task that is
    hard for both) cancels out.

    ``test_confidence``: a second level read from the same replicates
    (``test_low`` .. ``test_high``); default: ``confidence``.

    p-value (two-sided, of "no difference"): the bootstrap distribution of
    the difference shifted to mean zero under the null,
    ``(1 + #{|d* - d| >= |d|}) / (1 + n_valid)`` with ``d`` the observed
    difference and ``d*`` the replicates.  Identical runs give 1; a
    difference seen in (nearly) every replicate gives about ``1 / n_boot``.
    """
    _check(n_boot, confidence)
    if test_confidence is None:
        test_confidence = confidence
    _check(n_boot, test_confidence)
    arrays = [_as_matrix(x, name) for x, name in ((sums_a, "sums_a"), (counts_a, "counts_a"),
                                                   (sums_b, "sums_b"), (counts_b, "counts_b"))]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(f"paired arrays differ in shape: {[a.shape for a in arrays]}")
    sums_a, counts_a, sums_b, counts_b = arrays
    metrics = sums_a.shape[1]
    estimate_a = _ratios(sums_a.sum(axis=0), counts_a.sum(axis=0))
    estimate_b = _ratios(sums_b.sum(axis=0), counts_b.sum(axis=0))
    diff = estimate_b - estimate_a
    nan = np.full(metrics, np.nan)
    if sums_a.shape[0] == 0:
        return PairedDifference(estimate_a, estimate_b, diff, nan, nan.copy(), nan.copy(),
                                np.zeros(metrics, dtype=np.int64), nan.copy(), nan.copy(), test_confidence)
    both = _replicates(np.hstack([sums_a, sums_b]), np.hstack([counts_a, counts_b]), n_boot, seed)
    replicates = both[:, metrics:] - both[:, :metrics]
    low, high, _, n_valid = _percentiles(replicates, confidence)
    test_low, test_high = (low, high) if test_confidence == confidence else _percentiles(replicates,
                                                                                         test_confidence)[:2]
    p_value = nan.copy()
    for m in np.flatnonzero(n_valid):
        if not np.isfinite(diff[m]):
            continue
        d = replicates[np.isfinite(replicates[:, m]), m]
        # a tolerance so that float noise around a zero difference counts as "as extreme"
        tolerance = 1e-12 * max(1.0, abs(diff[m]))
        extreme = np.count_nonzero(np.abs(d - diff[m]) >= abs(diff[m]) - tolerance)
        p_value[m] = min(1.0, (1 + extreme) / (1 + len(d)))
    return PairedDifference(estimate_a, estimate_b, diff, low, high, p_value, n_valid, test_low.copy(),
                            test_high.copy(), test_confidence)


# --------------------------------------------------------------------------
# Noise: the minimal detectable difference and flips between attempts
# --------------------------------------------------------------------------


def mdd_multiplier(alpha: float = MDD_ALPHA, power: float = MDD_POWER) -> float:
    """``z_{1 - alpha/2} + z_{power}`` of the standard normal distribution
    (2.8016 for alpha 0.05 and power 0.80)."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be between 0 and 1, got {alpha!r}, {power!r}")
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)


def minimal_detectable_difference(differences: np.ndarray | Sequence[float], *, alpha: float = MDD_ALPHA,
                                  power: float = MDD_POWER) -> float | None:
    """The minimal detectable difference (MDD) of a paired comparison of two
    runs on ``n`` common tasks, from the per-task differences ``d_t``
    (run b's value of task t minus run a's; for SR and ATPR the task's mean
    over its ok attempts of ``success`` / TPR)::

        MDD = (z_{1 - alpha/2} + z_{power}) * sd(d) / sqrt(n)

    with ``sd`` the sample standard deviation (ddof 1).  It is the smallest
    true mean difference a two-sided test at level ``alpha`` detects with
    probability ``power`` (defaults 0.05 and 0.80: ``2.80 * sd / sqrt(n)``);
    an observed gap below it is one such a comparison cannot tell from noise.

    Assumption: the normal approximation over tasks: the tasks are a random
    draw, their differences independent, and their mean close to normal
    (reasonable from a few dozen tasks; for fewer it is optimistic).  The
    per-task mean weighs tasks equally, the report's ratio metrics weigh them
    by their ok attempts: the same where every task has as many ok attempts.

    None (undefined) when ``n < 2`` or ``sd`` is 0 (every task differs by the
    same amount: nothing to estimate the noise from).
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1:
        raise ValueError("differences must be a (tasks,) array")
    if not np.all(np.isfinite(d)):
        raise ValueError("differences hold NaN or infinite values")
    multiplier = mdd_multiplier(alpha, power)
    if len(d) < 2:
        return None
    sd = float(np.std(d, ddof=1))
    # a constant difference gives sd 0 up to the rounding of its mean
    if not sd > 1e-12 * max(1.0, float(np.max(np.abs(d)))):
        return None
    return multiplier * sd / math.sqrt(len(d))


def within_noise(ci_low: float | None, ci_high: float | None) -> bool | None:
    """Whether a paired difference is within the noise of its comparison:
    its interval ``ci_low .. ci_high`` (read at the comparison's level,
    see :mod:`cirrus.report.significance`) contains 0, ends included.
    None when the interval is undefined.  The MDD plays no part: a
    difference smaller than the MDD whose interval leaves out 0 is
    significant all the same (the MDD is about the power to find a true
    difference, not about an observed one)."""
    verdict = report_verdict(ci_low, ci_high)
    return None if verdict is None else verdict == INSIDE_NOISE


@dataclass(frozen=True)
class FlipRate:
    """How often tasks change outcome between attempts of one run:
    ``tasks_multi`` tasks with >= 2 ok attempts, ``tasks_flipping`` of them
    with both a success and a failure, ``rate`` = their share with its 95%
    Wilson interval ``low`` .. ``high``, and ``variance``: the mean over those
    tasks of the unbiased within-task variance of success ``c (n - c) / (n
    (n - 1))``.  Undefined figures (no such task) are None."""

    tasks_multi: int
    tasks_flipping: int
    rate: float | None
    low: float | None
    high: float | None
    variance: float | None


def flip_counts(attempts: Sequence[int], successes: Sequence[int]) -> FlipRate:
    """:class:`FlipRate` from per-task counts: task ``t`` had ``attempts[t]``
    ok attempts of which ``successes[t]`` succeeded.  Tasks with fewer than 2
    ok attempts cannot flip and are left out."""
    n = np.asarray(attempts, dtype=np.int64).reshape(-1)
    c = np.asarray(successes, dtype=np.int64).reshape(-1)
    if n.shape != c.shape or np.any(c < 0) or np.any(c > n):
        raise ValueError("successes must be between 0 and the attempts of each task")
    multi = n >= 2
    n, c = n[multi], c[multi]
    total = int(len(n))
    flipping = int(np.count_nonzero((c > 0) & (c < n)))
    if total == 0:
        return FlipRate(0, 0, None, None, None, None)
    low, high = wilson_interval(flipping, total) or (None, None)
    variance = float(np.mean(c * (n - c) / (n * (n - 1.0))))
    return FlipRate(total, flipping, flipping / total, low, high, variance)


def attempt_flips(attempts: pl.DataFrame | pl.LazyFrame) -> FlipRate:
    """:func:`flip_counts` of an attempts table (``task_id``, ``status``,
    ``success``: ``tasks.parquet``'s rows); only ``status = ok`` rows count."""
    per_task = (attempts.lazy().filter(pl.col("status") == "ok")
                .group_by("task_id")
                .agg(pl.len().alias("n"), pl.col("success").cast(pl.Int64).sum().alias("c"))
                .collect())
    return flip_counts(per_task["n"].to_numpy(), per_task["c"].to_numpy())


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def _metrics(dimension: str) -> tuple[str, ...]:
    return REPLY_TYPE_METRICS if dimension == "reply_type" else HEADLINE_METRICS


def _arrays(stats: pl.DataFrame, metrics: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    sums = stats.select(f"{m}__sum" for m in metrics).to_numpy().astype(np.float64)
    counts = stats.select(f"{m}__n" for m in metrics).to_numpy().astype(np.float64)
    return sums.reshape(len(stats), len(metrics)), counts.reshape(len(stats), len(metrics))


def _value(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def intervals(runs: Sequence[Run], *, k: int | None = None, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
              confidence: float = DEFAULT_CONFIDENCE,
              dimensions: Sequence[str] = (OVERALL, *DIMENSIONS)) -> pl.DataFrame:
    """Bootstrap intervals (schema ``intervals``): for every run, every
    dimension in ``dimensions`` (``overall`` = the whole run) and every group
    with at least one ok attempt, one row per metric: the headline metrics
    (:data:`~cirrus.report.tables.HEADLINE_METRICS`) for task-level
    dimensions, :data:`~cirrus.report.tables.REPLY_TYPE_METRICS` for
    ``reply_type``.  Each (run, dimension, group) is resampled on its own
    tasks with ``seed``."""
    _check(n_boot, confidence)
    check_k(k)
    rows = []
    for dimension in dimensions:
        if dimension not in (OVERALL, *DIMENSIONS):
            raise ValueError(f"unknown dimension {dimension!r}")
        metrics = _metrics(dimension)
        for run in runs:
            run_k = k or run.k
            stats = task_stats([run], dimension, run_k)
            if stats.is_empty():
                continue
            order = _group_order(dimension, stats)
            for group in order:
                part = stats.filter(pl.col("segment") == group)
                result = ratio_bootstrap(*_arrays(part, metrics), n_boot=n_boot, seed=seed, confidence=confidence)
                for i, metric in enumerate(metrics):
                    rows.append({
                        "run_id": run.run_id, "model": run.model, "dimension": dimension, "segment": group,
                        "metric": metric, "k": run_k if dimension in (OVERALL, *TASK_DIMENSIONS) else None,
                        "estimate": _value(result.estimate[i]), "ci_low": _value(result.low[i]),
                        "ci_high": _value(result.high[i]), "se": _value(result.se[i]), "confidence": confidence,
                        "n_tasks": part["task_id"].n_unique(), "n_boot": int(result.n_valid[i]), "seed": seed,
                    })
    if not rows:
        return empty("intervals")
    return conform(pl.DataFrame(rows, schema_overrides={"k": pl.Int64, "estimate": pl.Float64,
                                                        "ci_low": pl.Float64, "ci_high": pl.Float64,
                                                        "se": pl.Float64}), "intervals")


def _group_order(dimension: str, stats: pl.DataFrame) -> list[str]:
    found = stats["segment"].unique().to_list()
    return [g for g in ordered_groups(dimension, found) if g in found]


def paired(runs: Sequence[Run], *, k: int | None = None, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
           confidence: float = DEFAULT_CONFIDENCE, family: Sequence[str] = DECISION_METRICS,
           judge_flips: Mapping[str, float | None] | None = None) -> pl.DataFrame:
    """Paired bootstrap differences (schema ``paired``) of the headline
    metrics for every pair of runs (``run_a`` before ``run_b`` in the given
    order), over their common tasks: those with at least one ok attempt in
    both.  K of pass@K: ``k``, else the smaller of the two runs' K.

    ``mdd``: :func:`minimal_detectable_difference` of the per-task
    differences of :data:`MDD_METRICS` (each task's mean over its ok
    attempts, ``m__sum / m__n`` of :func:`~cirrus.report.tables.task_stats`:
    the per-task quantities the bootstrap resamples); null for the other
    metrics.

    The verdict (:mod:`cirrus.report.significance`): the metrics of
    ``family`` are decided together, each read at the Bonferroni level
    ``1 - (1 - confidence) / len(family)``; any other metric on its own at
    ``confidence``.  ``judge_flips``: ``{run_id: the judge's verdict flip
    rate}`` where measured; it widens the interval of
    :data:`JUDGED_METRICS` (``judge_sd``).  ``test_confidence``,
    ``test_low`` .. ``test_high``: the interval read; ``verdict``:
    ``higher`` / ``lower`` (run_b against run_a) or ``inside_noise``;
    ``within_noise``: ``verdict = inside_noise``."""
    _check(n_boot, confidence)
    check_k(k)
    family = tuple(dict.fromkeys(family))
    unknown = [m for m in family if m not in HEADLINE_METRICS]
    if unknown or not family:
        raise ValueError(f"family must name metrics of {', '.join(HEADLINE_METRICS)}, got {list(family)!r}")
    family_level = corrected_confidence(confidence, len(family))
    flips = judge_flips or {}
    rows = []
    metrics = HEADLINE_METRICS
    for a, b in combinations(runs, 2):
        pair_k = k or min(a.k, b.k)
        stats_a = task_stats([a], OVERALL, pair_k)
        stats_b = task_stats([b], OVERALL, pair_k)
        common = stats_a.join(stats_b.select("task_id"), on="task_id", how="semi").sort("task_id")
        other = stats_b.join(common.select("task_id"), on="task_id", how="semi").sort("task_id")
        result = paired_bootstrap(*_arrays(common, metrics), *_arrays(other, metrics), n_boot=n_boot, seed=seed,
                                  confidence=confidence, test_confidence=family_level)
        mdd = {m: minimal_detectable_difference(_task_means(other, m) - _task_means(common, m)) for m in MDD_METRICS}
        judged = judge_sd(((flips.get(a.run_id), *_judging(common)), (flips.get(b.run_id), *_judging(other))))
        for i, metric in enumerate(metrics):
            diff, low, high = (_value(x[i]) for x in (result.diff, result.low, result.high))
            level, test_low, test_high = confidence, low, high
            if metric in family:
                level, test_low, test_high = family_level, _value(result.test_low[i]), _value(result.test_high[i])
            extra = judged if metric in JUDGED_METRICS else None
            if extra and diff is not None and test_low is not None and test_high is not None:
                test_low, test_high = widen(diff, test_low, test_high, extra, level)
            verdict = report_verdict(test_low, test_high)
            rows.append({
                "run_a": a.run_id, "run_b": b.run_id, "model_a": a.model, "model_b": b.model, "metric": metric,
                "k": pair_k, "n_tasks": len(common), "estimate_a": _value(result.estimate_a[i]),
                "estimate_b": _value(result.estimate_b[i]), "diff": diff, "ci_low": low, "ci_high": high,
                "p_value": _value(result.p_value[i]), "confidence": confidence, "n_boot": int(result.n_valid[i]),
                "seed": seed, "mdd": mdd.get(metric), "within_noise": within_noise(test_low, test_high),
                "test_confidence": level, "test_low": test_low, "test_high": test_high, "judge_sd": extra,
                "verdict": verdict,
            })
    if not rows:
        return empty("paired")
    return conform(pl.DataFrame(rows, schema_overrides={**{c: pl.Float64 for c in (
        "estimate_a", "estimate_b", "diff", "ci_low", "ci_high", "p_value", "mdd", "test_confidence", "test_low",
        "test_high", "judge_sd")}, "within_noise": pl.Boolean, "verdict": pl.Utf8}), "paired")


def _judging(stats: pl.DataFrame) -> tuple[float, int]:
    """``(verdicts per scored attempt, scored attempts)`` of one run's
    ``task_stats`` rows: judged turns with a coverage verdict (``rr__n``)
    over ok attempts (``sr_pass1__n``)."""
    attempts = float(stats["sr_pass1__n"].sum()) if stats.height else 0.0
    verdicts = float(stats["rr__n"].sum()) if stats.height else 0.0
    return (verdicts / attempts if attempts else 0.0), int(attempts)


def _task_means(stats: pl.DataFrame, metric: str) -> np.ndarray:
    """Each task's ``metric__sum / metric__n`` (rows of ``task_stats``; every
    row of a common task has a count >= 1 for SR pass@1 and ATPR)."""
    sums, counts = _arrays(stats, [metric])
    return _ratios(sums[:, 0], counts[:, 0])


def noise(runs: Sequence[Run], judge: Mapping[str, Mapping[str, object] | None] | None = None) -> pl.DataFrame:
    """The noise table (schema ``noise``): one row per run with its task-level
    flip rate across attempts (:func:`attempt_flips`) and, where ``judge``
    has the run (``{run_id: the columns of
    :func:`~cirrus.report.loading.parse_judge_consistency`}``), the judge's
    own noise as ``cirrus judge-consistency`` measured it; null otherwise."""
    rows = []
    for run in runs:
        flips = attempt_flips(run.tasks.select("task_id", "status", "success"))
        measured = (judge or {}).get(run.run_id) or {}
        rows.append({"run_id": run.run_id, "model": run.model, "k": run.k, "tasks_multi": flips.tasks_multi,
                     "tasks_flipping": flips.tasks_flipping, "flip_rate": flips.rate, "flip_rate_low": flips.low,
                     "flip_rate_high": flips.high, "success_var_within": flips.variance,
                     **{c: measured.get(c) for c in JUDGE_NOISE_COLUMNS}})
    if not rows:
        return empty("noise")
    floats = ("flip_rate", "flip_rate_low", "flip_rate_high", "success_var_within",
              *(c for c in JUDGE_NOISE_COLUMNS if "rate" in c))
    return conform(pl.DataFrame(rows, schema_overrides={**{c: pl.Float64 for c in floats},
                                                        "judge_measured": pl.Utf8, "judge_sample": pl.Int64,
                                                        "judge_repeats": pl.Int64}), "noise")


def noise_reason(diff: float, mdd: float | None, ci_low: float | None, ci_high: float | None, n_tasks: int,
                 confidence: float = DEFAULT_CONFIDENCE, *, judge_sd: float | None = None) -> str:
    """Why a difference got its verdict, in words, for the page and the
    terminal: ``difference -0.040; its 97.5% interval [-0.110, 0.030]
    contains 0; MDD 0.110 at 30 tasks``.  ``ci_low`` .. ``ci_high``: the
    interval the verdict read (``test_low`` .. ``test_high``) at its level
    ``confidence``; ``judge_sd``: whether the judge's noise widened it."""
    size = f"difference {diff:+.3f}"
    tail = f"MDD {mdd:.3f} at {n_tasks} tasks" if mdd is not None else f"no MDD, at {n_tasks} tasks"
    if ci_low is None or ci_high is None:
        return f"{size}, no interval; {tail}"
    widened = ", widened for the judge's flip rate," if judge_sd else ""
    holds = "contains 0" if ci_low <= 0 <= ci_high else "leaves out 0"
    return f"{size}; its {level_text(confidence)} interval{widened} [{ci_low:.3f}, {ci_high:.3f}] {holds}; {tail}"
