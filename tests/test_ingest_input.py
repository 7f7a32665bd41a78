"""What ``cirrus ingest`` does with input it cannot use, role names in any
case, the line that announces the model load, and Ctrl-C.

- A folder (tree) without a single .json/.jsonl(.gz) file, an empty folder,
  or a file with another extension is a usage error (exit 2) that names what
  was found, raised before any model loads and before the workspace changes.
- Event and message roles match case-insensitively ("Agent", "TOOL_CALL",
  "User"); unknown roles are still quarantined with file, line and reason.
- "loading the de-identification models ..." reaches stderr once, before the
  load starts (checked by the order of events, not by timing).
- Ctrl-C (SIGINT to the whole process group, as a terminal sends it) ends
  ingest with one line and exit 130: no worker traceback, no orphaned worker,
  the workspace marked unfinished, and a re-run gives the uninterrupted result.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.ingest import pipeline as pipeline_module
from cirrus.ingest import run as run_module
from cirrus.ingest.readers import abcd, native, openai_chat, read_tickets
from cirrus.ingest.readers.files import NoTicketFiles, check_input
from cirrus.ingest.run import IngestOptions, run_ingest
from cirrus.schema import Quarantined, SourceRef, Ticket
from tests._cli_here import cli_here
from tests._ingest_speed_subset import LARGE, SampleSubset, sample_subset
from tests.conftest import REPO, SAMPLE_RAW, workspace_snapshot


@pytest.fixture(autouse=True)
def _python_sigint_handler():
    """Python's own Ctrl-C handler while each test runs, whatever an earlier
    test in this process installed (ray.init installs its own)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)

LOADING = "loading the de-identification models (spaCy "
RESUME = "interrupted: ingest did not finish; run the same command again (eval refuses this workspace until then)"


