"""Measure de-identification on a labelled PII set (``cirrus pii-eval``).

The set is a JSON list of ``{"full_text", "spans": [{"entity_type",
"start_position", "end_position"}]}`` (presidio-research's format).  A gold
span counts as found when a detected span overlaps it; *strict* recall also
requires the detected type to be the gold type (after mapping the label set's
names onto Cirrus's).  Precision is strict too: a detection is correct when
it overlaps a gold span of its own type.  *Masked* recall ignores types: what
matters for privacy is that the characters were replaced at all.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrus.ingest.deid.deidentify import Deidentifier, Span

# Gold labels of presidio-research's synthetic set, as Cirrus names them.
LABEL_MAP = {"PERSON": "PERSON", "EMAIL_ADDRESS": "EMAIL_ADDRESS", "PHONE_NUMBER": "PHONE_NUMBER",
             "IP_ADDRESS": "IP_ADDRESS", "CREDIT_CARD": "CREDIT_CARD", "IBAN_CODE": "IBAN_CODE",
             "US_SSN": "US_SSN", "STREET_ADDRESS": "STREET_ADDRESS",
             # Cirrus's own Chinese set (tests/data/pii_zh.json)
             "CN_RESIDENT_ID": "CN_RESIDENT_ID", "CN_LICENSE_PLATE": "CN_LICENSE_PLATE",
             "PASSPORT_NUMBER": "PASSPORT_NUMBER"}


@dataclass(frozen=True, slots=True)
class EntityScores:
    entity: str
    gold: int
    found_strict: int
    found_masked: int
    predicted: int
    correct: int

    @property
    def recall(self) -> float:
        return self.found_strict / self.gold if self.gold else float("nan")

    @property
    def masked_recall(self) -> float:
        return self.found_masked / self.gold if self.gold else float("nan")

    @property
    def precision(self) -> float:
        """nan when nothing was detected, or when the set labels no span of
        this type at all (it cannot tell a right detection from a wrong one:
        Cirrus masks cloud resource ids, which a set may leave unlabelled)."""
        return self.correct / self.predicted if self.predicted and self.gold else float("nan")

    def as_row(self) -> dict[str, Any]:
        return {"entity": self.entity, "gold": self.gold, "recall": round(self.recall, 4),
                "masked_recall": round(self.masked_recall, 4), "predicted": self.predicted,
                "precision": round(self.precision, 4)}


def _overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def score(examples: list[dict[str, Any]], detections: list[list[Span]]) -> list[EntityScores]:
    """Per-entity scores (pure): gold examples and the spans found in each."""
    gold, strict, masked, predicted, correct = Counter(), Counter(), Counter(), Counter(), Counter()
    for example, found in zip(examples, detections):
        spans = [(LABEL_MAP.get(s["entity_type"]), s["start_position"], s["end_position"]) for s in example["spans"]]
        for entity, start, end in spans:
            if entity is None:
                continue
            gold[entity] += 1
            hits = [d for d in found if _overlaps(d.start, d.end, start, end)]
            masked[entity] += bool(hits)
            strict[entity] += any(d.entity == entity for d in hits)
        for d in found:
            predicted[d.entity] += 1
            correct[d.entity] += any(e == d.entity and _overlaps(d.start, d.end, s, t) for e, s, t in spans)
    entities = sorted(set(gold) | set(predicted))
    return [EntityScores(e, gold[e], strict[e], masked[e], predicted[e], correct[e]) for e in entities]


def load_examples(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of labelled examples")
    for i, item in enumerate(data, 1):
        if not isinstance(item, dict) or "full_text" not in item or not isinstance(item.get("spans"), list):
            raise ValueError(f"{path}: item {i}: needs 'full_text' and a 'spans' list")
    return data


def evaluate(deid: Deidentifier, examples: list[dict[str, Any]], batch: int = 64) -> list[EntityScores]:
    detections: list[list[Span]] = []
    for i in range(0, len(examples), batch):
        requests = [(e["full_text"], (), True) for e in examples[i : i + batch]]
        detections.extend(list(spans) for spans in deid.detect_many(requests))
    return score(examples, detections)
