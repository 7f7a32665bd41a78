"""Canned agent lines, learned from the corpus (docs/canned-lines.md).

Support agents paste the same macros into thousands of tickets: greetings,
holds, "is there anything else?", sign-offs with the shop's name and a wish,
rating requests, transfer notices.  The hand-written filler rules of
:mod:`cirrus.ingest.denoise` drop a message only when all of it is filler, so
a macro pasted in front of (or after) a real answer survives and becomes part
of the reference reply the agent under test is judged against.

This module is the corpus pass that finds them, in three pure steps:

1. **lines**: an agent message is cut into sentences and clauses
   (:func:`pieces`), each normalised to a *key* (:func:`line_key`): case,
   punctuation, spaces, emoji and stickers removed, digits, masked values,
   placeholders, URLs, e-mails, greeted, introduced and capitalised names
   replaced by slots;
2. **counting** (:class:`CorpusCounter`): in how many distinct tickets of
   its language each key appears, how often as a sentence of its own and at
   the dialogue's edges, and (second pass, for the lines their text leaves
   open) what the customers of those tickets talk about;
3. **classifying**: by its text first (:func:`by_shape`: a value or an
   answer keeps a line, a filler rule makes it procedural), then by its use
   (:func:`by_use`: a line whose tickets are about one topic answers
   something; one that sits at the dialogue's edges is procedural).

:class:`CannedLines` holds the outcome (picklable: it travels to the worker
processes and Ray actors); its :class:`LineCutter` cuts the procedural lines
out of an agent message and keeps the rest.  Customer messages are never cut.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import islice
from typing import Any, NamedTuple

from cirrus.cjk import HAN_RANGES, HAN_RUN
from cirrus.config import CannedLinesConfig, PipelineConfig
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.ingest.annotate.select import RuleSelector, clauses
from cirrus.ingest.denoise import ZH_GREETED_NAME, ZH_VOCATIVE, Denoiser, has_data
from cirrus.ingest.language import ticket_language
from cirrus.schema import Event, Ticket

__all__ = ["CannedLine", "CannedLines", "CorpusCounter", "LineCount", "LineCutter", "LineRules", "Occurrence", "Piece",
           "binomial_tail", "by_shape", "by_use", "customer_words", "cut_lines", "find_canned_lines",
           "line_key", "line_words", "pieces", "sentences", "ticket_lines", "wanted", "words"]

# --- cutting a message into sentences and clauses ----------------------------

# a sentence ends after CJK 。！？；… ~ or a line break, after ASCII . ! ? ;
# followed by a space, the end or a non-ASCII character (not in 3.5 or t.tt),
# and after a sticker or an emoji
_SENTENCE_END = (r"[。！？；…~～\n]|[.!?;](?=\s|$|[^\x00-\x7f])|\.{2,}"
                 # a sticker ([微笑]), an emoji or a face closes a chat line as a full stop does
                 r"|\[[^\x00-\x7f\[\]\s]{1,8}\]|[\U0001F300-\U0001FAFF\u2600-\u27BF]\ufe0f?"
                 r"|[（(](?:[^\w\s（）()]|_){2,12}[)）]")  # and a face, (^_^)
# a clause ends after ， 、 or a comma followed by a space, the end or non-ASCII (not in 1,500)
_CLAUSE_END = r"[，、]|,(?=\s|$|[^\x00-\x7f])"
_BOUNDARY = re.compile(f"(?:{_SENTENCE_END}|{_CLAUSE_END})+\\s*|\\s*\\n\\s*")
_CLOSES = re.compile(_SENTENCE_END)
_MARK = re.compile(r"[。！？；…~～.!?;]+")
_LIST_MARKER = re.compile(r"[ \t]*(?:\d{1,3}|[A-Za-z])[.)][ \t]+")


@dataclass(frozen=True, slots=True)
class Piece:
    """A clause of a message: its text, the punctuation and spaces after it,
    and whether that punctuation closes a sentence.  ``"".join(text + end)``
    over a message's pieces gives the message back."""

    text: str
    end: str
    closes: bool


