"""Where two runs part ways (the library behind ``cirrus diff RUN_A RUN_B``,
:mod:`cirrus.commands.diff`).

Both runs replay the same checkpoints, so their walks of one (task,
attempt) can be read side by side: they agree turn by turn until, at some
checkpoint, one run's turn is accepted and the other's is not, or the two
accepted turns cover a different number of checkpoints (a logical jump in one
of them), or one walk goes on where the other stopped.  That checkpoint is
the *first divergence*; this module finds it (:func:`first_divergence`, pure)
for every (task, attempt) whose outcome differs (covered checkpoints or
success) and :func:`diff_runs` lists them with both replies, the reference,
both tool calls and both verdicts.  ``diff.parquet`` holds one row each;
:func:`run_diff` loads two runs of a workspace, diffs them and writes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from cirrus.report.run_view import RunView, load_run_view
from cirrus.report.writing import write_parquet
from cirrus.workspace import REPORTS_DIR

__all__ = ["DIFF_DIR", "DIFF_FILE", "DIFF_SCHEMA", "DiffError", "Divergence", "RunDiff", "diff_runs",
           "first_divergence", "run_diff", "write_diff"]

DIFF_DIR = "_diff"
DIFF_FILE = "diff.parquet"


class DiffError(ValueError):
    """Two runs that cannot be diffed: the same run twice, or no (task,
    attempt) in common; the message says which."""


def write_diff(rows: list[dict[str, Any]], path: Path) -> None:
    """``diff.parquet``: the rows of :func:`diff_runs` as the documented
    ``diff`` table (``docs/report-schema.md``), written atomically."""
    from cirrus.report.schema import conform

    write_parquet(conform(pl.DataFrame(rows, schema=DIFF_SCHEMA), "diff"), path, "diff")


DIFF_SCHEMA = {
    "task_id": pl.Utf8, "attempt": pl.Int64, "run_a": pl.Utf8, "run_b": pl.Utf8, "covered_a": pl.Int64,
    "covered_b": pl.Int64, "success_a": pl.Boolean, "success_b": pl.Boolean, "better": pl.Utf8,
    "checkpoint": pl.Int64, "how": pl.Utf8, "query": pl.Utf8, "reference": pl.Utf8, "reference_tool_calls": pl.Utf8,
    "reply_a": pl.Utf8, "reply_b": pl.Utf8, "tool_calls_a": pl.Utf8, "tool_calls_b": pl.Utf8,
    "verdict_a": pl.Utf8, "verdict_b": pl.Utf8,
}


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where two walks of one (task, attempt) part ways: ``checkpoint`` (the
    first checkpoint where they differ) and ``how`` (in words)."""

    checkpoint: int
    how: str


def _state(turn: dict[str, Any] | None) -> tuple[bool, int | None] | None:
    if turn is None:
        return None
    return bool(turn.get("accepted")), turn.get("covered_through")


def first_divergence(turns_a: list[dict[str, Any]], turns_b: list[dict[str, Any]]) -> Divergence | None:
    """The first checkpoint where two walks differ, or None when they agree
    turn for turn.  Each turn is a transcript turn: ``checkpoint``,
    ``accepted``, ``covered_through``."""
    a = {t["checkpoint"]: t for t in turns_a}
    b = {t["checkpoint"]: t for t in turns_b}
    for checkpoint in sorted(set(a) | set(b)):
        turn_a, turn_b = a.get(checkpoint), b.get(checkpoint)
        state_a, state_b = _state(turn_a), _state(turn_b)
        if state_a == state_b:
            continue
        if state_a is None or state_b is None:
            ran = "A" if state_b is None else "B"
            return Divergence(checkpoint, f"only run {ran} reached checkpoint {checkpoint} (the other walk had stopped)")
        if state_a[0] != state_b[0]:
            accepted = "A" if state_a[0] else "B"
            return Divergence(checkpoint, f"run {accepted}'s turn was accepted, the other's rejected")
        return Divergence(checkpoint, f"both accepted; run A's turn covered through {state_a[1]}, "
                                      f"run B's through {state_b[1]}")
    return None


