"""Find and read the subtask runs of a report (``cirrus eval --mode
subtask``): :func:`split_modes` tells them from walks, :func:`load_subtask_run`
reads one (``subtasks.parquet``, ``summary.json``, ``run.json``) as a
:class:`~cirrus.report.subtask.SubtaskRun`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from cirrus.report.loading import RUN_ID_PATTERN, ReportError, check_run_id
from cirrus.report.subtask import SubtaskRun
from cirrus.workspace import REPORTS_DIR

__all__ = ["load_subtask_run", "split_modes"]


def split_modes(workspace: Path, run_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(walk run ids, subtask run ids)`` in the given order; an id that is
    no run (or a bad id) counts as a walk, for the walk loader to refuse."""
    from cirrus.evaluate.subtask import MODE_SUBTASK, run_mode

    walks, subtasks = [], []
    for run_id in run_ids:
        plain = RUN_ID_PATTERN.fullmatch(run_id) and not run_id.startswith(".")
        directory = workspace / REPORTS_DIR / run_id
        (subtasks if plain and directory.is_dir() and run_mode(directory) == MODE_SUBTASK else walks).append(run_id)
    return walks, subtasks


def load_subtask_run(workspace: Path, run_id: str) -> SubtaskRun:
    """The finished subtask run ``reports/<run_id>/``; :class:`ReportError`
    for an unfinished or damaged one, or a walk run."""
    from cirrus.evaluate.subtask import LATER_SUBTASK_COLUMNS, MODE_SUBTASK, SUBTASK_COLUMNS, SUBTASKS_FILE, run_mode

    check_run_id(run_id)
    directory = workspace / REPORTS_DIR / run_id
    if not directory.is_dir() or run_mode(directory) != MODE_SUBTASK:
        raise ReportError(f"no subtask run {run_id!r} in {workspace / REPORTS_DIR}")
    summary_file, table = directory / "summary.json", directory / SUBTASKS_FILE
    if not summary_file.is_file() or not table.is_file():
        raise ReportError(f"subtask run {run_id!r} has not finished (no {summary_file.name} or {table.name}): resume "
                          f"it with `cirrus eval --mode subtask ... --run-id {run_id}`")
    parts = []
    for path in (summary_file, directory / "run.json"):
        try:
            parts.append(json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {})
        except (OSError, ValueError) as exc:
            raise ReportError(f"{path}: not valid JSON ({exc}); the run's record is damaged") from exc
    try:
        frame = pl.read_parquet(table)
    except Exception as exc:  # noqa: BLE001  (polars raises several kinds for a damaged file)
        raise ReportError(f"{table}: not a readable Parquet file ({exc})") from exc
    missing = [c for c in SUBTASK_COLUMNS if c not in frame.columns and c not in LATER_SUBTASK_COLUMNS]
    if missing:
        raise ReportError(f"{table}: missing columns {', '.join(missing)}")
    dialogue_only = "dialogue_tokens" not in frame.columns
    rows = frame.to_dicts()
    for row in rows:
        for column in LATER_SUBTASK_COLUMNS:
            row.setdefault(column, None)
    return SubtaskRun(run_id, directory, parts[0], parts[1] if isinstance(parts[1], dict) else {}, rows,
                      dialogue_only_tokens=dialogue_only)
