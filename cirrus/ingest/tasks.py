"""Assemble a workspace task from a canonical dialogue (contract section 2).

Every agent turn that answers a customer turn is a checkpoint: after
denoising, an agent turn always carries text or tool calls, i.e. a decision,
information or an action.  Turns before the first customer turn (a greeting
that survived denoising, tool calls the agent made up front) are the task's
``history``; a last customer turn nobody answered is dropped.

With ``--checkpoints select`` (docs/checkpoints.md) only the agent turns a
selector keeps are checkpoints.  The turns before the first one kept join
``history``; those between two kept turns become the later checkpoint's
``context``; those after the last one kept are left out of the task (their
tool calls stay in the cassette).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cirrus.ingest.annotate.base import Annotator, ReplyToLabel
from cirrus.ingest.annotate.select import CheckpointSelector, Selection, at_least_one
from cirrus.ingest.cassettes import NO_RESULT
from cirrus.offline import count_tokens
from cirrus.schema import AgentTurn, Checkpoint, CustomerTurn, KnowledgeDoc, Task, TaskStats, ToolCallRef, ToolExchange, Turn

_TAIL_TURNS = 2


def _tool_content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def agent_turn_messages(turn: AgentTurn) -> list[dict[str, Any]]:
    """An agent turn as OpenAI chat messages: the tool calls and their
    results first, then the reply text."""
    messages: list[dict[str, Any]] = []
    if turn.tool_calls:
        messages.append({
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                for c in turn.tool_calls
            ],
        })
        for call in turn.tool_calls:
            result = call.results[-1] if call.results else NO_RESULT
            messages.append({"role": "tool", "tool_call_id": call.call_id, "content": _tool_content(result)})
    if turn.reply:
        messages.append({"role": "assistant", "content": turn.reply})
    return messages


def turn_messages(turn: Turn) -> list[dict[str, Any]]:
    if isinstance(turn, CustomerTurn):
        return [{"role": "user", "content": turn.text}]
    return agent_turn_messages(turn)


@dataclass(frozen=True, slots=True)
class Dialogue:
    history: list[Turn]
    pairs: list[tuple[CustomerTurn, AgentTurn]]

    @classmethod
    def split(cls, turns: list[Turn]) -> "Dialogue":
        first_customer = next((i for i, t in enumerate(turns) if isinstance(t, CustomerTurn)), len(turns))
        history = turns[:first_customer]
        pairs = []
        rest = turns[first_customer:]
        for i in range(0, len(rest) - 1, 2):
            customer, agent = rest[i], rest[i + 1]
            if isinstance(customer, CustomerTurn) and isinstance(agent, AgentTurn):
                pairs.append((customer, agent))
        return cls(history, pairs)

    def exchanges(self) -> list[ToolExchange]:
        turns = [t for t in self.history if isinstance(t, AgentTurn)] + [a for _, a in self.pairs]
        return [call for turn in turns for call in turn.tool_calls]

    def customer_text(self) -> str:
        return "\n".join(c.text for c, _ in self.pairs)


def _plain(turn: Turn) -> str:
    if isinstance(turn, CustomerTurn):
        return f"Customer: {turn.text}"
    return f"Agent: {turn.reply}"


def label_requests(dialogue: Dialogue) -> list[ReplyToLabel]:
    items = []
    seen: list[Turn] = list(dialogue.history)
    for customer, agent in dialogue.pairs:
        tail = "\n".join(_plain(t) for t in seen[-_TAIL_TURNS:])
        items.append(ReplyToLabel(customer.text, agent.reply, tuple(c.name for c in agent.tool_calls), tail))
        seen += [customer, agent]
    return items


@dataclass(frozen=True, slots=True)
class Assembled:
    """A dialogue cut into a task's history and checkpoints."""

    history: list[dict[str, Any]]
    checkpoints: list[Checkpoint]
    turns: int  # dialogue turns the task holds (history, contexts, queries, replies)
    messages: list[dict[str, Any]]  # every message the task holds, in dialogue order


def assemble(dialogue: Dialogue, selection: Selection) -> Assembled:
    """History and checkpoints of ``dialogue`` under ``selection`` (one keep
    flag and label per pair).  Pure; a selection that keeps every pair gives
    today's task: no checkpoint has a ``context``."""
    if len(selection.keep) != len(dialogue.pairs) or len(selection.labels) != len(dialogue.pairs):
        raise ValueError(f"selection covers {len(selection.keep)} turns, the dialogue has {len(dialogue.pairs)}")
    history = [m for turn in dialogue.history for m in turn_messages(turn)]
    checkpoints: list[Checkpoint] = []
    pending: list[dict[str, Any]] = []  # turns since the last checkpoint kept
    turns = len(dialogue.history)
    for number, ((customer, agent), label, keep) in enumerate(zip(dialogue.pairs, selection.labels, selection.keep), 1):
        if not keep:
            pending += turn_messages(customer) + turn_messages(agent)
            continue
        if not checkpoints:
            history, pending = history + pending, []
        turns = len(dialogue.history) + 2 * number
        checkpoints.append(Checkpoint(
            index=len(checkpoints) + 1,
            query=customer.text,
            reply=agent.reply,
            tool_calls=[ToolCallRef(name=c.name, arguments=c.arguments) for c in agent.tool_calls],
            reply_type=label,
            context=pending or None,
        ))
        pending = []
    messages = list(history)
    for checkpoint, (customer, agent) in zip(checkpoints, [p for p, k in zip(dialogue.pairs, selection.keep) if k]):
        messages += (checkpoint.context or []) + turn_messages(customer) + turn_messages(agent)
    return Assembled(history, checkpoints, turns, messages)


def build_task(
    *,
    task_id: str,
    category: str | None,
    channel: str | None,
    language: str,
    dialogue: Dialogue,
    knowledge: list[KnowledgeDoc],
    tools: list[dict[str, Any]],
    cassette: str | None,
    annotator: Annotator | None = None,
    selector: CheckpointSelector | None = None,
    context: list[str] | None = None,
) -> Task:
    """The task of ``dialogue``: every agent turn a checkpoint, labelled by
    ``annotator``, or the turns ``selector`` keeps (it labels them too)."""
    items = label_requests(dialogue)
    if selector is not None:
        selection = at_least_one(selector.select(items), items)
    elif annotator is not None:
        selection = Selection.every(annotator.label(items))
    else:
        raise ValueError("build_task needs an annotator or a selector")
    built = assemble(dialogue, selection)
    history, checkpoints = built.history, built.checkpoints
    token_text = "\n".join([d.text for d in knowledge] + list(context or ()) + [json.dumps(tools, ensure_ascii=False)] +
                           [m.get("content") or json.dumps(m.get("tool_calls", "")) for m in built.messages])
    return Task(
        task_id=task_id,
        category=category,
        channel=channel,
        language=language,
        knowledge=[d.to_dict() for d in knowledge],
        tools=tools,
        history=history,
        context=context or None,
        checkpoints=checkpoints,
        cassette=cassette,
        stats=TaskStats(
            input_tokens=count_tokens(token_text),
            turns=built.turns,
            checkpoints=len(checkpoints),
        ),
    )
