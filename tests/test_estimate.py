"""`cirrus eval --estimate`: calls and tokens per role, counted by hand with a
word-count tokenizer so every figure below can be checked on paper."""

from __future__ import annotations

import pytest

from cirrus.estimate import FLUENCY_OUTPUT_TOKENS, JUDGE_OUTPUT_TOKENS, estimate, task_usage
from cirrus.pricing import Price


def words(text: str) -> int:
    return len(text.split())


TASK = {
    "task_id": "t1",
    "tools": [],
    "history": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}],
    "checkpoints": [
        {"index": 1, "query": "my disk is full", "reply": "delete old snapshots", "tool_calls": [],
         "reply_type": "Solution"},
        {"index": 2, "query": "which ones", "reply": "", "tool_calls": [{"name": "ListSnapshots", "arguments": {}}],
         "reply_type": "Solution"},
        {"index": 3, "query": "thanks", "reply": "you are welcome", "tool_calls": [], "reply_type": "Appease",
         "context": [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "anything else"}]},
    ],
    "stats": {"input_tokens": 20, "turns": 8, "checkpoints": 3},
}


def system(task):  # the agent's system message: 3 words
    return "you are helpful"


def coverage(history, query, reference, candidate):  # 1 word per history message + the three texts
    return " ".join(["h"] * len(history)) + f" {query} {reference} {candidate}"


def fluency(history, next_query):
    return " ".join(["h"] * len(history)) + f" {next_query}"


def test_task_usage_by_hand() -> None:
    roles = task_usage(TASK, words, system=system, coverage=coverage, fluency=fluency)
    # agent, checkpoint 1: system 3 + history 2+1 + query 4 = 10 in; reply 3 out
    # checkpoint 2 (tool calls, no reply): prompt = 3 + history (3 + 4 + 3) + query 2 = 15; two calls: 2 * 15
    #   + the tool-call message (the JSON of one call, counted as its words) in the second call's input
    # checkpoint 3: context 1 + 2 words; prompt = 3 + (10 + 2 + call) + 3 + query 1
    call = words('[{"id": "ref-1-0", "type": "function", "function": {"name": "ListSnapshots", "arguments": "{}"}}]')
    agent = roles["agent"]
    assert agent.calls == 1 + 2 + 1
    assert agent.input_tokens == 10 + (2 * 15 + call) + (3 + 10 + 2 + call + 3 + 1)
    assert agent.output_tokens == 3 + call + 3
    # judge: checkpoint 1 own (history 3 messages: "h h h" + query 4 + reply 3 + candidate 3 = 13),
    #   jump to 2 skipped (no reference text); checkpoint 2 own skipped (no text),
    #   jump to 3: seen = history 2 + cp1 (2) + query = 5 h + "thanks" 1 + reference 3 + candidate "" 0 = 9;
    #   checkpoint 3 own: seen = 2 + 2 + 2 (query, call) + 2 (context) + 1 = 9 h + 1 + 3 + 3 = 16
    judge = roles["judge"]
    assert judge.calls == 3
    assert judge.input_tokens == 13 + 9 + 16
    assert judge.output_tokens == 3 * JUDGE_OUTPUT_TOKENS
    # fluency: before checkpoint 2: history 4 h + "which ones" 2 = 6; before 3: 6 + 2 context = 8 h + 1 = 9
    assert roles["fluency"].calls == 2
    assert roles["fluency"].input_tokens == 6 + 9
    assert roles["fluency"].output_tokens == 2 * FLUENCY_OUTPUT_TOKENS


def test_offline_roles_make_no_calls_and_estimate_prices_and_multiplies() -> None:
    roles = task_usage(TASK, words, system=system, coverage=None, fluency=None)
    assert set(roles) == {"agent"}
    prices = {"agent-m": Price(1.0, 2.0), "judge-m": Price(0.5, 0.5)}
    result = estimate([TASK, TASK], 3, words, system=system, coverage=coverage, fluency=fluency,
                      models={"agent": "agent-m", "judge[1]": "judge-m", "judge[2]": "judge-m",
                              "fluency": "other"}, prices=prices)
    one = task_usage(TASK, words, system=system, coverage=coverage, fluency=fluency)
    assert result.tasks == 2 and result.checkpoints == 6
    assert result.roles["agent"].calls == 2 * 3 * one["agent"].calls
    # a panel of two: every question asked twice
    assert result.roles["judge"].calls == 2 * 2 * 3 * one["judge"].calls
    assert result.roles["agent"].cost == pytest.approx(
        (6 * one["agent"].input_tokens * 1.0 + 6 * one["agent"].output_tokens * 2.0) / 1e6)
    assert result.roles["fluency"].cost is None  # its model has no price
    assert result.total_cost == pytest.approx(result.roles["agent"].cost + result.roles["judge"].cost)
    assert result.currency == "USD"
    # an offline agent (a baseline) has no client: no agent line at all
    offline = estimate([TASK], 1, words, system=system, coverage=None, fluency=None, models={}, prices=prices)
    assert offline.roles == {} and offline.total_cost is None


def test_the_estimate_counts_your_prompt_and_tools_and_says_what_it_cannot_see() -> None:
    """A configured model agent is estimated with its own rendered prompt and
    the tools it is offered; an agent that calls its models itself (a
    service, a Python agent) is named as not estimated."""
    from types import SimpleNamespace

    from cirrus.agents.config import parse_agent_config, tool_view
    from cirrus.agents.openai_agent import OpenAIAgent
    from cirrus.estimate import renderers

    config = parse_agent_config({"system_prompt": "You are the kettle shop's helper. " * 20,
                                 "knowledge": "tool"}, "agent.toml")
    client = SimpleNamespace(model="m", role=None)
    agent = OpenAIAgent(client, config=config,  # type: ignore[arg-type]
                        tool_view_of=lambda task: tool_view(task.get("tools") or [], config))
    task = {**TASK, "knowledge": [{"doc_id": "kb-1", "title": "Returns", "text": "30 days."}],
            "context": ["Plan: Gold"]}
    parts = renderers(SimpleNamespace(agent=agent, judge=None, fluency=None, clients={"agent": client}))
    system_text = parts["system"](task)
    assert "kettle shop's helper" in system_text and "- Plan: Gold" in system_text
    assert "30 days." not in system_text  # knowledge sits behind the search tool
    assert [t["function"]["name"] for t in parts["tools_offered"](task)] == ["search_knowledge"]
    assert parts["notes"] == []
    with_prompt = estimate([task], 1, words, **parts, prices={})
    plain = estimate([task], 1, words, system=system, coverage=None, fluency=None, models={"agent": "m"}, prices={})
    assert with_prompt.roles["agent"].input_tokens > plain.roles["agent"].input_tokens

    service = SimpleNamespace(name="agent@127.0.0.1:8000/agent", offline=False)
    parts = renderers(SimpleNamespace(agent=service, judge=None, fluency=None, clients={}))
    result = estimate([TASK], 1, words, **parts, prices={})
    assert result.notes and "agent@127.0.0.1:8000/agent" in result.notes[0] and "not in this estimate" in result.notes[0]
    assert result.to_dict()["notes"] == list(result.notes)
