"""SIGKILL in the middle of ``cirrus eval`` and ``cirrus ingest`` on the
ingested sample workspace, then the same command again: the result is what
an uninterrupted command writes, with nothing done twice and no temporary
file left.

Two ways to kill: by time, once ``attempts.jsonl`` holds N committed lines
(as ``kill -9`` or the OOM killer would), and by injection, for the
instants a poll cannot hit: the child runs the real CLI with ``os.replace``
or ``os.write`` wrapped so that it SIGKILLs itself just before the n-th
rename or write of a chosen file (or halfway through that write).  The
agent is ``baseline:oracle``; the judge and fluency checker are LLM roles on
tests/chat_server.py, answering by a fixed rule, so the verdicts do not
depend on timing.  Only the runs killed by time are paced (each answer after
a short delay, so the run takes a second or two and the poll can land its
kill mid-run); a kill by injection lands at its call whatever the pace, and
a run nothing kills has no reason to wait.

The evals and ingests that are killed are real child processes; an eval or
ingest that is not killed (the uninterrupted reference eval, the same command
again after each kill, the evals of the re-ingest test) is the same command,
with the same options, environment variable and working directory, in this
process (tests/_cli_here.py): no new interpreter, imports and model load for
a run nothing interrupts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest

from tests._cli_here import Ran, cli_here
from tests._ingest_speed_subset import TINY, SampleSubset, sample_subset
from tests.chat_server import ChatServer
from tests.conftest import REPO, SAMPLE_KB, SAMPLE_RAW, workspace_snapshot
from tests.scripted_models import between

KEY_ENV = "CIRRUS_KILL_TEST_KEY"
KEY = "sk-kill-test-not-a-key"
RUN = "r"
LIMIT, RUNS = 12, 2
PAIRS = LIMIT * RUNS

# The child: the real CLI, SIGKILLed just before the CRASH_AT-th os.<CRASH_OP> on a
# file of CRASH_DIR whose name matches CRASH_NAME (with CRASH_HALF=1, a write
# first writes half its bytes: a torn line).
CRASHER = r"""
import fnmatch, os, signal, sys
_root = os.path.realpath(os.environ["CRASH_DIR"])
_name, _at = os.environ["CRASH_NAME"], int(os.environ["CRASH_AT"])
_half = os.environ.get("CRASH_HALF") == "1"
_seen = 0

def _due(path):
    global _seen
    path = os.path.realpath(os.fspath(path))
    if not path.startswith(_root + os.sep) or not fnmatch.fnmatch(os.path.basename(path), _name):
        return False
    _seen += 1
    return _seen == _at

def _die():
    os.kill(os.getpid(), signal.SIGKILL)

if os.environ["CRASH_OP"] == "replace":
    _replace = os.replace
    def _patched_replace(src, dst, *args, **kwargs):
        if _due(dst):
            _die()
        return _replace(src, dst, *args, **kwargs)
    os.replace = _patched_replace
