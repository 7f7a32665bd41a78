"""The requests a run sends besides its attempts, and their usage (issue 22).

``cirrus eval`` checks every endpoint before a session's first attempt
(:mod:`cirrus.evaluate.preflight`): one small request per distinct endpoint,
which the provider answers and bills like any other.  Its usage is recorded
under the role whose client sent it (the first role of the endpoint: the
probe is that role's model, so the role's price is the right one) and
appended, one line per session, to ``reports/<run_id>/overhead.jsonl``::

    {"kind": "preflight", "at": "2025-01-01T00:00:00+00:00", "usage": {"agent": {"calls": 1, ...}, ...}}

A resumed session checks again and adds its own line, so ``summary.json``'s
``usage`` and ``cost`` (the attempts' usage plus every line here) count every
request the server answered.  A session whose check answered nothing (every
endpoint offline, or refused) writes no line.

The other billed usage outside the attempts' final rows is that of attempts
run again: an attempt that failed (an error row, its calls up to the failure
billed) and that a resumed session ran again keeps its old line in
``attempts.jsonl``, superseded by the new one; :func:`overhead_records`
lists both kinds (``preflight``, ``rerun``) for ``summary.json``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cirrus.files import append_line, read_jsonl
from cirrus.usage import UsageLedger, recording

OVERHEAD_FILE = "overhead.jsonl"
PREFLIGHT = "preflight"  # the endpoint check of a session
RERUN = "rerun"  # an attempt line a later line of the same (task, attempt) superseded


def record_overhead(directory: Path, kind: str, ledger: UsageLedger) -> None:
    """Append one line of ``kind`` with ``ledger``'s usage to the run's
    :data:`OVERHEAD_FILE` (nothing when the ledger recorded no call)."""
    if not ledger.clients:
        return
    from cirrus.evaluate.store import DISK_FULL_ADVICE

    line = {"kind": kind, "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "usage": ledger.to_dict()}
    append_line(directory / OVERHEAD_FILE, json.dumps(line, ensure_ascii=False) + "\n", advice=DISK_FULL_ADVICE)


def superseded_usages(directory: Path) -> list[dict[str, Any]]:
    """The ``usage`` of every line of the run's ``attempts.jsonl`` that a
    later line of the same (task, attempt) superseded: attempts run again."""
    from cirrus.evaluate.store import ATTEMPTS_FILE

    latest: dict[tuple[Any, Any], Any] = {}
    superseded = []
    for row in read_jsonl(directory / ATTEMPTS_FILE):
        key = (row.get("task_id"), row.get("attempt")) if isinstance(row, dict) else None
        if key is None:
            continue
        if key in latest:
            superseded.append(latest[key])
        latest[key] = row.get("usage")
    return [usage for usage in superseded if isinstance(usage, dict)]


def overhead_records(directory: Path) -> list[dict[str, Any]]:
    """The run's billed usage outside its attempts' final rows, as
    ``{"kind", "usage"}`` records: every line of :data:`OVERHEAD_FILE`
    (``preflight``), then the superseded attempt lines (``rerun``)."""
    records = [{"kind": str(row.get("kind") or PREFLIGHT), "usage": row["usage"]}
               for row in read_jsonl(directory / OVERHEAD_FILE)
               if isinstance(row, dict) and isinstance(row.get("usage"), dict)]
    return records + [{"kind": RERUN, "usage": usage} for usage in superseded_usages(directory)]


async def run_recorded(directory: Path, kind: str, step: Callable[[], Awaitable[Any]]) -> Any:
    """Await ``step`` with the usage of its calls recorded apart and written
    to the run's :data:`OVERHEAD_FILE`, also when it raises (a check that
    stops the run was still answered, and billed, where it got an answer)."""
    ledger = UsageLedger()
    try:
        with recording(ledger):
            return await step()
    finally:
        record_overhead(directory, kind, ledger)
