"""The leaderboard as the page and the terminal show it: the intervals by
run (:func:`ci_lookup`), the leaderboard rows with their intervals (on the
page with the ``≈`` marks), the paired differences, and which runs the
quality chart can place."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cirrus.report.labels import METRIC_TITLES
from cirrus.report.views.cells import as_float, fmt_value, page_value

if TYPE_CHECKING:
    import polars as pl

__all__ = ["CiLookup", "ci_lookup", "latency_chart_runs", "leaderboard_rows", "overall_interval", "paired_rows",
           "terminal_leaderboard_rows", "terminal_paired_rows"]

# {(run_id, dimension, group, metric): (low, high)}
CiLookup = Mapping[tuple[str, str, str, str], tuple[float, float]]


def ci_lookup(intervals: pl.DataFrame | None) -> dict[tuple[str, str, str, str], tuple[float, float]]:
    """``{(run_id, dimension, group, metric): (low, high)}`` of the defined intervals."""
    if intervals is None or intervals.is_empty():
        return {}
    out = {}
    for row in intervals.iter_rows(named=True):
        low, high = as_float(row.get("ci_low")), as_float(row.get("ci_high"))
        if not (math.isnan(low) or math.isnan(high)):
            out[(row["run_id"], row["dimension"], str(row["segment"]), row["metric"])] = (low, high)
    return out


def overall_interval(cis: CiLookup, run_id: str, metric: str) -> tuple[float, float] | None:
    """The run's interval of ``metric`` over all its tasks, if defined."""
    return cis.get((run_id, "overall", "all", metric))


def leaderboard_rows(board: pl.DataFrame, cis: CiLookup, self_judged: Mapping[str, bool] | None = None,
                     marks: Mapping[tuple[str, str], str] | None = None) -> list[dict[str, Any]]:
    """The page's leaderboard: per run its cells, each score with its
    interval (``ci``) and ``≈`` tooltip (``noise``, :func:`~cirrus.report.views.noise.noise_marks`)."""
    def with_ci(run_id: str, metric: str, value: Any) -> dict[str, str | None]:
        low, high = cis.get((run_id, "overall", "all", metric), (None, None))
        return {"value": page_value(value), "ci": f"[{low:.2f}, {high:.2f}]" if low is not None else "",
                "noise": (marks or {}).get((run_id, metric))}

    rows = []
    for row in board.iter_rows(named=True):
        run = row["run_id"]
        cost = None if row.get("cost_total") is None else f"{row['cost_total']:.4f} {row.get('currency') or ''}"
        amtl_ci = overall_interval(cis, run, "amtl")
        rows.append({
            "run_id": run, "model": row.get("model"), "agent_label": row.get("agent_label"), "k": row.get("k"),
            "tasks": row.get("n_tasks"),
            "errors": row.get("errors"),
            "sr_pass1": with_ci(run, "sr_pass1", row.get("sr_pass1")),
            "sr_pass_at_k": with_ci(run, "sr_pass_at_k", row.get("sr_pass_at_k")),
            "pass_hat_k": with_ci(run, "pass_hat_k", row.get("pass_hat_k")),
            "atpr": with_ci(run, "atpr", row.get("atpr")),
            "alj": with_ci(run, "alj", row.get("alj")),
            "anei": with_ci(run, "anei", row.get("anei")),
            "amtl": {"value": page_value(row.get("amtl"), 1),
                     "ci": f"[{amtl_ci[0]:.1f}, {amtl_ci[1]:.1f}]" if amtl_ci else "", "noise": None},
            "cost": cost or "–", "judge": row.get("judge") or "–",
            "self_judged": bool((self_judged or {}).get(run)),
        })
    return rows


