"""Values that only their cue makes personal (cirrus/ingest/deid/cued.py): a
card security code, a US driver's licence number, a Japanese name before
と申します.  Masked by the ingest; found by the audit through the same rules."""

from __future__ import annotations

import pytest

from cirrus.ingest.deid.cued import cued_values

MASKED = [
    ("My CVV is 737, card ending 4242.", "737"),
    ("Card ending 4242; the security code on the back is 4821.", "4821"),
    ("cvc: 091", "091"),
    ("My driver's license number is D1234567.", "D1234567"),
    ("Driving licence: F255-921-50-094-0", "F255-921-50-094-0"),
    ("DL# W4260851", "W4260851"),
    ("田中と申します。注文について伺いたいです。", "田中"),
    ("サトウ・ハナコと申します", "サトウ・ハナコ"),
]

KEPT = [
    "Your security code is 4821; it expires in 10 minutes.",  # a login code, no card near
    "DL 2024-05-01 finished",  # a download
    "The CVV check took 250 ms.",
    "Order 737 shipped; driver's license renewal takes 10 days.",
    "Please enter the 6-digit verification code.",
]


@pytest.mark.parametrize(("text", "value"), MASKED)
def test_a_cued_value_is_found(text: str, value: str) -> None:
    assert value in [text[v.start:v.end] for v in cued_values(text)]


@pytest.mark.parametrize("text", KEPT)
def test_the_shape_without_its_cue_is_nothing(text: str) -> None:
    assert cued_values(text) == []


@pytest.mark.parametrize(("text", "value"), MASKED)
def test_the_ingest_engine_finds_it(deidentifier, text: str, value: str) -> None:
    at = text.index(value)
    spans = deidentifier.detect(text)
    assert any(s.start <= at and at + len(value) <= s.end for s in spans), spans


@pytest.mark.parametrize("text", KEPT)
def test_the_ingest_engine_leaves_the_shape_alone(deidentifier, text: str) -> None:
    assert not any(s.entity in ("SECRET", "NATIONAL_ID") for s in deidentifier.detect(text))
