from __future__ import annotations

import json
import re

import pytest

from cirrus.config import ReplacementConfig
from cirrus.ingest.deid.deidentify import Span, resolve_overlaps
from cirrus.ingest.deid.pseudonyms import Pseudonymizer, mask
from cirrus.schema import Event, KnowledgeDoc, SourceRef, Ticket


# --- pure masking ---------------------------------------------------------------

@pytest.mark.parametrize(
    ("entity", "value", "expected"),
    [
        ("PERSON", "James", "Ja***"),
        ("PERSON", "Laura Chen", "La*** Ch***"),
        ("PERSON", "Li", "L***"),
        ("PHONE_NUMBER", "15712343190", "157****3190"),
        ("PHONE_NUMBER", "+1 415 555 0199", "+1 41* *** 0199"),
        ("CREDIT_CARD", "4111 1111 1111 1111", "**** **** **** 1111"),
        ("IP_ADDRESS", "47.98.12.3", "47.***.***.***"),
        ("EMAIL_ADDRESS", "laura.chen@example.com", "la***@e***.com"),
        ("CLOUD_ACCESS_KEY", "AKIAIOSFODNN7EXAMPLE", "AKIA****************"),
        ("RESOURCE_ID", "i-bp1abc", "i-bp***c"),
        ("URL_CREDENTIALS", "https://admin:pw@mail.example.org/x", "https://***:***@mail.example.org/x"),
        ("DATE_OF_BIRTH", "1990-04-05", "1990-**-**"),
    ],
)
def test_mask_keeps_shape_and_hides_value(entity, value, expected):
    assert mask(entity, value) == expected


def test_pseudonymizer_is_consistent_and_collision_free():
    p = Pseudonymizer(ReplacementConfig())
    first = p.replace("PERSON", "James")
    assert p.replace("PERSON", "James") == first
    other = p.replace("PERSON", "Jane")  # masks to Ja*** too
    assert other != first and other.startswith("Ja***")


def test_tag_style_numbers_per_entity():
    p = Pseudonymizer(ReplacementConfig(style="tag"))
    assert p.replace("PERSON", "Ann") == "<PERSON_1>"
    assert p.replace("PERSON", "Bob") == "<PERSON_2>"
    assert p.replace("PERSON", "Ann") == "<PERSON_1>"
    assert p.replace("EMAIL_ADDRESS", "a@b.org") == "<EMAIL_ADDRESS_1>"


def test_resolve_overlaps_prefers_specific_type_then_length():
    spans = [Span(0, 19, "PHONE_NUMBER", 0.9), Span(0, 19, "CREDIT_CARD", 0.6), Span(25, 30, "PERSON", 0.8),
             Span(22, 35, "STREET_ADDRESS", 0.7)]
    kept = resolve_overlaps(spans)
    assert [(s.entity, s.start) for s in kept] == [("CREDIT_CARD", 0), ("STREET_ADDRESS", 22)]


# --- detection --------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "value", "entity"),
    [
        ("我的手机号13912345678请回电", "13912345678", "PHONE_NUMBER"),
        ("reach me on +44 20 7946 0958 after 5pm", "+44 20 7946 0958", "PHONE_NUMBER"),
        ("my key LTAI5tB8xyzABCDEFGHIJKLM leaked", "LTAI5tB8xyzABCDEFGHIJKLM", "CLOUD_ACCESS_KEY"),
        ("export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx123456", "sk-abcdefghijklmnopqrstuvwx123456", "CLOUD_ACCESS_KEY"),
        ("instance i-bp1abc2def3ghi is stopped", "i-bp1abc2def3ghi", "RESOURCE_ID"),
        ("my account id is 1234567890123456", "1234567890123456", "ACCOUNT_ID"),
        ("ID card 110101199003071234 for the filing", "110101199003071234", "CN_RESIDENT_ID"),
        ("login at https://admin:Secr3t@mail.example.org/webmail", "https://admin:Secr3t@mail.example.org/webmail", "URL_CREDENTIALS"),
        ("server 2001:db8:85a3::8a2e:370:7334 refuses ssh", "2001:db8:85a3::8a2e:370:7334", "IP_ADDRESS"),
        ("card 5555 5555 5555 4444 was charged twice", "5555 5555 5555 4444", "CREDIT_CARD"),
        ("Hi, this is Laura Chen from the finance team", "Laura Chen", "PERSON"),
        ("ship it to 975 Sunset Drive please", "975 Sunset Drive", "STREET_ADDRESS"),
    ],
)
def test_detects_cloud_ticket_identifiers(deidentifier, text, value, entity):
    spans = deidentifier.detect(text)
    found = {(text[s.start : s.end], s.entity) for s in spans}
    assert (value, entity) in found, found


