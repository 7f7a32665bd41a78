"""The Chinese sample workspace (samples/zh: 16 tickets of our own, with
personal data of every type, split messages, filler turns, tool calls and a
knowledge folder) through ingest and the offline baselines: every task is
Chinese, the leak check against the raw input finds nothing anywhere, and
the oracle passes every task."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.leak_check import find_leaks, raw_values
from tests.conftest import REPO

SAMPLE = REPO / "samples" / "zh" / "tickets"


@pytest.fixture(scope="module")
def zh_sample(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("zh-sample")
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(SAMPLE / "raw"), "--kb", str(SAMPLE / "kb"), "-w", str(workspace), "-q"])
    assert result.exit_code == 0, result.output
    for args in (["--model", "baseline:oracle", "--run-id", "oracle"],
                 ["--model", "baseline:retrieval", "--pass-k", "2", "--run-id", "retrieval"]):
        result = runner.invoke(app, ["eval", *args, "-w", str(workspace), "-q"])
        assert result.exit_code == 0, result.output
    return workspace


def _tasks(workspace):
    return [json.loads(line) for line in (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]


def test_every_ticket_becomes_a_chinese_task_with_knowledge(zh_sample):
    tasks = _tasks(zh_sample)
    manifest = json.loads((zh_sample / "tickets" / "manifest.json").read_text(encoding="utf-8"))
    assert len(tasks) == 16 and not manifest["quarantined"]
    assert {t["language"] for t in tasks} == {"zh"}
    assert all(t["knowledge"] for t in tasks) and sum(bool(t["cassette"]) for t in tasks) == 16


def test_nothing_of_the_raw_input_survives_anywhere(zh_sample, pipeline_config):
    found = raw_values(SAMPLE / "raw", pipeline_config)
    entities = set(found.values.values())
    assert {"PERSON", "PHONE_NUMBER", "EMAIL_ADDRESS", "STREET_ADDRESS", "CN_RESIDENT_ID", "CREDIT_CARD",
            "PASSPORT_NUMBER", "CN_LICENSE_PLATE", "SECRET", "CLOUD_ACCESS_KEY", "IP_ADDRESS"} <= entities
    hits, read = find_leaks(zh_sample, found.values, is_word=found.is_word)
    assert read > 10 and hits == [], [str(h) for h in hits]


def test_filler_turns_are_gone_and_masks_are_chinese_shaped(zh_sample):
    tasks = _tasks(zh_sample)
    text = json.dumps(tasks, ensure_ascii=False)
    assert "请问还在吗" not in text and "您好，在吗" not in text
    replies = [c["reply"] for t in tasks for c in t["checkpoints"]]
    courtesy_only = [r for r in replies if r.startswith("不客气") and len(r) < 30]
    assert courtesy_only == []  # a sign-off on its own is dropped; with information it stays
    assert "**您好" in text  # a greeting keeps the surname: 林**您好


def test_the_oracle_passes_every_chinese_task(zh_sample):
    summary = json.loads((zh_sample / "reports" / "oracle" / "summary.json").read_text(encoding="utf-8"))
    assert summary["n_tasks"] == 16 and summary["atpr"] == 1.0 and summary["errors"] == 0