def _ticket(ticket_id: str, status: str = "resolved", **roles: str) -> dict:
    customer, agent = roles.get("customer", "customer"), roles.get("agent", "agent")
    return {"ticket_id": ticket_id, "status": status, "events": [
        {"role": customer, "text": "My instance will not start after the resize, can you check it?"},
        {"role": agent, "text": "The resize finished; start the instance from the console and it will boot."},
    ]}


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def no_model_loading(monkeypatch):
    """Any attempt to build the de-identification engine fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the de-identification models were loaded")

    monkeypatch.setattr(pipeline_module.TicketProcessor, "__init__", refuse)
    monkeypatch.setattr("cirrus.ingest.deid.deidentify.build_analyzer", refuse)


# --------------------------------------------------------------------------
# 1. nothing to read is a usage error
# --------------------------------------------------------------------------


def _ingest_cli(raw: Path, workspace: Path, *extra: str):
    return CliRunner().invoke(app, ["ingest", str(raw), "-w", str(workspace), "-j", "1", *extra])


def test_an_empty_folder_is_a_usage_error(tmp_path, no_model_loading):
    raw = tmp_path / "raw"
    raw.mkdir()
    result = _ingest_cli(raw, tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert f"{raw}{os.sep} is empty" in result.output
    assert "quarantined" not in result.output and LOADING not in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "ws").exists()  # nothing written, not even the folders


def test_a_folder_of_empty_folders_is_empty_too(tmp_path, no_model_loading):
    (tmp_path / "raw" / "2024" / "03").mkdir(parents=True)
    result = _ingest_cli(tmp_path / "raw", tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert "is empty (only 2 empty folders)" in result.output


def test_a_tree_without_ticket_files_names_what_it_found(tmp_path, no_model_loading, sample_ingest_copy):
    raw = tmp_path / "raw"
    (raw / "march").mkdir(parents=True)
    (raw / "notes.txt").write_text("not tickets")
    (raw / "march" / "export.TXT").write_text("not tickets either")
    (raw / "march" / "tickets.csv").write_text("id,text\n1,hello\n")
    workspace = sample_ingest_copy  # an existing workspace: must stay exactly as it was
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    result = _ingest_cli(raw, workspace)
    assert result.exit_code == 2, result.output
    assert f"no .json, .jsonl, .json.gz or .jsonl.gz files under {raw}{os.sep} (found 2 .txt, 1 .csv)" in result.output
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before
    assert not (workspace / "tickets" / ".ingest-in-progress").exists()


def test_a_single_file_of_another_kind_is_a_usage_error(tmp_path, no_model_loading):
    raw = tmp_path / "tickets.csv"
    raw.write_text("id,text\n1,hello\n")
    result = _ingest_cli(raw, tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert f"{raw} is not a .json, .jsonl, .json.gz or .jsonl.gz file (a .csv file)" in result.output
    assert not (tmp_path / "ws").exists()


def test_the_library_raises_before_touching_the_workspace(tmp_path, pipeline_config, no_model_loading):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_text("x")
    with pytest.raises(NoTicketFiles, match=r"found 1 \.txt"):
        run_ingest(IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config, progress=False))
    assert not (tmp_path / "ws").exists()


def test_one_ticket_file_anywhere_in_the_tree_is_enough(tmp_path):
    raw = tmp_path / "raw"
    (raw / "a" / "b").mkdir(parents=True)
    (raw / "notes.txt").write_text("x")
    with gzip.open(raw / "a" / "b" / "T.JSONL.GZ", "wt") as handle:  # extensions in any case
        handle.write(json.dumps(_ticket("T-1")) + "\n")
    check_input(raw)  # no error
    check_input(raw / "a" / "b" / "T.JSONL.GZ")


def test_what_a_tree_without_ticket_files_holds_is_counted(tmp_path):
    raw = tmp_path / "raw"
    (raw / "sub").mkdir(parents=True)
    for name in ("a.csv.gz", "b.csv.gz", "c.tar.gz", "README", ".DS_Store", "sub/d.Csv"):
        (raw / name).write_text("x")
    (raw / "linked").symlink_to(tmp_path, target_is_directory=True)  # would loop: never followed
    (raw / "gone.json").symlink_to(tmp_path / "missing.json")  # broken: not a ticket file
    with pytest.raises(NoTicketFiles) as caught:
        check_input(raw)
    assert str(caught.value) == (
        f"no .json, .jsonl, .json.gz or .jsonl.gz files under {raw}{os.sep} (found 2 .csv.gz, 2 without extension, "
        "1 .csv, 1 .tar.gz, 1 symlinked folder (not followed), 1 other entry "
        "(unreadable folders, broken or looping links, special files))")


def _awkward_tree(tmp_path: Path, monkeypatch) -> Path:
    """A raw tree with one good ticket file and every kind of path that cannot
    be read: a link that points at itself, two links in a circle, a broken
    link, a folder link that would loop, and a folder that cannot be listed
    (refused by a patched ``os.scandir``: the tests run as root, whom
    permissions do not stop)."""
    raw = tmp_path / "raw"
    _write_jsonl(raw / "b" / "good.jsonl", [_ticket("T-1")])
    (raw / "a-self.jsonl").symlink_to(raw / "a-self.jsonl")
    (raw / "c1.json").symlink_to(raw / "c2.json")
    (raw / "c2.json").symlink_to(raw / "c1.json")
    (raw / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    (raw / "b" / "up").symlink_to(raw, target_is_directory=True)
    (raw / "locked").mkdir()
    _write_jsonl(raw / "locked" / "hidden.jsonl", [_ticket("T-2")])
    real_scandir = os.scandir

    def scandir(path):
        if Path(path) == raw / "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("cirrus.ingest.readers.files.os.scandir", scandir)
    return raw


def test_unreadable_paths_are_skipped_with_a_reason_in_order(tmp_path, monkeypatch):
    from cirrus.ingest.readers.files import iter_raw_records

    raw = _awkward_tree(tmp_path, monkeypatch)
    check_input(raw)  # a usable tree: no error
    records = [(r.origin.describe(), r.error) for r in iter_raw_records(raw)]
    assert [where for where, _ in records] == ["a-self.jsonl", "b/good.jsonl:1", "c1.json", "c2.json",
                                               "gone.jsonl", "locked/"]
    reasons = dict(records)
    assert reasons["b/good.jsonl:1"] is None
    assert "symbolic links" in reasons["a-self.jsonl"] and "skipped" in reasons["c1.json"]
    assert reasons["gone.jsonl"] == "broken symbolic link; skipped"
    assert reasons["locked/"] == "unreadable folder (PermissionError: Permission denied); skipped"


def test_an_ingest_over_unreadable_paths_finishes_and_lists_them(tmp_path, monkeypatch):
    raw = _awkward_tree(tmp_path, monkeypatch)
    workspace = tmp_path / "ws"
    result = _ingest_cli(raw, workspace, "-q")
    assert result.exit_code == 0, result.output
    manifest = json.loads((workspace / "tickets" / "manifest.json").read_text())
    assert manifest["counts"]["tasks"] == 1
    assert [entry["source"] for entry in manifest["quarantined"]] == ["a-self.jsonl", "c1.json", "c2.json",
                                                                      "gone.jsonl", "locked/"]
    assert all(entry["reason"].endswith("skipped") for entry in manifest["quarantined"])
    assert not (workspace / "tickets" / ".ingest-in-progress").exists()


def test_ticket_files_without_a_ticket_exit_1_saying_so(tmp_path, no_model_loading):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "blank.jsonl").write_text("\n\n")
    (raw / "none.json").write_text("[]")
    result = _ingest_cli(raw, tmp_path / "ws", "-q")
    assert result.exit_code == 1, result.output
    assert f"no task was written: {raw} holds no ticket" in result.output


def test_tickets_of_other_statuses_exit_1_saying_so(tmp_path, no_model_loading):
    raw = _write_jsonl(tmp_path / "raw.jsonl", [_ticket("T-1", "open"), _ticket("T-2", "pending")])
    result = _ingest_cli(raw, tmp_path / "ws", "-q")
    assert result.exit_code == 1, result.output
    said = "of 2 tickets read, 0 were quarantined, 0 skipped and 2 not of the statuses ingested (resolved"
    assert said in result.output


# --------------------------------------------------------------------------
# 2. roles in any case
# --------------------------------------------------------------------------


def test_native_roles_match_in_any_case():
    payload = {"ticket_id": "T-1", "events": [
        {"role": "Customer", "text": "hi"},
        {"role": " AGENT ", "text": "hello"},
        {"role": "TOOL_CALL", "call_id": "c1", "name": "f", "arguments": {"x": 1}},
        {"role": "Tool_Result", "call_id": "c1", "content": {"ok": True}},
        {"role": "Agent", "text": "done"},
        {"role": "System", "text": "rated"},
    ]}
    ticket = native.parse(payload, SourceRef("t.jsonl", line=1))
    assert [e.role for e in ticket.events] == ["customer", "agent", "tool_call", "tool_result", "agent", "system"]
    assert ticket.events[3].call_id == ticket.events[2].call_id == "c1"


def test_openai_roles_match_in_any_case():
    payload = {"id": 7, "messages": [
        {"role": "System", "content": "Policy: refunds within 30 days."},
        {"role": "User", "content": "Refund order 12?"},
        {"role": "ASSISTANT", "content": None,
         "tool_calls": [{"id": "k", "function": {"name": "refund", "arguments": "{\"order\": 12}"}}]},
        {"role": " tool", "tool_call_id": "k", "content": "{\"ok\": true}"},
        {"role": "Assistant", "content": "Refunded."},
        {"role": "Developer", "content": "transferred"},
    ]}
    ticket = openai_chat.parse(payload, SourceRef("t.json", item=1))
    assert [e.role for e in ticket.events] == ["customer", "tool_call", "tool_result", "agent", "system"]
    assert [d.doc_id for d in ticket.knowledge] == ["7-system"]  # "System" is still the system prompt


def test_abcd_speakers_match_in_any_case():
    payload = {"convo_id": 5, "original": [["Customer", "hi"], ["Agent", "hello"]], "delexed": []}
    assert [e.role for e in abcd.parse(payload, SourceRef("a.json", item=1)).events] == ["customer", "agent"]


def test_unknown_roles_are_still_quarantined_with_file_line_and_reason(tmp_path):
    secret = "Ask Jane Roe at jane.roe@example.com"
    raw = _write_jsonl(tmp_path / "raw" / "mixed.jsonl", [
        _ticket("T-1", customer="Customer", agent="Agent"),
        {"ticket_id": "T-2", "events": [{"role": "customer", "text": "hi"}, {"role": "Bot", "text": "hello"}]},
        {"ticket_id": "T-3", "events": [{"role": secret, "text": "hello"}]},
        {"id": "T-4", "messages": [{"role": "User", "content": "hi"}, {"role": "Function", "content": "x"}]},
    ])
    results = list(read_tickets(raw.parent))
    assert isinstance(results[0], Ticket) and [e.role for e in results[0].events] == ["customer", "agent"]
    where = {"source": "mixed.jsonl"}
    assert [r.to_manifest() for r in results[1:] if isinstance(r, Quarantined)] == [
        {**where, "line": 2, "ticket_id": "T-2", "reason": "events[1]: unknown role 'Bot'"},
        {**where, "line": 3, "ticket_id": "T-3", "reason": "events[0]: unknown role (a str, not shown)"},
        {**where, "line": 4, "ticket_id": "T-4", "reason": "messages[1]: unknown role 'Function'"},
    ]


# --------------------------------------------------------------------------
# 3. the model load is announced before it starts
# --------------------------------------------------------------------------


class _FakeProcessor:
    def __call__(self, ticket):
        return pipeline_module.Skipped(ticket.origin, ticket.ticket_id, "fake")


@pytest.fixture
def load_log(tmp_path, monkeypatch):
    """Record, on the system-wide monotonic clock, when the announcement was
    written (after its flush) and when each processor (in any process) started
    loading; the processors are fakes, so nothing heavy loads."""
    loads = tmp_path / "loads.txt"
    said: list[int] = []
    real_say = run_module._say

    def say(line):
        real_say(line)
        said.append(time.monotonic_ns())

    def factory_call(self):
        with open(loads, "a") as handle:  # from a worker process too (fork)
            handle.write(f"{time.monotonic_ns()}\n")
        return _FakeProcessor()

    monkeypatch.setattr(run_module, "_say", say)
    monkeypatch.setattr(pipeline_module.ProcessorFactory, "__call__", factory_call)
    return said, lambda: [int(x) for x in loads.read_text().split()] if loads.exists() else []


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_loading_line_is_printed_once_before_the_load(tmp_path, pipeline_config, load_log, capfd, jobs):
    said, loads = load_log
    raw = _write_jsonl(tmp_path / "raw.jsonl", [_ticket(f"T-{n}") for n in range(40)])
    run_ingest(IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config, jobs=jobs))
    err = capfd.readouterr().err
    assert err.count(LOADING) == 1
    assert f"{LOADING}{pipeline_config.deid.spacy_model}, Presidio)" in err
    assert len(said) == 1 and loads()
    assert said[0] < min(loads())  # written and flushed before any process started loading


def test_no_loading_line_when_nothing_needs_the_models(tmp_path, pipeline_config, load_log, capfd):
    said, loads = load_log
    raw = _write_jsonl(tmp_path / "raw.jsonl", [_ticket("T-1", "open"), {"ticket_id": "T-2"}])
    run_ingest(IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config, jobs=2))
    assert LOADING not in capfd.readouterr().err
    assert said == [] and loads() == []


def test_quiet_prints_no_loading_line(tmp_path, pipeline_config, load_log, capfd):
    said, loads = load_log
    raw = _write_jsonl(tmp_path / "raw.jsonl", [_ticket("T-1")])
    run_ingest(IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config, progress=False))
    assert LOADING not in capfd.readouterr().err
    assert said == [] and len(loads()) == 1


def test_capitalised_roles_become_tasks_end_to_end(tmp_path):
    """The real command, real models: the announcement, and role case."""
    raw = _write_jsonl(tmp_path / "raw" / "export.jsonl", [
        _ticket("T-1", customer="Customer", agent="Agent"),
        {"id": "T-2", "messages": [{"role": "System", "content": "Be brief."},
                                   {"role": "User", "content": "How do I reset my password?"},
                                   {"role": "Assistant", "content": "Use Reset Password in the console."}]},
        {"ticket_id": "T-3", "events": [{"role": "customer", "text": "Call Jane Roe"}, {"role": "Bot", "text": "ok"}]},
    ])
    workspace = tmp_path / "ws"
    result = subprocess.run([sys.executable, "-m", "cirrus.cli", "ingest", str(raw.parent), "-w", str(workspace),
                             "-j", "1"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(LOADING) == 1
    manifest = json.loads((workspace / "tickets" / "manifest.json").read_text())
    assert manifest["counts"]["tasks"] == 2
    assert manifest["quarantined"] == [
        {"source": "export.jsonl", "line": 3, "ticket_id": "T-3", "reason": "events[1]: unknown role 'Bot'"}]
    written = "".join(p.read_text() for p in workspace.rglob("*") if p.is_file())
    assert "Jane Roe" not in written + result.stdout + result.stderr


# --------------------------------------------------------------------------
# 4. Ctrl-C
# --------------------------------------------------------------------------


def _signal_state(ticket):
    """A fake processor that reports how its process treats SIGINT."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    state = f"{os.getpid()} ignored={ignored} blocked={blocked}"
    return pipeline_module.Skipped(ticket.origin, ticket.ticket_id, state)


