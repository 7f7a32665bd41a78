"""Values in disguise (issue 25 item 5, issue 26): detection reads a
normalised view of each text (full-width forms, HTML references, %-escapes,
zero-width characters) and replaces the original characters; HTTP Basic
credentials and passwords on a command line are secrets."""

from __future__ import annotations

import pytest

from cirrus.ingest.deid.normalize import normalised_view
from cirrus.schema import Event, SourceRef, Ticket


def test_a_plain_text_has_no_view():
    assert normalised_view("Call me at +1 415 555 0142, thanks") is None
    assert normalised_view("订单号：12345，谢谢") is None  # Chinese punctuation is not a disguise


@pytest.mark.parametrize("text, plain", [
    ("jane＠example.org", "jane@example.org"),
    ("jane&#64;example.org", "jane@example.org"),
    ("jane&#x40;example.org", "jane@example.org"),
    ("tel%3A%2B14155550142", "tel:+14155550142"),
    ("ja\u200bne@exam\u200dple.org", "jane@example.org"),
    ("电话：１３８００１３８０００", "电话：13800138000"),
])
def test_the_view_and_its_way_back(text, plain):
    view = normalised_view(text)
    assert view is not None and view.text == plain
    start = plain.index("@") if "@" in plain else plain.index("1")
    begin, end = view.original(start, len(plain))
    assert text[end:] == "" and begin <= len(text)  # the span reaches the original's end


def test_a_span_maps_onto_the_original_characters():
    text = "mail: ja\u200bne&#64;example.org now"
    view = normalised_view(text)
    start = view.text.index("jane")
    end = view.text.index(" now")
    assert text[slice(*view.original(start, end))] == "ja\u200bne&#64;example.org"


DISGUISED = [
    "olivia.hartmann＠outlook.com",
    "olivia&#64;hartmann-design.de",
    "oli\u200bvia.hart\u200cmann@gmail.com",
    "olivia.hartmann%40gmail.com",
]


@pytest.mark.parametrize("value", DISGUISED)
def test_disguised_emails_are_replaced_whole(deidentifier, value):
    ticket = Ticket("T-1", [Event("customer", f"my address is {value} please write"),
                            Event("agent", "Thanks, noted.")], SourceRef("t.jsonl", line=1))
    clean, counts = deidentifier.deidentify(ticket)
    text = clean.events[0].text
    assert counts["EMAIL_ADDRESS"] >= 1
    for part in ("hartmann", "outlook", "design", "gmail"):
        assert part not in text.lower(), text
    assert text.startswith("my address is ") and text.endswith(" please write")


@pytest.mark.parametrize("text, secret", [
    ("Authorization: Basic b2xpdmlhOnN1cGVyc2VjcmV0MTIz", "b2xpdmlhOnN1cGVyc2VjcmV0MTIz"),
    ("run: curl -u admin:S3cretPass! https://api.example.com", "S3cretPass!"),
    ("sshpass -p 'hunter2x' ssh root@10.0.0.5", "hunter2x"),
    ("mysql -h db -u app -pW1nter2025 shop", "W1nter2025"),
    ("./deploy --password Tr0ub4dor", "Tr0ub4dor"),
])
def test_credentials_are_secrets(deidentifier, text, secret):
    spans = deidentifier.detect(text)
    assert any(sp.entity == "SECRET" and secret in text[sp.start:sp.end] for sp in spans), spans


@pytest.mark.parametrize("text", [
    "I am on the Basic plan and want to upgrade",
    "Basic troubleshooting steps did not help",
    "The basic QWxhZGRpbg setting",  # base64 of a word without a colon: no credential
])
def test_ordinary_basic_is_not_a_secret(deidentifier, text):
    assert not [sp for sp in deidentifier.detect(text) if sp.entity == "SECRET"]


def test_a_basic_header_inside_tool_arguments_is_masked(deidentifier):
    ticket = Ticket("T-2", [
        Event("customer", "The webhook call fails with 401"),
        Event("tool_call", call_id="c1", name="ReplayWebhook",
              arguments={"headers": {"Authorization": "Basic b2xpdmlhOnN1cGVyc2VjcmV0MTIz"}}),
        Event("tool_result", call_id="c1", content={"status": 401}),
        Event("agent", "The credentials were refused; please rotate them."),
    ], SourceRef("t.jsonl", line=1))
    clean, _ = deidentifier.deidentify(ticket)
    assert "b2xpdmlh" not in str(clean.events[1].arguments)


# -- the status of a ticket that is not processed ------------------------------------


@pytest.mark.parametrize("status, shown", [
    ("pending", "pending"),
    ("on hold", "on hold"),
    ("Waiting on customer", "Waiting on customer"),
    ("pending jane.roe@example.com", "pending (…)"),
    ("escalated to Jane Roe", "escalated to (…)"),
    ("escalated to jane", "escalated to (…)"),
    ("callback +1 415 555 0142", "callback (…)"),
    ("待回访 13800138000", "待回访 (…)"),
])
def test_a_status_is_shown_by_its_status_words(status, shown):
    from cirrus.ingest.deid.ids import status_label

    assert status_label(status) == shown


def test_unresolved_statuses_reach_neither_manifest_nor_terminal(tmp_path, pipeline_config, capsys):
    import json

    from cirrus.ingest.run import IngestOptions, run_ingest

    raw = tmp_path / "raw"
    raw.mkdir()
    events = [{"role": "customer", "text": "My parcel is late, can you check?"},
              {"role": "agent", "text": "It left the warehouse yesterday and arrives on Friday."}]
    tickets = [{"ticket_id": "S-1", "events": events},
               {"ticket_id": "S-2", "status": "pending olivia.hartmann@gmail.com", "events": events},
               {"ticket_id": "S-3", "status": "callback +1 415 555 0142", "events": events}]
    (raw / "t.jsonl").write_text("\n".join(json.dumps(t) for t in tickets) + "\n", encoding="utf-8")
    workspace = tmp_path / "ws"
    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, progress=False))
    manifest = (workspace / "tickets" / "manifest.json").read_text(encoding="utf-8")
    shown = manifest + capsys.readouterr().err
    assert "olivia" not in shown and "555 0142" not in shown
    assert json.loads(manifest)["counts"]["by_status"] == {"callback (…)": 1, "pending (…)": 1, "resolved": 1}
