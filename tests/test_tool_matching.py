"""Per-tool argument matching for replay and TEV (issue 24): `exact`
(identifiers, amounts: the contract's rule), `normalized` and `ignored`
declared with `x-cirrus-match` beside the tool schemas, so that a correct
paraphrase of a free-text argument is answered from the recording and counts
as the reference call."""

from __future__ import annotations

import asyncio
import json

import pytest

from cirrus.evaluate.types import AgentTurn, ToolCallMade, Verdict
from cirrus.evaluate.walk import judge_checkpoint
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.ingest.tool_schemas import ToolSchemaError, load_tool_schemas
from cirrus.replay import NoRecordedResult, ToolReplayer, task_matching
from cirrus.schema import ToolExchange
from cirrus.tool_matching import MatchingError, match_key, matching_from_schemas, normalized_value

REFUND = {"type": "function", "function": {"name": "CreateRefund", "parameters": {"type": "object", "properties": {
    "order_id": {"type": "string"},
    "amount": {"type": "number", "x-cirrus-match": "normalized"},
    "reason": {"type": "string", "x-cirrus-match": "ignored"},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "note": {"type": "string", "x-cirrus-match": "ignored"}}}}}}}}
RECORDED = {"order_id": "OD-***41", "amount": 1500, "reason": "the fridge arrived dented",
            "lines": [{"sku": "FR-200", "note": "dent on the left door"}]}
PARAPHRASE = {"order_id": "OD-***41", "amount": "1,500.00", "reason": "customer reports a dent on delivery",
              "lines": [{"sku": "FR-200", "note": "left door damaged"}]}
TASK = {"task_id": "R-1", "tools": [REFUND], "cassette": "tool_mocks/R-1.yaml",
        "checkpoints": [{"index": 1, "query": "refund please", "reply": "Refund issued.",
                         "tool_calls": [{"name": "CreateRefund", "arguments": RECORDED}], "reply_type": "Solution"}],
        "stats": {"input_tokens": 0, "turns": 2, "checkpoints": 1}}


def test_rules_come_from_the_schemas_nested_paths_included():
    assert matching_from_schemas([REFUND]) == {"CreateRefund": {
        "amount": "normalized", "reason": "ignored", "lines[].note": "ignored"}}
    assert matching_from_schemas([{"type": "function", "function": {"name": "X", "parameters": {
        "type": "object", "properties": {"id": {"type": "string", "x-cirrus-match": "exact"}}}}}]) == {}
    assert matching_from_schemas(None) == {} and task_matching({"tools": [REFUND]}) == matching_from_schemas([REFUND])
    with pytest.raises(MatchingError, match="use one of exact, normalized, ignored"):
        matching_from_schemas([{"type": "function", "function": {"name": "X", "parameters": {
            "type": "object", "properties": {"note": {"x-cirrus-match": "fuzzy"}}}}}])


def test_normalized_values_and_match_keys():
    assert normalized_value("  Hello\u3000World ") == "hello world"  # NFKC: the ideographic space is a space
    assert normalized_value("1,500.00") == normalized_value(1500.0) == normalized_value("1500") == 1500
    assert normalized_value("ＡＢＣ") == "abc" and normalized_value(2.5) == 2.5 and normalized_value(True) is True
    assert normalized_value("1,5") == "1,5"  # not a number with thousands separators: text
    rules = matching_from_schemas([REFUND])
    assert match_key("CreateRefund", PARAPHRASE, rules) == match_key("CreateRefund", json.dumps(RECORDED), rules)
    assert match_key("CreateRefund", {**PARAPHRASE, "order_id": "OD-***42"}, rules) != match_key(
        "CreateRefund", RECORDED, rules)  # identifiers stay exact
    assert match_key("CreateRefund", PARAPHRASE) != match_key("CreateRefund", RECORDED)  # no rules: exact
    assert match_key("Other", PARAPHRASE, rules) == match_key("Other", PARAPHRASE)  # rules are per tool


def test_replay_answers_a_paraphrase_under_the_rules_only(tmp_path):
    write_cassette(tmp_path / TASK["cassette"], build_cassette([
        ToolExchange("c1", "CreateRefund", RECORDED, [{"refund_id": "RF-1", "status": "issued"}])]))
    with ToolReplayer.for_task(tmp_path, TASK) as replayer:
        assert replayer.call("CreateRefund", json.dumps(PARAPHRASE)) == {"refund_id": "RF-1", "status": "issued"}
        with pytest.raises(NoRecordedResult):
            replayer.call("CreateRefund", {**PARAPHRASE, "amount": 1600})
    with ToolReplayer.for_task(tmp_path, TASK, matching={}) as exact:  # rules switched off: the contract's rule
        with pytest.raises(NoRecordedResult):
            exact.call("CreateRefund", PARAPHRASE)
        assert exact.call("CreateRefund", RECORDED)["refund_id"] == "RF-1"


class _Yes:
    name = "yes"

    async def covers(self, history, query, reference, candidate) -> Verdict:
        return Verdict(ok=True)


def test_tev_counts_a_call_answered_under_the_rules_as_the_reference_call():
    turn = AgentTurn(text="Refund issued.", tool_calls=[
        ToolCallMade("CreateRefund", PARAPHRASE, {"refund_id": "RF-1"}, recorded=True)])
    checkpoint = TASK["checkpoints"][0]
    with_rules, _ = asyncio.run(judge_checkpoint(_Yes(), [], checkpoint, turn, matching=task_matching(TASK)))
    exact, _ = asyncio.run(judge_checkpoint(_Yes(), [], checkpoint, turn))
    assert (with_rules.tev, with_rules.accepted) == (True, True)
    assert (exact.tev, exact.accepted) == (False, False)


def test_a_bad_rule_in_a_tool_schemas_file_is_refused_at_ingest(tmp_path):
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{"name": "X", "parameters": {"type": "object", "properties": {
        "note": {"type": "string", "x-cirrus-match": "loose"}}}}]))
    with pytest.raises(ToolSchemaError, match=r"tools.json: entry 1: tool X: argument note: x-cirrus-match is 'loose'"):
        load_tool_schemas(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps([REFUND]))
    assert load_tool_schemas(good)["CreateRefund"]["function"]["parameters"]["properties"]["reason"][
        "x-cirrus-match"] == "ignored"


def test_the_agent_is_sent_the_schemas_without_the_rules():
    from cirrus.tool_matching import without_rules

    sent = without_rules([REFUND])
    assert "x-cirrus-match" not in json.dumps(sent) and "x-cirrus-match" in json.dumps(REFUND)
    assert sent[0]["function"]["parameters"]["properties"]["lines"]["items"]["properties"]["note"] == {
        "type": "string"}
