#!/usr/bin/env python
"""Build the ingest-throughput corpus: tau-bench airline transcripts
replicated to N tickets, with fresh ids and perturbed personal data.

Input: the 200 tau-bench airline transcripts (``gpt-4o-airline.json``, a JSON
list of ``{task_id, trial, reward, traj, info}``).  Output: a ``.jsonl`` of N
records of the same shape, so ``cirrus ingest`` reads them as contract 1b
OpenAI transcripts, and a sidecar ``<corpus>.pii.json`` with the personal
values planted in each ticket (the ground truth for recall).

Record ``j`` is copy ``j // 200`` of transcript ``j % 200``:

* ``task_id`` is fresh (``bench-00042``), ``trial`` is kept, so cirrus's
  ticket id is ``bench-00042-<trial>`` and unique;
* ``reward`` is forced to 1.0, so every record is "resolved" and becomes a
  task;
* within a copy, every person name token (first and last names found in
  ``first_name``/``last_name`` fields and in user ids such as
  ``mia_li_3668``), user id, e-mail address, street address (``address1``,
  ``address2``) and date of birth gets a new value from Faker, and the new
  value replaces the old one everywhere in that transcript: message texts,
  tool-call argument strings, tool results and ``info``.  The same original
  gets the same new value throughout one copy (a user id becomes a handle
  built from the user's new name), so the copy stays a coherent dialogue.

New names are at least 3 letters, purely alphabetic, and never a substring
of the original transcript or of another value planted in the same copy, so
that a case-sensitive substring search for a planted value finds only the
places where it was planted.  Deterministic given ``--seed`` (and the Faker
version); a corpus of N tickets is a prefix of one of M > N tickets built
with the same seed.

    python benchmarks/make_corpus.py --tickets 2000 --out /tmp/cirrus-bench/corpus-2000.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from faker import Faker

DEFAULT_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json"
DEFAULT_OUT = Path("/tmp/cirrus-bench/corpus-2000.jsonl")

# tau-bench user ids: <first>_<last>_<4 digits>; payment ids (credit_card_1234567,
# gift_card_...) have the same shape with longer numbers or these prefixes.
_USER_ID = re.compile(r"(?<![A-Za-z0-9_])([a-z]+)_([a-z]+)_([0-9]{4})(?![A-Za-z0-9_])")
_NOT_USER_PREFIX = {"credit", "gift", "certificate"}
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")

# Categories written to the sidecar.  ``names`` holds single first/last name
# tokens (the strictest test: "Thanks, Mia" must lose "Mia" too).
CATEGORIES = ("names", "emails", "user_ids", "addresses", "address2", "dobs")


def _walk_json(value: Any, visit) -> None:
    """Call ``visit(dict)`` on every dict inside ``value``, descending into
    strings that hold JSON objects or arrays (tool results and arguments)."""
    if isinstance(value, dict):
        visit(value)
        for v in value.values():
            _walk_json(v, visit)
    elif isinstance(value, list):
        for v in value:
            _walk_json(v, visit)
    elif isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return
        _walk_json(parsed, visit)


def _texts(record: dict[str, Any]) -> list[str]:
    """Every string of a transcript that may hold personal data."""
    out: list[str] = []

    def strings(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                strings(v)
        elif isinstance(value, list):
            for v in value:
                strings(v)

    strings(record.get("traj"))
    strings(record.get("info"))
    return out


def _traj_text(traj: list[dict[str, Any]]) -> str:
    """The text of a transcript's messages as a tool would see it: contents,
    tool-call argument strings and tool results."""
    parts: list[str] = []
    for m in traj:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif content is not None:
            parts.append(json.dumps(content, ensure_ascii=False))
        for call in m.get("tool_calls") or []:
            args = (call.get("function") or {}).get("arguments")
            parts.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
    return "\n".join(parts)


class _Originals:
    """The personal values of one source transcript."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.name_tokens: dict[str, str] = {}  # token -> "first" | "last" (first seen)
        self.user_ids: dict[str, tuple[str, str]] = {}  # id -> (first part, last part)
        self.emails: set[str] = set()
        self.addresses: set[str] = set()
        self.address2: set[str] = set()
        self.dobs: set[str] = set()

        def visit(d: dict[str, Any]) -> None:
            for key, role in (("first_name", "first"), ("last_name", "last")):
                value = d.get(key)
                if isinstance(value, str):
                    for token in value.split():
                        if token.isalpha():
                            self.name_tokens.setdefault(token, role)
            if isinstance(d.get("email"), str) and "@" in d["email"]:
                self.emails.add(d["email"])
            if isinstance(d.get("address1"), str) and d["address1"].strip():
                self.addresses.add(d["address1"])
            if isinstance(d.get("address2"), str) and d["address2"].strip():
                self.address2.add(d["address2"])
            if isinstance(d.get("dob"), str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["dob"]):
                self.dobs.add(d["dob"])
            if isinstance(d.get("user_id"), str):
                self._user_id(d["user_id"])

        _walk_json(record.get("traj"), visit)
        _walk_json(record.get("info"), visit)
        for text in _texts(record):
            for m in _USER_ID.finditer(text):
                self._user_id(m.group())
            for m in _EMAIL.finditer(text):
                self.emails.add(m.group())
        # the name inside a user id is the user's name ("mia_li_3668" -> Mia Li)
        for first, last in self.user_ids.values():
            self.name_tokens.setdefault(first.capitalize(), "first")
            self.name_tokens.setdefault(last.capitalize(), "last")

    def _user_id(self, value: str) -> None:
        m = _USER_ID.fullmatch(value)
        if m and m.group(1) not in _NOT_USER_PREFIX:
            self.user_ids[value] = (m.group(1), m.group(2))


