#!/usr/bin/env python
"""Memory of the end of an evaluation run: the summary rows and the two
Parquet tables built from a finished run's ``attempts.jsonl``.

``streamed`` is what ``cirrus eval`` does (``RunStore.latest_rows`` and
``RunStore.tables``: rows read one at a time, tables built in batches of
columns); ``in-memory`` re-creates what it did before (every committed row
loaded, twice, then the tables built from lists of dicts), for comparison.
Each mode runs in its own process; the figure is that process's peak RSS
above its RSS once everything is imported.

    .venv/bin/python benchmarks/finalize_memory.py /tmp/cirrus-evalbench/ws-5000/reports/bench-c256
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import polars as pl

from cirrus.evaluate.runner import SUMMARY_FIELDS
from cirrus.evaluate.store import CHECKPOINT_SCHEMA, TASK_SCHEMA, RunStore


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(mode: str, run: Path) -> None:
    store = RunStore(run)
    base = _peak_mib()
    if mode == "in-memory":
        summary_rows = list(store.committed().values())
        rows = sorted(store.committed().values(), key=lambda r: (r["task_id"], r["attempt"]))
        tasks = pl.DataFrame([{k: r.get(k) for k in TASK_SCHEMA} for r in rows], schema=TASK_SCHEMA)
        checkpoints = pl.DataFrame([{**{k: c.get(k) for k in CHECKPOINT_SCHEMA}, "task_id": r["task_id"],
                                     "attempt": r["attempt"]} for r in rows for c in r.get("turns", [])],
                                   schema=CHECKPOINT_SCHEMA)
    else:
        summary_rows = [{f: r[f] for f in SUMMARY_FIELDS} for r in store.latest_rows()]
        tasks, checkpoints = store.tables()
    print(f"| {mode} | {len(summary_rows):,} | {checkpoints.height:,} | {_peak_mib() - base:.0f} |")


def main() -> None:
    if len(sys.argv) == 3:
        measure(sys.argv[1], Path(sys.argv[2]))
        return
    run = Path(sys.argv[1])
    print("| mode | attempts | checkpoint rows | peak RSS above start (MiB) |")
    print("|---|---:|---:|---:|")
    for mode in ("in-memory", "streamed"):
        subprocess.run([sys.executable, __file__, mode, str(run)], check=True)


if __name__ == "__main__":
    main()