def _verdict(turn: dict[str, Any] | None) -> str | None:
    if turn is None:
        return None
    own = [v for v in turn.get("verdicts", []) if v.get("kind") == "coverage" and v.get("checkpoint") == turn["checkpoint"]]
    return (own[0].get("raw") if own else None) or ("accepted" if turn.get("accepted") else "rejected")


def _calls(turn: dict[str, Any] | None) -> str | None:
    if turn is None:
        return None
    return json.dumps([{"name": c.get("name"), "arguments": c.get("arguments")} for c in turn.get("tool_calls", [])],
                      ensure_ascii=False)


def diff_runs(a: RunView, b: RunView) -> list[dict[str, Any]]:
    """One row per (task, attempt) both runs finished (status ok) whose
    outcomes differ, in (task, attempt) order."""
    rows = []
    for key in sorted(set(a.rows) & set(b.rows)):
        row_a, row_b = a.rows[key], b.rows[key]
        if row_a.get("status") != "ok" or row_b.get("status") != "ok":
            continue
        if (row_a.get("covered"), row_a.get("success")) == (row_b.get("covered"), row_b.get("success")):
            continue
        turns_a = (a.transcripts.get(key) or {}).get("turns", [])
        turns_b = (b.transcripts.get(key) or {}).get("turns", [])
        where = first_divergence(turns_a, turns_b)
        turn_a = next((t for t in turns_a if where and t["checkpoint"] == where.checkpoint), None)
        turn_b = next((t for t in turns_b if where and t["checkpoint"] == where.checkpoint), None)
        shown = turn_a or turn_b or {}
        better = "A" if (row_a["covered"] or 0) > (row_b["covered"] or 0) else "B"
        rows.append({
            "task_id": key[0], "attempt": key[1], "run_a": a.run_id, "run_b": b.run_id,
            "covered_a": row_a.get("covered"), "covered_b": row_b.get("covered"),
            "success_a": row_a.get("success"), "success_b": row_b.get("success"), "better": better,
            "checkpoint": where.checkpoint if where else None, "how": where.how if where else None,
            "query": shown.get("query"), "reference": shown.get("reference"),
            "reference_tool_calls": json.dumps(shown.get("reference_tool_calls", []), ensure_ascii=False)
            if shown else None,
            "reply_a": turn_a.get("agent_text") if turn_a else None,
            "reply_b": turn_b.get("agent_text") if turn_b else None,
            "tool_calls_a": _calls(turn_a), "tool_calls_b": _calls(turn_b),
            "verdict_a": _verdict(turn_a), "verdict_b": _verdict(turn_b),
        })
    return rows


@dataclass(frozen=True)
class RunDiff:
    """What :func:`run_diff` found: ``rows`` (:func:`diff_runs`), how many
    (task, attempt) pairs the runs have in ``common``, and the ``path`` of the
    ``diff.parquet`` written."""

    rows: list[dict[str, Any]]
    common: int
    path: Path


def run_diff(workspace: Path, run_a: str, run_b: str) -> RunDiff:
    """Diff the runs ``run_a`` and ``run_b`` of ``workspace`` and write
    ``reports/_diff/<run_a>+<run_b>/diff.parquet``.  A
    :class:`~cirrus.report.run_view.ShowError` for a run that cannot be
    read, a :class:`DiffError` for the same run twice or runs without a
    (task, attempt) in common."""
    view_a, view_b = load_run_view(workspace, run_a), load_run_view(workspace, run_b)
    if run_a == run_b:
        raise DiffError("give two different runs")
    common = set(view_a.rows) & set(view_b.rows)
    if not common:
        raise DiffError(f"runs {run_a} and {run_b} share no (task, attempt): were they run on the same workspace?")
    rows = diff_runs(view_a, view_b)
    target = workspace / REPORTS_DIR / DIFF_DIR / f"{run_a}+{run_b}"
    target.mkdir(parents=True, exist_ok=True)
    write_diff(rows, target / DIFF_FILE)
    return RunDiff(rows, len(common), target / DIFF_FILE)
