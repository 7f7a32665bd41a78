"""Addresses in free text (issue 26 item 3): street lines of several
countries' formats, PO boxes and postcodes (UK, Irish Eircode, US ZIP, any
after its cue word), a Japanese and a Korean address; numbers that are not
addresses (orders, prices, flights, times, counts, rooms) stay."""

from __future__ import annotations

import pytest

from cirrus.ingest.deid.addresses import AddressRecognizer, street_words
from cirrus.schema import Event, SourceRef, Ticket

ADDRESSES = [
    # English street lines: number, name, street word
    ("please send it to 57 Holloway Mews, London", "57 Holloway Mews"),
    ("my flat is at 12 Kingsley Crescent now", "12 Kingsley Crescent"),
    ("Our office: 1600 Amphitheatre Parkway", "1600 Amphitheatre Parkway"),
    ("ship it to 221B Baker Street, thanks", "221B Baker Street"),
    ("deliver to 48 Old Quarry Lane please", "48 Old Quarry Lane"),
    ("it went to 9 N. Elm Rd instead", "9 N. Elm Rd"),
    # a street word alone after the number, after an address cue
    ("I moved to 2588 Broadway last month", "2588 Broadway"),
    ("my address is 14 Esplanade", "14 Esplanade"),
    # other countries' street lines
    ("Via Giuseppe Verdi 14, Milano", "Via Giuseppe Verdi 14"),
    ("Calle de Alcalá 45, Madrid", "Calle de Alcalá 45"),
    ("Rua Augusta, 120 Lisboa", "Rua Augusta, 120"),
    ("livraison au 12, rue de la Paix", "12, rue de la Paix"),
    ("Lieferung an Lindenstraße 7a bitte", "Lindenstraße 7a"),
    ("adres: Keizerslaan 5, Brussel", "Keizerslaan 5"),
    ("skicka till Storgatan 5, Stockholm", "Storgatan 5"),
    ("доставка: ул. Ленина, д. 5", "ул. Ленина, д. 5"),
    ("cím: Petőfi utca 3", "Petőfi utca 3"),
    ("Avenida Paulista, 1578 São Paulo", "Avenida Paulista, 1578"),
    # PO boxes
    ("send to PO Box 4411, Reno", "PO Box 4411"),
    ("my address is P.O. Box 88", "P.O. Box 88"),
    ("Postfach 12 34 56, 10115 Berlin", "Postfach 12 34 56"),
    ("Apartado de correos 321, Sevilla", "Apartado de correos 321"),
    # postcodes
    ("the postcode is SW1A 1AA", "SW1A 1AA"),
    ("deliver to EC1V 9HX please", "EC1V 9HX"),
    ("Manchester M1 1AE, United Kingdom", "M1 1AE"),
    ("my Eircode is D02 X285", "D02 X285"),
    ("ship to A65 F4E2 in Ireland", "A65 F4E2"),
    ("New York, NY 10025", "10025"),
    ("zip 94043 please", "94043"),
    ("PLZ: 80331", "80331"),
    ("código postal 28013", "28013"),
    # Japanese and Korean
    ("住所は〒150-0002 東京都渋谷区渋谷2-21-1です", "東京都渋谷区渋谷2-21-1"),
    ("大阪府大阪市北区梅田3丁目1番1号に送ってください", "大阪府大阪市北区梅田3丁目1番1号"),
    ("주소: 서울시 강남구 테헤란로 123", "테헤란로 123"),
]


@pytest.mark.parametrize("text, value", ADDRESSES)
def test_addresses_are_found(deidentifier, text, value):
    spans = deidentifier.detect(text)
    at = text.find(value)
    assert any(sp.entity == "STREET_ADDRESS" and sp.start <= at and sp.end >= at + len(value) for sp in spans), \
        [(text[sp.start:sp.end], sp.entity) for sp in spans]


@pytest.mark.parametrize("text", [
    "the order 12345 has 2 items at $19.99",
    "flight UA 931 leaves at 10:30 from Gate 4",
    "Standard Deviation 2 and Data Lake 3 and Microsoft Outlook 365",
    "we added 2 Custom Fields and 3 Data Centers",
    "upgrade the M2 8GB model, or the 16GB one",
    "Windows Server 2019 in the Copenhagen 2 cluster",
    "I bought 3 Gift Cards and 2 Travel Certificates",
    "the 5 Star Hotel had 2 Queen Beds",
    "press F5 then F12, ticket T-4411 is open",
    "it costs EUR 45 or 3 payments of 15",
    "error 404 Not Found on port 8080",
    "Version 2 Lane detection fails",
    "tracking number 1Z999AA10123456784",
    "the R. Jones 3 album",
    "see section 4 Main Features",
])
def test_numbers_that_are_not_addresses_stay(text):
    recognizer = AddressRecognizer()
    found = [text[r.start:r.end] for r in recognizer.analyze(text, ["STREET_ADDRESS"])]
    assert not found, found


def test_an_address_in_a_json_tool_result_is_masked(deidentifier):
    ticket = Ticket(ticket_id="T-A", origin=SourceRef("x.jsonl", line=1), events=[
        Event("customer", "Where is my parcel? I live at 57 Holloway Mews."),
        Event("tool_call", call_id="c1", name="TrackParcel", arguments={"id": "P-1"}),
        Event("tool_result", call_id="c1", content={"events": [{"note": "left at PO Box 4411, Reno NV"},
                                                               {"note": "postcode SW1A 1AA checked"}],
                                                    "items": 2})])
    clean, counts = deidentifier.deidentify(ticket)
    dumped = str(clean.events[2].content) + clean.events[0].text
    for value in ("Holloway", "4411", "SW1A 1AA"):
        assert value not in dumped
    assert clean.events[2].content["items"] == 2 and counts["STREET_ADDRESS"] >= 3


def test_the_street_words_come_from_fakers_locales():
    after, english, before, glued = street_words()
    assert {"Mews", "Street", "Crescent", "utca", "ул."} <= after
    assert {"Mews", "Street"} <= english and "utca" not in english
    assert {"Calle", "Rua", "rue", "Via", "Avenida"} <= before
    assert {"straße", "gatan", "laan", "vej", "katu"} <= glued
    assert not {"Center", "Gate", "Port", "Key", "Field"} & after  # everyday words in tickets
