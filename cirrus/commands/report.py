"""``cirrus report RUN_ID... [--out DIR]``: the report of finished runs
(:func:`cirrus.report.command.report_command`) and its terminal tables: the
leaderboard with intervals, paired differences, failed turns by category,
the noise lines, and the subtask runs' tables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, console, fail
from cirrus.commands._common import out as stdout
from cirrus.report.defaults import DEFAULT_N_BOOT, DEFAULT_SEED

if TYPE_CHECKING:
    import polars as pl

__all__ = ["print_report", "print_subtask_report", "report"]


def report(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN_ID...", help="Finished runs of the workspace (reports/<run_id>/); two or more are also compared pairwise.")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")] = Path("."),
    out: Annotated[Optional[Path], typer.Option("--out", help="Output folder (default: reports/<run_id>/report/, or reports/_compare/<run1>+<run2>.../ for several runs).")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap replicates for confidence intervals and paired tests (0: none).")] = DEFAULT_N_BOOT,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = DEFAULT_SEED,
    k: Annotated[Optional[int], typer.Option("--k", min=1, help="K of pass@K and pass^K (default: each run's --pass-k).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Settings file with a \\[prices] table (default: cirrus.toml in the workspace or here).")] = None,
    token_bands: Annotated[str, typer.Option("--token-bands", help="Token bands of subtask runs' Table 4 (the agent's whole input): paper (0-8k, 8k-16k, 16k+, as the paper) or fine (<1k, 1k-2k, 2k-4k, 4k-8k, 8k-16k, 16k+).")] = "paper",
) -> None:
    """Leaderboard, breakdowns and confidence intervals of finished runs, as Parquet.

    Exit status: 0 when the report is written; 2 for an unknown or
    unfinished run, a broken file or a bad option; 1 when it cannot be
    written (a full disk: the file is named, the runs are untouched).
    """
    from cirrus.report.command import report_command
    from cirrus.report.loading import ReportError
    from cirrus.report.writing import write_error

    try:
        result = report_command(run_ids, workspace, out, bootstrap, seed, k=k, config=config, token_bands=token_bands)
    except (ReportError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:  # a full disk, a read-only folder: said in one line, the runs untouched
        fail(write_error(exc), code=EXIT_FAILED)
    if result["leaderboard"] is not None:
        print_report(result)
    print_subtask_report(result)  # the tables of subtask runs, when the report has any
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}")  # a warning may name [prices."model"]



def print_report(result: dict[str, Any]) -> None:
    """The walk runs' tables of a :func:`~cirrus.report.command.report_command`
    result: the leaderboard, the paired differences, the failed turns and the
    noise lines, then ``wrote N files to DIR``; their rows are
    :mod:`cirrus.report.views`'."""
    from cirrus.report.views.leaderboard import ci_lookup, terminal_leaderboard_rows, terminal_paired_rows
    from cirrus.report.views.noise import noise_lines

    board: pl.DataFrame = result["leaderboard"]
    table = Table(title=f"cirrus report -> {result['out_dir']}")
    # runs may differ in K: every pass@K and pass^K cell names its run's K
    for column in ("run", "model", "tasks (errors)", "SR pass@1 [95% CI]", "SR pass@K", "pass^K",
                   "ATPR [95% CI]", "AMTL", "cost", "cost / success"):
        table.add_column(column, justify="left" if column in ("run", "model") else "right", overflow="fold")
    for cells in terminal_leaderboard_rows(board, ci_lookup(result["intervals"])):
        table.add_row(*cells)
    stdout.print(table)
    pairs = result["paired"]
    if pairs is not None and not pairs.is_empty():
        diff_table = Table(title="paired bootstrap: run_b - run_a on common tasks (verdict: docs/noise.md)")
        for column in ("run_a", "run_b", "metric", "tasks", "diff", "95% interval", "p", "MDD", "verdict"):
            diff_table.add_column(column, justify="left" if column in ("run_a", "run_b", "metric") else "right",
                                  overflow="fold")
        for cells in terminal_paired_rows(pairs):
            diff_table.add_row(*cells)
        stdout.print(diff_table)
    if result.get("failures") is not None:
        _print_failures(result["failures"], stdout)
    for line in noise_lines(pairs):
        stdout.print(line, highlight=False, markup=False, soft_wrap=True)  # one greppable line
    from cirrus.judges.human_labels import human_check_line

    for run_id, check in (result.get("human_labels") or {}).items():  # docs/human-labels.md
        stdout.print(human_check_line(run_id, check), highlight=False, markup=False, soft_wrap=True)
    stdout.print(f"wrote {len(result['files'])} files to {result['out_dir']}")


def _print_failures(failures: pl.DataFrame, stdout: Any) -> None:
    """Why the failed turns failed: one row per category (docs/failures.md),
    one column per run, "count (share)"; nothing when no run has a failed turn."""
    from cirrus.report.views.failures import failure_matrix

    matrix = failure_matrix(failures)
    if matrix is None:
        return
    runs, rows = matrix
    table = Table(title="failed turns by category (docs/failures.md)")
    table.add_column("failure", justify="left")
    for run_id in runs:
        table.add_column(run_id, justify="right", overflow="fold")
    for cells in rows:
        table.add_row(*cells)
    stdout.print(table)


def print_subtask_report(result: Mapping[str, Any]) -> None:
    """The subtask tables of a report result on the terminal (and, for a
    report of subtask runs only, the ``wrote N files`` line)."""
    from cirrus.report.views.subtask import table_views

    part = result.get("subtask") or {}
    for view in table_views(part.get("tables") or {}).values():
        table = Table(title=view["title"])
        for i, column in enumerate(view["columns"]):
            table.add_column(column, justify="left" if i < 3 else "right", overflow="fold")
        for row in view["rows"]:
            table.add_row(*row)
        stdout.print(table)
    if result.get("leaderboard") is None:
        stdout.print(f"wrote {len(result['files'])} files to {result['out_dir']}")
