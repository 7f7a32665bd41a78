"""An agent under test that is a service of its own, spoken to over HTTP
(``cirrus eval --agent-url URL``; docs/agent-protocol.md).

One turn (:meth:`HttpAgent.respond`): Cirrus POSTs the conversation so far,
the tools, the knowledge and the task's metadata to the URL
(:func:`cirrus.agents.http_protocol.turn_request`); the agent answers with a
reply and/or tool calls; each call is answered from the task's cassette
(a call the cassette does not hold gets the documented "no recorded result"
tool error, as built-in model agents get it) and Cirrus POSTs again with the
results appended, until the agent answers without tool calls or
``max_rounds`` rounds were made (the last one is marked ``last_round``).

Requests follow the rules of model endpoints (:mod:`cirrus.llm.client`):
each try bounded by ``timeout`` as a whole; 408/409/429, 5xx, timeouts,
connection errors and malformed answers (not JSON, or breaking the protocol)
retried ``max_retries`` times with exponential backoff and jitter, a
``Retry-After`` honoured (a 429's also pausing the other requests); a
refused connection tried a few times quickly; requests in flight bounded by
an adaptive window (docs/concurrency.md).  When the retries are spent, an
:class:`~cirrus.evaluate.types.InfrastructureError` names the URL (shown
with :func:`~cirrus.llm.providers.shown_url`) and what went wrong: the
attempt is an error row, never a silent fail.  A 401/403 is not retried and
raises :class:`~cirrus.llm.providers.ModelAuthError`, which stops the run.

Usage: a round whose answer reports ``usage`` is recorded in the run's
usage ledger under the role ``agent``, as a model call is.  STL
(``AgentTurn.output_tokens``) sums the rounds' ``usage.completion_tokens``;
a round that reports none is counted with the offline tokenizer (reply and
tool calls).  ``input_tokens`` sums ``usage.prompt_tokens``, else the offline
count of what Cirrus sent (messages, tools, knowledge).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import RetryCallState, wait_exponential_jitter

import cirrus.llm
from cirrus import __version__
from cirrus.agents import http_protocol
from cirrus.agents.python_agent import add_note
from cirrus.agents.recording import RecordingTools, ToolViewOf, agent_view
from cirrus.evaluate.types import AgentTurn, InfrastructureError, ToolCallMade, TurnRequest
from cirrus.llm.client.errors import _MalformedAnswer, _TriedTooLong
from cirrus.llm.client.limits import AdaptiveLimiter, RateLimiter
from cirrus.llm.client.turns import my_turn
from cirrus.llm.client.retry import (
    MAX_RETRY_AFTER,
    REFUSED_MAX_WAIT,
    RETRY_STATUSES,
    Tries,
    connection_refused,
    retry_after,
    send_with_retries,
)
from cirrus.llm.providers import EndpointError, ModelAuthError, shown_url
from cirrus.replay import ToolReplayer
from cirrus.usage import completion_usage
from cirrus.usage import record as record_usage

DEFAULT_MAX_ROUNDS = 8  # as OpenAIAgent's max_model_calls
NO_INFO_STATUSES = frozenset({404, 405, 501})  # GET answered so: the service describes nothing


@dataclass(frozen=True, slots=True)
class HttpAgentConfig:
    """How to reach an agent service and how to call it.

    ``auth_env`` names the environment variable holding a token (read once,
    when the agent is made; never stored); it is sent as ``Authorization:
    Bearer <token>``, or as the bare value of ``auth_header`` when that is
    another header (``X-API-Key``).  ``timeout`` bounds each try as a whole,
    in seconds; ``max_retries`` counts retries after the first try;
    ``rpm``/``concurrency`` bound requests per minute and in flight
    (``None``: unbounded); ``max_rounds`` the POSTs of one turn.  ``name``
    is the agent's name in the run (default ``agent@<host:port/path>``, the
    URL shown without its scheme)."""

    url: str
    name: str | None = None
    auth_env: str | None = None
    auth_header: str = "Authorization"
    max_rounds: int = DEFAULT_MAX_ROUNDS
    timeout: float = 120.0
    max_retries: int = 5
    retry_initial_wait: float = 1.0
    retry_max_wait: float = 30.0
    rpm: float | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        try:
            parts = httpx.URL(self.url) if isinstance(self.url, str) else None
            shown_url(self.url)  # what messages show must be readable too (urllib is stricter than httpx)
        except (httpx.InvalidURL, ValueError):
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.host:
            try:
                shown = shown_url(str(self.url))
            except ValueError:  # not even parseable: show nothing of it (it may hold a credential)
                shown = "(unreadable)"
            raise ValueError(f"agent URL {shown!r} is not an http:// or https:// URL with a host, e.g. "
                             f"http://127.0.0.1:8000/agent")
        if self.max_rounds < 1:
            raise ValueError("max_rounds must be >= 1")
        if self.timeout <= 0:
            raise ValueError("timeout must be > 0")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.rpm is not None and self.rpm <= 0:
            raise ValueError("rpm must be > 0 (or None for no limit)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1 (or None for no limit)")

    @property
    def shown_url(self) -> str:
        return shown_url(self.url) or ""


class _AgentStatus(Exception):
    """An HTTP error answer of the agent service (what the retry rules and
    the adaptive window read: ``status_code`` and ``response``)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status_code = response.status_code
        self.reason = _error_text(response)
        super().__init__(f"HTTP {response.status_code}")


