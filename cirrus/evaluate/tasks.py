"""The workspace's task file, read for an evaluation.

A run over tens of thousands of tasks should not hold them all in memory
(a task with its knowledge documents is tens of KiB): :class:`TaskIndex`
reads ``tickets/tasks.jsonl`` once, checking every line and keeping only
where each task is and what scheduling needs, and :meth:`TaskIndex.load`
reads one task back when an attempt starts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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


def _input_tokens(task: dict[str, Any]) -> int:
    """The task's recorded input tokens (0 when absent or not a number: it
    only orders the walks)."""
    stats = task.get("stats")
    tokens = stats.get("input_tokens") if isinstance(stats, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0


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
                task = _checked(path, number, line)
                task_id = task["task_id"]
                if task_id in seen:
                    raise TaskFileError(f"{path}:{number}: task_id {task_id!r} repeats line {seen[task_id]}")
                seen[task_id] = number
                hasher.add(task)
                refs.append(TaskRef(task_id, number, start, len(line), len(task["checkpoints"]),
                                    _input_tokens(task)))
        return cls(path, refs, hasher.hexdigest())

    def __len__(self) -> int:
        return len(self.refs)

    def load(self, ref: TaskRef) -> dict[str, Any]:
        """One task, read again from the file."""
        with self.path.open("rb") as handle:
            return self._read(handle, ref)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every task, streamed in file order."""
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
    """The first ``limit`` tasks of ``tickets/tasks.jsonl``, in file order, in memory."""
    return list(TaskIndex.scan(workspace, limit))
