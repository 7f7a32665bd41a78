from __future__ import annotations

import json

import pytest

from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.llm import LLMAnnotator, MalformedLabels, parse_labels
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.llm.providers import Endpoint, EndpointError, resolve_endpoint
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
    written = "".join(p.read_text() for p in (tmp_path / "ws").rglob("*") if p.is_file())
    assert "sk-test-not-a-real-key" not in written
