"""Errors of the client layer: unreadable answers (raised by parsers) and the
internal failures the retry rules tell apart."""

from __future__ import annotations

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

