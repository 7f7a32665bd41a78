"""One process writes a run at a time (issue 22): ``reports/<run_id>/.lock``.

* a second ``cirrus eval`` (or ``cirrus rescore``) on a run that another
  process holds is refused before it runs or writes anything, exit status 2,
  naming the holder's pid; the holder's folder is left as it was;
* the lock of a process that died (SIGKILL) is taken over, and said so;
* the lock file goes with the run: a finished run has none, a run that
  committed nothing leaves no folder;
* ``cirrus eval`` keeps the lock through its outputs (``held_until_done``),
  the run store alone only while it writes attempts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate import runlock
from cirrus.evaluate.runlock import LOCK_FILE, RunLock, RunLocked, held_until_done
from cirrus.evaluate.store import RunStore
from tests.test_disk_full import sample_workspace

ORACLE = ("--model", "baseline:oracle", "--limit", "3", "-q")

# a second process: takes the run's lock, says so, holds it until its stdin closes
HOLDER = """
import sys
from pathlib import Path
from cirrus.evaluate.runlock import RunLock
folder = Path(sys.argv[1])
folder.mkdir(parents=True, exist_ok=True)
RunLock(folder).acquire()
print("locked", flush=True)
sys.stdin.read()
"""

# a second process that only tries: prints "refused <message>" or "acquired"
TRY = """
import sys
from pathlib import Path
from cirrus.evaluate.runlock import RunLock, RunLocked
folder = Path(sys.argv[1])
folder.mkdir(parents=True, exist_ok=True)
try:
    RunLock(folder).acquire()
except RunLocked as exc:
    print("refused", exc)
else:
    print("acquired")
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return sample_workspace(tmp_path / "ws")


def _hold(folder: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def _let_go(holder: subprocess.Popen) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0


def _try(folder: Path) -> str:
    return subprocess.run([sys.executable, "-c", TRY, str(folder)], capture_output=True, text=True,
                          timeout=60).stdout.strip()


def _eval(workspace: Path, run_id: str, *extra: str):
    return CliRunner().invoke(app, ["eval", *ORACLE, "-w", str(workspace), "--run-id", run_id, *extra])


def _flat(output: str) -> str:
    return " ".join(output.split())


def test_a_second_eval_on_a_held_run_is_refused_naming_the_pid(workspace):
    run = workspace / "reports/r"
    holder = _hold(run)
    try:
        refused = _eval(workspace, "r")
        assert refused.exit_code == 2, refused.output
        output = _flat(refused.output)
        assert f"run r is being written by another cirrus process (pid {holder.pid}" in output
        assert f"kill {holder.pid}" in output and "run the same command again to resume" in output
        assert "Traceback" not in output
        assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE]  # nothing run, nothing written or removed
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == holder.pid
    finally:
        _let_go(holder)
    assert not (run / LOCK_FILE).exists()  # its holder gave it back on exit
    done = _eval(workspace, "r")
    assert done.exit_code == 0, done.output
    assert (run / "summary.json").is_file() and not (run / LOCK_FILE).exists()


def test_the_lock_of_a_killed_process_is_taken_over(workspace):
    run = workspace / "reports/r"
    holder = _hold(run)
    holder.send_signal(signal.SIGKILL)
    assert holder.wait(timeout=30) == -signal.SIGKILL
    assert json.loads((run / LOCK_FILE).read_text())["pid"] == holder.pid  # left behind
    result = _eval(workspace, "r")
    assert result.exit_code == 0, result.output
    assert f"took over the lock of pid {holder.pid}, which is no longer running" in _flat(result.output)
    assert (run / "summary.json").is_file() and not (run / LOCK_FILE).exists()


def test_rescore_into_a_held_run_is_refused_naming_the_pid(workspace):
    assert _eval(workspace, "src").exit_code == 0
    target = workspace / "reports/again"
    holder = _hold(target)
    try:
        refused = CliRunner().invoke(app, ["rescore", "src", "--judge-model", "local", "--run-id", "again",
                                           "-w", str(workspace), "-q"])
        assert refused.exit_code == 2, refused.output
        assert f"pid {holder.pid}" in _flat(refused.output) and "Traceback" not in refused.output
        assert sorted(p.name for p in target.iterdir()) == [LOCK_FILE]
    finally:
        _let_go(holder)


def test_a_run_that_committed_nothing_leaves_no_folder_lock_included(workspace):
    (workspace / "cirrus.toml").write_text('[prices."baseline:oracle"]\ninput_per_mtok = "x"\n')
    broken = _eval(workspace, "r")  # a bad setting: stops before the run starts
    assert broken.exit_code == 2
    assert not (workspace / "reports/r").exists()


def test_eval_keeps_the_lock_through_its_outputs(tmp_path):
    run = tmp_path / "reports/r"
    with held_until_done(run):
        assert _try(run) == "acquired"  # taken by nobody yet: the block takes nothing itself
        store = RunStore(run)
        store.open({"agent": "a"}, {})
        store.close()  # the store is done; the command still writes the outputs
        assert _try(run).startswith(f"refused run r is being written by another cirrus process (pid {os.getpid()}")
    assert not (run / LOCK_FILE).exists() and _try(run) == "acquired"


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    first, second = RunStore(tmp_path / "r"), RunStore(tmp_path / "r")
    first.open({"agent": "a"}, {})
    second.open({"agent": "a"}, {})  # e.g. the command and the store it drives
    first.close()
    assert (tmp_path / "r" / LOCK_FILE).exists()
    second.close()
    assert not (tmp_path / "r" / LOCK_FILE).exists()


def test_without_flock_the_pid_decides(tmp_path, monkeypatch):
    monkeypatch.setattr(runlock, "fcntl", None)  # a file system without flock
    run = tmp_path / "r"
    run.mkdir()
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        (run / LOCK_FILE).write_text(json.dumps({"pid": live.pid}))
        with pytest.raises(RunLocked, match=f"pid {live.pid}"):
            RunLock(run).acquire()
    finally:
        live.stdin.close()  # type: ignore[union-attr]
        live.wait(timeout=30)
    lock = RunLock(run).acquire()  # its holder is gone: taken over
    assert lock.taken_over == {"pid": live.pid}
    lock.release()
    assert not (run / LOCK_FILE).exists()
