"""Personal data in identifiers and metadata (issue: privacy you can prove).

Ticket ids, categories, channels, knowledge doc ids, tool names and JSON
object keys at any depth are de-identified like message text; an id that
holds personal data becomes a stable pseudonym, and the cassette's file name
derives from the written id only; a quarantined ticket's id is shown only
when it reads as a code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.ingest.deid.ids import ID_SALT_ENV, looks_like_code, pseudonymous_id, quarantine_id

EMAIL, OTHER_EMAIL, PHONE = "jane.roe@example-mail.com", "keyholder.one@example-mail.com", "14155550142"
PLANTED = ("jane.roe", "example-mail", "keyholder", "4155550142", "555 0142", "555-0142")


@pytest.mark.parametrize(("ticket_id", "code"), [
    ("NC-2025-0001", True), ("conv-81", True), ("12-3", True), ("5520", True), ("3f2a9c1e-77b0", True),
    ("ABC_DEF:77", False), ("ticket-ab12", True),
    (f"case-{EMAIL}", False), (f"cb-{PHONE}", False), ("jane.roe-17", False), ("crystal minh", False),
    ("x" * 65, False), ("", False),
])
def test_which_ids_read_as_codes(ticket_id, code):
    assert looks_like_code(ticket_id) is code
    assert (quarantine_id(ticket_id) == ticket_id) is code


def test_pseudonyms_are_stable_and_salted(monkeypatch):
    monkeypatch.delenv(ID_SALT_ENV, raising=False)
    plain = pseudonymous_id(EMAIL)
    assert plain == pseudonymous_id(EMAIL) and re.fullmatch(r"t-[0-9a-f]{16}", plain)
    assert plain != pseudonymous_id(OTHER_EMAIL)
    monkeypatch.setenv(ID_SALT_ENV, "a secret kept by the team")
    assert pseudonymous_id(EMAIL) != plain
    assert quarantine_id(None) is None


def _ticket(ticket_id: str) -> dict:
    return {
        "ticket_id": ticket_id, "category": f"billing +1 415 555 0142", "channel": f"mail {OTHER_EMAIL}",
        "knowledge": [{"doc_id": f"kb-{OTHER_EMAIL}", "title": "Refunds", "text": "Refunds take 3 days."}],
        "events": [
            {"role": "customer", "text": "My instance is down, please check it."},
            {"role": "tool_call", "call_id": "c1", "name": f"callback__{PHONE}",
             "arguments": {OTHER_EMAIL: 1, "nested": [{EMAIL: {"deeper": {f"+1 415 555 0142": "x"}}}]}},
            {"role": "tool_result", "call_id": "c1", "content": {EMAIL: "ok", EMAIL.upper(): "twice"}},
            {"role": "agent", "text": "It is running again."}]}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ids")
    raw = root / "raw.jsonl"
    bad = {"ticket_id": f"broken-{EMAIL}", "events": [{"role": "robot", "text": "x"}]}
    raw.write_text("\n".join(json.dumps(t) for t in (_ticket(f"case-{EMAIL}"), bad)) + "\n")
    workspace = root / "ws"
    result = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(workspace), "-j", "1"])
    assert result.exit_code == 0, result.output
    (workspace / "terminal.txt").write_text(result.output)
    return workspace


def test_nothing_planted_survives_in_any_file_or_file_name(ingested):
    for path in ingested.rglob("*"):
        name = str(path.relative_to(ingested)).lower()
        text = path.read_text(encoding="utf-8").lower() if path.is_file() else ""
        for planted in PLANTED:
            assert planted not in name, f"{planted!r} in the file name {name}"
            assert planted not in text, f"{planted!r} in {name}"


def test_the_id_is_a_pseudonym_and_names_the_cassette(ingested):
    task = json.loads((ingested / "tickets/tasks.jsonl").read_text())
    assert task["task_id"] == pseudonymous_id(f"case-{EMAIL}")
    assert task["cassette"] == f"tool_mocks/{task['task_id']}.yaml" and (ingested / task["cassette"]).is_file()
    manifest = json.loads((ingested / "tickets/manifest.json").read_text())
    assert [q["ticket_id"] for q in manifest["quarantined"]] == [pseudonymous_id(f"broken-{EMAIL}")]


def test_tool_names_stay_valid_and_keys_stay_distinct(ingested):
    from cirrus.replay import ToolReplayer

    task = json.loads((ingested / "tickets/tasks.jsonl").read_text())
    name = task["tools"][0]["function"]["name"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) and name.startswith("callback__")
    call = task["checkpoints"][0]["tool_calls"][0]
    assert call["name"] == name
    assert len(call["arguments"]) == 2 and "nested" in call["arguments"]  # keys masked, none lost
    result = ToolReplayer.for_task(ingested, task).call(name, call["arguments"])
    assert len(result) == 2 and sorted(result.values()) == ["ok", "twice"]


def test_two_keys_masked_alike_stay_two_keys():
    from cirrus.ingest.deid.deidentify import _TicketRewriter

    class Rewriter(_TicketRewriter):
        def __init__(self):  # only the key logic: every key masks to the same text
            pass

        def text(self, text):
            return "k***"

    taken: dict = {}
    for key in ("a-key", "b-key", "c-key"):
        taken[Rewriter().key(key, taken)] = 1
    assert list(taken) == ["k***", "k***~2", "k***~3"]


def test_metadata_is_masked_not_dropped(ingested):
    task = json.loads((ingested / "tickets/tasks.jsonl").read_text())
    assert task["category"].startswith("billing +1 ") and "*" in task["category"]
    assert task["channel"].startswith("mail ") and "***@" in task["channel"]
