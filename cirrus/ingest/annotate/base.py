"""The annotator interface: what kind of reply is this checkpoint?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cirrus.schema import ReplyType


@dataclass(frozen=True, slots=True)
class ReplyToLabel:
    """One agent reply in its place in the dialogue."""

    query: str
    reply: str
    tool_names: tuple[str, ...] = ()
    history_tail: str = ""  # the last turns before the query, as plain text


class Annotator(Protocol):
    name: str

    def label(self, items: list[ReplyToLabel]) -> list[ReplyType]:
        """One reply type per item, in order."""
        ...
