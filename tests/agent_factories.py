"""Agents written in Python for the loader's tests (``--agent
tests.agent_factories:NAME``): a scripted agent that behaves like
tests/scripted_models.py's model agent, and factories that break each rule
of the interface."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cirrus.agents.api import AgentTurn, NoRecordedResult, Tools, TurnRequest, record_model_call
from tests.scripted_models import TOOL_ARGS

CONTEXTS: list[dict[str, Any]] = []  # what each factory call was given
SEEN: list[TurnRequest] = []  # every request a ScriptedAgent answered


class ScriptedAgent:
    """Calls the reference tool first on tool tasks, then answers checkpoint
    k with ``ANSWER-k``, bent by ``mode`` as :func:`tests.scripted_models.agent_reply`
    does; reports the same tokens as that model (3 for the tool round, 5 per
    reply, 10 input tokens per model call)."""

    version = "0.9"

    def __init__(self, mode: str = "perfect", *, workspace: Path | None = None,
                 tasks: list[dict[str, Any]] | None = None) -> None:
        self.mode = mode
        self.name = f"py-{mode}"
        CONTEXTS.append({"workspace": workspace, "tasks": tasks})

    def fingerprint(self) -> dict[str, Any]:
        return {"mode": self.mode}

    async def respond(self, request: TurnRequest, tools: Tools) -> AgentTurn:
        SEEN.append(request)
        k = sum(1 for m in request.history if m["role"] == "user") + 1
        output, calls = 0, 0
        if request.task.get("tools") and k == 1:
            try:
                tools.call("DescribeInstance", TOOL_ARGS)
            except NoRecordedResult:
                pass
            record_model_call(10, 3)
            output, calls = output + 3, calls + 1
        text = f"ANSWER-{k}"
        if self.mode == "jumper":
            text = "ANSWER-1 and also ANSWER-2" if k == 1 else "ANSWER-3"
        elif self.mode == "failer" and k >= 2:
            text = "I am not sure."
        elif self.mode == "disfluent" and k == 1:
            text = "ANSWER-1 DISFLUENT"
        record_model_call(10, 5)
        return AgentTurn(text=text, output_tokens=output + 5, input_tokens=10 * (calls + 1), model_calls=calls + 1)


def make_agent(workspace: Path, tasks: list[dict[str, Any]]) -> ScriptedAgent:
    return ScriptedAgent("perfect", workspace=workspace, tasks=tasks)


def make_with_anything(**context: Any) -> ScriptedAgent:
    return ScriptedAgent(context.pop("mode", "perfect"), **context)


def make_without_context() -> ScriptedAgent:
    return ScriptedAgent()


class Factories:
    @staticmethod
    def create() -> ScriptedAgent:
        return ScriptedAgent("jumper")


NOT_CALLABLE = 42


def no_respond() -> object:
    return object()


class _SyncRespond:
    def respond(self, request: TurnRequest, tools: Tools) -> AgentTurn:
        return AgentTurn(text="sync")


def sync_respond() -> _SyncRespond:
    return _SyncRespond()


class _OneArgument:
    async def respond(self, request: TurnRequest) -> AgentTurn:
        return AgentTurn(text="?")


def one_argument() -> _OneArgument:
    return _OneArgument()


def raises() -> None:
    raise RuntimeError("the model file is missing")


def needs_more(model_path: str) -> ScriptedAgent:
    return ScriptedAgent()


async def async_factory() -> ScriptedAgent:
    return ScriptedAgent()


class _Returns:
    def __init__(self, value: Any = None, error: BaseException | None = None, call: tuple[str, Any] | None = None):
        self.value, self.error, self.call = value, error, call

    async def respond(self, request: TurnRequest, tools: Tools) -> Any:
        if self.call is not None:
            tools.call(*self.call)
        if self.error is not None:
            raise self.error
        return self.value


def returns_text() -> _Returns:
    return _Returns("just a string")


def raises_in_respond() -> _Returns:
    return _Returns(error=KeyError("order_id"))


def lets_no_recorded_result_escape() -> _Returns:
    return _Returns(AgentTurn(text="x"), call=("NoSuchTool", {}))


class RenamedTools:
    """An agent's own tool names (as an [agent.tools] view gives them)."""

    schemas = [{"type": "function", "function": {"name": "lookup_instance", "parameters": {
        "type": "object", "properties": {"id": {"type": "string", "x-cirrus-match": "exact"}}}}}]

    def recorded_call(self, name, arguments):
        if name != "lookup_instance":
            return name, arguments
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        return "DescribeInstanceStatus", {"instance_id": arguments.get("id")}
