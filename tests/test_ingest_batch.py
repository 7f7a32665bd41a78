"""`cirrus ingest --annotator-model M --batch`: the annotator's calls go
through the Batch API of a local server and the workspace comes out as an
online ingest's, with the calls counted as batch calls (issue 16)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from tests.batch_server import BatchServer, reply

KEY_ENV = "CIRRUS_BATCH_INGEST_KEY"
TICKETS = [
    {"ticket_id": f"B-{n}", "events": [
        {"role": "customer", "text": f"My mailbox number {n} is full"},
        {"role": "agent", "text": "Which mailbox is it, the sales one or the support one?"},
        {"role": "customer", "text": "the sales one"},
        {"role": "agent", "text": f"I raised its quota to {n + 2} GB; it works again."}]}
    for n in range(3)
]


def labels(body: dict) -> object:
    """Every reply labelled Appease: a label the offline rules would never
    give these replies, so the tasks show whose labels they carry."""
    replies = len(re.findall(r"^### Reply \d+", body["messages"][-1]["content"], re.M))
    return reply(json.dumps({"labels": ["Appease"] * replies}))


@pytest.fixture
def raw(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-batch-ingest-test-0000000000")
    monkeypatch.setenv("CIRRUS_BATCH_POLL_S", "0")
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TICKETS))
    return path


def ingest(raw: Path, ws: Path, server: BatchServer, *extra: str):
    return CliRunner().invoke(app, ["ingest", str(raw), "-w", str(ws), "--jobs", "1", "-q", "--annotator-model", "annot",
                                    "--annotator-base-url", server.base_url, "--annotator-api-key-env", KEY_ENV,
                                    *extra])


PRICES = '[prices."annot"]\ninput_per_mtok = 1.0\ncached_input_per_mtok = 0.5\noutput_per_mtok = 2.0\nbatch_discount = 0.5\n'


def test_batch_ingest_writes_what_an_online_ingest_writes(raw: Path, tmp_path: Path):
    for name in ("online", "batched"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cirrus.toml").write_text(PRICES)
    with BatchServer(labels) as server:
        online = ingest(raw, tmp_path / "online", server)
        assert online.exit_code == 0, online.output
        calls_online = server.chat_calls
        batched = ingest(raw, tmp_path / "batched", server, "--batch")
        assert batched.exit_code == 0, batched.output
        assert server.chat_calls == calls_online == 3  # the batch run sent nothing online
        assert server.batch_creations == 1
    tasks = (tmp_path / "batched/tickets/tasks.jsonl").read_text()
    assert tasks == (tmp_path / "online/tickets/tasks.jsonl").read_text()
    assert {c["reply_type"] for line in tasks.splitlines() for c in json.loads(line)["checkpoints"]} == {"Appease"}
    manifest = json.loads((tmp_path / "batched/tickets/manifest.json").read_text())
    usage = manifest["usage"]["annotator"]
    # the server's usage per answer: 20 input tokens (8 cached), 6 output (2 reasoning); 3 tickets
    assert (usage["calls"], usage["batch_calls"], usage["input_tokens"], usage["cached_input_tokens"],
            usage["output_tokens"], usage["batch_output_tokens"]) == (3, 3, 60, 24, 18, 18)
    assert manifest["annotator_fallbacks"] == 0
    online_manifest = json.loads((tmp_path / "online/tickets/manifest.json").read_text())
    assert online_manifest["usage"]["annotator"]["batch_calls"] == 0
    # per call (20 - 8) / 1e6 * 1.0 + 8 / 1e6 * 0.5 + 6 / 1e6 * 2.0 = 28e-6; 3 calls = 84e-6; batch: half
    assert online_manifest["cost"]["annotator"] == pytest.approx(84e-6)
    assert manifest["cost"]["annotator"] == pytest.approx(42e-6) and manifest["cost"]["currency"] == "USD"
    assert not (tmp_path / "batched/.cirrus-cache/batches").exists() or not any(
        (tmp_path / "batched/.cirrus-cache/batches").iterdir())  # the scratch pass and the state are gone


def test_a_request_the_batch_failed_falls_back_to_the_rules(raw: Path, tmp_path: Path):
    from cirrus.ingest.annotate.requests import request_id  # noqa: F401  (the ids are the request hashes)

    with BatchServer(labels) as server:
        def fail_first(body: dict) -> object:
            return 500 if "mailbox number 0" in body["messages"][-1]["content"] else labels(body)

        server.answer = fail_first
        done = ingest(raw, tmp_path / "ws", server, "--batch")
    assert done.exit_code == 0, done.output
    assert "1 of 3 requests got no answer" in done.output
    manifest = json.loads((tmp_path / "ws/tickets/manifest.json").read_text())
    assert manifest["annotator_fallbacks"] == 1 and manifest["usage"]["annotator"]["batch_calls"] == 2


def test_a_provider_without_batches_and_a_batch_without_a_model_are_refused(raw: Path, tmp_path: Path):
    with BatchServer(labels, no_batches=True) as server:
        done = ingest(raw, tmp_path / "ws", server, "--batch")
        assert server.chat_calls == 0
    assert done.exit_code == 2, done.output
    assert "--batch" in done.output and "Traceback" not in done.output
    alone = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(tmp_path / "ws2"), "--batch", "-q"])
    assert alone.exit_code == 2 and "--annotator-model" in alone.output