@pytest.mark.parametrize(
    "text",
    [
        "The reboot finished at 2025-03-01 10:02:33 and took 45 seconds.",
        "Open port 22 and 3389 in the security group, then retry.",
        "Your invoice total is 1,280.50 CNY for March.",
        "Use the ECS console to reset the password.",
    ],
)
def test_no_false_positives_on_ordinary_ticket_text(deidentifier, text):
    assert deidentifier.detect(text) == []


# --- whole tickets ----------------------------------------------------------------

def _ticket() -> Ticket:
    return Ticket(
        ticket_id="T-1",
        origin=SourceRef("x.jsonl", line=1),
        knowledge=[KnowledgeDoc("kb", "Contact", "Escalations go to Laura Chen at laura.chen@example.com.")],
        events=[
            Event("customer", "This is Laura Chen, my server 47.98.12.3 is down; call +1 415 555 0199."),
            Event("customer", "", ocr=["ssh: connect to host 47.98.12.3 port 22: timed out"]),
            Event("agent", "Thanks, Laura. Checking 47.98.12.3 now."),
            Event("tool_call", call_id="c1", name="DescribeInstance",
                  arguments={"ip": "47.98.12.3", "owner": {"first_name": "Laura", "last_name": "Chen"},
                             "port": 22, "account_id": 1234567890123456, "ratio": 0.5, "dry_run": False}),
            Event("tool_result", call_id="c1",
                  content={"PublicIp": "47.98.12.3", "Contact": "laura.chen@example.com", "Cpu": 4,
                           "Notes": ["owner Laura Chen", None]}),
        ],
    )


def test_ticket_replacements_are_consistent_everywhere(deidentifier):
    clean, counts = deidentifier.deidentify(_ticket())
    dump = json.dumps([e.text for e in clean.events] + [e.ocr for e in clean.events] +
                      [e.arguments for e in clean.events] + [e.content for e in clean.events] +
                      [d.text for d in clean.knowledge], ensure_ascii=False)
    for original in ("Laura", "Chen", "47.98.12.3", "laura.chen@example.com", "415 555 0199", "1234567890123456"):
        assert original not in dump
    ip_mask = clean.events[3].arguments["ip"]
    assert ip_mask != "47.98.12.3"
    assert clean.events[4].content["PublicIp"] == ip_mask
    assert ip_mask in clean.events[0].text and ip_mask in clean.events[2].text and ip_mask in clean.events[1].ocr[0]
    email_mask = clean.events[4].content["Contact"]
    assert email_mask in clean.knowledge[0].text
    assert counts["IP_ADDRESS"] >= 5 and counts["PERSON"] >= 3


def test_json_stays_json_and_plain_numbers_stay_numbers(deidentifier):
    clean, _ = deidentifier.deidentify(_ticket())
    args = clean.events[3].arguments
    assert args["port"] == 22 and args["ratio"] == 0.5 and args["dry_run"] is False
    assert isinstance(args["account_id"], str) and args["account_id"].endswith("3456")
    assert clean.events[4].content["Cpu"] == 4 and clean.events[4].content["Notes"][1] is None
    json.dumps(clean.events[4].content)


