"""Every billed call counted (issue 22): ``summary.json``'s usage against a
local server that counts every request it answered with a 200 (what a
provider bills), per model, with the tokens it reported -- its own record,
not Cirrus's.  The endpoint check before each session, attempts that failed
and were run again by a resumed session, repair round-trips, the request
asked again without ``response_format`` and a 200 that was no usable answer
all count.  The commands run in this process (``tests.test_eval_loud.run_here``)."""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from cirrus.judges import schemas
from cirrus.judges.verdicts import read_coverage
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from cirrus.usage import UsageLedger, recording
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import agent_reply, judge_or_fluency
from tests.test_cost import USAGE, command, workspace
from tests.test_eval_loud import is_probe, no_traceback, run_here

TOKEN_FIELDS = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}


class Tally:
    """What a server answered with a 200, per model: calls and the tokens
    its ``usage`` reported."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.tokens: dict[str, Counter[str]] = {}
        self.probes = 0

    def count(self, body: dict[str, Any], reply: Reply) -> Reply:
        if reply.status == 200:
            usage = reply.usage if isinstance(reply.usage, dict) else (
                (reply.body or {}).get("usage") if isinstance(reply.body, dict) else
                {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens or 0})
            with self.lock:
                self.calls[body["model"]] += 1
                self.probes += is_probe(body)
                counts = self.tokens.setdefault(body["model"], Counter())
                for name, reported in TOKEN_FIELDS.items():
                    counts[name] += int((usage or {}).get(reported) or 0)
        return reply

    def usage(self) -> dict[str, dict[str, int]]:
        return {model: {"calls": self.calls[model], **self.tokens[model]} for model in self.calls}


def counted(tally: Tally, rule):  # noqa: ANN001, ANN201
    """``rule`` (a ChatServer rule) with every answer counted in ``tally``."""
    def answer(body: dict[str, Any]) -> Reply:
        return tally.count(body, ChatServer._resolve(rule(body), body))
    return answer


def serving(broken: dict[str, bool]):  # noqa: ANN201
    """tests.test_cost's models; while ``broken["on"]``, the agent's answer
    after a tool result on task T-0 is a 400 (its first call, the tool call,
    was answered and billed): that attempt is an error row."""
    def rule(body: dict[str, Any]) -> Reply:
        answer = judge_or_fluency(body)
        if answer is None and broken["on"] and body["messages"][-1]["role"] == "tool" and any(
                "[T-0]" in str(m.get("content")) for m in body["messages"]):
            return Reply(status=400, error_message="scripted refusal")
        reply = agent_reply("perfect", body) if answer is None else Reply(content=answer)
        reply.usage = USAGE[body["model"]]
        return reply
    return rule


def summary_usage(ws: Path, run_id: str) -> dict[str, Any]:
    return json.loads((ws / f"reports/{run_id}/summary.json").read_text())


def as_counted(usage: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {role: {"calls": used["calls"], **{name: used[name] for name in TOKEN_FIELDS}}
            for role, used in usage.items() if used["calls"]}


def test_summary_usage_is_every_request_the_server_answered_across_sessions(tmp_path):
    ws = workspace(tmp_path)
    tally, broken = Tally(), {"on": True}
    with ChatServer(rule=counted(tally, serving(broken))) as server:
        first = run_here(command(ws, server.base_url, "--run-id", "billed"), ws)
        no_traceback(first)
        summary = summary_usage(ws, "billed")
        assert summary["errors"] == 1  # T-0: its tool call was answered, the next agent call refused
        assert tally.probes == 3  # one endpoint check per model
        assert as_counted(summary["usage"]) == tally.usage()
        assert summary["overhead_usage"]["preflight"]["agent"]["calls"] == 1
        assert "rerun" not in summary["overhead_usage"]
        assert "calls include 3 of endpoint checks (billed too" in first.stdout

        broken["on"] = False  # the resumed session runs T-0 again, after its own endpoint check
        resumed = run_here(command(ws, server.base_url, "--run-id", "billed"), ws)
        no_traceback(resumed)
        assert resumed.returncode == 0, resumed.stderr
        assert "calls include 6 of endpoint checks and 1 of attempts run again" in resumed.stdout
    final = summary_usage(ws, "billed")
    assert final["errors"] == 0 and tally.probes == 6
    assert as_counted(final["usage"]) == tally.usage()
    # the failed attempt's answered call (its first, the tool call) was billed: still in the usage
    rerun = final["overhead_usage"]["rerun"]
    assert list(rerun) == ["agent"] and rerun["agent"]["calls"] == 1
    assert final["overhead_usage"]["preflight"]["judge"]["calls"] == 2
    lines = [json.loads(line) for line in (ws / "reports/billed/overhead.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["preflight", "preflight"]
    assert all(set(line["usage"]) == {"agent", "judge", "fluency"} for line in lines)
    assert "sk-" not in (ws / "reports/billed/overhead.jsonl").read_text()


def test_a_subtask_run_counts_its_endpoint_check_too(tmp_path):
    ws = workspace(tmp_path, tasks=2)
    tally = Tally()
    with ChatServer(rule=counted(tally, serving({"on": False}))) as server:
        done = run_here(command(ws, server.base_url, "--run-id", "sub", "--mode", "subtask"), ws)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    summary = summary_usage(ws, "sub")
    assert tally.probes >= 2 and as_counted(summary["usage"]) == tally.usage()


# --- the client: every answered request of one question is recorded


FORMAT = schemas.COVERAGE_RESPONSE_FORMAT
VERDICT = json.dumps({"reason": "the key step is there", "verdict": "Included"})
NO_CHOICES = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "judge-model", "choices": [],
              "usage": {"prompt_tokens": 7, "completion_tokens": 3}}


def ask_once(server: ChatServer) -> UsageLedger:
    role = RoleConfig(Endpoint("judge-model", server.base_url, None), name="judge", retry_initial_wait=0.01,
                      retry_max_wait=0.05, timeout=5.0)

    async def main() -> UsageLedger:
        async with ChatClient(role) as client:
            with recording(UsageLedger()) as ledger:
                await client.complete_parsed([{"role": "user", "content": "included?"}], read_coverage, cache=False,
                                             repair="Answer with the JSON object.", response_format=FORMAT)
        return ledger

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the structured-output fallback's warning
        return asyncio.run(main())


def test_fallback_repair_and_unusable_answers_are_each_counted_as_answered():
    tally = Tally()
    script = [
        Reply(status=400, error_message="response_format is not supported"),  # refused: not answered, not billed
        Reply(content="hmm", prompt_tokens=11, completion_tokens=2),  # asked again without it: unreadable
        Reply(body=NO_CHOICES),  # the repair round-trip: a 200 without a usable answer, retried
        Reply(content=VERDICT, prompt_tokens=13, completion_tokens=9),  # the retry: readable
    ]
    replies = iter(script)
    with ChatServer(rule=counted(tally, lambda body: next(replies))) as server:
        ledger = ask_once(server)
        sent = len(server.requests)
    assert sent == 4
    judge = ledger.roles_dict()["judge"]
    assert tally.usage() == {"judge-model": {"calls": 3, "input_tokens": 31, "output_tokens": 14}}
    assert (judge["calls"], judge["input_tokens"], judge["output_tokens"]) == (3, 31, 14)


def test_a_budget_the_endpoint_check_spends_alone_is_refused_clearly(tmp_path):
    from tests.test_cost import PRICES

    ws = workspace(tmp_path)
    (ws / "cirrus.toml").write_text(PRICES + '\n[prices."fluency"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n')
    with ChatServer(rule=serving({"on": False})) as server:
        # the check costs 0.0027 (agent) + 0.00056 (judge): more than the budget
        done = run_here(command(ws, server.base_url, "--run-id", "tiny", "--max-cost", "0.001"), ws)
        asked = [body for body in server.requests if not is_probe(body)]
    no_traceback(done)
    output = " ".join(done.stderr.split())
    assert done.returncode == 2, output
    assert "--max-cost 0.001 was spent before the first attempt could start: the endpoint check cost 0.0033 USD" in output
    assert "give a higher --max-cost" in output
    assert asked == [] and not (ws / "reports/tiny").exists()


def test_a_batch_answer_read_twice_is_billed_once():
    """Two units of work asking the identical question read one batch answer:
    the provider answered (and billed) it once."""
    from cirrus.llm.batching import BatchCollector, custom_id

    role = RoleConfig(Endpoint("judge-model", "http://127.0.0.1:9/v1", None), name="judge")
    client = ChatClient(role)
    payload = json.dumps({"model": "judge-model", "messages": [{"role": "user", "content": "q"}]}).encode()
    collector = BatchCollector()
    collector.results[custom_id(role.endpoint.base_url, payload)] = {
        "id": "b-1", "object": "chat.completion", "created": 0, "model": "judge-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": VERDICT}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    collector.final = True
    with recording(UsageLedger()) as ledger:
        first = collector.answer(client, payload)
        second = collector.answer(client, payload)
    asyncio.run(client.aclose())
    assert first.content == second.content == VERDICT
    judge = ledger.roles_dict()["judge"]
    assert (judge["calls"], judge["batch_calls"], judge["input_tokens"], judge["cirrus_cache_hits"]) == (1, 1, 5, 1)