def pieces(text: str) -> list[Piece]:
    """``text`` cut into clauses (English and Chinese punctuation).  A list
    marker (``2.``, ``3)`` at a line's start) stays with the item it numbers."""
    out: list[Piece] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if _LIST_MARKER.fullmatch(text, start, match.end()) and (start == 0 or text[start - 1] == "\n"):
            continue  # "2. Airline cancelled flight": the item goes on
        if match.start() == start and out:  # punctuation right after punctuation: part of the last end
            last = out.pop()
            out.append(Piece(last.text, last.end + match.group(), last.closes or bool(_CLOSES.search(match.group()))))
        else:
            out.append(Piece(text[start:match.start()], match.group(), bool(_CLOSES.search(match.group()))))
        start = match.end()
    if start < len(text) or not out:
        out.append(Piece(text[start:], "", True))
    return out


def sentences(parts: list[Piece]) -> list[list[Piece]]:
    """``parts`` grouped into sentences."""
    out: list[list[Piece]] = [[]]
    for piece in parts:
        out[-1].append(piece)
        if piece.closes:
            out.append([])
    return [sentence for sentence in out if sentence]


def _joined(parts: list[Piece]) -> str:
    """The text of ``parts`` without the punctuation after the last one."""
    return "".join(p.text + p.end for p in parts[:-1]) + parts[-1].text if parts else ""


# --- the key of a line -------------------------------------------------------

_SLOT, _DIGIT = "\x00", "\x01"
_HAN = f"[{HAN_RANGES}]"
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]*(?:_\d+)?>|\{\{?\s*\w+\s*\}?\}|\[[A-Za-z_ ]{1,24}\]|%[sd]")
_MASKED = re.compile(r"[\w.@+-]*\*+[\w.@*+-]*")
_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{1,15}://|www\.)\S+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_STICKER = re.compile(r"\[[^\[\]\s]{1,8}\]")
# Markdown bold (**Cabin:**) is emphasis, not a masked value
_BOLD = re.compile(r"(?<![\w*])(\*\*|__)(?=\S)(.+?)(?<=\S)\1(?![\w*])")
# 我是客服小美, 这里是售后阿强: the name after the role
_ZH_INTRO = re.compile(f"((?:我是|这里是|我叫)(?:{_HAN}{{0,6}}?(?:客服|专员|售后|顾问|管家|工程师))?)({_HAN}{{1,3}})"
                       f"(?=$|[^{HAN_RANGES}])")
# a capitalised word: a name or a brand ("Hi Sarah", "contacting Acme")
_CAPITALISED = re.compile(r"(?<![\w*])[A-Z][a-z]+(?:['-][A-Za-z]+)?")
_FIRST_WORD = re.compile(r"[A-Za-z]+")
_TOKEN = re.compile(f"[{_SLOT}{_DIGIT}]|[^\\W\\d_]+")
_WORDY = re.compile(r"[^\W_]")  # a letter, Han character or digit
_LATIN = re.compile(r"[a-z]{4,}")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")


def line_key(text: str, *, sentence_start: bool = True) -> str:
    """The normalised form under which a line is counted.

    Lower case, without punctuation, spaces, emoji or stickers; digits become
    ``#``; masked values (``Ja***``, ``157****3190``), placeholders
    (``<PERSON>``, ``{name}``), URLs, e-mails, names after a greeting or a
    self-introduction and capitalised words (but the sentence's first)
    become the slot ``<v>``, which is dropped at either end (Markdown bold
    is unwrapped first).  Empty when the line has no word left (``"1."``,
    ``"~"``, a name alone)."""
    return _key(text, sentence_start)


@lru_cache(maxsize=1 << 16)  # macros repeat: most lines are keyed many times over
def _key(text: str, sentence_start: bool) -> str:
    text = _BOLD.sub(r"\2", unicodedata.normalize("NFKC", text))
    for pattern in (_URL, _EMAIL, _PLACEHOLDER, _MASKED):
        text = pattern.sub(f" {_SLOT} ", text)
    text = _STICKER.sub(" ", text)
    text = _ZH_INTRO.sub(lambda m: m.group(1) + _SLOT, text)
    text = ZH_GREETED_NAME.sub(lambda m: _SLOT + m.group(0)[-2:], text)
    text = ZH_VOCATIVE.sub(_SLOT, text)
    first = _FIRST_WORD.search(text) if sentence_start else None
    skip = first.start() if first is not None else -1
    text = _CAPITALISED.sub(lambda m: m.group(0) if m.start() == skip else _SLOT, text)
    text = re.sub(r"\d+", _DIGIT, text).lower()
    tokens: list[str] = []
    for token in _TOKEN.findall(text):
        word = "<v>" if token == _SLOT else "#" if token == _DIGIT else token
        if not (tokens and tokens[-1] == word and word in ("<v>", "#")):
            tokens.append(word)
    while tokens and tokens[0] == "<v>":
        tokens.pop(0)
    while tokens and tokens[-1] == "<v>":
        tokens.pop()
    return " ".join(tokens) if any(t not in ("<v>", "#") for t in tokens) else ""


