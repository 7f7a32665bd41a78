from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest

from cirrus.evaluate.types import InfrastructureError, Verdict
from cirrus.judges import prompts
from cirrus.judges.llm import LLMCoverageJudge, LLMFluencyChecker, parse_coverage, parse_yes_no, render_history
from cirrus.llm.cache import ResponseCache
from cirrus.llm.client import ChatClient, RoleConfig, UnparseableOutput
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer

KEY_ENV = "CIRRUS_TEST_JUDGE_KEY"
KEY = "sk-judge-secret-do-not-store-4242"

HISTORY = [
    {"role": "user", "content": "turn one: hello"},
    {"role": "assistant", "content": "turn one answer"},
    {"role": "user", "content": "turn two: my ECS is down"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "DescribeInstanceStatus", "arguments": "{\"instance_id\": \"i-1\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"status\": \"Stopped\"}"},
    {"role": "assistant", "content": "It is stopped."},
    {"role": "user", "content": "turn three: why?"},
    {"role": "assistant", "content": "Because the bill is overdue."},
    {"role": "user", "content": "turn four: ok I paid"},
    {"role": "assistant", "content": "Thanks, restarting it now."},
]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def role(server: ChatServer, **kw) -> RoleConfig:
    return RoleConfig(Endpoint("judge-model", server.base_url, KEY_ENV), temperature=0.0,
                      retry_initial_wait=0.01, max_retries=2, **kw)


def with_client(server, fn, cache=None):
    async def main():
        async with ChatClient(role(server), cache=cache) as client:
            return await fn(client)
    return asyncio.run(main())


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"reason": "all steps are there", "verdict": "Included"}', True),
    ('{"verdict": "Not Included", "reason": "the restart step is not included"}', False),
    ('```json\n{"reason": "r", "verdict": "not included"}\n```', False),
    ("Included", True),
    ("Not Included", False),
    ("not_included", False),
    ("**Verdict:** Not Included", False),
    ("The candidate gives the cause and the steps.\nVerdict: Included", True),
    ("Not Included. The candidate never asks for the instance ID.", False),
    ("<think>Maybe Included... no, Not Included.</think>\nIncluded", True),
    ('Here is my judgment: {"reason": "x", "verdict": "Included"} hope it helps', True),
    ('{"included": false}', False),
    ('{"verdict": "Included"', True),  # truncated JSON, still marked
    ("Included. The reference's restart step is included too.", True),
])
def test_parse_coverage(raw, expected):
    assert parse_coverage(raw) is expected


@pytest.mark.parametrize("raw", [
    "", "I am not sure.", "The answer is included in the reference.", '{"verdict": "Partially"}',
    "Included\nSo overall: not included at all? Not Included",
    "Included\nThe key step is not included, though.",
    "Verdict: Included\nVerdict: Not Included",  # first and final verdicts disagree: asked again, not chosen
    '{"verdict": "Not Included"}\nVerdict: Included',  # the structured field and the prose disagree
])
def test_parse_coverage_refuses_unreadable_or_contradicting_answers(raw):
    with pytest.raises(UnparseableOutput):
        parse_coverage(raw)


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"reason": "fits", "answer": "Yes"}', True),
    ('{"answer": "No", "reason": "the agent never asked for a screenshot"}', False),
    ("Yes", True), ("no.", False), ("**No**", False), ("Answer: yes", True),
    ("The customer reports the result of the steps.\nYes", True),
    ('{"fluent": true}', True), ('{"answer": "Yes, it follows"}', True),
])
def test_parse_yes_no(raw, expected):
    assert parse_yes_no(raw) is expected


@pytest.mark.parametrize("raw", ["maybe", "", '{"answer": "unclear"}', "No idea, sorry.",
                                 "Yes\nNo"])  # first and final answers disagree: asked again, not chosen
def test_parse_yes_no_refuses_unreadable_answers(raw):
    with pytest.raises(UnparseableOutput):
        parse_yes_no(raw)


