"""One async client layer for every model role: the agent under test, the
coverage judge and the fluency checker.

A :class:`RoleConfig` says which model serves a role (an
:class:`~cirrus.llm.providers.Endpoint`: any OpenAI-compatible base URL and
the name of the variable holding its key) and with which parameters.  A
:class:`ChatClient` calls that model; a :class:`ClientPool` hands out clients
that share one ``openai.AsyncOpenAI`` per (base URL, key variable) and one
:class:`RateLimiter` per endpoint.

Requests
    Sent with the openai package's low-level ``AsyncOpenAI.post`` (already
    serialized JSON in, a ``ChatCompletion`` out): the high-level
    ``chat.completions.create`` re-walks every message to "transform" it,
    which costs several milliseconds of CPU per transcript-sized call.  The
    openai package's types and error classes are kept.

Retries
    The openai client's own retry loop is switched off (``max_retries=0``) and
    tenacity retries each request instead, so that every attempt passes
    through the endpoint's rate limiter: 429, 408, 409, 5xx, timeouts and
    connection errors (a body cut short included) and malformed 200 answers
    (a body that is not JSON, no ``choices``, a choice without a message)
    are retried ``RoleConfig.max_retries`` times with exponential backoff and
    jitter; a ``Retry-After`` (or ``retry-after-ms``) header is honoured
    instead of the backoff (never waited less), and a 429's ``Retry-After``
    also pauses the other requests to that endpoint.  When the retries are
    spent, :class:`~cirrus.evaluate.types.InfrastructureError` is raised,
    naming the role, model and endpoint and saying what went wrong.  A
    401/403 is never retried: :class:`ModelAuthError` names the key's
    variable.  Other 4xx answers raise ``InfrastructureError`` at once (a
    refused ``response_format`` aside, see below).
    A refused connection (nothing listens at the address) is tried
    ``REFUSED_TRIES`` times in all, at most ``REFUSED_MAX_WAIT`` s apart
    (about 2 s, not minutes of backoff), then reported as "nothing listens
    at <url> (connection refused)".

Timeouts
    ``RoleConfig.timeout`` bounds each try as a whole (connecting, waiting
    and reading the answer): the SDK's per-read timeout alone never fires
    against a server that sends a byte now and then but never finishes.

Structured output
    :meth:`ChatClient.complete_parsed` may be given a ``response_format`` (the
    judges' strict JSON schemas, :mod:`cirrus.judges.schemas`).  With
    ``RoleConfig.structured_output`` at ``None`` (auto) it is sent, and an
    endpoint that refuses it -- an HTTP 400/404/422/501 whose error names
    ``response_format``, ``json_schema``, structured output, or says "not
    supported" / "unsupported" / "unknown field" / "extra inputs are not
    permitted" without naming another parameter of the request; a 500 only
    when it names the field (llama.cpp forks, llama-cpp-python) -- is asked
    the same question again at once without it.  Such a refusal is never
    retried, the client remembers it for the rest of its life (later calls do
    not try again) and one ``RuntimeWarning`` names the role and model.  Until
    the endpoint has answered one structured request, such requests go one at
    a time, so a client sends at most one refused request.  A 4xx about
    something else (context length) keeps the behaviour above.  ``False``
    never sends ``response_format``; ``True`` always does and makes a refusal
    an ``InfrastructureError`` saying how to turn it off.

Caching
    Calls made with ``cache=True`` (the judges, never the agent) are looked up
    in and stored to a :class:`~cirrus.llm.cache.ResponseCache`, keyed on the
    base URL and the canonical JSON of the request body (model, messages,
    parameters) -- never the API key, and never ``response_format``: the key
    is the same whether structured output was sent, refused or switched off,
    so answers cached before it existed are still found.  That is sound
    because the parsers read every answer shape.

Token counts
    :attr:`ChatResult.completion_tokens` is ``usage.completion_tokens``, which
    in OpenAI's API (and the compatible servers we know: vLLM, DashScope,
    DeepSeek) already includes the reasoning tokens
    (``completion_tokens_details.reasoning_tokens`` is a breakdown of it, not
    an addition).  Only when an answer carries no usage at all is the output
    counted with the offline tiktoken encoding (text, reasoning text and tool
    calls), see :meth:`ChatResult.output_tokens`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import re
import sqlite3
import time
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from openai import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    AuthenticationError,
    PermissionDeniedError,
)
from openai.types.chat import ChatCompletion
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from cirrus.evaluate.types import InfrastructureError
from cirrus.ingest.cassettes import canonical_json
from cirrus.llm.cache import ResponseCache
from cirrus.llm.providers import Endpoint, ModelAuthError, resolve_endpoint, shown_url

T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 409, 429})  # and every status >= 500
MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is waited this long
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
REFUSED_TRIES = 4  # tries in all when the connection is refused (within max_retries + 1)
REFUSED_MAX_WAIT = 1.0  # seconds between them: 0.25, 0.5, 1.0
# statuses an endpoint refuses ``response_format`` with: 400 (OpenAI, vLLM, llama.cpp, LiteLLM, DashScope, Ollama),
# 422 (request validation: TGI), 404/501 (gateways); a 500 only when its text names the field (ik_llama.cpp,
# llama-cpp-python, Ollama's "invalid JSON schema in format")
STRUCTURED_REFUSAL_STATUSES = frozenset({400, 404, 422, 501})


class UnparseableOutput(ValueError):
    """A model's answer could not be read (raised by parsers given to
    :meth:`ChatClient.complete_parsed`)."""


# ---------------------------------------------------------------------------
# configuration


@dataclass(frozen=True, slots=True)
class RoleConfig:
    """Which model serves a role, and how it is called.

    ``None`` parameters are not sent (the server's default applies).
    ``extra_body`` is merged into the request body as is (e.g.
    ``{"enable_thinking": false}`` for Qwen3 on DashScope, ``{"top_p": 0.9}``).
    ``max_tokens_param`` is the body field ``max_tokens`` is sent as: OpenAI's
    reasoning models want ``max_completion_tokens``.  ``rpm`` and
    ``concurrency`` bound the requests to the endpoint (requests started per
    minute, requests in flight); ``None`` is unbounded.  ``timeout`` is per
    request (each try as a whole), in seconds; ``max_retries`` counts retries
    after the first try.  ``name`` is the role ("agent", "judge", "fluency")
    for messages; it changes no answer.

    ``structured_output`` is whether :meth:`ChatClient.complete_parsed` sends
    the ``response_format`` it is given: ``None`` (auto) tries it and falls
    back for good when the endpoint refuses it, ``False`` never sends it,
    ``True`` always does (a refusal is an error).  It is not a body parameter
    and is left out of :meth:`fingerprint`: the parsers read every answer
    shape, and a run started before it existed can be resumed.
    """

    endpoint: Endpoint
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 5
    rpm: float | None = None
    concurrency: int | None = None
    max_tokens_param: str = "max_tokens"
    retry_initial_wait: float = 1.0  # backoff: retry_initial_wait * 2**n + jitter, capped at retry_max_wait
    retry_max_wait: float = 30.0
    name: str | None = None
    structured_output: bool | None = None

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.timeout <= 0:
            raise ValueError("timeout must be > 0")
        if self.rpm is not None and self.rpm <= 0:
            raise ValueError("rpm must be > 0 (or None for no limit)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1 (or None for no limit)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_param must be 'max_tokens' or 'max_completion_tokens'")
        if self.structured_output is not None and not isinstance(self.structured_output, bool):
            raise ValueError("structured_output must be true, false or absent (auto)")

    @property
    def model(self) -> str:
        return self.endpoint.model

    @classmethod
    def from_options(
        cls,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: Mapping[str, Any] | str | None = None,
        **settings: Any,
    ) -> RoleConfig:
        """A role from command-line style options.  ``extra_body`` may be a
        JSON object as text (``--extra-body '{"top_p": 0.8}'``); ``settings``
        are the other fields (timeout, max_retries, rpm, concurrency,
        structured_output, ...).
        Without ``base_url`` the model is looked up in the provider registry
        (:func:`~cirrus.llm.providers.resolve_endpoint`)."""
        if isinstance(extra_body, str):
            try:
                extra_body = json.loads(extra_body) if extra_body.strip() else {}
            except ValueError as exc:
                raise ValueError(f"extra body parameters must be a JSON object: {exc}") from None
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ValueError("extra body parameters must be a JSON object")
        if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
            raise ValueError(f"reasoning effort must be one of {', '.join(REASONING_EFFORTS)}")
        return cls(
            endpoint=resolve_endpoint(model, base_url, api_key_env),
            temperature=temperature,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            extra_body=dict(extra_body or {}),
            **settings,
        )

    def with_params(self, **changes: Any) -> RoleConfig:
        return replace(self, **changes)

    def body_params(self) -> dict[str, Any]:
        """The request-body fields this role adds to every call (model included)."""
        params: dict[str, Any] = {"model": self.endpoint.model}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params[self.max_tokens_param] = self.max_tokens
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        params.update(self.extra_body)
        return params

    def fingerprint(self) -> dict[str, Any]:
        """What makes this role's answers what they are: model and parameters.
        Not the base URL or the key variable (a resume may change those), and
        never the key."""
        return {"model": self.endpoint.model, "params": self.body_params()}

    def describe(self) -> str:
        role = f"{self.name} " if self.name else ""
        return f"{role}model {self.endpoint.model!r} at {shown_url(self.endpoint.base_url)}"


def roles_from_options(
    model: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    *,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_api_key_env: str | None = None,
    fluency_model: str | None = None,
    fluency_base_url: str | None = None,
    fluency_api_key_env: str | None = None,
    agent_params: Mapping[str, Any] | None = None,
    judge_params: Mapping[str, Any] | None = None,
    fluency_params: Mapping[str, Any] | None = None,
) -> tuple[RoleConfig, RoleConfig, RoleConfig]:
    """The (agent, judge, fluency) roles of ``cirrus eval`` (contract 3).

    The base URL and key variable given for the agent are the defaults of the
    judge and fluency checker; the judge model defaults to the agent model and
    the fluency model to the judge model.  Judge and fluency calls default to
    temperature 0.  ``*_params`` are :meth:`RoleConfig.from_options` keywords.
    """
    judge_model = judge_model or model
    fluency_model = fluency_model or judge_model
    agent = RoleConfig.from_options(model, base_url, api_key_env, **{"name": "agent", **dict(agent_params or {})})
    judge = RoleConfig.from_options(
        judge_model, judge_base_url or base_url, judge_api_key_env or api_key_env,
        **{"name": "judge", "temperature": 0.0, **dict(judge_params or {})},
    )
    fluency = RoleConfig.from_options(
        fluency_model, fluency_base_url or judge_base_url or base_url,
        fluency_api_key_env or judge_api_key_env or api_key_env,
        **{"name": "fluency", "temperature": 0.0, **dict(fluency_params or {})},
    )
    return agent, judge, fluency


# ---------------------------------------------------------------------------
# rate limiting


class RateLimiter:
    """Bounds the requests to one endpoint: at most ``concurrency`` in flight,
    starts spaced at least ``60 / rpm`` seconds apart, and a common pause
    after a 429 with ``Retry-After``.  Use as ``async with limiter:``.  Bound
    to the event loop it is first used in."""

    def __init__(self, rpm: float | None = None, concurrency: int | None = None) -> None:
        self.rpm = rpm
        self.concurrency = concurrency
        self._interval = 60.0 / rpm if rpm else 0.0
        self._next_start = 0.0
        self._paused_until = 0.0
        self._semaphore = asyncio.Semaphore(concurrency) if concurrency else None

    def pause(self, seconds: float) -> None:
        """Start no request for ``seconds`` from now (a server asked us to wait)."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    async def _wait_turn(self) -> None:
        while True:
            now = time.monotonic()
            if self._paused_until > now:
                await asyncio.sleep(self._paused_until - now)
                continue
            if not self._interval:
                return
            start = max(now, self._next_start)
            self._next_start = start + self._interval
            if start > now:
                await asyncio.sleep(start - now)
            return

    async def __aenter__(self) -> RateLimiter:
        if self._semaphore is not None:
            await self._semaphore.acquire()
        try:
            await self._wait_turn()
        except BaseException:
            if self._semaphore is not None:
                self._semaphore.release()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._semaphore is not None:
            self._semaphore.release()


# ---------------------------------------------------------------------------
# results


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
    reasoning_content: str | None = None  # provider extension (DeepSeek, Qwen, vLLM reasoning parsers)
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False

    def assistant_message(self) -> dict[str, Any]:
        """The answer as an OpenAI assistant message for the next request's
        history (reasoning text left out, as providers require)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        elif message["content"] is None:
            message["content"] = ""
        return message

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
        not a usable chat completion.  The SDK builds its types without
        validating them, so every field is read defensively."""
        if not isinstance(completion, ChatCompletion):
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


def _snippet(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


class _MalformedAnswer(RuntimeError):
    """A 200 answer that is not a chat completion (retried like a 5xx)."""


class _TriedTooLong(RuntimeError):
    """A try that did not finish within ``RoleConfig.timeout`` (retried like
    a timeout)."""


class _StructuredRefused(RuntimeError):
    """The endpoint refused the request's ``response_format`` (never retried)."""

    def __init__(self, error: APIStatusError) -> None:
        super().__init__(str(error))
        self.error = error


# ---------------------------------------------------------------------------
# the client


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (AuthenticationError, PermissionDeniedError)):
        return False
    if isinstance(exc, APIStatusError):
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    # APITimeoutError is an APIConnectionError; a body cut short is one too
    return isinstance(exc, (APIConnectionError, _MalformedAnswer, _TriedTooLong))


# what refusals of response_format say (see structured_output_refused for where each was seen)
_STRUCTURED_TERMS = re.compile(
    r"response[_ ]?format|json[_ -]?schema|structured[_ -]?outputs?|guided[_ ]?(?:json|decoding)", re.IGNORECASE)
_UNSUPPORTED = re.compile(
    r"not supported|unsupported|does not support|doesn't support|not implemented|unknown field|extra fields?"
    r"|extra inputs are not permitted|unrecognized request argument|unknown (?:parameter|argument|variant)",
    re.IGNORECASE)
_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|reduce the length"
    r"|exceeds? the (?:model'?s? )?(?:maximum|max)", re.IGNORECASE)


