"""The command layer (issue 23): ``cirrus --help`` and every command's
``--help`` stay exactly as they were before the commands moved into
``cirrus/commands/``.

``tests/data/help_snapshot.txt`` was written from the code before the move;
regenerate it only for a deliberate change of a command's options or help:

    .venv/bin/python -m tests.test_command_layer --update
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import typer.rich_utils
from typer.testing import CliRunner

SNAPSHOT = Path(__file__).parent / "data" / "help_snapshot.txt"
HELP_ENV = {"COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}  # a fixed width, no colours


def _command_paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """``()`` for ``cirrus`` itself, then every command and sub-command in
    the order ``cirrus --help`` lists them (typer's own click, duck-typed)."""
    paths = [prefix]
    if hasattr(command, "list_commands"):  # a group
        for name in command.list_commands(click.Context(command)):
            paths += _command_paths(command.commands[name], (*prefix, name))
    return paths


def help_snapshot() -> str:
    """``cirrus --help`` and ``cirrus CMD --help`` of every command, each
    under a ``=== cirrus CMD --help (exit N)`` line; trailing blanks cut."""
    from cirrus.cli import app

    saved = typer.rich_utils.FORCE_TERMINAL, typer.rich_utils.MAX_WIDTH
    typer.rich_utils.FORCE_TERMINAL, typer.rich_utils.MAX_WIDTH = False, None  # whatever CI's environment says
    try:
        parts = []
        for path in _command_paths(typer.main.get_command(app)):
            result = CliRunner().invoke(app, [*path, "--help"], env=HELP_ENV, prog_name="cirrus")
            text = "\n".join(line.rstrip() for line in result.output.splitlines()).strip("\n")
            parts.append(f"=== {' '.join(('cirrus', *path, '--help'))} (exit {result.exit_code})\n{text}\n")
        return "\n".join(parts)
    finally:
        typer.rich_utils.FORCE_TERMINAL, typer.rich_utils.MAX_WIDTH = saved


def test_help_of_every_command_is_unchanged() -> None:
    expected = SNAPSHOT.read_text(encoding="utf-8")
    actual = help_snapshot()
    if actual != expected:
        import difflib

        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            "help_snapshot.txt", "now", n=2))
        pytest.fail(f"the help of the command line changed:\n{diff}", pytrace=False)


if __name__ == "__main__":  # python -m tests.test_command_layer --update
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.test_command_layer --update")
    SNAPSHOT.write_text(help_snapshot(), encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
