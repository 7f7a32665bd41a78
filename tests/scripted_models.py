"""Tasks and model rules shared by the tests that run `cirrus eval` against
tests/chat_server.py: three-checkpoint tasks whose reference replies are
``ANSWER-k``, an agent that answers by mode, and judge/fluency rules that read
the prompts the LLM judges send."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.schema import ToolExchange
from tests.chat_server import Reply, tool_calls

TOOL_ARGS = {"instance_id": "i-bp***c"}
TOOL_SCHEMA = {"type": "function", "function": {"name": "DescribeInstance", "description": "d", "parameters": {
    "type": "object", "properties": {"instance_id": {"type": "string"}}, "required": ["instance_id"]}}}


def make_task(task_id: str, with_tool: bool, query_prefix: str = "") -> dict:
    checkpoints = [{"index": k, "query": f"{query_prefix}customer question {k}", "reply": f"ANSWER-{k}",
                    "tool_calls": [], "reply_type": "Solution"} for k in (1, 2, 3)]
    if with_tool:
        checkpoints[0]["tool_calls"] = [{"name": "DescribeInstance", "arguments": TOOL_ARGS}]
    return {"task_id": task_id, "category": "ECS", "knowledge": [], "tools": [TOOL_SCHEMA] if with_tool else [],
            "history": [], "checkpoints": checkpoints,
            "cassette": f"tool_mocks/{task_id}.yaml" if with_tool else None,
            "stats": {"input_tokens": 10, "turns": 6, "checkpoints": 3}}


def between(text: str, tag: str) -> str:
    """The text inside ``<tag>...</tag>`` of a judge prompt."""
    match = re.search(rf'<{tag}(?: id="\w+")?>\n?(.*?)\n?</{tag}(?: id="\w+")?>', text, re.S)
    return match.group(1).strip() if match else ""


def agent_reply(mode: str, body: dict) -> Reply:
    """The agent under test: calls the reference tool first on tool tasks, then
    answers checkpoint k with ``ANSWER-k``, bent by ``mode``: ``jumper`` covers
    checkpoints 1 and 2 at once, ``failer`` fails from checkpoint 2,
    ``disfluent`` makes the next customer message impossible, ``broken``
    answers the tool round with a 400."""
    messages = body["messages"]
    k = sum(1 for m in messages if m["role"] == "user")
    if body.get("tools") and k == 1 and messages[-1]["role"] == "user":
        if mode == "broken":
            return Reply(status=400, error_message="bad request")
        return tool_calls(("DescribeInstance", TOOL_ARGS), completion_tokens=3)
    text = f"ANSWER-{k}"
    if mode == "jumper":
        text = "ANSWER-1 and also ANSWER-2" if k == 1 else "ANSWER-3"
    elif mode == "failer" and k >= 2:
        text = "I am not sure."
    elif mode == "disfluent" and k == 1:
        text = "ANSWER-1 DISFLUENT"
    return Reply(content=text, completion_tokens=5)


def write_workspace(root: Path, tasks: list[dict]) -> Path:
    """``tickets/tasks.jsonl`` and, for tool tasks, a cassette answering the
    reference call with ``{"status": "Running"}``."""
    (root / "tickets").mkdir(parents=True, exist_ok=True)
    (root / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    for task in tasks:
        if task["cassette"]:
            exchange = ToolExchange("c1", "DescribeInstance", TOOL_ARGS, [{"status": "Running"}])
            write_cassette(root / task["cassette"], build_cassette([exchange]))
    return root


def judge_or_fluency(body: dict) -> str | None:
    """Model ``judge``: Included when the reference text is in the candidate;
    model ``fluency``: No when the dialogue holds ``DISFLUENT``; else None."""
    prompt = body["messages"][-1]["content"]
    if body["model"] == "judge":
        included = between(prompt, "reference_reply") in between(prompt, "candidate_reply")
        return json.dumps({"reason": "rule", "verdict": "Included" if included else "Not Included"})
    if body["model"] == "fluency":
        return json.dumps({"reason": "rule", "answer": "No" if "DISFLUENT" in prompt else "Yes"})
    return None