def _error_text(exc: APIStatusError) -> str:
    message = exc.message if isinstance(exc.message, str) else ""
    body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body, default=str) if exc.body is not None else ""
    return f"{message} {body}"


def structured_output_refused(exc: BaseException, other_params: Collection[str] = ()) -> bool:
    """Whether ``exc``, the error answer to a request carrying
    ``response_format``, refuses that field (rather than anything else about
    the request).  ``other_params`` are the request's other body fields: a
    bare "not supported" naming one of them is about that one.

    Phrasings seen in the wild: OpenAI "Invalid parameter: 'response_format'
    of type 'json_schema' is not supported with this model" (400); vLLM and
    other pydantic servers "[{'type': 'extra_forbidden', 'loc': ('body',
    'response_format'), 'msg': 'Extra inputs are not permitted'}]" or
    "Input should be 'text' or 'json_object'" (400); llama.cpp server
    'response_format type must be one of "text" or "json_object", but got:
    json_schema' (400; 500 in ik_llama.cpp) and "JSON schema conversion
    failed" (400); Ollama 'invalid format: expected "json" or a JSON schema'
    (400) and "invalid JSON schema in format" (500); LiteLLM
    "UnsupportedParamsError: ... does not support parameters:
    ['response_format']" (400); Volcano Engine Ark "The parameter
    `response_format.type` specified in the request are not valid: invalid
    value: `json_schema`, supported values are: `json_object` and `text`"
    (400); DashScope "<400> InternalError.Algo.InvalidParameter: ... to use
    'response_format' of type ..." (400); TGI "Failed to deserialize the JSON
    body into the target type: response_format: missing field `value`" (422;
    serde says "unknown variant" for a type it lacks).  A server echoing the request in an error names the
    field too: then the question is asked again without it and fails as
    before, at the cost of one request.
    """
    if not isinstance(exc, APIStatusError) or isinstance(exc, (AuthenticationError, PermissionDeniedError)):
        return False
    status = exc.status_code
    if status not in STRUCTURED_REFUSAL_STATUSES and status != 500:
        return False
    text = _error_text(exc)
    if _CONTEXT_LENGTH.search(text):
        return False
    if _STRUCTURED_TERMS.search(text):
        return True
    if status == 500 or not _UNSUPPORTED.search(text):
        return False
    return not any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in other_params)


