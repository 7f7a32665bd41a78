"""`cirrus eval` fails loudly and can be interrupted (issue #6), against
tests/chat_server.py.  Where the test is about a process -- Ctrl-C, its exit
status 130 and the resume command it prints, a mistyped model's exit status 1
and stderr -- it runs as the real command (a child process); where it is
about what the command prints and writes (the resumed run among them), in
this process (:func:`run_here`: typer's CliRunner on the same ``app`` that
``python -m cirrus.cli`` runs, exit status, stdout and stderr apart, an
exception it lets out shown as the traceback a child process would print),
which saves the ~1 s of imports a child process pays first:

* before the first attempt every distinct model endpoint gets one tiny
  request; a mistyped model (404), a refused key or a port where nothing
  listens stops the command in seconds with exit status 1, naming the role,
  the model, the URL (credentials masked) and the server's reason, and no
  agent is asked anything about a task; a run stopped so leaves no
  ``reports/<run>/`` folder (an existing run's folder is never removed);
* a 200 the client cannot read passes the check; a busy endpoint (5xx)
  is a warning and the run goes on;
* a run whose every attempt failed exits 1; the summary lists the error
  reasons, identical ones grouped with their counts;
* Ctrl-C prints the command that resumes the run and exits 130 without a
  traceback; that command finishes the run and says how much was done.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._cli_here import cli_from
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, judge_or_fluency, make_task, write_workspace

KEY_ENV = "CIRRUS_LOUD_KEY"
KEY = "sk-cirrus-loud-secret-0123456789abcdef"
QUERY = re.compile(r"^\[(?P<task>[^\]]+)\] ")


# -- helpers ------------------------------------------------------------------------------


def workspace_of(root: Path, task_ids: list[str], settings: str = "") -> Path:
    """Three-checkpoint tasks whose queries start with ``[task id]``."""
    write_workspace(root, [make_task(t, i % 2 == 0, query_prefix=f"[{t}] ") for i, t in enumerate(task_ids)])
    if settings:
        (root / "cirrus.toml").write_text(settings)
    return root


def is_probe(body: dict) -> bool:
    """The endpoint check's request: one output token, no task in it."""
    return body.get("max_tokens") == 1 and not any(QUERY.match(m.get("content") or "") for m in body["messages"])


def task_of(body: dict) -> str:
    for message in body["messages"]:
        match = QUERY.match(message.get("content") or "") if message["role"] == "user" else None
        if match:
            return match["task"]
    return ""


def serving(body: dict) -> Reply | str:
    """Judge ``judge``, fluency checker ``fluency`` and a perfect agent;
    any model whose name starts with ``mock-`` does not exist."""
    if body["model"].startswith("mock-"):
        return Reply(status=404, error_message=f"The model `{body['model']}` does not exist or you do not have "
                                                "access to it.")
    answer = judge_or_fluency(body)
    return answer if answer is not None else agent_reply("perfect", body)


def command(workspace: Path, base_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cirrus.cli", "eval", "--base-url", base_url, "--api-key-env", KEY_ENV,
            "-w", str(workspace), *extra]


