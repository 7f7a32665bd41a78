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
* all of these after reasoning; ``<think>`` (``<thinking>``, ``<reasoning>``,
  ``<analysis>``) blocks are dropped (an unclosed one counts only when it
  opens the answer: a cut answer is unreadable).

Only the judge's own words count.  Before reading, the answer loses, in this
order: the data blocks it echoes with the request's ``boundary`` id
(``<candidate_reply id="...">`` ... ``</candidate_reply id="...">``),
verbatim copies of the data texts given as ``echoes`` (16 characters or more),
thinking blocks, data blocks echoed without the id, blockquote lines, JSON
objects once read, and quoted or inline-code spans that hold more than a
bare verdict word.  Data is removed before thinking blocks, so an agent reply
holding ``<think>`` cannot hide the judge's verdict.  Of what is left, the verdict
stated **last** wins (a judge that quotes verdict-like text and then gives its
own verdict is read by its own).  "Not Included" is matched before
"Included", "No" never matches "Not", "不包含" before "包含".

The coverage judge's answer may also say what is wrong with a Not Included
candidate (:func:`read_problem`, docs/failures.md): a ``problem`` field
(``"missing"`` / ``"contradiction"`` / ``"none"``, or words such as
"Contradiction", "contradicts", "missing info", 矛盾, 缺少信息) and a
``missing`` field naming what is absent or contradicted; without them, the
cue words of its reason or prose ("the reply contradicts ...", "it omits
...").  The field is optional: an answer without it reads exactly as before.

An answer with no verdict, or whose last verdict is only an opening line
contradicted by the prose after it ("Included\\nThe key step is not
included, though."), raises :class:`UnparseableOutput`; the caller asks again
and, in the end, records an infrastructure error, never a silent fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cirrus.llm.client import UnparseableOutput

__all__ = ["COVERAGE", "FLUENCY", "Role", "DATA_TAGS", "read_coverage", "read_fluency", "read_verdict",
           "own_words", "read_problem"]

DATA_TAGS = ("conversation", "customer_last_message", "reference_reply", "candidate_reply",
             "next_customer_message", "later_customer_message", "history", "reference", "candidate")

_EOS = r"(?=[\s*_`\"'.,;:!?)\]}>。，；：！？、”」]|$)"  # a verdict word ends here
_END = r"(?=[*_`\"'”」)\]]*[ \t]*(?:[.!?。！,，;；:：\n]|$))"  # ... and so does the statement


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
_QUOTED = re.compile(r"\"([^\"\n]{1,400})\"|“([^”\n]{1,400})”|「([^」\n]{1,400})」|`([^`\n]{1,400})`")
_MARKDOWN = re.compile(r"[\s*_#>`\"'“”「」\[\](){}.,;:!?。，；：！？-]+")
_DECODER = json.JSONDecoder()

_MARKERS_EN = (r"(?:final\s+|overall\s+|my\s+)?(?:verdict|answer|judge?ment|decision|conclusion|result|label"
               r"|output|evaluation)")
_MARKERS_ZH = r"(?:最终)?(?:结论|判断|判定|答案|结果|回答)"
_CONCLUDING = r"(?:therefore|thus|hence|overall|in\s+conclusion|in\s+summary|so|因此|所以|综上)"


def _patterns(role: Role) -> dict[str, re.Pattern[str]]:
    token = role.token_re
    colon = r"[ \t*_`\"']*(?:[:=：]|-{1,2}|–|—)[ \t*_`\"'#>:：]*"
    heading = r"[ \t*_`\"':：]*\n[\s*_`\"'#>]*"
    copula = r"\s+(?:is|would\s+be|should\s+be|will\s+be)\s*:?[ \t*_`\"']*"
    zh_copula = r"\s*(?:是|为)\s*[:：]?\s*"
    flags = re.IGNORECASE
    return {
        "tag": re.compile(r"<([A-Za-z_][\w-]*)\b[^>]*>\s*((?:(?!<\1\b).)*?)\s*</\1\s*>", re.DOTALL),
        "marked": re.compile(rf"\b{_MARKERS_EN}(?:{colon}){token}", flags),
        "heading": re.compile(rf"\b{_MARKERS_EN}{heading}{token}{_END}", flags),
        "copula": re.compile(rf"\b{_MARKERS_EN}{copula}{token}{_END}", flags),
        "zh_marked": re.compile(rf"{_MARKERS_ZH}[ \t*_]*[:：][\s*_]*{token}", flags),
        "zh_copula": re.compile(rf"{_MARKERS_ZH}{zh_copula}{token}{_END}", flags),
        "concluding": re.compile(rf"\b{_CONCLUDING}\s*[,:，：]?\s*(?:the\s+(?:candidate|reply|answer|verdict)\s+is\s+)?"
                                 rf"[*_]*{token}[*_]*\s*[.!。]?\s*$", flags | re.MULTILINE),
        "line": re.compile(rf"^[ \t*#>_\-\[(`\"'“「]*{token}[*_`\"'”」\])]*{_EOS}"
                           r"(?:[ \t]*$|[*_`\"'”」\])]*\s*[.,;:!?。，；：！？—–-])", flags | re.MULTILINE),
        "bold": re.compile(rf"\*\*\s*{token}\s*[.!]?\s*\*\*", flags),
    }


_PATTERNS: dict[str, dict[str, re.Pattern[str]]] = {}


def _pattern_set(role: Role) -> dict[str, re.Pattern[str]]:
    if role.name not in _PATTERNS:
        _PATTERNS[role.name] = _patterns(role)
    return _PATTERNS[role.name]


def _blank(text: str, start: int, end: int) -> str:
    """Replace text[start:end] by spaces, keeping newlines (positions stay)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def own_words(raw: str, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> str:
    """The judge's answer without what is not its own statement: echoed data
    blocks and data texts, thinking blocks, blockquotes, fence markers.
    Positions of the kept text are preserved (removed text becomes spaces)."""
    text = raw or ""
    tags = "|".join(DATA_TAGS)
    if boundary and boundary.lower() in text.lower():  # first the data blocks echoed with their real boundary
        exact = re.compile(rf"<({tags})\b[^>]*{re.escape(boundary)}[^>]*>.*?</\1\b[^>]*{re.escape(boundary)}[^>]*>",
                           re.DOTALL | re.IGNORECASE)
        text = exact.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    for echo in echoes:  # then verbatim copies of the data texts
        echo = (echo or "").strip()
        if len(echo) < 16:
            continue
        start = text.find(echo)
        while start != -1:
            text = _blank(text, start, start + len(echo))
            start = text.find(echo, start + len(echo))
    text = _THINK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:  # an opening tag the server stripped: keep what follows the last close
        text = _blank(text, 0, closes[-1].end())
    opened = _THINK_OPEN.match(text.lstrip())
    if opened:  # thinking that never closed (a cut answer): nothing after it is a verdict
        text = " " * len(text)
    loose = re.compile(rf"<({tags})\b[^>]*>.*</\1\b[^>]*>", re.DOTALL | re.IGNORECASE)
    text = loose.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = _BLOCKQUOTE.sub(lambda m: " " * len(m.group(0)), text)
    return _FENCE.sub(lambda m: " " * len(m.group(0)), text)


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


def _json_verdict(obj: dict[str, Any], role: Role, depth: int = 0) -> bool | None:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in role.json_keys:
        if key not in lowered:
            continue
        value = lowered[key]
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            word = _MARKDOWN.sub(" ", value).strip()
            found = role.value(word)
            if found is None:
                found = role.json_words.get(word.lower())
            if found is None:  # "Yes, it follows", "Not included: the ID request is missing"
                match = _pattern_set(role)["line"].match(value.strip())
                if match:
                    found = role.value(match.group(1))
            if found is not None:
                return found
        if isinstance(value, dict) and depth < 2:
            found = _json_verdict(value, role, depth + 1)
            if found is not None:
                return found
    return None


def _strip_quotes(text: str, role: Role) -> str:
    """Quoted and inline-code spans that hold more than a bare verdict (or a
    marker word) are the judge quoting something: blank them."""
    def keep(inner: str) -> bool:
        word = _MARKDOWN.sub(" ", inner).strip()
        return (not word or role.value(word) is not None or word.lower() in role.json_words
                or re.fullmatch(rf"{_MARKERS_EN}|{_MARKERS_ZH}|reason|verdict|answer", word, re.IGNORECASE) is not None)

    def blank(match: re.Match[str]) -> str:
        inner = next(group for group in match.groups() if group is not None)
        return match.group(0) if keep(inner) else " " * len(match.group(0))

    return _QUOTED.sub(blank, text)


@dataclass(frozen=True)
class _Statement:
    start: int
    end: int
    value: bool
    kind: str


def _statements(text: str, role: Role) -> list[_Statement]:
    found: list[_Statement] = []
    # JSON objects: read, then blanked so nothing inside them is read again
    for start, end, obj in _json_objects(text):
        value = _json_verdict(obj, role)
        if value is not None:
            found.append(_Statement(start, end, value, "json"))
        text = _blank(text, start, end)
    text = _strip_quotes(text, role)
    patterns = _pattern_set(role)
    for match in patterns["tag"].finditer(text):
        if match.group(1).lower() in DATA_TAGS:
            continue
        inner = _MARKDOWN.sub(" ", match.group(2)).strip()
        value = role.value(inner)
        if value is None:
            opening = patterns["line"].match(match.group(2).strip())
            value = role.value(opening.group(1)) if opening else None
        if value is not None:
            found.append(_Statement(match.start(), match.end(), value, "tag"))
    for kind in ("marked", "heading", "copula", "zh_marked", "zh_copula", "concluding", "line", "bold"):
        for match in patterns[kind].finditer(text):
            value = role.value(match.group(1))
            if value is not None:
                found.append(_Statement(match.start(1), match.end(1), value, kind))
    return sorted(found, key=lambda s: (s.end, s.start))


def read_verdict(raw: str, role: Role, *, boundary: str | None = None, echoes: Iterable[str] = ()) -> bool:
    """The judge's own last verdict in ``raw`` for ``role``; raises
    :class:`UnparseableOutput` when there is none or it is contradicted."""
    text = own_words(raw, boundary=boundary, echoes=echoes)
    if not text.strip():
        raise UnparseableOutput(f"empty {role.name}")
    statements = _statements(text, role)
    if not statements:
        raise UnparseableOutput(f"no verdict found in the {role.name}")
    last = statements[-1]
    if last.kind in ("line", "bold", "concluding") and role.weak is not None:
        # a bare opening verdict, then prose that says the opposite: the answer reads both ways
        for match in role.weak.finditer(text, last.end):
            if role.value(re.sub(r"\s+(?:\w+\s+)?included", " included", match.group(0))) is (not last.value):
                raise UnparseableOutput(f"the {role.name} reads both ways")
    return last.value


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
