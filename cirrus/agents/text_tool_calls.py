"""Tool calls a model wrote as text in its message instead of ``tool_calls``.

Small and local models served behind an OpenAI-compatible API often answer a
tool request with the call *written out* in ``message.content``: llama.cpp's
server passes Qwen2.5-Coder's ``{"name": ..., "arguments": {...}}`` through
as text, other models fence it or wrap it in their chat template's tags.
:func:`read_text_tool_calls` recognises these forms:

* ``json``: a JSON object (or a list of them) standing on its own lines, the
  whole reply or with text around it;
* ``json_fence``: the same inside a Markdown code fence (```` ```json ````,
  ```` ```tool_call ```` or a bare ```` ``` ````);
* ``tool_call_tag``: Hermes/Qwen ``<tool_call>{...}</tool_call>`` (also
  ``<function_call>``, and an unclosed tag at the end of the reply);
* ``marker``: Mistral's ``[TOOL_CALLS] [...]`` and Llama 3's
  ``<|python_tag|>{...}``.

A call is an object with a string ``name`` and ``arguments`` (or
``parameters``), the OpenAI shape ``{"function": {"name", "arguments"}}``
(with or without ``"type": "function"`` and an ``id``), or
``{"tool_calls": [...]}`` of those; ``arguments`` may be an object or a JSON
string, as the API sends it.  An object with only a ``name`` counts when the
name is one of the tools offered.  JSON that has none of these shapes is
text, whatever it holds.

The reading is *opt-in* (:class:`~cirrus.agents.openai_agent.OpenAIAgent`
``text_tool_calls``): by default such a reply is judged as the text it is,
and the turn only records that it looked like a tool call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

# the forms, as recorded in transcripts (ToolCallMade.read_from_text, agent notes)
FORM_JSON = "json"
FORM_FENCE = "json_fence"
FORM_TAG = "tool_call_tag"
FORM_MARKER = "marker"

_TAG = re.compile(r"<(tool_call|function_call)>\s*(.*?)\s*(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([\w-]*)[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_FENCE_LABELS = frozenset({"", "json", "json5", "tool_call", "tool_calls", "function_call", "tool"})
_MARKER = re.compile(r"\[TOOL_CALLS\]|<\|python_tag\|>")
_JSON_START = re.compile(r"^[ \t]*[\[{]", re.MULTILINE)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class TextToolCalls:
    """What :func:`read_text_tool_calls` found in a reply."""

    calls: list[dict[str, Any]]  # {"name": str, "arguments": str (JSON text, or the model's raw string)}
    form: str  # one of the FORM_* names: how the first call was written
    rest: str  # the reply without the calls: what a customer would have read besides them
    unreadable: list[str] = field(default_factory=list)  # <tool_call> blocks whose content is no JSON call

    @property
    def names(self) -> list[str]:
        return [call["name"] for call in self.calls]

    def openai_calls(self, prefix: str) -> list[dict[str, Any]]:
        """The calls as OpenAI ``tool_calls`` entries, ids ``<prefix>-<n>``."""
        return [{"id": f"{prefix}-{i}", "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}
                for i, call in enumerate(self.calls)]


def _arguments_text(value: Any) -> str:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value  # the API's own form: JSON as a string (read and checked where the call is run)
    return json.dumps(value, ensure_ascii=False)


def _one_call(value: Any, tools: Collection[str]) -> dict[str, Any] | None:
    """``value`` as one call ``{"name", "arguments"}``, or None when it has no call's shape."""
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict) and set(value) <= {"function", "type", "id", "index"}:
        value = inner
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    has_arguments = "arguments" in value or "parameters" in value
    if not has_arguments and name not in tools:
        return None
    if not set(value) <= {"name", "arguments", "parameters", "id", "type"}:
        return None  # more fields than a call has: data that happens to have a name
    arguments = value.get("arguments", value.get("parameters"))
    return {"name": name.strip(), "arguments": _arguments_text(arguments)}


def as_calls(value: Any, tools: Collection[str] = ()) -> list[dict[str, Any]] | None:
    """A parsed JSON value as a list of calls, or None when any part of it is
    not a call (a list must be calls only)."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list) and set(value) <= {"tool_calls"}:
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    calls = [_one_call(item, tools) for item in items]
    if not calls or any(call is None for call in calls):
        return None
    return calls  # type: ignore[return-value]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _tagged(text: str, tools: Collection[str]) -> TextToolCalls | None:
    calls: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for match in _TAG.finditer(text):
        found = as_calls(_loads(match.group(2)), tools)
        if found is None:
            unreadable.append(match.group(2))
        else:
            calls += found
    if not calls and not unreadable:
        return None
    return TextToolCalls(calls, FORM_TAG, _TAG.sub("", text).strip(), unreadable)


def _fenced(text: str, tools: Collection[str]) -> TextToolCalls | None:
    calls: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    for match in _FENCE.finditer(text):
        if match.group(1).lower() not in _FENCE_LABELS:
            continue
        found = as_calls(_loads(match.group(2).strip()), tools)
        if found is not None:
            calls += found
            spans.append(match.span())
    if not calls:
        return None
    return TextToolCalls(calls, FORM_FENCE, _cut(text, spans))


def _bare(text: str, tools: Collection[str], form: str = FORM_JSON) -> TextToolCalls | None:
    """JSON calls that start a line and run to the end of a line, outside
    code fences (those are :func:`_fenced`'s)."""
    calls: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    fences = [match.span() for match in _FENCE.finditer(text)]
    position = 0
    for match in _JSON_START.finditer(text):
        start = match.end() - 1
        if start < position or any(begin <= start < end for begin, end in fences):
            continue
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            continue
        line_end = text.find("\n", end)
        if text[end:len(text) if line_end < 0 else line_end].strip():
            continue  # more on the line after the JSON: prose that holds JSON, not a call
        found = as_calls(value, tools)
        if found is not None:
            calls += found
            spans.append((start, end))
            position = end
    if not calls:
        return None
    return TextToolCalls(calls, form, _cut(text, spans))


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    kept, position = [], 0
    for start, end in spans:
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()


def read_text_tool_calls(text: str, tools: Collection[str] = ()) -> TextToolCalls | None:
    """The tool calls written in ``text`` (a reply's content), or None.
    ``tools``: the names of the tools offered (a bare ``{"name": ...}`` of one
    of them counts as a call)."""
    if not text or not any(sign in text for sign in ("{", "[", "<tool_call", "<function_call")):
        return None
    tagged = _tagged(text, tools)
    if tagged is not None:
        return tagged
    if _MARKER.search(text):
        marked = _bare(_MARKER.sub("\n", text), tools, FORM_MARKER)
        if marked is not None:
            return marked
    return _fenced(text, tools) or _bare(text, tools)
