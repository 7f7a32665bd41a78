"""Load finished runs of a workspace for the report tables.

:func:`load_run` / :func:`load_runs` give a :class:`Run`: its
``tasks.parquet`` and ``checkpoints.parquet`` as polars lazy frames, joined
with what the tasks themselves say (``tickets/tasks.jsonl``): the task's
input length, whether its reference used tools, and per checkpoint the
reference tool calls; plus ``summary.json`` and ``run.json``.  Every problem
(an unknown run, a run that has not finished, a missing or malformed file, a
task the workspace no longer has) raises :class:`ReportError` naming the file
or run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from cirrus import pricing
from cirrus.evaluate.store import CHECKPOINT_FILE_SCHEMA, RUN_FILE, TASK_FILE_SCHEMA, end_checkpoint, end_reason
from cirrus.workspace import REPORTS_DIR, TASKS_FILE

if TYPE_CHECKING:
    from cirrus.evaluate.tasks import TaskIndex
    from cirrus.schema import Task

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}")

# columns of the run files the report needs (the contract's "at least")
TASK_COLUMNS = ("task_id", "attempt", "category", "checkpoints", "covered", "accepted_turns", "tpr", "lj", "nei",
                "mtl", "success", "status", "input_tokens", "output_tokens", "wall_s")
CHECKPOINT_COLUMNS = ("task_id", "attempt", "checkpoint", "reply_type", "accepted", "covered_through", "tia", "tsa",
                      "tev", "rr", "stl", "fluent")

# what the report adds from tickets/tasks.jsonl
TASK_META_SCHEMA = {"task_id": pl.Utf8, "task_category": pl.Utf8, "task_input_tokens": pl.Int64,
                    "ref_tool_calls": pl.Int64, "has_tool_calls": pl.Boolean, "task_language": pl.Utf8,
                    "task_channel": pl.Utf8}
# ticket metadata a report can break down by: Run.tasks column <- TaskMetadata.tasks column
TICKET_DIMENSIONS = {"language": "task_language", "channel": "task_channel"}
REFERENCE_SCHEMA = {"task_id": pl.Utf8, "checkpoint": pl.Int64, "ref_reply_type": pl.Utf8,
                    "ref_tool_calls": pl.Int64}


class ReportError(ValueError):
    """A run or workspace file the report cannot use; the message says which."""


@dataclass(frozen=True)
class TaskMetadata:
    """What ``tickets/tasks.jsonl`` says about the tasks, as two frames
    (:func:`task_frames` of its tasks, read validated as
    :class:`~cirrus.schema.Task`: :meth:`typed_tasks` reads them again).

    ``tasks``: one row per task: ``task_id``, ``task_category``,
    ``task_input_tokens`` (``stats.input_tokens``: the length of the task's
    context), ``ref_tool_calls`` (reference tool calls over all checkpoints),
    ``has_tool_calls`` (``ref_tool_calls > 0``), ``task_language`` and
    ``task_channel`` (the ticket's ``language``, ``en`` when the line has
    none, and ``channel``).

    ``reference``: one row per reference checkpoint: ``task_id``,
    ``checkpoint`` (1-based index), ``ref_reply_type``, ``ref_tool_calls``.
    """

    path: Path
    tasks: pl.DataFrame
    reference: pl.DataFrame
    index: TaskIndex = field(repr=False)  # where each task is in the file (the lines are not kept)
    _hashes: dict[int | None, str] = field(default_factory=dict, repr=False, compare=False)

    def typed_tasks(self) -> Iterator[Task]:
        """The tasks, read again from the file and validated, in file order."""
        from cirrus.evaluate.tasks import TaskFileError

        try:
            yield from self.index.tasks()
        except TaskFileError as exc:
            raise ReportError(_changed(self.path)) from exc

    def dataset_hash(self, first: int | None) -> str:
        """``dataset`` of a run's fingerprint had it been started now on the
        first ``first`` tasks (all when ``None``): the hash of the lines as
        read, as :class:`~cirrus.evaluate.tasks.TaskIndex` computes it."""
        if first not in self._hashes:
            from cirrus.evaluate.tasks import TaskFileError, dataset_hash

            if first is None or first >= len(self.index):
                self._hashes[first] = self.index.dataset_hash
            else:
                try:
                    self._hashes[first] = dataset_hash(islice(self.index, max(first, 0)))
                except TaskFileError as exc:
                    raise ReportError(_changed(self.path)) from exc
        return self._hashes[first]


def _changed(path: Path) -> str:
    """What a :class:`~cirrus.evaluate.tasks.TaskFileError` met reading the
    task file again means to a report: the file changed since it was read."""
    return f"{path} changed while the report read it (an ingest into the workspace?): make the report again"


@dataclass(frozen=True)
class Run:
    """One finished run, ready for the tables.

    ``tasks``: ``tasks.parquet`` (one row per (task, attempt)) with ``run_id``,
    ``model``, ``end_reason`` and ``end_checkpoint`` (filled in for runs
    written before those columns existed), plus the task metadata columns
    ``task_input_tokens``, ``ref_tool_calls``, ``has_tool_calls``,
    ``language`` and ``channel`` (:data:`TICKET_DIMENSIONS`).

    ``checkpoints``: ``checkpoints.parquet`` (one row per judged agent turn)
    with ``run_id``, ``model`` and ``failure`` (null for runs written before
    it existed), plus ``status`` of its attempt, and the reference's
    ``ref_tool_calls`` / ``ref_has_tool_calls`` for the checkpoint the turn
    answered.

    ``reference``: the reference checkpoints of the run's tasks
    (:class:`TaskMetadata`), one row per (task, checkpoint).

    ``k``: the run's ``--pass-k`` (``k`` of ``summary.json``); ``summary``
    and ``config`` are ``summary.json`` and ``run.json`` as read.
    """

    run_id: str
    directory: Path
    summary: dict[str, Any]
    config: dict[str, Any]
    tasks: pl.LazyFrame
    checkpoints: pl.LazyFrame
    reference: pl.LazyFrame
    warnings: tuple[str, ...] = ()

    @property
    def model(self) -> str:
        return _model(self.run_id, self.summary, self.config)

    @property
    def k(self) -> int:
        k = self.summary.get("k")
        if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            return k
        # summaries without "k": the K of the "pass@K" key
        for key in self.summary.get("sr", {}) or {}:
            if key.startswith("pass@") and key != "pass@1" and key[5:].isdigit():
                return int(key[5:])
        return 1

    @property
    def self_judged(self) -> bool:
        """The run's judge or fluency checker was the agent's own model
        (``self_judged`` of summary.json, else of run.json; runs made
        before Cirrus recorded it count as not self-judged)."""
        return self.summary.get("self_judged", self.config.get("self_judged")) is True

    @property
    def dataset(self) -> str | None:
        value = self.config.get("fingerprint", {}).get("dataset")
        return None if value is None else str(value)


def _model(run_id: str, summary: dict[str, Any], config: dict[str, Any]) -> str:
    return str(summary.get("model") or config.get("fingerprint", {}).get("agent") or run_id)


def _end_columns(tasks: pl.LazyFrame, checkpoints: pl.LazyFrame) -> pl.LazyFrame:
    """``end_reason`` and ``end_checkpoint`` per (task, attempt), for a run
    written before tasks.parquet had them: :func:`~cirrus.evaluate.store.end_reason`
    on the attempt's row and judged turns, as the run store computes them."""
    names = tasks.collect_schema().names()
    wanted = [c for c in ("task_id", "attempt", "status", "covered", "checkpoints", "truncated") if c in names]
    turns: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for turn in (checkpoints.select("task_id", "attempt", "checkpoint", "accepted", "covered_through", "fluent")
                 .sort("task_id", "attempt", "checkpoint").collect().iter_rows(named=True)):
        turns.setdefault((turn["task_id"], turn["attempt"]), []).append(turn)
    rows = []
    for row in tasks.select(wanted).collect().iter_rows(named=True):
        row["turns"] = turns.get((row["task_id"], row["attempt"]), [])
        rows.append({"task_id": row["task_id"], "attempt": row["attempt"], "end_reason": end_reason(row),
                     "end_checkpoint": end_checkpoint(row)})
    schema = {"task_id": pl.Utf8, "attempt": pl.Int64, "end_reason": pl.Utf8, "end_checkpoint": pl.Int64}
    return pl.DataFrame(rows, schema=schema).lazy()