class _Perturber:
    """New values for one copy of one transcript."""

    def __init__(self, fake: Faker, originals: _Originals, original_text: str) -> None:
        self.fake = fake
        self.original_text = original_text
        self.mapping: dict[str, str] = {}
        self.planted: dict[str, list[str]] = {c: [] for c in CATEGORIES}
        chosen: list[str] = []

        def fresh_name(role: str) -> str:
            for _ in range(1000):
                value = fake.first_name() if role == "first" else fake.last_name()
                if (len(value) >= 3 and value.isalpha() and value.isascii()
                        and value not in original_text and value.lower() not in original_text
                        and all(value not in c and c not in value for c in chosen)):
                    chosen.append(value)
                    return value
            raise RuntimeError("could not draw a distinctive name")  # pragma: no cover

        for token, role in sorted(originals.name_tokens.items()):
            new = fresh_name(role)
            self.mapping[token] = new
            self.planted["names"].append(new)

        def new_token(token: str) -> str:
            return self.mapping.get(token.capitalize()) or self.mapping.setdefault(token.capitalize(), fresh_name("first"))

        used_ids: set[str] = set()
        for uid, (first, last) in sorted(originals.user_ids.items()):
            while True:
                handle = f"{new_token(first).lower()}_{new_token(last).lower()}_{fake.random_int(1000, 9999)}"
                if handle not in used_ids and handle not in original_text:
                    break
            used_ids.add(handle)
            self.mapping[uid] = handle
            self.planted["user_ids"].append(handle)

        for email in sorted(originals.emails):
            local, _, domain = email.rpartition("@")
            m = re.fullmatch(r"([a-z]+)\.([a-z]+)[0-9]*", local)
            if m:
                new_local = f"{new_token(m.group(1)).lower()}.{new_token(m.group(2)).lower()}{fake.random_int(1000, 9999)}"
            else:
                new_local = f"{fake.user_name()}{fake.random_int(10, 99)}"
            new = f"{new_local}@{domain}"
            self.mapping[email] = new
            self.planted["emails"].append(new)

        for category, values, make in (
            ("addresses", originals.addresses, lambda: f"{fake.building_number()} {fake.street_name()}"),
            ("address2", originals.address2, fake.secondary_address),
            ("dobs", originals.dobs, lambda: fake.date_of_birth(minimum_age=18, maximum_age=85).isoformat()),
        ):
            for value in sorted(values):
                for _ in range(1000):
                    new = make()
                    words = set(re.findall(r"[A-Za-z]+", new))
                    # a street named after a person must not re-plant a name
                    if (new not in original_text and new not in self.mapping.values()
                            and not words & (set(originals.name_tokens) | set(chosen))):
                        break
                self.mapping[value] = new
                self.planted[category].append(new)

        # one pass, longest original first, whole tokens only
        originals_sorted = sorted(self.mapping, key=len, reverse=True)
        self._pattern = re.compile(
            "(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, originals_sorted)) + ")(?![A-Za-z0-9])"
        ) if originals_sorted else None

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: self.mapping[m.group()], value)

    def json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        return value


