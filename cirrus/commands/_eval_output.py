"""What ``cirrus eval`` prints: the estimate before a run, the closing
summary of a walk or subtask run, its usage and cost, and the line and exit
status of a run that --max-cost stopped."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_BUDGET, console, out
from cirrus.report.views.cells import fmt_value

if TYPE_CHECKING:
    from cirrus.estimate import Estimate

__all__ = ["budget_exit", "print_cost", "print_estimate", "print_subtask_summary", "print_summary"]


def print_estimate(result: Estimate, attempts: int, *, final: bool) -> None:
    """The estimate of a run as configured (:func:`cirrus.estimate.estimate_run`):
    a table per role on stderr when a run starts, on stdout with --estimate."""
    target = out if final else console
    table = Table(title=f"estimate: {result.tasks} tasks, {result.checkpoints} checkpoints, {attempts} attempt(s) each "
                        f"(an upper bound: docs/cost.md)", title_justify="left")
    for column in ("role", "calls", "input tokens", "output tokens", "cost"):
        table.add_column(column, justify="left" if column == "role" else "right")
    currency = result.currency or ""
    for role, usage in result.roles.items():
        cost = "no price" if usage.cost is None else f"{usage.cost:.4f} {currency}"
        table.add_row(role, f"{usage.calls:,}", f"{usage.input_tokens:,}", f"{usage.output_tokens:,}", cost)
    total = "-" if result.total_cost is None else f"{result.total_cost:.4f} {currency}"
    table.add_row("total", "", "", "", total)
    for note in result.notes:
        target.print(f"estimate: {note}")
    if not result.roles:
        target.print("estimate: every role of this run is offline: no model call, no cost")
        return
    target.print(table)
    if final:
        for assumption in result.assumptions:
            out.print(f"  assumes: {assumption}")


def print_cost(summary: dict) -> None:
    """Usage and cost per role of a finished run (summary.json's)."""
    usage, cost = summary.get("usage") or {}, summary.get("cost") or {}
    if not usage:
        return
    currency = cost.get("currency") or ""
    table = Table(title="usage and cost", title_justify="left")
    for column in ("role", "calls", "cache hits", "input", "cached input", "output", "reasoning", "cost"):
        table.add_column(column, justify="left" if column == "role" else "right")
    for role, used in usage.items():
        value = cost.get(role)
        table.add_row(role, f"{used['calls']:,}", f"{used['cirrus_cache_hits']:,}", f"{used['input_tokens']:,}",
                      f"{used['cached_input_tokens']:,}", f"{used['output_tokens']:,}", f"{used['reasoning_tokens']:,}",
                      "no price" if value is None else f"{value:.4f} {currency}")
    total = cost.get("total")
    table.add_row("total", "", "", "", "", "", "", "-" if total is None else f"{total:.4f} {currency}")
    out.print(table)
    overhead = summary.get("overhead_usage") or {}
    parts = [f"{sum(used.get('calls', 0) for used in overhead[kind].values())} {what}"
             for kind, what in (("preflight", "of endpoint checks"), ("rerun", "of attempts run again"))
             if kind in overhead]
    if parts:
        out.print(f"  calls include {' and '.join(parts)} (billed too: docs/cost.md)")


def budget_exit(summary: dict, resume: str) -> None:
    """When --max-cost stopped the run: say so, with the command that resumes
    it, and exit with status 3."""
    stop = summary.get("budget_stop")
    if not stop:
        return
    currency = (summary.get("cost") or {}).get("currency") or ""
    console.print(f"[yellow]stopped:[/] the run spent {stop['spent']:.4f} {escape(currency)} of its --max-cost "
                  f"{stop['max_cost']:g}; {stop['attempts_left']} attempt(s) were not started. Resume with a higher "
                  f"budget:\n  {escape(resume)} --max-cost AMOUNT", highlight=False)
    raise typer.Exit(EXIT_BUDGET)


def print_summary(summary: dict, directory: Path) -> None:
    """``cirrus eval``'s closing table, the judge panel's agreement, and the
    notes and error reasons of a walk run."""
    def fmt(value: object) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    table = Table(title=f"cirrus eval: {summary['model']} ({directory})", show_header=False)
    rows = [("tasks", summary["n_tasks"]), ("attempts (errors)", f"{summary['attempts']} ({summary['errors']})"),
            ("ATPR", summary["atpr"]), ("ALJ", summary["alj"]), ("ANEI", summary["anei"]), ("AMTL", summary["amtl"])]
    rows += [(f"SR {name}", value) for name, value in summary["sr"].items()]
    rows += [(key, summary[key]) for key in summary if key.startswith("pass^")]
    rows += [("judge / fluency", f"{summary['judge']} / {summary['fluency']}")]
    for name, value in rows:
        table.add_row(name, fmt(value))
    out.print(table)
    if summary.get("judge_panel"):
        from cirrus.judges.agreement import describe_agreement

        for line in describe_agreement(summary["judge_panel"]):
            out.print(escape(line), highlight=False)
    if summary.get("offline_heuristics"):
        console.print(f"[yellow]note:[/] offline heuristics used for: {', '.join(summary['offline_heuristics'])}; "
                      "scores are a harness check, not a model judgement")
    reasons = summary.get("error_reasons") or []
    if reasons:  # already redacted by the client; identical reasons grouped, most frequent first
        console.print(f"[yellow]errors:[/] {summary['errors']} attempt(s) ended in an error, left out of the scores:")
        for reason, count in reasons[:10]:
            shown = reason.removeprefix("InfrastructureError: ")
            console.print(f"  {count} x {escape(shown if len(shown) <= 500 else shown[:500] + '...')}")
        if len(reasons) > 10:
            console.print(f"  ... and {len(reasons) - 10} other reasons (cirrus show {directory.name})")



def print_subtask_summary(summary: Mapping[str, Any], directory: Path) -> None:
    """``cirrus eval --mode subtask``'s closing table."""
    table = Table(title=f"cirrus eval --mode subtask: {summary['model']} ({directory})", show_header=False)
    rows: list[tuple[str, Any]] = [
        ("tasks / subtasks", f"{summary['n_tasks']} / {summary['n_subtasks']}"),
        ("subtask attempts ok (errors)", f"{summary['n_ok']} ({summary['subtask_errors']})"),
        *((key, summary[key]) for key in summary if key.startswith("pass@")),
        ("ATIA", summary["atia"]), ("ATIA, subtasks that need a tool", summary.get("atia_tool")),
        ("ATSA", summary["atsa"]), ("ATEV", summary["atev"]), ("ARR", summary["arr"]),
        ("AMTL", summary["amtl"]), ("judge", summary["judge"])]
    for name, value in rows:
        table.add_row(name, fmt_value(value))
    out.print(table)
    if summary.get("offline_heuristics"):
        console.print(f"[yellow]note:[/] offline heuristics used for: {', '.join(summary['offline_heuristics'])}; "
                      "scores are a harness check, not a model judgement")
    reasons = summary.get("error_reasons") or []
    if reasons:
        console.print(f"[yellow]errors:[/] {summary['subtask_errors']} subtask(s) ended in an error, left out of "
                      "the scores (resuming the run asks their attempts again):")
        for reason, count in reasons[:10]:
            shown = reason.removeprefix("InfrastructureError: ")
            console.print(f"  {count} x {escape(shown if len(shown) <= 500 else shown[:500] + '...')}")