else:
    _write = os.write
    def _patched_write(fd, data):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if path.startswith("/") and _due(path):
            if _half:
                _write(fd, bytes(data)[: max(1, len(data) // 2)])
            _die()
        return _write(fd, data)
    os.write = _patched_write

from cirrus.cli import app
app(prog_name="cirrus")
"""


def _cli(*args: str, crash: dict[str, str] | None = None) -> list[str]:
    if crash is None:
        return [sys.executable, "-m", "cirrus.cli", *args]
    return [sys.executable, "-c", CRASHER, *args]


def _env(crash: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, KEY_ENV: KEY, "PYTHONUNBUFFERED": "1", **(crash or {})}


def _crash(root: Path, op: str, name: str, at: int = 1, half: bool = False) -> dict[str, str]:
    return {"CRASH_DIR": str(root), "CRASH_OP": op, "CRASH_NAME": name, "CRASH_AT": str(at),
            "CRASH_HALF": "1" if half else "0"}


def _temps(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.tmp"))


# -- the judge and fluency checker ----------------------------------------------------


def _rule(body: dict) -> str:
    """Included when the reference is in the candidate, except for about one
    reference in five; the next message does not follow for about one in seven."""
    prompt = body["messages"][-1]["content"]
    if body["model"] == "judge":
        reference, candidate = between(prompt, "reference_reply"), between(prompt, "candidate_reply")
        ok = reference in candidate and zlib.crc32(reference.encode()) % 5 != 0
        return json.dumps({"reason": "rule", "verdict": "Included" if ok else "Not Included"})
    following = between(prompt, "next_customer_message")
    return json.dumps({"reason": "rule", "answer": "No" if zlib.crc32(following.encode()) % 7 == 0 else "Yes"})


@pytest.fixture(scope="module")
def server():
    # one server for the module: its address is in every run's options (and so in the run's fingerprint and
    # the judges' cache keys), and a resumed run must be the same command as the one killed
    with ChatServer(rule=_rule) as chat:
        yield chat


PACE = 0.03  # seconds before each answer, while a run killed by time is running


@contextmanager
def _paced(server: ChatServer) -> Iterator[None]:
    server.delay = PACE
    try:
        yield
    finally:
        server.delay = 0.0


# -- ingest once; the uninterrupted eval -----------------------------------------------


def _ingest_args(workspace: Path, raw: Path = SAMPLE_RAW, kb: Path | None = SAMPLE_KB) -> list[str]:
    return ["ingest", str(raw), *(["--kb", str(kb)] if kb else []), "-w", str(workspace), "-j", "1", "-q"]


@pytest.fixture(scope="module")
def ingested(sample_ingest) -> Path:
    # the shared sample ingest (tests/conftest.py), byte for byte what the
    # `cirrus ingest` command above writes; read only (tests copy it first)
    return sample_ingest


def _copy(ingested: Path, workspace: Path) -> Path:
    for part in ("tickets", "tool_mocks"):
        shutil.copytree(ingested / part, workspace / part)
    return workspace


def _eval_args(workspace: Path, server: ChatServer) -> list[str]:
    return ["eval", "--model", "baseline:oracle", "--judge-model", "judge", "--judge-base-url", server.base_url,
            "--judge-api-key-env", KEY_ENV, "--fluency-model", "fluency", "--run-id", RUN, "--runs", str(RUNS),
            "--pass-k", "2", "--limit", str(LIMIT), "--concurrency", "2", "-w", str(workspace), "-q"]


def _eval(workspace: Path, server: ChatServer, crash: dict[str, str]) -> subprocess.CompletedProcess:
    """The eval as a child process, SIGKILLed by ``crash``."""
    # run from the workspace: no cirrus.toml of the current directory applies
    return subprocess.run(_cli(*_eval_args(workspace, server), crash=crash), env=_env(crash), cwd=workspace,
                          capture_output=True, text=True, timeout=300)


def _eval_here(workspace: Path, server: ChatServer) -> Ran:
    """The same eval command, not killed, in this process: the child's
    environment variable (the judges' key) and working directory (the
    workspace) for the time it runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, KEY)
        patch.chdir(workspace)
        return cli_here(_eval_args(workspace, server))


def _lines(path: Path) -> tuple[list[dict], int]:
    """The parseable lines of a JSONL file and how many could not be parsed."""
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    return rows, bad


def _outputs(workspace: Path) -> dict:
    """The run's outputs, less what measures time."""
    out = workspace / "reports" / RUN
    summary = json.loads((out / "summary.json").read_text())
    for key in ("finished_at", "wall_s_this_session"):
        summary.pop(key)
    # what the calls cost differs by design: a killed attempt is asked again on resume, and the judge's
    # answers it had already got come from Cirrus's cache (free, counted as cache hits)
    for key in ("usage", "cost", "prompt_cache_share"):
        assert key in summary
        summary.pop(key)
    summary.pop("overhead_usage", None)  # each session's endpoint check: one or two sessions
    transcripts, bad = _lines(out / "transcripts.jsonl")
    assert bad == 0, "transcripts.jsonl holds a line that does not parse"
    return {
        "summary": summary,
        "tasks": pl.read_parquet(out / "tasks.parquet").drop("wall_s").to_dicts(),
        "checkpoints": pl.read_parquet(out / "checkpoints.parquet").drop("wall_s").to_dicts(),
        "transcripts": transcripts,
        "fingerprint": json.loads((out / "run.json").read_text())["fingerprint"],
    }


@pytest.fixture(scope="module")
def uninterrupted(ingested, server, tmp_path_factory) -> dict:
    workspace = _copy(ingested, tmp_path_factory.mktemp("clean"))
    done = _eval_here(workspace, server)
    assert done.returncode == 0, done.stderr
    outputs = _outputs(workspace)
    assert len(outputs["tasks"]) == PAIRS and outputs["summary"]["errors"] == 0
    # the rule makes a mixed result: some tasks fail, some succeed
    assert 0 < outputs["summary"]["atpr"] < 1 and 0 < outputs["summary"]["sr"]["pass@1"] < 1
    return outputs


def _check_resumed(workspace: Path, uninterrupted: dict, torn_lines: int = 0) -> None:
    out = workspace / "reports" / RUN
    committed, unreadable = _lines(out / "attempts.jsonl")
    keys = [(row["task_id"], row["attempt"]) for row in committed]
    assert len(keys) == len(set(keys)) == PAIRS, "an attempt was committed twice, or is missing"
    # attempts.jsonl is the run's internal log: a line a kill tore stays there, unread
    assert unreadable == torn_lines
    assert _outputs(workspace) == uninterrupted
    assert _temps(workspace) == []


# -- eval: killed by time, after N committed attempts ------------------------------------


@pytest.mark.parametrize("kill_after", [1, 7, PAIRS - 2])
def test_eval_killed_after_n_attempts_resumes_to_the_uninterrupted_result(tmp_path, ingested, server, uninterrupted,
                                                                           kill_after):
    workspace = _copy(ingested, tmp_path / "ws")
    attempts = workspace / "reports" / RUN / "attempts.jsonl"
    killed = False
    with _paced(server):
        process = subprocess.Popen(_cli(*_eval_args(workspace, server)), env=_env(), cwd=workspace,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while process.poll() is None and time.monotonic() < deadline:
                if attempts.exists() and attempts.read_bytes().count(b"\n") >= kill_after:
                    process.send_signal(signal.SIGKILL)
                    killed = True
                    break
                time.sleep(0.005)
        finally:
            if not killed and process.poll() is None:
                process.kill()
            process.wait(timeout=30)
    assert killed and process.returncode == -signal.SIGKILL, f"not killed after {kill_after} attempts"
    at_kill, _ = _lines(attempts)
    assert kill_after <= len(at_kill) < PAIRS
    assert not (workspace / "reports" / RUN / "summary.json").exists()

    resumed = _eval_here(workspace, server)  # the same command again, not killed
    assert resumed.returncode == 0, resumed.stderr
    _check_resumed(workspace, uninterrupted)
    final, _ = _lines(attempts)
    assert final[: len(at_kill)] == at_kill  # what was committed before the kill was kept, not redone


# -- eval: killed by injection, at the instants a poll cannot hit -----------------------

# (what is wrapped, which file, which call, torn?) -> the state the kill leaves
EVAL_POINTS = {
    "before run.json": ("replace", "run.json", 1, False),
    "transcript written, attempt line not": ("write", "attempts.jsonl", 5, False),
    "attempt line torn in half": ("write", "attempts.jsonl", 5, True),
    "transcript line torn in half": ("write", "transcripts.jsonl", 9, True),
    "all committed, nothing finalized": ("replace", "tasks.parquet", 1, False),
    "parquets written, transcripts not rewritten": ("replace", "transcripts.jsonl", 1, False),
    "everything but summary.json": ("replace", "summary.json", 1, False),
}


@pytest.mark.parametrize("point", list(EVAL_POINTS))
def test_eval_killed_at_a_write_resumes_to_the_uninterrupted_result(tmp_path, ingested, server, uninterrupted, point):
    op, name, at, half = EVAL_POINTS[point]
    workspace = _copy(ingested, tmp_path / "ws")
    out = workspace / "reports" / RUN
    killed = _eval(workspace, server, _crash(out, op, name, at, half))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (out / "summary.json").exists()
    if op == "replace":  # the temporary file being renamed is still there
        assert any(Path(p).name.startswith(f".{name}.") for p in _temps(workspace))
    if point == "transcript written, attempt line not":
        assert len(_lines(out / "transcripts.jsonl")[0]) == len(_lines(out / "attempts.jsonl")[0]) + 1

    resumed = _eval_here(workspace, server)  # the same command again, not killed
    assert resumed.returncode == 0, resumed.stderr
    _check_resumed(workspace, uninterrupted, torn_lines=1 if (half and name == "attempts.jsonl") else 0)


# -- ingest: killed at its commit points -------------------------------------------------


def _committed_view(workspace: Path) -> dict[str, bytes]:
    """What a reader of the workspace sees: tasks.jsonl, the manifest and the
    cassettes tasks.jsonl names."""
    snapshot = workspace_snapshot(workspace)
    view = {name: snapshot.get(name) for name in ("tickets/tasks.jsonl", "tickets/manifest.json")}
    for line in (snapshot.get("tickets/tasks.jsonl") or b"").decode().splitlines():
        cassette = json.loads(line)["cassette"]
        if cassette:
            view[cassette] = snapshot.get(cassette)
    return view


@pytest.fixture(scope="module")
def subset(tmp_path_factory, pipeline_config) -> SampleSubset:
    """Part of the sample input (tests/_ingest_speed_subset.py: 3 tickets,
    each with a cassette, and 3 knowledge documents) and what `cirrus ingest`
    writes for it: each ingest below is killed at the end of its run (at a
    commit point, after every ticket is settled) and run again, and reading
    fewer tickets makes both runs shorter."""
    return sample_subset(tmp_path_factory, pipeline_config, TINY)


# "tasks.jsonl": every cassette written, tasks.jsonl still a temporary file;
# "manifest.json": tasks.jsonl in place, stale cassettes not removed, no manifest yet
@pytest.mark.parametrize("point", ["tasks.jsonl", "manifest.json"])
def test_ingest_killed_at_a_commit_point_reruns_to_the_same_workspace(tmp_path, subset, point):
    expected = subset.uninterrupted
    assert subset.cassettes == subset.tasks == 3  # several cassettes, each named by a task
    workspace = tmp_path / "ws"
    crash = _crash(workspace, "replace", point)
    killed = subprocess.run(_cli(*_ingest_args(workspace, subset.raw, subset.kb), crash=crash), env=_env(crash),
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert any(Path(p).name.startswith(f".{point}.") for p in _temps(workspace))
    assert not (workspace / "tickets" / "manifest.json").exists()
    if point == "tasks.jsonl":
        assert not (workspace / "tickets" / "tasks.jsonl").exists()
    else:  # the tasks file is complete, and every cassette it names is there, final
        view = _committed_view(workspace)
        assert view["tickets/tasks.jsonl"] == expected["tickets/tasks.jsonl"]
        assert all(view[name] == expected[name] for name in view if name.startswith("tool_mocks/"))

    rerun = cli_here(_ingest_args(workspace, subset.raw, subset.kb))  # the same command again, uninterrupted
    assert rerun.returncode == 0, rerun.stderr
    assert _temps(workspace) == []
    assert workspace_snapshot(workspace) == expected


def _raw(path: Path, variant: str, n: int = 6) -> Path:
    """``n`` tickets with one tool call each; variants A and B share ticket ids
    but differ in the call's arguments and result."""
    lines = []
    for i in range(1, n + 1):
        lines.append(json.dumps({"ticket_id": f"RE-{i}", "category": "ECS", "events": [
            {"role": "customer", "text": f"Is my web server number {i} up?"},
            {"role": "tool_call", "call_id": "c1", "name": "DescribeStatus",
             "arguments": {"page": i, "view": f"view{variant}"}},
            {"role": "tool_result", "call_id": "c1", "content": {"state": f"state{variant}{i}"}},
            {"role": "agent", "text": f"Server {i} reports state{variant}{i}."}]}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _ingest_here(raw: Path, workspace: Path, pipeline_config) -> None:
    """What `cirrus ingest raw -w workspace -j 1 -q` (``_ingest_args(workspace,
    raw, None)``) writes, ingested in this process: no child process to start
    where no kill is involved."""
    from cirrus.ingest.run import IngestOptions, run_ingest

    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, jobs=1, progress=False))


def test_a_killed_reingest_is_refused_by_eval_until_an_ingest_completes(tmp_path, pipeline_config, monkeypatch):
    """Ingest A, then ingest B (same ticket ids, other tool calls) into the same
    workspace and kill it after two cassettes.  Cassettes are rewritten in
    place, so A's tasks now meet some of B's recordings, which would replay as
    "no recorded result" and score as agent failures: eval must refuse the
    workspace (naming the interrupted ingest) until an ingest runs to the end,
    and then see B whole."""
    workspace = tmp_path / "ws"
    _ingest_here(_raw(tmp_path / "a" / "t.jsonl", "A"), workspace, pipeline_config)
    before = _committed_view(workspace)
    assert len([k for k in before if k.startswith("tool_mocks/")]) == 6

    raw_b = _raw(tmp_path / "b" / "t.jsonl", "B")
    crash = _crash(workspace, "replace", "*.yaml", at=3)
    killed = subprocess.run(_cli(*_ingest_args(workspace, raw_b, None), crash=crash),
                            env=_env(crash), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _committed_view(workspace) != before  # the mix eval must not score

    evaluate = ["eval", "--model", "baseline:oracle", "-w", str(workspace), "--run-id", "after", "-q"]
    monkeypatch.chdir(workspace)  # eval run from the workspace: no cirrus.toml of the current directory applies
    refused = cli_here(evaluate)
    assert refused.returncode == 2, refused.stderr
    assert "interrupted" in refused.stderr and "cirrus ingest" in refused.stderr
    assert not (workspace / "reports" / "after").exists()

    rerun = cli_here(_ingest_args(workspace, raw_b, None))  # the same command again, uninterrupted
    assert rerun.returncode == 0, rerun.stderr
    fresh = tmp_path / "fresh"
    _ingest_here(raw_b, fresh, pipeline_config)
    assert _committed_view(workspace) == _committed_view(fresh)
    done = cli_here(evaluate)
    assert done.returncode == 0, done.stderr
