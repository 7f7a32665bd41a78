"""Business words survive (issue 25 item 7): JSON keys are code, a city with
its state is a place, a modal verb opening a question is no name; names as
keys are still masked."""

from __future__ import annotations

import json

import pytest

from cirrus.schema import Event, SourceRef, Ticket


def _shipment(deidentifier, result):
    ticket = Ticket("H-1", [
        Event("customer", "My kettle arrived with a cracked lid."),
        Event("agent", "Sorry about that! Shall I refund the kettle or send a replacement?"),
        Event("tool_call", call_id="c1", name="GetShipment", arguments={"order": "today"}),
        Event("tool_result", call_id="c1", content=result),
        Event("agent", "A new kettle leaves the Memphis, TN hub today and arrives in 3 business days."),
    ], SourceRef("t.jsonl", line=1))
    clean, _ = deidentifier.deidentify(ticket)
    return clean


def test_keys_places_and_questions_survive(deidentifier):
    clean = _shipment(deidentifier, {"eta_business_days": 3, "hub": "Memphis, TN hub", "carrier_status": "moving"})
    assert set(clean.events[3].content) == {"eta_business_days", "hub", "carrier_status"}
    assert clean.events[3].content["hub"] == "Memphis, TN hub"
    assert clean.events[1].text == "Sorry about that! Shall I refund the kettle or send a replacement?"
    assert "Memphis, TN hub" in clean.events[4].text


@pytest.mark.parametrize("key", ["Olivia Hartmann", "olivia_hartmann"])
def test_a_name_used_as_a_key_is_still_masked(deidentifier, key):
    clean = _shipment(deidentifier, {key: {"tier": "gold"}})
    dumped = json.dumps(clean.events[3].content)
    assert "olivia" not in dumped.lower() and "hartmann" not in dumped.lower()
    assert list(clean.events[3].content.values()) == [{"tier": "gold"}]