def test_allow_list_values_are_kept(deidentifier):
    spans = deidentifier.detect("Thanks for choosing Nimbus Cloud, the ECS team")
    assert all("Nimbus" not in "Thanks for choosing Nimbus Cloud, the ECS team"[s.start : s.end] for s in spans)


def test_named_fields_are_personal_data_even_when_on_the_allow_list(deidentifier):
    ticket = Ticket("T-2", [Event("tool_result", call_id="c", content={"last_name": "Jenkins", "tool": "Jenkins"}),
                            Event("tool_call", call_id="c", name="x", arguments={})], SourceRef("x"))
    clean, _ = deidentifier.deidentify(ticket)
    # once known as a name in this ticket, the value is replaced everywhere in it
    assert clean.events[0].content == {"last_name": "Je***", "tool": "Je***"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("allow 10.0.0.0/8 and 172.16.0.12/32 only", ["10.0.0.0/8", "172.16.0.12/32"]),
        ("source 2408:4003:1f40:9a00::/64, please", ["2408:4003:1f40:9a00::/64"]),
        ("server 2001:db8:85a3::8a2e:370:7334 refuses ssh", ["2001:db8:85a3::8a2e:370:7334"]),
        ("mapped ::ffff:47.98.12.3 and link fe80::1%eth0", ["::ffff:47.98.12.3", "fe80::1%eth0"]),
        ("my address is 2001:db8::1: can I connect?", ["2001:db8::1"]),
        ("at 47.98.12.3.", ["47.98.12.3"]),
        # not addresses: a time, a version, a MAC, bare colons, an octet out of range, a bad prefix
        ("call at 12:30:45 or see v1.2.3.4.5, mac 00:1A:2B:3C:4D:5E, C++ a::b or std::cout", []),
        ("999.1.1.1 and 10.0.0.1/33 and ::", []),
    ],
)
def test_ip_addresses_are_whole_and_validated(text, expected):
    from cirrus.ingest.deid.recognizers import IpAddressRecognizer

    found = [text[r.start:r.end] for r in IpAddressRecognizer().analyze(text, ["IP_ADDRESS"])]
    assert found == expected


def test_a_value_found_once_is_replaced_in_every_letter_case_and_digit_layout(deidentifier):
    """The ABCD case: "Crystal Minh" in the text, "crystal minh" as a tool
    argument; a phone written with spaces in the text, with dots and dashes
    elsewhere; single name words keep their case ("Will" does not mask "will")."""
    ticket = Ticket(
        ticket_id="T-2", origin=SourceRef("x.jsonl", line=2),
        events=[
            Event("customer", "Hi, this is Crystal Minh, call me on +1 415 555 0199. Will you check it?"),
            Event("agent", "Sure, we will check it now."),
            Event("tool_call", call_id="c1", name="pull_up_account",
                  arguments={"name_or_account_id": "crystal minh", "backup": "CRYSTAL MINH",
                             "phone": "415.555.0199", "alt": "(415) 555-0199"}),
            Event("tool_result", call_id="c1", content={"note": "callback 4155550199 requested"}),
        ])
    clean, _ = deidentifier.deidentify(ticket)
    dump = json.dumps([e.text for e in clean.events] + [e.arguments for e in clean.events] +
                      [e.content for e in clean.events], ensure_ascii=False).lower()
    for original in ("crystal", "minh", "555"):  # phone masks keep the last 4 digits by design
        assert original not in dump, original
    arguments = clean.events[2].arguments
    assert arguments["phone"] != "415.555.0199" and arguments["alt"] != "(415) 555-0199"
    assert "we will check it now" in clean.events[1].text  # an ordinary word is left alone