# --- lines of a ticket --------------------------------------------------------


class Occurrence(NamedTuple):
    """One line of an agent message: its key and text, whether it sits at the
    dialogue's edge, and whether it is a whole sentence (else a clause of a
    longer one)."""

    key: str
    text: str
    edge: bool
    alone: bool


def ticket_lines(events: Iterable[Event], customer_filler: Callable[[str], bool]) -> Iterator[Occurrence]:
    """Every sentence of every agent message in ``events`` and, in a sentence
    of several clauses, every clause.

    A line is *at the edge* of the dialogue when its message belongs to the
    agent's first or last run of messages, or to a run that the customer
    answers with nothing but filler (``customer_filler``: "ok thanks").  An
    answer is often answered by a question; a greeting, an "anything else?",
    a sign-off never."""
    messages = [(e.role, e.text) for e in events if e.role in ("customer", "agent") and e.text.strip()]
    runs: list[list[str]] = []  # the agent's runs of consecutive messages
    edges: list[bool] = []
    for i, (role, text) in enumerate(messages):
        if role != "agent":
            continue
        if i and messages[i - 1][0] == "agent":
            runs[-1].append(text)
            continue
        following = next((m for m in messages[i:] if m[0] == "customer"), None)
        runs.append([text])
        edges.append(not runs[:-1] or following is None or customer_filler(following[1]))
    if edges:
        edges[-1] = True
    for run, edge in zip(runs, edges):
        for message in run:
            yield from _message_lines(message, edge)


def _message_lines(message: str, edge: bool) -> Iterator[Occurrence]:
    for sentence in sentences(pieces(message)):
        text = _joined(sentence)
        yield Occurrence(line_key(text), text, edge, True)
        if len(sentence) > 1:
            for n, piece in enumerate(sentence):
                yield Occurrence(line_key(piece.text, sentence_start=n == 0), piece.text, edge, False)


def line_words(text: str) -> float:
    """How long a line is, in words: Latin words and digit runs, and half a
    word per Han character (a Chinese line says in 30 characters what an
    English one says in about 15 words)."""
    return len(_LATIN_WORD.findall(text)) + sum(len(run) for run in HAN_RUN.findall(text)) / 2


def words(text: str) -> set[str]:
    """What a text talks about, as words: Latin words of four letters or more
    cut to their first five (refund, refunds, refunded are one) and pairs of
    adjacent Han characters."""
    text = unicodedata.normalize("NFKC", text).lower()
    found = {word[:5] for word in _LATIN.findall(text)}
    for run in HAN_RUN.findall(text):
        found.update(run[i:i + 2] for i in range(len(run) - 1))
    return found


def customer_words(events: Iterable[Event], customer_filler: Callable[[str], bool]) -> frozenset[str]:
    """The words of a ticket's customer messages that carry content."""
    found: set[str] = set()
    for event in events:
        if event.role == "customer" and event.text.strip() and not customer_filler(event.text):
            found |= words(event.text)
    return frozenset(found)


# --- how much evidence the corpus must give ------------------------------------

# a line decided by its position is a sentence of its own in this share of its occurrences
_ALONE_SHARE = 0.1
# a line's tickets are about one topic when a word is said in at least this
# share (and this many) of them, this many times as often as in the corpus,
# beyond chance at this level; the second pass looks at this many tickets a line
_TOPIC_SHARE = 0.3
_TOPIC_MIN_TICKETS = 3
_TOPIC_LIFT = 3.0
_TOPIC_ALPHA = 0.05
_TOPIC_SAMPLE = 2000


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = (math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
             for i in range(k, n + 1))
    return min(1.0, sum(math.exp(t) for t in terms))


