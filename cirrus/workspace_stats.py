"""The dataset statistics of a workspace (the library behind ``cirrus stats``,
:mod:`cirrus.commands.stats`): its tasks read and validated
(:func:`read_tasks`), counted by :func:`cirrus.stats.compute_stats`, and
written as ``WORKSPACE/reports/stats.json`` (:func:`write_stats`; fields:
``docs/stats.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from cirrus.stats import DatasetStats
from cirrus.workspace import TASKS_FILE

if TYPE_CHECKING:
    from cirrus.schema import Task

__all__ = ["STATS_FILE", "StatsError", "read_tasks", "stats_json", "write_stats"]

STATS_FILE = Path("reports/stats.json")


class StatsError(ValueError):
    """The workspace's tasks cannot be counted; the message says why."""


def stats_json(stats: DatasetStats) -> str:
    """The text of ``reports/stats.json``: sorted keys, UTF-8 as is, indented."""
    return json.dumps(stats.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def read_tasks(workspace: Path) -> list[Task]:
    """Every task of ``WORKSPACE/tickets/tasks.jsonl`` as a
    :class:`~cirrus.schema.Task`; a :class:`StatsError` for a missing file,
    an ingest still writing it, a line that is not a valid task (naming the
    file and line) or a file that cannot be read."""
    from pydantic import ValidationError

    from cirrus.evaluate.tasks import TaskFileError, TaskIndex
    from cirrus.schema import Task

    if not (workspace / TASKS_FILE).is_file():
        raise StatsError(f"{workspace / TASKS_FILE} does not exist: no tasks to count; run `cirrus ingest RAW "
                         f"--workspace {workspace}` first")
    tasks: list[Task] = []
    try:
        index = TaskIndex.scan(workspace)
        for ref, raw in zip(index.refs, index):
            try:
                tasks.append(Task.model_validate(raw))
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = ".".join(str(p) for p in problem["loc"]) or "task"
                raise StatsError(f"{index.path}:{ref.line}: not a valid task ({where}: {problem['msg']})") from None
    except TaskFileError as exc:
        raise StatsError(str(exc)) from None
    except OSError as exc:
        raise StatsError(f"could not read {workspace / TASKS_FILE}: {exc.strerror or exc}") from None
    return tasks


def write_stats(workspace: Path, stats: DatasetStats) -> str:
    """Write ``WORKSPACE/reports/stats.json`` atomically and return its text
    (an ``OSError`` when it cannot be written)."""
    from cirrus.files import atomic_writer

    text = stats_json(stats)
    with atomic_writer(workspace / STATS_FILE) as handle:
        handle.write(text)
    return text
