"""The de-identifier's cheap pre-checks skip work, never a find
(cirrus/ingest/deid/recognizers.py): the phone recognizer skips a text with
fewer digits than the shortest valid number of any region, and a recognizer
that counts only next to a context word skips a text without any of them."""

from __future__ import annotations

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from cirrus.config import load_pipeline
from cirrus.ingest.deid.recognizers import ValidatedPhoneRecognizer, min_phone_digits


@pytest.fixture(scope="module")
def phones() -> ValidatedPhoneRecognizer:
    regions = tuple(load_pipeline("default").deid.phone_regions)
    return ValidatedPhoneRecognizer(supported_language="en", supported_regions=regions)


def _spans(results) -> list[tuple[str, int, int, float]]:
    return sorted((r.entity_type, r.start, r.end, r.score) for r in results)


def test_the_shortest_phone_number_is_read_from_the_metadata():
    shortest = min_phone_digits()
    assert 2 <= shortest <= 4
    # some region's example number really is that short (Saint Helena's, with phonenumbers 8.x)
    lengths = []
    for region in phonenumbers.SUPPORTED_REGIONS:
        example = phonenumbers.example_number(region)
        if example is not None:
            lengths.append(len(phonenumbers.national_significant_number(example)))
    assert min(lengths) >= shortest


_PHONE_ALPHABET = st.sampled_from(list("0123456789 +-().x/") + ["ext", "tel", "call ", "\n", "٣", "５"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_PHONE_ALPHABET, max_size=30).map("".join))
def test_the_digit_pre_check_changes_no_find(phones, text):
    guarded = phones.analyze(text, ["PHONE_NUMBER"])
    unguarded = PhoneRecognizer.analyze(phones, text, ["PHONE_NUMBER"])
    assert _spans(guarded) == _spans(unguarded)


@pytest.mark.parametrize("text", ["call 780-999-2181 please", "+44 20 7946 0958", "Tel. (415) 555-0142",
                                  "St Helena +290 2234", "ring 12 34"])
def test_numbers_still_found_and_short_texts_skipped(phones, text):
    assert _spans(phones.analyze(text, ["PHONE_NUMBER"])) == _spans(PhoneRecognizer.analyze(phones, text,
                                                                                              ["PHONE_NUMBER"]))
