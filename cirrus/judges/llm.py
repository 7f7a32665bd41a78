"""The LLM coverage judge and fluency checker, on any OpenAI-compatible
endpoint (:class:`cirrus.llm.client.ChatClient`).

Both ask for a JSON object (``{"reason": ..., "verdict": "Included" | "Not
Included"}``, ``{"reason": ..., "answer": "Yes" | "No"}``) and read the answer
robustly (:func:`parse_coverage`, :func:`parse_yes_no`): JSON anywhere in the
text, fenced or not, ``<think>`` blocks dropped; else a plain-text verdict
after a marker ("Verdict: Not Included") or opening the first or last line
(for coverage, only when no opposite verdict appears anywhere in the text).
"Not Included" is always matched before "Included".  An answer that cannot be
read, or reads both ways, is asked again with a repair message (3 attempts
in all), then :class:`~cirrus.evaluate.types.InfrastructureError` is raised:
it is never counted as a failed checkpoint.

Calls are cached (:class:`cirrus.llm.cache.ResponseCache`, when the client
has one): re-scoring or resuming a run asks no question twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cirrus.evaluate.types import Verdict
from cirrus.judges import prompts
from cirrus.llm.client import ChatClient, UnparseableOutput

DEFAULT_PARSE_ATTEMPTS = 3

# --------------------------------------------------------------------------
# reading verdicts

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*")
_NON_LETTERS = re.compile(r"[^a-z]+")
_DECODER = json.JSONDecoder()

_COVERAGE_KEYS = ("verdict", "label", "answer", "result", "decision", "judgment", "judgement", "included")
_YES_NO_KEYS = ("answer", "verdict", "fluent", "follows", "result", "decision", "label")
_COVERAGE_WORDS = {
    "included": True, "covered": True, "yes": True, "true": True,
    "notincluded": False, "notcovered": False, "excluded": False, "no": False, "false": False,
}
_YES_NO_WORDS = {"yes": True, "true": True, "no": False, "false": False}

_MARKER = r"(?:final\s+)?(?:verdict|answer|judge?ment|decision|conclusion|result|label)"
_COVERAGE_TOKEN = r"(not[\s_-]*included|included)"
_YES_NO_TOKEN = r"(yes|no)"
_SEPARATOR = r"\s*[*\"'`]*\s*[:=\-]+\s*[*\"'`]*\s*"  # "Verdict: X", "**Verdict:** X", '"verdict": "X'
_COVERAGE_MARKED = re.compile(rf"\b{_MARKER}{_SEPARATOR}{_COVERAGE_TOKEN}\b", re.IGNORECASE)
_YES_NO_MARKED = re.compile(rf"\b{_MARKER}{_SEPARATOR}{_YES_NO_TOKEN}\b", re.IGNORECASE)
_COVERAGE_ANYWHERE = re.compile(rf"\b{_COVERAGE_TOKEN}\b", re.IGNORECASE)
_COVERAGE_LINE = re.compile(rf"^[\s*#>\"'`_\[(]*{_COVERAGE_TOKEN}\b", re.IGNORECASE)
_YES_NO_LINE = re.compile(rf"^[\s*#>\"'`_\[(]*{_YES_NO_TOKEN}\b", re.IGNORECASE)


def _clean(raw: str) -> str:
    text = _THINK.sub(" ", raw or "")
    if "</think>" in text:  # an opening tag the server stripped: keep what follows
        text = text.rsplit("</think>", 1)[1]
    return _FENCE.sub(" ", text).strip()


def _json_objects(text: str) -> list[dict[str, Any]]:
    found = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        start = text.find("{", end)
    return found


def _word_value(value: Any, words: Mapping[str, bool], line: re.Pattern[str],
                token_words: Mapping[str, bool]) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        exact = words.get(_NON_LETTERS.sub("", value.lower()))
        if exact is not None:
            return exact
        match = line.match(value)  # "Yes, it follows", "Not included: ..."
        if match:
            return token_words[_NON_LETTERS.sub("", match.group(1).lower())]
    return None


def _parse(raw: str, keys: Sequence[str], words: Mapping[str, bool], marked: re.Pattern[str],
           line: re.Pattern[str], token_words: Mapping[str, bool], what: str,
           anywhere: re.Pattern[str] | None = None) -> bool:
    text = _clean(raw)
    if not text:
        raise UnparseableOutput(f"empty {what}")
    # 1. a JSON object with a verdict field (the last one that has one)
    for obj in reversed(_json_objects(text)):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        for key in keys:
            if key in lowered:
                value = _word_value(lowered[key], words, line, token_words)
                if value is not None:
                    return value
    # 2. the whole answer is a verdict ("Not Included", "**Yes**.")
    whole = token_words.get(_NON_LETTERS.sub("", text.lower()))
    if whole is not None:
        return whole
    # 3. a marked verdict: "Verdict: Not Included" (all marked verdicts must agree)
    marked_values = {token_words[_NON_LETTERS.sub("", m.lower())] for m in marked.findall(text)}
    if len(marked_values) == 1:
        return marked_values.pop()
    if len(marked_values) > 1:
        raise UnparseableOutput(f"the {what} gives contradicting verdicts")
    # 4. a verdict opening the first or the last line (they must agree)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    line_values = set()
    for candidate in {lines[0], lines[-1]}:
        match = line.match(candidate)
        if match:
            line_values.add(token_words[_NON_LETTERS.sub("", match.group(1).lower())])
    if len(line_values) == 1:
        value = line_values.pop()
        if anywhere is not None:  # and no verdict of the other kind anywhere in the text
            seen = {token_words[_NON_LETTERS.sub("", m.lower())] for m in anywhere.findall(text)}
            if seen - {value}:
                raise UnparseableOutput(f"the {what} reads both ways")
        return value
    raise UnparseableOutput(f"no verdict found in the {what}")


def parse_coverage(raw: str) -> bool:
    """``True`` for Included, ``False`` for Not Included; raises
    :class:`UnparseableOutput` when the answer says neither (or both)."""
    return _parse(raw, _COVERAGE_KEYS, _COVERAGE_WORDS, _COVERAGE_MARKED, _COVERAGE_LINE,
                  {"included": True, "notincluded": False}, "coverage judge's answer", _COVERAGE_ANYWHERE)


def parse_yes_no(raw: str) -> bool:
    """``True`` for Yes, ``False`` for No; raises :class:`UnparseableOutput`
    when the answer says neither (or both)."""
    return _parse(raw, _YES_NO_KEYS, _YES_NO_WORDS, _YES_NO_MARKED, _YES_NO_LINE,
                  {"yes": True, "no": False}, "yes/no answer")


# --------------------------------------------------------------------------
# rendering the conversation


def _shorten(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 20].rstrip() + " [... cut ...]"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def render_history(history: Sequence[Mapping[str, Any]], turns: int, max_chars: int = 3000,
                   tool_chars: int = 300) -> str:
    """The last ``turns`` customer turns of ``history`` and everything after
    them, as "Customer: ..." / "Agent: ..." lines; tool calls are shown as
    one line each with their result shortened; system messages are left out."""
    start = 0
    seen = 0
    for index in range(len(history) - 1, -1, -1):
        if history[index].get("role") == "user":
            seen += 1
            if seen == turns:
                start = index
                break
    lines = []
    for message in history[start:]:
        role = message.get("role")
        text = _content_text(message.get("content"))
        if role == "user":
            lines.append(f"Customer: {_shorten(text, max_chars)}")
        elif role == "assistant":
            if text.strip():
                lines.append(f"Agent: {_shorten(text, max_chars)}")
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                lines.append(f"Agent (tool call): {function.get('name', '')} {_shorten(arguments or '', tool_chars)}")
        elif role == "tool":
            lines.append(f"Tool result: {_shorten(text, tool_chars)}")
    return "\n\n".join(lines) if lines else prompts.EMPTY_HISTORY


def _prompt_hash(*texts: str) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------
# the judges


class _LLMVerdicts:
    def __init__(self, client: ChatClient, *, history_turns: int, attempts: int, cache: bool) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.client = client
        self.history_turns = history_turns
        self.attempts = attempts
        self.cache = cache

    async def _verdict(self, system: str, user: str, parse: Callable[[str], bool], repair: str, what: str) -> Verdict:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        ok, result = await self.client.complete_parsed(
            messages, parse, attempts=self.attempts, repair=repair, cache=self.cache, what=what
        )
        return Verdict(ok=ok, raw=result.content)


class LLMCoverageJudge(_LLMVerdicts):
    """Does a candidate reply hold the key information of the reference reply
    for the customer's last question?  The judge sees the last
    ``history_turns`` customer turns of the history."""

    def __init__(self, client: ChatClient, *, history_turns: int = 3, attempts: int = DEFAULT_PARSE_ATTEMPTS,
                 cache: bool = True, system_prompt: str = prompts.COVERAGE_SYSTEM) -> None:
        super().__init__(client, history_turns=history_turns, attempts=attempts, cache=cache)
        self.system_prompt = system_prompt
        self.name = f"llm-coverage:{client.model}"

    def fingerprint(self) -> dict[str, Any]:
        return {
            **self.client.role.fingerprint(),
            "prompt_sha256": _prompt_hash(self.system_prompt, prompts.COVERAGE_USER, prompts.COVERAGE_REPAIR),
            "history_turns": self.history_turns,
        }

    def user_message(self, history: Sequence[Mapping[str, Any]], query: str, reference: str, candidate: str) -> str:
        return prompts.COVERAGE_USER.format(
            history=render_history(history, self.history_turns),
            query=query.strip(),
            reference=reference.strip(),
            candidate=candidate.strip() or "(the agent wrote no text)",
        )

    async def covers(self, history: list[dict[str, Any]], query: str, reference: str, candidate: str) -> Verdict:
        user = self.user_message(history, query, reference, candidate)
        return await self._verdict(self.system_prompt, user, parse_coverage, prompts.COVERAGE_REPAIR,
                                   "coverage verdict")


class LLMFluencyChecker(_LLMVerdicts):
    """Can the real customer's next message still follow the conversation as
    it stands (with the agent's own replies in it)?  The checker sees the
    last ``history_turns`` customer turns of the history."""

    def __init__(self, client: ChatClient, *, history_turns: int = 5, attempts: int = DEFAULT_PARSE_ATTEMPTS,
                 cache: bool = True, system_prompt: str = prompts.FLUENCY_SYSTEM) -> None:
        super().__init__(client, history_turns=history_turns, attempts=attempts, cache=cache)
        self.system_prompt = system_prompt
        self.name = f"llm-fluency:{client.model}"

    def fingerprint(self) -> dict[str, Any]:
        return {
            **self.client.role.fingerprint(),
            "prompt_sha256": _prompt_hash(self.system_prompt, prompts.FLUENCY_USER, prompts.FLUENCY_REPAIR),
            "history_turns": self.history_turns,
        }

    def user_message(self, history: Sequence[Mapping[str, Any]], next_query: str) -> str:
        return prompts.FLUENCY_USER.format(
            history=render_history(history, self.history_turns), next_query=next_query.strip()
        )

    async def follows(self, history: list[dict[str, Any]], next_query: str) -> Verdict:
        user = self.user_message(history, next_query)
        return await self._verdict(self.system_prompt, user, parse_yes_no, prompts.FLUENCY_REPAIR,
                                   "fluency answer")