@pytest.mark.parametrize(("text", "value", "entity"), [
    ("mail jane dot roe at gmail dot com please", "jane dot roe at gmail dot com", "EMAIL_ADDRESS"),
    ("it is jroe77 [at] outlook [dot] com", "jroe77 [at] outlook [dot] com", "EMAIL_ADDRESS"),
    ("reach me: jane (at) example (dot) org", "jane (at) example (dot) org", "EMAIL_ADDRESS"),
    ("J.Doe {at} mail.example.co.uk wrote", "J.Doe {at} mail.example.co.uk", "EMAIL_ADDRESS"),
    ("see urlenc.person%40proton.me now", "urlenc.person%40proton.me", "EMAIL_ADDRESS"),
    ("card 4111.1111.1111.1111 thanks", "4111.1111.1111.1111", "CREDIT_CARD"),
    ("card 5500-0000-0000-0004 and 4012 8888 8888 1881", "5500-0000-0000-0004", "CREDIT_CARD"),
])
def test_obfuscated_emails_and_cards_with_any_separator_are_found(deidentifier, text, value, entity):
    assert (value, entity) in [(text[s.start:s.end], s.entity) for s in deidentifier.detect(text)]


@pytest.mark.parametrize("text", [
    "I am at home. Com on.", "meet at the office dot com", "we are at support.example.com",
    "version 4111.1111.1111.1112 of the agent",  # not Luhn-valid
    "the ECS at cn-hangzhou [dot] region",  # no address shape
])
def test_look_alikes_are_not_emails_or_cards(deidentifier, text):
    assert not [s for s in deidentifier.detect(text) if s.entity in ("EMAIL_ADDRESS", "CREDIT_CARD")]


