"""Offline heuristic judge and fluency checker (``--judge local``).

They need no model, so ``cirrus eval`` does something real on a fresh machine,
and they are labelled as heuristics wherever their verdicts are reported.

The coverage heuristic asks two things of the candidate reply:

* *key items*: the reference's identifiers, numbers, URLs, commands, quoted
  strings, menu paths and product terms (``i-bp***c``, ``port 22``,
  ``systemctl restart nginx``, ``Network & Security > Key Pairs``) must mostly
  appear in it;
* *content overlap*: most of the reference's content words must appear too.

A reply that repeats the reference is always included; a reply on another
subject is not.

A Not Included verdict also says what is wrong (docs/failures.md), as the LLM
judge's ``problem`` / ``missing`` fields do (:func:`find_problem`):
``contradiction`` when the reply gives another number for the same thing
(``port 22`` / ``port 3389``, ``30 GB`` / ``50 GB``) or says a statement of
the reference with the opposite polarity (one negated, the other not);
otherwise ``missing``, naming the key items (or, without any, the content
words) of the reference the reply lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cirrus.cjk import HAN as _HAN
from cirrus.evaluate.types import Verdict

_STOP = frozenset(
    "a an the and or but if then so to of in on at by for with from as is are was were be been being it its this "
    "that these those i you we they he she me my your our their his her them us do does did have has had can could "
    "will would should may might must shall not no yes please thanks thank hi hello dear just also there here what "
    "which who whom when where why how all any some each more most other such only own same than too very s t "
    "about into over after before again further once let lets sure okay ok get got make made know see".split()
)
_WORD = re.compile(r"[A-Za-z0-9\u4e00-\u9fff][\w\u4e00-\u9fff'-]*")
_KEY_PATTERNS = (
    re.compile(r"`[^`]+`"),  # inline code / commands
    re.compile(r"\"[^\"]{2,80}\"|“[^”]{2,80}”"),  # quoted strings
    re.compile(r"https?://\S+"),
    re.compile(r"[\w.+-]*\*{2,}[\w.*~+-]*"),  # de-identified values: i-bp***c, 47.***.***.***
    re.compile(r"\b[A-Za-z]+[-_][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*\b"),  # ids and codes: isv.AMOUNT, SMS_123
    re.compile(r"\b\d+(?:[.,:/]\d+)*\s?(?:%|[A-Za-z]{1,5}\b)?"),  # numbers with their unit
    re.compile(r"(?:[A-Z][\w&]*(?: [A-Z&][\w&]*)*\s?>\s?)+[A-Z][\w&]*(?: [A-Z][\w&]*)*"),  # menu paths
    re.compile(r"\b[A-Z]{2,}[A-Za-z0-9]*\b"),  # product terms and acronyms: ECS, DKIM, ICP
)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def key_items(reference: str) -> list[str]:
    """The reference's key items, de-duplicated, in order of appearance."""
    found: list[tuple[int, str]] = []
    for pattern in _KEY_PATTERNS:
        for match in pattern.finditer(reference):
            item = match.group().strip("`\"“”.,;:()").strip()
            if len(item) >= 2:
                found.append((match.start(), item))
    seen: set[str] = set()
    items = []
    for _, item in sorted(found):
        key = _norm(item)
        if key not in seen:
            seen.add(key)
            items.append(item)
    return items




def content_words(text: str) -> set[str]:
    """Lower-case content words; Chinese text is segmented into words with
    jieba (the knowledge retrieval's tokenizer) rather than read as one
    word per clause."""
    if _HAN.search(text):
        from cirrus.ingest.knowledge import tokenize

        return {w for w in tokenize([text])[0] if w not in _STOP and (len(w) > 1 or _HAN.match(w))}
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP and len(w) > 1}


@dataclass(frozen=True, slots=True)
class CoverageScore:
    key_coverage: float | None  # None when the reference has no key items
    word_recall: float
    items: int


def coverage(reference: str, candidate: str) -> CoverageScore:
    """How much of the reference's key information the candidate holds (pure)."""
    cand = _norm(candidate)
    items = key_items(reference)
    key_cov = sum(_norm(item) in cand for item in items) / len(items) if items else None
    ref_words = content_words(reference)
    word_recall = len(ref_words & content_words(candidate)) / len(ref_words) if ref_words else 1.0
    return CoverageScore(key_cov, word_recall, len(items))


# a number with what it counts: the unit after it or the word before it ("30 GB", "port 22")
_QUANTITY = re.compile(r"(?:\b([A-Za-z]{2,15})\s+)?(\d+(?:[.,:]\d+)*)(?:\s?(%|[A-Za-z]{1,5}\b|[\u4e00-\u9fff]{1,2}))?")
_NEGATION = re.compile(r"\b(?:not|never|no|cannot|without)\b|n't\b|不(?!同|久|少|断|过|错)|没有|无需|无法|勿|别")
_CLAUSE = re.compile(r"[.;!?。；！？\n]+")
_MISSING_LIMIT = 5


