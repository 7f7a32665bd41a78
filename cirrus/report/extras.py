"""What a report reads beside its runs' tables: the workspace's dataset
statistics and, for exactly two runs, where they part (:class:`ReportExtras`,
:func:`report_extras`); and for the page, each run's transcripts
(:func:`read_transcripts`), its checkpoints as recorded
(:func:`recorded_checkpoints`) and the tasks' earlier messages
(:func:`load_task_context`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.loading import Run
    from cirrus.stats import DatasetStats

__all__ = ["TRANSCRIPTS_FILE", "ReportExtras", "load_dataset_stats", "load_run_diff", "load_task_context",
           "read_transcripts", "recorded_checkpoints", "report_extras"]

TRANSCRIPTS_FILE = "transcripts.jsonl"


@dataclass(frozen=True)
class ReportExtras:
    """What the report adds beside its tables: the dataset statistics of the
    workspace (``stats``, or why there are none in ``stats_problem``) and,
    for exactly two runs, :func:`cirrus.report.diff.diff_runs`'s rows
    (``diff``; ``None`` for one run or three and more, or when the two runs
    cannot be compared, said in ``diff_problem``)."""

    stats: DatasetStats | None = None
    stats_problem: str | None = None
    diff: list[dict[str, Any]] | None = None
    diff_problem: str | None = None
    diff_common: int = 0


def load_dataset_stats(workspace: Path) -> tuple[DatasetStats | None, str | None]:
    """:func:`cirrus.stats.compute_stats` of ``tickets/tasks.jsonl`` (read
    as :class:`~cirrus.schema.Task` objects), or ``None`` and why (a message naming
    the file, the line and the field, no ticket text)."""
    from cirrus.evaluate.tasks import TaskFileError, load_typed_tasks
    from cirrus.stats import compute_stats

    try:
        tasks = load_typed_tasks(workspace)
    except TaskFileError as exc:
        return None, f"no dataset statistics: {exc}"
    except OSError as exc:
        return None, f"no dataset statistics: could not read the tasks of {workspace} ({exc.strerror or exc})"
    return compute_stats(tasks), None


def load_run_diff(workspace: Path, run_ids: Sequence[str]) -> tuple[list[dict[str, Any]] | None, str | None, int]:
    """For exactly two runs: :func:`cirrus.report.diff.diff_runs` of their
    committed attempts, with the number of (task, attempt) pairs they share;
    ``(None, None, 0)`` for another number of runs, ``(None, why, n)`` when
    they cannot be compared."""
    if len(run_ids) != 2:
        return None, None, 0
    from cirrus.report.diff import diff_runs
    from cirrus.report.run_view import ShowError, load_run_view

    try:
        view_a, view_b = (load_run_view(workspace, run_id) for run_id in run_ids)
    except ShowError as exc:
        return None, f"the two runs could not be compared: {exc}", 0
    common = len(set(view_a.rows) & set(view_b.rows))
    if not common:
        return None, ("the two runs share no recorded (task, attempt) in their attempts.jsonl: "
                      "nothing to compare"), 0
    return diff_runs(view_a, view_b), None, common


def report_extras(runs: Sequence[Run], workspace: Path) -> ReportExtras:
    """The dataset statistics and (two runs) the run diff of a report."""
    stats, stats_problem = load_dataset_stats(workspace)
    diff, diff_problem, common = load_run_diff(workspace, [run.run_id for run in runs])
    return ReportExtras(stats, stats_problem, diff, diff_problem, common)


def read_transcripts(run: Run) -> tuple[dict[tuple[str, int], dict[str, Any]], str | None]:
    """``{(task_id, attempt): transcript}`` of a run (the last line of an
    attempt wins), and a warning when the file is missing or has bad lines."""
    path = Path(run.directory) / TRANSCRIPTS_FILE
    if not path.is_file():
        return {}, f"run {run.run_id!r} has no {TRANSCRIPTS_FILE}: its attempts have no transcript view"
    out: dict[tuple[str, int], dict[str, Any]] = {}
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                out[(str(record["task_id"]), int(record["attempt"]))] = record
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                bad += 1
    return out, (f"{path}: {bad} unreadable line(s) skipped" if bad else None)


def load_task_context(workspace: Path) -> dict[str, dict[str, Any]]:
    """``{task_id: task}`` of ``tickets/tasks.jsonl``, each read as a
    :class:`~cirrus.schema.Task` and given to the page's views as plain data
    (:func:`cirrus.schema.task_dict`: they read its ``history`` and
    ``channel``); empty when unreadable."""
    try:
        from cirrus.evaluate.tasks import TaskIndex
        from cirrus.schema import task_dict

        return {task.task_id: task_dict(task) for task in TaskIndex.scan(workspace).tasks()}
    except Exception:  # noqa: BLE001  (the context is a nicety; the report stands without it)
        return {}


def recorded_checkpoints(run: Run) -> pl.LazyFrame:
    """``run.checkpoints`` as its ``checkpoints.parquet`` holds them: without
    ``failure`` when the file has no such column (the loader fills it with
    nulls for older runs; the page must tell "not recorded" from "none")."""
    import polars as pl

    try:
        names = pl.read_parquet_schema(Path(run.directory) / "checkpoints.parquet")
    except Exception:  # noqa: BLE001  (the loader read it already; a vanished file reads as "not recorded")
        names = {}
    return run.checkpoints if "failure" in names else run.checkpoints.drop("failure", strict=False)
