"""The breakdowns as the page shows them: the groups a breakdown chart
draws (and those it leaves out, having no task in any run), and the rows of
the reply-type table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

__all__ = ["BreakdownGroups", "breakdown_groups", "reply_type_rows"]


@dataclass(frozen=True)
class BreakdownGroups:
    """The groups of a breakdown in the table's order: ``drawn`` (with a task
    in some run), ``empty`` (without), ``sizes`` (the most tasks any run has
    in the group)."""

    drawn: list[str]
    empty: list[str]
    sizes: dict[str, int]


def breakdown_groups(frame: pl.DataFrame) -> BreakdownGroups:
    """The groups (``segment``) of a breakdown table, in ``segment_order``."""
    order: list[str] = []
    sizes: dict[str, int] = {}
    for row in frame.sort("segment_order").iter_rows(named=True):
        group = str(row["segment"])
        if group not in order:
            order.append(group)
        sizes[group] = max(sizes.get(group, 0), int(row.get("n_tasks") or 0))
    return BreakdownGroups([g for g in order if sizes.get(g, 0) > 0], [g for g in order if sizes.get(g, 0) == 0],
                           sizes)


def reply_type_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The reply-type table: per run and reference reply type the turns
    reached, covered, judged and accepted, the rates to three decimals."""
    import polars as pl

    return frame.select(
        "run_id", "segment", "n_reference", "n_reached", "n_covered", "n_judged", "n_accepted", "acceptance_rate",
        "coverage_rate").with_columns(pl.col("acceptance_rate", "coverage_rate").round(3)).to_dicts()