def connection_refused(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a refused
    connection: nothing listens at the address."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ConnectionRefusedError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _stop_refused(state: RetryCallState) -> bool:
    exc = state.outcome.exception() if state.outcome is not None else None
    return state.attempt_number >= REFUSED_TRIES and connection_refused(exc)


def retry_after(exc: BaseException | None) -> float | None:
    """The delay an error answer asks for (``retry-after-ms``, or
    ``Retry-After`` in seconds or as an HTTP date), in seconds."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            if divisor == 1.0:
                parsed = email.utils.parsedate_tz(value)
                if parsed is not None:
                    return max(0.0, email.utils.mktime_tz(parsed) - time.time())
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _dumps(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _describe_error(exc: BaseException, timeout: float, redact: Callable[[str], str] = lambda text: text) -> str:
    """A short account of a failed request; ``redact`` runs before any text
    is cut, so a secret crossing the cut cannot survive in part."""
    if isinstance(exc, APIStatusError):
        message = exc.message if isinstance(exc.message, str) else str(exc)
        return f"HTTP {exc.status_code}: {redact(message)[:300]}"
    if isinstance(exc, (APITimeoutError, _TriedTooLong)):
        return f"timed out: no complete answer within the {timeout:g} s timeout"
    if isinstance(exc, APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = str(cause) if cause is not None and str(cause) else str(exc)
        return f"connection failed: {redact(detail)[:300]}"
    if isinstance(exc, _MalformedAnswer):
        return f"malformed answer: {redact(str(exc))[:300]}"
    return f"{type(exc).__name__}: {redact(str(exc))[:300]}"


class ChatClient:
    """Calls one role's model.  Make it with :meth:`ClientPool.client` (or
    directly, then it owns its ``AsyncOpenAI`` and must be closed).

    The API key is read from the role's variable here, once: a missing key
    raises :class:`~cirrus.llm.providers.EndpointError` naming the variable.

    ``structured`` is what this client knows of the endpoint and
    ``response_format``: ``None`` not yet, ``True`` it answered a request
    carrying one, ``False`` it refused one (then none is sent again).
    """

    def __init__(
        self,
        role: RoleConfig,
        *,
        cache: ResponseCache | None = None,
        limiter: RateLimiter | None = None,
        openai_client: AsyncOpenAI | None = None,
    ) -> None:
        self.role = role
        self.cache = cache
        self.limiter = limiter or RateLimiter(role.rpm, role.concurrency)
        self._owns_client = openai_client is None
        self._openai = openai_client or make_openai_client(role.endpoint, role.timeout)
        self._params = role.body_params()
        self._wait_backoff = wait_exponential_jitter(
            multiplier=role.retry_initial_wait, max=role.retry_max_wait, jitter=role.retry_initial_wait
        )
        self.requests = 0  # HTTP requests sent (retries included)
        self.cache_hits = 0
        self.structured: bool | None = None
        self._probe: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    @property
    def model(self) -> str:
        return self.role.endpoint.model

    def request_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {**self._params, "messages": messages}
        if tools:
            body["tools"] = tools
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if params:
            body.update(params)
        return body

    def cache_key(self, body: Mapping[str, Any]) -> str:
        return ResponseCache.key(self.role.endpoint.base_url, canonical_json(body))

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        cache: bool = False,
        **params: Any,
    ) -> ChatResult:
        """One chat completion.  ``params`` override the role's body fields
        for this call.  With ``cache=True`` (and a cache), an identical
        earlier request is answered from the cache."""
        body = self.request_body(messages, tools=tools, tool_choice=tool_choice, **params)
        if cache and self.cache is not None:
            text = canonical_json(body)
            key = ResponseCache.key(self.role.endpoint.base_url, text)
            hit = self.cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return ChatResult.from_cache(hit)
            result = await self._send(text.encode("utf-8"))
            self._cache_put(key, result)
            return result
        return await self._send(_dumps(body))

    async def complete_parsed(
        self,
        messages: Sequence[Mapping[str, Any]],
        parse: Callable[[str], T],
        *,
        attempts: int = 3,
        repair: str | None = None,
        cache: bool = True,
        what: str = "answer",
        response_format: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> tuple[T, ChatResult]:
        """A completion whose text ``parse`` turns into a value, raising
        :class:`UnparseableOutput` when it cannot.  An unreadable answer is
        asked again (``attempts`` in all; with ``repair``, the bad answer and
        ``repair`` as a user message are added so the model can correct
        itself); then :class:`InfrastructureError` -- never a silent verdict.
        Only readable answers are cached, under the first request's key.

        ``response_format`` (an OpenAI structured-output format) is sent with
        every attempt as ``RoleConfig.structured_output`` allows, and dropped
        for good when the endpoint refuses it (see the module docstring).  It
        is not part of the cache key: ``parse`` must read answers given with
        and without it."""
        body = self.request_body(messages, **params)
        first = None
        key = None
        if cache and self.cache is not None:
            first = canonical_json(body)
            key = ResponseCache.key(self.role.endpoint.base_url, first)
            hit = self.cache.get(key)
            if hit is not None:
                cached = ChatResult.from_cache(hit)
                try:
                    value = parse(cached.content)
                except UnparseableOutput:
                    pass  # e.g. the parser changed: ask again and overwrite
                else:
                    self.cache_hits += 1
                    return value, cached
        last: ChatResult | None = None
        problem = ""
        for attempt in range(max(1, attempts)):
            if attempt and repair and last is not None:
                retry_messages = [*messages, {"role": "assistant", "content": last.content},
                                  {"role": "user", "content": repair}]
                last = await self._ask({**body, "messages": retry_messages}, response_format)
            else:
                last = await self._ask(body, response_format, first)
            try:
                value = parse(last.content)
            except UnparseableOutput as exc:
                problem = str(exc)
                continue
            if key is not None:
                self._cache_put(key, last)
            return value, last
        shown = self._redact(last.content if last is not None else "")[:300]
        raise InfrastructureError(self._redact(
            f"unreadable {what} from {self.role.describe()} after {max(1, attempts)} attempts "
            f"({problem}); last answer: {shown!r}"
        ))

    async def _ask(self, body: Mapping[str, Any], response_format: Mapping[str, Any] | None,
                   text: str | None = None) -> ChatResult:
        """One request of :meth:`complete_parsed`: ``body`` (already
        serialized as ``text``, when given), with ``response_format`` added as
        the role and what this client knows of the endpoint allow."""
        mode = self.role.structured_output
        if response_format is not None and mode is not False and self.structured is not False:
            if mode is None and self.structured is None:
                # not known yet: one structured request at a time, so that an
                # endpoint refusing it sees one refused request, not a burst
                async with self._probe_lock():
                    if self.structured is None:
                        return await self._ask_structured(body, response_format, text)
            if self.structured is not False:
                return await self._ask_structured(body, response_format, text)
        return await self._send(text.encode("utf-8") if text is not None else _dumps(body))

    async def _ask_structured(self, body: Mapping[str, Any], response_format: Mapping[str, Any],
                              text: str | None) -> ChatResult:
        other = [name for name in body if name not in ("model", "messages")]
        try:
            result = await self._send(_dumps({**body, "response_format": response_format}),
                                      refusal=lambda exc: structured_output_refused(exc, other))
        except _StructuredRefused as refused:
            what = _describe_error(refused.error, self.role.timeout, self._redact)
            section = self._settings_section()
            if self.role.structured_output:
                raise InfrastructureError(self._redact(
                    f"{self.role.describe()} refused structured output (response_format): {what}; "
                    f"structured_output is true for this role: set `structured_output = false` under "
                    f"[{section}] in cirrus.toml to ask without it (or leave the key out to fall back "
                    f"automatically)")) from refused.error
            self.structured = False
            warnings.warn(self._redact(
                f"{self.role.describe()} does not take structured output (response_format): {what}; "
                f"asked again without it, and this client will not send it again (set "
                f"`structured_output = false` under [{section}] in cirrus.toml to skip the try)"),
                RuntimeWarning, stacklevel=2)
            return await self._send(text.encode("utf-8") if text is not None else _dumps(body))
        self.structured = True
        return result

    def _probe_lock(self) -> asyncio.Lock:
        """The lock of the first structured requests, one per event loop."""
        loop = asyncio.get_running_loop()
        if self._probe is None or self._probe[0] is not loop:
            self._probe = (loop, asyncio.Lock())
        return self._probe[1]

    def _settings_section(self) -> str:
        """The cirrus.toml table of this role (a panel member's is the judge's)."""
        name = (self.role.name or "judge").split("[", 1)[0]
        return f"roles.{name if name in ('agent', 'judge', 'fluency') else 'judge'}"

    async def _send(self, payload: bytes, *, refusal: Callable[[BaseException], bool] | None = None) -> ChatResult:
        """Send ``payload`` with retries.  ``refusal`` (requests carrying
        ``response_format``) picks the errors that refuse that field: they
        are not retried and raise :class:`_StructuredRefused`."""
        started = time.perf_counter()
        attempts = 0
        retryable = _retryable if refusal is None else (lambda exc: _retryable(exc) and not refusal(exc))
        retrying = AsyncRetrying(
            retry=retry_if_exception(retryable),
            stop=stop_after_attempt(self.role.max_retries + 1) | _stop_refused,
            wait=self._wait,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    async with self.limiter:
                        self.requests += 1
                        completion = await self._post(payload)
                    return self._scrubbed(ChatResult.from_completion(completion, time.perf_counter() - started,
                                                                      attempts))
        except (AuthenticationError, PermissionDeniedError) as exc:
            raise self._auth_error(exc) from None
        except APIStatusError as exc:
            if refusal is not None and refusal(exc):
                raise _StructuredRefused(exc) from exc
            raise self._infrastructure_error(exc, attempts) from exc
        except (APIConnectionError, _MalformedAnswer, _TriedTooLong) as exc:
            raise self._infrastructure_error(exc, attempts) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _infrastructure_error(self, exc: BaseException, attempts: int) -> InfrastructureError:
        retried = f" after {attempts} attempts" if attempts > 1 else ""
        if connection_refused(exc):
            what = f"nothing listens at {shown_url(self.role.endpoint.base_url)} (connection refused)"
        else:
            what = _describe_error(exc, self.role.timeout, self._redact)
        return InfrastructureError(self._redact(f"{self.role.describe()} failed{retried}: {what}"))

    def _scrubbed(self, result: ChatResult) -> ChatResult:
        """``result`` without the API key in its text, reasoning or tool
        calls: an endpoint (or a gateway, or a model that read it somewhere)
        may echo it in a normal answer, and answers are written to
        transcripts and the cache."""
        key = getattr(self._openai, "api_key", None)
        if not (isinstance(key, str) and len(key) >= 8):
            return result
        if key not in json.dumps([result.content, result.reasoning_content, result.tool_calls], ensure_ascii=False):
            return result
        calls = json.loads(json.dumps(result.tool_calls, ensure_ascii=False).replace(
            json.dumps(key)[1:-1], "***"))
        return replace(result, content=self._redact(result.content or ""),
                       reasoning_content=self._redact(result.reasoning_content) if result.reasoning_content else
                       result.reasoning_content, tool_calls=calls)

    def _redact(self, text: str) -> str:
        """``text`` without the API key: some endpoints and gateways echo the
        request's headers in their errors, and error texts are kept in the
        run's rows, transcripts and reports."""
        key = getattr(self._openai, "api_key", None)
        return text.replace(key, "***") if isinstance(key, str) and len(key) >= 8 else text

    async def _post(self, payload: bytes) -> Any:
        """One try: the SDK's answer (a ``ChatCompletion`` when the body was a
        JSON object), within ``RoleConfig.timeout`` as a whole."""
        try:
            async with asyncio.timeout(self.role.timeout):
                return await self._openai.post("/chat/completions", cast_to=ChatCompletion, content=payload)
        except TimeoutError:
            raise _TriedTooLong() from None
        except json.JSONDecodeError as exc:  # a 200 whose JSON body is cut or garbled
            raise _MalformedAnswer(f"the body is not JSON ({exc.msg}): {_snippet(exc.doc)}") from None
        except UnicodeDecodeError:
            raise _MalformedAnswer("the body is not JSON (not UTF-8 text)") from None

    def _cache_put(self, key: str, result: ChatResult) -> None:
        """Store an answer; a cache that cannot be written (a full disk) costs
        a question asked again later, never the answer in hand."""
        try:
            self.cache.put(key, result.to_cache())  # type: ignore[union-attr]
        except (sqlite3.Error, OSError) as exc:
            warnings.warn(f"could not write the response cache: {exc}", RuntimeWarning, stacklevel=2)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if connection_refused(exc):  # nothing listens: a few quick tries, then an error
            return min(0.25 * 2 ** (state.attempt_number - 1), REFUSED_MAX_WAIT)
        asked = retry_after(exc)
        if asked is not None:
            asked = min(asked, MAX_RETRY_AFTER)
            if isinstance(exc, APIStatusError) and exc.status_code == 429:
                self.limiter.pause(asked)
            return asked + random.uniform(0, min(0.1 * asked, 1.0))
        return self._wait_backoff(state)

    def _auth_error(self, exc: APIStatusError) -> ModelAuthError:
        option = {"judge": "--judge-api-key-env", "fluency": "--fluency-api-key-env"}.get(
            self.role.name or "", "--api-key-env")
        return self.role.endpoint.key_refused(exc.status_code, self.role.name or "", option)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._openai.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def make_openai_client(endpoint: Endpoint, timeout: float) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` for ``endpoint`` with the SDK's own retries off
    (:class:`ChatClient` retries with tenacity)."""
    return AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), timeout=timeout, max_retries=0)


class ClientPool:
    """Hands out :class:`ChatClient` objects for roles, sharing one
    ``AsyncOpenAI`` (connection pool) per base URL and key variable and one
    :class:`RateLimiter` per endpoint (model, base URL, key variable; the
    first role that asks for an endpoint sets its limits).  Create it inside
    the event loop that uses it and close it with :meth:`aclose` (or
    ``async with``)."""

    def __init__(self, cache: ResponseCache | None = None) -> None:
        self.cache = cache
        self._openai: dict[tuple[str, str | None, float], AsyncOpenAI] = {}
        self._limiters: dict[Endpoint, RateLimiter] = {}

    def client(self, role: RoleConfig) -> ChatClient:
        endpoint = role.endpoint
        key = (endpoint.base_url, endpoint.api_key_env, role.timeout)
        openai_client = self._openai.get(key)
        if openai_client is None:
            openai_client = self._openai[key] = make_openai_client(endpoint, role.timeout)
        limiter = self._limiters.get(endpoint)
        if limiter is None:
            limiter = self._limiters[endpoint] = RateLimiter(role.rpm, role.concurrency)
        return ChatClient(role, cache=self.cache, limiter=limiter, openai_client=openai_client)

    async def aclose(self) -> None:
        clients, self._openai = list(self._openai.values()), {}
        for openai_client in clients:
            await openai_client.close()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
