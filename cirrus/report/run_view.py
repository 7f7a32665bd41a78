"""A run as ``cirrus show`` and ``cirrus diff`` read it: ``reports/<RUN_ID>/``
as the run store writes it (``attempts.jsonl``, ``transcripts.jsonl``,
``summary.json``), so a run still going, or killed, can be read too (its
summary is then missing).  :func:`load_run_view` gives a :class:`RunView`;
:func:`failed`, :func:`stop_reason` and :func:`failure_description` say, in
words, how one attempt ended.  The terminal rendering is
:mod:`cirrus.commands.show`'s.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrus.files import read_jsonl
from cirrus.workspace import REPORTS_DIR

__all__ = ["ATTEMPTS_FILE", "RUN_FILE", "SUMMARY_FILE", "TRANSCRIPTS_FILE", "RunView", "ShowError", "failed",
           "failure_description", "load_run_view", "pick_attempt", "stop_reason"]

RUN_FILE = "run.json"
ATTEMPTS_FILE = "attempts.jsonl"
TRANSCRIPTS_FILE = "transcripts.jsonl"
SUMMARY_FILE = "summary.json"


class ShowError(ValueError):
    """The run or task cannot be shown; the message says why."""


# ---------------------------------------------------------------------------
# loading


@dataclass
class RunView:
    run_id: str
    directory: Path
    summary: dict[str, Any] | None
    rows: dict[tuple[str, int], dict[str, Any]]  # the committed attempts rows
    transcripts: dict[tuple[str, int], dict[str, Any]]

    def task_ids(self) -> list[str]:
        return sorted({task for task, _ in self.rows})

    def attempts_of(self, task_id: str) -> list[dict[str, Any]]:
        return [self.rows[key] for key in sorted(k for k in self.rows if k[0] == task_id)]


def _runs_in(reports: Path) -> list[str]:
    if not reports.is_dir():
        return []
    return sorted(p.name for p in reports.iterdir() if (p / RUN_FILE).is_file())


def load_run_view(workspace: Path, run_id: str) -> RunView:
    reports = workspace / REPORTS_DIR
    directory = reports / run_id
    if "/" in run_id or "\\" in run_id or run_id.startswith(".") or not (directory / RUN_FILE).is_file():
        known = _runs_in(reports)
        close = difflib.get_close_matches(run_id, known, n=3)
        hint = (f"did you mean {', '.join(close)}?" if close else f"runs there: {', '.join(known[:20])}"
                + (" ..." if len(known) > 20 else "")) if known else "there is no run there yet: run `cirrus eval` first"
        raise ShowError(f"no run {run_id!r} in {reports} ({hint})")
    from cirrus.evaluate.subtask import refuse_subtask_run

    refuse_subtask_run(directory, "show / diff", ShowError)  # a subtask run has no walk to show
    summary = None
    if (directory / SUMMARY_FILE).is_file():
        try:
            summary = json.loads((directory / SUMMARY_FILE).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ShowError(f"{directory / SUMMARY_FILE}: not valid JSON ({exc.msg})") from exc
    rows = {(r["task_id"], r["attempt"]): r for r in read_jsonl(directory / ATTEMPTS_FILE)}
    transcripts = {(t["task_id"], t["attempt"]): t for t in read_jsonl(directory / TRANSCRIPTS_FILE)
                   if (t["task_id"], t["attempt"]) in rows}
    return RunView(run_id, directory, summary, rows, transcripts)


# ---------------------------------------------------------------------------
# reading one attempt


def failed(row: dict[str, Any]) -> bool:
    """An attempt that did not succeed: an error row or ``success`` false."""
    return row.get("status") != "ok" or not row.get("success")


def stop_reason(row: dict[str, Any], short: bool = False) -> str:
    """Why the walk of this attempt ended, in a few words (fewer with
    ``short``): :func:`cirrus.evaluate.store.end_reason` (``end_reason`` of
    ``tasks.parquet``) in words, with its ``end_checkpoint`` and, when the
    last turn has one, its failure category (docs/failures.md)."""
    # imported here: the run store imports polars, and ``cirrus --help`` imports this module
    from cirrus.evaluate.store import (
        END_COMPLETED,
        END_ERROR,
        END_FLUENCY_STOP,
        END_REJECTED,
        END_TRUNCATED,
        end_checkpoint,
        end_reason,
    )

    reason, at = end_reason(row), end_checkpoint(row)
    if reason == END_ERROR:
        return f"error: {row.get('error') or 'unknown'}"
    if reason == END_TRUNCATED:
        return f"truncated before {at}" if short else \
            f"truncated: the saved transcript has no turn for checkpoint {at} (the agent was not called)"
    if reason == END_COMPLETED:
        return "all covered" if short else "all checkpoints covered"
    turns = row.get("turns") or []
    failure = f" ({turns[-1]['failure']})" if turns and turns[-1].get("failure") else ""  # docs/failures.md
    if reason == END_REJECTED:
        return (f"rejected at {at}" if short else f"rejected at checkpoint {at}") + failure
    if reason == END_FLUENCY_STOP:
        return (f"not fluent before {at}" if short else f"fluency check failed before checkpoint {at}") + failure
    return "no turn judged" if not row.get("turns") else "stopped"


def failure_description(failure: str) -> str:
    """The one-line description of a failure category (docs/failures.md)."""
    from cirrus.evaluate.failures import FAILURE_DESCRIPTIONS

    return FAILURE_DESCRIPTIONS.get(failure, "unknown category")


def pick_attempt(view: RunView, task: str | None, attempt: int | None,
                 failed_only: bool) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """``(the attempts rows of task, the one to show)``: ``attempt`` when
    given, else the first failing one with ``failed_only`` (None when all
    succeeded), else the first; ``([], None)`` without a task.  A
    :class:`ShowError` for ``attempt`` without ``task``, a task not in the
    run (naming close task ids) or an attempt the task does not have."""
    if task is None:
        if attempt is not None:
            raise ShowError("--attempt needs --task")
        return [], None
    attempts = view.attempts_of(task)
    if not attempts:
        close = difflib.get_close_matches(task, view.task_ids(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ShowError(f"task {task!r} is not in run {view.run_id}{hint}")
    if attempt is not None:
        chosen = next((r for r in attempts if r["attempt"] == attempt), None)
        if chosen is None:
            raise ShowError(f"task {task} has no attempt {attempt} in run {view.run_id} "
                            f"(attempts: {', '.join(str(r['attempt']) for r in attempts)})")
        return attempts, chosen
    if failed_only:
        return attempts, next((r for r in attempts if failed(r)), None)
    return attempts, attempts[0]
