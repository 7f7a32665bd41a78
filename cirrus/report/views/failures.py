"""Why turns failed (``docs/failures.md``): the page's section, counted from
the runs' checkpoints (:func:`failure_counts`, :func:`failure_view`), and the
terminal's table of ``failures.parquet`` (:func:`failure_matrix`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cirrus.report.views.cells import fmt_value, share_text

if TYPE_CHECKING:
    import polars as pl

__all__ = ["failed_turns", "failure_counts", "failure_matrix", "failure_order", "failure_view"]


def failure_order() -> list[str]:
    """``FAILURE_CATEGORIES`` when this Cirrus has it (it orders ties), else []."""
    try:
        from cirrus.evaluate.failures import FAILURE_CATEGORIES
    except ImportError:
        return []
    return [str(c) for c in FAILURE_CATEGORIES]


def failure_counts(checkpoints: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> tuple[pl.DataFrame, list[str]]:
    """Rejected turns by failure category, per run.

    ``checkpoints``: ``{run_id: checkpoints frame}``.  Returns a frame
    ``run_id, failure, n`` (only non-null categories, counted over the rows
    of the run: rejected turns, and accepted ones the fluency check failed)
    and the runs whose frame has no ``failure`` column (runs
    written before Cirrus recorded it)."""
    import polars as pl

    schema = {"run_id": pl.Utf8, "failure": pl.Utf8, "n": pl.Int64}
    frames, missing = [], []
    for run_id, frame in checkpoints.items():
        lazy = frame.lazy()
        if "failure" not in lazy.collect_schema().names():
            missing.append(run_id)
            continue
        frames.append(lazy.filter(pl.col("failure").is_not_null())
                      .group_by(pl.col("failure").cast(pl.Utf8)).agg(pl.len().cast(pl.Int64).alias("n"))
                      .select(pl.lit(run_id, dtype=pl.Utf8).alias("run_id"), "failure", "n").collect())
    if not frames:
        return pl.DataFrame(schema=schema), missing
    return pl.concat(frames).sort("run_id", "failure"), missing


def failed_turns(frame: pl.DataFrame | pl.LazyFrame) -> tuple[int, int]:
    """Failed turns (rejected, or accepted with a fluency No: the turns that
    get a category, docs/failures.md) and those of them without a category."""
    import polars as pl

    lazy = frame.lazy()
    names = lazy.collect_schema().names()
    if "accepted" not in names:
        return 0, 0
    accepted = pl.col("accepted").fill_null(False)
    fluent_no = (pl.col("fluent") == False) if "fluent" in names else pl.lit(False)  # noqa: E712  (null is not False)
    failed = lazy.filter(~accepted | (accepted & fluent_no.fill_null(False)))
    uncategorised = failed.filter(pl.col("failure").is_null()) if "failure" in names else failed
    return (int(failed.select(pl.len()).collect().item()), int(uncategorised.select(pl.len()).collect().item()))


def failure_view(checkpoints: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> dict[str, Any]:
    """The Why-turns-were-rejected section: ``runs`` (those with categories),
    ``missing`` (those without), ``rows`` (one per category, most rejections
    first over all runs, ties in ``FAILURE_CATEGORIES`` order then by name:
    ``{"failure", "counts": {run: n}, "shares": {run: "12.5%"}}``) and per
    run ``categorised``, ``failed`` (rejected, or accepted with a fluency
    No) and ``uncategorised`` (failed without a category) turns."""
    counts, missing = failure_counts(checkpoints)
    runs = [run for run in checkpoints if run not in missing]
    by = {(r["run_id"], r["failure"]): r["n"] for r in counts.iter_rows(named=True)}
    totals: dict[str, int] = {}
    for (_, failure), n in by.items():
        totals[failure] = totals.get(failure, 0) + n
    known = failure_order()
    rank = {name: i for i, name in enumerate(known)}
    ordered = sorted(totals, key=lambda f: (-totals[f], rank.get(f, len(rank)), f))
    categorised = {run: sum(n for (r, _), n in by.items() if r == run) for run in runs}
    rows = [{"failure": f, "counts": {run: by.get((run, f), 0) for run in runs},
             "shares": {run: share_text(by.get((run, f), 0), categorised[run]) for run in runs}} for f in ordered]
    failed, uncategorised = {}, {}
    for run in runs:
        failed[run], uncategorised[run] = failed_turns(checkpoints[run])
    return {"runs": runs, "missing": missing, "rows": rows, "categorised": categorised, "failed": failed,
            "uncategorised": uncategorised}


def failure_matrix(failures: pl.DataFrame) -> tuple[list[str], list[list[str]]] | None:
    """The terminal's table of ``failures.parquet`` (its ``all`` reply-type
    rows): ``(runs, rows)``, a row per category in ``failure_order`` with a
    ``count (share)`` cell per run, then the failed turns per run; None when
    no run has a failed turn."""
    import polars as pl

    overall = failures.filter(pl.col("reply_type") == "all")
    if overall.is_empty() or not overall["count"].sum():
        return None
    runs = list(dict.fromkeys(overall["run_id"].to_list()))
    cells = {(row["run_id"], row["failure"]): row for row in overall.iter_rows(named=True)}
    rows = []
    for failure in overall.sort("failure_order")["failure"].unique(maintain_order=True).to_list():
        values = []
        for run_id in runs:
            row = cells.get((run_id, failure))
            values.append("-" if row is None else f"{row['count']} ({fmt_value(row['share'] or 0.0, 2)})")
        rows.append([failure, *values])
    totals = {row["run_id"]: row["n_failed"] for row in overall.iter_rows(named=True)}
    rows.append(["failed turns", *(str(totals.get(run_id, 0)) for run_id in runs)])
    return runs, rows
