"""The report's charts: matplotlib figures (Agg, no pyplot state) drawn in
one style and inlined in the page as SVG; each takes computed tables or
views (:mod:`cirrus.report.views`) and returns an ``<svg>`` element.

* :mod:`~cirrus.report.charts.base`: :func:`figure`, :func:`svg`,
  :func:`colors`, :func:`grouped_bars`, :func:`legend` and the style :data:`RC`;
* :mod:`~cirrus.report.charts.runs`: the leaderboard, the breakdowns, SR
  pass@1 against AMTL and cost, TPR by depth, the failed turns;
* :mod:`~cirrus.report.charts.dataset`: the Dataset section;
* :mod:`~cirrus.report.charts.subtask`: Figure 6 of the subtask runs.
"""

from __future__ import annotations

from cirrus.report.charts.base import RC, colors, figure, grouped_bars, legend, svg
from cirrus.report.charts.dataset import dataset_charts
from cirrus.report.charts.runs import (
    breakdown_chart,
    cost_chart,
    depth_chart,
    failure_chart,
    latency_chart,
    leaderboard_chart,
)
from cirrus.report.charts.subtask import figure6_svg

__all__ = ["RC", "breakdown_chart", "colors", "cost_chart", "dataset_charts", "depth_chart", "failure_chart",
           "figure", "figure6_svg", "grouped_bars", "latency_chart", "leaderboard_chart", "legend", "svg"]
