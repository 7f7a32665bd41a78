"""A full disk, simulated: ``OSError(ENOSPC)`` (or ``EDQUOT``) from a
patched ``os.write`` / ``os.fsync`` / ``os.replace``, or a SQLite cache at
its page limit.

* :func:`cirrus.files.atomic_writer` raises :class:`DiskFullError` ("disk
  full while writing <path>: ..."), the old file intact, no temporary file;
* the run store's appends are cut back (no half line) and ``finalize`` keeps
  the old outputs;
* the response cache failing to write only warns;
* ``cirrus eval`` on the sample workspace stopped by a full disk exits with
  that message (no traceback), and the same command, once there is room,
  resumes to the result of an uninterrupted run.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import pickle
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.roles import _open_cache
from cirrus.evaluate.store import ATTEMPTS_FILE, TRANSCRIPTS_FILE, RunStore
from cirrus.files import DiskFullError, append_line, atomic_writer, read_jsonl
from cirrus.llm.cache import ResponseCache
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer
from tests.conftest import REPO

KEY_ENV = "CIRRUS_DISK_FULL_KEY"
MESSAGES = [{"role": "user", "content": "hello"}]
ENOSPC = OSError(errno.ENOSPC, "No space left on device")


# -- a full disk: files -------------------------------------------------------------------------


def _fail_with(monkeypatch, name: str, exc: OSError, when=lambda *args: True):
    real = getattr(os, name)

    def failing(*args, **kw):
        if when(*args):
            raise exc
        return real(*args, **kw)

    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_atomic_writer_on_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch, where, binary, code):
    path = tmp_path / "out.json"
    path.write_text("old content")
    full = OSError(code, os.strerror(code))
    if where != "write":
        _fail_with(monkeypatch, where, full)
    with pytest.raises(DiskFullError) as info:
        with atomic_writer(path, binary=binary) as out:
            out.write(b"new content" if binary else "new content")
            if where == "write":
                raise full  # as a write of the handle would
    monkeypatch.undo()
    exc = info.value
    assert str(exc).startswith(f"disk full while writing {path}: ") and str(exc) == exc.strerror
    assert isinstance(exc, OSError) and exc.errno == code and exc.filename == str(path)
    assert path.read_text() == "old content"
    assert list(tmp_path.iterdir()) == [path]  # no .out.json.*.tmp left behind


def test_atomic_writer_advice_and_other_errors(tmp_path, monkeypatch):
    path = tmp_path / "new.txt"
    _fail_with(monkeypatch, "replace", ENOSPC)
    with pytest.raises(DiskFullError, match=r": free space and re-run; completed attempts are kept$"):
        with atomic_writer(path, advice="free space and re-run; completed attempts are kept") as out:
            out.write("x")
    assert not path.exists() and not list(tmp_path.iterdir())
    monkeypatch.undo()
    # not a full disk: the error as it was, still no temporary file
    _fail_with(monkeypatch, "replace", PermissionError(errno.EACCES, "Permission denied"))
    with pytest.raises(PermissionError) as info:
        with atomic_writer(path) as out:
            out.write("x")
    assert not isinstance(info.value, DiskFullError) and not list(tmp_path.iterdir())


def test_an_atomically_written_file_has_the_mode_a_plain_write_gives(tmp_path):
    with atomic_writer(tmp_path / "atomic.txt") as out:
        out.write("x")
    (tmp_path / "plain.txt").write_text("x")
    mode = (tmp_path / "atomic.txt").stat().st_mode & 0o777
    assert mode == (tmp_path / "plain.txt").stat().st_mode & 0o777  # not mkstemp's 0600 (under umask 022)


def test_disk_full_error_survives_pickling():
    exc = pickle.loads(pickle.dumps(DiskFullError("/w/reports/r/attempts.jsonl", "free space", errno.EDQUOT)))
    assert isinstance(exc, DiskFullError) and exc.errno == errno.EDQUOT
    assert str(exc) == "disk full while writing /w/reports/r/attempts.jsonl: free space"


def _partial_then_full(monkeypatch, name: str, after: int = 0) -> dict:
    """``os.write`` to a file called ``name``: ``after`` whole writes, then
    one that writes half its bytes, then ENOSPC (as a disk filling up does)."""
    real = os.write
    state = {"whole": 0, "full": False}

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if os.path.basename(target) == name:
            if state["full"]:
                raise OSError(errno.ENOSPC, "No space left on device")
            if state["whole"] >= after:
                state["full"] = True
                return real(fd, bytes(data)[: max(1, len(data) // 2)])
            state["whole"] += 1
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return state


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")


def _row(task_id: str, attempt: int = 0) -> tuple[dict, dict]:
    row = {"task_id": task_id, "attempt": attempt, "category": "ECS", "checkpoints": 1, "covered": 1,
           "accepted_turns": 1, "tpr": 1.0, "lj": 0, "nei": 0.0, "mtl": 5.0, "success": True, "status": "ok",
           "error": None, "input_tokens": 10, "output_tokens": 5, "wall_s": 0.1,
           "turns": [{"checkpoint": 1, "reply_type": "Solution", "accepted": True, "covered_through": 1, "stl": 5,
                      "fluent": True, "tool_calls": 0, "wall_s": 0.1}]}
    return row, {"task_id": task_id, "attempt": attempt, "status": "ok", "error": None, "turns": []}


def _store(directory: Path, *task_ids: str) -> RunStore:
    store = RunStore(directory)
    store.open({"agent": "a"}, {"run_id": directory.name})
    for task_id in task_ids:
        store.append(*_row(task_id))
    return store


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


@needs_proc
@pytest.mark.parametrize("failing", [TRANSCRIPTS_FILE, ATTEMPTS_FILE])
def test_run_store_append_on_a_full_disk_leaves_no_half_line(tmp_path, monkeypatch, failing):
    store = _store(tmp_path / "run", "T1", "T2")
    before = _snapshot(store.directory)
    _partial_then_full(monkeypatch, failing)
    with pytest.raises(DiskFullError) as info:
        store.append(*_row("T3"))
    monkeypatch.undo()
    assert str(info.value) == (f"disk full while writing {store.directory / failing}: "
                               "free space and re-run; completed attempts are kept")
    after = _snapshot(store.directory)
    assert after[failing] == before[failing]  # the half line was cut back
    if failing == ATTEMPTS_FILE:  # the transcript went in whole; without its attempt line it is not committed
        assert after[TRANSCRIPTS_FILE].startswith(before[TRANSCRIPTS_FILE])
        assert after[TRANSCRIPTS_FILE].endswith(b"\n")
    assert sorted(store.committed()) == [("T1", 0), ("T2", 0)]
    # room again: the same append goes through, every line whole
    store.append(*_row("T3"))
    assert sorted(store.committed()) == [("T1", 0), ("T2", 0), ("T3", 0)]
    for name in (ATTEMPTS_FILE, TRANSCRIPTS_FILE):
        lines = (store.directory / name).read_bytes().splitlines()
        assert all(json.loads(line) for line in lines)


def test_run_store_append_whose_fsync_fails_is_cut_back(tmp_path, monkeypatch):
    store = _store(tmp_path / "run", "T1")
    before = _snapshot(store.directory)
    _fail_with(monkeypatch, "fsync", ENOSPC)
    with pytest.raises(DiskFullError, match="disk full while writing .*transcripts.jsonl"):
        store.append(*_row("T2"))
    monkeypatch.undo()
    assert _snapshot(store.directory) == before


@needs_proc
def test_a_half_line_that_could_not_be_cut_back_is_skipped_and_never_merged(tmp_path, monkeypatch):
    path = tmp_path / "lines.jsonl"
    append_line(path, '{"n": 1}\n')
    _partial_then_full(monkeypatch, path.name)
    _fail_with(monkeypatch, "ftruncate", ENOSPC)
    with pytest.raises(DiskFullError):
        append_line(path, '{"n": 2, "padding": "xxxxxxxxxxxxxxxxxxxx"}\n')
    monkeypatch.undo()
    assert not path.read_bytes().endswith(b"\n")  # the half line stayed
    append_line(path, '{"n": 3}\n')
    assert list(read_jsonl(path)) == [{"n": 1}, {"n": 3}]
    assert path.read_bytes().endswith(b'\n{"n": 3}\n')  # the new line starts a line of its own


@pytest.mark.parametrize("target", ["tasks.parquet", "checkpoints.parquet", TRANSCRIPTS_FILE, "summary.json"])
def test_run_store_finalize_on_a_full_disk_keeps_the_old_outputs(tmp_path, monkeypatch, target):
    store = _store(tmp_path / "run", "T1", "T2")
    store.finalize({"attempts": 2})
    store.append(*_row("T3"))
    before = _snapshot(store.directory)
    _fail_with(monkeypatch, "replace", ENOSPC, when=lambda src, dst: Path(dst).name == target)
    with pytest.raises(DiskFullError) as info:
        store.finalize({"attempts": 3})
    monkeypatch.undo()
    assert str(info.value).startswith(f"disk full while writing {store.directory / target}: ")
    after = _snapshot(store.directory)
    assert after[target] == before[target]
    assert not [name for name in after if name.endswith(".tmp")]
    assert pl.read_parquet(store.directory / "tasks.parquet").height in (2, 3)  # readable, old or new
    # room again: the same call completes the outputs
    store.finalize({"attempts": 3})
    assert pl.read_parquet(store.directory / "tasks.parquet")["task_id"].to_list() == ["T1", "T2", "T3"]
    assert json.loads((store.directory / "summary.json").read_text()) == {"attempts": 3}


# -- a full disk: the response cache ----------------------------------------------------------


def _full_cache(directory: Path) -> ResponseCache:
    """A cache with no room for one more answer (SQLITE_FULL, as on a full disk)."""
    cache = ResponseCache(directory)
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count = {pages}")
    for n in range(10_000):  # fill the last page
        try:
            cache.put(f"filler-{n}", {"content": "x" * 100})
        except sqlite3.OperationalError as exc:
            assert exc.sqlite_errorcode == sqlite3.SQLITE_FULL
            return cache
    raise AssertionError("the cache never filled up")


def test_a_cache_that_cannot_be_written_only_warns(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-cirrus-disk-full-0123456789")
    cache = _full_cache(tmp_path / "cache")
    stored = len(cache)

    async def judge_like_calls(base_url: str):
        role = RoleConfig(Endpoint("model-x", base_url, KEY_ENV), retry_initial_wait=0.01, max_retries=0)
        async with ChatClient(role, cache=cache) as client:
            plain = await client.complete(MESSAGES, cache=True)
            parsed, _ = await client.complete_parsed(MESSAGES, lambda raw: raw.upper(), temperature=0.5)
            again = await client.complete(MESSAGES, cache=True)
            return plain, parsed, again

    with ChatServer(rule=lambda body: "answer") as server:
        with pytest.warns(RuntimeWarning, match="could not write the response cache: database or disk is full") as seen:
            plain, parsed, again = asyncio.run(judge_like_calls(server.base_url))
        requests = len(server.requests)
    assert (plain.content, parsed, again.content) == ("answer", "ANSWER", "answer")
    assert not again.cached and requests == 3  # nothing was stored: asked again, answered all the same
    assert len([w for w in seen if issubclass(w.category, RuntimeWarning)]) == 3
    assert len(cache) == stored
    cache.close()


@pytest.mark.parametrize("failure", ["sqlite", "oserror"])
def test_a_disk_too_full_to_open_the_cache_is_a_disk_full_error(tmp_path, failure):
    class Unopenable:
        FILENAME = ResponseCache.FILENAME

        def __init__(self, directory):
            if failure == "oserror":
                raise OSError(errno.ENOSPC, "No space left on device")
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise exc

    with pytest.raises(DiskFullError, match="disk full while writing .*cache"):
        _open_cache(Unopenable, tmp_path / "cache")


# -- a full disk: `cirrus eval` on the sample workspace ------------------------------------------

SCORE_KEYS = ("n_tasks", "atpr", "alj", "anei", "amtl", "sr", "pass^2", "errors", "attempts")
SAMPLE_ARGS = ("--model", "baseline:oracle", "--runs", "2", "--pass-k", "2", "-q")  # offline; scores 1.0, AMTL ~84


def sample_workspace(root: Path) -> Path:
    (root / "tickets").mkdir(parents=True)
    shutil.copy(REPO / "tickets/tasks.jsonl", root / "tickets/tasks.jsonl")
    shutil.copytree(REPO / "tool_mocks", root / "tool_mocks")
    return root


def sample_eval(workspace: Path, run_id: str):
    return CliRunner().invoke(app, ["eval", *SAMPLE_ARGS, "-w", str(workspace), "--run-id", run_id])


def assert_no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def outputs(directory: Path) -> tuple[list[dict], list[dict], dict]:
    tasks = pl.read_parquet(directory / "tasks.parquet").drop("wall_s").sort(["task_id", "attempt"])
    checkpoints = pl.read_parquet(directory / "checkpoints.parquet").drop("wall_s").sort(
        ["task_id", "attempt", "checkpoint"])
    summary = json.loads((directory / "summary.json").read_text())
    return tasks.to_dicts(), checkpoints.to_dicts(), {k: summary[k] for k in SCORE_KEYS}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple:
    workspace = sample_workspace(tmp_path_factory.mktemp("clean"))
    result = sample_eval(workspace, "run")
    assert result.exit_code == 0, result.output
    return outputs(workspace / "reports/run")


@needs_proc
@pytest.mark.parametrize("failing", [ATTEMPTS_FILE, TRANSCRIPTS_FILE, "tasks.parquet"])
def test_eval_stopped_by_a_full_disk_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch, uninterrupted,
                                                                           failing):
    workspace = sample_workspace(tmp_path / "ws")
    run = workspace / "reports/run"
    committed_before = 7
    if failing == "tasks.parquet":
        _fail_with(monkeypatch, "replace", ENOSPC, when=lambda src, dst: Path(dst).name == failing)
    else:
        _partial_then_full(monkeypatch, failing, after=committed_before)
    full = sample_eval(workspace, "run")
    monkeypatch.undo()

    assert_no_traceback(full)
    assert full.exit_code != 0
    output = " ".join(full.output.split())
    assert f"disk full while writing {run / failing}: free space and re-run; completed attempts are kept" in output
    assert not (run / "summary.json").exists()
    assert not list(run.glob(".*.tmp"))
    attempts_at_stop = (run / ATTEMPTS_FILE).read_bytes()
    assert attempts_at_stop.endswith(b"\n")  # no half line
    assert (run / TRANSCRIPTS_FILE).read_bytes().endswith(b"\n")
    committed = [json.loads(line) for line in attempts_at_stop.splitlines()]
    if failing == "tasks.parquet":
        assert len(committed) == len(uninterrupted[0])  # every attempt was committed before the outputs
    else:
        assert len(committed) == committed_before

    resumed = sample_eval(workspace, "run")  # room again: the same command
    assert resumed.exit_code == 0, resumed.output
    assert (run / ATTEMPTS_FILE).read_bytes().startswith(attempts_at_stop)  # appended to, nothing redone
    keys = [(r["task_id"], r["attempt"]) for r in read_jsonl(run / ATTEMPTS_FILE)]
    assert len(keys) == len(set(keys)) == len(uninterrupted[0])
    assert outputs(run) == uninterrupted
