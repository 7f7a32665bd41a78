"""Check every model endpoint of a run before its first attempt (issue #6).

A mistyped model name, a refused key or an endpoint where nothing listens
would otherwise make every attempt of the run an error row, one retried
request at a time.  :func:`check_endpoints` sends each distinct endpoint in
use (model, base URL and key variable; the offline baselines and the
``local`` judge have none) one minimal request -- a system line and a user
line, limited to one output token, with the role's own parameters, never cached --
all at once, with short retries (``PROBE_RETRIES`` retries, at most
``PROBE_MAX_WAIT`` s apart, a ``Retry-After`` shortened to that too) and a
``PROBE_TIMEOUT`` bound per try.

What the answer means:

* **Ready**: any 200 answer, even one that is not a usable chat completion
  (empty, not JSON, no choices): the model exists and the key works; what
  the model answers is the attempts' business.
* **The run cannot start** (:class:`PreflightError`, nothing is run): a
  refused key (401/403, naming the key's variable); 404 and every other 4xx
  but 408/409/429 (no such model or path, a parameter the server rejects),
  with the server's own reason (the ``error.message`` of its JSON body); a
  refused connection ("nothing listens at <url>") and every other failure to
  connect or to get a whole answer (unknown host, TLS error, a connection
  cut every time).  A 400 that names ``max_tokens`` (a server that wants
  more than one output token) is asked once more without the limit.
* **A warning, and the run goes on**: 429, 408, 409 and 5xx after the short
  retries, and no answer within ``PROBE_TIMEOUT``: the endpoint is there but
  busy, unwell or slow now; the attempts retry with the full backoff and
  timeout, and a run whose every attempt fails still exits non-zero.

URLs are shown with :func:`~cirrus.llm.providers.shown_url` (credentials
masked) and error texts pass the client's key redaction.

The probe of an endpoint that serves the coverage judge or the fluency
checker also carries that role's ``response_format`` when the role leaves
structured output to the endpoint (``structured_output`` unset): its answer
tells those clients whether to send it, so the run's first judge calls do not
wait in line behind one structured request.  A refusal of the format
(:func:`~cirrus.llm.client.retry.structured_output_refused`: the same warning
as in a run), or another 400 or 422, is asked again without it, so the check
passes and fails as it would without the format.

Every answered probe is billed: its usage goes to the usage ledger current
when the check runs, under the first role of its endpoint (the scheduler
writes it to the run's ``overhead.jsonl``: :mod:`cirrus.evaluate.overhead`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from openai import APIConnectionError, APIStatusError, APITimeoutError

from cirrus.evaluate.types import InfrastructureError
from cirrus.llm.client import (
    RETRY_STATUSES,
    ChatClient,
    RateLimiter,
    _describe_error,
    _TriedTooLong,
    connection_refused,
    structured_output_refused,
)
from cirrus.llm.providers import ModelAuthError, shown_url

PROBE_RETRIES = 2  # retries after the first try
PROBE_TIMEOUT = 30.0  # seconds per try, at most (less when the role's timeout is less)
PROBE_MAX_WAIT = 1.0  # seconds between tries, at most
PROBE_MESSAGES = ({"role": "system", "content": "This is a connection check."},
                  {"role": "user", "content": "Reply with OK."})


class PreflightError(RuntimeError):
    """An endpoint of the run cannot serve it; the message names each such
    endpoint (roles, model, URL) and the reason."""


class _ProbeClient(ChatClient):
    """A client whose waits between tries stay short, ``Retry-After``
    included: the check must take seconds, not the minutes a run may wait."""

    def _wait(self, state: Any) -> float:
        return min(super()._wait(state), PROBE_MAX_WAIT)


def _endpoints(clients: Mapping[str, ChatClient]) -> list[tuple[list[str], list[ChatClient]]]:
    """The distinct endpoints, each with the roles it serves and their
    clients (the first role's client's parameters are what the probe sends)."""
    grouped: dict[tuple[str, str, str | None], tuple[list[str], list[ChatClient]]] = {}
    for role, client in clients.items():
        endpoint = client.role.endpoint
        key = (endpoint.base_url, endpoint.model, endpoint.api_key_env)
        roles, served = grouped.setdefault(key, ([], []))
        roles.append(role)
        served.append(client)
    return list(grouped.values())


def _structured_question(roles: list[str], clients: list[ChatClient]) -> tuple[dict[str, Any], list[ChatClient]]:
    """The ``response_format`` the probe carries, and the clients that learn
    from its answer: those of a judge or fluency role whose
    ``structured_output`` is left to the endpoint and not yet known (their
    first calls would otherwise wait, one structured request at a time, for
    the first to be answered).  The judge's format when a judge is among
    them, else the fluency checker's; nothing to ask otherwise."""
    from cirrus.judges import schemas

    asking = [(role.split("[")[0], client) for role, client in zip(roles, clients)
              if role.split("[")[0] in ("judge", "fluency") and client.role.structured_output is None
              and client.structured is None]
    if not asking:
        return {}, []
    judged = any(kind == "judge" for kind, _ in asking)
    fmt = schemas.COVERAGE_RESPONSE_FORMAT if judged else schemas.FLUENCY_RESPONSE_FORMAT
    return {"response_format": fmt}, [client for _, client in asking]


