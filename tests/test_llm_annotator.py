from __future__ import annotations

import json
import pickle

import pytest

from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.llm import LLMAnnotator, MalformedLabels, parse_labels
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.llm.providers import Endpoint, EndpointError, ModelAuthError, resolve_endpoint
from cirrus.workspace import IN_PROGRESS_FILE
from tests.fake_openai import FakeOpenAI

ITEMS = [ReplyToLabel("My SMS fail", "Could you share the template code?"),
         ReplyToLabel("SMS_1", "I have resubmitted the template.", ("SubmitTemplate",))]


def _annotator(server: FakeOpenAI, rules: RuleAnnotator) -> LLMAnnotator:
    return LLMAnnotator(Endpoint("judge-x", server.base_url, "CIRRUS_TEST_KEY"), fallback=rules)


@pytest.fixture
def rules(pipeline_config) -> RuleAnnotator:
    return RuleAnnotator.from_config(pipeline_config.annotate)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("CIRRUS_TEST_KEY", "sk-test-not-a-real-key-0000000000")


def test_parse_labels_accepts_fenced_json_any_case():
    assert parse_labels('```json\n{"labels": ["inquire", "SOLUTION"]}\n```', 2) == ["Inquire", "Solution"]


@pytest.mark.parametrize("raw", ["not json", '{"labels": ["Inquire"]}', '{"labels": ["Inquire", "Answer"]}', "[]"])
def test_parse_labels_rejects_malformed(raw):
    with pytest.raises(MalformedLabels):
        parse_labels(raw, 2)


def test_llm_annotator_labels_through_a_real_openai_client(rules):
    with FakeOpenAI(['{"labels": ["Inquire", "Solution"]}']) as server:
        labels = _annotator(server, rules).label(ITEMS)
    assert labels == ["Inquire", "Solution"]
    request = server.requests[0]
    assert request["model"] == "judge-x"
    assert "### Reply 2" in request["messages"][1]["content"] and "SubmitTemplate" in request["messages"][1]["content"]
    assert server.headers[0]["authorization"] == "Bearer sk-test-not-a-real-key-0000000000"


def test_llm_annotator_retries_malformed_output_then_succeeds(rules):
    with FakeOpenAI(["sure! here you go", '{"labels": ["Clarify"]}', '{"labels": ["Clarify", "Appease"]}']) as server:
        annotator = _annotator(server, rules)
        assert annotator.label(ITEMS) == ["Clarify", "Appease"]
    assert len(server.requests) == 3 and annotator.fallbacks == 0


def test_llm_annotator_retries_server_errors(rules):
    with FakeOpenAI([500, '{"labels": ["Inquire", "Standard"]}']) as server:
        assert _annotator(server, rules).label(ITEMS) == ["Inquire", "Standard"]
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 422])
def test_a_request_the_model_refuses_falls_back_to_rules_for_that_ticket_only(rules, status):
    with FakeOpenAI([status, '{"labels": ["Inquire", "Standard"]}']) as server:
        annotator = _annotator(server, rules)
        assert annotator.label(ITEMS) == rules.label(ITEMS)  # refused: not retried, the rules answer
        assert annotator.label(ITEMS) == ["Inquire", "Standard"]  # the next ticket asks the model again
    assert len(server.requests) == 2 and annotator.fallbacks == 1


def test_llm_annotator_falls_back_to_rules_when_answers_stay_malformed(rules):
    with FakeOpenAI(["nope", "nope", "nope"]) as server:
        annotator = _annotator(server, rules)
        labels = annotator.label(ITEMS)
    assert labels == rules.label(ITEMS) and annotator.fallbacks == 1


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    endpoint = resolve_endpoint("qwen3-max")
    assert endpoint.base_url.startswith("https://dashscope")
    with pytest.raises(EndpointError, match="DASHSCOPE_API_KEY"):
        endpoint.api_key()


def test_unknown_model_without_base_url_is_refused():
    with pytest.raises(EndpointError, match="--base-url"):
        resolve_endpoint("my-local-model")
    assert resolve_endpoint("my-local-model", "http://127.0.0.1:8000/v1/").base_url == "http://127.0.0.1:8000/v1"


