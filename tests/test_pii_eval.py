from __future__ import annotations

import math

import json

from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.ingest.deid.deidentify import Span
from cirrus.pii_eval import evaluate, load_examples, score
from tests.conftest import PII_SET, needs_shared


def test_score_counts_strict_and_masked_recall_and_precision():
    examples = [
        {"full_text": "Call Ann at 555-0100", "spans": [
            {"entity_type": "PERSON", "start_position": 5, "end_position": 8},
            {"entity_type": "PHONE_NUMBER", "start_position": 12, "end_position": 20}]},
        {"full_text": "Mail bob@x.org", "spans": [{"entity_type": "EMAIL_ADDRESS", "start_position": 5, "end_position": 14}]},
    ]
    found = [[Span(5, 8, "PERSON", 0.9), Span(12, 20, "ACCOUNT_ID", 0.5), Span(0, 4, "PERSON", 0.6)], []]
    scores = {s.entity: s for s in score(examples, found)}
    assert (scores["PERSON"].recall, scores["PERSON"].precision) == (1.0, 0.5)
    assert (scores["PHONE_NUMBER"].recall, scores["PHONE_NUMBER"].masked_recall) == (0.0, 1.0)
    assert scores["EMAIL_ADDRESS"].recall == 0.0
    # the set labels no ACCOUNT_ID at all: a detection of it cannot be judged
    assert scores["ACCOUNT_ID"].predicted == 1 and math.isnan(scores["ACCOUNT_ID"].precision)
    wrong = score([{"full_text": "id 12345678", "spans": [
        {"entity_type": "PHONE_NUMBER", "start_position": 0, "end_position": 2}]}], [[Span(3, 11, "PHONE_NUMBER", 0.5)]])
    assert wrong[0].precision == 0.0  # a type the set labels, detected where it is not


def test_bad_label_file_names_the_item(tmp_path):
    bad = tmp_path / "labels.json"
    bad.write_text(json.dumps([{"full_text": "x", "spans": []}, {"text": "y"}]))
    result = CliRunner().invoke(app, ["pii-eval", str(bad)])
    assert result.exit_code == 2 and "item 2" in result.output


RECALL_TARGETS = {"EMAIL_ADDRESS": 0.99, "PHONE_NUMBER": 0.99, "IP_ADDRESS": 0.99, "CREDIT_CARD": 0.99, "PERSON": 0.9}


@needs_shared(PII_SET)
def test_recall_targets_on_the_labelled_set(deidentifier):
    # Recall of an entity counts only the gold spans of that entity, and each text's detections do not depend on
    # the other texts: the examples without a span of a checked entity (~40 % of the set's text) cannot move
    # these figures, so only the others are de-identified.  Every gold span of the checked entities is scored.
    examples = load_examples(PII_SET)
    checked = [e for e in examples if any(s["entity_type"] in RECALL_TARGETS for s in e["spans"])]
    gold = {entity: sum(s["entity_type"] == entity for e in examples for s in e["spans"]) for entity in RECALL_TARGETS}
    scores = {s.entity: s for s in evaluate(deidentifier, checked)}
    assert {entity: scores[entity].gold for entity in RECALL_TARGETS} == gold  # no gold span left out
    for entity, target in RECALL_TARGETS.items():
        assert scores[entity].recall >= target, (entity, scores[entity].recall)
