"""Bounded judge inputs (docs/judging.md): the candidate reply, the reference
reply and the history are cut to their limits with a visible marker inside
their data block, the judge answers on the cut text (a huge reply of padding
is judged Not Included, not an error), and the transcript records the cut.

The judge double on tests/chat_server.py finds the real data blocks by their
boundary id and answers Included when the reference's key phrase is in the
candidate block."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from cirrus.evaluate.runner import attempt_transcript
from cirrus.evaluate.types import AgentTurn
from cirrus.evaluate.walk import walk
from cirrus.judges.llm import (
    DEFAULT_INPUT_LIMITS,
    JudgeInputLimits,
    LLMCoverageJudge,
    LLMFluencyChecker,
    cap_history,
    configure_input_limits,
    cut_marker,
    input_limits,
)
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from cirrus.replay import ToolReplayer
from cirrus.settings import SettingsError, load_settings
from tests.chat_server import ChatServer

KEY_ENV = "CIRRUS_TEST_LIMITS_KEY"
KEY_PHRASE = "pay the overdue bill"
REFERENCE = f"Your instance stopped because the account is in arrears: {KEY_PHRASE}, then start it again."
GOOD = f"It stopped because of arrears. Please {KEY_PHRASE} and start the instance again."
QUERY = "Why did my ECS instance stop?"
HUGE = 20_000_000
MARKER = re.compile(r"\[\.\.\. ([\d,]+) characters cut by Cirrus \.\.\.\]")


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-limits-test")
    configure_input_limits(None)
    yield
    configure_input_limits(None)


def _block(content: str, tag: str) -> str:
    boundary = re.findall(r'</\w+ id="(\w+)">', content)[-1]
    start = content.index(f'<{tag} id="{boundary}">\n') + len(f'<{tag} id="{boundary}">\n')
    return content[start:content.index(f'\n</{tag} id="{boundary}">', start)]


def coverage_double(body):
    user = body["messages"][1]["content"]
    word = "Included" if KEY_PHRASE in _block(user, "candidate_reply") else "Not Included"
    return json.dumps({"reason": "judged by the key phrase", "verdict": word})


def fluency_double(body):
    return json.dumps({"reason": "fits", "answer": "Yes"})


def _client(server):
    return ChatClient(RoleConfig(Endpoint("judge", server.base_url, KEY_ENV), temperature=0.0,
                                 retry_initial_wait=0.01, max_retries=1))


def _covers(candidate, reference=REFERENCE, history=(), **judge_kw):
    with ChatServer(rule=coverage_double) as server:
        async def run():
            async with _client(server) as client:
                judge = LLMCoverageJudge(client, cache=False, **judge_kw)
                return await judge.covers(list(history), QUERY, reference, candidate)

        verdict = asyncio.run(run())
    assert len(server.requests) == 1
    return verdict, server.requests[0]["messages"][1]["content"]


def test_a_20_mb_reply_is_cut_judged_on_its_head_and_recorded():
    candidate = "padding " * (HUGE // 8)
    verdict, user = _covers(candidate)
    limits = DEFAULT_INPUT_LIMITS
    offline = ChatClient(RoleConfig(Endpoint("j", "http://127.0.0.1:9/v1", None), temperature=0.0))
    prompt_size = len(LLMCoverageJudge(offline).user_message([], QUERY, REFERENCE, "x"))
    assert len(user) < limits.candidate_chars + prompt_size + 100
    block = _block(user, "candidate_reply")
    marker = MARKER.search(block)
    assert marker and block.endswith(marker.group(0))
    head = block[:marker.start()].rstrip("\n")
    assert head == candidate[:limits.candidate_chars].rstrip()
    assert int(marker.group(1).replace(",", "")) == HUGE - 1 - len(head)  # strip() took the last space
    assert verdict.ok is False  # read, not an infrastructure error: padding holds no key information
    assert verdict.input_cut == {"candidate": {"original_chars": HUGE - 1,
                                               "sent_chars": len(block)}}
    assert _block(user, "reference_reply") == REFERENCE


def test_the_key_phrase_within_the_cap_is_still_seen():
    verdict, user = _covers(GOOD + " " + "x" * 50_000)
    assert verdict.ok is True and set(verdict.input_cut) == {"candidate"}


def test_a_normal_reply_is_sent_unchanged_and_not_marked():
    verdict, user = _covers(GOOD, history=[{"role": "user", "content": "hello"},
                                           {"role": "assistant", "content": "Hi, how can I help?"}])
    assert _block(user, "candidate_reply") == GOOD
    assert "cut by Cirrus" not in user
    assert verdict.ok is True and verdict.input_cut is None


def test_a_long_reference_is_cut_to_its_limit():
    verdict, user = _covers(GOOD, reference=REFERENCE + " more" * 1000, limits=JudgeInputLimits(reference_chars=200))
    assert MARKER.search(_block(user, "reference_reply"))
    assert verdict.input_cut["reference"]["original_chars"] == len(REFERENCE) + 5000


def test_the_history_cap_keeps_the_most_recent_whole_messages():
    history = []
    for n in range(40):
        history += [{"role": "user", "content": f"customer message {n} " + "c" * 900},
                    {"role": "assistant", "content": f"agent message {n} " + "a" * 900}]
    limits = JudgeInputLimits(history_chars=5_000)
    verdict, user = _covers(GOOD, history=history, history_turns=40, limits=limits)
    conversation = _block(user, "conversation")
    first, *messages = conversation.split("\n\n")
    assert MARKER.fullmatch(first)
    assert len(conversation) - len(first) - 2 <= limits.history_chars
    assert messages[-1].startswith("Agent: agent message 39 ")
    assert all(m.startswith(("Customer: customer message", "Agent: agent message")) and len(m) > 900
               for m in messages)  # whole messages only
    assert "message 0 " not in conversation
    assert verdict.input_cut["history"]["sent_chars"] == len(conversation)


def test_cap_history_falls_back_to_the_tail_of_a_single_long_message():
    text, cut = cap_history("Customer: " + "x" * 100 + "END", 50)
    assert text.endswith("END") and cut == 113 - 50 and text.startswith(cut_marker(cut))


def test_the_fluency_checker_caps_its_history():
    history = [{"role": "user", "content": "q " * 1400}, {"role": "assistant", "content": "a " * 1400}] * 10

    with ChatServer(rule=fluency_double) as server:
        async def run():
            async with _client(server) as client:
                checker = LLMFluencyChecker(client, cache=False, history_turns=10,
                                            limits=JudgeInputLimits(history_chars=6_000))
                return await checker.follows(history, "thanks")

        verdict = asyncio.run(run())
    assert verdict.ok is True and set(verdict.input_cut) == {"history"}
    assert MARKER.search(_block(server.requests[0]["messages"][1]["content"], "conversation"))


class HugeAgent:
    name = "huge"
    offline = True

    async def respond(self, request, replayer):
        text = "padding " * (HUGE // 8)
        return AgentTurn(text=text, messages=[{"role": "assistant", "content": text}])


def test_the_transcript_records_the_cut():
    task = {"task_id": "T-1", "history": [], "checkpoints": [
        {"index": 1, "query": QUERY, "reply": REFERENCE, "tool_calls": [], "reply_type": "Solution"}],
        "stats": {"input_tokens": 0, "turns": 2, "checkpoints": 1}}
    with ChatServer(rule=coverage_double) as server:
        async def run():
            async with _client(server) as client:
                judge = LLMCoverageJudge(client, cache=False)
                return await walk(task, HugeAgent(), judge, LLMFluencyChecker(client, cache=False),
                                  ToolReplayer(None))

        result = asyncio.run(run())
    assert result.outcome.covered == 0  # a failing agent fails: judged, not an error
    transcript = attempt_transcript(task, 0, result, None)
    record = transcript["turns"][0]["verdicts"][0]
    assert record["ok"] is False
    cut = record["judge_input_cut"]
    assert set(cut) == {"candidate"} and cut["candidate"]["original_chars"] == HUGE - 1
    assert DEFAULT_INPUT_LIMITS.candidate_chars < cut["candidate"]["sent_chars"] < DEFAULT_INPUT_LIMITS.candidate_chars + 60
    assert type(record["raw"]) is str
    json.dumps(transcript)  # serialisable as the run store writes it


def test_the_transcript_of_an_uncut_verdict_has_no_field():
    task = {"task_id": "T-1", "history": [], "checkpoints": [
        {"index": 1, "query": QUERY, "reply": REFERENCE, "tool_calls": [], "reply_type": "Solution"}],
        "stats": {"input_tokens": 0, "turns": 2, "checkpoints": 1}}

    class GoodAgent:
        name, offline = "good", True

        async def respond(self, request, replayer):
            return AgentTurn(text=GOOD, messages=[{"role": "assistant", "content": GOOD}])

    with ChatServer(rule=coverage_double) as server:
        async def run():
            async with _client(server) as client:
                return await walk(task, GoodAgent(), LLMCoverageJudge(client, cache=False),
                                  LLMFluencyChecker(client, cache=False), ToolReplayer(None))

        result = asyncio.run(run())
    record = attempt_transcript(task, 0, result, None)["turns"][0]["verdicts"][0]
    assert record["ok"] is True and "judge_input_cut" not in record


def test_limits_are_configured_in_cirrus_toml(tmp_path):
    (tmp_path / "cirrus.toml").write_text("[judge_input]\ncandidate_chars = 500\nhistory_chars = 2000\n")
    load_settings(tmp_path)
    assert input_limits() == JudgeInputLimits(candidate_chars=500, reference_chars=8_000, history_chars=2_000)
    client = ChatClient(RoleConfig(Endpoint("j", "http://127.0.0.1:9/v1", None), temperature=0.0))
    judge = LLMCoverageJudge(client)
    assert judge.limits.candidate_chars == 500
    assert judge.fingerprint()["input_limits"]["candidate_chars"] == 500
    assert MARKER.search(judge.user_message([], QUERY, REFERENCE, "y" * 600))

    (tmp_path / "cirrus.toml").write_text("[judge_input]\ncandidate_chars = 0\n")
    with pytest.raises(SettingsError, match="judge_input.candidate_chars"):
        load_settings(tmp_path)
    (tmp_path / "cirrus.toml").write_text("")
    load_settings(tmp_path)
    assert input_limits() == DEFAULT_INPUT_LIMITS
