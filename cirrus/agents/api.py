"""The interface of an agent written in Python (``cirrus eval --agent
package.module:factory``; docs/agent-protocol.md, "Your agent in Python").

Import from here, not from the modules these names live in: this module is
the stable home of the agent interface.  Stable (API version
:data:`API_VERSION`) means: the names below keep their meaning, the fields
of :class:`TurnRequest`, :class:`AgentTurn` and :class:`ToolCallMade`
listed here stay (fields may be added, with defaults), and :class:`Tools`
keeps ``call(name, arguments)``.  Anything else of ``cirrus`` may change
between versions.

An agent is any object with ``async def respond(self, request, tools) ->
AgentTurn`` (:class:`Agent`).  For each agent turn (one reply to one customer
message) Cirrus calls it with

* ``request``, a :class:`TurnRequest`: ``request.task`` is the task's public
  view (:func:`public_task`: ``task_id``, ``category``, ``channel``,
  ``language``, ``knowledge``, ``tools``, ``history`` and, when the ticket
  carried some, ``context``: the customer context as lines; never the reference
  replies, the reference tool calls or the checkpoints), ``request.history``
  the conversation so far (OpenAI chat messages, the agent's own earlier
  turns included), ``request.query`` the customer's message to answer,
  ``request.attempt`` the attempt number (0-based);
* ``tools``, a :class:`Tools`: ``tools.call(name, arguments)`` answers a tool
  call from the task's recorded tool results (the cassette) and returns the
  result, or raises :class:`NoRecordedResult` when the recording holds no
  answer for that name and those arguments.  Give your model
  :data:`NO_RECORDED_RESULT` (or your own error) then, as the built-in agents
  do.  Every call is recorded: the calls made through ``tools`` are the turn's
  tool calls that Cirrus scores (TIA, TSA, TEV).

``respond`` returns an :class:`AgentTurn`; only ``text`` (the reply) is
required.  Cirrus fills in what is left empty: ``tool_calls`` from the calls
made through ``tools`` (when some were made, they replace any list the turn
brings), ``messages`` (the OpenAI messages the turn adds to the history) from
those calls and ``text``, ``output_tokens`` (STL) by counting ``text`` and the
calls with its offline tokenizer; ``wall_s`` is always Cirrus's own clock.
An agent that calls models itself reports their tokens with
:func:`record_model_call` (cost, ``summary.json`` usage) and the turn's
``output_tokens``/``input_tokens``/``model_calls``.  An exception escaping
``respond`` makes the attempt an error row (left out of every score), with
the agent and the exception named; a :class:`ModelAuthError` (raise it for
a refused credential) stops the run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from cirrus.agents.prompts import NO_RECORDED_RESULT
from cirrus.evaluate.types import AgentTurn, InfrastructureError, ToolCallMade, TurnRequest
from cirrus.llm.providers import ModelAuthError
from cirrus.replay import NoRecordedResult
from cirrus.tool_matching import without_rules
from cirrus.usage import call_usage, record

API_VERSION = 1

# the fields of a task an agent may see: everything but the references
# (checkpoints: queries to come, reference replies and tool calls), the
# cassette (recorded answers) and ingest's statistics
PUBLIC_TASK_FIELDS = ("task_id", "category", "channel", "language", "knowledge", "tools", "history", "context")

__all__ = [
    "API_VERSION",
    "NO_RECORDED_RESULT",
    "PUBLIC_TASK_FIELDS",
    "Agent",
    "AgentTurn",
    "InfrastructureError",
    "ModelAuthError",
    "NoRecordedResult",
    "ToolCallMade",
    "Tools",
    "TurnRequest",
    "public_task",
    "record_model_call",
]


@runtime_checkable
class Tools(Protocol):
    """What ``respond`` gets as ``tools``."""

    def call(self, name: str, arguments: Any) -> Any:
        """The recorded result of tool ``name`` called with ``arguments`` (a
        JSON value, or a JSON string as models write them); raises
        :class:`NoRecordedResult` when the recording holds none."""
        ...


@runtime_checkable
class Agent(Protocol):
    """An agent under test.  Optional attributes: ``name`` (str: the run's
    agent name; default ``python:<spec>``), ``version`` (str: recorded with
    the run) and ``fingerprint()`` (a JSON-able dict of what makes its answers
    what they are: a resumed run must find it unchanged)."""

    async def respond(self, request: TurnRequest, tools: Tools) -> AgentTurn:
        """Answer ``request.query``: call tools through ``tools``, return the reply."""
        ...


def public_task(task: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a task (a line of ``tickets/tasks.jsonl``) an agent may
    see: :data:`PUBLIC_TASK_FIELDS`, copied (an agent changing it changes
    nothing of the run); the tool schemas without Cirrus's replay rules
    (``x-cirrus-match``, :mod:`cirrus.tool_matching`)."""
    view = {name: copy.deepcopy(task[name]) for name in PUBLIC_TASK_FIELDS if name in task}
    if "tools" in view:
        view["tools"] = without_rules(view["tools"])
    return view


def record_model_call(input_tokens: int | None, output_tokens: int | None, *,
                      cached_input_tokens: int | None = None, reasoning_tokens: int | None = None) -> None:
    """Count one model call your agent made in the run's usage (role
    ``agent``: ``summary.json`` usage and cost; priced with ``[prices]`` under
    the agent's name).  Call it from ``respond``; tokens as the model's API
    reported them (``None``: not reported)."""
    record("agent", call_usage(input_tokens, output_tokens, cached_input_tokens=cached_input_tokens,
                               reasoning_tokens=reasoning_tokens))
