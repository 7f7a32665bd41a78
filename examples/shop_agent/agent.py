"""An example agent of its own, for the README's walk-through of "evaluate
your own agent": its own system prompt, a retrieval step over the task's
knowledge, and its own tool and argument names (``check_server`` with
``server`` for the recorded ``DescribeInstanceStatus`` with ``instance_id``).

It is deliberately simple and deterministic (no model behind it) so that
the four ways of putting it under test give the same scores, call for call:

* as a **configured model**: ``agent.toml`` (its prompt and tool names under
  ``[agent]``) with a model that behaves as :func:`decide` does;
* as a **service**: ``service.py`` (``cirrus eval --agent-url``);
* as a service that **calls its tools itself** (``--tool-server``);
* in **Python**: ``cirrus eval --agent examples.shop_agent.agent:make_agent``.

:func:`decide` is the whole policy: given the conversation of a turn (OpenAI
messages) and the tools offered, it either calls ``check_server`` for the
instance the customer names (once per turn), or replies with the knowledge
passage that shares the most words with the customer's message, and the
tool's answer when it has one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# its system prompt, a Jinja2 template (the variables of docs/agent-config.md)
SYSTEM_PROMPT = (Path(__file__).parent / "system.j2").read_text(encoding="utf-8")

TOOL = "check_server"
_INSTANCE = re.compile(r"\bi-[A-Za-z0-9*]{4,}")
_WORD = re.compile(r"[a-z0-9]{3,}")


def best_passage(knowledge: Sequence[Mapping[str, Any]], query: str) -> str:
    """The knowledge paragraph sharing the most words with ``query`` (the
    first of a tie; empty when there is none): the retrieval step."""
    words = set(_WORD.findall(query.lower()))
    best, score = "", 0
    for doc in knowledge:
        for paragraph in str(doc.get("text") or "").split("\n\n"):
            overlap = len(words & set(_WORD.findall(paragraph.lower())))
            if overlap > score:
                best, score = paragraph.strip(), overlap
    return best


def result_text(result: Any) -> str:
    """A tool's answer as the text of a tool message (as Cirrus writes it)."""
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def decide(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]],
           knowledge: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"tool_calls": [(name, arguments)]}`` or ``{"content": text}`` for
    the turn whose conversation so far is ``messages``."""
    turn_start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    query = str(messages[turn_start].get("content") or "") if turn_start >= 0 else ""
    results = [str(m.get("content") or "") for m in messages[turn_start + 1:] if m.get("role") == "tool"]
    offered = {str((t.get("function") or {}).get("name")) for t in tools}
    instance = _INSTANCE.search(query)
    if TOOL in offered and instance and not results:
        return {"tool_calls": [(TOOL, {"server": instance.group(0)})]}
    parts = [best_passage(knowledge, query) or "Could you tell me a little more about the problem?"]
    if results:
        parts.append(f"What I found on your server: {results[-1]}")
    return {"content": "\n\n".join(parts)}


class ShopAgent:
    """The same policy in Python (``cirrus eval --agent
    examples.shop_agent.agent:make_agent``), through Cirrus's agent interface
    (:mod:`cirrus.agents.api`)."""

    name = "shop-agent"
    version = "1.0"

    async def respond(self, request: Any, tools: Any) -> Any:
        from cirrus.agents.api import NO_RECORDED_RESULT, AgentTurn, NoRecordedResult

        task = request.task
        messages: list[dict[str, Any]] = [*request.history, {"role": "user", "content": request.query}]
        turn = AgentTurn(text="")
        for _ in range(4):
            step = decide(messages, task.get("tools") or [], task.get("knowledge") or [])
            turn.model_calls += 1
            if "content" in step:
                turn.text = step["content"]
                break
            for name, arguments in step["tool_calls"]:
                try:
                    content = result_text(tools.call(name, arguments))
                except NoRecordedResult:
                    content = json.dumps({"error": NO_RECORDED_RESULT}, ensure_ascii=False)
                messages += [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{turn.model_calls}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(arguments)}}]},
                    {"role": "tool", "tool_call_id": f"c{turn.model_calls}", "content": content}]
        return turn


def make_agent() -> ShopAgent:
    return ShopAgent()
