"""Which failed requests are retried, how long to wait, and how failures are
described (see the package docstring, "Retries" and "Structured output")."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

from openai import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    PermissionDeniedError,
)
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from cirrus.llm.client.errors import _MalformedAnswer, _TriedTooLong
from cirrus.llm.client.limits import MAX_CROWDED_TRIES

RETRY_STATUSES = frozenset({408, 409, 429})  # and every status >= 500
MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is waited this long
REFUSED_TRIES = 4  # tries in all when the connection is refused (within max_retries + 1)
REFUSED_MAX_WAIT = 1.0  # seconds between them: 0.25, 0.5, 1.0
# statuses an endpoint refuses ``response_format`` with: 400 (OpenAI, vLLM, llama.cpp, LiteLLM, DashScope, Ollama),
# 422 (request validation: TGI), 404/501 (gateways); a 500 only when its text names the field (ik_llama.cpp,
# llama-cpp-python, Ollama's "invalid JSON schema in format")
STRUCTURED_REFUSAL_STATUSES = frozenset({400, 404, 422, 501})


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


_Sent = TypeVar("_Sent")
_Result = TypeVar("_Result")


@dataclass
class Tries:
    """How a request's tries went: ``attempts`` made, ``crowded`` of them
    refused only because the endpoint was crowded (not charged to
    ``max_retries``, up to :data:`MAX_CROWDED_TRIES` more)."""

    attempts: int = 0
    crowded: int = 0


async def send_with_retries(send: Callable[[], Awaitable[_Sent]], finish: Callable[[_Sent], _Result], *,
                            limiter: Any, max_retries: int, retryable: Callable[[BaseException], bool],
                            wait: Callable[[RetryCallState], float], tries: Tries,
                            on_send: Callable[[], None] | None = None) -> _Result:
    """``finish(await send())`` under the retry rules shared by model
    endpoints and agent services: each try waits for a slot of ``limiter``
    (an adaptive limiter learns from its outcome), ``retryable`` errors are
    tried again after ``wait``, ``max_retries + 1`` tries in all (crowded
    tries not counted; a refused connection a few tries only); ``finish``
    runs outside the slot and may raise a retryable error too (a malformed
    answer).  The last error is raised; ``tries`` says how many were made."""

    def spent(state: RetryCallState) -> bool:
        allowed = max_retries + 1
        return (state.attempt_number - tries.crowded >= allowed or state.attempt_number >= allowed + MAX_CROWDED_TRIES
                or _stop_refused(state))

    retrying = AsyncRetrying(retry=retry_if_exception(retryable), stop=spent, wait=wait, reraise=True)
    async for attempt in retrying:
        with attempt:
            tries.attempts += 1
            slot = limiter.slot()
            try:
                async with slot:
                    if on_send is not None:
                        on_send()
                    sent = await send()
            except BaseException:
                tries.crowded += bool(getattr(slot, "crowded", False))
                raise
            return finish(sent)
    raise AssertionError("unreachable")  # pragma: no cover


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

