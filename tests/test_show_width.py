"""``cirrus show --width`` takes effect when the output is piped (issue 22):
texts are cut at the width, and the walk is laid out for it, so no line is
much wider than ``--width`` and the texts that are never cut (a failure's
description) wrap instead of running on; ``--full`` keeps its long lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.failures import FAILURE_DESCRIPTIONS
from cirrus.commands.show import WALK_OVERHEAD
from tests.test_disk_full import sample_workspace


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory) -> tuple[Path, str, str]:
    """A retrieval-baseline run of the sample, a task whose walk failed and
    the description of its first failure category."""
    workspace = sample_workspace(tmp_path_factory.mktemp("show-width") / "ws")
    result = CliRunner().invoke(app, ["eval", "--model", "baseline:retrieval", "--limit", "4", "-w", str(workspace),
                                      "--run-id", "r", "-q"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (workspace / "reports/r/attempts.jsonl").read_text().splitlines()]
    failed = next(row for row in rows if not row["success"] and any(t.get("failure") for t in row["turns"]))
    failure = next(t["failure"] for t in failed["turns"] if t.get("failure"))
    return workspace, failed["task_id"], FAILURE_DESCRIPTIONS[failure]


def _piped(workspace: Path, *args: str) -> list[str]:
    """``cirrus show`` as a child process whose stdout is a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "cirrus.cli", "show", *args, "-w", str(workspace)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("width", [40, 60, 120])
def test_piped_show_is_laid_out_for_its_width(failed_run, width):
    workspace, task, description = failed_run
    lines = _piped(workspace, "r", "--task", task, "--width", str(width))
    walk = lines[next(i for i, line in enumerate(lines) if line.strip().startswith(f"task {task}")):]
    assert max(cell_len(line) for line in walk) <= width + WALK_OVERHEAD
    text = " ".join(" ".join(line.strip(" │") for line in walk).split())
    assert " ".join(description.split()) in text  # a failure's description: wrapped, never cut
    assert "more chars]" in text  # long texts cut at the width


def test_a_wider_width_shows_more_and_full_keeps_long_lines(failed_run):
    workspace, task, _ = failed_run
    narrow = max(cell_len(line) for line in _piped(workspace, "r", "--task", task, "--width", "40"))
    wide = max(cell_len(line) for line in _piped(workspace, "r", "--task", task, "--width", "200"))
    assert narrow < wide
    full = _piped(workspace, "r", "--task", task, "--full")
    assert max(cell_len(line) for line in full) > 200 + WALK_OVERHEAD  # whole texts on one line each
    assert not any("more chars]" in line for line in full)
