"""What every chart of the report is drawn with: matplotlib figures (Agg,
no pyplot state) in one style, inlined in the page as SVG.

* :func:`figure`: a new figure, laid out with constrained layout;
* :func:`svg`: a figure as an ``<svg>`` element to inline (ids prefixed,
  no fixed size), drawn with :data:`RC`;
* :func:`colors`: ``n`` run colours (tab10);
* :func:`grouped_bars`: bars per group, one per run, with interval whiskers;
* :func:`legend`: the run legend above the plots.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["RC", "colors", "figure", "grouped_bars", "legend", "svg"]


def figure(width: float, height: float) -> Any:
    """A new matplotlib figure of ``width`` x ``height`` inches."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


RC = {
    "svg.fonttype": "none",  # text stays text: small, selectable, no font files needed
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "svg.hashsalt": "cirrus-report",
}


def svg(fig: Any, prefix: str) -> str:
    """The figure as an ``<svg>`` element to inline: no XML prolog, no fixed
    size (it scales with the page), and every id prefixed so that several
    charts in one page never share an id."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)  # RDF boilerplate
    # ids: id="x", url(#x), href="#x"
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}-{m.group(1)}"', text)
    # responsive: drop the fixed width / height of the root element, keep its viewBox
    head_end = text.index(">")
    width = re.search(r'\swidth="([0-9.]+)pt"', text[:head_end])
    head = re.sub(r'\s(width|height)="[^"]*"', "", text[:head_end])
    head += f' class="chart" role="img" aria-label="{prefix}"'
    if width:  # never wider than its natural size (1 pt = 4/3 CSS px)
        head += f' style="max-width: {float(width.group(1)) * 4 / 3:.0f}px"'
    return head + text[head_end:]


def colors(n: int) -> list[Any]:
    """``n`` run colours of the tab10 map (repeating after ten)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def grouped_bars(ax: Any, groups: Sequence[str], runs: Sequence[str], values: dict[tuple[str, str], float],
                  cis: dict[tuple[str, str], tuple[float, float]], colors: Sequence[Any], *,
                  ylim: tuple[float, float] | None = (0, 1.05)) -> None:
    """Bars of ``values[(run, group)]`` on ``ax``: per group one bar per run
    (in ``colors``), with ``cis[(run, group)] = (low, high)`` as whiskers; a
    missing value is an ``n/a`` bar."""
    import numpy as np

    n = max(len(runs), 1)
    width = 0.8 / n
    x = np.arange(len(groups))
    for i, run in enumerate(runs):
        heights = np.array([values.get((run, g), math.nan) for g in groups], dtype=float)
        lows, highs = [], []
        for g, h in zip(groups, heights):
            low, high = cis.get((run, g), (math.nan, math.nan))
            if math.isnan(h) or math.isnan(low):
                lows.append(0.0)
                highs.append(0.0)
            else:
                lows.append(max(h - low, 0.0))
                highs.append(max(high - h, 0.0))
        offset = (i - (n - 1) / 2) * width
        has_ci = any(lows) or any(highs) or any((run, g) in cis for g in groups)
        ax.bar(x + offset, np.nan_to_num(heights, nan=0.0), width * 0.92, color=colors[i], label=run,
               yerr=np.array([lows, highs]) if has_ci else None,
               error_kw={"ecolor": "#333333", "elinewidth": 1, "capsize": 3})
        for xi, h in zip(x + offset, heights):
            if math.isnan(h):
                ax.text(xi, 0.01, "n/a", ha="center", va="bottom", fontsize=7, color="#888888", rotation=90)
    ax.set_xticks(x, list(groups))
    if ylim:
        ax.set_ylim(*ylim)


def legend(fig: Any, runs: Sequence[str], colors: Sequence[Any]) -> None:
    """One legend entry per run, above the figure's plots."""
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=r) for r, c in zip(runs, colors)]
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(runs), 6), frameon=False)