def test_render_history_keeps_the_last_turns():
    rendered = render_history(HISTORY, turns=3)
    assert "turn one" not in rendered
    assert rendered.startswith("Customer: turn two")
    assert 'Agent (tool call): DescribeInstanceStatus {"instance_id": "i-1"}' in rendered
    assert 'Tool result: {"status": "Stopped"}' in rendered
    assert rendered.endswith("Agent: Thanks, restarting it now.")
    assert render_history([], turns=3) == prompts.EMPTY_HISTORY
    assert "turn one" in render_history(HISTORY, turns=10)


def test_coverage_judge_verdicts():
    answers = ['{"reason": "cause and fix present", "verdict": "Included"}',
               '{"reason": "the cause is missing", "verdict": "Not Included"}']
    with ChatServer(answers) as server:
        async def two(client):
            judge = LLMCoverageJudge(client)
            yes = await judge.covers(HISTORY, "why is it down?", "Your bill is overdue; pay it and restart.",
                                     "It is down because of the overdue bill. Pay it, then restart.")
            no = await judge.covers(HISTORY, "why is it down?", "Your bill is overdue; pay it and restart.",
                                    "Please restart it.")
            return judge, yes, no

        judge, yes, no = with_client(server, two)
    assert yes == Verdict(ok=True, raw=answers[0]) and no == Verdict(ok=False, raw=answers[1])
    assert judge.name == "llm-coverage:judge-model"
    request = server.requests[0]
    assert request["model"] == "judge-model" and request["temperature"] == 0.0
    system, user = request["messages"]
    assert system == {"role": "system", "content": prompts.COVERAGE_SYSTEM}
    boundary = re.search(r'<reference_reply id="(\w+)">', user["content"]).group(1)
    assert (f'<reference_reply id="{boundary}">\nYour bill is overdue; pay it and restart.\n'
            f'</reference_reply id="{boundary}">') in user["content"]
    assert "It is down because of the overdue bill." in user["content"]
    assert (f'<customer_last_message id="{boundary}">\nwhy is it down?\n'
            f'</customer_last_message id="{boundary}">') in user["content"]
    assert "turn one" not in user["content"] and "turn two" in user["content"]


def test_coverage_judge_retries_garbage_then_reads_the_verdict():
    with ChatServer(["I think it's fine", '{"reason": "r", "verdict": "Included"}']) as server:
        verdict = with_client(server, lambda c: LLMCoverageJudge(c).covers([], "q", "ref", "cand"))
    assert verdict.ok and len(server.requests) == 2
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": prompts.COVERAGE_REPAIR}
    assert server.requests[1]["messages"][-2] == {"role": "assistant", "content": "I think it's fine"}


def test_coverage_judge_garbage_three_times_is_an_infrastructure_error_not_a_fail(tmp_path):
    cache = ResponseCache(tmp_path)
    with ChatServer(rule=lambda body: "hmm, hard to say") as server:
        with pytest.raises(InfrastructureError, match="after 3 attempts"):
            with_client(server, lambda c: LLMCoverageJudge(c).covers([], "q", "ref", "cand"), cache=cache)
    assert len(server.requests) == 3 and len(cache) == 0


def test_fluency_checker_yes_and_no():
    with ChatServer(['{"reason": "answers the question", "answer": "Yes"}', "No"]) as server:
        async def two(client):
            checker = LLMFluencyChecker(client)
            return checker, await checker.follows(HISTORY, "great, it works"), await checker.follows(HISTORY, "x")

        checker, yes, no = with_client(server, two)
    assert yes.ok and not no.ok and no.raw == "No"
    assert checker.name == "llm-fluency:judge-model"
    system, user = server.requests[0]["messages"]
    assert system["content"] == prompts.FLUENCY_SYSTEM
    boundary = re.search(r'<next_customer_message id="(\w+)">', user["content"]).group(1)
    assert (f'<next_customer_message id="{boundary}">\ngreat, it works\n'
            f'</next_customer_message id="{boundary}">') in user["content"]
    assert "Agent: Thanks, restarting it now." in user["content"]


def test_fluency_checker_garbage_is_retried_then_infrastructure_error():
    with ChatServer(["perhaps", "perhaps", "perhaps", "Yes"]) as server:
        with pytest.raises(InfrastructureError):
            with_client(server, lambda c: LLMFluencyChecker(c).follows(HISTORY, "next"))
    assert len(server.requests) == 3


