"""One model answer (:class:`ChatResult`), read defensively from the SDK's
unvalidated types."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from openai.types.chat import ChatCompletion

from cirrus.llm.client.errors import _MalformedAnswer, _snippet
from cirrus.usage import Usage, call_usage


def assistant_message(content: str | None, tool_calls: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An OpenAI assistant message: its text (null when empty and there are
    tool calls, "" when there are none) and its tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    elif message["content"] is None:
        message["content"] = ""
    return message


@dataclass(slots=True)
class ChatResult:
    """One model answer, reduced to what Cirrus uses (cacheable as JSON)."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI tool_call dicts
    finish_reason: str | None = None
    model: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # reasoning included (OpenAI's definition)
    reasoning_tokens: int | None = None  # the part of completion_tokens spent reasoning, when reported
    cached_tokens: int | None = None  # the part of prompt_tokens the provider's prompt cache served, when reported
    reasoning_content: str | None = None  # provider extension (DeepSeek, Qwen, vLLM reasoning parsers)
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False

    def assistant_message(self) -> dict[str, Any]:
        """The answer as an OpenAI assistant message for the next request's
        history (reasoning text left out, as providers require)."""
        return assistant_message(self.content, self.tool_calls)

    def output_tokens(self) -> int:
        """Output tokens of this call: ``usage.completion_tokens`` (reasoning
        included); counted with tiktoken only when the API reported none."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        from cirrus.offline import count_tokens

        parts = [self.content or "", self.reasoning_content or ""]
        for call in self.tool_calls:
            function = call.get("function") or {}
            parts.append(str(function.get("name") or ""))
            parts.append(str(function.get("arguments") or ""))
        return sum(count_tokens(part) for part in parts if part)

    def usage(self, request: bytes | None = None) -> Usage:
        """This answer's :class:`~cirrus.usage.Usage` as one call sent to the
        endpoint (``request``: the body sent, counted with tiktoken when the
        endpoint reported no prompt tokens), or as a Cirrus cache hit."""
        if self.cached:
            return call_usage(None, None, from_cirrus_cache=True)
        prompt = self.prompt_tokens
        if prompt is None and request is not None:
            from cirrus.offline import count_tokens

            prompt = count_tokens(request.decode("utf-8", "replace"))
        return call_usage(prompt, self.output_tokens(), cached_input_tokens=self.cached_tokens,
                          reasoning_tokens=self.reasoning_tokens)

    def to_cache(self) -> dict[str, Any]:
        skip = ("latency_s", "attempts", "cached")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}

    @classmethod
    def from_cache(cls, data: Mapping[str, Any]) -> ChatResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known}, cached=True)

    @classmethod
    def from_completion(cls, completion: Any, latency_s: float, attempts: int) -> ChatResult:
        """The answer of a 200 response; :class:`_MalformedAnswer` when it is
        not a usable chat completion.  ``completion`` is the answer's JSON
        object (a ``dict``) or the SDK's ``ChatCompletion``, which the SDK
        builds without validating it: every field is read defensively."""
        if not isinstance(completion, (ChatCompletion, dict)):  # a dict: the JSON of the answer
            shown = completion if isinstance(completion, str) else json.dumps(completion)[:100]
            raise _MalformedAnswer(f"the body is not a chat completion: {_snippet(shown)}")
        choices = _attr(completion, "choices")
        if choices is None:
            raise _MalformedAnswer("the answer has no 'choices' field")
        if not isinstance(choices, list) or not choices:
            raise _MalformedAnswer(f"the answer has no choices (choices: {json.dumps(choices, default=str)[:80]})")
        choice = choices[0]
        message = _attr(choice, "message")
        if message is None or isinstance(message, (str, int, float, list)):
            raise _MalformedAnswer("the answer's first choice has no message")
        content = _text_content(_attr(message, "content"))
        tool_calls = []
        raw_calls = _attr(message, "tool_calls")
        for i, call in enumerate(raw_calls if isinstance(raw_calls, list) else ()):
            function = _attr(call, "function")
            if function is None:  # a non-function (custom) tool call: keep what is there
                continue
            name, arguments = _attr(function, "name"), _attr(function, "arguments")
            if not isinstance(arguments, str):
                arguments = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
            tool_calls.append({
                "id": str(_attr(call, "id") or f"call_{i}"),
                "type": "function",
                "function": {"name": str(name or ""), "arguments": arguments},
            })
        usage = _attr(completion, "usage")
        prompt_tokens = _count(_attr(usage, "prompt_tokens"))
        completion_tokens = _count(_attr(usage, "completion_tokens"))
        reasoning_tokens = _count(_attr(_attr(usage, "completion_tokens_details"), "reasoning_tokens"))
        cached_tokens = _count(_attr(_attr(usage, "prompt_tokens_details"), "cached_tokens"))
        reasoning = _attr(message, "reasoning_content") or _attr(message, "reasoning")
        finish_reason = _attr(choice, "finish_reason")
        model = _attr(completion, "model")
        return cls(
            content=content,
            tool_calls=tool_calls,
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            model=model if isinstance(model, str) else "",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            reasoning_tokens=reasoning_tokens,
            cached_tokens=cached_tokens,
            reasoning_content=reasoning if isinstance(reasoning, str) else None,
            latency_s=latency_s,
            attempts=attempts,
        )


def _attr(obj: Any, name: str) -> Any:
    """A field of an SDK object built without validation (missing: None)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text_content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        texts = [_attr(part, "text") for part in content]
        if all(isinstance(t, str) or t is None for t in texts):
            return "".join(t for t in texts if t)
    raise _MalformedAnswer(f"the message content is not text: {_snippet(json.dumps(content, default=str))}")

