"""An agent written in Python, as the evaluator runs it (:class:`PythonAgent`).

:func:`cirrus.agents.loader.load_agent` wraps the object a factory returns:
each turn it is handed the task's public view and a
:class:`~cirrus.agents.recording.RecordingTools`, and what it returns is
checked and completed as :mod:`cirrus.agents.api` documents.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from cirrus.agents.api import API_VERSION
from cirrus.agents.recording import RecordingTools, ToolViewOf, agent_view
from cirrus.evaluate.types import AgentTurn, InfrastructureError, ToolCallMade, TurnRequest
from cirrus.ingest.cassettes import canonical_arguments
from cirrus.llm.providers import EndpointError
from cirrus.replay import NoRecordedResult, ToolReplayer


class PythonAgent:
    """The evaluator's :class:`~cirrus.evaluate.types.Agent` around a user's
    agent object (``inner``) loaded from ``spec`` (``module:factory``)."""

    offline = False

    def __init__(self, inner: Any, spec: str, *, tool_view: ToolViewOf | None = None) -> None:
        self.inner = inner
        self.spec = spec
        self.tool_view = tool_view
        name = getattr(inner, "name", None)
        self.name = name if isinstance(name, str) and name.strip() else f"python:{spec}"
        version = getattr(inner, "version", None)
        self.version = version if isinstance(version, str) else None

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must keep the same: the factory, the interface's
        version, and the agent's own ``fingerprint()`` and ``version`` when it
        has them."""
        own = getattr(self.inner, "fingerprint", None)
        mine = own() if callable(own) else None
        if mine is not None:
            try:
                mine = json.loads(json.dumps(mine, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"agent {self.name} ({self.spec}): fingerprint() must return JSON-able data "
                                 f"(a dict of str, numbers, lists): {exc}") from None
        return {"kind": "python", "spec": self.spec, "api_version": API_VERSION,
                **({"version": self.version} if self.version is not None else {}),
                **({"agent": mine} if mine is not None else {})}

    def details(self) -> dict[str, Any]:
        """What ``run.json`` records of the agent (free to change on resume)."""
        return {"agent_kind": "python", "agent_spec": self.spec, "agent_version": self.version}

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        started = time.perf_counter()
        task, to_recorded = agent_view(request.task, self.tool_view)
        tools = RecordingTools(replayer, to_recorded)
        seen = TurnRequest(task, copy.deepcopy(request.history), request.query, request.attempt)
        try:
            turn = await self.inner.respond(seen, tools)
        except (InfrastructureError, EndpointError):
            raise
        except NoRecordedResult as exc:
            raise InfrastructureError(
                f"agent {self.name} ({self.spec}) did not catch NoRecordedResult ({exc}): catch it in respond and "
                f"tell your model the call has no result (cirrus.agents.api.NO_RECORDED_RESULT)") from exc
        except Exception as exc:
            raise InfrastructureError(f"agent {self.name} ({self.spec}) raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(turn, AgentTurn):
            raise InfrastructureError(
                f"agent {self.name} ({self.spec}) returned {type(turn).__name__}, not an AgentTurn: return "
                f"cirrus.agents.api.AgentTurn(text=...)")
        if not isinstance(turn.text, str):
            raise InfrastructureError(f"agent {self.name} ({self.spec}) returned an AgentTurn whose text is "
                                      f"{type(turn.text).__name__}, not str")
        return complete_turn(turn, tools.calls, time.perf_counter() - started)


def _call_key(call: ToolCallMade) -> tuple[str, str]:
    try:
        return call.name, canonical_arguments(call.arguments)
    except (TypeError, ValueError):
        return call.name, repr(call.arguments)


def complete_turn(turn: AgentTurn, calls: list[ToolCallMade], wall_s: float) -> AgentTurn:
    """Fill in what a Python agent's turn left empty (see :mod:`cirrus.agents.api`)."""
    if calls:
        if turn.tool_calls and [_call_key(c) for c in turn.tool_calls] != [_call_key(c) for c in calls]:
            add_note(turn, {"kind": "tool_calls_from_tools", "reported": len(turn.tool_calls), "made": len(calls)})
        turn.tool_calls = list(calls)
    if not turn.messages:
        turn.messages = turn_messages(turn.text, turn.tool_calls)
    if not turn.output_tokens:
        turn.output_tokens = count_output(turn.text, turn.tool_calls)
    turn.wall_s = wall_s
    return turn


def add_note(turn: AgentTurn, note: dict[str, Any]) -> None:
    """Add ``note`` to the turn's notes (what was done with its answer), where
    this version's :class:`AgentTurn` has them."""
    notes = getattr(turn, "notes", None)
    if isinstance(notes, list):
        notes.append(note)


def turn_messages(text: str, calls: list[ToolCallMade]) -> list[dict[str, Any]]:
    """The OpenAI messages of a turn that made ``calls`` and replied ``text``:
    one assistant message with the calls, their tool messages, the reply."""
    from cirrus.agents import prompts

    messages: list[dict[str, Any]] = []
    if calls:
        ids = [f"call_{i}" for i in range(len(calls))]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": call.name, "arguments": _arguments_text(call)}}
            for cid, call in zip(ids, calls)]})
        for cid, call in zip(ids, calls):
            content = prompts.tool_result_content(call.result) if call.recorded else prompts.no_recorded_result_content()
            messages.append({"role": "tool", "tool_call_id": cid, "content": content})
    messages.append({"role": "assistant", "content": text})
    return messages


def _arguments_text(call: ToolCallMade) -> str:
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def count_output(text: str, calls: list[ToolCallMade]) -> int:
    """The STL of a turn whose producer reported none: its text and its tool
    calls (names and arguments) counted with the offline tokenizer."""
    from cirrus.offline import count_tokens

    parts = [text, *(part for call in calls for part in (call.name, _arguments_text(call)))]
    return sum(count_tokens(part) for part in parts if part)
