"""The Dataset section: the rows of its tables, from the workspace's
:class:`~cirrus.stats.DatasetStats` as they are."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cirrus.report.views.cells import plain_number, share_text

if TYPE_CHECKING:
    from cirrus.stats import DatasetStats

__all__ = ["dataset_view"]


def dataset_view(stats: DatasetStats) -> dict[str, Any]:
    """The rows of the Dataset section's tables, from ``stats`` as it is."""
    overview = [
        ("tasks", str(stats.tasks)),
        ("checkpoints", str(stats.checkpoints)),
        ("languages", ", ".join(f"{k}: {v}" for k, v in stats.languages.items()) or "–"),
        ("categories", str(len(stats.categories))),
        ("tasks with tool calls",
         f"{stats.tasks_with_tool_calls} ({share_text(stats.tasks_with_tool_calls, stats.tasks)})"),
        ("tasks with images (OCR)", f"{stats.tasks_with_images} ({share_text(stats.tasks_with_images, stats.tasks)})"),
        ("tool calls", f"{stats.tool_calls} ({stats.distinct_tools} distinct tools)"),
        ("knowledge docs per task", plain_number(stats.knowledge_docs_mean)),
    ]
    distributions = []
    for key, label, dist in (("turns", "turns", stats.turns),
                             ("checkpoints", "checkpoints", stats.checkpoints_per_task),
                             ("input_tokens", "input tokens", stats.input_tokens)):
        distributions.append({"key": key, "label": label, "min": plain_number(dist.min),
                              "p25": plain_number(dist.p25), "p50": plain_number(dist.p50),
                              "p75": plain_number(dist.p75), "max": plain_number(dist.max),
                              "mean": plain_number(dist.mean)})
    return {
        "tasks": stats.tasks,
        "overview": [{"label": label, "value": value} for label, value in overview],
        "categories": [{"name": name, "tasks": count, "share": share_text(count, stats.tasks)}
                       for name, count in stats.categories.items()],
        "distributions": distributions,
        "reply_types": [{"name": name, "checkpoints": count, "share": share_text(count, stats.checkpoints)}
                        for name, count in stats.reply_types.items()],
        "tools": [{"rank": rank, "name": tool.name, "calls": tool.calls}
                  for rank, tool in enumerate(stats.top_tools, 1)],
        "distinct_tools": stats.distinct_tools,
    }
