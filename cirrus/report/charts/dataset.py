"""The Dataset section's charts, drawn from the quartiles and counts
:func:`cirrus.stats.compute_stats` computed: categories, reply types and top
tools as bars, turns / checkpoints / input tokens per task as box plots, the
shares of tasks with tool calls and images."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cirrus.report.charts.base import colors, figure, svg
from cirrus.report.views.cells import as_float

if TYPE_CHECKING:
    from cirrus.stats import DatasetStats

__all__ = ["dataset_charts"]


def dataset_charts(stats: DatasetStats) -> dict[str, str]:
    """The Dataset section's charts (empty for a dataset without tasks)."""
    if stats.tasks == 0:
        return {}
    color = colors(1)[0]
    charts = {
        "categories": _hbars(list(stats.categories), list(stats.categories.values()), "chart-dataset-categories",
                             "tasks", color),
        "distributions": _distribution_chart(stats, color),
        "shares": _shares_chart(stats, color),
        "reply_types": _hbars(list(stats.reply_types), list(stats.reply_types.values()),
                              "chart-dataset-reply-types", "checkpoints (reference reply type)", color),
    }
    if stats.top_tools:
        charts["tools"] = _hbars([t.name for t in stats.top_tools], [t.calls for t in stats.top_tools],
                                 "chart-dataset-tools", "reference tool calls", color)
    return charts


def _hbars(names: Sequence[str], counts: Sequence[int], prefix: str, xlabel: str, color: Any) -> str:
    """Horizontal bars, largest first from the top, each with its count."""
    fig = figure(6.0, 0.45 + 0.26 * max(len(names), 2))
    ax = fig.add_subplot()
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")
    y = list(range(len(names)))
    ax.barh(y, list(counts), color=color, height=0.7)
    ax.set_yticks(y, list(names))
    ax.invert_yaxis()
    top = max(counts) if counts else 1
    for yi, count in zip(y, counts):
        ax.text(count + top * 0.01, yi, str(count), va="center", fontsize=8)
    ax.set_xlim(0, top * 1.12 + 0.5)
    ax.set_xlabel(xlabel)
    return svg(fig, prefix)


def _distribution_chart(stats: DatasetStats, color: Any) -> str:
    """Box plots drawn from the quartiles ``cirrus.stats`` computed (whiskers
    at min and max, the mean as a dot): turns and checkpoints per task on one
    axis, input tokens on its own."""
    fig = figure(6.5, 2.6)
    left, right = fig.subplots(1, 2, width_ratios=[2, 1])

    def box(dist: Any, label: str) -> dict[str, Any]:
        return {"label": label, "whislo": dist.min, "q1": dist.p25, "med": dist.p50, "q3": dist.p75,
                "whishi": dist.max, "mean": dist.mean, "fliers": []}

    props = {"patch_artist": True, "showmeans": True, "widths": 0.5,
             "boxprops": {"facecolor": color, "alpha": 0.55},
             "meanprops": {"marker": "o", "markerfacecolor": "#ffffff", "markeredgecolor": "#333333"},
             "medianprops": {"color": "#1d2430"}}
    left.bxp([box(stats.turns, "turns"), box(stats.checkpoints_per_task, "checkpoints")], **props)
    left.set_ylabel("per task")
    right.bxp([box(stats.input_tokens, "input tokens")], **props)
    right.set_ylabel("tokens per task")
    return svg(fig, "chart-dataset-distributions")


def _shares_chart(stats: DatasetStats, color: Any) -> str:
    fig = figure(6.0, 1.3)
    ax = fig.add_subplot()
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")
    labels = ["with tool calls", "with images (OCR)"]
    parts = [stats.tasks_with_tool_calls, stats.tasks_with_images]
    shares = [as_float(stats.tool_call_share), as_float(stats.image_share)]
    ax.barh([0, 1], [1.0, 1.0], color="#eeeeee", height=0.6)
    ax.barh([0, 1], shares, color=color, height=0.6)
    ax.set_yticks([0, 1], labels)
    ax.invert_yaxis()
    for yi, (part, share) in enumerate(zip(parts, shares)):
        inside = share > 0.6  # the label goes inside a long bar, in white
        ax.text(share - 0.01 if inside else share + 0.01, yi, f"{part} of {stats.tasks} ({share:.1%})", va="center",
                ha="right" if inside else "left", fontsize=8, color="#ffffff" if inside else "#1d2430")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of tasks")
    return svg(fig, "chart-dataset-shares")
