"""``cirrus diff RUN_A RUN_B``: where two runs part ways, as a summary line,
a table of the (task, attempt) pairs whose outcome differs and the first
divergence of the first ``--limit`` of them (:mod:`cirrus.report.diff`);
whether the difference is significant is ``cirrus gate``'s question
(:mod:`cirrus.commands.gate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import console, fail, out

__all__ = ["diff"]


def diff(
    run_a: Annotated[str, typer.Argument(help="The first run (reports/<RUN_A>/).")],
    run_b: Annotated[str, typer.Argument(help="The second run, on the same workspace.")],
    limit: Annotated[int, typer.Option(min=1, help="Most tasks shown in detail.")] = 10,
    width: Annotated[int, typer.Option(min=40, help="Cut texts longer than this many characters.")] = 300,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")] = Path("."),
) -> None:
    """Where two runs part ways: every task whose outcome differs, with the
    first checkpoint where the two walks differ (both replies, the reference,
    the tool calls and the verdicts); writes reports/_diff/A+B/diff.parquet."""
    from cirrus.report.diff import DiffError, run_diff
    from cirrus.report.run_view import ShowError

    try:
        found = run_diff(workspace, run_a, run_b)
    except (ShowError, DiffError) as exc:
        fail(str(exc), highlight=False)
    rows = found.rows
    wins_a = sum(r["better"] == "A" for r in rows)
    out.print(f"{found.common} (task, attempt) pairs in both runs; {len(rows)} differ: "
              f"{escape(run_a)} better on {wins_a}, {escape(run_b)} better on {len(rows) - wins_a}")
    table = Table(title=f"A = {run_a}, B = {run_b}")
    for column in ("task", "attempt", "covered A", "covered B", "parts at", "how"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["task_id"], str(r["attempt"]), str(r["covered_a"]), str(r["covered_b"]),
                      str(r["checkpoint"] or "-"), r["how"] or "-")
    if rows:
        out.print(table)
    for r in rows[:limit]:
        out.print(f"\n[bold]{escape(r['task_id'])}[/] attempt {r['attempt']}, checkpoint {r['checkpoint']}: "
                  f"{escape(r['how'] or '')}")
        for label, value in (("customer", r["query"]), ("reference", r["reference"]), ("A reply", r["reply_a"]),
                             ("A verdict", r["verdict_a"]), ("A tools", r["tool_calls_a"]), ("B reply", r["reply_b"]),
                             ("B verdict", r["verdict_b"]), ("B tools", r["tool_calls_b"])):
            out.print(f"  {label:<10} {escape(_cut(value, width))}", highlight=False)
    console.print(f"diff: {found.path}", highlight=False)
    # diff shows where the runs part, not whether the gap is real; the gate decides that, with an exit status
    console.print(f"is the difference significant? cirrus gate {escape(run_a)} {escape(run_b)} (docs/ci.md)",
                  highlight=False)


def _cut(text: str | None, width: int) -> str:
    text = " ".join((text or "-").split())
    return text if len(text) <= width else text[: width - 1] + "…"