def test_judge_calls_are_cached_without_the_key(tmp_path, monkeypatch):
    cache_dir = tmp_path / "judge-cache"
    with ChatServer(rule=lambda body: '{"reason": "r", "verdict": "Included", "answer": "Yes"}') as server:
        async def judge_twice(client):
            judge = LLMCoverageJudge(client)
            first = await judge.covers(HISTORY, "q", "ref", "cand")
            second = await judge.covers(HISTORY, "q", "ref", "cand")
            return first, second

        first, second = with_client(server, judge_twice, cache=ResponseCache(cache_dir))
        assert first == second and len(server.requests) == 1
        # re-scoring later, with another key in the variable: still nothing asked twice
        monkeypatch.setenv(KEY_ENV, "sk-rotated-key-7777")
        again = with_client(server, lambda c: LLMCoverageJudge(c).covers(HISTORY, "q", "ref", "cand"),
                            cache=ResponseCache(cache_dir))
        assert again.ok and len(server.requests) == 1
        # a fluency question is another question
        with_client(server, lambda c: LLMFluencyChecker(c).follows(HISTORY, "q"), cache=ResponseCache(cache_dir))
        assert len(server.requests) == 2
    for path in cache_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data and b"sk-rotated-key-7777" not in data


def test_judge_without_cache_flag_always_asks(tmp_path):
    with ChatServer(rule=lambda body: "Included") as server:
        async def twice(client):
            judge = LLMCoverageJudge(client, cache=False)
            await judge.covers([], "q", "r", "c")
            await judge.covers([], "q", "r", "c")
        with_client(server, twice, cache=ResponseCache(tmp_path))
    assert len(server.requests) == 2


def test_concurrent_judge_calls_overlap():
    all_in = threading.Barrier(20, timeout=30)  # serial calls never get 20 requests waiting at once
    met = []

    def rule(body):
        if "warm-up" not in body["messages"][1]["content"]:
            met.append(all_in.wait() >= 0)
        candidate = re.search(r'<candidate_reply id="\w+">\n', body["messages"][1]["content"])
        candidate = body["messages"][1]["content"][candidate.end():]
        verdict = "Included" if candidate.startswith("good") else "Not Included"
        return json.dumps({"reason": "rule", "verdict": verdict})

    with ChatServer(rule=rule) as server:
        async def many(client):
            judge = LLMCoverageJudge(client)
            # the first structured request goes alone (cirrus.llm.client: one refused request at most)
            await judge.covers([], "warm-up", "ref", "good warm-up")
            return await asyncio.gather(*(
                judge.covers([], f"q{i}", "ref", ("good" if i % 2 == 0 else "bad") + f" reply {i}")
                for i in range(20)
            ))

        verdicts = with_client(server, many)
    assert [v.ok for v in verdicts] == [i % 2 == 0 for i in range(20)]
    assert len(server.requests) == 21 and met == [True] * 20


def test_fingerprints_hold_prompt_and_parameters():
    client = ChatClient(RoleConfig(Endpoint("j", "http://127.0.0.1:9/v1", None), temperature=0.0))
    coverage = LLMCoverageJudge(client).fingerprint()
    assert coverage["model"] == "j" and coverage["params"]["temperature"] == 0.0 and coverage["prompt_sha256"]
    assert coverage != LLMCoverageJudge(client, system_prompt="other").fingerprint()
    assert coverage["prompt_sha256"] != LLMFluencyChecker(client).fingerprint()["prompt_sha256"]


def _block(text: str, tag: str) -> str:
    match = re.search(rf'<{tag} id="(\w+)">\n(.*?)\n</{tag} id="\1">', text, re.S)
    return match.group(2) if match else ""