# --- counting -----------------------------------------------------------------


@dataclass(slots=True)
class LineCount:
    """What the corpus says about one key: distinct tickets, occurrences, at
    the dialogue's edges, and as a sentence of its own (``alone``).  ``text``
    is the first line seen with the key; it stays in the process that counts
    (never written).  ``topic``: for a line the second pass looks at, the
    words its tickets' customers said (over ``sampled`` of its tickets)."""

    tickets: int = 0
    occurrences: int = 0
    edge: int = 0
    alone: int = 0
    text: str = ""
    topic: Counter[str] | None = None
    sampled: int = 0

    @property
    def edge_share(self) -> float:
        return self.edge / self.occurrences if self.occurrences else 0.0


@dataclass(slots=True)
class LanguageCounts:
    """One language's tickets, lines, and in how many tickets each word
    appears in what the customers said (messages with content)."""

    tickets: int = 0
    lines: dict[str, LineCount] = field(default_factory=dict)
    customer_words: Counter[str] = field(default_factory=Counter)

    def one_topic(self, line: LineCount) -> bool:
        """Whether the customers of the line's tickets talk about one thing:
        some word is said in at least ``_TOPIC_SHARE`` of them, ``_TOPIC_LIFT``
        times as often as across the corpus, and so much more often that
        chance would not do it (binomial tail, Bonferroni over the words
        looked at, below ``_TOPIC_ALPHA``).  A line pasted whatever the
        customer asked is not; a line that answers one kind of question is."""
        if line.topic is None or not line.sampled:
            return False
        n, floor, tested = line.sampled, max(_TOPIC_MIN_TICKETS, _TOPIC_SHARE * line.sampled), len(line.topic)
        for word, k in line.topic.items():
            rate = self.customer_words[word] / self.tickets
            if k >= floor and 0 < rate < 1 and k / n >= _TOPIC_LIFT * rate \
                    and binomial_tail(k, n, rate) * tested <= _TOPIC_ALPHA:
                return True
        return False


class CorpusCounter:
    """Document frequency of agent lines, per language, and what the
    customers of a line's tickets talk about."""

    def __init__(self) -> None:
        self.languages: dict[str, LanguageCounts] = {}

    @property
    def tickets(self) -> int:
        return sum(counts.tickets for counts in self.languages.values())

    def add(self, language: str, lines: Iterable[Occurrence], customer_words: frozenset[str] = frozenset()) -> None:
        """Count one ticket's lines, and the words its customers said (each once per ticket)."""
        counts = self.languages.setdefault(language, LanguageCounts())
        counts.tickets += 1
        counts.customer_words.update(customer_words)
        seen: set[str] = set()
        for key, text, edge, alone in lines:
            if not key:
                continue
            line = counts.lines.get(key)
            if line is None:
                line = counts.lines[key] = LineCount(text=text)
            line.occurrences += 1
            line.edge += edge
            line.alone += alone
            if key not in seen:
                seen.add(key)
                line.tickets += 1

    def watch(self, language: str, key: str) -> None:
        """Have the second pass gather the topic of ``key``'s tickets."""
        self.languages[language].lines[key].topic = Counter()

    def add_topic(self, language: str, keys: Iterable[str], customer_words: frozenset[str]) -> None:
        """Second pass: one ticket's customer words, for its watched lines
        (at most ``_TOPIC_SAMPLE`` tickets a line)."""
        counts = self.languages.get(language)
        if counts is None:
            return
        for key in keys:
            line = counts.lines.get(key)
            if line is not None and line.topic is not None and line.sampled < _TOPIC_SAMPLE:
                line.sampled += 1
                line.topic.update(customer_words)


# --- classifying --------------------------------------------------------------

