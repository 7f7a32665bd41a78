"""Security and privacy: the API key never reaches a file or the terminal,
path characters in ids cannot write outside the workspace, and every YAML
Cirrus reads is read with a safe loader."""

from __future__ import annotations

import ast
import base64
import subprocess
import sys
from pathlib import Path

from cirrus.replay import ToolReplayer
from tests.chat_server import ChatServer, Reply
from tests.conftest import REPO
from tests.test_eval_faults import KEY, eval_command, make_workspace, rule, child_env

# -- the API key ---------------------------------------------------------------------------


def _echoing_rule(server: ChatServer):
    """The usual rule, except that the agent of task T01 gets an error whose
    text repeats the request's Authorization header (some gateways do)."""

    def answer(body: dict):
        text = json_text(body)
        if body.get("model") == "agent" and "[T01:" in text:
            with server._lock:
                auth = server.headers[-1].get("authorization", "")
            return Reply(status=400, error_message=f"invalid request; you sent {auth}")
        return rule(body)

    return answer


def json_text(body: dict) -> str:
    import json

    return json.dumps(body)


def _files_containing(root: Path, needles: list[bytes]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(needle in data for needle in needles):
                found.append(path.relative_to(root).as_posix())
    return found


def test_the_api_key_is_never_written_nor_printed(tmp_path):
    workspace = make_workspace(tmp_path / "ws", 4)
    server = ChatServer()
    server.rule = _echoing_rule(server)
    with server:
        run = subprocess.run(eval_command(workspace, server, "r", "--pass-k", "2"), env=child_env(),
                             capture_output=True, text=True, timeout=180, cwd=workspace)
        assert run.returncode == 0, run.stderr
        report = subprocess.run([sys.executable, "-m", "cirrus.cli", "report", "r", "-w", str(workspace),
                                 "--bootstrap", "20"], env=child_env(), capture_output=True, text=True, timeout=180)
        assert report.returncode == 0, report.stderr
        # the key did reach the server, and the echo did happen
        assert any(KEY in h.get("authorization", "") for h in server.headers)
    attempts = (workspace / "reports" / "r" / "attempts.jsonl").read_text()
    assert "invalid request" in attempts  # the error is recorded, only without the key
    needles = [KEY.encode(), base64.b64encode(KEY.encode()), KEY[-16:].encode()]
    assert _files_containing(workspace, needles) == []
    for output in (run.stdout, run.stderr, report.stdout, report.stderr):
        assert KEY not in output and KEY[-16:] not in output


# -- path characters -------------------------------------------------------------------------


def test_ids_and_tool_names_with_path_characters_stay_inside_the_workspace(tmp_path):
    import gzip
    import json

    raw = tmp_path / "raw.json.gz"
    bad_ids = ["../../escape", "/etc/passwd-ish", "a/b", "..\\win", "con", "nul\u0000byte", "~/.ssh", "A" * 300]
    tickets = [{"ticket_id": ticket_id, "events": [
        {"role": "customer", "text": "status?"},
        {"role": "tool_call", "call_id": "c1", "name": "../../../tmp/evil", "arguments": {"x": 1}},
        {"role": "tool_result", "call_id": "c1", "content": "fine"},
        {"role": "agent", "text": "All systems fine."}]} for ticket_id in bad_ids]
    with gzip.open(raw, "wt") as handle:
        json.dump(tickets, handle)
    outside_before = sorted(p.as_posix() for p in tmp_path.parent.rglob("*") if tmp_path not in p.parents)
    workspace = tmp_path / "ws"
    result = subprocess.run([sys.executable, "-m", "cirrus.cli", "ingest", str(raw), "-w", str(workspace), "-q"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != raw]
    assert written and all(workspace in p.parents for p in written)
    assert all(p.parent in (workspace / "tickets", workspace / "tool_mocks") for p in written)
    assert sorted(p.as_posix() for p in tmp_path.parent.rglob("*") if tmp_path not in p.parents) == outside_before
    tasks = [json.loads(line) for line in (workspace / "tickets/tasks.jsonl").read_text().splitlines()]
    for task in tasks:  # the cassettes still replay, whatever the id
        name = task["checkpoints"][0]["tool_calls"][0]["name"]
        assert "/" not in name and ".." not in name
        assert ToolReplayer.for_task(workspace, task).call(name, {"x": 1}) == "fine"


def test_a_run_id_with_path_characters_is_refused(tmp_path):
    from typer.testing import CliRunner

    from cirrus.cli import app

    for run_id in ("../x", "/tmp/x", "a/b", "..", ""):
        result = CliRunner().invoke(app, ["eval", "--model", "baseline:oracle", "-w", str(tmp_path),
                                          "--run-id", run_id, "-q"])
        assert result.exit_code == 2, (run_id, result.output)
    assert not (tmp_path.parent / "x").exists()


# -- YAML ----------------------------------------------------------------------------------------

UNSAFE = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
UNSAFE_LOADERS = {"Loader", "UnsafeLoader", "FullLoader", "CLoader", "CUnsafeLoader", "CFullLoader"}


def test_cirrus_reads_yaml_with_safe_loaders_only():
    problems = []
    for path in sorted((REPO / "cirrus").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml":
                if node.attr in UNSAFE_LOADERS:
                    problems.append(f"{path.name}:{node.lineno} yaml.{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in UNSAFE:
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id == "yaml":
                    loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
                    safe = isinstance(loader, ast.Attribute) and loader.attr in ("SafeLoader", "CSafeLoader")
                    if not safe:
                        problems.append(f"{path.name}:{node.lineno} yaml.{node.func.attr} without a safe Loader")
    assert problems == []


def test_a_cassette_with_a_python_tag_is_refused_and_runs_nothing(tmp_path):
    import pytest

    marker = tmp_path / "PWNED"
    (tmp_path / "tool_mocks").mkdir()
    (tmp_path / "tool_mocks" / "T-1.yaml").write_text(
        f"interactions: !!python/object/apply:os.system ['touch {marker}']\nversion: 1\n")
    task = {"task_id": "T-1", "cassette": "tool_mocks/T-1.yaml", "checkpoints": []}
    with pytest.raises(Exception) as failure:
        with ToolReplayer.for_task(tmp_path, task) as replayer:
            replayer.call("x", {})
    assert not marker.exists()
    assert "python/object" in str(failure.value) or "constructor" in str(failure.value).lower()
