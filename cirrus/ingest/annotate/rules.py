"""Offline rule-based reply-type annotator (the default).

Types, as Cirrus uses them:

* Clarify: the agent checks it understood the customer ("do you mean...").
* Inquire: the agent asks for information it needs (an id, a screenshot).
* Solution: the agent acts (tool calls, "I have reset...") or gives concrete
  steps, commands or a diagnosis specific to this customer's problem.
* Appease: apology or reassurance without new information.
* Standard: policy, process or general product information that would read
  the same for any customer.

The first type whose rule fires wins, in the order above, except that a long
reply that both acts and asks ("I restarted it; could you check again?") is a
Solution: the decision it carries matters more than the follow-up question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cirrus.config import AnnotateConfig
from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.schema import ReplyType

_LONG_REPLY_WORDS = 30
_SHORT_APPEASE_WORDS = 40
_CONCRETE = re.compile(r"\d|`|https?://|\b[a-z]+-[a-z0-9]{6,}\b")


def _any(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    return any(p.search(text) for p in patterns)


@dataclass(frozen=True, slots=True)
class RuleAnnotator:
    inquire: tuple[re.Pattern[str], ...]
    clarify: tuple[re.Pattern[str], ...]
    appease: tuple[re.Pattern[str], ...]
    standard: tuple[re.Pattern[str], ...]
    solution: tuple[re.Pattern[str], ...]
    name: str = "rules"

    @classmethod
    def from_config(cls, config: AnnotateConfig) -> "RuleAnnotator":
        def compile_all(patterns: list[str]) -> tuple[re.Pattern[str], ...]:
            return tuple(re.compile(p) for p in patterns)

        return cls(
            inquire=compile_all(config.inquire_patterns),
            clarify=compile_all(config.clarify_patterns),
            appease=compile_all(config.appease_patterns),
            standard=compile_all(config.standard_patterns),
            solution=compile_all(config.solution_patterns),
        )

    def label_one(self, item: ReplyToLabel) -> ReplyType:
        reply = item.reply
        words = len(reply.split())
        acts = bool(item.tool_names) or _any(self.solution, reply)
        if not reply.strip():
            return "Solution"  # a turn of tool calls only
        if _any(self.clarify, reply) and not (acts and words > _LONG_REPLY_WORDS):
            return "Clarify"
        if _any(self.inquire, reply) and not (acts and words > _LONG_REPLY_WORDS):
            return "Inquire"
        if acts:
            return "Solution"
        if _any(self.appease, reply) and words <= _SHORT_APPEASE_WORDS:
            return "Appease"
        if _any(self.standard, reply):
            return "Standard"
        if "?" in reply and words <= _SHORT_APPEASE_WORDS:
            return "Inquire"
        return "Solution" if _CONCRETE.search(reply) else "Standard"

    def label(self, items: list[ReplyToLabel]) -> list[ReplyType]:
        return [self.label_one(item) for item in items]
