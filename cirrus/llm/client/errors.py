"""Errors of the client layer: unreadable answers (raised by parsers) and the
internal failures the retry rules tell apart."""

from __future__ import annotations

import re
from collections.abc import Mapping

from openai import APIStatusError


class UnparseableOutput(ValueError):
    """A model's answer could not be read (raised by parsers given to
    :meth:`ChatClient.complete_parsed`)."""



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



# what servers say when a request is longer than the model's context: llama.cpp ("the request exceeds the
# available context size", type exceed_context_size_error), OpenAI and vLLM ("maximum context length is N
# tokens", code context_length_exceeded), TGI ("inputs tokens + max_new_tokens must be <= N"), Anthropic-style
# gateways ("prompt is too long"), DashScope ("Range of input length should be [1, N]"), SGLang ("is longer than
# the model's context length"), LM Studio ("context length", "context overflow")
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(?:length|size|window|overflow)|exceed_context|maximum context|too many tokens"
    r"|prompt is too long|reduce the length|tokens? \+ `?max_new_tokens|range of input length"
    r"|input is too (?:long|large)|exceeds? the (?:model'?s? )?(?:maximum|max)", re.IGNORECASE)
CONTEXT_STATUSES = frozenset({400, 413, 422, 500})


def server_text(error: APIStatusError) -> str:
    """What the server said in an error answer (its ``error.message``)."""
    body = error.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        if isinstance(message, str):
            return message
    return error.message if isinstance(error.message, str) else str(error)


def context_overflow(error: APIStatusError) -> str | None:
    """What the server said when ``error`` refuses a request longer than the
    model's context; None for any other error."""
    if error.status_code not in CONTEXT_STATUSES:
        return None
    said = server_text(error)
    return said if _CONTEXT_OVERFLOW.search(f"{said} {error}") else None


def overflow_message(who: str, input_tokens: int, status: int, said: str) -> str:
    """The error text of a context overflow: who refused, about how much was
    sent (Cirrus's tiktoken count, an estimate of the model's own), and what
    to do."""
    return (f"{who}: the input exceeded the model's context window (about {input_tokens} tokens sent; "
            f"HTTP {status}: {said[:200]}); serve the model with a longer context (llama.cpp: -c) "
            f"or give the task less knowledge and history")
