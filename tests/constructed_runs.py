"""Runs built by hand for the tests of the significance rule, ``cirrus
gate`` and the ticket breakdowns: a workspace of ``n`` two-checkpoint tasks
and finished walk runs whose outcome per (task, attempt) is given, so that
the right answer (a clear regression, a clear improvement, a difference
inside the noise) is known before any statistics are run.

An attempt's outcome is the number of checkpoints it covered (0, 1 or 2):
2 is a success (TPR 1), 1 covers the first checkpoint and is rejected at the
second (TPR 0.5), 0 is rejected at the first (TPR 0).  Every judged turn has
a coverage verdict (``rr``), so an attempt has ``min(covered + 1, 2)`` judge
verdicts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from cirrus.evaluate.runner import summarize
from cirrus.evaluate.store import CHECKPOINT_SCHEMA, TASK_SCHEMA
from cirrus.evaluate.tasks import dataset_hash

CHECKPOINTS = 2


def make_tasks(n: int, languages: Sequence[str | None] = ("en",),
               channels: Sequence[str | None] = (None,)) -> list[dict[str, Any]]:
    """``n`` tasks ``t00``, ``t01``, ...; task ``i`` has language
    ``languages[i % len]`` and channel ``channels[i % len]`` (a None
    language: the line has no ``language`` key)."""
    tasks = []
    for i in range(n):
        task: dict[str, Any] = {
            "task_id": f"t{i:02d}", "category": "Billing" if i % 2 else "Account", "knowledge": [], "tools": [],
            "history": [], "cassette": None, "stats": {"input_tokens": 1_000, "turns": 4, "checkpoints": CHECKPOINTS},
            "checkpoints": [{"index": c, "query": f"q{c}", "reply": f"r{c}", "reply_type": "Solution",
                             "tool_calls": []} for c in range(1, CHECKPOINTS + 1)]}
        language, channel = languages[i % len(languages)], channels[i % len(channels)]
        if language is not None:
            task["language"] = language
        if channel is not None:
            task["channel"] = channel
        tasks.append(task)
    return tasks


def write_workspace(root: Path, tasks: Sequence[Mapping[str, Any]]) -> Path:
    (root / "tickets").mkdir(parents=True)
    (root / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return root


def _attempt(task_id: str, attempt: int, covered: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    row = {"task_id": task_id, "attempt": attempt, "category": None, "checkpoints": CHECKPOINTS, "covered": covered,
           "accepted_turns": covered, "tpr": covered / CHECKPOINTS, "lj": 0, "nei": 0.0 if covered != 1 else 1.0,
           "mtl": 5.0 if covered else None, "success": covered == CHECKPOINTS, "status": "ok", "error": None,
           "input_tokens": 100, "output_tokens": 10, "wall_s": 1.0}
    turns = []
    for checkpoint in range(1, min(covered + 1, CHECKPOINTS) + 1):
        accepted = checkpoint <= covered
        turns.append({"task_id": task_id, "attempt": attempt, "checkpoint": checkpoint, "reply_type": "Solution",
                      "accepted": accepted, "covered_through": checkpoint if accepted else None, "tia": True,
                      "tsa": None, "tev": None, "rr": accepted, "stl": 5,
                      "fluent": True if accepted and checkpoint < CHECKPOINTS else None, "tool_calls": 0,
                      "wall_s": 0.1, "judge_votes": None})
    return row, turns


def write_run(workspace: Path, run_id: str, tasks: Sequence[Mapping[str, Any]],
              outcomes: Mapping[str, Sequence[int]], *, model: str = "agent", judge: str = "judge-x",
              fluency: str = "fluency-x") -> Path:
    """A finished run ``reports/<run_id>/``: ``outcomes[task_id]`` is the
    ``covered`` of each attempt (K = the number of attempts, the same for
    every task)."""
    ks = {len(v) for v in outcomes.values()}
    assert len(ks) == 1, "every task needs the same number of attempts"
    k = ks.pop()
    rows, turns = [], []
    for task_id, covered in outcomes.items():
        for attempt, c in enumerate(covered):
            row, judged = _attempt(task_id, attempt, c)
            rows.append(row)
            turns += judged
    directory = workspace / "reports" / run_id
    directory.mkdir(parents=True)
    pl.DataFrame(rows, schema=TASK_SCHEMA).write_parquet(directory / "tasks.parquet")
    pl.DataFrame(turns, schema=CHECKPOINT_SCHEMA).write_parquet(directory / "checkpoints.parquet")
    summary = summarize(rows, model, k, {"judge": judge, "fluency": fluency, "run_id": run_id})
    (directory / "summary.json").write_text(json.dumps(summary))
    fingerprint = {"agent": model, "dataset": dataset_hash(list(tasks)), "agent_role": {"model": model}}
    (directory / "run.json").write_text(json.dumps({"fingerprint": fingerprint, "run_id": run_id,
                                                    "tasks": len(tasks)}))
    return directory


def outcomes(tasks: Sequence[Mapping[str, Any]], k: int, covered: Mapping[int, Sequence[int]] | None = None,
             default: int = CHECKPOINTS) -> dict[str, list[int]]:
    """Every task covers ``default`` in each of its ``k`` attempts, except
    task ``i`` in ``covered`` (its attempts' ``covered``)."""
    covered = covered or {}
    return {t["task_id"]: list(covered.get(i, [default] * k)) for i, t in enumerate(tasks)}


def judge_consistency(workspace: Path, run_id: str, verdict_flip_rate: float, judge: str = "judge-x") -> None:
    """A ``judge_consistency.json`` as ``cirrus judge-consistency`` writes it."""
    record = {"run_id": run_id, "judge": judge, "sample": 100, "repeats": 3,
              "item_flip_rate": min(1.0, 2 * verdict_flip_rate), "item_flip_rate_ci95": None,
              "verdict_flip_rate": verdict_flip_rate, "verdict_flip_rate_ci95": None}
    (workspace / "reports" / run_id / "judge_consistency.json").write_text(json.dumps(record))