def build_corpus(source: Path, n: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    data = json.loads(source.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data:
        raise SystemExit(f"{source}: expected a non-empty JSON list of transcripts")
    originals = [_Originals(r) for r in data]
    original_texts = [json.dumps(r, ensure_ascii=False) for r in data]
    fake = Faker("en_US")
    fake.seed_instance(seed)
    records: list[dict[str, Any]] = []
    truth: dict[str, Any] = {}
    for j in range(n):
        i, copy = j % len(data), j // len(data)
        src = data[i]
        perturber = _Perturber(fake, originals[i], original_texts[i])
        record = {
            "task_id": f"bench-{j:05d}",
            "trial": src.get("trial"),
            "reward": 1.0,
            "traj": perturber.json(src["traj"]),
            "info": {**perturber.json(src.get("info") or {}),
                     "bench_source": {"task_id": src.get("task_id"), "trial": src.get("trial"), "copy": copy}},
        }
        ticket_id = record["task_id"] if record["trial"] is None else f"{record['task_id']}-{record['trial']}"
        traj_text = _traj_text(record["traj"])
        # Ground truth: planted values that really occur in the messages
        # (values only in ``info`` are never seen by either tool).
        planted = {c: sorted(v for v in vals if v in traj_text) for c, vals in perturber.planted.items()}
        truth[ticket_id] = {"task_id": record["task_id"], "trial": record["trial"],
                            "source_task_id": src.get("task_id"), "copy": copy, **planted}
        leftovers = [o for o in perturber.mapping if len(o) >= 3 and re.search(
            r"(?<![A-Za-z0-9])" + re.escape(o) + r"(?![A-Za-z0-9])", traj_text)]
        if leftovers:  # pragma: no cover - a bug in the perturbation
            raise RuntimeError(f"{ticket_id}: originals left after perturbation: {leftovers[:5]}")
        records.append(record)
    return records, truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="tau-bench transcripts (JSON list)")
    parser.add_argument("--tickets", "-n", type=int, default=2000, help="number of tickets to write (default 2000)")
    parser.add_argument("--seed", type=int, default=20240515, help="Faker seed (default 20240515)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output .jsonl (default {DEFAULT_OUT.parent}/corpus-<N>.jsonl); never inside the repo")
    args = parser.parse_args(argv)
    out = args.out or DEFAULT_OUT.with_name(f"corpus-{args.tickets}.jsonl")
    repo = Path(__file__).resolve().parents[1]
    if out.resolve().is_relative_to(repo):
        parser.error(f"--out {out} is inside the repository; write the corpus elsewhere (e.g. /tmp)")
    records, truth = build_corpus(args.source, args.tickets, args.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    sidecar = out.with_name(out.name + ".pii.json")
    meta = {"source": str(args.source), "tickets": args.tickets, "seed": args.seed, "categories": list(CATEGORIES)}
    sidecar.write_text(json.dumps({"meta": meta, "tickets": truth}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    counts = {c: sum(len(t[c]) for t in truth.values()) for c in CATEGORIES}
    print(f"wrote {len(records)} tickets to {out} ({out.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    print(f"wrote planted values to {sidecar}: {counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