def check_run_id(run_id: str) -> None:
    if not RUN_ID_PATTERN.fullmatch(run_id) or run_id.startswith("."):
        raise ReportError(f"run id {run_id!r}: a run id has letters, digits, '.', '_' and '-' only")


def _available(reports: Path) -> list[str]:
    if not reports.is_dir():
        return []
    return sorted(p.name for p in reports.iterdir() if (p / RUN_FILE).is_file() or (p / "tasks.parquet").is_file())


def task_frames(tasks: Iterable[Task]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``tasks`` and ``reference`` frames of :class:`TaskMetadata` for
    these tasks (pure)."""
    task_rows, reference_rows = [], []
    for task in tasks:
        total = 0
        for checkpoint in task.checkpoints:
            calls = len(checkpoint.tool_calls)
            total += calls
            reference_rows.append({"task_id": task.task_id, "checkpoint": checkpoint.index,
                                   "ref_reply_type": checkpoint.reply_type, "ref_tool_calls": calls})
        task_rows.append({"task_id": task.task_id, "task_category": task.category,
                          "task_input_tokens": task.stats.input_tokens,
                          "ref_tool_calls": total, "has_tool_calls": total > 0,
                          "task_language": _text(task.language), "task_channel": _text(task.channel)})
    return pl.DataFrame(task_rows, schema=TASK_META_SCHEMA), pl.DataFrame(reference_rows, schema=REFERENCE_SCHEMA)


def load_task_metadata(workspace: Path) -> TaskMetadata:
    """Read ``tickets/tasks.jsonl`` of ``workspace`` (see :class:`TaskMetadata`):
    every line validated as a :class:`~cirrus.schema.Task`, a bad one a
    :class:`ReportError` naming the file, the line and the field."""
    from cirrus.evaluate.tasks import TaskFileError, TaskIndex

    try:
        index = TaskIndex.scan(workspace)
        tasks, reference = task_frames(index.tasks())
    except TaskFileError as exc:
        raise ReportError(str(exc)) from exc
    return TaskMetadata(workspace / TASKS_FILE, tasks, reference, index)


def _text(value: Any) -> str | None:
    """A metadata value as a segment label: a non-empty string, else None."""
    return value.strip() if isinstance(value, str) and value.strip() else None


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not valid JSON ({exc.msg}); the {what} is damaged") from exc
    if not isinstance(value, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return value


def _scan(path: Path, required: Sequence[str], schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    try:
        frame = pl.scan_parquet(path)
        names = frame.collect_schema().names()
    except Exception as exc:  # noqa: BLE001  (polars raises several kinds for a damaged file)
        raise ReportError(f"{path}: not a readable Parquet file ({exc})") from exc
    missing = [c for c in required if c not in names]
    if missing:
        raise ReportError(f"{path}: missing columns {', '.join(missing)}")
    return frame.with_columns(pl.col(c).cast(schema[c]) for c in names if c in schema)


def _filled(column: str, value: str, names: Sequence[str]) -> pl.Expr:
    """``column`` with its nulls (or, when the file lacks it, every row) set to ``value``."""
    if column in names:
        return pl.col(column).fill_null(pl.lit(value))
    return pl.lit(value, dtype=pl.Utf8).alias(column)


def _run_files(workspace: Path, run_id: str) -> tuple[Path, Path, Path, Path]:
    """The run's folder, tasks.parquet, checkpoints.parquet, summary.json;
    :class:`ReportError` when the run does not exist or has not finished."""
    check_run_id(run_id)
    reports = workspace / REPORTS_DIR
    directory = reports / run_id
    if not directory.is_dir():
        known = _available(reports)
        hint = f"runs there: {', '.join(known)}" if known else "there is no run there yet: run `cirrus eval` first"
        raise ReportError(f"no run {run_id!r} in {reports} ({hint})")
    files = tuple(directory / n for n in ("tasks.parquet", "checkpoints.parquet", "summary.json"))
    for path in files:
        if not path.is_file():
            from cirrus.evaluate.subtask import MODE_SUBTASK, run_mode

            if run_mode(directory) == MODE_SUBTASK:  # it has subtasks.parquet, never the walk's tables
                raise ReportError(f"run {run_id!r} is a subtask run (cirrus eval --mode subtask): it has no walk "
                                  f"tables; `cirrus report {run_id}` gives its subtask tables (docs/subtasks.md)")
            raise ReportError(f"run {run_id!r} has no {path.name} ({path}): the run has not finished; "
                              f"resume it with `cirrus eval ... --run-id {run_id}`")
    return (directory, *files)


def load_run(workspace: Path, run_id: str, metadata: TaskMetadata | None = None) -> Run:
    """The finished run ``workspace/reports/<run_id>/`` (see :class:`Run`).

    ``metadata``: the workspace's task metadata when already read (several
    runs share it); read from ``tickets/tasks.jsonl`` otherwise.
    """
    directory, tasks_file, checkpoints_file, summary_file = _run_files(workspace, run_id)
    summary = _read_json(summary_file, "run summary")
    warnings: list[str] = []
    run_file = directory / RUN_FILE
    config: dict[str, Any] = {}
    if run_file.is_file():
        config = _read_json(run_file, "run record")
    else:
        warnings.append(f"run {run_id!r} has no {RUN_FILE}: its dataset hash is unknown")

    if metadata is None:
        metadata = load_task_metadata(workspace)
    tasks = _scan(tasks_file, TASK_COLUMNS, TASK_FILE_SCHEMA)
    checkpoints = _scan(checkpoints_file, CHECKPOINT_COLUMNS, CHECKPOINT_FILE_SCHEMA)
    # columns later versions of the run store added: filled in for older runs
    model = _model(run_id, summary, config)
    task_names = tasks.collect_schema().names()
    if "end_reason" not in task_names or "end_checkpoint" not in task_names:
        tasks = tasks.drop("end_reason", "end_checkpoint", strict=False).join(
            _end_columns(tasks, checkpoints), on=["task_id", "attempt"], how="left")
    tasks = tasks.with_columns(pl.lit(run_id).alias("run_id"), _filled("model", model, task_names))
    if "mtl_alg1" not in task_names:  # runs written before it existed
        tasks = tasks.with_columns(pl.lit(None, dtype=pl.Float64).alias("mtl_alg1"))
    checkpoints = checkpoints.with_columns(_filled("model", model, checkpoints.collect_schema().names()))
    if "failure" not in checkpoints.collect_schema().names():  # runs written before it existed (docs/failures.md)
        checkpoints = checkpoints.with_columns(pl.lit(None, dtype=pl.Utf8).alias("failure"))

    run_task_ids = tasks.select(pl.col("task_id").unique()).collect()["task_id"]
    unknown = sorted(set(run_task_ids.to_list()) - set(metadata.tasks["task_id"].to_list()))
    if unknown:
        raise ReportError(
            f"run {run_id!r} has {len(unknown)} task(s) that {metadata.path} does not have "
            f"({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}): the workspace's tasks changed "
            "since the run; report it from the workspace it was run on")
    fingerprint_hash = config.get("fingerprint", {}).get("dataset")
    if fingerprint_hash is not None:
        started_on = config.get("tasks")
        current = metadata.dataset_hash(started_on if isinstance(started_on, int) else None)
        if current != fingerprint_hash:
            warnings.append(f"{metadata.path} changed since run {run_id!r} was made (dataset {fingerprint_hash}, "
                            f"now {current}): input-token ranges, tool flags and reply types come from the current file")

    meta = metadata.tasks.lazy().select("task_id", "task_category", "task_input_tokens", "ref_tool_calls",
                                        "has_tool_calls", *TICKET_DIMENSIONS.values())
    # the ticket's language and channel: the run's own columns where it has them, else tasks.jsonl's
    tickets = [(pl.coalesce(column, source) if column in task_names else pl.col(source)).cast(pl.Utf8).alias(column)
               for column, source in TICKET_DIMENSIONS.items()]
    tasks = (tasks.join(meta, on="task_id", how="left")
             .with_columns(pl.coalesce("category", "task_category").alias("category"), *tickets)
             .drop("task_category", *TICKET_DIMENSIONS.values())
             .sort("task_id", "attempt"))  # a join does not keep row order
    reference = (metadata.reference.lazy()
                 .join(run_task_ids.to_frame().lazy(), on="task_id", how="semi"))
    status = tasks.select("task_id", "attempt", "status")
    checkpoints = (checkpoints
                   .join(status, on=["task_id", "attempt"], how="left")
                   .join(reference.select("task_id", "checkpoint", "ref_tool_calls"), on=["task_id", "checkpoint"],
                         how="left")
                   .with_columns(pl.lit(run_id).alias("run_id"),
                                 (pl.col("ref_tool_calls") > 0).alias("ref_has_tool_calls"))
                   .sort("task_id", "attempt", "checkpoint"))
    return Run(run_id=run_id, directory=directory, summary=summary, config=config, tasks=tasks,
               checkpoints=checkpoints, reference=reference, warnings=tuple(warnings))


def load_runs(workspace: Path, run_ids: Sequence[str]) -> list[Run]:
    """:func:`load_run` for each id, in order, reading the task metadata once.
    An id given twice raises :class:`ReportError`."""
    if not run_ids:
        raise ReportError("give at least one run id")
    seen: set[str] = set()
    for run_id in run_ids:
        if run_id in seen:
            raise ReportError(f"run {run_id!r} is given twice")
        seen.add(run_id)
        check_run_id(run_id)
    for run_id in run_ids:
        _run_files(workspace, run_id)  # a missing run fails before the task file is read
    metadata = load_task_metadata(workspace)
    return [load_run(workspace, run_id, metadata) for run_id in run_ids]


# --------------------------------------------------------------------------
# Prices
# --------------------------------------------------------------------------

SETTINGS_FILE = pricing.SETTINGS_FILE
Price = pricing.Price


def parse_prices(table: Any, where: str = "prices") -> dict[str, Price]:
    """:func:`cirrus.pricing.parse_prices`, a malformed entry raising :class:`ReportError`."""
    try:
        return pricing.parse_prices(table, where)
    except pricing.PriceError as exc:
        raise ReportError(str(exc)) from exc


def load_prices(workspace: Path, config: Path | None = None) -> dict[str, Price]:
    """:func:`cirrus.pricing.load_prices`, its errors raised as :class:`ReportError`."""
    try:
        return pricing.load_prices(workspace, config)
    except pricing.PriceError as exc:
        raise ReportError(str(exc)) from exc


def _role_model(part: Any) -> str | None:
    model = part.get("model") if isinstance(part, dict) else None
    return model if isinstance(model, str) and model else None


def run_models(config: dict[str, Any]) -> dict[str, str]:
    """The model of each client a run called, from ``run.json``'s
    fingerprint (``agent_role.model``, ``judge_role.model``,
    ``fluency_role.model``): the keys :func:`cirrus.pricing.run_cost` prices
    by.  A judge panel (``judge_role.panel``) gives ``judge[1]``,
    ``judge[2]``, ... and also ``judge`` when every member is the same model
    (``summary.json``'s usage sums a panel's members into ``judge``).
    Baselines, the local judge and runs that did not record a role give no
    entry for it."""
    fingerprint = config.get("fingerprint")
    if not isinstance(fingerprint, dict):
        return {}
    models: dict[str, str] = {}
    for role in ("agent", "judge", "fluency"):
        part = fingerprint.get(f"{role}_role")
        model = _role_model(part)
        if model is not None:
            models[role] = model
        panel = part.get("panel") if isinstance(part, dict) else None
        if role == "judge" and isinstance(panel, list) and panel:
            members = [_role_model(member) for member in panel]
            for number, member in enumerate(members, 1):
                if member is not None:
                    models[f"judge[{number}]"] = member
            if len(set(members)) == 1 and members[0] is not None:
                models["judge"] = members[0]
    return models


def attempt_usage(run: Run) -> dict[str, dict[str, int]] | None:
    """Usage per model client (``judge[2]`` apart from ``judge[1]``) summed
    over the run's committed attempts that ``tasks.parquet`` holds, from
    ``attempts.jsonl``: what prices a judge panel whose members are
    different models (``summary.json`` has the panel summed into
    ``judge``).  None when the run has no ``attempts.jsonl`` or its rows
    record no usage."""
    from cirrus.evaluate.store import ATTEMPTS_FILE
    from cirrus.files import read_jsonl
    from cirrus.usage import UsageLedger

    path = Path(run.directory) / ATTEMPTS_FILE
    if not path.is_file():
        return None
    keys = set(run.tasks.select("task_id", "attempt").collect().iter_rows())
    latest: dict[tuple[Any, Any], Any] = {}
    try:
        for row in read_jsonl(path):
            if isinstance(row, dict):
                latest[(row.get("task_id"), row.get("attempt"))] = row.get("usage")
    except (OSError, UnicodeDecodeError):
        return None
    usages = [usage for key, usage in latest.items() if key in keys and isinstance(usage, dict)]
    if not usages:
        return None
    return UsageLedger.total_of(usages).to_dict()


# --------------------------------------------------------------------------
# Judge noise (reports/<run_id>/judge_consistency.json, when measured)
# --------------------------------------------------------------------------

JUDGE_CONSISTENCY_FILE = "judge_consistency.json"  # = cirrus.judges.consistency.OUTPUT_FILE
# the noise-table columns a judge_consistency.json fills, all null when the run has none
JUDGE_NOISE_COLUMNS = ("judge_measured", "judge_sample", "judge_repeats", "judge_item_flip_rate",
                       "judge_item_flip_rate_low", "judge_item_flip_rate_high", "judge_verdict_flip_rate",
                       "judge_verdict_flip_rate_low", "judge_verdict_flip_rate_high")


class _Broken(ValueError):
    pass


def _rate(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise _Broken(f"{key} is {value!r}, not a share between 0 and 1 or null")
    return float(value)


def _rate_interval(record: dict[str, Any], key: str) -> tuple[float | None, float | None]:
    value = record.get(key)
    if value is None:
        return None, None
    if (not isinstance(value, list) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1 for v in value)
            or value[0] > value[1]):
        raise _Broken(f"{key} is {value!r}, not [low, high] between 0 and 1 or null")
    return float(value[0]), float(value[1])


def _count(record: dict[str, Any], key: str) -> int | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Broken(f"{key} is {value!r}, not a count")
    return value


def parse_judge_consistency(record: Any) -> dict[str, Any]:
    """The noise-table judge columns (:data:`JUDGE_NOISE_COLUMNS`) of a
    ``judge_consistency.json`` as read (written by ``cirrus judge-consistency``:
    ``judge``, ``sample``, ``repeats``, ``item_flip_rate`` and
    ``verdict_flip_rate`` with their ``*_ci95`` ``[low, high]``).  Raises
    ``ValueError`` saying what is wrong when it is not such a record."""
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    if "item_flip_rate" not in record and "verdict_flip_rate" not in record:
        raise ValueError("it has neither item_flip_rate nor verdict_flip_rate")
    try:
        judge = record.get("judge")
        if judge is not None and not isinstance(judge, str):
            raise _Broken(f"judge is {judge!r}, not a name")
        item_low, item_high = _rate_interval(record, "item_flip_rate_ci95")
        verdict_low, verdict_high = _rate_interval(record, "verdict_flip_rate_ci95")
        return {"judge_measured": judge or "unknown", "judge_sample": _count(record, "sample"),
                "judge_repeats": _count(record, "repeats"),
                "judge_item_flip_rate": _rate(record, "item_flip_rate"),
                "judge_item_flip_rate_low": item_low, "judge_item_flip_rate_high": item_high,
                "judge_verdict_flip_rate": _rate(record, "verdict_flip_rate"),
                "judge_verdict_flip_rate_low": verdict_low, "judge_verdict_flip_rate_high": verdict_high}
    except _Broken as exc:
        raise ValueError(str(exc)) from None


def load_judge_consistency(run: Run) -> tuple[dict[str, Any] | None, list[str]]:
    """The judge columns of the run's noise row from
    ``reports/<run_id>/judge_consistency.json`` (None when the file does not
    exist), and warnings: a file that cannot be read or is not such a record
    is left out with a warning (never an error); a file naming another run is
    used, with a warning.  The judge it names is not checked against the
    run's."""
    path = Path(run.directory) / JUDGE_CONSISTENCY_FILE
    if not path.is_file():
        return None, []
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        columns = parse_judge_consistency(record)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        reason = f"not valid JSON: {exc}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return None, [f"{path}: not a readable judge-consistency result ({reason}); the run's judge noise is left "
                      "out (rerun `cirrus judge-consistency`)"]
    warnings = []
    named = record.get("run_id")
    if named is not None and named != run.run_id:
        warnings.append(f"{path} was measured on run {named!r}, not {run.run_id!r}: its judge noise is shown as it is")
    return columns, warnings


def judge_flip_rates(judge_noise: Mapping[str, Mapping[str, Any] | None]) -> dict[str, float | None]:
    """``{run_id: the judge's verdict flip rate}`` from the judge columns of
    the noise table (:func:`load_judge_consistency`):
    ``judge_verdict_flip_rate``, else ``judge_item_flip_rate`` (never smaller);
    None where not measured."""
    rates: dict[str, float | None] = {}
    for run_id, columns in judge_noise.items():
        columns = columns or {}
        rate = columns.get("judge_verdict_flip_rate")
        rates[run_id] = rate if rate is not None else columns.get("judge_item_flip_rate")
    return rates
