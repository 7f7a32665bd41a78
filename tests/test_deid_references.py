"""Every identifier is personal data (issue 25 item 2): order, waybill,
invoice, member, account, ticket and booking numbers and handles are masked,
found by a cue word (English and Chinese) or by their shape, consistently
across text and tool calls; codes a pipeline declares non-personal are kept;
the ticket's own id stays the task id."""

from __future__ import annotations

import pytest

from cirrus.ingest.deid.deidentify import Deidentifiers
from cirrus.ingest.deid.pseudonyms import mask
from cirrus.schema import Event, SourceRef, Ticket

ORIGIN = SourceRef("t.jsonl", line=1)


@pytest.mark.parametrize("text, value", [
    ("My order #A7731902 never arrived", "A7731902"),
    ("your booking ref is QX7-88211, see you on board", "QX7-88211"),
    ("the waybill number: JD0098812345 was scanned", "JD0098812345"),
    ("membership no. 55102934 expired", "55102934"),
    ("Invoice INV-2025-000871 is attached", "INV-2025-000871"),
    ("please quote SO-88314-2207 when you call", "SO-88314-2207"),  # by shape alone
    ("ping @jane_doe on the forum", "@jane_doe"),
    ("订单号:3348917502 一直没发货", "3348917502"),
    ("[订单编号:4410299381, 订单金额:59.00]", "4410299381"),
    ("运单号 SF1234567890 显示已签收", "SF1234567890"),
    ("我的微信号：wxid_k8s92jd", "wxid_k8s92jd"),
])
def test_identifiers_are_found(deidentifier, text, value):
    spans = deidentifier.detect(text)
    assert any(text[sp.start:sp.end] == value for sp in spans), [(text[s.start:s.end], s.entity) for s in spans]


@pytest.mark.parametrize("text", [
    "Your order is ready for pickup",
    "the order on 2024-03-01 was fine",
    "case closed, thanks",
    "we ship ISO-9001 certified parts",  # one digit group: a standard, not a reference
    "write to support@example.com",
])
def test_words_dates_and_e_mails_are_not_references(deidentifier, text):
    assert not [sp for sp in deidentifier.detect(text) if sp.entity == "REFERENCE_ID"]


def test_masks_keep_the_shape():
    assert mask("REFERENCE_ID", "INV-2025-000871") == "INV-****-****71"
    assert mask("REFERENCE_ID", "@jane_doe") == "@ja**_***"
    assert mask("REFERENCE_ID", "3348917502") == "********02"


def test_one_order_number_one_mask_in_text_and_tool_calls(deidentifier):
    ticket = Ticket("K-9", [
        Event("customer", "Where is order #A7731902? It was due Monday."),
        Event("tool_call", call_id="c1", name="GetOrder", arguments={"order_id": "A7731902"}),
        Event("tool_result", call_id="c1", content={"order_id": "A7731902", "status": "in transit"}),
        Event("agent", "Order A7731902 is in transit and arrives tomorrow."),
    ], ORIGIN)
    clean, counts = deidentifier.deidentify(ticket)
    dumped = str([e.text for e in clean.events] + [clean.events[1].arguments, clean.events[2].content])
    assert "A7731902" not in dumped and counts["REFERENCE_ID"] >= 1
    masked = clean.events[1].arguments["order_id"]
    assert clean.events[2].content["order_id"] == masked and masked in clean.events[3].text
    assert clean.ticket_id == "K-9"


def test_the_tickets_own_id_is_its_task_id(deidentifier):
    ticket = Ticket("NC-2025-00200017", [Event("customer", "About ticket NC-2025-00200017: still broken"),
                                         Event("agent", "Looking at it now.")], ORIGIN)
    clean, _ = deidentifier.deidentify(ticket)
    assert clean.ticket_id == "NC-2025-00200017"


def test_a_pipeline_keeps_its_non_personal_codes(pipeline_config):
    deid = pipeline_config.deid.model_copy(update={"non_personal_codes": [r"INV-\d{4}-\d{6}", r"SKU-\d+"]})
    shop = pipeline_config.model_copy(update={"deid": deid})
    keeping = Deidentifiers(shop).base
    text = "Invoice INV-2025-000871 for SKU-4410 and order #A7731902"
    found = {text[sp.start:sp.end] for sp in keeping.detect(text)}
    assert "A7731902" in found and not any("000871" in f or "4410" in f for f in found), found
    assert shop.config_hash() != pipeline_config.config_hash()
