"""What the small real model did as judge (benchmarks/README.md, "A real
model on this machine"), reproduced by a local double: a reason that repeats
itself until the output limit cuts the JSON (asked again with a repair
message, then an error row, never a verdict), and an Included given to a
refusal (which the offline judge, asked on the same turn, does not give)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cirrus.agents.openai_agent import OpenAIAgent
from cirrus.evaluate.runner import EvalSettings, run_eval
from cirrus.judges.llm import LLMCoverageJudge
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer, Reply
from tests.scripted_models import make_task, write_workspace

LOOPING = ('{"reason": "The candidate reply contains the key information of the reference reply. It states that '
           'the customer needs to confirm the order, ' + "confirm the refund amount, confirm the order status, " * 40)
REFUSAL = "I'm sorry, but I can't assist with that."


def run(workspace: Path, server: ChatServer, judge_rule: str) -> dict:
    async def main() -> dict:
        agent_role = RoleConfig(Endpoint("local-model", server.base_url, None), retry_initial_wait=0.01)
        judge_role = RoleConfig(Endpoint("local-judge", server.base_url, None), retry_initial_wait=0.01,
                                name="judge", max_tokens=512)
        async with ChatClient(agent_role) as agent_client, ChatClient(judge_role) as judge_client:
            settings = EvalSettings(workspace=workspace, run_id=judge_rule, runs=1, pass_k=1, concurrency=1,
                                    progress=False)
            return await run_eval(settings, OpenAIAgent(agent_client), LLMCoverageJudge(judge_client, cache=False),
                                  LocalFluencyChecker())
    return asyncio.run(main())


def rule(judge_answer: Reply):
    def answer(body: dict) -> Reply:
        return judge_answer if body["model"] == "local-judge" else Reply(content=REFUSAL)
    return answer


def test_a_judge_answer_cut_in_a_repetition_is_repaired_then_an_error_row(tmp_path):
    workspace = write_workspace(tmp_path, [make_task("T-plain", False)])
    with ChatServer(rule=rule(Reply(content=LOOPING, finish_reason="length", completion_tokens=512))) as server:
        summary = run(workspace, server, "looping")
    judge_requests = [body for body in server.requests if body["model"] == "local-judge"]
    assert len(judge_requests) == 3  # the answer, then twice with a repair message
    assert judge_requests[1]["messages"][-2:][0] == {"role": "assistant", "content": LOOPING}
    assert summary["errors"] == 1 and summary["attempts"] == 1
    [(reason, count)] = summary["error_reasons"]
    assert "unreadable coverage verdict" in reason and "after 3 attempts" in reason and count == 1
    row = json.loads((workspace / "reports/looping/attempts.jsonl").read_text().splitlines()[0])
    assert row["status"] == "error" and row["tpr"] is None  # left out of every score


def test_an_included_on_a_refusal_is_the_judges_and_the_offline_judge_disagrees(tmp_path):
    workspace = write_workspace(tmp_path, [make_task("T-plain", False)])
    included = Reply(content=json.dumps({"reason": "The candidate reply contains the key information.",
                                         "verdict": "Included"}))
    with ChatServer(rule=rule(included)) as server:
        run(workspace, server, "fooled")
    transcript = json.loads((workspace / "reports/fooled/transcripts.jsonl").read_text().splitlines()[0])
    first = transcript["turns"][0]
    assert first["agent_text"] == REFUSAL and first["accepted"]  # the judge's word is the verdict
    offline = asyncio.run(LocalCoverageJudge().covers([], first["query"], first["reference"], REFUSAL))
    assert not offline.ok  # benchmarks/real_model.py asks it on every turn and counts the disagreements
