"""Which agent turns of a ticket become checkpoints (``--checkpoints``).

A selector sees every agent turn that answers a customer turn, in order (as
:class:`ReplyToLabel` items, the annotator's input), and returns a
:class:`Selection`: one reply type and one keep flag per turn.  Turns that are
not kept stay in the task as context (docs/checkpoints.md).

* :class:`AllSelector` keeps every turn (``--checkpoints all``, the default):
  the annotator's labels, nothing dropped.
* :class:`RuleSelector` is offline and deterministic: it keeps the turns that
  decide something (tool calls), ask or check something (Inquire, Clarify),
  answer (Solution), or state or verify the case's state; it drops replies
  that are only greetings, holds, thanks, closings or appeasement, and a
  reply that repeats the agent's previous one.
* :class:`cirrus.ingest.annotate.select_llm.LLMSelector` asks a model, with a
  :class:`RuleSelector` as its fallback.

:func:`at_least_one` is applied after any selector: a task always keeps a
checkpoint.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal, Protocol

from cirrus.config import AnnotateConfig, SelectConfig
from cirrus.ingest.annotate.base import Annotator, ReplyToLabel
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.schema import ReplyType

CheckpointMode = Literal["all", "select"]
CHECKPOINT_MODES: tuple[CheckpointMode, ...] = ("all", "select")

# where a reply is cut into clauses: sentence ends, commas, semicolons, line
# breaks, in ASCII and CJK punctuation (a dot inside a number or name is no end)
_CLAUSE_SPLIT = re.compile(r"(?:[.](?![0-9A-Za-z])|[!?;,\n。！？；，、~～…])+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9]+(?:['’*-][A-Za-z0-9*]+)*")
_DECORATION = re.compile(r"^[\s\"'“”‘’()（）\[\]【】:：-]+|[\s\"'“”‘’()（）\[\]【】:：-]+$")
_KEEP_TYPES = frozenset({"Solution", "Inquire", "Clarify"})
# "..., and thanks for contacting us": the joiner does not make filler informative
_LEADING_JOINER = re.compile(r"^(?:and|also|so|but|oh|well)\s+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Selection:
    """One reply type and one keep flag per agent turn, in order."""

    labels: tuple[ReplyType, ...]
    keep: tuple[bool, ...]

    @classmethod
    def every(cls, labels: list[ReplyType]) -> "Selection":
        return cls(tuple(labels), (True,) * len(labels))


class CheckpointSelector(Protocol):
    name: str

    def select(self, items: list[ReplyToLabel]) -> Selection:
        """A reply type and a keep flag for every item."""
        ...


def at_least_one(selection: Selection, items: list[ReplyToLabel]) -> Selection:
    """``selection`` unchanged when it keeps a turn; else the last turn that
    has a reply or tool calls is kept (the last turn when none has)."""
    if any(selection.keep) or not items:
        return selection
    last = next((i for i in range(len(items) - 1, -1, -1) if items[i].reply.strip() or items[i].tool_names),
                len(items) - 1)
    return Selection(selection.labels, tuple(i == last for i in range(len(items))))


def count_words(text: str) -> int:
    """Latin words and digit runs, plus one per Han character."""
    return len(_HAN.findall(text)) + len(_WORD.findall(_HAN.sub(" ", text)))


def clause_spans(text: str) -> list[tuple[str, str]]:
    """``text`` (NFKC-normalised) as (clause, the punctuation after it) pairs;
    the clause has its decoration stripped and may be empty."""
    text = unicodedata.normalize("NFKC", text)
    spans, start = [], 0
    for match in _CLAUSE_SPLIT.finditer(text):
        spans.append((_DECORATION.sub("", text[start:match.start()]), match.group(0)))
        start = match.end()
    spans.append((_DECORATION.sub("", text[start:]), ""))
    return spans


def clauses(text: str) -> list[str]:
    """``text`` cut into clauses, decoration stripped, empty ones dropped."""
    return [clause for clause, _ in clause_spans(text) if clause]


def _normalized(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", unicodedata.normalize("NFKC", text).lower()).split())


def similarity(a: str, b: str) -> float:
    """How alike two replies are, 0..1, after case, punctuation and spacing
    are normalised (difflib's ratio: deterministic, character based, so it
    works for Chinese too)."""
    left, right = _normalized(a), _normalized(b)
    if not left or not right:
        return 0.0
    return SequenceMatcher(None, left, right, autojunk=False).ratio()


@dataclass(frozen=True, slots=True)
class AllSelector:
    """Every agent turn is a checkpoint (today's behaviour)."""

    annotator: Annotator
    name: str = "all"

    @property
    def fallbacks(self) -> int:
        return int(getattr(self.annotator, "fallbacks", 0))

    def select(self, items: list[ReplyToLabel]) -> Selection:
        return Selection.every(self.annotator.label(items))


@dataclass(frozen=True, slots=True)
class RuleSelector:
    """The offline selector; its phrases come from the pipeline's
    ``[select]`` section (per language), its reply types from ``annotator``."""

    annotator: RuleAnnotator
    filler: tuple[re.Pattern[str], ...]
    verify: tuple[re.Pattern[str], ...]
    appease: tuple[re.Pattern[str], ...]
    min_info_words: int = 5
    duplicate_similarity: float = 0.9
    name: str = "rules"

    @classmethod
    def from_config(cls, annotator: RuleAnnotator, select: SelectConfig, annotate: AnnotateConfig) -> "RuleSelector":
        return cls(
            annotator=annotator,
            filler=tuple(re.compile(p, re.IGNORECASE) for p in select.filler_patterns),
            verify=tuple(re.compile(p) for p in select.verify_patterns),
            appease=tuple(re.compile(p) for p in annotate.appease_patterns),
            min_info_words=select.min_info_words,
            duplicate_similarity=select.duplicate_similarity,
        )

    def is_filler(self, clause: str) -> bool:
        clause = _LEADING_JOINER.sub("", clause)
        return any(p.fullmatch(clause) for p in self.filler)

    def substance(self, reply: str) -> str:
        """``reply`` without its filler clauses (punctuation kept)."""
        return " ".join(clause + end for clause, end in clause_spans(reply)
                        if clause and not self.is_filler(clause)).strip()

    def reason(self, item: ReplyToLabel, label: ReplyType, previous: str | None) -> str:
        """Why the turn is kept (``keep:...``) or dropped (``drop:...``)."""
        if item.tool_names:
            return "keep:tool calls"
        if not item.reply.strip():
            return "keep:no text"  # not produced by ingest: a turn always has text or tool calls
        if previous is not None and similarity(item.reply, previous) >= self.duplicate_similarity:
            return "drop:repeat"
        rest = self.substance(item.reply)
        if not rest:
            return "drop:filler"
        # the type of what is left: "Sorry! Anything else?" asks nothing once the filler is gone
        core = label if len(clauses(rest)) == len(clauses(item.reply)) else \
            self.annotator.label_one(ReplyToLabel(item.query, rest, item.tool_names, item.history_tail))
        if core in _KEEP_TYPES:
            return f"keep:{core}"
        if any(p.search(rest) for p in self.verify):
            return "keep:state"
        informative = [c for c in clauses(rest) if not any(p.search(c) for p in self.appease)]
        if sum(count_words(c) for c in informative) >= self.min_info_words:
            return "keep:information"
        return "drop:appease" if len(informative) < len(clauses(rest)) else "drop:no information"

    def reasons(self, items: list[ReplyToLabel], labels: list[ReplyType]) -> list[str]:
        return [self.reason(item, label, items[i - 1].reply if i else None)
                for i, (item, label) in enumerate(zip(items, labels))]

    def select(self, items: list[ReplyToLabel]) -> Selection:
        labels = self.annotator.label(items)
        return Selection(tuple(labels), tuple(r.startswith("keep") for r in self.reasons(items, labels)))
