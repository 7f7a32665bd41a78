"""Noise as the page and the terminal show it: the leaderboard cells within
the noise of their comparison with the best run (:func:`noise_marks`), the
Noise section's rows (:func:`noise_views`) and the terminal's lines
(:func:`noise_lines`); see ``docs/noise.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cirrus.report.labels import METRIC_TITLES
from cirrus.report.views.cells import fmt_value, page_interval, page_value

if TYPE_CHECKING:
    import polars as pl

__all__ = ["noise_lines", "noise_marks", "noise_views", "reason_of", "tested", "verdict_text"]


def tested(row: Mapping[str, Any]) -> tuple[float | None, float | None, float]:
    """``(low, high, level)``: the interval a paired row's verdict reads
    (``test_low`` .. ``test_high`` at ``test_confidence``), or, for a row
    without them, its ``ci_low`` .. ``ci_high`` at ``confidence``."""
    if row.get("test_confidence") is not None:
        return row.get("test_low"), row.get("test_high"), row["test_confidence"]
    return row.get("ci_low"), row.get("ci_high"), row.get("confidence") or 0.95


def reason_of(row: Mapping[str, Any]) -> str:
    """:func:`~cirrus.report.uncertainty.noise_reason` of a paired row."""
    from cirrus.report.uncertainty import noise_reason

    low, high, level = tested(row)
    return noise_reason(row["diff"], row.get("mdd"), low, high, row["n_tasks"], level, judge_sd=row.get("judge_sd"))


def noise_marks(board: pl.DataFrame, paired: pl.DataFrame | None,
                metrics: Sequence[str] = ("sr_pass1", "atpr")) -> dict[tuple[str, str], str]:
    """``{(run_id, metric): tooltip}`` of the leaderboard cells to mark ``≈``:
    runs whose difference to the best run on ``metric`` (the highest value;
    the first of a tie) is within the noise of their paired comparison
    (``within_noise`` of ``paired``: the interval its verdict reads
    contains 0; see ``docs/noise.md``)."""
    if paired is None or paired.is_empty() or board.height < 2:
        return {}
    pairs = {(r["run_a"], r["run_b"], r["metric"]): r for r in paired.iter_rows(named=True)}
    marks = {}
    for metric in metrics:
        values = [(r["run_id"], r[metric]) for r in board.iter_rows(named=True) if r.get(metric) is not None]
        if len(values) < 2:
            continue
        best = max(values, key=lambda v: v[1])[0]
        for run_id, _ in values:
            row = pairs.get((best, run_id, metric)) or pairs.get((run_id, best, metric))
            if run_id == best or row is None or not row.get("within_noise"):
                continue
            marks[(run_id, metric)] = (f"within the noise of this comparison with {best}, the best "
                                       f"{METRIC_TITLES[metric]}: {reason_of(row)}")
    return marks


def verdict_text(row: Mapping[str, Any]) -> str:
    """A paired row's verdict in words: ``within the noise``, ``b higher``,
    ``b lower`` (run_b against run_a), or ``–`` without one."""
    verdict = row.get("verdict")
    if verdict is None:
        within = row.get("within_noise")
        return "–" if within is None else ("within the noise" if within else "beyond the noise")
    return {"inside_noise": "within the noise", "higher": f"{row['run_b']} higher",
            "lower": f"{row['run_b']} lower"}.get(verdict, verdict)


def noise_views(noise: pl.DataFrame, paired: pl.DataFrame | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows of the Noise section: per run, and per pair of runs (SR pass@1 and ATPR)."""
    from cirrus.report.significance import level_text
    from cirrus.report.uncertainty import MDD_METRICS

    runs = []
    for row in noise.iter_rows(named=True):
        judge = None
        if row["judge_measured"] is not None:
            judge = {"name": row["judge_measured"], "sample": page_value(row["judge_sample"]),
                     "repeats": page_value(row["judge_repeats"]),
                     "item": page_interval(row["judge_item_flip_rate"], row["judge_item_flip_rate_low"],
                                           row["judge_item_flip_rate_high"]),
                     "verdict": page_interval(row["judge_verdict_flip_rate"], row["judge_verdict_flip_rate_low"],
                                              row["judge_verdict_flip_rate_high"])}
        runs.append({"run_id": row["run_id"], "k": row["k"], "tasks_multi": row["tasks_multi"],
                     "tasks_flipping": row["tasks_flipping"],
                     "flip": None if row["flip_rate"] is None else page_interval(
                         row["flip_rate"], row["flip_rate_low"], row["flip_rate_high"]),
                     "variance": page_value(row["success_var_within"]), "judge": judge})
    pairs = []
    if paired is not None:
        for row in paired.iter_rows(named=True):
            if row["metric"] not in MDD_METRICS:
                continue
            low, high, level = tested(row)
            widened = " + judge" if row.get("judge_sd") else ""
            pairs.append({"run_a": row["run_a"], "run_b": row["run_b"], "metric": METRIC_TITLES[row["metric"]],
                          "n_tasks": row["n_tasks"], "diff": page_value(row["diff"]),
                          "ci": ("–" if row["ci_low"] is None
                                 else f"[{page_value(row['ci_low'])}, {page_value(row['ci_high'])}]"),
                          "tested": ("–" if low is None or high is None
                                     else f"[{page_value(low)}, {page_value(high)}] ({level_text(level)}{widened})"),
                          "p": page_value(row.get("p_value"), 4),
                          "mdd": page_value(row["mdd"]), "within": verdict_text(row),
                          "within_noise": row["within_noise"]})
    return runs, pairs


def noise_lines(paired_table: pl.DataFrame | None, metric: str = "sr_pass1") -> list[str]:
    """One line per pair of runs whose ``metric`` difference is within the
    noise, e.g. ``SR pass@1: a 0.620 vs b 0.580: within the noise (difference
    -0.040; its 97.5% interval [-0.110, 0.030] contains 0; MDD 0.110 at 30
    tasks)``."""
    import polars as pl

    if paired_table is None:
        return []
    lines = []
    for row in paired_table.filter((pl.col("metric") == metric) & pl.col("within_noise")).iter_rows(named=True):
        lines.append(f"{METRIC_TITLES.get(metric, metric)}: {row['run_a']} {fmt_value(row['estimate_a'])} vs "
                     f"{row['run_b']} {fmt_value(row['estimate_b'])}: within the noise ({reason_of(row)})")
    return lines
