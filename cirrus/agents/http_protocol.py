"""The HTTP agent protocol, version 1 (docs/agent-protocol.md): what Cirrus
POSTs to an agent service for each round of a turn (:func:`turn_request`),
how it reads the answer (:func:`read_answer`) and the service's optional
description (:func:`read_info`, ``GET`` on the same URL).

The JSON Schemas of the three bodies ship with the package
(``cirrus/agents/schemas/``, :func:`schema`); the answers are checked here
with pydantic models that accept exactly what those schemas accept (a test
holds them together).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from cirrus import strict_json
from cirrus.llm.client.results import assistant_message

PROTOCOL = "cirrus-agent/1"
SCHEMAS = {"request": "agent-request.schema.json", "response": "agent-response.schema.json",
           "info": "agent-info.schema.json"}
# the task's metadata a service is sent (never references, checkpoints or the cassette)
TASK_FIELDS = ("task_id", "category", "channel", "language")


class ProtocolError(ValueError):
    """An answer that breaks the protocol; the message says where and how."""


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind``: ``request``, ``response`` or ``info``."""
    text = resources.files("cirrus.agents").joinpath("schemas", SCHEMAS[kind]).read_text(encoding="utf-8")
    return json.loads(text)


def task_metadata(task: Mapping[str, Any], attempt: int) -> dict[str, Any]:
    """``request.task``: the task's non-reference metadata and the attempt."""
    return {**{name: task.get(name) for name in TASK_FIELDS}, "attempt": attempt}


def turn_request(*, session_id: str, request_id: str, round_number: int, max_rounds: int,
                 task: Mapping[str, Any], attempt: int, messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]], knowledge: Sequence[Mapping[str, Any]],
                 tool_server: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The body of one POST (``agent-request.schema.json``); ``tool_server``:
    where the agent calls its tools itself (``cirrus eval --tool-server``:
    ``{"url", "session"}``), absent otherwise."""
    body = {
        "protocol": PROTOCOL,
        "session_id": session_id,
        "request_id": request_id,
        "round": round_number,
        "max_rounds": max_rounds,
        "last_round": round_number >= max_rounds,
        "task": task_metadata(task, attempt),
        "messages": list(messages),
        "tools": list(tools),
        "knowledge": [dict(doc) for doc in knowledge],
    }
    if task.get("context"):
        body["context"] = [str(line) for line in task["context"]]
    if tool_server is not None:
        body["tool_server"] = dict(tool_server)
    return body


# --- answers -----------------------------------------------------------------

_NonNegative = Annotated[StrictInt, Field(ge=0)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Function(_Open):
    name: Annotated[StrictStr, Field(min_length=1)]
    arguments: StrictStr | dict[str, Any] = "{}"


class _ToolCall(_Open):
    id: StrictStr | None = None
    type: Literal["function"] = "function"
    function: _Function


class _Message(_Open):
    role: Literal["assistant"] = "assistant"
    content: StrictStr | None = None
    tool_calls: list[_ToolCall] | None = None


class _Usage(_Open):
    prompt_tokens: _NonNegative | None = None
    completion_tokens: _NonNegative | None = None


class _Identity(_Open):
    name: StrictStr | None = None
    version: StrictStr | None = None


class _Answer(_Open):
    message: _Message
    usage: _Usage | None = None
    agent: _Identity | None = None


class _Info(_Open):
    protocol: StrictStr | None = None
    name: StrictStr | None = None
    version: StrictStr | None = None


@dataclass(slots=True)
class AgentAnswer:
    """One answer of an agent service, in OpenAI's shapes."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "type", "function": {"name", "arguments": str}}
    usage: dict[str, Any] | None = None  # as reported (OpenAI's usage object)
    agent: dict[str, str] | None = None  # {"name", "version"} as reported

    @property
    def completion_tokens(self) -> int | None:
        value = (self.usage or {}).get("completion_tokens")
        return value if isinstance(value, int) else None

    @property
    def prompt_tokens(self) -> int | None:
        value = (self.usage or {}).get("prompt_tokens")
        return value if isinstance(value, int) else None

    def assistant_message(self) -> dict[str, Any]:
        """The answer as the assistant message of the conversation sent next."""
        return assistant_message(self.content, self.tool_calls)


def read_json(body: bytes) -> Any:
    """A body's JSON value; :class:`ProtocolError` when it is none."""
    try:
        return strict_json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProtocolError("the body is not JSON (not UTF-8 text)") from None
    except ValueError as exc:
        shown = " ".join(body[:80].decode("utf-8", "replace").split())
        raise ProtocolError(f"the body is not JSON ({exc}): {shown!r}") from None


def read_answer(data: Any, round_number: int) -> AgentAnswer:
    """The answer of round ``round_number`` from its JSON value
    (``agent-response.schema.json``).  Tool calls without an ``id`` (or with
    one already used) get ``call_<round>_<i>``; arguments given as an object
    are written as a JSON string, as OpenAI sends them."""
    answer = _validated(_Answer, data, "answer")
    calls: list[dict[str, Any]] = []
    used: set[str] = set()
    for i, call in enumerate(answer.message.tool_calls or []):
        call_id = call.id if call.id and call.id not in used else f"call_{round_number}_{i}"
        used.add(call_id)
        arguments = call.function.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": call.function.name, "arguments": arguments}})
    usage = answer.usage.model_dump(exclude_none=True) if answer.usage is not None else None
    identity = answer.agent.model_dump(include={"name", "version"}, exclude_none=True) if answer.agent else None
    return AgentAnswer(answer.message.content or "", calls, usage, identity or None)


def read_info(data: Any) -> dict[str, str]:
    """A service's description (``agent-info.schema.json``): its ``protocol``,
    ``name`` and ``version``, those it gives."""
    info = _validated(_Info, data, "description")
    return info.model_dump(include={"protocol", "name", "version"}, exclude_none=True)


def _validated(model: type[BaseModel], data: Any, what: str) -> Any:
    if not isinstance(data, dict):
        raise ProtocolError(f"the {what} is a JSON {_json_type(data)}, not an object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems: dict[str, list[str]] = {}
        for error in exc.errors(include_url=False):
            # a union's members are named in the path ("arguments.str"): the field is what the user needs
            path = ".".join(str(part) for part in error["loc"] if not _union_member(part)) or "(body)"
            problems.setdefault(path, []).append(error["msg"])
        shown = [f"{path}: {' or '.join(messages)}" for path, messages in list(problems.items())[:3]]
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ProtocolError(f"the {what} breaks the agent protocol: {'; '.join(shown)}{more}") from None


def _union_member(part: Any) -> bool:
    return isinstance(part, str) and (part in ("str", "int", "bool", "float", "dict", "list", "none")
                                      or "[" in part or part.startswith(("function-", "literal")))


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__