def paired_rows(paired: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The page's paired differences: one row per pair of runs and metric,
    with its verdict in words (:func:`~cirrus.report.views.noise.verdict_text`)."""
    from cirrus.report.views.noise import verdict_text

    rows: list[dict[str, Any]] = []
    if paired is None or paired.is_empty():
        return rows
    for row in paired.iter_rows(named=True):
        rows.append({
            "run_a": row["run_a"], "run_b": row["run_b"],
            # the pair's K (the smaller of the two runs' K unless --k), never a bare "K"
            "metric": (METRIC_TITLES[row["metric"]].replace("K", str(row["k"]))
                       if row["metric"] in ("sr_pass_at_k", "pass_hat_k") and row.get("k") is not None
                       else METRIC_TITLES.get(row["metric"], row["metric"])),
            "n_tasks": row["n_tasks"], "diff": page_value(row["diff"]),
            "ci": "–" if row["ci_low"] is None else f"[{page_value(row['ci_low'])}, {page_value(row['ci_high'])}]",
            "p": page_value(row["p_value"], 4), "reading": verdict_text(row)})
    return rows


def latency_chart_runs(board: pl.DataFrame, runs: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(drawn, left out)``: the runs SR pass@1 against AMTL can place (both
    defined; a run without an accepted turn has no AMTL), and the others."""
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    drawn = [r for r in runs
             if not math.isnan(as_float(rows[r].get("amtl"))) and not math.isnan(as_float(rows[r].get("sr_pass1")))]
    return drawn, [r for r in runs if r not in drawn]


def terminal_leaderboard_rows(board: pl.DataFrame, cis: CiLookup) -> list[list[str]]:
    """The terminal's leaderboard, a row of cells per run: run, model, tasks
    (errors), SR pass@1 with its interval, SR pass@K and pass^K with the
    run's K, ATPR with its interval, AMTL, cost and cost per success."""
    def with_ci(run_id: str, metric: str, value: float | None) -> str:
        low, high = overall_interval(cis, run_id, metric) or (None, None)
        return fmt_value(value) + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")

    def priced(value: float | None, currency: str | None) -> str:
        return "-" if value is None else f"{value:.4f} {currency or ''}".rstrip()

    return [[row["run_id"], row["model"], f"{row['n_tasks']} ({row['errors']})",
             with_ci(row["run_id"], "sr_pass1", row["sr_pass1"]),
             f"{fmt_value(row['sr_pass_at_k'])} (K={row['k']})", f"{fmt_value(row['pass_hat_k'])} (K={row['k']})",
             with_ci(row["run_id"], "atpr", row["atpr"]), fmt_value(row["amtl"], 1),
             priced(row["cost_total"], row["currency"]), priced(row["cost_per_success"], row["currency"])]
            for row in board.iter_rows(named=True)]


def terminal_paired_rows(paired: pl.DataFrame, metrics: Sequence[str] = ("sr_pass1", "atpr")) -> list[list[str]]:
    """The terminal's paired differences of ``metrics``: run_a, run_b,
    metric, tasks, difference, its interval, p, MDD, and the verdict with
    the interval it read (``docs/noise.md``): ``b lower [-0.300, -0.020]
    @97.5%``, ``≈ [-0.100, 0.050] @97.5%``."""
    import polars as pl

    from cirrus.report.significance import level_text
    from cirrus.report.views.noise import tested

    rows = []
    for row in paired.filter(pl.col("metric").is_in(list(metrics))).iter_rows(named=True):
        interval = "-" if row["ci_low"] is None else f"[{fmt_value(row['ci_low'])}, {fmt_value(row['ci_high'])}]"
        low, high, level = tested(row)
        verdict = row.get("verdict")
        if verdict is None and row.get("within_noise") is not None:
            verdict = "inside_noise" if row["within_noise"] else None
        word = {"inside_noise": "≈", "higher": "b higher", "lower": "b lower"}.get(verdict or "", "-")
        if word != "-" and low is not None and high is not None:
            widened = "+judge" if row.get("judge_sd") else ""
            word += f" [{fmt_value(low)}, {fmt_value(high)}] @{level_text(level)}{widened}"
        rows.append([row["run_a"], row["run_b"], row["metric"], str(row["n_tasks"]), fmt_value(row["diff"]),
                     interval, fmt_value(row["p_value"], 4), fmt_value(row["mdd"]), word])
    return rows