# grammar that answers something, whatever the domain: limits, obligations,
# refusals, policy and what usually happens, commitments, a state that changed
# ("if" is no cue: "if you have any questions, ..." is the commonest closing)
_ANSWER_CUES = (
    re.compile(r"(?i)\b(?:within|must|need(?:s)? to|required|eligible|policy|policies|according to|usually|"
               r"normally|typically|generally|cannot|can't|won't|unable|not (?:possible|allowed|supported)|"
               r"will (?:be|receive|get|arrive|take|need|have|show)|(?:has|have|had) been|you should|you'll need)\b"),
    re.compile(r"只能|必须|需要(?:您|你)|无法|不能|不支持|不可以|之内|以内|天内|小时内|会在|将在|将会|一般|通常|"
               r"根据|按照|规定|政策|已经?(?:为您|帮您|给您)?[\u4e00-\u9fff]{1,4}(?:了|成功|完成)"),
)


@dataclass(frozen=True, slots=True)
class LineRules:
    """What a language's pipeline sections say about a line: its filler rules
    (``[denoise]`` and the checkpoint selector's ``[select]``), the reply-type
    rules that answer (``[annotate]`` inquire, clarify, solution; ``[select]``
    verify; ``[denoise.corpus]`` keep_patterns) and the thresholds."""

    config: CannedLinesConfig
    denoiser: Denoiser
    selector: RuleSelector
    answers: tuple[re.Pattern[str], ...]

    @classmethod
    def from_pipeline(cls, pipeline: PipelineConfig, language: str) -> "LineRules":
        denoise, annotate, select = (pipeline.denoise_for(language), pipeline.annotate_for(language),
                                     pipeline.select_for(language))
        # (the Standard rules are left out: "最大" in "您的满意是我们最大的动力" is no
        # limit; _ANSWER_CUES name policy in their stead)
        answers = [*annotate.inquire_patterns, *annotate.clarify_patterns, *annotate.solution_patterns,
                   *select.verify_patterns, *denoise.corpus.keep_patterns]
        return cls(denoise.corpus, Denoiser.from_config(denoise),
                   RuleSelector.from_config(RuleAnnotator.from_config(annotate), select, annotate),
                   tuple(re.compile(p) for p in answers) + _ANSWER_CUES)

    def customer_filler(self, text: str) -> bool:
        return self.denoiser.is_filler(Event("customer", text))

    def filler(self, text: str) -> bool:
        """A filler rule names the whole line: the denoiser's (for a whole
        message) or the selector's (clause by clause)."""
        text = _BOLD.sub(r"\2", text)  # "**Return:**" is no masked name
        if self.denoiser.is_filler(Event("agent", text)):
            return True
        parts = clauses(text)
        return bool(parts) and all(self.selector.is_filler(part) for part in parts)

    def answers_something(self, text: str) -> bool:
        return any(p.search(text) for p in self.answers)


def by_shape(count: LineCount, rules: LineRules) -> tuple[bool, str] | None:
    """What a line's own text decides, in this order: a value (digits, ids,
    quantities, addresses) keeps it; a filler rule makes it procedural; an
    answer (a reply-type rule, a limit, an obligation, policy, a changed
    state) or length keeps it; a clause hardly ever used as a sentence of its
    own (a fragment of longer sentences) is kept too: it merely takes the
    position of the sentences around it.  None: the corpus must tell
    (:func:`by_use`)."""
    text = count.text
    if has_data(text):
        return False, "carries a value"
    if rules.filler(text):
        return True, "filler rule"
    if rules.answers_something(text):
        return False, "answers"
    if line_words(text) > rules.config.max_words:
        return False, "long"
    if count.alone < max(rules.config.min_tickets, _ALONE_SHARE * count.occurrences):
        return False, "part of a longer sentence"
    return None


def by_use(count: LineCount, one_topic: bool, config: CannedLinesConfig) -> tuple[bool, str]:
    """What the corpus decides about a short line without a value, rule or
    answer: kept when its tickets are about one topic (it answers one kind
    of question, :meth:`LanguageCounts.one_topic`); procedural when it sits
    at the dialogue's edges (``edge_share``); else kept."""
    if one_topic:
        return False, "one topic"
    if count.edge_share >= config.edge_share:
        return True, "dialogue edge"
    return False, "mid-dialogue"