def test_pool_workers_ignore_sigint_and_the_main_process_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_module.ProcessorFactory, "__call__", lambda self: _signal_state)
    handler = signal.getsignal(signal.SIGINT)
    tickets = [Ticket(ticket_id=f"T-{n}", events=[], origin=SourceRef("t.jsonl", line=n + 1)) for n in range(64)]
    factory = pipeline_module.ProcessorFactory(config=None)  # type: ignore[arg-type]  # never built: faked
    outcomes = list(pipeline_module.local_outcomes(tickets, factory, ["resolved"], jobs=2))
    assert [o.ticket_id for o in outcomes] == [t.ticket_id for t in tickets]
    states = {o.result.reason for o in outcomes}
    assert all(state.endswith(" ignored=True blocked=False") for state in states), states
    assert str(os.getpid()) not in {state.split()[0] for state in states}  # all ran in workers
    # the main process still handles Ctrl-C, with SIGINT not left blocked
    assert signal.getsignal(signal.SIGINT) is handler is signal.default_int_handler
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_an_interrupt_shuts_the_pool_down_and_leaves_the_workspace_unfinished(tmp_path, pipeline_config, monkeypatch):
    import multiprocessing

    monkeypatch.setattr(pipeline_module.ProcessorFactory, "__call__", lambda self: _FakeProcessor())
    real_tqdm = run_module.tqdm

    updates = []

    class InterruptedBar(real_tqdm):
        def update(self, n=1):
            updates.append(n)
            if len(updates) > 5:
                raise KeyboardInterrupt  # as if Ctrl-C landed in the main process here
            return super().update(n)

    monkeypatch.setattr(run_module, "tqdm", InterruptedBar)
    raw = _write_jsonl(tmp_path / "raw.jsonl", [_ticket(f"T-{n}") for n in range(200)])
    workspace = tmp_path / "ws"
    with pytest.raises(KeyboardInterrupt):
        run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, jobs=2,
                                 progress=False))
    assert multiprocessing.active_children() == []  # the pool is gone before the interrupt leaves run_ingest
    assert (workspace / "tickets" / ".ingest-in-progress").exists()
    assert not (workspace / "tickets" / "tasks.jsonl").exists()
    assert not list(workspace.rglob("*.tmp"))


