"""The charts that compare the runs of a report: the leaderboard, every
breakdown, SR pass@1 against AMTL and against cost, TPR by checkpoint depth
and the failed turns by category.  They draw what the views computed
(:mod:`cirrus.report.views`); which runs a chart leaves out is the views' to
say."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cirrus.report.charts.base import figure, grouped_bars, legend, svg
from cirrus.report.labels import METRIC_TITLES
from cirrus.report.views.breakdowns import breakdown_groups
from cirrus.report.views.cells import as_float

if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.views.leaderboard import CiLookup

__all__ = ["breakdown_chart", "cost_chart", "depth_chart", "failure_chart", "latency_chart", "leaderboard_chart"]


def leaderboard_chart(board: pl.DataFrame, cis: CiLookup, runs: Sequence[str], colors: Sequence[Any]) -> str:
    """SR pass@1, ATPR, SR pass@K and pass^K per run with their intervals
    (pass@K and pass^K only when every run has the same K)."""
    metrics = ("sr_pass1", "atpr", "sr_pass_at_k", "pass_hat_k")
    fig = figure(6.5, 2.8)
    ax = fig.add_subplot()
    values, ci = {}, {}
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    k = {r["k"] for r in rows.values()}
    if len(k) > 1:  # bars of several K under one label would compare unlike numbers: left out
        metrics = ("sr_pass1", "atpr")
    labels = [METRIC_TITLES[m].replace("K", str(next(iter(k)))) if len(k) == 1 and m != "sr_pass1" else METRIC_TITLES[m]
              for m in metrics]
    for run in runs:
        for m, label in zip(metrics, labels):
            values[(run, label)] = as_float(rows.get(run, {}).get(m))
            if (run, "overall", "all", m) in cis:
                ci[(run, label)] = cis[(run, "overall", "all", m)]
    grouped_bars(ax, labels, runs, values, ci, colors)
    ax.set_ylabel("score")
    legend(fig, runs, colors)
    return svg(fig, "chart-leaderboard")


def breakdown_chart(frame: pl.DataFrame, dimension: str, metrics: Sequence[str], cis: CiLookup,
                    runs: Sequence[str], colors: Sequence[Any], width: float = 6.0) -> str:
    """Bars of ``metrics`` per group of ``dimension`` (the groups with a task
    in some run, :func:`~cirrus.report.views.breakdowns.breakdown_groups`)."""
    found = breakdown_groups(frame)
    groups, sizes = found.drawn, found.sizes
    fig = figure(width, 2.3 * len(metrics) + 0.4)
    axes = fig.subplots(len(metrics), 1, squeeze=False)[:, 0]
    labels = {g: f"{g}\n(n={sizes[g]})" for g in groups}
    for ax, metric in zip(axes, metrics):
        values, ci = {}, {}
        for row in frame.iter_rows(named=True):
            group = str(row["segment"])
            if group in labels:
                values[(row["run_id"], labels[group])] = as_float(row.get(metric))
                key = (row["run_id"], dimension, group, metric)
                if key in cis:
                    ci[(row["run_id"], labels[group])] = cis[key]
        grouped_bars(ax, [labels[g] for g in groups], runs, values, ci, colors)
        ax.set_ylabel(METRIC_TITLES.get(metric, metric))
        if len(groups) > 5:
            ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    legend(fig, runs, colors)
    return svg(fig, f"chart-{dimension}")


def latency_chart(board: pl.DataFrame, cis: CiLookup, runs: Sequence[str], drawn: Sequence[str],
                  colors: Sequence[Any]) -> str | None:
    """SR pass@1 (y) against AMTL (x) of the ``drawn`` runs
    (:func:`~cirrus.report.views.leaderboard.latency_chart_runs`), one point
    each with its intervals; None when there is none."""
    if not drawn:
        return None
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    return _sr_against(rows, runs, drawn, colors, cis, "amtl", "chart-quality-latency",
                       xlabel="AMTL: mean output tokens per accepted turn (token-based latency; lower = faster)",
                       x_intervals=True, min_span=1.0, floor_share=0.0)


def cost_chart(board: pl.DataFrame, cis: CiLookup, runs: Sequence[str], drawn: Sequence[str],
               currency: str | None, colors: Sequence[Any]) -> str | None:
    """SR pass@1 (y) against the run's total cost (x) of the ``drawn`` runs
    (:func:`~cirrus.report.views.cost.cost_chart_runs`), one labelled point
    each; None when there is none."""
    if not drawn:
        return None
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    return _sr_against(rows, runs, drawn, colors, cis, "cost_total", "chart-cost-quality",
                       xlabel=f"cost of the run ({currency or 'no currency: nothing priced'}; every role)",
                       x_intervals=False, min_span=1e-6, floor_share=0.05)  # a free run stays visible at 0


def _sr_against(rows: Mapping[str, Mapping[str, Any]], runs: Sequence[str], drawn: Sequence[str],
                colors: Sequence[Any], cis: CiLookup, x_metric: str, name: str, *, xlabel: str, x_intervals: bool,
                min_span: float, floor_share: float) -> str:
    """SR pass@1 (y) against ``x_metric`` (x) of the ``drawn`` runs, one
    labelled point each with its intervals (on x too with ``x_intervals``);
    the x axis starts at ``-floor_share`` of the data's span (0: at zero)."""
    fig = figure(6.5, 3.6)
    ax = fig.add_subplot()
    ax.grid(True, axis="both")
    for run in drawn:
        color = colors[runs.index(run)]
        x, y = as_float(rows[run][x_metric]), as_float(rows[run]["sr_pass1"])
        ylo, yhi = cis.get((run, "overall", "all", "sr_pass1"), (y, y))
        xerr = None
        if x_intervals:
            xlo, xhi = cis.get((run, "overall", "all", x_metric), (x, x))
            xerr = [[max(x - xlo, 0)], [max(xhi - x, 0)]]
        ax.errorbar([x], [y], xerr=xerr, yerr=[[max(y - ylo, 0)], [max(yhi - y, 0)]], fmt="o", color=color,
                    ecolor=color, elinewidth=1, capsize=3, markersize=7, label=run)
        ax.annotate(run, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("SR pass@1")
    ax.set_ylim(-0.05, 1.05)
    xs = [as_float(rows[r][x_metric]) for r in drawn]
    span = max(max(xs) - min(xs), max(xs) * 0.2, min_span)
    ax.set_xlim(max(min(xs) - span * 0.6, -span * floor_share), max(xs) + span * 0.6)
    return svg(fig, name)


def depth_chart(depths: pl.DataFrame, runs: Sequence[str], colors: Sequence[Any]) -> str | None:
    """TPR by checkpoint depth (:func:`~cirrus.report.views.depth.depth_table`),
    a line per run; None for an empty table."""
    if depths.is_empty():
        return None
    fig = figure(6.5, 3.2)
    ax = fig.add_subplot()
    ax.grid(True, axis="both")
    for run, color in zip(runs, colors):
        part = depths.filter(depths["run_id"] == run).sort("depth")
        if part.is_empty():
            continue
        ax.plot(part["depth"].to_list(), [as_float(v) for v in part["share"].to_list()], marker="o", color=color,
                label=run, linewidth=1.6)
    top = int(depths["depth"].max())
    ns = {row["depth"]: row["n"] for row in depths.filter(depths["run_id"] == runs[0]).iter_rows(named=True)}
    ax.set_xticks(range(1, top + 1), [f"{d}\n(n={ns.get(d, 0)})" for d in range(1, top + 1)])
    ax.set_xlabel(f"checkpoint k (n: ok attempts of tasks with at least k checkpoints, run {runs[0]})")
    ax.set_ylabel("share of attempts covering k")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(frameon=False, loc="best")
    return svg(fig, "chart-depth")


def failure_chart(view: Mapping[str, Any], colors: Mapping[str, Any]) -> str | None:
    """The failed turns by category (:func:`~cirrus.report.views.failures.failure_view`),
    a bar per run; None when no run has a categorised turn.  ``colors``: ``{run_id: colour}``."""
    if not view["rows"]:
        return None
    runs = view["runs"]
    groups = [row["failure"] for row in view["rows"]]
    values = {(run, row["failure"]): float(row["counts"][run]) for row in view["rows"] for run in runs}
    fig = figure(6.5, 3.0)
    ax = fig.add_subplot()
    grouped_bars(ax, groups, runs, values, {}, [colors[run] for run in runs], ylim=None)
    ax.set_ylabel("failed turns")
    if len(groups) > 3:
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    legend(fig, runs, [colors[run] for run in runs])
    return svg(fig, "chart-failures")
