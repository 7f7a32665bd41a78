"""Reading a judge's verdict out of its answer: pure functions, no I/O.

One reader serves both roles: the coverage judge (``Included`` / ``Not
Included``, :func:`read_coverage`) and the fluency checker (``Yes`` / ``No``,
:func:`read_fluency`).  It reads the shapes real models answer in:

* JSON objects, fenced or not, with a verdict field next to a reason
  (``{"reason": ..., "verdict": "Not Included"}``, ``{"answer": "是"}``);
* XML-like tags (``<verdict>``, ``<answer>``, ``<result>``,
  ``<final_answer>``, any tag but the prompt's data blocks);
* a marker and the verdict ("Verdict: Included", "**Final verdict:** No",
  "## Final answer\\nYes", "The answer is No.", "结论：不包含");
* a line that is, or opens with, the verdict ("Not Included. The candidate
  never asks...", "**Yes**", "可以。"), or a bolded verdict;
* a check mark next to the verdict word ("Verdict: ❌ Not Included",
  "✅ Included"); a mark that says the opposite of its word ("✅ Not
  Included") makes the answer read both ways;
* all of these before or after reasoning; ``<think>`` (``<thinking>``,
  ``<reasoning>``, ``<analysis>``) blocks are dropped (an unclosed one counts
  only when it opens the answer: a cut answer is unreadable).

Only the judge's own words count (:func:`own_words`).  Before reading, the
answer loses, in this order: the data blocks it echoes with the request's
``boundary`` id (``<candidate_reply id="...">`` ... ``</candidate_reply
id="...">``), copies of the data texts given as ``echoes`` (16 characters or
more; whitespace and case aside, so a quote re-flowed onto one line goes
too), thinking blocks, data blocks echoed without the id, blockquote lines
and fence markers.  Data is removed before thinking blocks, so an agent reply
holding ``<think>`` cannot hide the judge's verdict.  Then every quoted span
that holds more than a bare verdict or marker word is dropped, in any quote
style: ``"..."``, ``'...'`` (an apostrophe inside a word, as in "don't" or
"candidate's", opens and closes nothing), ``“...”``, ``‘...’``, ``«...»``,
``「...」``, ``『...』`` and inline code; a JSON object inside such a span is
quoted too.  Last, a verdict statement that stands inside a partial copy of a
data text (the statement and the text just before or after it occur together
in the candidate, reference, customer message or history) is the judge
quoting, not judging, and is dropped.

What is left is read in this order:

1. **The structured answer**: the verdict field of the judge's own JSON
   object, or its own verdict tag block.  Prose around it (a note after the
   JSON, a quotation of the candidate) never overrides it.
2. **The judge's own statements** in prose: its first and its final one.

Every reading taken (each structured field, the first and the final prose
statement) must agree.  When two disagree (the JSON says Not Included and a
note after it says Included; the answer opens with one verdict and ends with
the other), the reader does not choose: it raises
:class:`UnparseableOutput`, the caller asks again with the repair message
and, in the end, records an infrastructure error, never a silent pass or
fail.  So a verdict-first judge whose quotation of an injected "Verdict:
Included" escaped every rule above is asked again instead of read by the
injection, and a judge whose own verdict is unreadable cannot be read by a
quoted one: the quoted one is removed and nothing is left.  "Not Included"
is matched before "Included", "No" never matches "Not", "不包含" before
"包含".

The coverage judge's answer may also say what is wrong with a Not Included
candidate (:func:`read_problem`, docs/failures.md): a ``problem`` field
(``"missing"`` / ``"contradiction"`` / ``"none"``, or words such as
"Contradiction", "contradicts", "missing info", 矛盾, 缺少信息) and a
``missing`` field naming what is absent or contradicted; without them, the
cue words of its reason or prose ("the reply contradicts ...", "it omits
...").  The field is optional: an answer without it reads exactly as before.

An answer with no verdict, with readings that disagree, or whose final
verdict is only an opening line contradicted by the prose after it
("Included\\nThe key step is not included, though."), raises
:class:`UnparseableOutput`.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cirrus.llm.client import UnparseableOutput

__all__ = ["COVERAGE", "FLUENCY", "Role", "DATA_TAGS", "read_coverage", "read_fluency", "read_verdict",
           "own_words", "read_problem"]

DATA_TAGS = ("conversation", "customer_last_message", "reference_reply", "candidate_reply",
             "next_customer_message", "later_customer_message", "history", "reference", "candidate")

_YES_MARKS = "✅✔☑✓🟢👍"
_NO_MARKS = "❌❎✖✗✘🚫⛔🔴👎"
_MARK = f"[{_YES_MARKS}{_NO_MARKS}\ufe0f]"  # a check mark (with its emoji variation selector)
_EOS = r"(?=[\s*_`\"'.,;:!?)\]}>。，；：！？、”」]|" + _MARK + "|$)"  # a verdict word ends here
_END = r"(?=[*_`\"'”」)\]]*[ \t]*(?:[.!?。！,，;；:：\n]|" + _MARK + "|$))"  # ... and so does the statement


@dataclass(frozen=True)
class Role:
    name: str
    tokens: tuple[tuple[str, bool], ...]  # regex alternatives, longest/negated first
    json_keys: tuple[str, ...]
    json_words: dict[str, bool]  # extra words accepted as a JSON field value
    weak: re.Pattern[str] | None  # verdict words in prose (for the contradiction guard)

    @property
    def token_re(self) -> str:
        return "(" + "|".join(f"(?:{pattern})" for pattern, _ in self.tokens) + ")"

    def value(self, word: str) -> bool | None:
        for pattern, value in self.tokens:
            if re.fullmatch(pattern, word.strip(), re.IGNORECASE):
                return value
        return None


_NEG = r"(?:not|never)[\s_-]*"
COVERAGE = Role(
    name="coverage judge's answer",
    tokens=(
        (_NEG + r"included\b", False), (_NEG + r"covered\b", False), (r"notincluded\b", False),
        (r"不包含|未包含|没有包含|不包括|未覆盖", False),
        (r"included\b", True), (r"covered\b", True), (r"包含|已包含|包括|已覆盖", True),
    ),
    json_keys=("verdict", "label", "answer", "result", "decision", "judgment", "judgement", "included",
               "final_verdict", "final_answer", "conclusion", "结论", "判断", "判定", "答案"),
    json_words={"yes": True, "true": True, "no": False, "false": False, "excluded": False,
                "是": True, "否": False},
    weak=re.compile(r"\bnot\s+(?:\w+\s+)?included\b|\bincluded\b|不包含|未包含|没有包含|包含", re.IGNORECASE),
)
FLUENCY = Role(
    name="yes/no answer",
    tokens=(
        (r"不可以|不可|不能|不是|否", False), (r"no\b", False),
        (r"可以|是的|是|能", True), (r"yes\b", True),
    ),
    json_keys=("answer", "verdict", "fluent", "follows", "result", "decision", "label", "final_answer",
               "conclusion", "答案", "结论", "判断"),
    json_words={"true": True, "false": False},
    weak=None,
)

_THINK_TAGS = "think|thinking|reasoning|analysis|reflection|scratchpad"
_THINK = re.compile(rf"<({_THINK_TAGS})\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(rf"<(?:{_THINK_TAGS})\b[^>]*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(rf"</(?:{_THINK_TAGS})\s*>", re.IGNORECASE)
_FENCE = re.compile(r"```[\w-]*")
_BLOCKQUOTE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
# quoted spans: straight quotes and inline code stay on one line; an apostrophe
# between two letters ("don't", "candidate's") neither opens nor closes a single-quoted span
_QUOTED = re.compile(
    r"\"[^\"\n]{1,400}\""
    r"|(?<![\w'’])'(?=\S)(?:[^'\n]|(?<=\w)'(?=\w)){1,400}?(?<=\S)'(?!\w)"
    r"|“[^”]{1,2000}”|‘(?:[^’]|(?<=\w)’(?=\w)){1,2000}?’(?!\w)"
    r"|«[^»]{1,2000}»|「[^」]{1,2000}」|『[^』]{1,2000}』"
    r"|(?<!`)(?P<run>`{1,2}|`{4,})(?!`)[^\n]{1,400}?(?<!`)(?P=run)(?!`)")  # inline code; a ``` fence is none
_MARKDOWN = re.compile(rf"(?:[\s*_#>`\"'“”‘’«»「」『』\[\](){{}}.,;:!?。，；：！？-]|{_MARK})+")
_DECODER = json.JSONDecoder()
_COPY_CONTEXT = 8  # characters (whitespace aside) next to a statement that make it a copy of the data
_MIN_ECHO = 16  # shorter data texts are not removed (a candidate "Included" must not erase the verdict)

_MARKERS_EN = (r"(?:final\s+|overall\s+|my\s+)?(?:verdict|answer|judge?ment|decision|conclusion|result|label"
               r"|output|evaluation)")
_MARKERS_ZH = r"(?:最终)?(?:结论|判断|判定|答案|结果|回答)"
_CONCLUDING = r"(?:therefore|thus|hence|overall|in\s+conclusion|in\s+summary|so|因此|所以|综上)"


def _patterns(role: Role) -> dict[str, re.Pattern[str]]:
    token = role.token_re
    colon = rf"(?:[ \t*_`\"']|{_MARK})*(?:[:=：]|-{{1,2}}|–|—)(?:[ \t*_`\"'#>:：]|{_MARK})*"
    heading = rf"[ \t*_`\"':：]*\n(?:[\s*_`\"'#>]|{_MARK})*"
    copula = rf"\s+(?:is|would\s+be|should\s+be|will\s+be)\s*:?(?:[ \t*_`\"']|{_MARK})*"
    zh_copula = rf"\s*(?:是|为)\s*[:：]?(?:\s|{_MARK})*"
    after = rf"(?:[ \t]*{_MARK})*"  # a check mark after the word
    flags = re.IGNORECASE
    return {
        "tag": re.compile(r"<([A-Za-z_][\w-]*)\b[^>]*>\s*((?:(?!<\1\b).)*?)\s*</\1\s*>", re.DOTALL),
        "marked": re.compile(rf"\b{_MARKERS_EN}(?:{colon}){token}{after}", flags),
        "heading": re.compile(rf"\b{_MARKERS_EN}{heading}{token}{_END}{after}", flags),
        "copula": re.compile(rf"\b{_MARKERS_EN}{copula}{token}{_END}{after}", flags),
        "zh_marked": re.compile(rf"{_MARKERS_ZH}[ \t*_]*[:：](?:[\s*_]|{_MARK})*{token}{after}", flags),
        "zh_copula": re.compile(rf"{_MARKERS_ZH}{zh_copula}{token}{_END}{after}", flags),
        "concluding": re.compile(rf"\b{_CONCLUDING}\s*[,:，：]?\s*(?:the\s+(?:candidate|reply|answer|verdict)\s+is\s+)?"
                                 rf"(?:[*_]|{_MARK})*{token}[*_]*\s*[.!。]?{after}\s*$", flags | re.MULTILINE),
        "line": re.compile(rf"^(?:[ \t*#>_\-\[(`\"'“「]|{_MARK})*{token}[*_`\"'”」\])]*{_EOS}{after}"
                           rf"(?:[ \t]*$|[*_`\"'”」\])]*\s*[.,;:!?。，；：！？—–-])",
                           flags | re.MULTILINE),
        "bold": re.compile(rf"\*\*(?:\s|{_MARK})*{token}\s*[.!]?{after}\s*\*\*", flags),
    }


_PATTERNS: dict[str, dict[str, re.Pattern[str]]] = {}


def _pattern_set(role: Role) -> dict[str, re.Pattern[str]]:
    if role.name not in _PATTERNS:
        _PATTERNS[role.name] = _patterns(role)
    return _PATTERNS[role.name]


def _blank(text: str, start: int, end: int) -> str:
    """Replace text[start:end] by spaces, keeping newlines (positions stay)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace, each character lower-cased on its own,
    and the position in ``text`` of each character kept."""
    chars: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        if not char.isspace():
            lower = char.lower()
            chars.append(lower if len(lower) == 1 else char)
            where.append(index)
    return "".join(chars), where


def _folded_text(text: str) -> str:
    """``_folded(text)[0]`` without the positions, at C speed where the
    whole-string ``lower()`` equals lowering each character on its own (it
    differs only where a character lowers to several, which changes the
    length, and for a final capital sigma)."""
    joined = "".join(text.split())  # str.split() drops exactly what str.isspace() calls space
    lowered = joined.lower()
    if joined.isascii() or (len(lowered) == len(joined) and "\u03a3" not in joined):
        return lowered
    return _folded(text)[0]


@lru_cache(maxsize=1024)
def _folded_data(text: str) -> str:
    return _folded_text(text)


def _remove_copies(text: str, echoes: Iterable[str]) -> str:
    """``text`` with every copy of each echo (16 characters or more)
    blanked, whitespace and case aside (a quote re-flowed onto one line is
    still a copy).  Positions are worked out only for an echo found."""
    folded = _folded_text(text)
    for echo in echoes:
        if len((echo or "").strip()) < _MIN_ECHO:
            continue
        needle = _folded_data(echo)
        start = folded.find(needle)
        if start == -1:
            continue
        folded, where = _folded(text)
        start = folded.find(needle)
        while start != -1:
            end = start + len(needle)
            text = _blank(text, where[start], where[end - 1] + 1)
            start = folded.find(needle, end)
        folded = _folded_text(text)
    return text


def own_words(raw: str, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> str:
    """The judge's answer without what is not its own statement: echoed data
    blocks and data texts, thinking blocks, blockquotes, fence markers.
    Positions of the kept text are preserved (removed text becomes spaces)."""
    return _blank_fences(_own_text(raw, boundary=boundary, echoes=echoes))


def _blank_fences(text: str) -> str:
    return _FENCE.sub(lambda m: " " * len(m.group(0)), text)


def _own_text(raw: str, *, boundary: str | None, echoes: Iterable[str]) -> str:
    """:func:`own_words` but for the fence markers (a quote around a fenced
    text still reads as one)."""
    text = raw or ""
    tags = "|".join(DATA_TAGS)
    if boundary and boundary.lower() in text.lower():  # first the data blocks echoed with their real boundary
        exact = re.compile(rf"<({tags})\b[^>]*{re.escape(boundary)}[^>]*>.*?</\1\b[^>]*{re.escape(boundary)}[^>]*>",
                           re.DOTALL | re.IGNORECASE)
        text = exact.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = _remove_copies(text, echoes)  # then copies of the data texts
    text = _THINK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:  # an opening tag the server stripped: keep what follows the last close
        text = _blank(text, 0, closes[-1].end())
    opened = _THINK_OPEN.match(text.lstrip())
    if opened:  # thinking that never closed (a cut answer): nothing after it is a verdict
        text = " " * len(text)
    loose = re.compile(rf"<({tags})\b[^>]*>.*</\1\b[^>]*>", re.DOTALL | re.IGNORECASE)
    text = loose.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return _BLOCKQUOTE.sub(lambda m: " " * len(m.group(0)), text)


def _json_objects(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    found = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            found.append((start, end, value))
        start = text.find("{", end)
    return found


def _marks(text: str) -> frozenset[bool]:
    """What the check marks in ``text`` say (✅ yes, ❌ no)."""
    return frozenset([*([True] if any(c in _YES_MARKS for c in text) else []),
                      *([False] if any(c in _NO_MARKS for c in text) else [])])


def _word_values(value: str, role: Role) -> frozenset[bool]:
    """The readings of a field or tag value: its verdict word (or the word
    opening it) and its check marks; empty when it holds no verdict."""
    word = _MARKDOWN.sub(" ", value).strip()
    found = role.value(word)
    if found is None:
        found = role.json_words.get(word.lower())
    if found is None:  # "Yes, it follows", "Not included: the ID request is missing"
        match = _pattern_set(role)["line"].match(value.strip())
        if match:
            found = role.value(match.group(1))
    return frozenset() if found is None else frozenset([found]) | _marks(value)


def _json_verdict(obj: dict[str, Any], role: Role, depth: int = 0) -> frozenset[bool]:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in role.json_keys:
        if key not in lowered:
            continue
        value = lowered[key]
        if isinstance(value, bool):
            return frozenset([value])
        if isinstance(value, str) and (found := _word_values(value, role)):
            return found
        if isinstance(value, dict) and depth < 2 and (found := _json_verdict(value, role, depth + 1)):
            return found
    return frozenset()


def _quote_spans(text: str, role: Role) -> list[tuple[int, int]]:
    """The quoted and inline-code spans of ``text`` that hold more than a
    bare verdict (or a marker word): the judge quoting something."""
    def keep(quoted: str) -> bool:
        word = _MARKDOWN.sub(" ", quoted).strip()  # the quote marks go with the markdown
        return (not word or role.value(word) is not None or word.lower() in role.json_words
                or re.fullmatch(rf"{_MARKERS_EN}|{_MARKERS_ZH}|reason|verdict|answer", word, re.IGNORECASE) is not None)

    return [match.span() for match in _QUOTED.finditer(text) if not keep(match.group(0))]


def _strip_quotes(text: str, role: Role) -> str:
    for start, end in _quote_spans(text, role):
        text = _blank(text, start, end)
    return text


class _Copies:
    """Where the answer copies a data text: a statement is a copy when it
    occurs in a data text together with the characters (whitespace and case
    aside) just before or just after it in the answer.  The judge's own
    "Verdict: Included" is no copy merely because the candidate says it too;
    "...the console.\\nVerdict: Included" copied from the candidate is."""

    def __init__(self, raw: str, echoes: Iterable[str]) -> None:
        self.data = [_folded_data(echo) for echo in echoes if echo and echo.strip()]
        self.folded, self.where = _folded(raw) if self.data else ("", [])

    def holds(self, start: int, end: int) -> bool:
        if not self.data:
            return False
        first = bisect.bisect_left(self.where, start)
        last = bisect.bisect_left(self.where, end)
        if first >= last:
            return False
        pieces = []
        if first >= _COPY_CONTEXT:
            pieces.append(self.folded[first - _COPY_CONTEXT:last])
        if last + _COPY_CONTEXT <= len(self.folded):
            pieces.append(self.folded[first:last + _COPY_CONTEXT])
        return any(piece in data for piece in pieces for data in self.data)


@dataclass(frozen=True)
class _Statement:
    start: int  # the statement, its marker included
    end: int  # the end of its verdict word
    values: frozenset[bool]  # two when its check mark says the opposite of its word
    kind: str

    @property
    def structured(self) -> bool:
        return self.kind in ("json", "tag")


_PROSE = ("marked", "heading", "copula", "zh_marked", "zh_copula", "concluding", "line", "bold")
_BARE = ("line", "bold", "concluding")  # a verdict word without a marker


def _statements(text: str, role: Role) -> tuple[list[_Statement], str]:
    """Every verdict statement of the judge's own words ``text``
    (:func:`_own_text`; quoted spans left out), in order, and the text they
    were read from (JSON objects, quoted spans and fence markers blanked)."""
    found: list[_Statement] = []
    objects = _json_objects(text)
    masked = text
    for start, end, _ in objects:  # a JSON object inside a quote is quoted: find quotes around it, not in it
        masked = masked[:start] + re.sub(r"[^\n]", "0", masked[start:end]) + masked[end:]
    quotes = _quote_spans(masked, role)
    for start, end, obj in objects:
        values = _json_verdict(obj, role)
        if values and not any(q_start <= start and end <= q_end for q_start, q_end in quotes):
            found.append(_Statement(start, end, values, "json"))
        text = _blank(text, start, end)
    for start, end in quotes:
        text = _blank(text, start, end)
    text = _blank_fences(text)
    patterns = _pattern_set(role)
    for match in patterns["tag"].finditer(text):
        if match.group(1).lower() not in DATA_TAGS and (values := _word_values(match.group(2), role)):
            found.append(_Statement(match.start(), match.end(), values, "tag"))
    for kind in _PROSE:
        for match in patterns[kind].finditer(text):
            value = role.value(match.group(1))
            if value is not None:
                values = frozenset([value]) | _marks(match.group(0))
                found.append(_Statement(match.start(), match.end(1), values, kind))
    return sorted(found, key=lambda s: (s.end, s.start)), text


def _describe(statements: Iterable[_Statement], role: Role) -> str:
    words = {True: "Included", False: "Not Included"} if role is COVERAGE else {True: "Yes", False: "No"}
    return ", ".join(f"{s.kind}: {' and '.join(words[v] for v in sorted(s.values, reverse=True))}"
                     for s in statements)


def read_verdict(raw: str, role: Role, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> bool:
    """The judge's own verdict in ``raw`` for ``role``: its structured field
    and its first and final own statements, which must agree (see the
    module docstring).  Raises :class:`UnparseableOutput` when there is no
    verdict, or two readings disagree."""
    echoes = tuple(echoes)
    text = _own_text(raw, boundary=boundary, echoes=echoes)
    if not _blank_fences(text).strip():
        raise UnparseableOutput(f"empty {role.name}")
    copies = _Copies(raw or "", echoes)
    statements, read = _statements(text, role)
    statements = [s for s in statements if not copies.holds(s.start, s.end)]
    if not statements:
        raise UnparseableOutput(f"no verdict of the judge's own found in the {role.name}")
    prose = [s for s in statements if not s.structured]
    readings = [s for s in statements if s.structured] + prose[:1] + prose[-1:]
    if len({value for s in readings for value in s.values}) > 1:
        raise UnparseableOutput(f"the {role.name} reads both ways ({_describe(readings, role)})")
    verdict = next(iter(readings[0].values))
    last = statements[-1]
    if last.kind in _BARE and role.weak is not None:
        # a bare opening verdict, then prose of the judge's that says the opposite: the answer reads both ways
        for match in role.weak.finditer(read, last.end):
            said = role.value(re.sub(r"\s+(?:\w+\s+)?included", " included", match.group(0)))
            if said is (not verdict) and not copies.holds(match.start(), match.end()):
                raise UnparseableOutput(f"the {role.name} reads both ways")
    return verdict


def read_coverage(raw: str, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> bool:
    """``True`` for Included, ``False`` for Not Included."""
    return read_verdict(raw, COVERAGE, boundary=boundary, echoes=echoes)


def read_fluency(raw: str, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> bool:
    """``True`` for Yes, ``False`` for No."""
    return read_verdict(raw, FLUENCY, boundary=boundary, echoes=echoes)

# --------------------------------------------------------------------------
# what the coverage judge says is wrong (docs/failures.md)

PROBLEM_KEYS = ("problem", "problem_type", "issue", "issue_type", "failure", "failure_type", "error_type",
                "category", "问题", "问题类型", "类型")
MISSING_KEYS = ("missing", "missing_information", "missing_info", "missing_items", "missing_key_information",
                "absent", "contradicted", "contradiction", "contradictions", "缺少", "缺失", "缺失信息", "缺少信息",
                "矛盾")
_CONTRADICTED_KEYS = ("contradicted", "contradiction", "contradictions", "矛盾")
_CONTRA_CUE = re.compile(
    r"contradict\w*|\bconflicts?\s+with\b|\bconflicting\b|\binconsistent\b|\bincorrect(?:ly)?\b|\bwrong\b"
    r"|\bopposite\b|矛盾|冲突|相反|不一致|错误|不正确", re.IGNORECASE)
_MISSING_CUE = re.compile(
    r"\bmissing\b|\bmisses\b|\bomi(?:ts?|tted|tting|ssion)\b|\black(?:s|ing)?\b|\babsent\b|\bincomplete\b"
    r"|\bleaves?\s+out\b|\bleft\s+out\b|\bmiss\b"
    r"|\b(?:does\s+not|doesn't|did\s+not|didn't|never)\s+(?:\w+\s+){0,2}?"
    r"(?:mention|include|provide|give|ask|request|state|cover|say)\w*"
    r"|\bnot\s+(?:mentioned|provided|given|covered|present|stated)\b"
    r"|缺少|缺失|遗漏|漏掉|缺乏|没有提到|未提到|未提及|没有提及|没提", re.IGNORECASE)
_NONE_VALUE = re.compile(r"(?:none|no|n/?a|null|nil|nothing|no\s+problem|ok|无|没有|无问题|-)?", re.IGNORECASE)
_NEGATED_EN = re.compile(r"(?:\b(?:not|no|never|without|nothing|nor)\b|n't)(?:\s+\w+){0,2}\s*$", re.IGNORECASE)
_NEGATED_ZH = re.compile(r"(?:不|没|无|未)[\u4e00-\u9fff]{0,2}$")
_MISSING_TEXT_CHARS = 500


def _cue(text: str) -> str | None:
    """``contradiction`` when ``text`` says something conflicts (and does not
    deny it: "does not contradict" is no contradiction), else ``missing``
    when it says something is absent, else ``None``."""
    for match in _CONTRA_CUE.finditer(text):
        before = text[max(0, match.start() - 40):match.start()]
        if not (_NEGATED_EN.search(before) or _NEGATED_ZH.search(before)):
            return "contradiction"
    return "missing" if _MISSING_CUE.search(text) else None


def _problem_value(value: Any) -> tuple[bool, str | None]:
    """(stated, problem) of a ``problem`` field's value."""
    if isinstance(value, bool) or value is None:
        return False, None
    word = _MARKDOWN.sub(" ", re.sub(r"[_-]", " ", str(value))).strip()
    if _NONE_VALUE.fullmatch(word):
        return True, None
    if word.lower() in ("both", "两者都有"):  # missing and contradicted: the stronger one
        return True, "contradiction"
    found = _cue(word)
    return (True, found) if found else (False, None)


