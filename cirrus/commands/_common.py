"""What every command shares: the two consoles, the error line and the exit
statuses, and the ``--workspace`` option.

* :data:`console`: stderr, for messages (errors, warnings, notes, progress);
  soft-wrapped, so a line is never broken and stays greppable;
* :data:`out`: stdout, for the tables and results a command exists for;
* :func:`fail`: ``error: MESSAGE`` on stderr, then exit with ``code``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from cirrus.commands._console import CliConsole, cli_console

__all__ = ["EXIT_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "WorkspaceOpt", "console",
           "fail", "out"]

EXIT_OK = 0
EXIT_FAILED = 1  # the work could not be done (a refused key, every attempt an error, a full disk, audit hits)
EXIT_USAGE = 2  # a bad option, setting, file or workspace; nothing was done
EXIT_BUDGET = 3  # cirrus eval --max-cost stopped the run
EXIT_INTERRUPTED = 130  # Ctrl-C

console: CliConsole = cli_console(stderr=True)  # error lines stay whole, greppable
out: CliConsole = cli_console()  # tables keep run ids whole when piped (wide, or COLUMNS wide): see CliConsole

WorkspaceOpt = Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")]


def fail(message: str, code: int = EXIT_USAGE, *, highlight: bool | None = None) -> NoReturn:
    """Print ``error: MESSAGE`` (escaped: a message may hold ``[brackets]``)
    on stderr and exit with ``code``; ``highlight``: rich's highlighting of
    the line (the console's default when None)."""
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=highlight)
    raise typer.Exit(code)
