"""The client of one role's model (:class:`ChatClient`)."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from openai import APIConnectionError, APIStatusError, AsyncOpenAI, AuthenticationError, PermissionDeniedError
from openai._models import construct_type
from openai.types.chat import ChatCompletion
from tenacity import RetryCallState, wait_exponential_jitter

from cirrus.evaluate.types import InfrastructureError
from cirrus.ingest.cassettes import canonical_json
from cirrus.llm.cache import ResponseCache
from cirrus.llm.client.errors import (
    UnparseableOutput,
    _MalformedAnswer,
    context_overflow,
    overflow_message,
    _snippet,
    _StructuredRefused,
    _TriedTooLong,
)
from cirrus.llm.client.limits import RateLimiter
from cirrus.llm.client.results import ChatResult
from cirrus.llm.client.retry import (
    MAX_RETRY_AFTER,
    REFUSED_MAX_WAIT,
    Tries,
    _describe_error,
    _retryable,
    connection_refused,
    retry_after,
    send_with_retries,
    structured_output_refused,
)
from cirrus.llm.client.roles import RoleConfig
from cirrus.llm.client.transport import http_client_options, poster_for
from cirrus.llm.client.turns import my_turn
from cirrus.llm.providers import Endpoint, ModelAuthError, shown_url
from cirrus.usage import call_usage, completion_usage
from cirrus.usage import record as record_usage

T = TypeVar("T")


class BatchAnswers(Protocol):
    """Where a client in batch mode gets its answers instead of sending a
    request: :class:`cirrus.llm.batching.BatchCollector` (the batching layer
    uses the client; the client knows only this much of it)."""

    dry: bool  # a dry pass: answers are not written to the response cache

    def answer(self, client: ChatClient, payload: bytes) -> ChatResult:
        """The answer to ``payload`` from a finished batch, or raise
        (``Deferred``: it waits for the next batch)."""


def _dumps(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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
        self._openai = openai_client or _package_make_openai_client(role.endpoint, role.timeout)
        self._params = role.body_params()
        self._wait_backoff = wait_exponential_jitter(
            multiplier=role.retry_initial_wait, max=role.retry_max_wait, jitter=role.retry_initial_wait
        )
        self.requests = 0  # HTTP requests sent (retries included)
        self.cache_hits = 0
        self.structured: bool | None = None
        self._probe: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        # batch mode (cirrus.llm.batching): requests are answered from batch
        # results, or wait for a batch, instead of being sent
        self.batch: BatchAnswers | None = None

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
                record_usage(self.role.name or "agent", call_usage(None, None, from_cirrus_cache=True))
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
                    record_usage(self.role.name or "agent", call_usage(None, None, from_cirrus_cache=True))
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
            self.refuses_structured(what)
            return await self._send(text.encode("utf-8") if text is not None else _dumps(body))
        self.structured = True
        return result

    def refuses_structured(self, what: str) -> None:
        """The endpoint refused ``response_format`` (``what``: its error, as
        said to the user): this client does not send it again, and says so
        once.  Also called by the endpoint check, which asks first."""
        self.structured = False
        warnings.warn(self._redact(
            f"{self.role.describe()} does not take structured output (response_format): {what}; "
            f"asked again without it, and this client will not send it again (set "
            f"`structured_output = false` under [{self._settings_section()}] in cirrus.toml to skip the try)"),
            RuntimeWarning, stacklevel=3)

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
        are not retried and raise :class:`_StructuredRefused`.  In batch mode
        nothing is sent: the collector answers (or defers) the request."""
        if self.batch is not None:
            return self.batch.answer(self, payload)
        started = time.perf_counter()
        tries = Tries()
        retryable = _retryable if refusal is None else (lambda exc: _retryable(exc) and not refusal(exc))

        def sent() -> None:
            self.requests += 1

        def finish(completion: Any) -> ChatResult:
            result = self._scrubbed(self._answer(completion, time.perf_counter() - started, tries.attempts))
            record_usage(self.role.name or "agent", result.usage(payload))
            return result

        try:
            return await send_with_retries(lambda: self._post(payload), finish, limiter=self.limiter,
                                           max_retries=self.role.max_retries, retryable=retryable, wait=self._wait,
                                           tries=tries, on_send=sent)
        except (AuthenticationError, PermissionDeniedError) as exc:
            raise self._auth_error(exc) from None
        except APIStatusError as exc:
            if refusal is not None and refusal(exc):
                raise _StructuredRefused(exc) from exc
            said = context_overflow(exc)
            if said is not None:  # a clear error for every role: agent, judge, fluency checker, annotator
                raise InfrastructureError(self._redact(overflow_message(
                    self.role.describe(), _payload_tokens(payload), exc.status_code, said))) from exc
            raise self._infrastructure_error(exc, tries.attempts) from exc
        except (APIConnectionError, _MalformedAnswer, _TriedTooLong) as exc:
            raise self._infrastructure_error(exc, tries.attempts) from exc

    def _answer(self, completion: Any, latency_s: float, attempts: int) -> ChatResult:
        """The :class:`ChatResult` of a 200 answer.  One that is a JSON
        object but no usable chat completion (no choices, no message) is
        retried, yet the endpoint answered it and may bill it: its usage (as
        far as it reports one) is recorded as a call before it is retried."""
        try:
            return ChatResult.from_completion(completion, latency_s, attempts)
        except _MalformedAnswer:
            if isinstance(completion, (ChatCompletion, dict)):
                usage = completion.get("usage") if isinstance(completion, dict) else getattr(completion, "usage", None)
                record_usage(self.role.name or "agent", completion_usage(usage))
            raise

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
        """One try: the answer's JSON (a ``dict`` when the body was a JSON
        object), within ``RoleConfig.timeout`` as a whole.  The SDK sends the
        request and raises its errors as before, but hands back the HTTP
        response: building a pydantic ``ChatCompletion`` of every answer cost
        more CPU than the rest of :class:`ChatResult` (issue 28), and
        :meth:`ChatResult.from_completion` reads a dict the same way."""
        try:
            async with asyncio.timeout(self.role.timeout):
                data = await poster_for(self._openai, _completion_data).post(payload)
        except TimeoutError:
            raise _TriedTooLong() from None
        except json.JSONDecodeError as exc:  # a 200 whose JSON body is cut or garbled
            raise _MalformedAnswer(f"the body is not JSON ({exc.msg}): {_snippet(exc.doc)}") from None
        except UnicodeDecodeError:
            raise _MalformedAnswer("the body is not JSON (not UTF-8 text)") from None
        await my_turn()  # with many answers in, the attempt with the most calls ahead goes first (turns.py)
        return data

    def _cache_put(self, key: str, result: ChatResult) -> None:
        """Store an answer; a cache that cannot be written (a full disk) costs
        a question asked again later, never the answer in hand."""
        if self.batch is not None and self.batch.dry:
            return  # a dry pass of batch mode: the writing pass must see the answer as a batch call
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


