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
    (a body that is not JSON, no ``choices``, a choice without a message;
    one that is a JSON object is recorded in the usage ledger as the call it
    was, with the tokens it reports: the endpoint answered, and may bill, it)
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

Concurrency
    A :class:`ClientPool` gives each endpoint an :class:`AdaptiveLimiter`:
    the requests in flight to it follow its answers, halving on a 429, 503 or
    529 (once per round of requests) and growing by one per window of
    successes, up to ``cirrus eval --concurrency`` or the role's
    ``concurrency`` when lower.  Each try waits for room, so a request retried
    after a 429 queues again behind the window (docs/concurrency.md).

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

Modules
    :mod:`~cirrus.llm.client.roles` (RoleConfig), :mod:`~cirrus.llm.client.limits`
    (RateLimiter, and AdaptiveLimiter: the requests in flight per endpoint
    follow its overload answers, docs/concurrency.md), :mod:`~cirrus.llm.client.results` (ChatResult),
    :mod:`~cirrus.llm.client.errors`, :mod:`~cirrus.llm.client.retry` (which
    failures are retried and how long to wait), :mod:`~cirrus.llm.client.chat`
    (ChatClient) and :mod:`~cirrus.llm.client.pool` (ClientPool).  Import
    from the package: every name is re-exported here.
"""

from __future__ import annotations

from cirrus.llm.client.chat import ChatClient, _dumps, make_openai_client
from cirrus.llm.client.errors import UnparseableOutput, _MalformedAnswer, _StructuredRefused, _TriedTooLong
from cirrus.llm.client.limits import MAX_CROWDED_TRIES, OVERLOAD_STATUSES, AdaptiveLimiter, AimdWindow, RateLimiter, is_overload
from cirrus.llm.client.pool import ClientPool
from cirrus.llm.client.results import ChatResult
from cirrus.llm.client.retry import (
    MAX_RETRY_AFTER,
    REFUSED_MAX_WAIT,
    REFUSED_TRIES,
    RETRY_STATUSES,
    STRUCTURED_REFUSAL_STATUSES,
    _describe_error,
    _retryable,
    connection_refused,
    retry_after,
    structured_output_refused,
)
from cirrus.llm.client.roles import REASONING_EFFORTS, RoleConfig, roles_from_options
from cirrus.llm.providers import Endpoint, ModelAuthError

__all__ = [
    "MAX_CROWDED_TRIES",
    "MAX_RETRY_AFTER",
    "OVERLOAD_STATUSES",
    "REASONING_EFFORTS",
    "REFUSED_MAX_WAIT",
    "REFUSED_TRIES",
    "RETRY_STATUSES",
    "STRUCTURED_REFUSAL_STATUSES",
    "AdaptiveLimiter",
    "AimdWindow",
    "ChatClient",
    "ChatResult",
    "ClientPool",
    "Endpoint",
    "ModelAuthError",
    "RateLimiter",
    "RoleConfig",
    "UnparseableOutput",
    "connection_refused",
    "is_overload",
    "make_openai_client",
    "retry_after",
    "roles_from_options",
    "structured_output_refused",
]
