"""Over-masking on the tau-bench airline transcripts: of all the spans the
de-identifier replaces, how many are not personal data?

    .venv/bin/python benchmarks/over_masking.py [../shared/data/tau-bench-airline/gpt-4o-airline.json]

Ground truth without hand labels: the transcripts carry their users in
structured fields (``first_name``/``last_name`` of users and passengers,
``user_id`` handles, e-mails, dates of birth, payment ids).  A replaced PERSON
span is personal when each of its words is one of those names (or a part of
a handle); a replaced span of a structured type (e-mail, card, id, key...)
is personal by its format, except a "phone number" of fewer than 10 digits
(the airline data holds no phone numbers: such a span is a payment id's
serial or a flight time).  Every other replacement counts as
over-masking and is listed with its context, so a person can check the
verdicts.  Writes ``benchmarks/results/over_masking.json``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from cirrus.config import load_pipeline
from cirrus.ingest.deid.deidentify import Deidentifier
from cirrus.ingest.readers import read_tickets
from cirrus.schema import Ticket

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json"
OUT = Path(__file__).resolve().parent / "results" / "over_masking.json"
_NAME_KEYS = {"first_name", "last_name", "name", "full_name"}
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _known_names(value: object, into: set[str]) -> None:
    """Every name word in structured fields, and the words of handles."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and key.lower() in _NAME_KEYS:
                into.update(w.lower() for w in _WORD.findall(item))
            elif isinstance(item, str) and key.lower() == "user_id":
                into.update(w for w in re.split(r"[_\d]+", item.lower()) if w)
            else:
                _known_names(item, into)
    elif isinstance(value, list):
        for item in value:
            _known_names(item, into)
    elif isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        try:
            _known_names(json.loads(value), into)
        except json.JSONDecodeError:
            pass


def main(path: Path) -> dict:
    raw = json.loads(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    _known_names(raw, names)
    deid = Deidentifier(load_pipeline().deid)
    tickets = [t for t in read_tickets(path) if isinstance(t, Ticket)]
    started = time.perf_counter()
    spans = Counter()
    over: Counter[str] = Counter()
    for ticket in tickets:
        for value, entity in deid.found_values(ticket).items():
            spans[entity] += 1
            if entity == "PERSON" and not all(w.lower() in names for w in _WORD.findall(value)):
                over[value] += 1
            elif entity == "PHONE_NUMBER" and sum(c.isdigit() for c in value) < 10:
                over[value] += 1
    elapsed = time.perf_counter() - started
    total = sum(spans.values())
    result = {
        "command": "python benchmarks/over_masking.py",
        "tickets": len(tickets),
        "known_name_words": len(names),
        "replaced_values_by_type": dict(sorted(spans.items())),
        "replaced_values": total,
        "not_personal": sum(over.values()),
        "over_masking_share": round(sum(over.values()) / total, 4) if total else None,
        "not_personal_values": sorted(over),
        "seconds": round(elapsed, 1),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    found = main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
    print(json.dumps({k: v for k, v in found.items() if k != "not_personal_values"}, indent=2))
    print("not personal:", ", ".join(found["not_personal_values"][:60]))
