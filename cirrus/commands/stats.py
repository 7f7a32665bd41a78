"""``cirrus stats [WORKSPACE]``: the dataset's statistics as tables, and as
``WORKSPACE/reports/stats.json`` (fields: ``docs/stats.md``), computed by
:mod:`cirrus.workspace_stats` and :func:`cirrus.stats.compute_stats`.

Exit status: 0 when the statistics were written; 1 when ``reports/stats.json``
could not be written; 2 for a workspace without ``tickets/tasks.jsonl``, an
ingest still writing it, or a task file that is not valid.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, EXIT_USAGE
from cirrus.commands._console import cli_console

if TYPE_CHECKING:
    from cirrus.stats import DatasetStats, Distribution

__all__ = ["stats", "stats_tables"]


def stats(
    workspace_arg: Annotated[Optional[Path], typer.Argument(
        metavar="WORKSPACE", help="Workspace folder (default: the current directory).")] = None,
    workspace_opt: Annotated[Optional[Path], typer.Option(
        "--workspace", "-w", help="Workspace folder, as the other commands take it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON of reports/stats.json instead of "
                                                          "the tables.")] = False,
) -> None:
    """The dataset's statistics (tasks, turns, tokens, reply types, tools); writes reports/stats.json.

    Tasks per category and language; turns, checkpoints and input tokens per task (min, quartiles, max,
    mean); shares of tasks with tool calls and with images; reply types; the top 20 tools.  Fields:
    docs/stats.md.  Exit 0 when written, 1 when reports/stats.json could not be written, 2 for a
    workspace without a valid tickets/tasks.jsonl."""
    from cirrus.stats import compute_stats
    from cirrus.workspace_stats import STATS_FILE, StatsError, read_tasks, write_stats

    err = cli_console(stderr=True)  # made when the command runs, as it always was

    def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
        err.print(f"[bold red]error:[/] {escape(message)}")
        raise typer.Exit(code)

    if workspace_arg is not None and workspace_opt is not None and workspace_arg != workspace_opt:
        fail(f"two workspaces given: {workspace_arg} and --workspace {workspace_opt}; give one")
    workspace = workspace_arg or workspace_opt or Path(".")
    try:
        tasks = read_tasks(workspace)
    except StatsError as exc:
        fail(str(exc))
    found = compute_stats(tasks)
    try:
        text = write_stats(workspace, found)
    except OSError as exc:
        fail(f"could not write {workspace / STATS_FILE}: {exc.strerror or exc}", code=EXIT_FAILED)
    if as_json:
        typer.echo(text, nl=False)
        return
    out = cli_console()
    for table in stats_tables(found, workspace):
        out.print(table)
    err.print(f"wrote {escape(str(workspace / STATS_FILE))}", highlight=False)


def _number(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}"


def _share(part: int, share: float | None) -> str:
    return f"{part}" if share is None else f"{part} ({share:.1%})"


def stats_tables(stats: DatasetStats, workspace: Path) -> list[Table]:
    """The tables ``cirrus stats`` prints: overview, tasks per category,
    per-task distributions, reply types, top tools."""
    overview = Table(title=f"cirrus stats -> {escape(str(workspace / 'tickets'))}", show_header=False)
    overview.add_row("tasks", str(stats.tasks))
    overview.add_row("checkpoints", str(stats.checkpoints))
    overview.add_row("languages", escape(", ".join(f"{k}: {v}" for k, v in stats.languages.items())) or "-")
    overview.add_row("categories", str(len(stats.categories)))
    overview.add_row("tasks with tool calls", _share(stats.tasks_with_tool_calls, stats.tool_call_share))
    overview.add_row("tasks with images (OCR)", _share(stats.tasks_with_images, stats.image_share))
    overview.add_row("tool calls", f"{stats.tool_calls} ({stats.distinct_tools} distinct tools)")
    overview.add_row("knowledge docs per task", _number(stats.knowledge_docs_mean, 2))

    categories = Table(title="tasks per category")
    categories.add_column("category")
    categories.add_column("tasks", justify="right")
    categories.add_column("share", justify="right")
    for name, count in stats.categories.items():
        categories.add_row(escape(name), str(count), f"{count / stats.tasks:.1%}")

    distributions = Table(title="per task (quartiles: linear interpolation)")
    distributions.add_column("")
    for column in ("min", "p25", "median", "p75", "max", "mean"):
        distributions.add_column(column, justify="right")
    rows: list[tuple[str, Distribution]] = [("turns", stats.turns), ("checkpoints", stats.checkpoints_per_task),
                                            ("input tokens", stats.input_tokens)]
    for label, dist in rows:
        distributions.add_row(label, _number(dist.min), _number(dist.p25), _number(dist.p50), _number(dist.p75),
                              _number(dist.max), _number(dist.mean))

    replies = Table(title="reply types (over checkpoints)")
    replies.add_column("reply type")
    replies.add_column("checkpoints", justify="right")
    replies.add_column("share", justify="right")
    for name, count in stats.reply_types.items():
        replies.add_row(name, str(count), f"{count / stats.checkpoints:.1%}" if stats.checkpoints else "-")

    tools = Table(title=f"top tools by calls (of {stats.distinct_tools})")
    tools.add_column("#", justify="right")
    tools.add_column("tool")
    tools.add_column("calls", justify="right")
    for rank, tool in enumerate(stats.top_tools, 1):
        tools.add_row(str(rank), escape(tool.name), str(tool.calls))
    return [overview, categories, distributions, replies, tools]