def _completion_data(response: Any) -> Any:
    """What the SDK's ``post(..., cast_to=ChatCompletion)`` returned for
    ``response``, with a JSON object left a ``dict`` instead of an unvalidated
    ``ChatCompletion`` (the SDK's ``_parse``, non-strict: a JSON content type
    is parsed or raises; another is parsed when it is JSON, else its text).
    Any other JSON value goes through the SDK's ``construct_type`` as before."""
    content_type = response.headers.get("content-type", "*").split(";")[0]
    if content_type.endswith("json"):
        data = response.json()
    else:
        try:
            data = response.json()
        except Exception:
            return response.text
    if isinstance(data, dict):
        return data
    return construct_type(type_=ChatCompletion, value=data)


def make_openai_client(endpoint: Endpoint, timeout: float) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` for ``endpoint`` with the SDK's own retries off
    (:class:`ChatClient` retries with tenacity), on the transport
    ``CIRRUS_HTTP_TRANSPORT`` names (:mod:`cirrus.llm.client.transport`)."""
    return AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), timeout=timeout, max_retries=0,
                       **http_client_options(timeout, endpoint.base_url))



def _package_make_openai_client(endpoint: Endpoint, timeout: float) -> AsyncOpenAI:
    """:func:`make_openai_client` as the package names it now, so that
    replacing ``cirrus.llm.client.make_openai_client`` (an experiment such as
    benchmarks/eval_throughput.py ``--transport aiohttp``) still takes
    effect after the split into modules."""
    import cirrus.llm.client as package

    return package.make_openai_client(endpoint, timeout)


def _payload_tokens(payload: bytes) -> int:
    """Tokens of a request body's messages and tools, counted offline (for
    the context-overflow error)."""
    from cirrus.offline import count_tokens

    try:
        body = json.loads(payload)
    except ValueError:
        return count_tokens(payload.decode("utf-8", "replace"))
    return count_tokens(json.dumps([body.get("messages"), body.get("tools")], ensure_ascii=False))
