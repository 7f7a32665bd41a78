"""The subtask runs' tables (Table 4 and Figure 6 of
:mod:`cirrus.report.subtask`) as a page or terminal shows them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cirrus.report.labels import SUBTASK_METRIC_TITLES
from cirrus.report.subtask import (
    BY_REPLY_TYPE_FILE,
    BY_TOKENS_FILE,
    REPLY_TYPE_METRICS,
    SUBTASK_REPORT_FILES,
    TOKEN_METRICS,
)
from cirrus.report.views.cells import interval_text

__all__ = ["section_tables", "table_views"]


def table_views(tables: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What a page or terminal shows of the subtask tables: per file,
    ``{"title", "columns": [...], "rows": [[str, ...]]}``, every score with
    its interval (``0.812 [0.70, 0.90]``), K named in the pass@K header of
    each row's run."""
    views = {}
    specs = ((BY_TOKENS_FILE, "band", TOKEN_METRICS,
              "Table 4: subtasks by the agent's input tokens (system prompt, knowledge, tools, real history + query)"),
             (BY_REPLY_TYPE_FILE, "reply_type", REPLY_TYPE_METRICS, "Figure 6: subtasks by reference reply type"))
    for name, label, metrics, title in specs:
        frame = tables.get(name)
        if frame is None:
            continue
        columns = ["run", "model", label.replace("_", " "), "tasks", "subtasks", "errors",
                   *(f"{SUBTASK_METRIC_TITLES[m]} [95% CI]" for m in metrics)]
        rows = []
        for row in frame.sort("run_id", "segment_order", maintain_order=True).iter_rows(named=True):
            if not row["n_subtasks"]:
                continue
            cells = [interval_text(row[m], row[f"{m}_low"], row[f"{m}_high"], 1 if m == "amtl" else 3)
                     for m in metrics]
            cells = [c + (f" (K={row['k']})" if m == "pass_at_k" and c != "-" else "") for m, c in zip(metrics, cells)]
            rows.append([row["run_id"], row["model"], str(row[label]), str(row["n_tasks"]), str(row["n_subtasks"]),
                         str(row["errors"]), *cells])
        views[name] = {"title": title, "columns": columns, "rows": rows}
    return views


def section_tables(tables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The :func:`table_views` of the page's subtask section, Table 4 first."""
    views = table_views(tables)
    return [views[name] for name in SUBTASK_REPORT_FILES if name in views]
