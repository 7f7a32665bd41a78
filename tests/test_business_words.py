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


# -- product names in Title Case are not people (a context, not a word list) --

def _customer_text(deidentifier, text):
    clean, _ = deidentifier.deidentify(Ticket("P-1", [Event("customer", text)], SourceRef("t.jsonl", line=1)))
    return clean.events[0].text


@pytest.mark.parametrize("text", [
    "Kettle Classic (red) arrived broken.",
    "Item: Kettle Classic (red)",
    "We sent a new Aurora Lamp (large) and a Kettle Classic (red).",
    "Morning Glory Mug (350 ml) is dishwasher safe.",
    "It was the Summit Jacket (size M) that I returned.",
])
def test_a_product_with_a_variant_or_an_article_is_no_name(deidentifier, text):
    assert _customer_text(deidentifier, text) == text


@pytest.mark.parametrize("text, name", [
    ("My name is Sarah Connor and the Kettle Classic (red) is broken.", "Sarah Connor"),
    ("Thanks, Rose Baker (red team lead) will follow up.", "Rose Baker"),  # name words, a colour after
    ("I spoke to a Tom Cruise at your store.", "Tom Cruise"),  # an article before a name of names
    ("Our colleague Jane Porter (CTO) approved it.", "Jane Porter"),
])
def test_names_next_to_product_cues_are_still_masked(deidentifier, text, name):
    out = _customer_text(deidentifier, text)
    assert name not in out and name.split()[0] not in out
    if "Kettle" in text:
        assert "Kettle Classic (red)" in out


@pytest.fixture(scope="module")
def chinese(pipeline_config):
    from cirrus.ingest.deid.deidentify import Deidentifiers

    return Deidentifiers(pipeline_config).for_language("zh")


@pytest.mark.parametrize("text", [
    "我买的Dance鞋子坏了，能退吗？",
    "这款Cover手机壳是什么材质的？",
    "我在Warrior旗舰店买的鞋子开胶了。",  # Warrior is in the name lists, and a word
    "客户购买了Dance Pro（黑色）运动鞋。",
    "您好，您购买的Warrior（白色，42码）已经发货。",
    "麻烦问下，Dance和Warrior哪个更好？",
])
def test_latin_product_words_in_chinese_text_are_no_names(chinese, text):
    assert _customer_text(chinese, text) == text


def test_names_in_chinese_text_are_still_masked(chinese):
    assert "李明" not in _customer_text(chinese, "李明你好，Dance系列的鞋子已经发货了。")
    assert "Dance系列" in _customer_text(chinese, "李明你好，Dance系列的鞋子已经发货了。")
    out = _customer_text(chinese, "我同事 John Smith 说还没到。")
    assert "John" not in out and "Smith" not in out


@pytest.mark.parametrize("text, name", [
    ("This is Mr Jason Reed, the account owner.", "Reed"),  # "This is" is no article before a product
])
def test_an_honorific_after_this_is_keeps_the_name(deidentifier, text, name):
    assert name not in _customer_text(deidentifier, text)


def test_a_latin_full_name_in_chinese_text_is_not_one_lone_word(chinese):
    out = _customer_text(chinese, "我叫Jay White，想退货。")
    assert "White" not in out
