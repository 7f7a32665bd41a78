"""Where the two runs of a report part (:func:`cirrus.report.diff.diff_runs`'s
rows), as the page shows them: tool calls as indented JSON, each side
linked to its transcript."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cirrus.report.views.cells import json_view

__all__ = ["diff_view"]


def diff_view(rows: Sequence[Mapping[str, Any]],
              anchor_of: Callable[[str, str, int], str | None] | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`cirrus.report.diff.diff_runs` for the page: tool
    calls as indented JSON, and ``link_a`` / ``link_b``, the anchors of both
    runs' transcripts of that attempt (``anchor_of(run_id, task_id,
    attempt)``, ``None`` where the page has none)."""
    out = []
    for row in rows:
        def link(run: str) -> str | None:
            return anchor_of(run, row["task_id"], row["attempt"]) if anchor_of else None

        out.append({**row, "link_a": link(row["run_a"]), "link_b": link(row["run_b"]),
                    "tool_calls_a": json_view(row.get("tool_calls_a")),
                    "tool_calls_b": json_view(row.get("tool_calls_b")),
                    "reference_tool_calls": json_view(row.get("reference_tool_calls"))})
    return out
