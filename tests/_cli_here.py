"""The ``cirrus`` command run in the test process (typer's CliRunner), for
the tests that kill or interrupt a real ``cirrus`` child process and then
run the same command again: the killed run stays a child process, really
killed; the run after it -- an ordinary, uninterrupted command -- is the
same CLI code in this process, without a new interpreter's imports and model
load (seconds each; the spaCy model is cached per process).  The command's
exit code and output are checked as a child's would be."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli_here(args: list[str]) -> Ran:
    """``cirrus *args`` in this process; what a child process would return.
    An exception the command does not handle itself propagates (as a
    traceback, exit 1, would in a child)."""
    from typer.testing import CliRunner

    from cirrus.cli import app

    result = CliRunner().invoke(app, args, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)