def _error_text(response: httpx.Response) -> str:
    """The reason an error answer gives: its JSON ``error.message`` (or
    ``error``, ``detail``, ``message``), else its body (uncut: a secret
    is redacted before any text is cut)."""
    try:
        data = response.json()
    except (ValueError, UnicodeDecodeError):
        data = None
    if isinstance(data, Mapping):
        error = data.get("error")
        for value in ((error.get("message") if isinstance(error, Mapping) else error), data.get("detail"),
                      data.get("message")):
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())
    text = " ".join(response.text[:4000].split())
    return text or response.reason_phrase or "no body"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _AgentStatus):
        return exc.status_code not in (401, 403) and (exc.status_code in RETRY_STATUSES or exc.status_code >= 500)
    return isinstance(exc, (httpx.TransportError, _MalformedAnswer, _TriedTooLong))


class HttpAgent:
    """The agent under test behind an HTTP URL.  Make it inside or outside
    the event loop; close it with :meth:`aclose` (or ``async with``).

    ``ceiling`` (``cirrus eval --concurrency``) is the ceiling of the
    service's adaptive window of requests in flight; ``auth_option`` is the
    command-line option that names the token's variable, for messages.
    ``info`` holds what the service said of itself (:meth:`describe`, or the
    first answer's ``agent``), for ``run.json``."""

    offline = False

    def __init__(self, config: HttpAgentConfig, *, ceiling: int | None = None,
                 auth_option: str = "--agent-auth-env", session_prefix: str | None = None,
                 tool_view: ToolViewOf | None = None) -> None:
        self.config = config
        self.tool_view = tool_view
        self.name = config.name or f"agent@{config.shown_url.split('://', 1)[-1]}"
        self.ceiling = ceiling
        self.auth_option = auth_option
        self.session_prefix = session_prefix
        self.info: dict[str, str] | None = None
        self.requests = 0  # HTTP requests sent (retries included)
        self._token = self._read_token()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": f"cirrus/{__version__} ({http_protocol.PROTOCOL})"}
        if self._token is not None:
            value = f"Bearer {self._token}" if config.auth_header.lower() == "authorization" else self._token
            self._headers[config.auth_header] = value
        self._wait_backoff = wait_exponential_jitter(multiplier=config.retry_initial_wait, max=config.retry_max_wait,
                                                     jitter=config.retry_initial_wait)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._limiter: RateLimiter | None = None
        self._sessions: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        # cirrus eval --tool-server: the agent calls its tools itself there (cirrus.tools), one session per walk
        self.tool_server: Any = None
        self._tool_sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    # --- what the run records ------------------------------------------------

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must keep the same: the service (URL shown
        masked), the protocol and the rounds a turn may take."""
        return {"kind": "http", "url": self.config.shown_url, "protocol": http_protocol.PROTOCOL,
                "max_rounds": self.config.max_rounds}

    def details(self) -> dict[str, Any]:
        """What ``run.json`` records of the agent (free to change on resume):
        the URL shown masked, the token's variable (never the token), and
        the service's description."""
        return {"agent_kind": "http", "agent_url": self.config.shown_url, "agent_auth_env": self.config.auth_env,
                "agent_service": self.info}

    def _read_token(self) -> str | None:
        if not self.config.auth_env:
            return None
        token = os.environ.get(self.config.auth_env)
        if not token:
            raise EndpointError(f"the agent service at {self.config.shown_url} needs a token: set the environment "
                                f"variable {self.config.auth_env} (or choose another with {self.auth_option})")
        return token

    # --- one turn ------------------------------------------------------------

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        started = time.perf_counter()
        task, to_recorded = agent_view(request.task, self.tool_view)
        session = self._session_id(request, replayer)
        tools = RecordingTools(replayer, to_recorded)
        messages: list[dict[str, Any]] = [*request.history, {"role": "user", "content": request.query}]
        turn = AgentTurn(text="")
        answer: http_protocol.AgentAnswer | None = None
        served = self._tool_session(request, replayer, to_recorded)
        where = None if served is None else {"url": f"{self.tool_server.url}/sessions/{served.id}/tools",
                                             "session": served.id}
        for round_number in range(1, self.config.max_rounds + 1):
            body = http_protocol.turn_request(
                session_id=session, request_id=uuid.uuid4().hex, round_number=round_number,
                max_rounds=self.config.max_rounds, task=task, attempt=request.attempt, messages=messages,
                tools=task.get("tools") or [], knowledge=task.get("knowledge") or [], tool_server=where)
            payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            answer = await self._send(payload, round_number)
            turn.model_calls += 1
            self._count(turn, answer, body)
            if answer.agent:
                self._identify(answer.agent, turn)
            assistant = answer.assistant_message()
            messages.append(assistant)
            turn.messages.append(assistant)
            if not answer.tool_calls:
                break
            for call in answer.tool_calls:
                function = call["function"]
                content = tools.answer(function["name"], function["arguments"])
                tool_message = {"role": "tool", "tool_call_id": call["id"], "content": content}
                messages.append(tool_message)
                turn.messages.append(tool_message)
        else:
            if answer is not None and answer.tool_calls:
                add_note(turn, {"kind": "max_rounds", "rounds": self.config.max_rounds})
        turn.tool_calls = tools.calls
        if served is not None:  # the calls it made itself at the tool server, as the recorded calls they map to
            if served.failure is not None:
                raise InfrastructureError(f"the tool server could not answer the agent: {served.failure}")
            turn.tool_calls += [_as_recorded(call, to_recorded) for call in served.take()]
        turn.text = answer.content if answer is not None else ""
        turn.wall_s = time.perf_counter() - started
        return turn

    def _tool_session(self, request: TurnRequest, replayer: ToolReplayer,
                      to_recorded: Callable[[str, Any], tuple[str, Any]] | None) -> Any:
        """The tool-server session of this walk (opened on its first turn with
        the walk's own replayer, so its replay state is the walk's; ended
        when the walk's replayer goes); None without a tool server."""
        if self.tool_server is None:
            return None
        session = self._tool_sessions.get(replayer)
        if session is None:
            store = self.tool_server.sessions
            session = store.open(request.task, request.attempt, replayer=_Renaming(replayer, to_recorded))
            self._tool_sessions[replayer] = session
            weakref.finalize(replayer, _end_quietly, store, session.id)
        return session

    def _session_id(self, request: TurnRequest, replayer: ToolReplayer) -> str:
        """One id per walk of one (task, attempt): the walk's replayer is its
        identity (a walk started again gets a new replayer, so a new id)."""
        base = f"{request.task.get('task_id')}/{request.attempt}"
        if self.session_prefix:
            base = f"{self.session_prefix}/{base}"
        try:
            session = self._sessions.get(replayer)
            if session is None:
                session = self._sessions[replayer] = f"{base}/{uuid.uuid4().hex[:12]}"
        except TypeError:  # a replayer that cannot be weakly referred to: one id per (task, attempt)
            return base
        return session

    def _count(self, turn: AgentTurn, answer: http_protocol.AgentAnswer, body: Mapping[str, Any]) -> None:
        """The round's tokens into the turn, and its reported usage into the ledger."""
        from cirrus.offline import count_tokens

        if answer.usage is not None:
            record_usage("agent", completion_usage(answer.usage))
        output = answer.completion_tokens
        if output is None:  # the reply and the calls' names and arguments, as for a model without usage
            parts = [answer.content, *(part for call in answer.tool_calls
                                       for part in (call["function"]["name"], call["function"]["arguments"]))]
            output = sum(count_tokens(part) for part in parts if part)
        turn.output_tokens += output
        prompt = answer.prompt_tokens
        if prompt is None:
            sent = {name: body[name] for name in ("messages", "tools", "knowledge")}
            prompt = count_tokens(json.dumps(sent, ensure_ascii=False))
        turn.input_tokens += prompt

    def _identify(self, identity: dict[str, str], turn: AgentTurn) -> None:
        """Keep the service's first identity; note one that changes mid-run
        (a service redeployed under a run mixes two agents)."""
        known = {key: value for key, value in (self.info or {}).items() if key in ("name", "version")}
        if not known:
            self.info = {**(self.info or {}), **identity}
        elif any(known.get(key) != value for key, value in identity.items()):
            add_note(turn, {"kind": "agent_changed", "expected": known, "answered": identity})

    # --- describe --------------------------------------------------------------

    async def describe(self) -> dict[str, str] | None:
        """``GET`` the agent's URL once: the service's ``protocol``, ``name``
        and ``version`` (``agent-info.schema.json``), kept in :attr:`info`;
        ``None`` when it answers 404/405/501 (it describes nothing).  A check
        before a run: nothing listening, or a refused token, fails here as it
        would in every attempt (:class:`InfrastructureError`,
        :class:`ModelAuthError`), and so does a service speaking another
        protocol version."""
        try:
            response = await self._attempts(lambda client: client.get(self.config.url, headers=self._headers))
        except _AgentStatus as exc:
            if exc.status_code in NO_INFO_STATUSES:
                return None
            raise self._failure(exc, 1) from exc
        try:
            info = http_protocol.read_info(http_protocol.read_json(response.content))
        except http_protocol.ProtocolError as exc:
            raise InfrastructureError(self._redact(f"the agent service at {self.config.shown_url} answered GET with "
                                                   f"a description Cirrus cannot read: {exc}")) from None
        protocol = info.get("protocol")
        if protocol is not None and protocol != http_protocol.PROTOCOL:
            raise InfrastructureError(f"the agent service at {self.config.shown_url} speaks {protocol!r}; this Cirrus "
                                      f"speaks {http_protocol.PROTOCOL!r} (docs/agent-protocol.md)")
        self.info = {**(self.info or {}), **info}
        return info

    # --- the requests --------------------------------------------------------

    async def _send(self, payload: bytes, round_number: int) -> http_protocol.AgentAnswer:
        """POST ``payload`` with retries; the answer read and checked."""

        def read(response: httpx.Response) -> http_protocol.AgentAnswer:
            try:
                data = http_protocol.read_json(response.content)
            except http_protocol.ProtocolError as exc:
                raise _MalformedAnswer(str(exc)) from None
            try:
                return http_protocol.read_answer(data, round_number)
            except http_protocol.ProtocolError as exc:
                if isinstance(data, dict) and isinstance(data.get("usage"), Mapping):
                    record_usage("agent", completion_usage(data["usage"]))  # answered, and maybe billed
                raise _MalformedAnswer(f"{exc} (docs/agent-protocol.md)") from None

        return await self._attempts(lambda client: client.post(self.config.url, content=payload,
                                                                headers=self._headers), read)

    async def _attempts(self, request: Any, read: Any = None) -> Any:
        """Run ``request(client)`` under the retry rules; ``read`` turns a 2xx
        answer into the result (a :class:`_MalformedAnswer` is retried)."""
        client, limiter = self._state()
        tries = Tries()

        def sent() -> None:
            self.requests += 1

        try:
            return await send_with_retries(lambda: self._try(client, request), read or (lambda response: response),
                                           limiter=limiter, max_retries=self.config.max_retries,
                                           retryable=_retryable, wait=self._wait, tries=tries, on_send=sent)
        except _AgentStatus as exc:
            if exc.status_code in (401, 403):
                raise self._auth_error(exc.status_code) from None
            if read is None and exc.status_code in NO_INFO_STATUSES:
                raise
            raise self._failure(exc, tries.attempts) from exc
        except (httpx.TransportError, _MalformedAnswer, _TriedTooLong) as exc:
            raise self._failure(exc, tries.attempts) from exc

    async def _try(self, client: httpx.AsyncClient, request: Any) -> httpx.Response:
        """One try within ``timeout`` as a whole; an error status raised."""
        try:
            async with asyncio.timeout(self.config.timeout):
                response = await request(client)
        except TimeoutError:
            raise _TriedTooLong() from None
        if response.status_code >= 300:
            raise _AgentStatus(response)
        await my_turn()  # with many answers in, the attempt with the most calls ahead goes first
        return response

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if connection_refused(exc):
            return min(0.25 * 2 ** (state.attempt_number - 1), REFUSED_MAX_WAIT)
        asked = retry_after(exc) if isinstance(exc, _AgentStatus) else None
        if asked is not None:
            asked = min(asked, MAX_RETRY_AFTER)
            if isinstance(exc, _AgentStatus) and exc.status_code == 429 and self._limiter is not None:
                self._limiter.pause(asked)  # the other requests to the service wait too
            return asked + random.uniform(0, min(0.1 * asked, 1.0))
        return self._wait_backoff(state)

    def _state(self) -> tuple[httpx.AsyncClient, RateLimiter]:
        """The HTTP client and limiter of the running event loop (made on
        first use in each loop: both are bound to the loop they run in)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None or self._limiter is None:
            self._loop = loop
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.config.timeout),
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
            self._limiter = AdaptiveLimiter(self.config.rpm, self.config.concurrency, ceiling=self.ceiling,
                                            label=f"agent@{self.config.shown_url}")
            cirrus.llm.track_pool(self)
        return self._client, self._limiter

    # --- errors --------------------------------------------------------------

    def _auth_error(self, status: int) -> ModelAuthError:
        if self.config.auth_env:
            advice = (f"check the token in the environment variable {self.config.auth_env} (or choose another "
                      f"variable with {self.auth_option})")
        else:
            advice = f"the service needs a token: name its environment variable with {self.auth_option}"
        return ModelAuthError(f"the agent service at {self.config.shown_url} refused the request "
                              f"(HTTP {status}, not retried): {advice}")

    def _failure(self, exc: BaseException, attempts: int) -> InfrastructureError:
        retried = f" after {attempts} attempts" if attempts > 1 else ""
        url = self.config.shown_url
        if connection_refused(exc):
            what = f"nothing listens at {url} (connection refused)"
        elif isinstance(exc, _AgentStatus):
            what = f"HTTP {exc.status_code}: {self._redact(exc.reason)[:300]}"
        elif isinstance(exc, (_TriedTooLong, httpx.TimeoutException)):
            what = f"timed out: no complete answer within the {self.config.timeout:g} s timeout"
        elif isinstance(exc, _MalformedAnswer):
            what = f"malformed answer: {self._redact(str(exc))[:400]}"
        else:
            what = f"connection failed: {type(exc).__name__}: {self._redact(str(exc))[:300]}"
        return InfrastructureError(f"the agent service at {url} failed{retried}: {what}")

    def _redact(self, text: str) -> str:
        """``text`` without the token (a service may echo request headers)."""
        token = self._token
        return text.replace(token, "***") if token and len(token) >= 8 else text

    # --- the progress bar's view (cirrus.llm.endpoint_load) -------------------

    def concurrency_levels(self) -> dict[str, int | None]:
        limiter = self._limiter
        return {limiter.label: limiter.level} if isinstance(limiter, AdaptiveLimiter) else {}

    def in_flight(self) -> dict[str, int]:
        limiter = self._limiter
        return {limiter.label: limiter.in_flight} if isinstance(limiter, AdaptiveLimiter) else {}

    async def aclose(self) -> None:
        cirrus.llm.untrack_pool(self)
        client, self._client, self._limiter, self._loop = self._client, None, None, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> HttpAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Renaming:
    """The walk's replayer under the agent's own tool and argument names (a
    tool server session's replayer): calls are answered as the recorded
    calls they map to."""

    def __init__(self, replayer: Any, to_recorded: Callable[[str, Any], tuple[str, Any]] | None) -> None:
        # weakly: the session must not keep the walk's replayer alive (its end ends the session)
        self._replayer = weakref.ref(replayer)
        self._to_recorded = to_recorded
        self.matching = getattr(replayer, "matching", None)

    def _walk(self) -> Any:
        replayer = self._replayer()
        if replayer is None:
            raise RuntimeError("the walk of this tool-server session has ended")
        return replayer

    def call(self, name: str, arguments: Any) -> Any:
        if self._to_recorded is not None:
            name, arguments = self._to_recorded(name, arguments)
        return self._walk().call(name, arguments)

    def __getattr__(self, attribute: str) -> Any:  # rewind, position, seek: the walk's replayer's
        return getattr(self._walk(), attribute)


def _as_recorded(call: ToolCallMade, to_recorded: Callable[[str, Any], tuple[str, Any]] | None) -> ToolCallMade:
    """A call logged at the tool server (the agent's names) as the recorded
    call it maps to, what TIA/TSA/TEV compare."""
    if to_recorded is None:
        return call
    name, arguments = to_recorded(call.name, call.arguments)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return dataclasses.replace(call, name=name, arguments=arguments)


def _end_quietly(store: Any, session_id: str) -> None:
    try:
        store.end(session_id)
    except Exception:  # noqa: BLE001  (already ended: the server stopped first)
        pass
