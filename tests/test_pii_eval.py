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


@needs_shared(PII_SET)
def test_recall_targets_on_the_labelled_set(deidentifier):
    scores = {s.entity: s for s in evaluate(deidentifier, load_examples(PII_SET))}
    for entity in ("EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS", "CREDIT_CARD"):
        assert scores[entity].recall >= 0.99, (entity, scores[entity].recall)
    assert scores["PERSON"].recall >= 0.9
