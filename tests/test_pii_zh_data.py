"""The Chinese PII evaluation set (tests/data/pii_zh.json) is consistent and
is exactly what tests/data/make_pii_zh.py generates."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SET = DATA / "pii_zh.json"
GENERATOR = DATA / "make_pii_zh.py"
MUST_SURVIVE = DATA / "must_survive_zh.txt"

MINIMUMS = {
    "PERSON": 150, "STREET_ADDRESS": 90, "CN_LICENSE_PLATE": 60, "CN_RESIDENT_ID": 60, "PASSPORT_NUMBER": 50,
    "PHONE_NUMBER": 90, "CREDIT_CARD": 60, "EMAIL_ADDRESS": 60,
}


@pytest.fixture(scope="module")
def items() -> list[dict]:
    return json.loads(SET.read_text(encoding="utf-8"))


def _spans(items, entity=None):
    return [s for item in items for s in item["spans"] if entity is None or s["entity_type"] == entity]


def test_items_have_the_presidio_research_shape(items):
    assert isinstance(items, list) and len(items) >= 600
    for n, item in enumerate(items, 1):
        assert set(item) == {"full_text", "spans"}, n
        assert isinstance(item["full_text"], str) and item["full_text"], n
        for s in item["spans"]:
            assert set(s) == {"entity_type", "entity_value", "start_position", "end_position"}, n
            assert s["entity_type"] in MINIMUMS, (n, s)
    assert len({item["full_text"] for item in items}) == len(items), "duplicate texts"


def test_every_span_slices_to_its_value_and_none_overlap(items):
    for n, item in enumerate(items, 1):
        text, end = item["full_text"], 0
        for s in sorted(item["spans"], key=lambda s: s["start_position"]):
            assert 0 <= s["start_position"] < s["end_position"] <= len(text), (n, s)
            assert text[s["start_position"]:s["end_position"]] == s["entity_value"], (n, s)
            assert s["entity_value"] == s["entity_value"].strip(), (n, s)
            assert s["start_position"] >= end, f"item {n}: overlapping spans"
            end = s["end_position"]


def test_counts_per_type_reach_the_minimums(items):
    counts = Counter(s["entity_type"] for s in _spans(items))
    for entity, minimum in MINIMUMS.items():
        assert counts[entity] >= minimum, (entity, counts[entity])
    assert sum(1 for item in items if not item["spans"]) >= 150
    mixed = sum(1 for item in items if len({s["entity_type"] for s in item["spans"]}) >= 2)
    assert mixed >= 200, mixed


def test_structured_values_are_valid(items):
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    ids = [re.sub(r"[ -]", "", s["entity_value"]) for s in _spans(items, "CN_RESIDENT_ID")]
    for number in ids:
        assert re.fullmatch(r"\d{17}[\dX]", number), number
        assert "10X98765432"[sum(int(c) * w for c, w in zip(number, weights)) % 11] == number[-1], number
    assert any(number.endswith("X") for number in ids)
    for s in _spans(items, "CREDIT_CARD"):
        digits = re.sub(r"[ -]", "", s["entity_value"])
        assert digits.startswith("62") and 16 <= len(digits) <= 19 and digits.isdigit(), digits
        total = sum(int(d) if i % 2 == 0 else sum(divmod(int(d) * 2, 10)) for i, d in enumerate(reversed(digits)))
        assert total % 10 == 0, digits
    for s in _spans(items, "EMAIL_ADDRESS"):
        assert s["entity_value"].isascii() and re.fullmatch(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", s["entity_value"])
    for s in _spans(items, "PASSPORT_NUMBER"):
        assert re.fullmatch(r"E\d{8}|E[A-HJ-NP-Z]\d{7}|G\d{8}", s["entity_value"]), s
    for s in _spans(items, "CN_LICENSE_PLATE"):
        assert re.fullmatch(r"[\u4e00-\u9fff][A-Z][· ]?[A-Z0-9]{5,6}", s["entity_value"]), s


def test_the_generator_reproduces_the_file_exactly(tmp_path):
    out = tmp_path / "pii_zh.json"
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], check=True, timeout=120)
    assert out.read_bytes() == SET.read_bytes(), "re-run tests/data/make_pii_zh.py and commit the result"


def test_must_survive_list(items):
    lines = MUST_SURVIVE.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("#")
    words = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert len(words) >= 150 and len(set(words)) == len(words)
    gold = {s["entity_value"] for s in _spans(items)}
    assert not gold & set(words)