def _server_reason(exc: APIStatusError, redact: Callable[[str], str]) -> str:
    """``HTTP <status>: <the server's own message>``; the SDK's text when
    the body holds none."""
    body = exc.body
    message: Any = None
    if isinstance(body, Mapping):
        message = body.get("message")
        error = body.get("error")
        if not message and isinstance(error, Mapping):
            message = error.get("message")
        elif not message and isinstance(error, str):
            message = error
        message = message or body.get("detail")
    elif isinstance(body, str):
        message = body
    if not isinstance(message, str) or not message.strip():
        message = exc.message if isinstance(exc.message, str) else str(exc)
    return f"HTTP {exc.status_code}: {redact(' '.join(message.split()))[:300]}"


async def _probe(roles: list[str], clients: list[ChatClient]) -> tuple[str, str] | None:
    """``None`` when the endpoint is ready, else ``("error" | "warning", text)``.
    A probe that carries a ``response_format`` (:func:`_structured_question`)
    and gets a refusal of it, or another 400 or 422, is asked again without
    it: the check is about the endpoint, and a refusal of the format only
    teaches its clients not to send it."""
    client = clients[0]
    role = client.role
    probe_role = role.with_params(max_retries=PROBE_RETRIES, timeout=min(role.timeout, PROBE_TIMEOUT),
                                  retry_initial_wait=0.25, retry_max_wait=PROBE_MAX_WAIT, rpm=None, concurrency=None)
    named = roles[0] if len(roles) == 1 else f"{', '.join(roles[:-1])} and {roles[-1]}"
    who = f"{named} model {role.endpoint.model!r} at {shown_url(role.endpoint.base_url)}"
    async with _ProbeClient(probe_role, limiter=RateLimiter()) as probe:
        limit = {role.max_tokens_param: 1}
        structured, learners = _structured_question(roles, clients)
        for _ in range(3):
            try:
                await probe.complete(list(PROBE_MESSAGES), cache=False, **limit, **structured)
                for learner in learners if structured else ():
                    learner.structured = True
                return None
            except ModelAuthError as exc:
                return "error", str(exc)
            except InfrastructureError as exc:
                cause = exc.__cause__
                if isinstance(cause, APIStatusError):
                    reason = _server_reason(cause, probe._redact)
                    # the request's other fields, as the client names them when it asks (chat.py)
                    other = [name for name in client.request_body([]) if name not in ("model", "messages")]
                    if structured and structured_output_refused(cause, [*other, *limit]):
                        what = _describe_error(cause, probe_role.timeout, probe._redact)
                        for learner in learners:
                            learner.refuses_structured(what)
                        structured = {}  # ask again without it
                        continue
                    if cause.status_code in RETRY_STATUSES or cause.status_code >= 500:
                        return "warning", f"{who} answered {reason} (after {PROBE_RETRIES + 1} tries)"
                    if limit and cause.status_code == 400 and "max_" in reason and "token" in reason:
                        limit = {}  # it wants more room than one token: ask once more without the limit
                        continue
                    if structured and cause.status_code in (400, 422):  # perhaps the format, in other words
                        structured = {}  # the check asks again without it
                        continue
                    return "error", f"{who}: {reason}"
                if isinstance(cause, (APITimeoutError, _TriedTooLong)):
                    return "warning", f"{who} gave no answer within {probe_role.timeout:g} s"
                if connection_refused(cause):
                    where = shown_url(role.endpoint.base_url)
                    return "error", f"{who}: nothing listens at {where} (connection refused)"
                if isinstance(cause, APIConnectionError):
                    return "error", str(exc)  # names the roles' client, model and URL
                return None  # a 200 that is not a chat completion: the model is there and the key works
    return None  # pragma: no cover


async def check_endpoints(clients: Mapping[str, ChatClient],
                          warn: Callable[[str], None] | None = None) -> list[str]:
    """Probe every distinct endpoint of ``clients`` (role name -> client) at
    once.  Raises :class:`PreflightError` naming every endpoint that cannot
    serve the run; returns the warnings (also passed to ``warn``)."""
    endpoints = _endpoints(clients)
    outcomes = await asyncio.gather(*(_probe(roles, served) for roles, served in endpoints))
    errors = [outcome[1] for outcome in outcomes if outcome is not None and outcome[0] == "error"]
    warnings = [outcome[1] for outcome in outcomes if outcome is not None and outcome[0] == "warning"]
    if errors:
        raise PreflightError("\n".join(errors))
    for text in warnings:
        if warn is not None:
            warn(f"{text}; starting the run anyway (its attempts retry with the full backoff)")
    return warnings
