"""``cirrus annotate sample|export|import``: human labels of a run's judge
verdicts through CSV (:mod:`cirrus.judges.human_labels`, docs/human-labels.md),
for people who label in a spreadsheet."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, WorkspaceOpt, console, fail, out

__all__ = ["annotate_app"]

annotate_app = typer.Typer(help="Human labels of a run's judge verdicts: a sample to label, CSV export and import.",
                           no_args_is_help=True, add_completion=False)

RunArg = Annotated[str, typer.Argument(metavar="RUN", help="A run of the workspace (reports/<run_id>/).")]


@annotate_app.command("sample")
def sample(
    run_id: RunArg,
    n: Annotated[int, typer.Option("--n", min=1, help="How many verdicts to sample.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the sampling (the same seed gives the same sample).")] = 0,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="CSV to write (default: <workspace>/labels/<run>-sample.csv).")] = None,
    workspace: WorkspaceOpt = Path("."),
) -> None:
    """Write a CSV of N of the run's judge verdicts to label, stratified by
    verdict and language (every verdict and language gets its share, and one
    at least)."""
    from cirrus.judges.human_labels import HumanLabelError, current_labels, judged_items
    from cirrus.judges.human_labels import sample as pick
    from cirrus.judges.human_labels import write_csv

    try:
        items = judged_items(workspace, run_id)
        if not items:
            fail(f"run {run_id} holds no judge verdict to label")
        chosen = pick(items, n, seed)
        labels = {label.key: label for label in current_labels(workspace, run_id, items).labels}
        path = write_csv(out_file or workspace / "labels" / f"{run_id}-sample.csv", chosen, labels)
    except HumanLabelError as exc:
        fail(str(exc), highlight=False)
    except OSError as exc:
        fail(f"cannot write the CSV: {exc}", code=EXIT_FAILED, highlight=False)
    table = Table(title=f"sample of run {run_id}: {len(chosen)} of {len(items)} verdicts (seed {seed})")
    for column in ("judge verdict", "language", "sampled", "of"):
        table.add_column(column, justify="left" if column in ("judge verdict", "language") else "right")
    everything = Counter((i.verdict, i.language) for i in items)
    picked = Counter((i.verdict, i.language) for i in chosen)
    for (verdict, language), total in sorted(everything.items(), key=lambda kv: (kv[0][1], not kv[0][0])):
        table.add_row("Included" if verdict else "Not Included", language, str(picked[(verdict, language)]),
                      str(total))
    out.print(table)
    out.print(escape(f"wrote {path}: fill in `human` (right / wrong), optionally `correct_verdict` and `note`, "
                     f"then `cirrus annotate import {path}`"), highlight=False)


@annotate_app.command("export")
def export(
    run_id: RunArg,
    out_file: Annotated[Path, typer.Option("--out", help="CSV to write.")],
    workspace: WorkspaceOpt = Path("."),
) -> None:
    """Write every judge verdict of the run to a CSV, with the labels it already has."""
    from cirrus.judges.human_labels import HumanLabelError, export_csv

    try:
        rows = export_csv(workspace, run_id, out_file)
    except HumanLabelError as exc:
        fail(str(exc), highlight=False)
    except OSError as exc:
        fail(f"cannot write the CSV: {exc}", code=EXIT_FAILED, highlight=False)
    out.print(escape(f"wrote {rows} verdicts of run {run_id} to {out_file}"), highlight=False)


@annotate_app.command("import")
def import_(
    csv_file: Annotated[Path, typer.Argument(metavar="FILE.csv", help="A CSV made by `cirrus annotate sample` or `export`, labelled.")],
    workspace: WorkspaceOpt = Path("."),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the rows, store nothing.")] = False,
) -> None:
    """Store the labels of a CSV in the workspace (labels/human.jsonl). Bad
    rows are named by file, line and reason, and the others are imported;
    exit status 1 when any row was refused."""
    from cirrus.judges.human_labels import HumanLabelError, import_csv

    try:
        result = import_csv(workspace, csv_file, write=not dry_run)
    except HumanLabelError as exc:
        fail(str(exc), highlight=False)
    except OSError as exc:
        fail(f"cannot store the labels: {exc}", code=EXIT_FAILED, highlight=False)
    for problem in result.problems:
        console.print(f"[yellow]refused[/] {escape(problem)}", highlight=False)
    verb = "would import" if dry_run else "imported"
    out.print(escape(f"{verb} {len(result.imported)} labels from {csv_file} ({result.unlabelled} rows unlabelled, "
                     f"{len(result.problems)} refused)"), highlight=False)
    if result.problems:
        raise typer.Exit(EXIT_FAILED)