def _missing_text(value: Any) -> str | None:
    if isinstance(value, list):
        value = "; ".join(str(item).strip() for item in value if str(item).strip())
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or _NONE_VALUE.fullmatch(_MARKDOWN.sub(" ", text).strip()):
        return None
    return text[:_MISSING_TEXT_CHARS]


def _json_problem(obj: dict[str, Any], depth: int = 0) -> tuple[bool, str | None, str | None, list[str]]:
    """(problem stated, problem, missing text, reason texts) of a JSON answer."""
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    stated, problem, missing = False, None, None
    for key in PROBLEM_KEYS:
        if key in lowered:
            stated, problem = _problem_value(lowered[key])
            if stated:
                break
    for key in MISSING_KEYS:
        if key in lowered and (text := _missing_text(lowered[key])) is not None:
            missing = text
            if not stated and key in _CONTRADICTED_KEYS:
                stated, problem = True, "contradiction"
            break
    if missing is not None and problem is None:
        stated, problem = True, "missing"
    reasons = [str(v) for k, v in lowered.items() if isinstance(v, str) and k in (
        "reason", "reasoning", "explanation", "rationale", "analysis", "理由", "原因", "分析")]
    if not stated and depth < 2:
        for value in lowered.values():
            if isinstance(value, dict):
                inner = _json_problem(value, depth + 1)
                if inner[0]:
                    return inner
                reasons += inner[3]
    return stated, problem, missing, reasons


def read_problem(raw: str, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> tuple[str | None, str | None]:
    """What the coverage judge's answer says is wrong with the candidate:
    ``(problem, missing)``, ``problem`` ``"missing"``, ``"contradiction"`` or
    ``None`` (not stated, or "none"), ``missing`` the judge's words for what
    is absent or contradicted (``None`` when it names nothing).  Read from
    the judge's own words only (as :func:`read_verdict`); the last JSON
    object that states it wins, else the cue words of its reasons and prose.
    Never raises: an answer that says nothing gives ``(None, None)``."""
    text = own_words(raw, boundary=boundary, echoes=echoes)
    found: tuple[str | None, str | None] | None = None
    reasons: list[str] = []
    for start, end, obj in _json_objects(text):
        stated, problem, missing, why = _json_problem(obj)
        if stated:
            found = (problem, missing)
        reasons += why
        text = _blank(text, start, end)
    if found is not None:
        return found
    return _cue(_strip_quotes("\n".join([*reasons, text]), COVERAGE)), None
