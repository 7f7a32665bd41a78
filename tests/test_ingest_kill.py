"""``cirrus ingest`` killed with SIGKILL at several points, then run again:
the workspace ends up byte-for-byte what an uninterrupted run writes, with
no temporary file left behind.  (Kills at ingest's exact commit points, and
those of ``cirrus eval``, are in test_eval_kill.py and test_eval_faults.py.)

The killed ingest is a real child process; the same command run again after
the kill is the CLI in this process (tests/_cli_here.py), which spares it a
new interpreter's imports and model load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._cli_here import cli_here
from tests._ingest_speed_subset import MEDIUM, SampleSubset, sample_subset
from tests.conftest import REPO, workspace_snapshot


def _args(subset: SampleSubset, workspace: Path) -> list[str]:
    return ["ingest", str(subset.raw), "--kb", str(subset.kb), "-w", str(workspace), "-j", "1", "-q"]


def _command(subset: SampleSubset, workspace: Path) -> list[str]:
    return [sys.executable, "-m", "cirrus.cli", *_args(subset, workspace)]


@pytest.fixture(scope="module")
def subset(tmp_path_factory, pipeline_config) -> SampleSubset:
    # part of the sample input (tests/_ingest_speed_subset.py: 14 tickets, 12 cassettes, the first 7
    # written together) and what _command writes when not killed: every child process here reads less
    return sample_subset(tmp_path_factory, pipeline_config, MEDIUM)


def _cassettes(workspace: Path) -> int:
    folder = workspace / "tool_mocks"
    return sum(1 for p in folder.glob("*.yaml")) if folder.is_dir() else 0


# when to kill: while starting up (the workspace marked in progress, the
# models about to load), after the first cassettes, and late in the run (most
# cassettes written -- the whole first chunk of tickets; the next chunk's
# models are at work -- tasks.jsonl still a temporary file)
KILL_POINTS = {"starting": 0, "early": 3, "late": 7}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_ingest_reruns_to_the_same_workspace(tmp_path, subset, point):
    assert subset.cassettes == 12  # what KILL_POINTS counts on
    workspace = tmp_path / "ws"
    process = subprocess.Popen(_command(subset, workspace), cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        wanted = KILL_POINTS[point]
        if wanted == 0:  # the marker is written before the models load (they load with the first ticket)
            started = workspace / "tickets" / ".ingest-in-progress"
            while not started.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            while _cassettes(workspace) < wanted and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
        assert process.poll() is None, "the ingest finished before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    assert not (workspace / "tickets" / "tasks.jsonl").exists()  # never a half-written file under the real name

    if wanted == 0:
        assert (workspace / "tickets" / ".ingest-in-progress").exists()

    rerun = cli_here(_args(subset, workspace))  # the same command again, run to the end
    assert rerun.returncode == 0, rerun.stderr
    assert workspace_snapshot(workspace) == subset.uninterrupted
    assert not list(workspace.rglob("*.tmp"))