SECRETS = {
    "aws": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    "aliyun": ("AccessKeySecret: 4rjkdfKJ83kdfjLKJ38djfkLKJ3k2d", "4rjkdfKJ83kdfjLKJ38djfkLKJ3k2d"),
    "bearer": ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXZhbHVl",
               "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXZhbHVl"),
    "google": ("use token ya29.a0AfH6SMBx3exampletoken_value-x9", "ya29.a0AfH6SMBx3exampletoken_value-x9"),
    "slack": ("bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-123456789012-1234567890123"),
    "stripe": ("key sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    "query": ("fetch https://api.example.net/v2/items?api_key=k9f8e7d6c5b4a3&page=2", "k9f8e7d6c5b4a3"),
    "cue": ("my password: hunter2 and the pwd is Sup3r-S3cret!", "hunter2"),
    "cue2": ("my password: hunter2 and the pwd is Sup3r-S3cret!", "Sup3r-S3cret!"),
    "pem": ("here:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7xq9Zf2\nQ1w2e3r4t5y6u7i8o9p0\n"
            "-----END RSA PRIVATE KEY-----\nthanks", "Q1w2e3r4t5y6u7i8o9p0"),
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_secrets_of_every_kind_are_masked_in_text(deidentifier, kind):
    text, secret = SECRETS[kind]
    ticket = Ticket(ticket_id="T-3", origin=SourceRef("x.jsonl", line=3),
                    events=[Event("customer", text), Event("agent", "Rotate it now, please.")])
    clean, counts = deidentifier.deidentify(ticket)
    assert secret not in clean.events[0].text and secret[:12] not in clean.events[0].text
    assert counts["SECRET"] + counts["CLOUD_ACCESS_KEY"] >= 1


def test_secret_json_fields_are_masked_whole(deidentifier):
    ticket = Ticket(ticket_id="T-4", origin=SourceRef("x.jsonl", line=4), events=[
        Event("customer", "Can you log in for me?"),
        Event("tool_call", call_id="c1", name="Login",
              arguments={"user": "ops", "password": "letmein", "api_key": "plainwordkey", "access_key_secret": "x"}),
        Event("tool_result", call_id="c1", content={"token": "opaque", "ok": True})])
    clean, _ = deidentifier.deidentify(ticket)
    arguments = clean.events[1].arguments
    masked = [arguments["password"], arguments["api_key"], arguments["access_key_secret"], clean.events[2].content["token"]]
    for value in masked:  # stars, and a ~n suffix where two secrets would mask alike
        assert re.fullmatch(r"\*{8,40}(?:~\d+)?", value), value
    assert len(set(masked)) == 4 and arguments["user"] == "ops"


@pytest.mark.parametrize("text", [
    "the token is expired, please log in again", "Your password is incorrect; reset it from the console",
    "request id 5f3e9a1c-77b0-4c2e-9d1a-0b6c2f1e8a44", "instance i-bp1abc is running", "the secret is safe",
    "password: ******** (masked)",
])
def test_ordinary_sentences_about_secrets_keep_their_words(deidentifier, text):
    assert not [s for s in deidentifier.detect(text) if s.entity == "SECRET"]


def test_a_value_split_over_two_messages_is_replaced_in_both(deidentifier):
    ticket = Ticket(ticket_id="T-5", origin=SourceRef("x.jsonl", line=5), events=[
        Event("customer", "my mail is splitpart.one@"), Event("customer", "gmail.com thanks"),
        Event("customer", "card 4111 1111"), Event("customer", "1111 1111 for the refund"),
        Event("agent", "Noted, we will refund it.")])
    clean, _ = deidentifier.deidentify(ticket)
    texts = [e.text for e in clean.events]
    assert "splitpart" not in texts[0] and "gmail" not in texts[1], texts
    assert "4111 1111" not in texts[2] and "1111 1111" not in texts[3], texts
    assert texts[4] == "Noted, we will refund it."


@pytest.mark.parametrize("text", [
    "I want to fly from Atlanta (ATL) to Philadelphia (PHL) next week.",
    "The flight from Houston (IAH) to Boston (BOS) is delayed.",
    "Book it to Dallas/Fort Worth (DFW), please.", "I land at Denver International Airport at noon.",
    "It is much simpler for the devs to do it.",
])
def test_places_and_lower_case_words_are_not_people(deidentifier, text):
    assert not [s for s in deidentifier.detect(text) if s.entity == "PERSON"], text


@pytest.mark.parametrize(("text", "name"), [
    ("This is Laura Chen (LCH) speaking", "Laura Chen"), ("I spoke to Jane (CTO) yesterday", "Jane"),
    ("Thanks, Jane (JRX)", "Jane"), ("my name is vitoria", "vitoria"),
])
def test_names_next_to_codes_stay_names(deidentifier, text, name):
    assert name in [text[s.start:s.end] for s in deidentifier.detect(text) if s.entity == "PERSON"]


def test_windows_cover_the_text_with_overlaps():
    from cirrus.ingest.deid.deidentify import windows

    text = " ".join(f"word{i}" for i in range(3000))
    parts = windows(text, size=1000, overlap=100)
    assert parts[0][0] == 0 and parts[-1][0] + len(parts[-1][1]) == len(text)
    for (start, piece), (next_start, _) in zip(parts, parts[1:]):
        assert text[start:start + len(piece)] == piece and len(piece) <= 1000
        assert start < next_start <= start + len(piece) - 50  # overlapping
    assert windows("short", size=1000) == [(0, "short")]


def test_a_value_at_a_window_seam_is_found_once(deidentifier, monkeypatch):
    import cirrus.ingest.deid.deidentify as module

    monkeypatch.setattr(module, "WINDOW", 300)
    monkeypatch.setattr(module, "WINDOW_OVERLAP", 120)
    filler = "the disk is full again " * 12
    text = filler + "write to laura.chen@example.com or call +1 415 555 0199 " + filler * 3
    spans = deidentifier.detect(text, ner=False)
    found = sorted((text[s.start:s.end], s.entity) for s in spans)
    assert ("laura.chen@example.com", "EMAIL_ADDRESS") in found
    assert [v for v, e in found].count("laura.chen@example.com") == 1
