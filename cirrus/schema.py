"""The data that flows through Cirrus, as types.

Raw input becomes a :class:`Ticket` (contract section 1); ingestion turns a
ticket into a :class:`Task` (contract section 2).  Internal types are plain
dataclasses (cheap to build, pickle and copy across worker processes); the
workspace task, which other tools read back, is a pydantic model so that a
reader gets validation for free.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EVENT_ROLES = ("customer", "agent", "system", "tool_call", "tool_result")
REPLY_TYPES = ("Solution", "Standard", "Inquire", "Clarify", "Appease")
ReplyType = Literal["Solution", "Standard", "Inquire", "Clarify", "Appease"]

_INVALID_FUNCTION_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def openai_function_name(name: str) -> str:
    """Make ``name`` a valid OpenAI function name (contract 1a).

    Every character outside ``[A-Za-z0-9_-]`` becomes ``_``; names longer than
    64 characters are cut; an empty name becomes ``_``.
    """
    cleaned = _INVALID_FUNCTION_CHARS.sub("_", name)[:64]
    return cleaned or "_"


@dataclass(slots=True, frozen=True)
class SourceRef:
    """Where a raw ticket came from: path relative to the input root, and its
    1-based line (``.jsonl``) or item (position in a ``.json`` list)."""

    source: str
    line: int | None = None
    item: int | None = None

    def describe(self) -> str:
        if self.line is not None:
            return f"{self.source}:{self.line}"
        if self.item is not None:
            return f"{self.source} item {self.item}"
        return self.source

    def to_manifest(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"source": self.source}
        if self.line is not None:
            entry["line"] = self.line
        if self.item is not None:
            entry["item"] = self.item
        return entry


@dataclass(slots=True)
class Event:
    """One raw event of a ticket (contract 1a).

    ``text`` is used by customer/agent/system events, ``ocr`` holds the OCR
    text of a customer message's image attachments (merged by canonicalize),
    ``call_id``/``name``/``arguments`` by tool calls, ``call_id``/``content``
    by tool results.  ``context`` marks a system event that tells the agent
    about the customer (signed-in account, order in view): it is kept through
    denoising and de-identified, and becomes the task's ``context``
    (:mod:`cirrus.ingest.context`).
    """

    role: str
    text: str = ""
    ts: str | None = None
    ocr: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    content: Any = None
    context: bool = False


@dataclass(slots=True)
class KnowledgeDoc:
    doc_id: str
    title: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"doc_id": self.doc_id, "title": self.title, "text": self.text}


@dataclass(slots=True)
class Ticket:
    """A validated raw ticket: events are chronological, every tool result
    answers an earlier call, roles are known, tool names are valid."""

    ticket_id: str
    events: list[Event]
    origin: SourceRef
    category: str | None = None
    channel: str | None = None
    language: str = "en"
    status: str = "resolved"
    knowledge: list[KnowledgeDoc] = field(default_factory=list)
    # whether the input said the language; if not, ingest detects it
    language_given: bool = False


@dataclass(slots=True)
class Quarantined:
    """A raw ticket that could not be read; only its location and a one-line
    reason are kept, never its text."""

    origin: SourceRef
    reason: str
    ticket_id: str | None = None

    def to_manifest(self) -> dict[str, Any]:
        entry = self.origin.to_manifest()
        if self.ticket_id is not None:
            entry["ticket_id"] = self.ticket_id
        entry["reason"] = self.reason
        return entry


class TicketError(ValueError):
    """Raised by a reader when a raw ticket breaks the contract; the message
    is the one-line quarantine reason and must not quote ticket text."""

    def __init__(self, reason: str, ticket_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.ticket_id = ticket_id


# --- canonical dialogue (output of canonicalize, input of annotate) ---------


@dataclass(slots=True)
class ToolExchange:
    """One tool call of an agent turn and the results recorded for it."""

    call_id: str
    name: str
    arguments: Any
    results: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class CustomerTurn:
    text: str


@dataclass(slots=True)
class AgentTurn:
    """An agent's turn: the texts it wrote, in order, and the tool calls it
    made before (or between) them."""

    texts: list[str] = field(default_factory=list)
    tool_calls: list[ToolExchange] = field(default_factory=list)

    @property
    def reply(self) -> str:
        return "\n\n".join(t for t in self.texts if t)


Turn = CustomerTurn | AgentTurn


# --- workspace task (contract section 2) -------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class ToolCallRef(_Model):
    name: str
    arguments: Any = Field(default_factory=dict)


class Checkpoint(_Model):
    index: int
    query: str
    reply: str
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    reply_type: ReplyType
    # the real dialogue between the previous checkpoint's reference reply and
    # this query (OpenAI-format messages, as ``history``), written only when
    # ingest selected checkpoints and left out when empty (docs/checkpoints.md)
    context: list[dict[str, Any]] | None = Field(default=None, exclude_if=lambda value: value is None)


class TaskStats(_Model):
    input_tokens: int
    turns: int
    checkpoints: int


class Task(_Model):
    task_id: str
    category: str | None = None
    channel: str | None = None
    language: str = "en"
    knowledge: list[dict[str, str]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    # what the ticket's system told the agent about the customer before the
    # conversation (de-identified lines); left out when there is none
    context: list[str] | None = Field(default=None, exclude_if=lambda value: not value)
    checkpoints: list[Checkpoint]
    cassette: str | None = None
    stats: TaskStats


def as_task(value: Task | Mapping[str, Any]) -> Task:
    """``value`` as a :class:`Task`: a task as it is, a mapping (a line of
    ``tasks.jsonl`` read as JSON) validated (a pydantic ``ValidationError``,
    a ``ValueError``, when it is not a valid task).  The one place where
    evaluation's entry points turn a dict into the typed task."""
    return value if isinstance(value, Task) else Task.model_validate(dict(value))


def task_dict(task: Task) -> dict[str, Any]:
    """``task`` as its ``tasks.jsonl`` line reads, parsed: plain JSON types,
    the fields ingest leaves out when empty left out.  What an agent is given
    as ``TurnRequest.task`` (agents read it as a mapping: cirrus.agents.api)."""
    return task.model_dump(mode="json")
