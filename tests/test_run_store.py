"""The run store reads its committed rows one at a time: the last line of
each (task, attempt) wins, and the tables come out the same whatever the
batch they are built in."""

from __future__ import annotations

import json

import polars as pl

from cirrus.evaluate.store import ATTEMPTS_FILE, RunStore


def _row(task_id: str, attempt: int, status: str = "ok", turns: int = 2) -> dict:
    return {"task_id": task_id, "attempt": attempt, "status": status, "category": "SMS", "checkpoints": turns,
            "covered": turns if status == "ok" else None, "tpr": 1.0 if status == "ok" else None,
            "error": None if status == "ok" else "InfrastructureError: 503",
            "turns": [{"checkpoint": i + 1, "accepted": True, "stl": 10 * (i + 1)} for i in range(turns)]
            if status == "ok" else []}


def test_latest_rows_keep_the_last_whole_line_of_each_attempt_in_key_order(tmp_path):
    store = RunStore(tmp_path)
    store.open({"agent": "a"}, {})
    for row in (_row("T-2", 0, "error"), _row("T-1", 1), _row("T-1", 0), _row("T-2", 0, turns=3)):
        store.append(row, {"task_id": row["task_id"], "attempt": row["attempt"]})
    with (tmp_path / ATTEMPTS_FILE).open("a") as handle:
        handle.write(json.dumps(_row("T-1", 0, "error"))[:40])  # cut short by a crash: not committed

    rows = list(store.latest_rows())
    assert [(r["task_id"], r["attempt"], r["status"]) for r in rows] == [("T-1", 0, "ok"), ("T-1", 1, "ok"),
                                                                         ("T-2", 0, "ok")]
    assert rows[2]["checkpoints"] == 3
    assert rows == sorted(store.committed().values(), key=lambda r: (r["task_id"], r["attempt"]))


def test_tables_built_in_small_batches_equal_one_batch(tmp_path):
    store = RunStore(tmp_path)
    store.open({"agent": "a"}, {})
    for i in range(7):
        row = _row(f"T-{i % 3}", i // 3, "error" if i == 4 else "ok", turns=1 + i % 4)
        store.append(row, {"task_id": row["task_id"], "attempt": row["attempt"]})
    tasks_small, checkpoints_small = store.tables(batch=2)
    tasks_whole, checkpoints_whole = store.tables(batch=1000)
    assert tasks_small.equals(tasks_whole) and checkpoints_small.equals(checkpoints_whole)
    assert tasks_small.height == 7 and checkpoints_small.height == sum(1 + i % 4 for i in range(7) if i != 4)
    assert tasks_small["task_id"].to_list() == sorted(tasks_small["task_id"].to_list())

    store.finalize({"attempts": 7})
    assert pl.read_parquet(tmp_path / "tasks.parquet").equals(tasks_whole)
    assert pl.read_parquet(tmp_path / "checkpoints.parquet").equals(checkpoints_whole)
