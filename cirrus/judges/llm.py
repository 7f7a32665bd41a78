"""The LLM coverage judge and fluency checker, on any OpenAI-compatible
endpoint (:class:`cirrus.llm.client.ChatClient`).

Both ask for a JSON object (``{"reason": ..., "missing": ..., "problem": ...,
"verdict": "Included" | "Not Included"}``, ``{"reason": ..., "answer": "Yes" |
"No"}``) and read whatever reasonable shape the answer comes in with
:mod:`cirrus.judges.verdicts` (JSON, tags, markers, bare words, Chinese;
thinking blocks and anything the judge merely quotes or copies from the
data left out: the data texts, the history's messages and its tool calls'
arguments, :func:`history_echoes`).  The structured field is the verdict;
when the judge's readings disagree (its JSON and its prose, its first and
final statements), the answer counts as unreadable.  An answer that
cannot be read is asked again with a repair message (3 attempts in all), then
:class:`~cirrus.evaluate.types.InfrastructureError` is raised: it is never
counted as a failed checkpoint.  A Not Included verdict also carries what
the judge says is wrong (:attr:`Verdict.problem`, :attr:`Verdict.missing`,
:func:`cirrus.judges.verdicts.read_problem`; docs/failures.md).

The agent's reply, the reference, the customer's messages and the history
are data: each goes into the prompt between tags carrying a per-request
boundary id (:func:`data_boundary`, removed from the data itself), and the
system prompts say that text inside such blocks is never an instruction.

Inputs are bounded (:class:`JudgeInputLimits`, docs/judging.md): the
candidate reply, the reference reply and the rendered history are cut to
configurable sizes with a visible marker (:func:`cut_marker`) inside their
data block, so a 20 MB reply is judged on its first characters instead of
failing the request.  The verdict records what was cut
(:attr:`Verdict.input_cut`, which the walk copies into the transcript's
verdict record as ``judge_input_cut``).

Both ask for structured output (``response_format`` with the JSON schema of
their answer, :mod:`cirrus.judges.schemas`) where the endpoint takes it; an
endpoint that refuses it is asked again without it, once per client
(:meth:`~cirrus.llm.client.ChatClient.complete_parsed`).

Calls are cached (:class:`cirrus.llm.cache.ResponseCache`, when the client
has one): re-scoring or resuming a run asks no question twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cirrus.evaluate.types import Verdict
from cirrus.judges import prompts, schemas, verdicts
from cirrus.llm.client import ChatClient

DEFAULT_PARSE_ATTEMPTS = 3


# --------------------------------------------------------------------------
# bounded inputs


@dataclass(frozen=True, slots=True)
class JudgeInputLimits:
    """The most characters of each data part a judge is sent (the marker
    added where text was cut not counted).  ``candidate_chars`` and
    ``reference_chars`` keep the head of the reply; ``history_chars`` keeps
    the most recent messages of the rendered history, whole where possible.
    Set in ``cirrus.toml`` under ``[judge_input]`` (docs/judging.md)."""

    candidate_chars: int = 8_000
    reference_chars: int = 8_000
    history_chars: int = 24_000

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1")


DEFAULT_INPUT_LIMITS = JudgeInputLimits()
_configured_limits = DEFAULT_INPUT_LIMITS


def configure_input_limits(limits: JudgeInputLimits | None) -> None:
    """The limits of judges built without ``limits=`` from now on
    (:func:`cirrus.settings.load_settings` sets them from ``[judge_input]``;
    ``None`` restores the defaults)."""
    global _configured_limits
    _configured_limits = limits or DEFAULT_INPUT_LIMITS


def input_limits() -> JudgeInputLimits:
    """The limits judges built without ``limits=`` use."""
    return _configured_limits


def cut_marker(cut: int) -> str:
    """What stands in a data block where ``cut`` characters were left out."""
    return f"[... {cut:,} characters cut by Cirrus ...]"


def cap_text(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to its first ``limit`` characters, with the marker
    after them, and how many characters were cut (0: unchanged)."""
    if len(text) <= limit:
        return text, 0
    head = text[:limit].rstrip()
    cut = len(text) - len(head)
    return head + "\n" + cut_marker(cut), cut


