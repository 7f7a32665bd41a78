"""Checkpoint selection by an LLM (``--checkpoints select --annotator-model``).

One request per ticket lists its agent turns, numbered, each after the
customer message it answers, and asks for the critical ones together with
their reply types, as strict JSON::

    {"checkpoints": [{"turn": 2, "type": "Inquire"}, {"turn": 4, "type": "Solution"}]}

The answer is validated (known types, turn numbers in range, none twice); a
malformed answer is retried, and a ticket whose answers stay malformed, or
whose request the endpoint refuses, is selected and labelled by the rule
selector instead (counted in the manifest).  A refused API key stops ingest,
as for the LLM annotator.  The types of the turns the model leaves out are
not needed (they are never judged) and come from the fallback's annotator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, Field, ValidationError, field_validator

from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.llm import JsonAsker
from cirrus.domain import NEUTRAL, Domain, with_domain
from cirrus.ingest.annotate.select import RuleSelector, Selection
from cirrus.llm.providers import Endpoint
from cirrus.schema import ReplyType

SYSTEM_PROMPT = """You prepare a benchmark for customer-service agents from a real support dialogue.
The agent's turns are numbered. Pick the CRITICAL turns, the ones a benchmark should test:
- identifying what the customer wants or needs (asking for the details needed, checking an ambiguous request);
- deciding to call a tool (any turn with "Tools called");
- turning tool results or knowledge into a solution, an answer or a concrete next step;
- stating or verifying the state of the customer's case (what was found, changed, confirmed).
Leave out turns that only greet, ask the customer to wait, thank, acknowledge, close the conversation,
apologise or reassure without new information, make small talk, or repeat an earlier turn.
For every critical turn also give its type:
- Solution: acts on the problem or gives case-specific steps, causes or answers.
- Standard: policy, process or general information that would be the same for any customer.
- Inquire: asks the customer for information the agent needs.
- Clarify: checks that the agent understood the request.
- Appease: apology or reassurance (rarely critical).
Answer with JSON only, no prose, in the form
{"checkpoints": [{"turn": 2, "type": "Inquire"}, {"turn": 4, "type": "Solution"}]}
listing the critical turns in order, each number once."""

_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


class MalformedSelection(ValueError):
    pass


class _Pick(BaseModel):
    turn: int = Field(strict=True)
    type: str

    @field_validator("type")
    @classmethod
    def _known(cls, value: str) -> str:
        allowed = {t.lower(): t for t in get_args(ReplyType)}
        if value.strip().lower() not in allowed:
            raise ValueError(f"unknown reply type {value!r}")
        return allowed[value.strip().lower()]


class _Picks(BaseModel):
    checkpoints: list[_Pick]


def parse_selection(raw: str, turns: int) -> dict[int, ReplyType]:
    """The picked turns (1-based) and their types from a model's answer:
    bare JSON, fenced JSON, or one JSON object with prose around it."""
    text = raw.strip()
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise MalformedSelection("selector answer holds no JSON object")
    try:
        picks = _Picks.model_validate(json.loads(match.group(0))).checkpoints
    except (json.JSONDecodeError, ValidationError, TypeError) as exc:
        raise MalformedSelection(f"selector answer is not valid selection JSON: {type(exc).__name__}") from exc
    numbers = [p.turn for p in picks]
    if any(not 1 <= n <= turns for n in numbers):
        raise MalformedSelection(f"selector picked a turn outside 1..{turns}")
    if len(set(numbers)) != len(numbers):
        raise MalformedSelection("selector picked a turn twice")
    return {p.turn: p.type for p in picks}  # type: ignore[misc]


def render_turns(items: list[ReplyToLabel]) -> str:
    blocks = []
    for i, item in enumerate(items, 1):
        tools = f"\nTools called: {', '.join(item.tool_names)}" if item.tool_names else ""
        blocks.append(f"### Turn {i}\nCustomer: {item.query}\nAgent: {item.reply or '(no text)'}{tools}")
    return "\n\n".join(blocks)


class LLMSelector:
    """Selects and labels in one call; :attr:`fallbacks` counts the tickets
    the rule selector handled instead."""

    def __init__(self, endpoint: Endpoint, fallback: RuleSelector, temperature: float = 0.0,
                 max_attempts: int = 3, timeout: float = 60.0, answers_path: Path | None = None,
                 domain: Domain = NEUTRAL) -> None:
        self.endpoint = endpoint
        self.fallback = fallback
        self.fallbacks = 0
        self.name = f"llm:{endpoint.model}"
        self.system_prompt = with_domain(SYSTEM_PROMPT, domain)
        self._asker = JsonAsker(endpoint, MalformedSelection, temperature, max_attempts, timeout, answers_path)

    def select(self, items: list[ReplyToLabel]) -> Selection:
        if not items:
            return Selection((), ())
        picked = self._asker.ask(self.system_prompt, render_turns(items), lambda raw: parse_selection(raw, len(items)))
        if picked is None:
            self.fallbacks += 1
            return self.fallback.select(items)
        rule_labels = self.fallback.annotator.label(items) if len(picked) < len(items) else []
        labels = tuple(picked[n] if n in picked else rule_labels[n - 1] for n in range(1, len(items) + 1))
        return Selection(labels, tuple(n in picked for n in range(1, len(items) + 1)))
