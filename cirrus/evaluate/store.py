"""The run store: ``reports/<run_id>/``.

While a run goes, each finished (task, attempt) is appended to
``transcripts.jsonl`` and then to ``attempts.jsonl`` (flushed and synced: the
attempt line is the commit mark), so a killed run loses at most the attempts
in flight, and a resumed run knows exactly what is done.  ``finalize`` turns
the committed rows into the contract's outputs: ``tasks.parquet``,
``checkpoints.parquet``, ``summary.json``; a transcript whose attempt line
never made it is dropped there.  Both tables carry ``run_id`` and ``model``;
``tasks.parquet`` also ``end_reason`` and ``end_checkpoint``
(:func:`end_reason`, :func:`end_checkpoint`: where and why each walk ended,
the answer ``cirrus show`` words).  Columns: ``docs/report-schema.md``.

A full disk stops the run with :class:`~cirrus.files.DiskFullError` ("disk
full while writing <path>: free space and re-run; completed attempts are
kept"): an append that fails part-way is cut back (no half line), and the
outputs are written to temporary files and renamed, so every file stays
readable and the same command resumes once there is room.

One process writes a run at a time: :meth:`RunStore.open` takes the run's
lock (``.lock``, :mod:`cirrus.evaluate.runlock`) before it touches a file,
and a second process is refused with :class:`~cirrus.evaluate.runlock.RunLocked`
naming the pid that holds it; :meth:`RunStore.close` gives it back.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

from cirrus.evaluate.runlock import RunLock
from cirrus.files import append_line, atomic_writer, disk_full, is_disk_full, read_jsonl, remove_stale_temps

RUN_FILE = "run.json"
ATTEMPTS_FILE = "attempts.jsonl"
TRANSCRIPTS_FILE = "transcripts.jsonl"
DISK_FULL_ADVICE = "free space and re-run; completed attempts are kept"

_SCHEMA_NAMES = ("TASK_SCHEMA", "CHECKPOINT_SCHEMA", "RUN_COLUMNS", "TASK_DERIVED_SCHEMA", "TASK_ADDED_SCHEMA",
                 "TASK_FILE_SCHEMA", "CHECKPOINT_ADDED_SCHEMA", "CHECKPOINT_FILE_SCHEMA")
_schemas: dict[str, dict[str, Any]] = {}


def _build_schemas() -> dict[str, dict[str, Any]]:
    """The tables' column types (polars: imported when first asked for, so
    that starting a run does not wait for it)."""
    import polars as pl

    TASK_SCHEMA = {
        "task_id": pl.Utf8, "attempt": pl.Int64, "category": pl.Utf8, "checkpoints": pl.Int64, "covered": pl.Int64,
        "accepted_turns": pl.Int64, "tpr": pl.Float64, "lj": pl.Int64, "nei": pl.Float64, "mtl": pl.Float64,
        "success": pl.Boolean, "status": pl.Utf8, "error": pl.Utf8, "input_tokens": pl.Int64,
        "output_tokens": pl.Int64, "wall_s": pl.Float64,
    }
    CHECKPOINT_SCHEMA = {
        "task_id": pl.Utf8, "attempt": pl.Int64, "checkpoint": pl.Int64, "reply_type": pl.Utf8, "accepted": pl.Boolean,
        "covered_through": pl.Int64, "tia": pl.Boolean, "tsa": pl.Boolean, "tev": pl.Boolean, "rr": pl.Boolean,
        "stl": pl.Int64, "fluent": pl.Boolean, "tool_calls": pl.Int64, "wall_s": pl.Float64,
        # a judge panel's members' coverage verdicts on the turn, as JSON (null for a single judge)
        "judge_votes": pl.Utf8,
    }
    # columns derived when the tables are written, after those of the attempt rows
    # (runs finished before they existed lack them; readers fill them in)
    RUN_COLUMNS = {"run_id": pl.Utf8, "model": pl.Utf8}
    TASK_DERIVED_SCHEMA = {**RUN_COLUMNS, "end_reason": pl.Utf8, "end_checkpoint": pl.Int64}
    # score columns added after the first release, at the end (older runs lack them; readers fill in null)
    TASK_ADDED_SCHEMA = {"mtl_alg1": pl.Float64, "language": pl.Utf8, "channel": pl.Utf8}
    TASK_FILE_SCHEMA = {**TASK_SCHEMA, **TASK_DERIVED_SCHEMA, **TASK_ADDED_SCHEMA}  # tasks.parquet
    # checkpoint columns added later, at the end: ``failure`` (docs/failures.md;
    # cirrus.evaluate.failures); older runs lack them, readers fill in null
    CHECKPOINT_ADDED_SCHEMA = {"failure": pl.Utf8}
    CHECKPOINT_FILE_SCHEMA = {**CHECKPOINT_SCHEMA, **RUN_COLUMNS, **CHECKPOINT_ADDED_SCHEMA}  # checkpoints.parquet
    return {name: value for name, value in locals().items() if name in _SCHEMA_NAMES}


def __getattr__(name: str) -> Any:
    """``TASK_SCHEMA``, ``CHECKPOINT_FILE_SCHEMA``, ...: module constants built
    on first use (PEP 562)."""
    if name in _SCHEMA_NAMES:
        if not _schemas:
            _schemas.update(_build_schemas())
        return _schemas[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# why a walk ended: ``end_reason`` of tasks.parquet
END_COMPLETED = "completed"        # every checkpoint covered
END_REJECTED = "rejected"          # the judge did not accept the agent's turn
END_FLUENCY_STOP = "fluency_stop"  # the next real query could no longer follow the history
END_TRUNCATED = "truncated"        # rescore only: the saved transcript has no turn for where the walk got
END_ERROR = "error"                # status = error: an infrastructure failure, not scored
END_UNKNOWN = "unknown"            # an ok row whose turns do not say (not written by Cirrus's walk)
END_REASONS = (END_COMPLETED, END_REJECTED, END_FLUENCY_STOP, END_TRUNCATED, END_ERROR, END_UNKNOWN)


def end_reason(row: dict[str, Any]) -> str:
    """Why the walk of an attempt row (an ``attempts.jsonl`` line: ``status``,
    ``covered``, ``checkpoints``, ``truncated`` of a rescore, ``turns`` with
    each judged turn's ``checkpoint``, ``accepted``, ``fluent``) ended: one
    of :data:`END_REASONS`.  ``cirrus show`` words the same answer."""
    if row.get("status") != "ok":
        return END_ERROR
    if row.get("truncated"):
        return END_TRUNCATED
    covered, total = row.get("covered"), row.get("checkpoints")
    if covered is not None and covered == total:
        return END_COMPLETED
    turns = row.get("turns") or []
    if not turns:
        return END_UNKNOWN
    last = turns[-1]
    if not last.get("accepted"):
        return END_REJECTED
    if last.get("fluent") is False:
        return END_FLUENCY_STOP
    return END_UNKNOWN


def end_checkpoint(row: dict[str, Any]) -> int | None:
    """The checkpoint where the walk of an attempt row ended: the last one (K)
    when it covered them all; else the first one not covered -- the one
    whose turn was rejected, whose query could not follow (fluency stop), or
    that the saved transcript has no turn for (truncated).  ``None`` for an
    error row or an unknown end."""
    reason = end_reason(row)
    if reason in (END_ERROR, END_UNKNOWN):
        return None
    if reason == END_COMPLETED:
        return row.get("checkpoints")
    turns = row.get("turns") or []
    last = turns[-1] if turns else {}
    if reason == END_REJECTED:
        return last.get("checkpoint")
    through = last.get("covered_through") if turns else row.get("covered")
    return (through or 0) + 1


class RunMismatch(ValueError):
    pass


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _end_partial_line(path: Path) -> None:
    """Close a line a crash cut short, so the next append starts a fresh line
    (the cut line stays unreadable and is skipped)."""
    if path.exists() and path.stat().st_size:
        try:
            with path.open("rb+") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
        except OSError as exc:
            if is_disk_full(exc):
                raise disk_full(exc, path, DISK_FULL_ADVICE) from exc
            raise


def _latest_lines(path: Path) -> dict[tuple[str, int], int]:
    """Where the last whole line of each (task, attempt) starts in ``path``.

    Offsets, not records: a run's transcripts can be far larger than memory
    (tens of thousands of attempts), and ``finalize`` copies the lines as
    they are."""
    offsets: dict[tuple[str, int], int] = {}
    if not path.exists():
        return offsets
    position = 0
    with path.open("rb") as handle:
        for line in handle:
            start, position = position, position + len(line)
            if not line.endswith(b"\n"):
                continue  # cut short by a crash
            try:
                record = json.loads(line)
                offsets[(record["task_id"], record["attempt"])] = start
            except (ValueError, TypeError, KeyError):
                continue
    return offsets


class RunStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.lock: RunLock | None = None  # held between open and close
        self._warming: threading.Thread | None = None

    def warm_up(self) -> None:
        """Import what :meth:`finalize` needs (polars: ~0.2 s of CPU) on a
        thread, once.  The scheduler calls it while the run's last attempts
        are in flight, when the event loop has CPU to spare, so the end of
        the run does not wait for the import; :meth:`finalize` imports it
        anyway (waiting for this thread's import, if it is not done)."""
        if self._warming is None:
            self._warming = threading.Thread(target=importlib.import_module, args=("polars",), daemon=True,
                                             name="cirrus-store-warm-up")
            self._warming.start()

    # -- start / resume ---------------------------------------------------------

    def open(self, fingerprint: dict[str, Any], details: dict[str, Any]) -> None:
        """Create the run, or check that a resumed run asks for the same
        thing.  Takes the run's lock first: another process writing the run
        raises :class:`~cirrus.evaluate.runlock.RunLocked` (nothing
        touched).  The lock is held until :meth:`close` (or the process
        exits), also when this raises otherwise (a mismatch, a full disk)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.lock is None:
            self.lock = RunLock(self.directory).acquire()
        self._open(fingerprint, details)

    def close(self) -> None:
        """Give the run's lock back (the store can still be read)."""
        lock, self.lock = self.lock, None
        if lock is not None:
            lock.release()

    def _open(self, fingerprint: dict[str, Any], details: dict[str, Any]) -> None:
        remove_stale_temps(self.directory)  # a run killed while finalizing: no live writer, the lock says
        for name in (ATTEMPTS_FILE, TRANSCRIPTS_FILE):
            _end_partial_line(self.directory / name)
        run_file = self.directory / RUN_FILE
        if run_file.exists():
            previous = json.loads(run_file.read_text(encoding="utf-8"))["fingerprint"]
            changed = sorted(k for k in set(previous) | set(fingerprint) if previous.get(k) != fingerprint.get(k))
            if changed:
                raise RunMismatch(
                    f"run {self.directory.name} was started with other settings ({', '.join(changed)} differ); "
                    "resume it with the same models, parameters and tasks, or choose a new --run-id"
                )
            return
        with atomic_writer(run_file, advice=DISK_FULL_ADVICE) as out:
            json.dump({"fingerprint": fingerprint, **details}, out, indent=2, ensure_ascii=False)

    def committed(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The last committed row of each (task, attempt), all in memory."""
        return {(row["task_id"], row["attempt"]): row for row in read_jsonl(self.directory / ATTEMPTS_FILE)}

    def latest_rows(self, latest: dict[tuple[str, int], int] | None = None) -> Iterator[dict[str, Any]]:
        """The last committed row of each (task, attempt), in (task, attempt)
        order, read one at a time: a run of tens of thousands of attempts
        need not hold its rows (~6 KiB each as Python objects) at once.
        ``latest``: the attempt lines' offsets, when the caller has them."""
        attempts = self.directory / ATTEMPTS_FILE
        latest = _latest_lines(attempts) if latest is None else latest
        if not latest:
            return
        with attempts.open("rb") as handle:
            for key in sorted(latest):
                handle.seek(latest[key])
                yield json.loads(handle.readline())

    # -- appending ----------------------------------------------------------------

    def append(self, row: dict[str, Any], transcript: dict[str, Any]) -> None:
        """The transcript, then the attempt line (the commit mark), each
        synced; a line that cannot be written whole is not left half written."""
        for name, record in ((TRANSCRIPTS_FILE, transcript), (ATTEMPTS_FILE, row)):
            append_line(self.directory / name, json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n",
                        advice=DISK_FULL_ADVICE)

    # -- outputs --------------------------------------------------------------------

    def model(self) -> str | None:
        """The agent under test, as ``run.json``'s fingerprint names it."""
        try:
            return json.loads((self.directory / RUN_FILE).read_text(encoding="utf-8"))["fingerprint"]["agent"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def finalize(self, summary: dict[str, Any]) -> None:
        committed = _latest_lines(self.directory / ATTEMPTS_FILE)
        tasks, checkpoints = self.tables(committed, model=summary.get("model"))
        for name, frame in (("tasks.parquet", tasks), ("checkpoints.parquet", checkpoints)):
            buffer = io.BytesIO()  # small; written whole, so a full disk leaves the old file
            frame.write_parquet(buffer)
            with atomic_writer(self.directory / name, binary=True, advice=DISK_FULL_ADVICE) as out:
                out.write(buffer.getbuffer())
        transcripts = self.directory / TRANSCRIPTS_FILE
        latest = _latest_lines(transcripts)
        with transcripts.open("rb") as source, atomic_writer(transcripts, binary=True, advice=DISK_FULL_ADVICE) as out:
            for key in sorted(k for k in latest if k in committed):
                source.seek(latest[key])
                out.write(source.readline())
        with atomic_writer(self.directory / "summary.json", advice=DISK_FULL_ADVICE) as out:
            json.dump(summary, out, indent=2, ensure_ascii=False)
            out.write("\n")

    def tables(self, committed: dict[tuple[str, int], int] | None = None,
               batch: int = 2_000, *, model: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The committed rows as ``tasks.parquet``'s and ``checkpoints.parquet``'s
        tables (:data:`TASK_FILE_SCHEMA`, :data:`CHECKPOINT_FILE_SCHEMA`),
        built ``batch`` attempts at a time: columns are far smaller than the
        rows as Python objects.  ``committed``: as for :meth:`latest_rows`;
        ``model``: the ``model`` column (default: the agent of ``run.json``);
        ``run_id`` is the run folder's name."""
        import polars as pl

        schema = __getattr__
        TASK_SCHEMA, TASK_FILE_SCHEMA, TASK_ADDED_SCHEMA = (  # noqa: N806 - the module's constants
            schema("TASK_SCHEMA"), schema("TASK_FILE_SCHEMA"), schema("TASK_ADDED_SCHEMA"))
        CHECKPOINT_SCHEMA, CHECKPOINT_FILE_SCHEMA, CHECKPOINT_ADDED_SCHEMA = (  # noqa: N806
            schema("CHECKPOINT_SCHEMA"), schema("CHECKPOINT_FILE_SCHEMA"), schema("CHECKPOINT_ADDED_SCHEMA"))
        run = {"run_id": self.directory.name, "model": model if model is not None else self.model()}
        task_frames: list[pl.DataFrame] = []
        checkpoint_frames: list[pl.DataFrame] = []
        task_rows: list[dict[str, Any]] = []
        checkpoint_rows: list[dict[str, Any]] = []

        def flush() -> None:
            task_frames.append(pl.DataFrame(task_rows, schema=TASK_FILE_SCHEMA))
            checkpoint_frames.append(pl.DataFrame(checkpoint_rows, schema=CHECKPOINT_FILE_SCHEMA))
            task_rows.clear()
            checkpoint_rows.clear()

        for row in self.latest_rows(committed):
            task_rows.append({**{k: row.get(k) for k in TASK_SCHEMA}, **run,
                              "end_reason": end_reason(row), "end_checkpoint": end_checkpoint(row),
                              **{k: row.get(k) for k in TASK_ADDED_SCHEMA}})
            checkpoint_rows.extend({**{k: c.get(k) for k in CHECKPOINT_SCHEMA}, "task_id": row["task_id"],
                                    "attempt": row["attempt"], "judge_votes": _json_or_none(c.get("judge_votes")),
                                    **run, **{k: c.get(k) for k in CHECKPOINT_ADDED_SCHEMA}}
                                   for c in row.get("turns", []))
            if len(task_rows) >= batch:
                flush()
        flush()
        return pl.concat(task_frames, rechunk=True), pl.concat(checkpoint_frames, rechunk=True)