def test_ingest_with_llm_annotator_writes_its_labels(tmp_path, rules, pipeline_config):
    from cirrus.ingest.pipeline import AnnotatorSpec
    from cirrus.ingest.run import IngestOptions, run_ingest

    raw = tmp_path / "t.jsonl"
    raw.write_text(json.dumps({"ticket_id": "A-1", "events": [
        {"role": "customer", "text": "My mailbox is full"},
        {"role": "agent", "text": "Which mailbox is it?"},
        {"role": "customer", "text": "the sales one"},
        {"role": "agent", "text": "I doubled its quota."}]}) + "\n")
    with FakeOpenAI(['{"labels": ["Clarify", "Solution"]}']) as server:
        endpoint = Endpoint("annot", server.base_url, "CIRRUS_TEST_KEY")
        summary = run_ingest(IngestOptions(raw_path=raw, workspace=tmp_path / "ws", pipeline=pipeline_config,
                                           annotator=AnnotatorSpec(endpoint), progress=False))
    task = json.loads((tmp_path / "ws/tickets/tasks.jsonl").read_text())
    assert [c["reply_type"] for c in task["checkpoints"]] == ["Clarify", "Solution"]
    assert summary.manifest["annotator"].startswith("llm:annot@http://127.0.0.1")
    assert summary.manifest["reply_types"] == {"Clarify": 1, "Solution": 1}
    # the annotator's one call, as the server reported it (10 input, 5 output tokens): the manifest's usage
    annotator_usage = summary.manifest["usage"]["annotator"]
    assert (annotator_usage["calls"], annotator_usage["input_tokens"], annotator_usage["output_tokens"]) == (1, 10, 5)
    written = "".join(p.read_text() for p in (tmp_path / "ws").rglob("*") if p.is_file())
    assert "sk-test-not-a-real-key" not in written


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_annotation_naming_the_variable_without_retrying(rules, status):
    with FakeOpenAI([status, '{"labels": ["Inquire", "Standard"]}']) as server:
        annotator = _annotator(server, rules)
        with pytest.raises(ModelAuthError) as caught:
            annotator.label(ITEMS)
    message = str(caught.value)
    assert f"HTTP {status}" in message and "CIRRUS_TEST_KEY" in message and "--annotator-api-key-env" in message
    assert "sk-test-not-a-real-key" not in message
    assert len(server.requests) == 1 and annotator.fallbacks == 0
    # it crosses the process pool's pipe intact
    assert str(pickle.loads(pickle.dumps(caught.value))) == message


def test_ingest_stops_at_a_refused_annotator_key_and_keeps_the_previous_tasks(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cirrus.cli import app

    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"ticket_id": f"A-{i}", "events": [
        {"role": "customer", "text": f"Mailbox {i} is full"},
        {"role": "agent", "text": "Which mailbox is it?"},
        {"role": "customer", "text": "the sales one"},
        {"role": "agent", "text": "I doubled its quota."}]}) + "\n" for i in range(12)))
    workspace = tmp_path / "ws"
    tasks = workspace / "tickets" / "tasks.jsonl"
    tasks.parent.mkdir(parents=True)
    tasks.write_text('{"previous": true}\n')
    with FakeOpenAI([401] * 50) as server:
        result = CliRunner().invoke(app, [
            "ingest", str(raw), "--workspace", str(workspace), "--jobs", "2", "--quiet",
            "--annotator-model", "annot", "--annotator-base-url", server.base_url,
            "--annotator-api-key-env", "CIRRUS_TEST_KEY"])
    output = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "HTTP 401" in output and "CIRRUS_TEST_KEY" in output and "ingest stopped" in output
    assert "sk-test-not-a-real-key" not in output
    # no retry storm: each worker asks at most once per chunk it had started (2 workers, 4 chunks in flight)
    assert 1 <= len(server.requests) <= 4
    assert tasks.read_text() == '{"previous": true}\n'  # not replaced by a partial file
    assert (workspace / IN_PROGRESS_FILE).exists()  # eval refuses the half-ingested workspace
    assert not list(workspace.rglob(".*.tmp"))
