"""The ``cirrus`` command run in the test process (typer's CliRunner), for
the tests that kill or interrupt a real ``cirrus`` child process and then
run the same command again: the killed run stays a child process, really
killed; the run after it -- an ordinary, uninterrupted command -- is the
same CLI code in this process, without a new interpreter's imports and model
load (seconds each; the spaCy model is cached per process).  The command's
exit code and output are checked as a child's would be."""

from __future__ import annotations

import os
import subprocess
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


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


def cli_from(args: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             shown_as: Sequence[str] | None = None) -> subprocess.CompletedProcess:
    """``cirrus *args`` in this process, from ``cwd`` and with ``env`` added
    to the environment, returned as ``subprocess.run`` returns a child's
    (``shown_as``: the argument list it records, the child's command line by
    default ``args``).  An exception the command let out is appended to
    stderr as a traceback, as a child would print it."""
    from typer.testing import CliRunner

    from cirrus.cli import app

    before = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args), env=dict(env))
    finally:
        os.chdir(before)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(list(shown_as if shown_as is not None else args), result.exit_code,
                                       result.stdout, stderr)
