"""Drop filler turns: greetings, sign-offs, "are you still there?", system
notices.

A message is filler only when it is short and every sentence of it matches a
filler rule (a trailing name is ignored: "Have a nice day, Ethan!"); anything
carrying information (a number, an id, a question about the problem) stays.  Tool calls and results are never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from cirrus.config import DenoiseConfig
from cirrus.schema import Event, Ticket

_HAS_DATA = re.compile(r"\d|@|://")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
# a trailing vocative: "Have a nice day, Ethan!" -> "Have a nice day!"
_VOCATIVE = re.compile(r",\s*[A-Z][\w\x27-]*(?:\s[A-Z][\w\x27-]*)?(?=[.!?]*$)")


@dataclass(frozen=True, slots=True)
class Denoiser:
    max_words: int
    customer: tuple[re.Pattern[str], ...]
    agent: tuple[re.Pattern[str], ...]
    system_keep: tuple[re.Pattern[str], ...]
    drop_system: bool

    @classmethod
    def from_config(cls, config: DenoiseConfig) -> "Denoiser":
        return cls(
            max_words=config.max_filler_words,
            customer=tuple(re.compile(p) for p in config.customer_filler),
            agent=tuple(re.compile(p) for p in config.agent_filler),
            system_keep=tuple(re.compile(p) for p in config.system_keep),
            drop_system=config.drop_system,
        )

    def is_filler(self, event: Event) -> bool:
        if event.role == "system":
            return self.drop_system and not any(p.search(event.text) for p in self.system_keep)
        rules = self.customer if event.role == "customer" else self.agent if event.role == "agent" else ()
        if not rules or event.ocr:
            return False
        text = " ".join(event.text.split())
        if not text:
            return True
        if len(text.split()) > self.max_words or _HAS_DATA.search(text):
            return False
        sentences = [_VOCATIVE.sub("", part) for part in _SENTENCE_END.split(text) if part]
        return all(any(p.fullmatch(sentence) for p in rules) for sentence in sentences)

    def __call__(self, ticket: Ticket) -> Ticket:
        return replace(ticket, events=[e for e in ticket.events if not self.is_filler(e)])
