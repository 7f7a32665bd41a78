"""What the agent's model answers besides a clean reply, and what Cirrus does
with it (:class:`~cirrus.agents.openai_agent.OpenAIAgent`).

Each such thing is an *agent note* on the turn (``AgentTurn.notes``): a dict
with ``kind`` (one of :data:`NOTE_KINDS`), ``model_call`` (1-based, within
the turn) and details.  Notes are written to the transcript's turn
(``agent_notes``), counted per kind in the attempt row and in
``summary.json`` (``agent_notes``), and never change a score by themselves:

``think_removed``
    ``<think>...</think>`` (also ``<thinking>``, an unclosed block, or a
    ``</think>`` whose opening tag was in the prompt) in the reply's text:
    reasoning, not part of the reply.  Removed before the reply is judged or
    goes back into the history; the note keeps the removed text.
``tool_call_as_text``
    the reply looks like tool calls written as text
    (:mod:`cirrus.agents.text_tool_calls`) and reading them is off: the reply
    is judged as the text it is.  ``form`` and ``tools`` say what it held.
``tool_call_read_from_text``
    the same, with reading on: the calls were answered from the cassette as
    tool calls (``ToolCallMade.read_from_text`` names the form) and the rest
    of the text is the reply.
``tool_call_text_unreadable``
    a ``<tool_call>`` block whose content is no JSON call: judged as text.
``arguments_not_json``
    a tool call whose arguments are not JSON: it is answered with the "no
    recorded result" tool error (the arguments stay the model's raw text).
``unknown_tool``
    a call to a tool the task did not offer: answered with the "no recorded
    result" tool error.
``cut_at_max_tokens``
    the model stopped at its output limit (``finish_reason: length``).
``empty_reply``
    the turn ended with no text for the customer (judged as an empty reply).
``knowledge_searched``
    the model called the knowledge search (``[agent] knowledge = "tool"``,
    :mod:`cirrus.agents.knowledge_tool`): ``query`` and the ``documents``
    returned.  Not a tool call of the ticket: never scored.

A request the model's context cannot hold is an infrastructure error, named
as such by the client layer (:func:`cirrus.llm.client.errors.context_overflow`,
for every role: agent, judge, fluency checker, annotator), not a score.
"""

from __future__ import annotations

import re
from typing import Any

THINK_REMOVED = "think_removed"
TOOL_CALL_AS_TEXT = "tool_call_as_text"
TOOL_CALL_READ_FROM_TEXT = "tool_call_read_from_text"
TOOL_CALL_TEXT_UNREADABLE = "tool_call_text_unreadable"
ARGUMENTS_NOT_JSON = "arguments_not_json"
UNKNOWN_TOOL = "unknown_tool"
CUT_AT_MAX_TOKENS = "cut_at_max_tokens"
EMPTY_REPLY = "empty_reply"
KNOWLEDGE_SEARCHED = "knowledge_searched"
NOTE_KINDS = (THINK_REMOVED, TOOL_CALL_AS_TEXT, TOOL_CALL_READ_FROM_TEXT, TOOL_CALL_TEXT_UNREADABLE,
              ARGUMENTS_NOT_JSON, UNKNOWN_TOOL, CUT_AT_MAX_TOKENS, EMPTY_REPLY, KNOWLEDGE_SEARCHED)

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)


def strip_think(text: str) -> tuple[str, str | None]:
    """``text`` without its reasoning blocks, and the reasoning removed (None
    when there was none).  A closing tag with no opening one ends reasoning
    that began in the prompt (templates that open ``<think>`` themselves)."""
    removed: list[str] = []
    opening = _THINK_BLOCK.search(text)
    closing = _THINK_CLOSE.search(text)
    if closing is not None and (opening is None or closing.start() < opening.start()):
        removed.append(text[:closing.start()].strip())
        text = text[closing.end():]

    def cut(match: re.Match[str]) -> str:
        removed.append(match.group(2).strip())
        return ""

    text = _THINK_BLOCK.sub(cut, text)
    if not removed:
        return text, None
    return text.strip(), "\n\n".join(part for part in removed if part)


def note(kind: str, model_call: int, **details: Any) -> dict[str, Any]:
    """An agent note (see the module docstring)."""
    return {"kind": kind, "model_call": model_call, **details}

