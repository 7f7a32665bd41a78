"""Figure 6 of the subtask runs (:mod:`cirrus.report.subtask`): pass@1,
pass@K and AMTL by reference reply type."""

from __future__ import annotations

import math
from typing import Any

from cirrus.report.charts.base import colors as run_colors
from cirrus.report.charts.base import figure, grouped_bars, legend, svg
from cirrus.report.labels import SUBTASK_METRIC_TITLES
from cirrus.report.subtask import REPLY_TYPE_METRICS

__all__ = ["figure6_svg"]


def figure6_svg(frame: Any) -> str | None:
    """Figure 6 as an inline ``<svg>``: per reference reply type, bars of
    pass@1, pass@K and AMTL for every run, with their intervals (the style of
    the page's other charts); None when no reply type has a subtask.
    ``frame``: ``subtask_by_reply_type``."""
    present = frame.filter(frame["n_subtasks"] > 0) if len(frame) else frame
    if not len(present):
        return None
    order: list[str] = []
    sizes: dict[str, int] = {}
    for row in present.sort("segment_order").iter_rows(named=True):
        if row["reply_type"] not in order:
            order.append(row["reply_type"])
        sizes[row["reply_type"]] = max(sizes.get(row["reply_type"], 0), int(row["n_subtasks"]))
    runs = list(dict.fromkeys(present["run_id"].to_list()))
    ks = set(present["k"].to_list())
    colors = run_colors(len(runs))
    labels = {g: f"{g}\n(n={sizes[g]})" for g in order}
    fig = figure(6.0, 2.3 * len(REPLY_TYPE_METRICS) + 0.4)
    axes = fig.subplots(len(REPLY_TYPE_METRICS), 1, squeeze=False)[:, 0]
    for ax, metric in zip(axes, REPLY_TYPE_METRICS):
        values, cis = {}, {}
        for row in present.iter_rows(named=True):
            key = (row["run_id"], labels[row["reply_type"]])
            values[key] = math.nan if row[metric] is None else float(row[metric])
            if row[f"{metric}_low"] is not None and row[f"{metric}_high"] is not None:
                cis[key] = (float(row[f"{metric}_low"]), float(row[f"{metric}_high"]))
        amtl = metric == "amtl"
        top = max([v for v in values.values() if not math.isnan(v)] + [hi for _, hi in cis.values()] + [1.0])
        grouped_bars(ax, [labels[g] for g in order], runs, values, cis, colors,
                     ylim=(0, top * 1.1) if amtl else (0, 1.05))
        title = SUBTASK_METRIC_TITLES[metric]
        if metric == "pass_at_k" and len(ks) == 1:
            title = f"pass@{next(iter(ks))}"
        ax.set_ylabel("AMTL (tokens)" if amtl else title)
    legend(fig, runs, colors)
    return svg(fig, "chart-subtask-reply-type")
