"""What the walk exchanges with agents, judges and fluency checkers.

An agent turn is one reply of the agent under test to one customer query: the
model may call tools (answered by replaying the task's cassette) any number of
times before it answers in text.  Judges and fluency checkers return a verdict
with their raw output so every score can be audited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from cirrus.replay import ToolReplayer


class InfrastructureError(RuntimeError):
    """A model call failed for reasons that are not the model's answer (API
    errors after retries, timeouts, unparseable judge output after retries).
    The (task, attempt) is recorded with ``status = "error"`` and left out of
    every score."""


@dataclass(slots=True)
class ToolCallMade:
    """A tool call the agent made in a turn, and what replay answered."""

    name: str
    arguments: Any  # parsed JSON when the model sent valid JSON, else the raw string
    result: Any = None
    recorded: bool = False  # answered from the cassette (not a "no recorded result" error)
    error: str | None = None
    # the text form the call was read from when the model wrote it in its
    # message instead of tool_calls (cirrus.agents.text_tool_calls, opt-in);
    # None for a real tool call
    read_from_text: str | None = None

    def record(self) -> dict[str, Any]:
        """The call as transcripts write it (``read_from_text`` only when set)."""
        record = {"name": self.name, "arguments": self.arguments, "result": self.result,
                  "recorded": self.recorded, "error": self.error}
        if self.read_from_text is not None:
            record["read_from_text"] = self.read_from_text
        return record


@dataclass(slots=True)
class AgentTurn:
    text: str
    tool_calls: list[ToolCallMade] = field(default_factory=list)
    # the OpenAI chat messages this turn adds to the history: assistant
    # messages with tool_calls, tool results, the final assistant text
    messages: list[dict[str, Any]] = field(default_factory=list)
    output_tokens: int = 0  # STL: all model calls of the turn, reasoning included
    input_tokens: int = 0
    model_calls: int = 0
    wall_s: float = 0.0
    ttft_s: float | None = None
    # what the model answered besides a clean reply and what was done with it
    # (think blocks removed, tool calls written as text, empty reply, ...):
    # {"kind", "model_call", ...} each (cirrus.agents.replies)
    notes: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    raw: str = ""
    # what of the judge's input was cut to its size limit, per part
    # ("candidate", "reference", "history"): {"original_chars", "sent_chars"};
    # None when the judge was sent everything (docs/judging.md)
    input_cut: dict[str, dict[str, int]] | None = None
    # a judge panel's members, in panel order: {"judge": name, "ok": bool,
    # "raw": str} each (cirrus.judges.panel); None for a single judge
    votes: tuple[dict[str, Any], ...] | None = None
    # a coverage judge's Not Included, in its own words (docs/failures.md):
    # ``problem`` "missing" or "contradiction" (None: not stated, or the turn
    # was included), ``missing`` what key information is absent or
    # contradicted (None when the judge does not say).  Read from ``raw``
    # (a function of it), so left out of equality: two verdicts with the
    # same ``ok`` and ``raw`` are the same verdict
    problem: str | None = field(default=None, compare=False)
    missing: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """Everything an agent sees for one turn."""

    task: dict[str, Any]  # a line of tickets/tasks.jsonl
    history: list[dict[str, Any]]  # OpenAI messages before the query
    query: str
    attempt: int


class Agent(Protocol):
    name: str
    offline: bool  # True for built-in baselines that call no model

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn: ...


class CoverageJudge(Protocol):
    """A coverage judge.  It may also have ``covers_later(history, query,
    candidate, later_query, later_reference) -> Verdict`` for logical jumps
    (:func:`cirrus.evaluate.walk.ask_coverage`); one without it is asked
    :meth:`covers` with the later checkpoint's query and reference."""

    name: str

    async def covers(self, history: list[dict[str, Any]], query: str, reference: str, candidate: str) -> Verdict:
        """Does ``candidate`` hold the key information of ``reference`` for
        the customer's last question ``query``?"""
        ...


class FluencyChecker(Protocol):
    name: str

    async def follows(self, history: list[dict[str, Any]], next_query: str) -> Verdict:
        """Can the real customer's ``next_query`` still follow ``history``
        (which holds the agent's own replies)?"""
        ...
