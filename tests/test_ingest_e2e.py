"""End-to-end ingest: the sample workspace, the tau-bench transcripts, the
process pool, atomic writes, cassette replay."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
import vcr
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.ingest.pipeline import cassette_filename
from cirrus.ingest.run import IngestOptions, run_ingest
from cirrus.replay import NoRecordedResult, ToolReplayer
from cirrus.schema import Task
from tests.conftest import SAMPLE_KB, SAMPLE_RAW, TAU_BENCH, needs_shared

# Personal data planted in the sample tickets (tickets/raw); none may survive.
PLANTED = [
    "Laura Chen", "Marcus Webb", "Priya Raman", "Tomasz Nowak", "Kenji Watanabe", "Daniel Okafor", "Sofia Marquez",
    "Hannah Brooks", "Zhang Wei", "张伟", "Grace Liu", "Emily Fischer", "Rahul Mehta", "Chloe Dubois",
    "marcus.webb@harborlinefreight.com", "sofia.marquez@lumenhealth.org", "laura.chen@brightleaf.io",
    "hannah.brooks@quillandpine.com", "chloe.dubois@atelier-lumiere.fr", "noah.peterson@gmail.com",
    "+1 415 555 0199", "+44 20 7946 0958", "+44 7700 900123", "13912345678", "15821934470", "+33 6 12 34 56 78",
    "47.98.112.36", "203.0.113.45", "2408:4003:1f40:9a00:5c2e:8b1d:3e7a:41c2", "4111 1111 1111 1111",
    "88 Century Avenue", "LTAI5tB8qR3mXw9KfZ2pLs7d", "AKIAIOSFODNN7EXAMPLE", "sk-7Qm2VbX9kLp4RtZ8wN3cHs6FjD1yGe5A",
    "1207764419830562", "1938450026617394", "i-bp1f8k2m9x3qz7w4c6ud", "sg-bp1e7d2a9c4k8m3x5z0q",
    "33010619900307156X", "110105198806052715", "admin:Secr3tPass@",
]
CANARIES = ["web-canary-0090", "backup-canary-0094", "canary-0091", "canary-0092", "canary-0093"]


def _ingest(raw: Path, workspace: Path, pipeline_config, **kwargs) -> dict:
    options = IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, progress=False, **kwargs)
    return run_ingest(options).manifest


def _written_text(workspace: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(workspace.rglob("*")) if p.is_file())


def _tasks(workspace: Path) -> list[dict]:
    return [json.loads(line) for line in (workspace / "tickets/tasks.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def sample_ws(sample_ingest):
    # the shared ingest of the sample input (tests/conftest.py), read only
    return sample_ingest, json.loads((sample_ingest / "tickets/manifest.json").read_text())


def test_sample_counts_and_quarantine(sample_ws):
    workspace, manifest = sample_ws
    counts = manifest["counts"]
    assert counts["tasks"] == len(_tasks(workspace)) == 31
    assert counts["by_status"] == {"escalated": 2, "resolved": 31, "unresolved": 1}
    quarantined = {(q["source"], q.get("line")): q for q in manifest["quarantined"]}
    assert set(quarantined) == {("ecs.jsonl", 6), ("ecs.jsonl", 12), ("domain.jsonl", 3), ("sms.jsonl", 4), ("email.jsonl", 4)}
    assert "duplicate ticket_id" in quarantined[("ecs.jsonl", 12)]["reason"]
    assert "bot" in quarantined[("domain.jsonl", 3)]["reason"]
    assert quarantined[("email.jsonl", 4)]["ticket_id"] == "NC-2025-0093"
    assert sum(manifest["reply_types"].values()) == counts["checkpoints"]
    assert re.fullmatch(r"[0-9a-f]{16}", manifest["config_hash"])


def test_sample_output_holds_no_personal_data_nor_quarantined_or_unresolved_text(sample_ws):
    workspace, _ = sample_ws
    text = _written_text(workspace)
    assert [v for v in PLANTED if v in text] == []
    assert [c for c in CANARIES if c in text] == []
    assert "third time this week our instance" not in text  # NC-2025-0007 is escalated, not resolved


def test_sample_tasks_follow_the_contract(sample_ws):
    workspace, _ = sample_ws
    for raw in _tasks(workspace):
        task = Task.model_validate(raw)
        assert 1 <= len(task.knowledge) <= 5
        assert task.stats.checkpoints == len(task.checkpoints) >= 1
        assert [c.index for c in task.checkpoints] == list(range(1, len(task.checkpoints) + 1))
        assert all(c.reply or c.tool_calls for c in task.checkpoints)
        roles = [m["role"] for m in task.history]
        assert "user" not in roles  # history ends before the first customer turn
        if any(c.tool_calls for c in task.checkpoints) or "tool" in roles:
            assert task.cassette == f"tool_mocks/{cassette_filename(task.task_id)}"
            assert {t["function"]["name"] for t in task.tools} >= {tc.name for c in task.checkpoints for tc in c.tool_calls}
        else:
            assert task.cassette is None and task.tools == []


def test_ticket_with_seven_documents_keeps_the_relevant_five(sample_ws):
    workspace, _ = sample_ws
    task = next(t for t in _tasks(workspace) if t["task_id"] == "NC-2025-0009")
    titles = " ".join(d["title"].lower() for d in task["knowledge"])
    assert len(task["knowledge"]) == 5
    assert "security group" in titles and ("ssh" in titles or "rdp" in titles)


def test_every_recorded_call_replays_and_altered_arguments_are_refused(sample_ws):
    workspace, _ = sample_ws
    replayed = 0
    for task in _tasks(workspace):
        if task["cassette"] is None:
            continue
        # vcrpy's own loader reads the file
        with vcr.VCR(record_mode="none").use_cassette(str(workspace / task["cassette"])) as cassette:
            assert len(cassette.data) >= 1
        replayer = ToolReplayer.for_task(workspace, task)
        calls = [(tc["name"], tc["arguments"]) for c in task["checkpoints"] for tc in c["tool_calls"]]
        for name, arguments in calls:
            replayer.call(name, json.dumps(arguments, indent=3, sort_keys=False))  # a model's JSON string form
            replayed += 1
        name, arguments = calls[0]
        altered = {**arguments, next(iter(arguments)): "not-the-recorded-value"} if arguments else {"x": 1}
        with pytest.raises(NoRecordedResult):
            replayer.call(name, altered)
    assert replayed >= 40


def test_replay_returns_the_recorded_results_in_order(sample_ws):
    workspace, _ = sample_ws
    task = next(t for t in _tasks(workspace) if t["task_id"] == "NC-2025-0001")
    calls = [tc for c in task["checkpoints"] for tc in c["tool_calls"] if tc["name"] == "DescribeInstanceStatus"]
    replayer = ToolReplayer.for_task(workspace, task)
    statuses = [replayer.call(c["name"], c["arguments"])["status"] for c in calls]
    assert statuses[:3] == ["Running", "Starting", "Running"] or len(set(statuses)) > 1


# Temporary files a killed ingest left (ours: a leading dot, ``.tmp``), and one
# that is not ours, in place before the parallel ingest below runs over them
STALE_TEMPS = ("tickets/.tasks.jsonl.k1ll3d.tmp", "tickets/.manifest.json.x.tmp", "tool_mocks/.T-1.yaml.abc.tmp")
NOT_OURS = "tickets/notes.tmp"  # no leading dot


@pytest.fixture(scope="module")
def parallel_ingest(tmp_path_factory, pipeline_config) -> Path:
    """The sample input ingested on two worker processes, into a workspace
    holding what a killed ingest leaves (STALE_TEMPS) and a file of the user's
    (NOT_OURS).  Read only: one ingest for the two tests below."""
    workspace = tmp_path_factory.mktemp("parallel") / "ws"
    for name in (*STALE_TEMPS, NOT_OURS):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("mine" if name == NOT_OURS else "half a line")
    _ingest(SAMPLE_RAW, workspace, pipeline_config, kb_dir=SAMPLE_KB, jobs=2)
    return workspace


def test_parallel_run_writes_the_same_workspace(sample_ws, parallel_ingest):
    workspace, _ = sample_ws
    parallel = parallel_ingest
    assert (parallel / "tickets/tasks.jsonl").read_bytes() == (workspace / "tickets/tasks.jsonl").read_bytes()
    for cassette in (workspace / "tool_mocks").glob("*.yaml"):
        assert (parallel / "tool_mocks" / cassette.name).read_bytes() == cassette.read_bytes()


def _question_tickets(tmp_path: Path, n: int) -> Path:
    """``n`` one-question tickets without tool calls, as a JSONL file."""
    raw = tmp_path / "raw.jsonl"
    raw.write_text("\n".join(json.dumps({"ticket_id": f"T-{i}", "events": [
        {"role": "customer", "text": f"question {i}"}, {"role": "agent", "text": f"answer {i} is 42"}]})
        for i in range(n)) + "\n")
    return raw


def test_a_crash_leaves_the_previous_workspace_intact(tmp_path, pipeline_config, monkeypatch):
    raw = _question_tickets(tmp_path, 5)
    workspace = tmp_path / "ws"
    _ingest(raw, workspace, pipeline_config)
    before = (workspace / "tickets/tasks.jsonl").read_bytes()
    manifest_before = (workspace / "tickets/manifest.json").read_bytes()

    import cirrus.ingest.run as run_module

    calls = {"n": 0}
    real_dumps = json.dumps

    def dumps_then_crash(obj, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("simulated crash")
        return real_dumps(obj, *args, **kwargs)

    monkeypatch.setattr(run_module.json, "dumps", dumps_then_crash)
    with pytest.raises(KeyboardInterrupt):
        _ingest(raw, workspace, pipeline_config)
    monkeypatch.undo()
    assert (workspace / "tickets/tasks.jsonl").read_bytes() == before
    assert (workspace / "tickets/manifest.json").read_bytes() == manifest_before
    assert [p.name for p in (workspace / "tickets").iterdir() if p.name.endswith(".tmp")] == []


def test_a_full_disk_is_a_clear_error_and_keeps_the_previous_workspace(tmp_path, pipeline_config, monkeypatch):
    import errno
    import os

    raw = _question_tickets(tmp_path, 3)
    workspace = tmp_path / "ws"
    _ingest(raw, workspace, pipeline_config)
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    result = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(workspace), "-j", "1", "-q"])
    monkeypatch.undo()
    assert result.exit_code == 1, result.output
    assert "disk full while writing" in result.output and "tasks.jsonl" in result.output
    assert "Traceback" not in result.output
    marker = workspace / "tickets" / ".ingest-in-progress"  # the ingest did not complete: eval refuses until one does
    assert marker.exists()
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file() and p != marker} == before


def test_stale_cassettes_are_removed_and_odd_ids_stay_inside(tmp_path, pipeline_config):
    workspace = tmp_path / "ws"
    (workspace / "tool_mocks").mkdir(parents=True)
    (workspace / "tool_mocks/OLD.yaml").write_text("interactions: []\nversion: 1\n")
    raw = tmp_path / "raw.json.gz"
    with gzip.open(raw, "wt") as handle:
        json.dump([{"ticket_id": "../../evil id", "events": [
            {"role": "customer", "text": "status?"},
            {"role": "tool_call", "call_id": "c1", "name": "Get Status!", "arguments": {"x": 1}},
            {"role": "tool_result", "call_id": "c1", "content": "fine"},
            {"role": "agent", "text": "All systems fine."}]}], handle)
    _ingest(raw, workspace, pipeline_config)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.yaml"))
    assert len(files) == 1 and files[0].startswith("ws/tool_mocks/") and "OLD" not in files[0]
    task = _tasks(workspace)[0]
    assert task["checkpoints"][0]["tool_calls"][0]["name"] == "Get_Status_"
    assert ToolReplayer.for_task(workspace, task).call("Get_Status_", {"x": 1}) == "fine"


def test_temp_files_of_a_killed_ingest_are_cleared_by_the_next(parallel_ingest):
    # the ingest ran over a workspace holding STALE_TEMPS and NOT_OURS (parallel_ingest)
    workspace = parallel_ingest
    stale = [workspace / name for name in STALE_TEMPS]
    keep = workspace / NOT_OURS  # not one of ours: no leading dot
    assert not [p for p in stale if p.exists()]
    assert keep.read_text() == "mine"
    assert not list(workspace.rglob(".*.tmp"))


@needs_shared(TAU_BENCH)
@pytest.mark.xdist_group("tau-bench")  # shares the tau-bench ingest with test_walk
def test_tau_bench_ingest_writes_resolved_transcripts_without_personal_data(tau_bench_ingest):
    # the shared ingest (tests/conftest.py): TAU_BENCH on two worker processes, read only
    workspace, manifest = tau_bench_ingest
    assert manifest["counts"]["tasks"] == 84
    assert manifest["counts"]["by_status"] == {"resolved": 84, "unresolved": 116}
    assert manifest["quarantined"] == [] and manifest["skipped"] == []
    source = json.loads(TAU_BENCH.read_text())
    personal: set[str] = set()

    def collect(value, key=None):
        if isinstance(value, dict):
            for k, v in value.items():
                collect(v, k)
        elif isinstance(value, list):
            for v in value:
                collect(v, key)
        elif isinstance(value, str) and key in ("email", "user_id", "address1"):
            personal.add(value)

    for transcript in source:
        if transcript["reward"] >= 1:
            for message in transcript["traj"]:
                if message["role"] == "tool":
                    try:
                        details = json.loads(message["content"])
                    except json.JSONDecodeError:
                        continue
                    collect(details)
                    if isinstance(details, dict) and isinstance(details.get("name"), dict):
                        personal.add(f'{details["name"]["first_name"]} {details["name"]["last_name"]}')
    text = _written_text(workspace)
    assert len(personal) > 50
    assert sorted(v for v in personal if v in text) == []
    for task in _tasks(workspace):
        replayer = ToolReplayer.for_task(workspace, task)
        for checkpoint in task["checkpoints"]:
            for call in checkpoint["tool_calls"]:
                replayer.call(call["name"], call["arguments"])


def test_cli_ingest_reports_and_exit_codes(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "--help"])
    assert result.exit_code == 0 and "--kb" in result.output and "--annotator-model" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ticket_id": "X"}\nnot json\n')
    result = runner.invoke(app, ["ingest", str(bad), "-w", str(tmp_path / "ws"), "-q", "-j", "1"])
    assert result.exit_code == 1
    manifest = json.loads((tmp_path / "ws/tickets/manifest.json").read_text())
    assert [(q["line"], q["reason"]) for q in manifest["quarantined"]][0] == (1, "missing events")
    assert runner.invoke(app, ["ingest", str(bad), "--format", "csv"]).exit_code == 2
    assert runner.invoke(app, ["ingest", str(tmp_path / "missing")]).exit_code == 2
    result = runner.invoke(app, ["ingest", str(bad), "--pipeline", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2 and "nope.toml" in result.output


def test_the_committed_sample_workspace_is_what_ingest_writes_byte_for_byte(tmp_path, pipeline_config):
    """The README's main job re-ingests tickets/raw into the repository: a
    clone stays clean (same tasks, cassettes and manifest, its creation time
    kept because nothing else changed)."""
    from tests.conftest import REPO

    workspace = tmp_path / "ws"
    for folder in ("tickets", "tool_mocks"):
        shutil.copytree(REPO / folder, workspace / folder)
    committed = {p.relative_to(workspace): p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    _ingest(workspace / "tickets/raw", workspace, pipeline_config, kb_dir=workspace / "tickets/kb", jobs=2)
    written = {p.relative_to(workspace): p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    assert sorted(map(str, written)) == sorted(map(str, committed))
    changed = sorted(str(path) for path in written if written[path] != committed[path])
    assert changed == [], f"re-run `cirrus ingest tickets/raw --kb tickets/kb` and commit: {changed}"


def test_a_changed_ingest_gets_a_new_creation_time(tmp_path, pipeline_config):
    raw = tmp_path / "raw.jsonl"
    ticket = {"ticket_id": "A-1", "events": [{"role": "customer", "text": "My mailbox is full"},
                                             {"role": "agent", "text": "I doubled its quota."}]}
    raw.write_text(json.dumps(ticket) + "\n")
    workspace = tmp_path / "ws"
    _ingest(raw, workspace, pipeline_config)
    manifest_path = workspace / "tickets/manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "created_at": "2020-01-01T00:00:00+00:00"}))
    assert _ingest(raw, workspace, pipeline_config)["created_at"] == "2020-01-01T00:00:00+00:00"
    raw.write_text(json.dumps(ticket) + "\n" + json.dumps({**ticket, "ticket_id": "A-2"}) + "\n")
    assert _ingest(raw, workspace, pipeline_config)["created_at"] != "2020-01-01T00:00:00+00:00"
