"""The workspace's task file, read for an evaluation.

A run over tens of thousands of tasks should not hold them all in memory
(a task with its knowledge documents is tens of KiB): :class:`TaskIndex`
reads ``tickets/tasks.jsonl`` once, checking every line (valid JSON, a
valid :class:`~cirrus.schema.Task`) and keeping only where each task is and
what scheduling needs, and :meth:`TaskIndex.load_task` reads one task back,
validated into a :class:`~cirrus.schema.Task`, when an attempt starts.
:meth:`TaskIndex.load` and iterating the index give the lines as read
(dicts), for the readers of a mapping: the agents under test (the retrieval
baseline's index, the workspace's tool set) and the tool server; report
loading reads the typed tasks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from cirrus.evaluate.plan import CheckpointShape, logged_calls, shapes
from cirrus.schema import Task
from cirrus.workspace import IN_PROGRESS_FILE, TASKS_FILE


class TaskFileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TaskRef:
    """Where one task is in the task file, and what scheduling needs of it."""

    task_id: str
    line: int
    offset: int
    size: int
    checkpoints: int
    input_tokens: int
    expected_calls: int = 0  # model calls of a walk that follows the recorded log (:func:`expected_calls`)
    # each checkpoint's shape, in order: what the run's length model reads (cirrus.evaluate.plan)
    shape: tuple[CheckpointShape, ...] = ()


def expected_calls(task: Task) -> int:
    """The model calls, one after the other, of a walk that follows the
    task's recorded log: at each checkpoint the agent's reply and one call per
    recorded tool call, the coverage judge on each reference that has text
    (on it and, before the next checkpoint, on the next), and the fluency
    check before every checkpoint but the first
    (:func:`cirrus.evaluate.plan.logged_calls`).  The scheduler's first
    estimate of an attempt's length: longest first, and the event loop's
    turns (:mod:`cirrus.llm.client.turns`)."""
    return logged_calls(shapes(task.checkpoints))


class _DatasetHasher:
    """The dataset hash a run is fingerprinted with: the same for a list of
    tasks and for the file they were read from."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def add(self, task: dict[str, Any]) -> None:
        self._digest.update(json.dumps(task, sort_keys=True, ensure_ascii=False).encode())

    def hexdigest(self) -> str:
        return self._digest.hexdigest()[:16]


def dataset_hash(tasks: Iterable[dict[str, Any]]) -> str:
    hasher = _DatasetHasher()
    for task in tasks:
        hasher.add(task)
    return hasher.hexdigest()


def _checked(path: Path, number: int, line: bytes) -> dict[str, Any]:
    """Line ``number`` of ``path`` parsed: a JSON object with a ``task_id`` and checkpoints."""
    try:
        task = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise TaskFileError(f"{path}:{number}: not valid JSON ({reason})") from exc
    if not isinstance(task, dict) or not isinstance(task.get("task_id"), str):
        raise TaskFileError(f"{path}:{number}: not a task (no task_id)")
    if not isinstance(task.get("checkpoints"), list) or not task["checkpoints"]:
        raise TaskFileError(f"{path}:{number}: not a task (no checkpoints)")
    return task


def validation_problem(error: ValidationError) -> str:
    """The first problem of ``error``: where in the task (``checkpoints.0.query``) and what."""
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"]) or "task"
    return f"{where}: {problem['msg']}"


def _validated(path: Path, number: int, raw: dict[str, Any]) -> Task:
    """Line ``number``'s task (``raw``, as :func:`_checked` read it) as a
    :class:`Task`; a :class:`TaskFileError` naming the line and the field
    when it is not a valid one."""
    try:
        return Task.model_validate(raw)
    except ValidationError as exc:
        raise TaskFileError(f"{path}:{number}: not a valid task ({validation_problem(exc)})") from None


class TaskIndex:
    """The first ``limit`` tasks of a workspace, in file order, by reference."""

    def __init__(self, path: Path, refs: list[TaskRef], dataset_hash: str) -> None:
        self.path = path
        self.refs = refs
        self.dataset_hash = dataset_hash

    @classmethod
    def scan(cls, workspace: Path, limit: int | None = None) -> TaskIndex:
        path = workspace / TASKS_FILE
        if (workspace / IN_PROGRESS_FILE).exists():
            raise TaskFileError(
                f"an ingest into {workspace} is running or was interrupted ({IN_PROGRESS_FILE} exists), so its "
                f"tasks and cassettes may not match: wait for it, or run `cirrus ingest` again to completion"
            )
        if not path.exists():
            raise TaskFileError(f"{path} does not exist: run `cirrus ingest RAW --workspace {workspace}` first")
        refs: list[TaskRef] = []
        seen: dict[str, int] = {}
        hasher = _DatasetHasher()
        offset = 0
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                start, offset = offset, offset + len(line)
                if limit is not None and len(refs) >= limit:
                    break
                if not line.strip():
                    continue
                raw = _checked(path, number, line)
                task = _validated(path, number, raw)
                if task.task_id in seen:
                    raise TaskFileError(f"{path}:{number}: task_id {task.task_id!r} repeats line {seen[task.task_id]}")
                seen[task.task_id] = number
                hasher.add(raw)  # the line as read: the hash of a run's tasks does not depend on the model
                shape = shapes(task.checkpoints)
                refs.append(TaskRef(task.task_id, number, start, len(line), len(task.checkpoints),
                                    task.stats.input_tokens, logged_calls(shape), shape))
        return cls(path, refs, hasher.hexdigest())

    def __len__(self) -> int:
        return len(self.refs)

    def load_task(self, ref: TaskRef) -> Task:
        """One task, read again from the file and validated."""
        return _validated(self.path, ref.line, self.load(ref))

    def tasks(self) -> Iterator[Task]:
        """Every task, validated, streamed in file order."""
        with self.path.open("rb") as handle:
            for ref in self.refs:
                yield _validated(self.path, ref.line, self._read(handle, ref))

    def load(self, ref: TaskRef) -> dict[str, Any]:
        """One task's line, read again from the file, as a dict (the line as
        read; :meth:`load_task` for the typed task)."""
        with self.path.open("rb") as handle:
            return self._read(handle, ref)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every task's line as a dict, streamed in file order (:meth:`tasks`
        for the typed tasks)."""
        with self.path.open("rb") as handle:
            for ref in self.refs:
                yield self._read(handle, ref)

    def _read(self, handle: BinaryIO, ref: TaskRef) -> dict[str, Any]:
        """``ref``'s task; a file changed since the scan is an error, not another task."""
        handle.seek(ref.offset)
        line = handle.read(ref.size)
        task = _checked(self.path, ref.line, line) if len(line) == ref.size else None
        if task is None or task["task_id"] != ref.task_id:
            raise TaskFileError(f"{self.path} changed during the run (line {ref.line} is no longer "
                                f"task {ref.task_id!r}): do not ingest into a workspace that is being evaluated")
        return task


def load_tasks(workspace: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` tasks of ``tickets/tasks.jsonl``, in file order, in
    memory, as the dicts of their lines (checked valid tasks)."""
    return list(TaskIndex.scan(workspace, limit))


def load_typed_tasks(workspace: Path, limit: int | None = None) -> list[Task]:
    """The first ``limit`` tasks of ``tickets/tasks.jsonl``, in file order, in
    memory, as :class:`Task`s."""
    return list(TaskIndex.scan(workspace, limit).tasks())
