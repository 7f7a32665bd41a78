"""The report's page assembled: everything :mod:`cirrus.report.html`
renders, read (:mod:`cirrus.report.extras`) and computed
(:mod:`cirrus.report.views`) from the runs and the report's tables.

:func:`page_view` is the one place that does both, in a :class:`PageView`
(:func:`cirrus.report.html.render_html` renders it).  A table the report did
not pass (the leaderboard, a breakdown, the noise table) is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cirrus.report.extras import (
    ReportExtras,
    load_task_context,
    read_transcripts,
    recorded_checkpoints,
    report_extras,
)

if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.loading import Run
    from cirrus.stats import DatasetStats

__all__ = ["PageView", "page_view", "report_table"]


@dataclass(frozen=True)
class PageView:
    """What the page shows, computed: the tables the charts draw (``board``,
    ``cis``, ``breakdowns``, ``depths``, ``stats``, ``failures``,
    ``subtask_tables``) and the rows of every section, in the run order of
    ``run_ids``."""

    run_ids: list[str]
    runs: list[dict[str, Any]]  # run_id, model, k, dataset, self_judged
    workspace: str
    board: pl.DataFrame
    cis: dict[tuple[str, str, str, str], tuple[float, float]]
    breakdowns: dict[str, pl.DataFrame]
    breakdown_empty: dict[str, list[str]]  # per dimension: groups without a task in any run
    latency_runs: list[str]  # drawn on SR pass@1 against AMTL
    latency_left_out: list[str]
    cost_runs: list[str]  # drawn on SR pass@1 against cost, in cost_currency
    cost_left_out: list[str]
    cost_currency: str | None
    depths: pl.DataFrame
    stats: DatasetStats | None
    dataset: dict[str, Any] | None
    dataset_problem: str | None
    failures: dict[str, Any]
    subtask_tables: dict[str, pl.DataFrame] | None
    subtask_views: list[dict[str, Any]]
    leaderboard: list[dict[str, Any]]
    mixed_k: bool
    paired: list[dict[str, Any]]
    confidence: float | None
    noise_runs: list[dict[str, Any]]
    noise_pairs: list[dict[str, Any]]
    reply_rows: list[dict[str, Any]]
    task_rows: list[dict[str, Any]]
    transcripts: list[dict[str, Any]]
    warnings: list[str]
    notes: list[str]
    diff_rows: list[dict[str, Any]] | None
    diff_problem: str | None
    diff_common: int
    costs: list[dict[str, Any]]


def report_table(tables: Mapping[str, pl.DataFrame], name: str) -> pl.DataFrame | None:
    """``tables[name]`` whether the key has the ``.parquet`` suffix or not."""
    for key in (f"{name}.parquet", name):
        if key in tables and tables[key] is not None:
            return tables[key]
    return None


def _subtask_tables(tables: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame] | None:
    """The subtask runs' tables of the report (``subtask_by_tokens`` /
    ``subtask_by_reply_type``, with or without ``.parquet``), keyed by file
    name; None when it has none with a row."""
    from cirrus.report.subtask import SUBTASK_REPORT_FILES

    found = {name: frame for name in SUBTASK_REPORT_FILES
             if (frame := report_table(tables, name.removesuffix(".parquet"))) is not None}
    if not found or not any(frame.height for frame in found.values()):
        return None
    return found


def page_view(runs: Sequence[Run], tables: Mapping[str, pl.DataFrame], workspace: Path,
              warnings: Sequence[str] = (), *, extras: ReportExtras | None = None) -> PageView:
    """Everything the page of ``runs`` shows (the arguments of
    :func:`cirrus.report.html.write_html_report`)."""
    from cirrus.report.tables import DIMENSIONS, breakdown_by, leaderboard
    from cirrus.report.views.breakdowns import breakdown_groups, reply_type_rows
    from cirrus.report.views.cost import cost_chart_runs, cost_view
    from cirrus.report.views.dataset import dataset_view
    from cirrus.report.views.depth import depth_table
    from cirrus.report.views.diff import diff_view
    from cirrus.report.views.failures import failure_view
    from cirrus.report.views.leaderboard import ci_lookup, latency_chart_runs, leaderboard_rows, paired_rows
    from cirrus.report.views.noise import noise_marks, noise_views
    from cirrus.report.views.subtask import section_tables
    from cirrus.report.views.transcripts import Anchors, attempt_views

    run_ids = [run.run_id for run in runs]
    board = report_table(tables, "leaderboard")
    if board is None:
        board = leaderboard(runs)
    intervals = report_table(tables, "intervals")
    cis = ci_lookup(intervals)
    breakdowns = {}
    for dimension in DIMENSIONS:
        frame = report_table(tables, f"breakdown_{dimension}")
        breakdowns[dimension] = frame if frame is not None else breakdown_by(runs, dimension)
    if extras is None:
        extras = report_extras(runs, workspace)
    paired = report_table(tables, "paired")
    noise_table = report_table(tables, "noise")
    if noise_table is None:
        from cirrus.report.uncertainty import noise

        noise_table = noise(runs)
    noise_runs, noise_pairs = noise_views(noise_table, paired)
    latency_runs, latency_left_out = latency_chart_runs(board, run_ids)
    cost_runs, cost_left_out, currency = cost_chart_runs(board, run_ids)
    subtask = _subtask_tables(tables)

    page_warnings = list(warnings)
    transcripts = {}
    for run in runs:
        transcripts[run.run_id], warning = read_transcripts(run)
        if warning:
            page_warnings.append(warning)
    anchors = Anchors()
    task_rows, sections = attempt_views(runs, transcripts, anchors, load_task_context(workspace))
    return PageView(
        run_ids=run_ids,
        runs=[{"run_id": r.run_id, "model": r.model, "k": r.k, "dataset": r.dataset, "self_judged": r.self_judged}
              for r in runs],
        workspace=str(workspace), board=board, cis=cis, breakdowns=breakdowns,
        breakdown_empty={dimension: breakdown_groups(frame).empty for dimension, frame in breakdowns.items()},
        latency_runs=latency_runs, latency_left_out=latency_left_out,
        cost_runs=cost_runs, cost_left_out=cost_left_out, cost_currency=currency,
        depths=depth_table({run.run_id: run.tasks for run in runs}),
        stats=extras.stats, dataset=dataset_view(extras.stats) if extras.stats is not None else None,
        dataset_problem=extras.stats_problem,
        failures=failure_view({run.run_id: recorded_checkpoints(run) for run in runs}),
        subtask_tables=subtask, subtask_views=section_tables(subtask) if subtask else [],
        leaderboard=leaderboard_rows(board, cis, {r.run_id: r.self_judged for r in runs},
                                     noise_marks(board, paired)),
        mixed_k=len(set(board["k"].to_list())) > 1,
        paired=paired_rows(paired),
        confidence=intervals["confidence"][0] if intervals is not None and not intervals.is_empty() else None,
        noise_runs=noise_runs, noise_pairs=noise_pairs,
        reply_rows=reply_type_rows(breakdowns["reply_type"]),
        task_rows=task_rows, transcripts=sections, warnings=page_warnings,
        notes=sorted({f"run {run.run_id!r}: offline heuristics used for "
                      f"{', '.join(run.summary['offline_heuristics'])}; "
                      "scores are a harness check, not a model judgement"
                      for run in runs if run.summary.get("offline_heuristics")}),
        diff_rows=diff_view(extras.diff, anchors.get) if extras.diff is not None else None,
        diff_problem=extras.diff_problem, diff_common=extras.diff_common,
        costs=cost_view(board, {run.run_id: run.summary for run in runs}),
    )