def test_logical_jump_prompt_shows_what_the_agent_saw_and_the_later_exchange():
    answer = '{"reason": "the restart step is already there", "verdict": "Included"}'
    with ChatServer([answer]) as server:
        verdict = with_client(server, lambda c: LLMCoverageJudge(c).covers_later(
            HISTORY + [{"role": "user", "content": "turn five: why is it down?"}], "turn five: why is it down?",
            "Your bill is overdue; pay it, then restart the instance.",
            "I paid it, now what?", "Restart the instance from the console."))
    assert verdict == Verdict(ok=True, raw=answer)
    system, user = (m["content"] for m in server.requests[0]["messages"])
    assert system == prompts.COVERAGE_LATER_SYSTEM and system != prompts.COVERAGE_SYSTEM
    assert "never saw" in system
    # the customer's last message is the one the agent answered, U_k ...
    assert _block(user, "customer_last_message") == "turn five: why is it down?"
    assert _block(user, "candidate_reply") == "Your bill is overdue; pay it, then restart the instance."
    # ... and the later message U_j and its reply R_j come after, said to be later
    assert _block(user, "later_customer_message") == "I paid it, now what?"
    assert _block(user, "reference_reply") == "Restart the instance from the console."
    assert user.index("<candidate_reply") < user.index("<later_customer_message") < user.index("<reference_reply")
    assert "I paid it" not in _block(user, "conversation")


def test_the_walk_asks_later_checkpoints_as_logical_jumps():
    """Checkpoint 1 is asked with the plain prompt; checkpoints 2 and 3 with
    the logical-jump prompt, still showing U_1 as the last message."""
    from cirrus.evaluate.walk import walk
    from cirrus.evaluate.types import AgentTurn
    from cirrus.replay import ToolReplayer

    task = {"task_id": "t", "history": [], "checkpoints": [
        {"index": k, "query": f"question {k}", "reply": f"answer {k}", "tool_calls": [], "reply_type": "Solution"}
        for k in (1, 2, 3)], "stats": {"input_tokens": 0, "turns": 6, "checkpoints": 3}}

    class Agent:
        name, offline = "a", True

        async def respond(self, request, replayer):
            return AgentTurn("answer 1, answer 2", messages=[{"role": "assistant", "content": "answer 1, answer 2"}])

    def judge_rule(body):
        system, user = (m["content"] for m in body["messages"][:2])
        if system == prompts.FLUENCY_SYSTEM:
            return '{"answer": "Yes"}'
        included = _block(user, "reference_reply") in _block(user, "candidate_reply")
        return '{"verdict": "%s"}' % ("Included" if included else "Not Included")

    with ChatServer(rule=judge_rule) as server:
        async def run(client):
            return await walk(task, Agent(), LLMCoverageJudge(client), LLMFluencyChecker(client), ToolReplayer(None))
        result = with_client(server, run)
    assert result.outcome.covered == 2 and result.turns[0].covered_through == 2
    assert all(len(m["messages"]) == 2 for m in server.requests)  # every answer read at once
    asked = [(m["messages"][0]["content"], m["messages"][1]["content"]) for m in server.requests]
    coverage = [(system, user) for system, user in asked if system != prompts.FLUENCY_SYSTEM]
    assert [system == prompts.COVERAGE_LATER_SYSTEM for system, _ in coverage[:3]] == [False, True, True]
    for _, user in coverage[:3]:
        assert _block(user, "customer_last_message") == "question 1"
    assert [_block(user, "later_customer_message") for _, user in coverage[1:3]] == ["question 2", "question 3"]


def test_a_judge_or_fluency_request_longer_than_the_context_says_so():
    """The judge and the fluency checker meet a real server's context limit
    as the agent does: an infrastructure error that names it, never a verdict."""
    from tests.chat_server import Reply

    said = "the request exceeds the available context size, try increasing it"
    with ChatServer([Reply(status=400, error_message=said)]) as server:
        with pytest.raises(InfrastructureError, match="exceeded the model's context window") as caught:
            with_client(server, lambda c: LLMCoverageJudge(c).covers([], "q", "ref", "cand"))
    assert "HTTP 400" in str(caught.value) and "tokens sent" in str(caught.value)
    assert len(server.requests) == 1
    with ChatServer([Reply(status=400, error_message=said)]) as server:
        with pytest.raises(InfrastructureError, match="exceeded the model's context window"):
            with_client(server, lambda c: LLMFluencyChecker(c).follows([], "q"))