class _CtrlCDuringGarbageCollection:
    """Python swallows a KeyboardInterrupt raised in ``__del__`` (it prints
    "Exception ignored in ..." and goes on): the place a real Ctrl-C lands
    whenever the garbage collector happens to run at that moment."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs here, inside __del__
            pass


def test_a_ctrl_c_swallowed_by_a_destructor_still_stops_the_ingest(tmp_path, pipeline_config, monkeypatch, capfd):
    seen = []

    def process(ticket):
        seen.append(ticket.ticket_id)
        if len(seen) == 3:
            _CtrlCDuringGarbageCollection()  # dropped at once: __del__ runs
        return pipeline_module.Skipped(ticket.origin, ticket.ticket_id, "fake")

    monkeypatch.setattr(pipeline_module.ProcessorFactory, "__call__", lambda self: process)
    raw = _write_jsonl(tmp_path / "raw.jsonl", [_ticket(f"T-{n}") for n in range(50)])
    workspace = tmp_path / "ws"
    with pytest.raises(KeyboardInterrupt):
        run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, jobs=1,
                                 progress=False))
    assert len(seen) < 50  # stopped, not run to the end
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handed back
    assert (workspace / "tickets" / ".ingest-in-progress").exists()
    assert not (workspace / "tickets" / "tasks.jsonl").exists()


def _ingest_args(subset: SampleSubset, workspace: Path) -> list[str]:
    return ["ingest", str(subset.raw), "--kb", str(subset.kb), "-w", str(workspace), "--jobs", "2"]


def _ingest_command(subset: SampleSubset, workspace: Path) -> list[str]:
    return [sys.executable, "-m", "cirrus.cli", *_ingest_args(subset, workspace)]


@pytest.fixture(scope="module")
def sample_part(tmp_path_factory, pipeline_config) -> SampleSubset:
    """Part of the sample tickets (tests/_ingest_speed_subset.py: 22 tickets,
    three chunks of work for two workers, so an ingest still runs after its
    first cassette) and what an uninterrupted ingest of it writes."""
    return sample_subset(tmp_path_factory, pipeline_config, LARGE)


class _Ingest:
    """``cirrus ingest`` of (part of) the sample tickets on two workers, in
    its own process group (so a signal reaches it and its workers, as from a
    terminal), its stderr gathered as it comes."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)
        self.stderr = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while chunk := self.process.stderr.read1(65536):
            self.stderr.extend(chunk)

    def wait_for(self, condition, what: str, deadline_s: float = 240) -> None:
        deadline = time.monotonic() + deadline_s
        while not condition():
            assert self.process.poll() is None, f"the ingest ended before {what}: {self.stderr.decode()}"
            assert time.monotonic() < deadline, f"no {what} within {deadline_s} s: {self.stderr.decode()}"
            time.sleep(0.02)

    def interrupt(self) -> tuple[int, str]:
        os.killpg(self.process.pid, signal.SIGINT)  # main process and workers, like Ctrl-C
        code = self.process.wait(timeout=120)
        self._reader.join(timeout=30)
        return code, self.stderr.decode(errors="replace")

    def group_gone(self) -> bool:
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return True
        return False

    def kill(self) -> None:
        if not self.group_gone():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def _cassettes(workspace: Path) -> int:
    return len(list((workspace / "tool_mocks").glob("*.yaml"))) if (workspace / "tool_mocks").is_dir() else 0


