"""Use the detectors that exist (issue 26 item 3): Presidio's country
recognizers and python-stdnum's check digits find national, personal and
device identifiers; digit-only ones need their context word; dates of birth
are found near a birth cue, in words too."""

from __future__ import annotations

import pytest

from cirrus.ingest.deid.recognizers import vin_check_digit_ok


@pytest.mark.parametrize("text, value, entity", [
    ("National insurance number: AB 12 34 56 C", "AB 12 34 56 C", "UK_NINO"),
    ("Spanish DNI 12345678Z on the form", "12345678Z", "ES_NIF"),
    ("codice fiscale RSSMRA85T10A562S", "RSSMRA85T10A562S", "IT_FISCAL_CODE"),
    ("my PAN is ABCPE1234F", "ABCPE1234F", "IN_PAN"),
    ("Steuer-ID 36574261809", "36574261809", "NATIONAL_ID"),
    ("NIR: 2 95 10 99 126 111 93", "2 95 10 99 126 111 93", "NATIONAL_ID"),
    ("IBAN NO93 8601 1117 947 please", "NO93 8601 1117 947", "IBAN_CODE"),
    ("my IMEI is 49-015420-323751-8", "49-015420-323751-8", "DEVICE_ID"),
    ("the car 1M8GDM9AXKP042788 makes a noise", "1M8GDM9AXKP042788", "DEVICE_ID"),
    ("router MAC 00:1A:2B:3C:4D:5E dropped", "00:1A:2B:3C:4D:5E", "MAC_ADDRESS"),
    ("I was born on 3 March 1984 in Oslo", "3 March 1984", "DATE_OF_BIRTH"),
    ("DOB: 1990-04-12", "1990-04-12", "DATE_OF_BIRTH"),
])
def test_identifiers_the_libraries_know(deidentifier, text, value, entity):
    spans = deidentifier.detect(text)
    assert any(text[sp.start:sp.end] == value and sp.entity == entity for sp in spans), \
        [(text[sp.start:sp.end], sp.entity) for sp in spans]


@pytest.mark.parametrize("text", [
    "resize the partition: start=2048 end=209715167",   # a checksum-valid 9-digit TFN shape, no cue
    "the release of 2024-03-01 fixed it",                # a date, no birth cue
    "order 12345678901234567 is late",                   # 17 digits, not a VIN
    "ping 127.0.0.1 to check the loopback",              # the machine itself
])
def test_numbers_without_their_cue_stay(deidentifier, text):
    kinds = {sp.entity for sp in deidentifier.detect(text)}
    assert not kinds & {"AU_TFN", "PL_PESEL", "UK_NHS", "DATE_OF_BIRTH", "DEVICE_ID", "IP_ADDRESS"}, kinds


def test_a_digit_only_identifier_counts_next_to_its_word(deidentifier):
    assert any(sp.entity == "AU_TFN" for sp in deidentifier.detect("my tax file number is 123 456 782"))


def test_vin_check_digit():
    assert vin_check_digit_ok("1M8GDM9AXKP042788")
    assert not vin_check_digit_ok("1M8GDM9ABKP042788")
