"""``cirrus ingest`` killed with SIGKILL at several points, then run again:
the workspace ends up byte-for-byte what an uninterrupted run writes, with
no temporary file left behind.  (Kills at ingest's exact commit points, and
those of ``cirrus eval``, are in test_eval_kill.py and test_eval_faults.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE_KB, SAMPLE_RAW, workspace_snapshot


def _command(workspace: Path) -> list[str]:
    return [sys.executable, "-m", "cirrus.cli", "ingest", str(SAMPLE_RAW), "--kb", str(SAMPLE_KB),
            "-w", str(workspace), "-j", "1", "-q"]


@pytest.fixture(scope="module")
def uninterrupted(sample_ingest) -> dict[str, bytes]:
    # the shared sample ingest (tests/conftest.py): what _command writes when not killed
    return workspace_snapshot(sample_ingest)


def _cassettes(workspace: Path) -> int:
    folder = workspace / "tool_mocks"
    return sum(1 for p in folder.glob("*.yaml")) if folder.is_dir() else 0


# when to kill: while starting up (models loading), after the first cassettes,
# and late in the run (most cassettes written, tasks.jsonl still a temporary file)
KILL_POINTS = {"starting": 0, "early": 3, "late": 20}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_ingest_reruns_to_the_same_workspace(tmp_path, uninterrupted, point):
    workspace = tmp_path / "ws"
    process = subprocess.Popen(_command(workspace), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        wanted = KILL_POINTS[point]
        if wanted == 0:
            time.sleep(1.0)
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

    rerun = subprocess.run(_command(workspace), cwd=REPO, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert workspace_snapshot(workspace) == uninterrupted
    assert not list(workspace.rglob("*.tmp"))