def _parts_of_canned(lines: list[CannedLine], counts: LanguageCounts) -> list[CannedLine]:
    """``lines`` with the clauses of a procedural sentence ("感谢您对XX店的支持"
    in "感谢您对XX店的支持，祝您生活愉快") procedural too, unless they were
    kept for what they say: glued to an answer, they are cut from its edges."""
    parts: set[str] = set()
    for line in lines:
        if line.procedural and counts.lines[line.key].alone:
            sentence = pieces(counts.lines[line.key].text)
            parts.update(line_key(p.text, sentence_start=n == 0) for n, p in enumerate(sentence) if len(sentence) > 1)
    return [replace(line, procedural=True, reason="part of a canned line")
            if line.key in parts and line.reason == "part of a longer sentence" else line for line in lines]


# --- the outcome --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CannedLine:
    """A frequent line and what was decided about it."""

    language: str
    key: str
    tickets: int
    share: float  # of the language's counted tickets
    edge_share: float  # of its occurrences at the dialogue's edges
    procedural: bool
    reason: str

    def to_manifest(self, listed: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"line": self.key} if listed else {}
        return {**entry, "tickets": self.tickets, "share": round(self.share, 4),
                "edge_share": round(self.edge_share, 3),
                "decision": "procedural" if self.procedural else "informative", "reason": self.reason}


def cut_lines(text: str, procedural: frozenset[str]) -> str:
    """``text`` without the sentences, and the leading or trailing clauses of
    a sentence, whose key is in ``procedural``; ``""`` when no word is left,
    ``text`` itself when nothing is cut.  ("请您提供一下订单号，这边帮您查询"
    keeps its request and loses its hold.)"""
    kept: list[str] = []
    changed = False
    for sentence in sentences(pieces(text)):
        cut = _cut_sentence(sentence, procedural)
        changed = changed or cut is not None
        kept.append(cut if cut is not None else "".join(p.text + p.end for p in sentence))
    if not changed:
        return text
    rest = "".join(kept).strip()
    return rest if _WORDY.search(_STICKER.sub("", rest)) else ""


def _cut_sentence(sentence: list[Piece], procedural: frozenset[str]) -> str | None:
    """The sentence with its canned parts cut, or None when it has none."""
    if line_key(_joined(sentence)) in procedural:
        return ""
    if len(sentence) == 1:
        return None
    keys = [line_key(p.text, sentence_start=n == 0) for n, p in enumerate(sentence)]
    # a vocative or decoration (empty key) goes with the canned clauses beside it
    removable = [not key or key in procedural for key in keys]
    low, high = 0, len(sentence)
    while low < high and removable[low]:
        low += 1
    while high > low and removable[high - 1]:
        high -= 1
    if not any(key in procedural for key in keys[:low]):
        low = 0
    if not any(key in procedural for key in keys[high:]):
        high = len(sentence)
    if (low, high) == (0, len(sentence)):
        return None
    if low >= high:
        return ""
    kept = sentence[low:high]
    text = _joined(kept)
    if low:
        text = text.lstrip()
        text = text[:1].upper() + text[1:] if text[:1].isascii() else text
    if high < len(sentence):
        return text + _closing(sentence[-1].end, text)
    return text + kept[-1].end


def _closing(end: str, text: str) -> str:
    """The sentence's own closing punctuation (without a sticker or emoji
    after it), for the clause now last; the question mark of a cut question
    becomes a full stop."""
    mark = _MARK.match(end.strip())
    space = end[len(end.rstrip()):]
    if mark is None:
        return space
    closing = mark.group()
    if "?" in closing or "？" in closing:
        closing = "。" if re.search(f"{_HAN}$", text) else "."
    return closing + space


@dataclass(frozen=True, slots=True)
class LineCutter:
    """Cuts one language's procedural lines out of an agent message."""

    procedural: frozenset[str]

    def __call__(self, text: str) -> str:
        return cut_lines(text, self.procedural)