def env() -> dict[str, str]:
    return {**os.environ, KEY_ENV: KEY, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"}


def run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    # from the workspace, so that no cirrus.toml of the current directory applies
    return subprocess.run(args, env=env(), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def run_here(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``args`` (a :func:`command`) run in this process by typer's CliRunner,
    as :func:`run` runs it in a child process: from ``cwd`` (so that no
    cirrus.toml of the current directory applies), with :func:`env`'s key
    and width; its exit status and stdout and stderr apart, an exception the
    command let out appended to stderr as the traceback Python would print."""
    assert args[:3] == [sys.executable, "-m", "cirrus.cli"], args
    return cli_from(args[3:], cwd=cwd, env={KEY_ENV: KEY, "COLUMNS": "250"}, shown_as=args)


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python then installs its KeyboardInterrupt handler


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(args, env=env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interruptible)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(condition, what: str, proc: subprocess.Popen | None = None, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert proc is None or proc.poll() is None, f"the command ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {limit} s"
        time.sleep(0.01)


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


def runs_listed(workspace: Path) -> list[str]:
    reports = workspace / "reports"
    return sorted(p.name for p in reports.iterdir()) if reports.exists() else []


# -- the endpoint check ---------------------------------------------------------------------


@pytest.mark.parametrize("role", ["agent", "judge"])
def test_a_mistyped_model_stops_the_run_before_any_task(tmp_path, role):
    workspace = workspace_of(tmp_path, ["T-a", "T-b", "T-c"])
    agent, judge = ("mock-agnet", "judge") if role == "agent" else ("agent", "mock-jugde")
    typo = agent if role == "agent" else judge
    with ChatServer(rule=serving) as server:
        # credentials written into the URL must not be shown
        url = server.base_url.replace("http://", "http://alice:pw-hidden-42@")
        started = time.monotonic()
        done = run(command(workspace, url, "--model", agent, "--judge-model", judge, "--fluency-model", "fluency",
                           "--run-id", "typo", "--runs", "2"), workspace)
        elapsed = time.monotonic() - started
        requests = list(server.requests)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, output
    no_traceback(done)
    shown = server.base_url.replace("http://", "http://***@")
    assert f"{role} model '{typo}' at {shown}" in output
    assert f"HTTP 404: The model `{typo}` does not exist" in output  # the server's own reason
    assert "cannot start" in output
    assert "pw-hidden-42" not in output and "alice" not in output and KEY not in output
    # one probe per endpoint (agent, judge, fluency), then nothing: no agent call for any task
    assert sorted(body["model"] for body in requests) == sorted([agent, judge, "fluency"])
    assert all(is_probe(body) for body in requests)
    assert runs_listed(workspace) == []  # no folder that would list like a run
    assert elapsed < 60


def test_nothing_listening_stops_the_run_in_seconds(tmp_path):
    workspace = workspace_of(tmp_path, ["T-a", "T-b"])
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    done = run_here(command(workspace, url, "--model", "agent", "-q"), workspace)
    elapsed = time.monotonic() - started
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, output
    no_traceback(done)
    # agent, judge and fluency share one endpoint: one check, all three roles named
    assert f"agent, judge and fluency model 'agent' at {url}: nothing listens at {url} (connection refused)" in output
    assert runs_listed(workspace) == []
    assert elapsed < 60  # measured before this check: 2 min 18 s of retries, then error rows and exit 0


def test_the_client_gives_up_on_a_refused_connection_after_a_few_quick_tries():
    import asyncio

    from cirrus.evaluate.types import InfrastructureError
    from cirrus.llm.client import REFUSED_TRIES, ChatClient, RoleConfig
    from cirrus.llm.providers import Endpoint

    url = f"http://127.0.0.1:{closed_port()}/v1"
    role = RoleConfig(Endpoint("agent-model", url, None), name="agent")  # the default: 5 retries with backoff
    assert role.max_retries + 1 > REFUSED_TRIES

    async def call() -> tuple[str, int]:
        async with ChatClient(role) as client:
            with pytest.raises(InfrastructureError) as failure:
                await client.complete([{"role": "user", "content": "hi"}])
            return str(failure.value), client.requests

    started = time.monotonic()
    message, requests = asyncio.run(call())
    assert requests == REFUSED_TRIES
    assert message == (f"agent model 'agent-model' at {url} failed after {REFUSED_TRIES} attempts: "
                       f"nothing listens at {url} (connection refused)")
    assert time.monotonic() - started < 20  # the backoff of 5 retries alone would wait at least 31 s


def test_a_malformed_answer_to_the_check_counts_as_ready(tmp_path):
    workspace = workspace_of(tmp_path, ["T-a", "T-b"])

    def rule(body: dict) -> Reply | str:
        return Reply(body=b"<html>hello</html>") if is_probe(body) else serving(body)

    with ChatServer(rule=rule) as server:
        done = run_here(command(workspace, server.base_url, "--model", "agent", "--judge-model", "judge",
                                "--fluency-model", "fluency", "--run-id", "ok", "-q"), workspace)
        probes = [body for body in server.requests if is_probe(body)]
    assert done.returncode == 0, done.stderr
    assert {body["model"] for body in probes} == {"agent", "judge", "fluency"}
    summary = json.loads((workspace / "reports/ok/summary.json").read_text())
    assert summary["attempts"] == 2 and summary["errors"] == 0 and summary["atpr"] == 1.0


def test_a_busy_endpoint_warns_and_a_run_of_only_errors_exits_1_with_its_reasons(tmp_path):
    workspace = workspace_of(tmp_path, ["T-a", "T-b"], "[roles.agent]\nmax_retries = 1\n")

    def rule(body: dict) -> Reply | str:
        if body["model"] == "agent":  # retry-after-ms keeps the retries fast
            return Reply(status=500, headers={"retry-after-ms": "1"}, error_message="model overloaded")
        return serving(body)

    with ChatServer(rule=rule) as server:
        done = run_here(command(workspace, server.base_url, "--model", "agent", "--judge-model", "judge",
                                "--fluency-model", "fluency", "--run-id", "busy", "--runs", "2", "-q"), workspace)
        attempt_calls = [b for b in server.requests if b["model"] == "agent" and not is_probe(b)]
    no_traceback(done)
    assert done.returncode == 1, done.stderr
    assert "warning:" in done.stderr and "HTTP 500: model overloaded" in done.stderr  # the check warned, went on
    assert len(attempt_calls) == 4 * 2  # every attempt was tried: two tries each
    reasons = [line for line in done.stderr.splitlines() if re.match(r"\s+\d+ x ", line)]
    assert len(reasons) == 1, done.stderr  # four identical reasons, grouped
    assert reasons[0].strip().startswith("4 x agent model 'agent'") and "model overloaded" in reasons[0]
    assert "every attempt of run busy ended in an error" in " ".join(done.stderr.split())
    assert KEY not in done.stdout + done.stderr
    summary = json.loads((workspace / "reports/busy/summary.json").read_text())
    assert summary["attempts"] == summary["errors"] == 4


def test_a_run_with_some_errors_exits_0_and_lists_each_reason_with_its_count(tmp_path):
    workspace = workspace_of(tmp_path, ["T-busy", "T-bad", "T-ok"], "[roles.agent]\nmax_retries = 1\n")

    def rule(body: dict) -> Reply | str:
        if body["model"] == "agent" and task_of(body) == "T-busy":
            return Reply(status=503, headers={"retry-after-ms": "1"}, error_message="try later")
        if body["model"] == "agent" and task_of(body) == "T-bad":
            return Reply(status=400, error_message="context too long")
        return serving(body)

    with ChatServer(rule=rule) as server:
        done = run_here(command(workspace, server.base_url, "--model", "agent", "--judge-model", "judge",
                                "--fluency-model", "fluency", "--run-id", "mixed", "--runs", "2", "-q"), workspace)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    reasons = sorted(line.strip() for line in done.stderr.splitlines() if re.match(r"\s+\d+ x ", line))
    assert len(reasons) == 2, done.stderr
    assert all(line.startswith("2 x agent model 'agent'") for line in reasons)
    assert "context too long" in reasons[0] + reasons[1] and "try later" in reasons[0] + reasons[1]
    assert "4 attempt(s) ended in an error" in done.stderr
    assert json.loads((workspace / "reports/mixed/summary.json").read_text())["errors"] == 4


def test_a_failed_check_never_removes_an_existing_run(tmp_path):
    workspace = workspace_of(tmp_path, ["T-a", "T-b"])

    def rule(body: dict) -> Reply | str:  # the check passes; every attempt is refused as a bad request
        return serving(body) if is_probe(body) or body["model"] != "agent" else Reply(status=400)

    args = ("--model", "agent", "--judge-model", "judge", "--fluency-model", "fluency", "--run-id", "kept", "-q")
    with ChatServer(rule=rule) as server:
        first = run_here(command(workspace, server.base_url, *args), workspace)
    assert first.returncode == 1, first.stderr  # every attempt an error
    attempts = workspace / "reports/kept/attempts.jsonl"
    before = attempts.read_bytes()
    assert len(lines(attempts)) == 2
    # the same run again (its errors are redone), now where nothing listens: stopped by the check
    again = run_here(command(workspace, f"http://127.0.0.1:{closed_port()}/v1", *args), workspace)
    assert again.returncode == 1 and "connection refused" in again.stderr, again.stderr
    assert attempts.read_bytes() == before and (workspace / "reports/kept/run.json").exists()


# -- Ctrl-C and resume ---------------------------------------------------------------------------


def resume_line(stderr: str) -> list[str]:
    """The command printed after ``interrupted``, split as a shell would."""
    text = stderr[stderr.index("interrupted"):]
    line = next(line.strip() for line in text.splitlines() if line.strip().startswith("cirrus eval"))
    return shlex.split(line)


def test_ctrl_c_prints_the_command_that_resumes_the_run(tmp_path):
    workspace = workspace_of(tmp_path, [f"T-{i}" for i in range(4)])
    with ChatServer(rule=serving, delay=0.05) as server:
        # no --run-id: the resume command must carry the generated one
        proc = start(command(workspace, server.base_url, "--model", "agent", "--judge-model", "judge",
                             "--fluency-model", "fluency", "--runs", "2", "--concurrency", "1"), workspace)
        attempts_files = lambda: list((workspace / "reports").glob("*/attempts.jsonl"))  # noqa: E731
        wait_for(lambda: any(lines(p) for p in attempts_files()), "committed attempt", proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stdout + stderr, stderr
        (attempts,) = attempts_files()
        run_id = attempts.parent.name
        committed = lines(attempts)
        assert 1 <= len(committed) < 8 and not (attempts.parent / "summary.json").exists()

        words = resume_line(stderr)
        assert words[:2] == ["cirrus", "eval"]
        assert words[words.index("--run-id") + 1] == run_id
        assert words[words.index("--api-key-env") + 1] == KEY_ENV and KEY not in stdout + stderr
        assert words[words.index("--runs") + 1] == "2" and words[words.index("--model") + 1] == "agent"

        # the delay kept the interrupted run from finishing before Ctrl-C; the resumed run needs none
        server.delay = 0.0
        resumed = run_here([sys.executable, "-m", "cirrus.cli", *words[1:]], workspace)  # what it prints and writes
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run {run_id}: {len(committed)} of 8 attempts already done" in resumed.stderr
    shown = re.findall(r"\| *(\d+)/(\d+) \[", resumed.stderr)  # the progress bar's counts, in order
    assert shown and shown[0] == (str(len(committed)), "8")  # it starts where the run stopped
    rows = lines(attempts)
    keys = [(row["task_id"], row["attempt"]) for row in rows]
    assert len(keys) == len(set(keys)) == 8  # the committed attempts were kept, not redone
    assert rows[:len(committed)] == committed
    summary = json.loads((attempts.parent / "summary.json").read_text())
    assert summary["attempts"] == 8 and summary["errors"] == 0


def test_ctrl_c_during_the_check_leaves_no_run_folder(tmp_path):
    workspace = workspace_of(tmp_path, ["T-a", "T-b"])

    def rule(body: dict) -> Reply | str:
        return Reply(hang=True) if is_probe(body) else serving(body)

    with ChatServer(rule=rule) as server:
        proc = start(command(workspace, server.base_url, "--model", "agent", "--judge-model", "judge",
                             "--fluency-model", "fluency", "--run-id", "never", "-q"), workspace)
        wait_for(lambda: len(server.requests) >= 3, "endpoint check", proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        requests = list(server.requests)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stdout + stderr, stderr
    words = resume_line(stderr)
    assert words[words.index("--run-id") + 1] == "never" and words.count("--run-id") == 1
    assert all(is_probe(body) for body in requests)
    assert runs_listed(workspace) == []
