"""The ``cirrus`` command line: the typer app, built from the commands of
:mod:`cirrus.commands` (one module each: options in, a library call, tables
out).  ``cirrus.cli:run`` is the installed ``cirrus`` script: the app,
``cirrus.cli:app``, then a quick exit."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cirrus import __version__
from cirrus.commands import (audit, diff, gate, ingest, judge_consistency, judge_eval, pii_eval, report, rescore,
                             show, stats, view)
from cirrus.commands import eval as eval_command
from cirrus.commands.annotate import annotate_app
from cirrus.commands.tools import tools_app
from cirrus.commands._common import out

__all__ = ["app"]

app = typer.Typer(
    help="Cirrus: a replay-based benchmark for LLM customer-service agents, built from support-ticket logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        out.print(f"cirrus {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = None,
) -> None:
    pass


# in the order `cirrus --help` lists them
app.command("ingest")(ingest.ingest)
app.command("eval")(eval_command.eval_)
app.command("pii-eval")(pii_eval.pii_eval)
app.command("report")(report.report)
app.command("show")(show.show)
app.command("diff")(diff.diff)
app.command("view")(view.view)
app.command("gate")(gate.gate)
app.command("rescore")(rescore.rescore)
app.command("judge-eval")(judge_eval.judge_eval)
app.command("judge-consistency")(judge_consistency.judge_consistency)
app.add_typer(annotate_app, name="annotate")
app.command("audit")(audit.audit)
app.command("stats")(stats.stats)
app.add_typer(tools_app, name="tools")



def run() -> None:
    """The ``cirrus`` command (``[project.scripts]``, ``python -m cirrus.cli``):
    the app, then the interpreter's exit without its last garbage collection
    over everything a command built (``gc.freeze``): after a run with
    thousands of model calls that collection alone took 0.2-0.3 s, with
    every output already written and closed (benchmarks/results/eval_cpu.md)."""
    import gc

    try:
        app()
    finally:
        gc.freeze()


if __name__ == "__main__":
    run()
