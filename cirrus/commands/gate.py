"""``cirrus gate BASELINE CANDIDATE``: a pass / fail verdict for CI
(:func:`cirrus.report.gate.run_gate`), printed as a table, and written as
Markdown (``--markdown``) and JUnit XML (``--junit``) on request.

Exit status: 0 non-inferior (or inconclusive with ``--inconclusive pass``),
1 regression, 3 inconclusive, 2 when the gate cannot decide (incomparable
runs, an unknown run, a bad option, a file it cannot write)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_USAGE, console, fail
from cirrus.commands._common import out as stdout
from cirrus.report.defaults import DEFAULT_N_BOOT, DEFAULT_SEED

__all__ = ["gate"]


def gate(
    baseline: Annotated[str, typer.Argument(metavar="BASELINE", help="The run to compare against (reports/<BASELINE>/), e.g. the last released agent's.")],
    candidate: Annotated[str, typer.Argument(metavar="CANDIDATE", help="The run of the agent under review, on the same workspace, judge, K and tasks.")],
    metric: Annotated[str, typer.Option("--metric", help="Metrics gated, comma-separated: sr (SR pass@1), atpr.")] = "sr,atpr",
    margin: Annotated[str, typer.Option("--margin", help="Tolerated drop, as a share: one number for every metric (0.02: two points) or per metric (sr=0.02,atpr=0.05).")] = "0",
    inconclusive: Annotated[str, typer.Option("--inconclusive", help="What an inconclusive gate exits with: fail (exit 3) or pass (exit 0).")] = "fail",
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999, help="Confidence level for all the metrics together (Bonferroni: each metric's interval at 1 - (1 - level) / metrics).")] = 0.95,
    bootstrap: Annotated[int, typer.Option(min=100, help="Bootstrap replicates of the paired test.")] = DEFAULT_N_BOOT,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = DEFAULT_SEED,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Also write the result as Markdown, e.g. for a CI step summary (replaces the file).")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Also write the result as JUnit XML, one test case per metric (replaces the file).")] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")] = Path("."),
) -> None:
    """Gate a candidate run against a baseline run for CI: the paired test on their common tasks, with the measured noise.

    Each metric's verdict reads the paired bootstrap interval of candidate - baseline (Bonferroni-corrected
    over the metrics, widened by the judge's flip rate where cirrus judge-consistency measured it):
    non-inferior when its lower end is above -margin, regression when its upper end is below -margin,
    inconclusive otherwise.  Runs that differ in judge, K or dataset are refused.  Rule and a GitHub
    Actions example: docs/ci.md.

    Exit status: 0 non-inferior (or inconclusive with --inconclusive pass); 1 regression on any metric;
    3 inconclusive (the tasks cannot tell; 3 is also cirrus eval's budget status); 2 when the gate
    cannot decide (incomparable runs, an unknown run, a bad option, a file it cannot write).
    """
    from cirrus.report.gate import GateOptions, parse_margins, parse_metrics, run_gate
    from cirrus.report.gate_files import write_gate_files
    from cirrus.report.loading import ReportError
    from cirrus.report.views.gate import GATE_COLUMNS, gate_lines, gate_rows, headline

    try:
        metrics = parse_metrics(metric)
        options = GateOptions(metrics=metrics, margins=parse_margins(margin, metrics), confidence=confidence,
                              n_boot=bootstrap, seed=seed, inconclusive=inconclusive.strip().lower())
        result = run_gate(workspace, baseline, candidate, options)
    except (ReportError, ValueError) as exc:
        fail(str(exc))
    table = Table(title=f"cirrus gate: {candidate} (candidate) - {baseline} (baseline)")
    for column in GATE_COLUMNS:
        table.add_column(column, justify="left" if column in ("metric", "verdict") else "right", overflow="fold")
    for cells in gate_rows(result):
        table.add_row(*(escape(c) for c in cells))
    stdout.print(table)
    for line in gate_lines(result):
        stdout.print(line, highlight=False, markup=False, soft_wrap=True)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    try:
        for path in write_gate_files(result, markdown=markdown, junit=junit):
            console.print(f"wrote {escape(str(path))}", highlight=False)
    except OSError as exc:  # a full disk, a missing folder's parent that cannot be made: no verdict to trust
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        fail(f"could not write the gate's output: {exc.strerror or exc}{where}", code=EXIT_USAGE)
    stdout.print(headline(result), highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)
