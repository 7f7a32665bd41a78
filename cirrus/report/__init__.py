"""``cirrus report``: analyst-facing tables of finished runs (leaderboard,
breakdowns as in the CirrusBench paper, bootstrap uncertainty), computed with
polars and written as Parquet with a versioned schema
(``docs/report-schema.md``).

Modules: :mod:`~cirrus.report.loading` (runs in), :mod:`~cirrus.report.tables`
(leaderboard, breakdowns), :mod:`~cirrus.report.uncertainty` (bootstrap),
:mod:`~cirrus.report.schema` (columns), :mod:`~cirrus.report.views` (the rows
the page and the terminal show, pure), :mod:`~cirrus.report.html` and
:mod:`~cirrus.report.charts` (the page, rendered), :mod:`~cirrus.report.command`
(the report built and written; the ``cirrus report`` command is
:mod:`cirrus.commands.report`).  The names below are loaded on first use, so
importing the package stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Price": "loading", "ReportError": "loading", "Run": "loading", "load_prices": "loading", "load_run": "loading",
    "load_runs": "loading", "SCHEMA_VERSION": "schema", "DIMENSIONS": "tables", "breakdown_by": "tables",
    "leaderboard": "tables", "task_stats": "tables", "bootstrap_mean": "uncertainty", "intervals": "uncertainty",
    "paired": "uncertainty", "paired_bootstrap": "uncertainty", "ratio_bootstrap": "uncertainty",
    "report_command": "command",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"cirrus.report.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'cirrus.report' has no attribute {name!r}")
