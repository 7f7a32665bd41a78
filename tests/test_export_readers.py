"""Helpdesk export readers (issue 25, item 6): Zendesk, Intercom, Freshdesk,
Salesforce and Meiqia (美洽) records are detected per record, read into
events with the right roles, and never turn an internal note or a bot into
an agent's reply; whole-export files are split into records; a record no
reader knows is quarantined with a reason that names the formats read and
docs/input-formats.md.

The samples under tests/data/exports/ are synthetic, written after each
vendor's public API reference (docs/input-formats.md says which page).
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cirrus.ingest import readers
from cirrus.ingest.readers import READERS, freshdesk, intercom, meiqia, read_tickets, salesforce, zendesk
from cirrus.ingest.readers.envelopes import envelope_of
from cirrus.ingest.readers.files import iter_raw_records
from cirrus.ingest.readers.html_text import html_to_text, looks_like_html
from cirrus.schema import Quarantined, SourceRef, Ticket, TicketError

EXPORTS = Path(__file__).parent / "data" / "exports"
VENDORS = ("zendesk", "intercom", "freshdesk", "salesforce", "meiqia")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "input-formats.md"
ORIGIN = SourceRef("t.jsonl", line=1)


def read(path: Path, fmt: str = "auto") -> list[Ticket | Quarantined]:
    return list(read_tickets(path, fmt))


def tickets_of(vendor: str) -> dict[str, Ticket]:
    results = read(EXPORTS / vendor)
    assert all(isinstance(r, Ticket) for r in results), [r for r in results if isinstance(r, Quarantined)]
    return {r.ticket_id: r for r in results}  # type: ignore[union-attr]


def dialogue(ticket: Ticket) -> list[tuple[str, str]]:
    return [(e.role, e.text) for e in ticket.events]


def roles(ticket: Ticket) -> list[str]:
    return [e.role for e in ticket.events]


def sample_record(vendor: str, item: int = 0) -> Any:
    return list(iter_raw_records(EXPORTS / vendor))[item].payload


def write(path: Path, payload: Any, jsonl: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if jsonl:
        path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in payload), encoding="utf-8")
    else:
        path.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return path


# --- detection ------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_sample_record_is_detected_as_its_vendor_and_by_no_other_reader(vendor: str) -> None:
    records = list(iter_raw_records(EXPORTS / vendor))
    assert len(records) >= 2
    for record in records:
        assert record.error is None
        assert [name for name, reader in READERS.items() if reader.detect(record.payload)] == [vendor]


def test_older_formats_are_not_claimed_by_the_export_readers() -> None:
    older = [
        {"ticket_id": "T-1", "events": [{"role": "customer", "text": "hi"}]},
        {"ticket_id": "T-2", "comments": [], "via": {"channel": "email"}, "requester_id": 1},  # native wins
        {"task_id": 1, "traj": []},
        {"id": 5, "messages": [], "conversations": []},
        {"convo_id": 1, "original": [], "conv_content": []},
    ]
    for payload in older:
        assert not any(READERS[v].detect(payload) for v in VENDORS), payload
        assert sum(r.detect(payload) for r in READERS.values()) == 1, payload
    for payload in ([], "x", 3, None, {"foo": 1}, {"id": 1}, {"tickets": []}):
        assert not any(r.detect(payload) for r in READERS.values()), payload


# --- Zendesk ----------------------------------------------------------------------


def test_zendesk_comments_users_and_private_notes() -> None:
    ticket = tickets_of("zendesk")["zendesk-35436"]
    assert (ticket.status, ticket.channel, ticket.category) == ("resolved", "email", "incident")
    assert roles(ticket) == ["customer", "system", "agent", "customer", "system"]
    first = ticket.events[0]
    assert first.text.startswith("Charged twice for the March invoice\n\nHello, my card was charged twice")
    assert first.ocr == ["03/02 NORTHWIND CLOUD 49.00 USD\n03/02 NORTHWIND CLOUD 49.00 USD"]
    assert first.ts == "2025-03-03T09:12:41+00:00"
    # the private comment is a system event, the public reply (HTML only) the agent's, as text
    assert ticket.events[1].text.startswith("Billing console shows two captures")
    assert ticket.events[2].text == ("Hi Jane,\n\nYou're right: the payment gateway retried and captured the invoice "
                                     "twice. I have refunded the second charge of 49.00 USD; it will show on your "
                                     "statement within 5 business days.\n\nBest regards,\nTom")
    assert ticket.events[4].text.startswith("This request was closed")  # an automation (author -1, via rule)


def test_zendesk_audits_when_there_are_no_comments() -> None:
    ticket = tickets_of("zendesk")["zendesk-35437"]
    assert (ticket.status, ticket.channel, ticket.category) == ("resolved", "web", "login")  # closed; no type: a tag
    assert dialogue(ticket) == [
        ("customer", "Cannot reset my password\n\nThe reset link in the email says it has expired, even when I click "
                     "it right away."),
        ("system", "We received your request and will get back to you within one business day."),  # a trigger
        ("agent", "Hello Priya,\n\nReset links expire after 15 minutes and are invalidated by any newer request. I "
                  "have cleared the pending requests on your account; please request a new link now and use only the "
                  "latest email."),
        ("customer", "That worked, I'm back in. Thanks!"),
    ]


def test_zendesk_answer_bot_is_system_and_a_chat_subject_is_not_merged() -> None:
    ticket = tickets_of("zendesk")["zendesk-35438"]
    assert ticket.status == "open" and ticket.channel == "chat"
    assert dialogue(ticket) == [
        ("customer", "Do you support exporting reports as CSV?"),
        ("system", "Here is an article that might help: Exporting reports."),
        ("agent", "Yes: open the report, choose Export and pick CSV. Exports are limited to 50,000 rows."),
    ]


def test_zendesk_without_users_the_requester_is_the_customer(tmp_path: Path) -> None:
    record = sample_record("zendesk")["ticket"]  # the export's first ticket, without the users sideload
    [ticket] = read(write(tmp_path / "one.json", record))
    assert roles(ticket) == ["customer", "system", "agent", "customer", "system"]
    del record["requester_id"]  # nor a requester: the first comment's author is taken for it
    [ticket] = read(write(tmp_path / "one.json", record))
    assert roles(ticket) == ["customer", "system", "agent", "customer", "system"]


def test_zendesk_api_answer_shape_and_description_only(tmp_path: Path) -> None:
    export = json.loads((EXPORTS / "zendesk" / "tickets.json").read_text())
    ticket = {k: v for k, v in export["tickets"][0].items() if k != "comments"}
    answer = {"ticket": ticket, "comments": export["tickets"][0]["comments"], "users": export["users"]}
    described = dict(ticket, id=1, status="pending")
    path = write(tmp_path / "t.jsonl", [answer, described], jsonl=True)
    first, second = read(path)
    assert isinstance(first, Ticket) and roles(first) == ["customer", "system", "agent", "customer", "system"]
    assert isinstance(second, Ticket) and second.status == "pending"
    assert dialogue(second) == [("customer", "Charged twice for the March invoice\n\n" + ticket["description"])]


# --- Intercom ---------------------------------------------------------------------


def test_intercom_notes_and_bots_are_system_html_is_text() -> None:
    conversation = tickets_of("intercom")["intercom-1911149811"]
    assert (conversation.status, conversation.channel, conversation.category) == ("resolved", "chat", "seats")
    assert dialogue(conversation) == [
        ("customer", "Hi, our team plan shows 5 seats but we invited a sixth colleague and the invite bounced."),
        ("system", "Thanks for reaching out! The team typically replies in a few minutes."),  # the Operator bot
        ("system", "Account is on the legacy Team plan, hard cap of 5 seats. Upgrade path is Team Plus."),  # a note
        ("agent", "Hi Marcus,\n\nYour workspace is on the Team plan, which includes 5 seats. To add a sixth member "
                  "you can upgrade to Team Plus (up to 25 seats) from Settings > Billing. The invite will go through "
                  "right after."),
        ("customer", "Upgraded, and the invite worked. Thanks Lena!"),
    ]  # the assignment and the close part carry no text
    assert conversation.events[0].ts == "2025-03-05T15:00:00+00:00"  # Unix seconds


def test_intercom_ai_agent_email_subject_quote_and_ocr() -> None:
    conversation = tickets_of("intercom")["intercom-1911149812"]
    assert conversation.channel == "email" and conversation.category is None
    assert roles(conversation) == ["customer", "system", "customer", "agent"]  # Fin's answer is not an agent's
    first = conversation.events[0]
    assert first.text == "Export stuck at 99%\n\nHello,\nmy data export has been stuck at 99% since yesterday."
    assert first.ocr == ["Exporting workspace... 99%"]
    assert tickets_of("intercom")["intercom-1911149813"].status == "open"


def test_intercom_api_1_conversation_message(tmp_path: Path) -> None:
    record = sample_record("intercom")
    record["conversation_message"] = record.pop("source")
    record.pop("type")
    [ticket] = read(write(tmp_path / "c.json", record))
    assert isinstance(ticket, Ticket) and ticket.events[0].role == "customer" and ticket.channel == "chat"


# --- Freshdesk --------------------------------------------------------------------


def test_freshdesk_private_notes_incoming_replies_and_codes() -> None:
    ticket = tickets_of("freshdesk")["freshdesk-1042"]
    assert (ticket.status, ticket.channel, ticket.category) == ("resolved", "email", "Refund")
    assert dialogue(ticket) == [
        ("customer", "Order arrived damaged\n\nHi,\nthe blender I ordered (order 58812) arrived with a cracked jug. "
                     "Photo attached."),
        ("system", "Customer has been a member since 2019; approve replacement without return."),
        ("agent", "Hi Olivia,\n\nSorry about the damaged jug. A replacement blender is on its way and you do not need "
                  "to send the broken one back.\n\nKind regards,\nSam"),
        ("customer", "Great, thank you! When will it arrive?"),  # HTML only, the quoted reply left out
        ("agent", "It ships today with express delivery, so it should arrive within two business days."),
    ]
    assert ticket.events[0].ocr == ["Order 58812 - BlendPro 600"]


def test_freshdesk_closed_portal_and_outbound_email() -> None:
    tickets = tickets_of("freshdesk")
    warranty = tickets["freshdesk-1043"]
    assert (warranty.status, warranty.channel, warranty.category) == ("resolved", "portal", "warranty")
    assert roles(warranty) == ["customer", "agent"]
    outbound = tickets["freshdesk-1044"]  # source 10: the agent wrote first
    assert (outbound.status, outbound.channel) == ("open", "outbound_email")
    assert roles(outbound) == ["agent", "customer", "agent"]
    assert not outbound.events[0].text.startswith("Your return label")  # no subject on an agent's message


def test_freshdesk_custom_status_and_user_id_of_the_requester(tmp_path: Path) -> None:
    record = sample_record("freshdesk", 2)
    record["status"] = 7
    for note in record["conversations"]:
        note.pop("incoming")  # the requester's user_id still marks the customer
    [ticket] = read(write(tmp_path / "f.json", [record]))
    assert ticket.status == "status-7" and roles(ticket) == ["agent", "customer", "agent"]


# --- Salesforce -------------------------------------------------------------------


def test_salesforce_emails_comments_and_feed_in_time_order() -> None:
    case = tickets_of("salesforce")["salesforce-00001026"]
    assert (case.status, case.channel, case.category) == ("resolved", "email", "Problem")
    assert roles(case) == ["customer", "system", "system", "agent"]
    # the Description repeats the first email (email-to-case): read once, from the email, with the subject
    assert case.events[0].text.startswith("VPN client disconnects every 10 minutes\n\nSince the update")
    assert "Regards,\nHelen Vance" in case.events[0].text
    assert case.events[1].text == "@Carlos customer is on the enterprise SLA, please close within 4h."  # internal post
    assert case.events[2].text.startswith("Known issue KI-311")  # an unpublished comment
    assert case.events[3].text.startswith("Hello Helen,\n\nVersion 4.2 shortened the default idle timeout")
    assert all("Draft" not in e.text for e in case.events)  # the draft was never sent


def test_salesforce_portal_user_comment_and_open_phone_case() -> None:
    cases = tickets_of("salesforce")
    portal = cases["salesforce-00001027"]
    assert [r for r in roles(portal)] == ["customer", "agent", "customer"]  # a PowerCustomerSuccess user
    phone = cases["salesforce-00001028"]
    assert (phone.status, phone.channel, phone.category) == ("working", "phone", "Billing")
    assert dialogue(phone)[0] == ("customer", "Please change the invoice address to our new office at 12 Harbour Road.")


def test_salesforce_child_lists_as_plain_lists_and_unsaid_visibility(tmp_path: Path) -> None:
    case = sample_record("salesforce", 2)
    case["Feeds"] = case["Feeds"]["records"]
    del case["Feeds"][0]["Visibility"]  # not said to be public: never an agent's reply
    [ticket] = read(write(tmp_path / "c.jsonl", [case], jsonl=True))
    assert roles(ticket) == ["customer", "system"]


# --- Meiqia (美洽) ----------------------------------------------------------------


def test_meiqia_chat_roles_placeholders_and_status() -> None:
    conversations = tickets_of("meiqia")
    first = conversations["meiqia-68067008"]
    assert (first.status, first.channel, first.category) == ("resolved", "web", "售后组")
    assert roles(first) == ["system", "customer", "customer", "agent", "customer", "agent", "customer"]
    assert first.events[2].text == "[图片]" and first.events[2].ocr == ["型号 KT-1700 功率 1800W"]
    assert first.events[3].text == "您好，很抱歉给您带来不便。请先确认底座指示灯是否亮起？"  # rich text
    assert first.events[1].ts == "2025-04-20T10:42:40.120000"
    robot = conversations["meiqia-68067009"]
    assert roles(robot) == ["system", "customer", "agent", "customer"]  # the robot is no agent
    assert conversations["meiqia-68067010"].status == "open"  # no conv_end_tm: still going


def test_meiqia_saved_result_list(tmp_path: Path) -> None:
    lines = (EXPORTS / "meiqia" / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    path = write(tmp_path / "page-1.json", {"result": [json.loads(line) for line in lines]})
    results = read(path)
    assert [r.ticket_id for r in results] == ["meiqia-68067008", "meiqia-68067009", "meiqia-68067010"]
    assert [r.origin.item for r in results] == [1, 2, 3]


# --- HTML ---------------------------------------------------------------------------


@pytest.mark.parametrize(("html", "text"), [
    ("<p>Hi Marcus,</p><p>See <a href='x'>Team Plus</a> &gt; Billing.</p>", "Hi Marcus,\n\nSee Team Plus > Billing."),
    ("<div>Hello,</div><div>second line</div>", "Hello,\nsecond line"),
    ("a<br>b<br/><br>c", "a\nb\n\nc"),
    ("<ul><li>one</li><li>two</li></ul>", "- one\n- two"),
    ("<p>new</p><blockquote><p>old mail</p></blockquote>", "new"),
    ("<div>new</div><div class='gmail_quote'>On Mon <div>old</div></div>", "new"),
    ("<style>p{}</style><script>x()</script><p>kept</p>", "kept"),
    ("<p>unclosed <b>bold", "unclosed bold"),
    ("plain 1 < 2 & 3 > 2", "plain 1 < 2 & 3 > 2"),
])
def test_html_to_text(html: str, text: str) -> None:
    assert html_to_text(html) == text


def test_no_sample_event_keeps_markup() -> None:
    for vendor in VENDORS:
        for ticket in tickets_of(vendor).values():
            for event in ticket.events:
                assert not looks_like_html(event.text) and "&gt;" not in event.text, (vendor, event.text)


# --- internal notes never become agent replies -------------------------------------------


NOTES = {
    "zendesk": "Billing console shows two captures",
    "intercom": "Account is on the legacy Team plan",
    "freshdesk": "Customer has been a member since 2019",
    "salesforce": "Known issue KI-311",
}


@pytest.mark.parametrize("vendor", sorted(NOTES))
def test_internal_notes_are_system_events(vendor: str) -> None:
    found = [e for t in tickets_of(vendor).values() for e in t.events if e.text.startswith(NOTES[vendor])]
    assert found and all(e.role == "system" for e in found)


def test_a_private_flag_of_another_type_is_an_error_not_a_reply() -> None:
    record = copy.deepcopy(sample_record("freshdesk"))
    record["conversations"][0]["private"] = "yes"
    with pytest.raises(TicketError, match=r"conversations\[0\]\.private must be true or false"):
        freshdesk.parse(record, ORIGIN)
    ticket = copy.deepcopy(sample_record("zendesk"))
    ticket["ticket"]["comments"][1]["public"] = 0
    with pytest.raises(TicketError, match=r"comments\[1\]\.public must be true or false"):
        zendesk.parse(ticket, ORIGIN)


# --- bad records -------------------------------------------------------------------------


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for inner in value.values() for s in _strings(inner)]
    if isinstance(value, list):
        return [s for inner in value for s in _strings(inner)]
    return [value] if isinstance(value, str) else []


def _broken(vendor: str, change: Any) -> Any:
    record = copy.deepcopy(sample_record(vendor))
    change(record)
    return record


BAD = [
    ("zendesk", lambda r: r["ticket"].pop("id"), "missing id"),
    ("zendesk", lambda r: r["ticket"].update(comments="all of them"), "comments must be a list"),
    ("zendesk", lambda r: r["ticket"]["comments"][0].update(created_at="yesterday"),
     "comments[0].created_at is not a timestamp"),
    ("intercom", lambda r: r["source"]["author"].update(type="robot"), "source: unknown author type 'robot'"),
    ("intercom", lambda r: r.update(conversation_parts={"conversation_parts": "x"}),
     "conversation_parts must be a list"),
    ("freshdesk", lambda r: r.update(status=[4]), "status must be a number or a string"),
    ("freshdesk", lambda r: (r.update(conversations=[]), r.pop("description_text"), r.pop("description")),
     "no description and no conversations"),
    ("salesforce", lambda r: r["EmailMessages"]["records"][0].pop("Incoming"),
     "EmailMessages[0].Incoming must be true or false"),
    ("salesforce", lambda r: (r.pop("CaseNumber"), r.pop("Id")), "missing CaseNumber and Id"),
    ("meiqia", lambda r: r["conv_content"][1].update({"from": "访客"}),
     "conv_content[1]: unknown from (a str, not shown)"),
    ("meiqia", lambda r: r.update(conv_content=[]), "conv_content is empty"),
]


@pytest.mark.parametrize(("vendor", "change", "reason"), BAD)
def test_bad_records_are_quarantined_with_a_reason_and_the_run_goes_on(
    tmp_path: Path, vendor: str, change: Any, reason: str
) -> None:
    good = [sample_record(vendor, 1)]
    path = write(tmp_path / "mixed.jsonl", [_broken(vendor, change), *good], jsonl=True)
    bad, fine = read(path)
    assert isinstance(bad, Quarantined) and isinstance(fine, Ticket)
    assert bad.reason == reason
    assert bad.to_manifest()["source"] == "mixed.jsonl" and bad.to_manifest()["line"] == 1
    texts = [v for v in _strings(_broken(vendor, change)) if " " in v.strip() or not v.isascii()]
    assert texts and not any(text in bad.reason for text in texts)  # field names only, never the ticket's text


def test_quarantined_ticket_ids_are_kept_when_known(tmp_path: Path) -> None:
    [bad] = read(write(tmp_path / "x.jsonl", [_broken("meiqia", lambda r: r.update(conv_content=[]))], jsonl=True))
    assert bad.ticket_id == "meiqia-68067008"


# --- unknown formats ---------------------------------------------------------------------


def test_an_unknown_record_names_the_formats_read_and_the_doc(tmp_path: Path) -> None:
    help_scout = {"id": 11, "subject": "Hi", "threads": [{"type": "customer", "body": "My order is late"}]}
    [result] = read(write(tmp_path / "hs.jsonl", [help_scout], jsonl=True))
    assert isinstance(result, Quarantined)
    assert result.reason == readers.UNRECOGNISED
    for name in ("native", "openai", "abcd", *VENDORS, "docs/input-formats.md"):
        assert name in result.reason
    assert "late" not in result.reason
    assert DOCS.exists()
    doc = DOCS.read_text(encoding="utf-8")
    assert all(f"`{name}`" in doc for name in READERS)


def test_an_unknown_format_name_points_to_the_doc(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="input-formats.md"):
        read(tmp_path, "helpscout")


@pytest.mark.parametrize("vendor", VENDORS)
def test_forcing_a_vendor_format_reads_its_records_and_quarantines_others(tmp_path: Path, vendor: str) -> None:
    assert all(isinstance(r, Ticket) for r in read(EXPORTS / vendor, vendor))
    other = "meiqia" if vendor != "meiqia" else "zendesk"
    results = read(EXPORTS / other, vendor)
    assert results and all(isinstance(r, Quarantined) for r in results)
    assert all("unexpected error" not in r.reason for r in results)  # type: ignore[union-attr]


# --- whole-export files ------------------------------------------------------------------


def test_envelopes_are_split_and_numbered_like_lists(tmp_path: Path) -> None:
    results = read(EXPORTS / "zendesk" / "tickets.json")
    assert [r.origin.describe() for r in results] == ["tickets.json item 1", "tickets.json item 2",
                                                       "tickets.json item 3"]
    gz = tmp_path / "export.json.gz"
    gz.write_bytes(gzip.compress((EXPORTS / "salesforce" / "cases.json").read_bytes()))
    assert [r.ticket_id for r in read(gz)] == ["salesforce-00001026", "salesforce-00001027", "salesforce-00001028"]


def test_an_export_is_streamed_not_loaded_whole(tmp_path: Path) -> None:
    import tracemalloc

    from cirrus.ingest.readers.files import READ_SIZE

    path = tmp_path / "big.json"
    item = json.dumps({"id": 1, "comments": [{"author_id": 1, "body": "p" * 4000}]})
    with path.open("w") as f:
        f.write('{"count": 5000, "tickets": [' + ",".join([item] * 5000) + '], "next_page": null}')  # ~20 MB
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_raw_records(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 5000
    assert peak < 3 * READ_SIZE < path.stat().st_size, peak


def test_a_native_ticket_with_a_records_field_is_one_ticket(tmp_path: Path) -> None:
    native = {"ticket_id": "T-9", "records": [1, 2], "events": [{"role": "customer", "text": "hi"}]}
    [result] = read(write(tmp_path / "t.json", native))
    assert isinstance(result, Ticket) and result.ticket_id == "T-9" and result.origin.item is None


@pytest.mark.parametrize(("top", "envelope"), [
    ({"tickets": "start_array", "users": "start_array", "count": "number"}, "tickets"),
    ({"type": "string", "conversations": "start_array", "pages": "start_map"}, "conversations"),
    ({"totalSize": "number", "done": "boolean", "records": "start_array"}, "records"),
    ({"result": "start_array"}, "result"),
    ({"tickets": "start_map"}, None),
    ({"tickets": "start_array", "records": "start_array"}, None),  # two lists: which one?
    ({"id": "number", "conversations": "start_array"}, None),  # a Freshdesk ticket
])
def test_envelope_of(top: dict[str, str], envelope: str | None) -> None:
    assert envelope_of(top) == envelope


def test_empty_and_broken_envelopes(tmp_path: Path) -> None:
    [empty] = read(write(tmp_path / "e.json", {"tickets": [], "count": 0}))
    assert isinstance(empty, Quarantined) and empty.reason == "the export's 'tickets' list is empty"
    item = json.dumps(sample_record("meiqia"), ensure_ascii=False)
    (tmp_path / "b.json").write_text('{"result": [' + item + ', {"conv_id": 1, "conv_content": [}', encoding="utf-8")
    first, broken = read(tmp_path / "b.json")
    assert isinstance(first, Ticket)
    assert isinstance(broken, Quarantined) and broken.origin.item == 2
    assert broken.reason.startswith("invalid JSON") and broken.reason.endswith("rest of file skipped (cannot resync)")


def test_a_broken_export_keeps_its_sideload_and_its_records_before_the_break(tmp_path: Path) -> None:
    export = json.loads((EXPORTS / "zendesk" / "tickets.json").read_text())
    export["tickets"][0]["requester_id"] = 424242  # without the users, the customer's comments would be an agent's
    first = json.dumps(export["tickets"][0])
    users = json.dumps(export["users"])
    (tmp_path / "z.json").write_text('{"users": ' + users + ', "tickets": [' + first + ', {"id": 2, "comm', "utf-8")
    ticket, broken = read(tmp_path / "z.json")
    assert isinstance(ticket, Ticket) and roles(ticket) == ["customer", "system", "agent", "customer", "system"]
    assert isinstance(broken, Quarantined) and broken.origin.item == 2 and "rest of file skipped" in broken.reason


# --- never an unexpected error ------------------------------------------------------------

TEMPLATES = {vendor: sample_record(vendor) for vendor in VENDORS}
odd_values = st.sampled_from([None, True, 0, -1, 1.5, "", " ", "x", "<p>", [], {}, [None], {"": None}, 2**70, 1e300])


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*path, index))
    return found


@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, Any]:
    vendor = draw(st.sampled_from(VENDORS))
    record = copy.deepcopy(TEMPLATES[vendor])
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(record)
        if not paths:
            break
        *parents, key = draw(st.sampled_from(paths))
        parent = record
        for step in parents:
            parent = parent[step]
        if draw(st.booleans()):
            del parent[key]
        else:
            parent[key] = draw(odd_values)
    return vendor, record


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_records_give_a_ticket_or_a_ticket_error(case: tuple[str, Any]) -> None:
    vendor, record = case
    reader = {"zendesk": zendesk, "intercom": intercom, "freshdesk": freshdesk, "salesforce": salesforce,
              "meiqia": meiqia}[vendor]
    try:
        ticket = reader.parse(record, ORIGIN)
    except TicketError as exc:
        assert exc.reason and "\n" not in exc.reason
        return
    assert ticket.events and all(e.role in ("customer", "agent", "system") for e in ticket.events)
    assert ticket.ticket_id.startswith(f"{vendor}-")


# --- end to end -----------------------------------------------------------------------------


EXPECTED_TASKS = {"zendesk": 2, "intercom": 2, "freshdesk": 2, "salesforce": 2, "meiqia": 2}


@pytest.mark.parametrize("vendor", VENDORS)
def test_cirrus_ingest_of_each_sample_writes_tasks(tmp_path: Path, pipeline_config: Any, vendor: str) -> None:
    from cirrus.ingest.run import IngestOptions, run_ingest

    workspace = tmp_path / "ws"
    manifest = run_ingest(IngestOptions(raw_path=EXPORTS / vendor, workspace=workspace, pipeline=pipeline_config,
                                        progress=False)).manifest
    assert manifest["counts"]["quarantined"] == 0 and manifest["quarantined"] == []
    tasks = [json.loads(line) for line in (workspace / "tickets" / "tasks.jsonl").open(encoding="utf-8")]
    assert len(tasks) == manifest["counts"]["tasks"] == EXPECTED_TASKS[vendor]
    # an id with a long run of digits may be written as its pseudonym (cirrus/ingest/deid/ids.py)
    assert all(t["task_id"].startswith((f"{vendor}-", "t-")) and t["checkpoints"] for t in tasks)
    replies = " ".join(c["reply"] for t in tasks for c in t["checkpoints"])
    if vendor in NOTES:
        assert NOTES[vendor] not in replies  # an internal note is never a reference reply
    if vendor == "meiqia":
        assert all(t["language"] == "zh" for t in tasks)


def test_cirrus_ingest_quarantines_a_bad_export_record_and_goes_on(tmp_path: Path, pipeline_config: Any) -> None:
    from cirrus.ingest.run import IngestOptions, run_ingest

    raw = tmp_path / "raw"
    write(raw / "good.json", json.loads((EXPORTS / "intercom" / "conversations.json").read_text()))
    write(raw / "bad.jsonl", [{"id": 7, "threads": []}, _broken("intercom", lambda r: r.pop("id"))], jsonl=True)
    manifest = run_ingest(IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config,
                                        progress=False)).manifest
    assert manifest["counts"]["tasks"] == 2
    assert manifest["quarantined"] == [
        {"source": "bad.jsonl", "line": 1, "reason": readers.UNRECOGNISED},
        {"source": "bad.jsonl", "line": 2, "reason": "missing id"},
    ]
