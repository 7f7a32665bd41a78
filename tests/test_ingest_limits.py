"""A ticket too large to de-identify in reasonable time (issue 22) is
quarantined, unread: ``[limits] max_ticket_chars`` of the pipeline (default
1,000,000 characters of text) or ``cirrus ingest --max-ticket-chars N``.
Its entry names the file, the line and the limit with how to raise it; none
of its text is written; the other tickets of the file are ingested.  Long
texts are parsed by spaCy in bounded groups (memory does not grow with the
ticket), with the same result as one group."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.config import DEFAULT_MAX_TICKET_CHARS, load_pipeline
from cirrus.ingest.deid.deidentify import piece_groups
from cirrus.ingest.pipeline import oversize, ticket_chars
from cirrus.schema import Event, KnowledgeDoc, SourceRef, Ticket

MARKER = "Zebulon Quist"  # a name that appears only in the oversize ticket


def _ticket(ticket_id: str, filler: int = 0) -> dict:
    extra = (" " + f"{MARKER} says the disk is slow again." * (filler // 40 + 1))[:filler] if filler else ""
    return {"ticket_id": ticket_id, "status": "resolved", "events": [
        {"role": "customer", "text": "My instance will not start after the resize, can you check it?" + extra},
        {"role": "agent", "text": "The resize finished; start the instance from the console and it will boot."},
    ]}


def _raw(root: Path, big_chars: int) -> Path:
    path = root / "raw" / "tickets.jsonl"
    path.parent.mkdir(parents=True)
    records = [_ticket("T-1"), _ticket("T-BIG", big_chars), _ticket("T-3")]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _ingest(raw: Path, workspace: Path, *extra: str):
    return CliRunner().invoke(app, ["ingest", str(raw), "-w", str(workspace), "-j", "1", "-q", *extra])


def _written(workspace: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in workspace.rglob("*") if p.is_file())


def _check_quarantined(workspace: Path, limit: int) -> dict:
    manifest = json.loads((workspace / "tickets/manifest.json").read_text())
    assert manifest["counts"]["tasks"] == 2 and manifest["counts"]["quarantined"] == 1
    tasks = [json.loads(line)["task_id"] for line in (workspace / "tickets/tasks.jsonl").read_text().splitlines()]
    assert tasks == ["T-1", "T-3"]  # the others of the same file are ingested
    entry = manifest["quarantined"][0]
    assert entry["source"] == "tickets.jsonl" and entry["line"] == 2
    assert entry["reason"].startswith("ticket too large: ")
    assert f"over the limit of {limit:,}" in entry["reason"] and "--max-ticket-chars" in entry["reason"]
    assert MARKER not in _written(workspace)  # no text of it anywhere
    return manifest


def test_a_ticket_over_the_default_limit_is_quarantined_and_the_others_ingested(tmp_path):
    raw = _raw(tmp_path, DEFAULT_MAX_TICKET_CHARS + 1_000)
    result = _ingest(raw, tmp_path / "ws")
    assert result.exit_code == 0, result.output
    _check_quarantined(tmp_path / "ws", DEFAULT_MAX_TICKET_CHARS)
    assert "tickets.jsonl:2: ticket too large" in " ".join(result.output.split())


def test_the_limit_is_an_option_and_a_pipeline_setting(tmp_path):
    raw = _raw(tmp_path, 3_000)
    result = _ingest(raw, tmp_path / "ws", "--max-ticket-chars", "2000")
    assert result.exit_code == 0, result.output
    manifest = _check_quarantined(tmp_path / "ws", 2_000)
    # the same limit from a pipeline file: the same workspace
    pipeline = tmp_path / "pipelines" / "default.toml"  # same name: the config hash names the pipeline
    pipeline.parent.mkdir()
    default = (Path(__file__).resolve().parents[1] / "pipelines/default.toml").read_text(encoding="utf-8")
    pipeline.write_text(default.replace("max_ticket_chars = 1_000_000", "max_ticket_chars = 2_000"), encoding="utf-8")
    result = _ingest(raw, tmp_path / "ws2", "--pipeline", str(pipeline))
    assert result.exit_code == 0, result.output
    assert _check_quarantined(tmp_path / "ws2", 2_000)["config_hash"] == manifest["config_hash"]
    # under the default limit it is ingested like any other
    result = _ingest(raw, tmp_path / "ws3")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "ws3/tickets/manifest.json").read_text())["counts"]["tasks"] == 3


def test_a_limit_that_is_not_the_default_joins_the_config_hash():
    config = load_pipeline()
    assert config.limits.max_ticket_chars == DEFAULT_MAX_TICKET_CHARS
    assert config.with_max_ticket_chars(DEFAULT_MAX_TICKET_CHARS).config_hash() == config.config_hash()
    assert config.with_max_ticket_chars(5_000).config_hash() != config.config_hash()


def test_every_text_of_a_ticket_counts():
    events = [Event("customer", "abcd", ocr=["ef"]), Event("tool_call", name="Get", arguments={"key": "12345"}),
              Event("tool_result", content=[{"n": 1234567}, True, None])]
    ticket = Ticket("T-1", events, SourceRef("x.jsonl", line=1), knowledge=[KnowledgeDoc("d", "tt", "body")])
    # T-1 resolved, abcd ef, Get, key 12345, n 1234567, d tt body
    assert ticket_chars(ticket) == 3 + 8 + 6 + 3 + 8 + 8 + 7
    assert oversize(ticket, 43) is None
    entry = oversize(ticket, 42)
    assert entry is not None and entry.origin == ticket.origin and entry.ticket_id == "T-1"
    assert entry.reason.startswith("ticket too large: 43 characters of text, over the limit of 42")


def test_long_texts_are_parsed_in_bounded_groups():
    pieces = [("x" * 30, (), True)] * 7 + [("y" * 500, (), True), ("z", (), False)]
    groups = list(piece_groups(pieces, limit=100))
    assert [len(g) for g in groups] == [3, 3, 1, 1, 1]  # a piece over the limit stands alone
    assert [p for g in groups for p in g] == pieces
    assert len(list(piece_groups(pieces[:3], limit=100))) == 1  # an ordinary ticket: one group, as before
