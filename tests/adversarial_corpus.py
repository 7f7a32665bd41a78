"""An adversarial ticket corpus of our own, with its ground truth.

Every leak class of the privacy issue is planted several times, each time
with freshly generated values (Faker, fixed seed) and in variants the issue
did not list: values as JSON keys at several depths and inside lists, in
ticket ids, categories, channels, statuses, knowledge doc ids and tool
names; the same name in another letter case; secrets of many formats;
cards and phones with odd separators; values split over two customer
messages; obfuscated and URL-encoded e-mails; European and Chinese formats.

:func:`build` returns the raw tickets (the native JSON format) and
``planted``: every personal value or secret put in, with its class.  A class
is ``structured`` (e-mails, phones, cards, IPs, IBANs, national ids, account
handles), ``secret`` (keys, tokens, passwords) or ``name`` (a person's
name).  Sentences of ``MUST_SURVIVE`` words are mixed in: none of them is
personal data and none may be masked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from faker import Faker

from cirrus.checksums import luhn

MUST_SURVIVE = [
    "Flights from Atlanta to Las Vegas were delayed by the storm.",
    "The Dallas team escalated it to the devs, much simpler for the devs.",
    "Our Phoenix office and the Boston office both use the Premium plan.",
    "Grace period ends on Friday; the Basic tier has no grace period.",
    "Please restart Nginx, then clear the Redis cache and check Grafana.",
    "The Hangzhou region and the Singapore region showed packet loss.",
    # (an order number identifies a customer: contract 2, masked; its amounts and counts survive)
    "The parcel shipped with 3 items totalling 149.99 USD.",
    "Version 2.4.1 fixed the timeout; build 1.2.3.4 is older.",
]


@dataclass
class Corpus:
    tickets: list[dict[str, Any]] = field(default_factory=list)
    planted: dict[str, str] = field(default_factory=dict)  # value -> class

    def plant(self, value: str, kind: str) -> str:
        self.planted[value] = kind
        return value


def _card(rng: random.Random, prefix: str = "4", length: int = 16) -> str:
    while True:
        digits = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix)))
        if luhn(digits) and len(set(digits)) > 3:
            return digits


def _cn_resident_id(rng: random.Random) -> str:
    body = f"{rng.choice(['110105', '330106', '440305', '510104'])}{rng.randint(1960, 2002)}" \
           f"{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{rng.randint(100, 999)}"
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    check = "10X98765432"[sum(int(d) * w for d, w in zip(body, weights)) % 11]
    return body + check


def _alnum(rng: random.Random, n: int, alphabet: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _events(*turns: tuple[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for n, (role, payload) in enumerate(turns, 1):
        if role in ("customer", "agent", "system"):
            events.append({"role": role, "text": payload})
        elif role == "tool_call":
            name, arguments = payload
            events.append({"role": "tool_call", "call_id": f"c{n}", "name": name, "arguments": arguments})
        else:
            events.append({"role": "tool_result", "call_id": f"c{n - 1}", "content": payload})
    return events


def build(seed: int = 7, rounds: int = 4) -> Corpus:
    """The corpus: ``rounds`` instances of every scenario, each with new values."""
    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    corpus = Corpus()
    for r in range(rounds):
        _round(corpus, fake, rng, r)
    return corpus


def _person(corpus: Corpus, fake: Faker) -> tuple[str, str, str]:
    first, last = fake.first_name(), fake.last_name()
    full = f"{first} {last}"
    corpus.plant(full, "name")
    return first, last, full


def _round(corpus: Corpus, fake: Faker, rng: random.Random, r: int) -> None:  # noqa: PLR0915 - one scenario list
    p = corpus.plant
    survive = MUST_SURVIVE[r % len(MUST_SURVIVE)]
    survive2 = MUST_SURVIVE[(r + 4) % len(MUST_SURVIVE)]
    tickets = corpus.tickets

    # 1. JSON object keys at any depth, in lists, in tool results
    first, last, full = _person(corpus, fake)
    email = p(f"{first.lower()}.{last.lower()}{rng.randint(10, 99)}@{fake.free_email_domain()}", "structured")
    phone = p(f"+1 {rng.randint(201, 989)} {rng.randint(200, 989)} {rng.randint(1000, 9999)}", "structured")
    tickets.append({
        "ticket_id": f"ADV-{r}-keys", "status": "resolved",
        "events": _events(
            ("customer", f"Hi, I am {full}. Please move the contacts over. {survive}"),
            ("tool_call", ("lookup_contacts", {"by_email": {email: {"notify": True}}, "owners": [{full: phone}]})),
            ("tool_result", {"contacts": {email: {"name": full, "phones": {phone: "mobile"}}},
                             "meta": [{"deep": {"deeper": {email.upper(): 1}}}]}),
            ("agent", f"Thanks {first}, the contacts are moved. {survive2}"),
        ),
    })

    # 2. identifiers and metadata carrying personal data
    email2 = p(fake.email(), "structured")
    digits = f"1415{rng.randint(2000000, 9999999)}"
    p(digits, "structured")
    tickets.append({
        "ticket_id": f"ticket-{email2}", "category": f"billing {email2}", "channel": f"sms:+{digits}",
        "status": "resolved",
        "knowledge": [{"doc_id": f"notes-for-{email2}", "title": "Callback policy",
                       "text": "We call customers back within one business day."}],
        "events": _events(
            ("customer", f"Call me back please, the number is +{digits}."),
            ("tool_call", (f"callback__{digits}", {"when": "today"})),
            ("tool_result", {"scheduled": True}),
            ("agent", "A callback is scheduled for today."),
        ),
    })

    # 3. the same value in another letter case, and a handle
    first3, last3, full3 = _person(corpus, fake)
    handle = p(f"{first3.lower()}_{last3.lower()}_{rng.randint(1000, 9999)}", "structured")
    tickets.append({
        "ticket_id": f"ADV-{r}-case", "status": "resolved",
        "events": _events(
            ("customer", f"My name is {full3} and my username is {handle}."),
            ("tool_call", ("find_account", {"name_or_account_id": full3.lower(), "login": handle.upper()})),
            ("tool_result", {"owner": full3.upper(), "user": handle}),
            ("agent", f"I found the account of {full3}."),
        ),
    })

    # 4. secrets of many formats
    aws_secret = p(_alnum(rng, 40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"), "secret")
    aliyun_secret = p(_alnum(rng, 30), "secret")
    jwt = p("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + _alnum(rng, 36) + "." + _alnum(rng, 43), "secret")
    ya29 = p("ya29." + _alnum(rng, 60), "secret")
    slack = p(f"xoxb-{rng.randint(10**11, 10**12 - 1)}-{rng.randint(10**11, 10**12 - 1)}-{_alnum(rng, 24)}", "secret")
    pem_body = p(_alnum(rng, 64), "secret")
    url_key = p(_alnum(rng, 32, "0123456789abcdef"), "secret")
    password = p(f"hunter{rng.randint(10, 99)}!{_alnum(rng, 3)}", "secret")
    pwd = p(f"Tr0ub4dor&{rng.randint(100, 999)}", "secret")
    json_password = p(f"S3cr3t-{_alnum(rng, 10)}", "secret")
    api_key = p(f"key_{_alnum(rng, 28)}", "secret")
    access_key = p("AKIA" + _alnum(rng, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), "secret")
    ltai = p("LTAI" + _alnum(rng, 20), "secret")
    stripe = p("sk_live_" + _alnum(rng, 24), "secret")
    github = p("ghp_" + _alnum(rng, 36), "secret")
    basic_user, basic_pw = "deploy", p(f"pw{_alnum(rng, 12)}", "secret")
    tickets.append({
        "ticket_id": f"ADV-{r}-secrets", "status": "resolved",
        "events": _events(
            ("customer", f"Our AccessKey is {access_key} with secret {aws_secret}, the Aliyun one is {ltai} "
                         f"with AccessKeySecret: {aliyun_secret}."),
            ("customer", f"The API call sends Authorization: Bearer {jwt} and sometimes {ya29}."),
            ("customer", f"Slack bot token {slack}; webhook https://hooks.example-corp.io/x?api_key={url_key}&v=2"),
            ("customer", f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"),
            ("customer", f"password: {password} and the db pwd is {pwd}. Stripe {stripe}, GitHub {github}."),
            ("customer", f"The mirror is https://{basic_user}:{basic_pw}@mirror.example-corp.io/repo"),
            ("tool_call", ("rotate_keys", {"password": json_password, "api_key": api_key,
                                           "nested": {"client": {"access_key_secret": aliyun_secret}}})),
            ("tool_result", {"rotated": True, "old": {"token": jwt}}),
            ("agent", "All the keys were rotated; please never post them in a ticket again."),
        ),
    })

    # 5. separators: cards with dots, phones with dots and slashes, an IBAN
    card = _card(rng)
    p(card, "structured")
    dotted = ".".join(card[i:i + 4] for i in range(0, 16, 4))
    phone5 = f"{rng.randint(201, 989)}{rng.randint(200, 989)}{rng.randint(1000, 9999)}"
    p(phone5, "structured")
    iban = p(fake.iban(), "structured")
    tickets.append({
        "ticket_id": f"ADV-{r}-separators", "status": "resolved",
        "events": _events(
            ("customer", f"Charge card {dotted} please, or call {phone5[:3]}.{phone5[3:6]}.{phone5[6:]}."),
            ("customer", f"Refunds go to IBAN {iban}."),
            ("tool_call", ("charge", {"card": card, "callback": f"{phone5[:3]}/{phone5[3:6]}-{phone5[6:]}"})),
            ("tool_result", {"ok": True, "iban": iban.replace(" ", "")}),
            ("agent", "The card was charged and the refund account is noted."),
        ),
    })

    # 6. values split over two messages of the same customer turn
    local = f"split{r}.part{rng.randint(100, 999)}"
    split_email = p(f"{local}@gmail.com", "structured")
    card6 = _card(rng, "5")
    p(card6, "structured")
    tickets.append({
        "ticket_id": f"ADV-{r}-split", "status": "resolved",
        "events": _events(
            ("customer", f"my mail is {local}@"),
            ("customer", "gmail.com"),
            ("customer", f"card {card6[:8]}"),
            ("customer", card6[8:]),
            ("agent", "Thanks, I have both."),
        ),
    })

    # 7. obfuscated and URL-encoded e-mails
    a, b = fake.first_name().lower(), fake.last_name().lower()
    obf1 = p(f"{a}.{b}@gmail.com", "structured")
    obf2_user = f"{a}{rng.randint(10, 99)}"
    obf2 = p(f"{obf2_user}@outlook.com", "structured")
    obf3 = p(f"urlenc.{b}{r}@proton.me", "structured")
    tickets.append({
        "ticket_id": f"ADV-{r}-obfuscated", "status": "resolved",
        "events": _events(
            ("customer", f"Write to {a} dot {b} at gmail dot com or {obf2_user} [at] outlook [dot] com."),
            ("customer", f"The form sent me to https://forms.example-corp.io/u?mail={quote(obf3)}"),
            ("agent", "Noted, we will write to you."),
        ),
    })

    # 8. other countries' formats, IPs, a Chinese id and mobile
    uk = p(f"+44 20 7946 {rng.randint(1000, 9999)}", "structured")
    fr = p(f"06 {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)}",
           "structured")
    cn_mobile = p(f"13{rng.randint(0, 9)}{rng.randint(10000000, 99999999)}", "structured")
    cn_id = p(_cn_resident_id(rng), "structured")
    ip4 = p(f"47.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}", "structured")
    ip6 = p(f"2408:4002:{rng.randint(4096, 65535):x}::{rng.randint(16, 255):x}", "structured")
    ssn = p(f"{rng.randint(100, 665)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}", "structured")
    tickets.append({
        "ticket_id": f"ADV-{r}-formats", "status": "resolved",
        "events": _events(
            ("customer", f"London office {uk}, Paris {fr}, 手机 {cn_mobile}，身份证号{cn_id}。"),
            ("customer", f"Our server {ip4} and the IPv6 {ip6} are blocked. SSN on file: {ssn}."),
            ("tool_call", ("unblock", {"ips": [ip4, ip6], "owner_ssn": ssn})),
            ("tool_result", {"unblocked": [ip4, ip6]}),
            ("agent", "Both addresses are unblocked."),
        ),
    })

    # 9. a bad ticket whose id carries an e-mail: quarantined, id pseudonymous
    bad = p(fake.email(), "structured")
    tickets.append({"ticket_id": f"broken-{bad}", "status": "resolved", "events": "not a list"})

    # 10. a tool call whose result never came
    tickets.append({
        "ticket_id": f"ADV-{r}-unanswered", "status": "resolved",
        "events": _events(
            ("customer", "Please check my order status."),
            ("tool_call", ("order_status", {"order": f"ORD-{r}"})),
            ("agent", "The order system did not answer; I escalated it."),
        ),
    })

    # 11. names where tickets carry them: signatures, greetings, third
    # parties, tool results, lower case, possessives, initials after them
    names = [_person(corpus, fake) for _ in range(6)]
    (f1, l1, n1), (f2, l2, n2), (f3, l3, n3), (f4, l4, n4), (f5, l5, n5), (f6, l6, n6) = names
    tickets.append({
        "ticket_id": f"ADV-{r}-names", "status": "resolved",
        "events": _events(
            ("customer", f"Hello, this is {n1} from accounting. {survive}"),
            ("customer", f"My colleague {n2} set up the account, and {n3}'s card was charged."),
            ("agent", f"Thank you, {f1}. Could you confirm whether {n4} is still an admin?"),
            ("customer", f"yes, {n4.lower()} is admin. Also add {n5} (our CFO) as billing contact.\n\nBest regards,\n{n6}"),
            ("tool_call", ("add_contact", {"contact_name": n5, "role": "billing"})),
            ("tool_result", {"added": {"full_name": n5.upper(), "by": n1}}),
            ("agent", f"Done: {n5} is a billing contact now. {survive2}"),
        ),
    })