def _quantities(text: str) -> dict[tuple[str, str], set[str]]:
    """Numbers by what they count: ``("unit", "gb")`` or ``("word", "port")`` -> numbers."""
    found: dict[tuple[str, str], set[str]] = {}
    for match in _QUANTITY.finditer(text):
        word, number, unit = match.group(1), match.group(2), match.group(3)
        if unit and unit.lower() not in _STOP:
            found.setdefault(("unit", unit.lower()), set()).add(number)
        if word and word.lower() not in _STOP:
            found.setdefault(("word", word.lower()), set()).add(number)
    return found


def _ordered_words(text: str) -> list[str]:
    """The content words of ``text`` in order of appearance, once each."""
    if _HAN.search(text):
        from cirrus.ingest.knowledge import tokenize

        words = [w for w in tokenize([text])[0] if w not in _STOP and (len(w) > 1 or _HAN.match(w))]
    else:
        words = [w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP and len(w) > 1]
    return list(dict.fromkeys(words))


def _polarity_flip(reference: str, candidate: str) -> str | None:
    """A statement of the reference that the candidate makes with the
    opposite polarity: the candidate clause sharing most of its content words
    (at least 3, and 60% of them) is negated where it is not, or the reverse."""
    clauses = [c for c in _CLAUSE.split(candidate) if c.strip()]
    candidate_words = [(clause, set(_ordered_words(clause))) for clause in clauses]
    for ref_clause in (c for c in _CLAUSE.split(reference) if c.strip()):
        words = set(_ordered_words(ref_clause))
        if len(words) < 3:
            continue
        best = max(candidate_words, key=lambda pair: len(words & pair[1]), default=None)
        if best is None:
            continue
        shared = len(words & best[1])
        if shared >= 3 and shared >= 0.6 * len(words) and \
                bool(_NEGATION.search(ref_clause)) != bool(_NEGATION.search(best[0])):
            return " ".join(ref_clause.split())[:120]
    return None


def find_problem(reference: str, candidate: str) -> tuple[str, str]:
    """What a Not Included candidate gets wrong: ``("contradiction", what)``
    when it gives another number for something the reference counts, or
    flips the polarity of one of its statements; else ``("missing", what)``
    with the key items (or content words) of the reference it lacks."""
    ref_numbers, cand_numbers = _quantities(reference), _quantities(candidate)
    for what, numbers in ref_numbers.items():
        said = cand_numbers.get(what, set())
        if said and not numbers & said:
            label = what[1] if what[0] == "word" else ""
            want = ", ".join(f"{label} {n}".strip() if what[0] == "word" else f"{n} {what[1]}" for n in sorted(numbers))
            got = ", ".join(sorted(said))
            return "contradiction", f"{want} (the reply says {got})"
    flipped = _polarity_flip(reference, candidate)
    if flipped is not None:
        return "contradiction", f"negation differs: {flipped}"
    cand = _norm(candidate)
    absent = [item for item in key_items(reference) if _norm(item) not in cand]
    if not absent:
        have = content_words(candidate)
        absent = [w for w in _ordered_words(reference) if w not in have]
    return "missing", ", ".join(absent[:_MISSING_LIMIT])


class LocalCoverageJudge:
    """Included when at least ``key_threshold`` of the key items and
    ``word_threshold`` of the content words of the reference are present."""

    name = "local-heuristic"
    offline = True

    def __init__(self, key_threshold: float = 0.6, word_threshold: float = 0.5) -> None:
        self.key_threshold = key_threshold
        self.word_threshold = word_threshold

    async def covers(self, history: list[dict[str, Any]], query: str, reference: str, candidate: str) -> Verdict:
        score = coverage(reference, candidate)
        included = score.word_recall >= self.word_threshold and (
            score.key_coverage is None or score.key_coverage >= self.key_threshold
        )
        key = "n/a" if score.key_coverage is None else f"{score.key_coverage:.2f} of {score.items}"
        raw = f"{'Included' if included else 'Not Included'} (offline heuristic: key items {key}, content words {score.word_recall:.2f})"
        if included:
            return Verdict(included, raw)
        problem, missing = find_problem(reference, candidate)
        raw += f"; {'contradicts' if problem == 'contradiction' else 'missing'}: {missing or '-'}"
        return Verdict(included, raw, problem=problem, missing=missing or None)


_DEAD_END = re.compile(
    r"(?i)\b(i can(?:no|')t help|i(?:'m| am) (?:not able|unable) to help|i don't know|no recorded result)\b"
    r"|无法(?:为您|帮您|帮助您?)|帮不了|我(?:也)?不(?:知道|清楚)|没有记录的结果"
)


class LocalFluencyChecker:
    """The next customer message can follow unless the agent's last turn said
    nothing or was a dead end ("I can't help with that")."""

    name = "local-heuristic"
    offline = True

    async def follows(self, history: list[dict[str, Any]], next_query: str) -> Verdict:
        last = next((m for m in reversed(history) if m.get("role") == "assistant" and m.get("content")), None)
        text = (last or {}).get("content") or ""
        ok = bool(text.strip()) and not _DEAD_END.search(text)
        return Verdict(ok, f"{'Yes' if ok else 'No'} (offline heuristic)")