# when: while the workers load the models (the announcement is out), and
# once they process tickets (the first cassette is written)
SIGNALS = {
    "loading": lambda ingest, workspace: LOADING.encode() in ingest.stderr,
    "processing": lambda ingest, workspace: _cassettes(workspace) >= 1,
}


@pytest.mark.parametrize("point", list(SIGNALS))
def test_ctrl_c_stops_ingest_cleanly(tmp_path, point, sample_part):
    workspace = tmp_path / "ws"
    ingest = _Ingest(_ingest_command(sample_part, workspace))
    try:
        ingest.wait_for(lambda: SIGNALS[point](ingest, workspace), f"sign of {point}")
        code, stderr = ingest.interrupt()
        deadline = time.monotonic() + 30
        while not ingest.group_gone() and time.monotonic() < deadline:  # no orphaned worker
            time.sleep(0.05)
        assert ingest.group_gone(), "a worker process outlived the interrupted ingest"
    finally:
        ingest.kill()
    assert code == 130, stderr
    assert "Traceback" not in stderr and "ForkPoolWorker" not in stderr and "KeyboardInterrupt" not in stderr
    assert stderr.count(RESUME) == 1
    assert stderr.rstrip().endswith(RESUME)
    assert (workspace / "tickets" / ".ingest-in-progress").exists()  # eval refuses the workspace
    assert not (workspace / "tickets" / "tasks.jsonl").exists()
    assert not list(workspace.rglob("*.tmp"))
    if point == "processing":  # cassettes were written: the same command again completes the workspace
        # (run in this process, tests/_cli_here.py: the interrupted run above was the real child process)
        rerun = cli_here([*_ingest_args(sample_part, workspace), "-q"])
        assert rerun.returncode == 0, rerun.stderr
        assert workspace_snapshot(workspace) == sample_part.uninterrupted


def test_an_interrupt_while_a_cassette_is_written_leaves_no_temporary_file(tmp_path, pipeline_config, monkeypatch):
    import tempfile

    def interrupted_write(path, cassette):  # Ctrl-C after the temporary file exists, before its own clean-up
        tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "write_cassette", interrupted_write)
    workspace = tmp_path / "ws"
    with pytest.raises(KeyboardInterrupt):
        run_ingest(IngestOptions(raw_path=SAMPLE_RAW / "billing.json", workspace=workspace, pipeline=pipeline_config,
                                 jobs=1, progress=False))
    assert not list(workspace.rglob("*.tmp"))
    assert (workspace / "tickets" / ".ingest-in-progress").exists()