@dataclass(frozen=True, slots=True)
class CannedLines:
    """The frequent lines of every language where the pass ran, decided.

    Holds keys (normalised, values as slots) and counts only, never a line
    as written; picklable for the worker processes and Ray actors."""

    lines: tuple[CannedLine, ...]
    configs: tuple[tuple[str, CannedLinesConfig, int], ...]  # language, thresholds, tickets counted

    def cutter(self, language: str) -> LineCutter | None:
        procedural = frozenset(line.key for line in self.lines if line.language == language and line.procedural)
        return LineCutter(procedural) if procedural else None

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's ``canned_lines``: per language, the thresholds, the
        tickets counted, and every frequent line's frequency and decision; a
        line is named only when at least ``list_min_tickets`` tickets hold it
        (a value that repeats across that many customers' tickets is no
        one's), at most ``list_max_lines`` of them, the most frequent first."""
        languages: dict[str, Any] = {}
        for language, config, tickets in self.configs:
            lines = sorted((line for line in self.lines if line.language == language),
                           key=lambda line: (-line.tickets, line.key))
            listed = [line for line in lines if line.tickets >= config.list_min_tickets][: config.list_max_lines]
            unlisted = [line for line in lines if line not in listed]
            languages[language] = {
                "tickets_counted": tickets,
                "thresholds": config.model_dump(mode="json", include={
                    "min_corpus_tickets", "min_tickets", "min_share", "max_words", "edge_share", "list_min_tickets"}),
                "frequent": len(lines),
                "procedural": sum(line.procedural for line in lines),
                "lines": [line.to_manifest(listed=True) for line in listed],
                "unlisted": {"procedural": sum(line.procedural for line in unlisted),
                             "informative": sum(not line.procedural for line in unlisted)},
            }
        return {"languages": languages}


def wanted(pipeline: PipelineConfig) -> bool:
    """Whether the pass is enabled for some language of ``pipeline``."""
    sections = [pipeline.denoise] + [s.denoise for s in pipeline.languages.values() if s.denoise is not None]
    return any(section.corpus.enabled for section in sections)


def find_canned_lines(read: Callable[[], Iterable[Ticket]], pipeline: PipelineConfig) -> CannedLines | None:
    """The corpus pass: count the agent lines of the tickets ``read()``
    yields (at most the base ``[denoise.corpus] max_scan_tickets``), decide
    each frequent line of every language that reached its
    ``min_corpus_tickets`` by its shape (:func:`by_shape`) and, for those
    its shape leaves open, read the tickets a second time for what their
    customers talk about (:func:`by_use`).  None when the pass is off for
    every language or no language had enough tickets."""
    if not wanted(pipeline):
        return None
    rules: dict[str, LineRules] = {}
    counter = CorpusCounter()
    limit = pipeline.denoise.corpus.max_scan_tickets
    for ticket in islice(read(), limit):
        language = ticket_language(ticket, ticket.language_given)
        if language not in rules:
            rules[language] = LineRules.from_pipeline(pipeline, language)
        customer_filler = rules[language].customer_filler
        counter.add(language, ticket_lines(ticket.events, customer_filler),
                    customer_words(ticket.events, customer_filler))
    shaped: dict[str, dict[str, tuple[bool, str] | None]] = {}
    configs: list[tuple[str, CannedLinesConfig, int]] = []
    for language, counts in sorted(counter.languages.items()):
        config = rules[language].config
        if not config.enabled or counts.tickets < config.min_corpus_tickets:
            continue
        configs.append((language, config, counts.tickets))
        floor = max(config.min_tickets, config.min_share * counts.tickets)
        shaped[language] = {key: by_shape(count, rules[language])
                            for key, count in counts.lines.items() if count.tickets >= floor}
        for key, shape in shaped[language].items():
            if shape is None:
                counter.watch(language, key)
    if not configs:
        return None
    watched = {language: {key for key, shape in keys.items() if shape is None} for language, keys in shaped.items()}
    if any(watched.values()):
        for ticket in islice(read(), limit):
            language = ticket_language(ticket, ticket.language_given)
            if not watched.get(language):
                continue
            customer_filler = rules[language].customer_filler
            keys = {o.key for o in ticket_lines(ticket.events, customer_filler)} & watched[language]
            if keys:
                counter.add_topic(language, keys, customer_words(ticket.events, customer_filler))
    decided: list[CannedLine] = []
    for language, config, tickets in configs:
        counts = counter.languages[language]
        lines = []
        for key, shape in shaped[language].items():
            count = counts.lines[key]
            procedural, reason = shape or by_use(count, counts.one_topic(count), config)
            lines.append(CannedLine(language, key, count.tickets, count.tickets / tickets, count.edge_share,
                                    procedural, reason))
        decided += _parts_of_canned(lines, counts)
    return CannedLines(tuple(decided), tuple(configs))
