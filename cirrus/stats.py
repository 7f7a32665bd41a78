"""The statistics of a workspace's dataset (the CirrusBench paper's Table 1,
Figures 2 and 3): pure functions, tasks in, :class:`DatasetStats` out.

Every field is defined in ``docs/stats.md``.  In short:

* counts (tasks, checkpoints, tasks per category and per language, reply
  types over checkpoints, tool calls by tool name);
* distributions over tasks (``turns`` = ``stats.turns``, ``checkpoints`` =
  ``len(checkpoints)``, ``input_tokens`` = ``stats.input_tokens``): min,
  quartiles, max and mean.  Quartiles are ``numpy.quantile(...,
  method="linear")`` -- linear interpolation between the two order
  statistics around position ``(n - 1) * q`` (Hyndman and Fan's type 7, the
  default of numpy, R and pandas).  Means are the exact integer sum divided
  by the count (one rounding, no summation-order dependence);
* shares of tasks with tool calls and with images.  A task has images when
  a customer text (a checkpoint's ``query`` or a ``user`` message of the
  ``history``) holds a line that starts with :data:`OCR_MARKER`: the task
  format keeps no attachment, only the OCR text that ingest's canonicalize
  step merged into the customer's message behind that marker.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cirrus.schema import REPLY_TYPES, Task

__all__ = ["NO_CATEGORY", "OCR_MARKER", "QUANTILE_METHOD", "STATS_VERSION", "TOP_TOOLS", "DatasetStats",
           "Distribution", "ToolCount", "compute_stats", "distribution", "has_images", "has_tool_calls"]

STATS_VERSION = 1
OCR_MARKER = "[image text] "  # written by cirrus.ingest.canonical before each attachment's OCR text
NO_CATEGORY = "(none)"  # the key of tasks whose category is null
TOP_TOOLS = 20
QUANTILE_METHOD = "linear"
_OCR_LINE = re.compile(r"(?m)^" + re.escape(OCR_MARKER))


@dataclass(frozen=True, slots=True)
class Distribution:
    """Min, quartiles, max and mean of one integer quantity over the tasks;
    every field is ``None`` when there is no task."""

    min: int | None
    p25: float | None
    p50: float | None
    p75: float | None
    max: int | None
    mean: float | None

    def to_json(self) -> dict[str, Any]:
        return {"min": self.min, "p25": self.p25, "p50": self.p50, "p75": self.p75, "max": self.max,
                "mean": self.mean}


@dataclass(frozen=True, slots=True)
class ToolCount:
    name: str
    calls: int


@dataclass(frozen=True, slots=True)
class DatasetStats:
    """What ``cirrus stats`` reports; :meth:`to_json` is ``reports/stats.json``."""

    tasks: int
    checkpoints: int
    categories: dict[str, int]
    languages: dict[str, int]
    turns: Distribution
    checkpoints_per_task: Distribution
    input_tokens: Distribution
    tasks_with_tool_calls: int
    tool_call_share: float | None
    tasks_with_images: int
    image_share: float | None
    reply_types: dict[str, int]
    tool_calls: int
    distinct_tools: int
    top_tools: tuple[ToolCount, ...]
    knowledge_docs: int
    knowledge_docs_mean: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "stats_version": STATS_VERSION,
            "quantile_method": QUANTILE_METHOD,
            "tasks": self.tasks,
            "checkpoints": self.checkpoints,
            "categories": dict(self.categories),
            "languages": dict(self.languages),
            "turns": self.turns.to_json(),
            "checkpoints_per_task": self.checkpoints_per_task.to_json(),
            "input_tokens": self.input_tokens.to_json(),
            "tasks_with_tool_calls": self.tasks_with_tool_calls,
            "tool_call_share": self.tool_call_share,
            "tasks_with_images": self.tasks_with_images,
            "image_share": self.image_share,
            "reply_types": dict(self.reply_types),
            "tool_calls": self.tool_calls,
            "distinct_tools": self.distinct_tools,
            "top_tools": [{"name": t.name, "calls": t.calls} for t in self.top_tools],
            "knowledge_docs": self.knowledge_docs,
            "knowledge_docs_mean": self.knowledge_docs_mean,
        }


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def distribution(values: Sequence[int]) -> Distribution:
    """Min, linear-interpolation quartiles, max and exact mean of ``values``."""
    if not values:
        return Distribution(None, None, None, None, None, None)
    p25, p50, p75 = (float(q) for q in np.quantile(np.asarray(values, dtype=np.int64), [0.25, 0.5, 0.75],
                                                   method=QUANTILE_METHOD))
    return Distribution(min(values), p25, p50, p75, max(values), sum(values) / len(values))


def has_tool_calls(task: Task) -> bool:
    """Whether any checkpoint of ``task`` has reference tool calls."""
    return any(cp.tool_calls for cp in task.checkpoints)


def _user_texts(task: Task) -> Iterable[str]:
    # a select-mode task also holds customer turns in its checkpoints' context (docs/checkpoints.md)
    contexts = [m for cp in task.checkpoints for m in cp.context or []]
    for message in [*task.history, *contexts]:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):  # OpenAI content parts
            yield from (p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    for cp in task.checkpoints:
        yield cp.query


def has_images(task: Task) -> bool:
    """Whether a customer text of ``task`` holds image (OCR) text: a line that
    starts with :data:`OCR_MARKER`, in a checkpoint's query or a ``user``
    message of the history."""
    return any(_OCR_LINE.search(text) for text in _user_texts(task))


def _by_count(counter: Counter[str]) -> dict[str, int]:
    """``counter`` as a dict, largest count first, then by name."""
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))


def compute_stats(tasks: Iterable[Task]) -> DatasetStats:
    """The statistics of ``tasks`` (see the module and ``docs/stats.md``)."""
    tasks = list(tasks)
    categories: Counter[str] = Counter()
    languages: Counter[str] = Counter()
    reply_types: Counter[str] = Counter({t: 0 for t in REPLY_TYPES})
    tools: Counter[str] = Counter()
    turns: list[int] = []
    checkpoints: list[int] = []
    tokens: list[int] = []
    with_tools = with_images = knowledge = 0
    for task in tasks:
        categories[task.category if task.category is not None else NO_CATEGORY] += 1
        languages[task.language] += 1
        turns.append(task.stats.turns)
        checkpoints.append(len(task.checkpoints))
        tokens.append(task.stats.input_tokens)
        with_tools += has_tool_calls(task)
        with_images += has_images(task)
        knowledge += len(task.knowledge)
        for cp in task.checkpoints:
            reply_types[cp.reply_type] += 1
            tools.update(call.name for call in cp.tool_calls)
    ranked = sorted(tools.items(), key=lambda item: (-item[1], item[0]))
    return DatasetStats(
        tasks=len(tasks),
        checkpoints=sum(checkpoints),
        categories=_by_count(categories),
        languages=_by_count(languages),
        turns=distribution(turns),
        checkpoints_per_task=distribution(checkpoints),
        input_tokens=distribution(tokens),
        tasks_with_tool_calls=with_tools,
        tool_call_share=_ratio(with_tools, len(tasks)),
        tasks_with_images=with_images,
        image_share=_ratio(with_images, len(tasks)),
        reply_types={t: reply_types[t] for t in REPLY_TYPES},
        tool_calls=sum(tools.values()),
        distinct_tools=len(tools),
        top_tools=tuple(ToolCount(name, calls) for name, calls in ranked[:TOP_TOOLS]),
        knowledge_docs=knowledge,
        knowledge_docs_mean=_ratio(knowledge, len(tasks)),
    )
