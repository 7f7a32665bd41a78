"""TPR by checkpoint depth: how far into its tasks each run's walks get."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["depth_table"]


def depth_table(tasks: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> pl.DataFrame:
    """One row per (run, depth k) with ``n`` (ok attempts of tasks with at
    least k checkpoints), ``covered`` (those whose walk covered checkpoint k)
    and ``share`` = covered / n.  ``tasks``: ``{run_id: tasks frame}`` (the
    ``status``, ``checkpoints`` and ``covered`` columns of ``tasks.parquet``)."""
    import polars as pl

    frames = []
    for run_id, frame in tasks.items():
        ok = frame.lazy().filter(pl.col("status") == "ok").select("checkpoints", "covered").collect()
        top = int(ok["checkpoints"].max() or 0) if ok.height else 0
        rows = []
        for depth in range(1, top + 1):
            eligible = ok.filter(pl.col("checkpoints") >= depth)
            covered = int((eligible["covered"].fill_null(0) >= depth).sum())
            rows.append({"run_id": run_id, "depth": depth, "n": eligible.height, "covered": covered,
                         "share": covered / eligible.height if eligible.height else None})
        frames.append(pl.DataFrame(rows, schema={"run_id": pl.Utf8, "depth": pl.Int64, "n": pl.Int64,
                                                 "covered": pl.Int64, "share": pl.Float64}))
    return pl.concat(frames) if frames else pl.DataFrame()