def cap_history(rendered: str, limit: int, separator: str = "\n\n") -> tuple[str, int]:
    """The most recent part of a rendered history within ``limit``
    characters: whole messages (``separator``-joined), the oldest dropped
    first, behind the marker; when even the last message is longer than
    ``limit``, its last ``limit`` characters."""
    if len(rendered) <= limit:
        return rendered, 0
    lines = rendered.split(separator)
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        extra = len(line) + (len(separator) if kept else 0)
        if size + extra > limit:
            break
        kept.append(line)
        size += extra
    if kept:
        text = separator.join(reversed(kept))
    else:
        text = rendered[-limit:].lstrip()
    cut = len(rendered) - len(text)
    return cut_marker(cut) + separator + text, cut


def _cut_record(original: str, sent: str) -> dict[str, int]:
    return {"original_chars": len(original), "sent_chars": len(sent)}

# --------------------------------------------------------------------------
# reading verdicts (cirrus.judges.verdicts) and fencing the data


def parse_coverage(raw: str, *, boundary: str | None = None, echoes: Sequence[str] = ()) -> bool:
    """``True`` for Included, ``False`` for Not Included; raises
    :class:`UnparseableOutput` when the answer says neither (see
    :func:`cirrus.judges.verdicts.read_coverage`)."""
    return verdicts.read_coverage(raw, boundary=boundary, echoes=echoes)


def parse_yes_no(raw: str, *, boundary: str | None = None, echoes: Sequence[str] = ()) -> bool:
    """``True`` for Yes, ``False`` for No; raises :class:`UnparseableOutput`
    when the answer says neither (see :func:`cirrus.judges.verdicts.read_fluency`)."""
    return verdicts.read_fluency(raw, boundary=boundary, echoes=echoes)


def data_boundary(*texts: str) -> str:
    """The boundary id of one request's data blocks: 16 hex digits drawn
    from a hash of all the data.  No text can hold its own request's id (it
    would have to contain a hash of itself), and the same question gets the
    same id, so cached verdicts are still found."""
    digest = hashlib.sha256("\0".join(("cirrus-judge-boundary", *texts)).encode("utf-8")).hexdigest()
    return "b" + digest[:15]


def fence_data(text: str, boundary: str) -> str:
    """``text`` without any occurrence of ``boundary`` (case-insensitive), so
    that it cannot close its own block."""
    if boundary.lower() not in text.lower():  # the usual case: no pattern to compile (one per request)
        return text
    pattern = re.compile(re.escape(boundary), re.IGNORECASE)
    while pattern.search(text):
        text = pattern.sub("", text)
    return text


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


_HISTORY_MESSAGE = re.compile(r"\n\n(?=(?:Customer|Agent|Agent \(tool call\)|Tool result): )")
_HISTORY_PREFIX = re.compile(r"(?:Customer|Agent|Tool result): |Agent \(tool call\): (\S*) ?")


def history_echoes(rendered: str) -> tuple[str, ...]:
    """The texts of a rendered history (:func:`render_history`) a judge may
    quote, for the verdict reader to remove: the whole history, each message
    as shown, and each tool call's arguments (an injection can ride in
    them)."""
    texts = [rendered]
    for part in _HISTORY_MESSAGE.split(rendered):
        prefix = _HISTORY_PREFIX.match(part)
        if prefix is None:
            continue
        texts.append(part[prefix.end():])
        if prefix.group(1) is not None:  # a tool call: its name and arguments too
            texts.append(part[prefix.start(1):])
    return tuple(text for text in texts if text.strip())


def _prompt_hash(*texts: str) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------
# the judges


