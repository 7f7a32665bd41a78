"""A held-out privacy corpus: values Cirrus's rules were not written on.

The project's own adversarial corpus (tests/adversarial_corpus.py) was
written beside the rules and is an upper bound.  This one is made by another
method and is never used to write or tune a rule (issue 26 item 7): every
planted value comes from Faker's locale providers (names, addresses, phone
numbers, e-mails, IBANs, national ids, dates of birth in the locales'
own formats and scripts), placed in ticket templates that use each kind of
place a value can sit (a sentence with a cue, a sentence without one, a JSON
tool result under a descriptive key, a JSON document inside a string), some
disguised (full-width digits, zero-width characters in e-mails).  The figure
is the share of planted values still found verbatim (or by their digits) in
what ingest writes; it is recorded as it comes out.

    .venv/bin/python benchmarks/privacy_heldout.py [--tickets 120] [--seed 7]

writes benchmarks/results/privacy_heldout.json and prints a table per class.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from faker import Faker

LOCALES = ("en_GB", "en_IN", "de_DE", "fr_FR", "es_ES", "it_IT", "ru_RU", "el_GR", "he_IL", "hi_IN", "ja_JP",
           "ko_KR", "ar_AA", "pl_PL", "nl_NL", "pt_BR")
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def _values(fake: Faker, rng: random.Random) -> dict[str, str]:
    """One value of each class from ``fake``'s locale."""
    values = {
        "name": fake.name(),
        "phone": fake.phone_number(),
        "email": fake.email(),
        "address": fake.address().replace("\n", ", "),
        "dob": fake.date_of_birth(minimum_age=18, maximum_age=90).isoformat(),
        "iban": fake.iban(),
    }
    try:
        values["national_id"] = fake.ssn()
    except AttributeError:
        pass
    return values


def _ticket(number: int, fake: Faker, rng: random.Random) -> tuple[dict, dict[str, str]]:
    """A ticket planting each class once, at a random kind of place; the
    values planted by class (as they must not appear)."""
    v = _values(fake, rng)
    planted: dict[str, str] = {}
    sentences = []
    result: dict = {"status": "ok", "plan": "standard"}
    for kind, value in v.items():
        place = rng.choice(("cue", "plain", "json", "json_string"))
        shown = value
        if kind == "phone" and rng.random() < 0.3:
            shown = value.translate(FULL_WIDTH)
        if kind == "email" and rng.random() < 0.3:
            shown = value.replace("@", "\u200b@")
        planted[f"{kind}:{place}"] = value
        if place == "cue":
            cue = {"name": "my name is", "phone": "you can call me on", "email": "my e-mail is",
                   "address": "please ship it to", "dob": "my date of birth is", "iban": "refund to IBAN",
                   "national_id": "my national id number is"}[kind]
            sentences.append(f"{cue} {shown}")
        elif place == "plain":
            sentences.append(f"{shown} is on the account")
        else:
            key = {"name": "holderName", "phone": "contactPhone", "email": "notifyEmail", "address": "shippingAddress",
                   "dob": "birthDate", "iban": "payoutIban", "national_id": "taxId"}[kind]
            if place == "json":
                result[key] = shown
            else:
                result.setdefault("payload", {})[key] = shown
    if isinstance(result.get("payload"), dict):
        result["payload"] = json.dumps(result["payload"], ensure_ascii=False)
    events = [
        {"role": "customer", "text": "Hello, my order has not arrived. " + ". ".join(sentences) + "."},
        {"role": "agent", "text": "Thank you, let me look at your account."},
        {"role": "tool_call", "call_id": "c1", "name": "GetCustomer", "arguments": {"ticket": number}},
        {"role": "tool_result", "call_id": "c1", "content": result},
        {"role": "agent", "text": "I found your order; it ships tomorrow and arrives within three days."},
    ]
    return {"ticket_id": f"H-{number:04d}", "language": "en", "events": events}, planted


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text.translate(str.maketrans("０１２３４５６７８９", "0123456789")))


def survived(value: str, written: str, written_digits: str) -> bool:
    """Whether ``value`` can still be read in what was written: verbatim,
    or (for a value of 7+ digits) by its digits."""
    if value in written:
        return True
    digits = _digits(value)
    return len(digits) >= 7 and digits in written_digits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=128)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    from cirrus.config import load_pipeline
    from cirrus.ingest.run import IngestOptions, run_ingest

    rng = random.Random(args.seed)
    tickets, planted = [], []
    for number in range(args.tickets):
        locale = LOCALES[number % len(LOCALES)]
        fake = Faker(locale)
        fake.seed_instance(args.seed * 1000 + number)
        ticket, values = _ticket(number, fake, rng)
        tickets.append(ticket)
        planted.append((locale, values))
    with tempfile.TemporaryDirectory() as tmp:
        raw, workspace = Path(tmp) / "raw", Path(tmp) / "ws"
        raw.mkdir()
        (raw / "heldout.jsonl").write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in tickets) + "\n",
                                           encoding="utf-8")
        started = time.perf_counter()
        run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=load_pipeline(), progress=False))
        seconds = time.perf_counter() - started
        written = "\n".join(p.read_text(encoding="utf-8") for p in sorted(workspace.rglob("*"))
                            if p.is_file() and p.suffix in (".jsonl", ".json", ".yaml"))
    written_plain = written.encode().decode("unicode_escape", "ignore") if "\\u" in written else written
    text = written + "\n" + written_plain
    digits = _digits(text)
    by_class: dict[str, Counter] = defaultdict(Counter)
    by_locale: dict[str, Counter] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    for locale, values in planted:
        for key, value in values.items():
            kind, place = key.split(":")
            leaked = survived(value, text, digits)
            for counter in (by_class[kind], by_class[f"{kind} ({place})"], by_locale[locale]):
                counter["planted"] += 1
                counter["survived"] += leaked
            if leaked and len(examples[kind]) < 3:
                examples[kind].append(f"{locale}: {place}")
    total = Counter()
    for kind, counter in by_class.items():
        if "(" not in kind:
            total.update(counter)
    report = {
        "command": "python benchmarks/privacy_heldout.py --tickets %d --seed %d" % (args.tickets, args.seed),
        "tickets": args.tickets, "ingest_s": round(seconds, 1),
        "survived": total["survived"], "planted": total["planted"],
        "survival_rate": round(total["survived"] / total["planted"], 4),
        "by_class": {k: dict(v) for k, v in sorted(by_class.items())},
        "by_locale": {k: dict(v) for k, v in sorted(by_locale.items())},
        "where_values_survived": dict(examples),
    }
    out = Path(__file__).parent / "results" / "privacy_heldout.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"held-out corpus: {total['survived']} of {total['planted']} planted values survived "
          f"({report['survival_rate']:.1%}); ingest {seconds:.1f} s")
    for kind, counter in sorted(by_class.items()):
        print(f"  {kind:28s} {counter['survived']:4d} / {counter['planted']:4d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