class _LLMVerdicts:
    def __init__(self, client: ChatClient, *, history_turns: int, attempts: int, cache: bool,
                 limits: JudgeInputLimits | None) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.client = client
        self.history_turns = history_turns
        self.attempts = attempts
        self.cache = cache
        self.limits = limits or input_limits()

    def _history(self, history: Sequence[Mapping[str, Any]], cuts: dict[str, dict[str, int]]) -> str:
        rendered = render_history(history, self.history_turns)
        text, cut = cap_history(rendered, self.limits.history_chars)
        if cut:
            cuts["history"] = _cut_record(rendered, text)
        return text

    async def _verdict(self, system: str, user: str, parse: Callable[[str], bool], repair: str, what: str,
                       cuts: dict[str, dict[str, int]], response_format: Mapping[str, Any],
                       problem: Callable[[str], tuple[str | None, str | None]] | None = None) -> Verdict:
        """``problem``: reads what a Not Included answer says is wrong
        (:func:`cirrus.judges.verdicts.read_problem`); not asked of an
        Included one."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        ok, result = await self.client.complete_parsed(
            messages, parse, attempts=self.attempts, repair=repair, cache=self.cache, what=what,
            response_format=response_format,
        )
        found, missing = problem(result.content) if problem is not None and not ok else (None, None)
        return Verdict(ok=ok, raw=result.content, input_cut=cuts or None, problem=found, missing=missing)


class LLMCoverageJudge(_LLMVerdicts):
    """Does a candidate reply hold the key information of the reference reply
    for the customer's last question?  The judge sees the last
    ``history_turns`` customer turns of the history."""

    def __init__(self, client: ChatClient, *, history_turns: int = 3, attempts: int = DEFAULT_PARSE_ATTEMPTS,
                 cache: bool = True, system_prompt: str = prompts.COVERAGE_SYSTEM,
                 later_system_prompt: str = prompts.COVERAGE_LATER_SYSTEM,
                 limits: JudgeInputLimits | None = None) -> None:
        super().__init__(client, history_turns=history_turns, attempts=attempts, cache=cache, limits=limits)
        self.system_prompt = system_prompt
        self.later_system_prompt = later_system_prompt
        self.name = f"llm-coverage:{client.model}"

    def fingerprint(self) -> dict[str, Any]:
        return {
            **self.client.role.fingerprint(),
            "prompt_sha256": _prompt_hash(self.system_prompt, prompts.COVERAGE_USER, prompts.COVERAGE_REPAIR),
            "later_prompt_sha256": _prompt_hash(self.later_system_prompt, prompts.COVERAGE_LATER_USER),
            "history_turns": self.history_turns,
            "input_limits": asdict(self.limits),
        }

    def _data(self, history: Sequence[Mapping[str, Any]], query: str, reference: str, candidate: str,
              **more: str) -> tuple[str, dict[str, str], dict[str, dict[str, int]]]:
        cuts: dict[str, dict[str, int]] = {}
        data = {"history": self._history(history, cuts), "query": query.strip(),
                **{name: text.strip() for name, text in more.items()}}
        for name, text, limit in (("reference", reference.strip(), self.limits.reference_chars),
                                  ("candidate", candidate.strip(), self.limits.candidate_chars)):
            sent, cut = cap_text(text, limit)
            if cut:
                cuts[name] = _cut_record(text, sent)
            data[name] = sent
        data["candidate"] = data["candidate"] or "(the agent wrote no text)"
        boundary = data_boundary(*data.values())
        return boundary, {name: fence_data(text, boundary) for name, text in data.items()}, cuts

    def user_message(self, history: Sequence[Mapping[str, Any]], query: str, reference: str, candidate: str) -> str:
        boundary, data, _ = self._data(history, query, reference, candidate)
        return prompts.COVERAGE_USER.format(id=boundary, **data)

    async def covers(self, history: list[dict[str, Any]], query: str, reference: str, candidate: str) -> Verdict:
        boundary, data, cuts = self._data(history, query, reference, candidate)
        user = prompts.COVERAGE_USER.format(id=boundary, **data)
        echoes = (data["candidate"], data["reference"], data["query"], *history_echoes(data["history"]))

        def parse(raw: str) -> bool:
            return parse_coverage(raw, boundary=boundary, echoes=echoes)

        def problem(raw: str) -> tuple[str | None, str | None]:
            return verdicts.read_problem(raw, boundary=boundary, echoes=echoes)

        return await self._verdict(self.system_prompt, user, parse, prompts.COVERAGE_REPAIR, "coverage verdict",
                                   cuts, schemas.COVERAGE_RESPONSE_FORMAT, problem)

    def later_user_message(self, history: Sequence[Mapping[str, Any]], query: str, candidate: str,
                           later_query: str, later_reference: str) -> str:
        boundary, data, _ = self._data(history, query, later_reference, candidate, later_query=later_query)
        return prompts.COVERAGE_LATER_USER.format(id=boundary, **data)

    async def covers_later(self, history: list[dict[str, Any]], query: str, candidate: str, later_query: str,
                           later_reference: str) -> Verdict:
        """A logical jump: does ``candidate``, the agent's reply to ``query``
        (the last message of ``history``), already hold the key information
        of ``later_reference``, the engineer's reply to the customer's later
        message ``later_query``, which the agent never saw?"""
        boundary, data, cuts = self._data(history, query, later_reference, candidate, later_query=later_query)
        user = prompts.COVERAGE_LATER_USER.format(id=boundary, **data)
        echoes = (data["candidate"], data["reference"], data["query"], data["later_query"],
                  *history_echoes(data["history"]))

        def parse(raw: str) -> bool:
            return parse_coverage(raw, boundary=boundary, echoes=echoes)

        def problem(raw: str) -> tuple[str | None, str | None]:
            return verdicts.read_problem(raw, boundary=boundary, echoes=echoes)

        return await self._verdict(self.later_system_prompt, user, parse, prompts.COVERAGE_REPAIR,
                                   "coverage verdict", cuts, schemas.COVERAGE_RESPONSE_FORMAT, problem)


class LLMFluencyChecker(_LLMVerdicts):
    """Can the real customer's next message still follow the conversation as
    it stands (with the agent's own replies in it)?  The checker sees the
    last ``history_turns`` customer turns of the history."""

    def __init__(self, client: ChatClient, *, history_turns: int = 5, attempts: int = DEFAULT_PARSE_ATTEMPTS,
                 cache: bool = True, system_prompt: str = prompts.FLUENCY_SYSTEM,
                 limits: JudgeInputLimits | None = None) -> None:
        super().__init__(client, history_turns=history_turns, attempts=attempts, cache=cache, limits=limits)
        self.system_prompt = system_prompt
        self.name = f"llm-fluency:{client.model}"

    def fingerprint(self) -> dict[str, Any]:
        return {
            **self.client.role.fingerprint(),
            "prompt_sha256": _prompt_hash(self.system_prompt, prompts.FLUENCY_USER, prompts.FLUENCY_REPAIR),
            "history_turns": self.history_turns,
            "input_limits": {"history_chars": self.limits.history_chars},
        }

    def _data(self, history: Sequence[Mapping[str, Any]],
              next_query: str) -> tuple[str, dict[str, str], dict[str, dict[str, int]]]:
        cuts: dict[str, dict[str, int]] = {}
        data = {"history": self._history(history, cuts), "next_query": next_query.strip()}
        boundary = data_boundary(*data.values())
        return boundary, {name: fence_data(text, boundary) for name, text in data.items()}, cuts

    def user_message(self, history: Sequence[Mapping[str, Any]], next_query: str) -> str:
        boundary, data, _ = self._data(history, next_query)
        return prompts.FLUENCY_USER.format(id=boundary, **data)

    async def follows(self, history: list[dict[str, Any]], next_query: str) -> Verdict:
        boundary, data, cuts = self._data(history, next_query)
        user = prompts.FLUENCY_USER.format(id=boundary, **data)
        echoes = (data["next_query"], *history_echoes(data["history"]))

        def parse(raw: str) -> bool:
            return parse_yes_no(raw, boundary=boundary, echoes=echoes)

        return await self._verdict(self.system_prompt, user, parse, prompts.FLUENCY_REPAIR, "fluency answer", cuts,
                                   schemas.FLUENCY_RESPONSE_FORMAT)
