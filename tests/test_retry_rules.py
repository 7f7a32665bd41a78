"""The client's retry policy (cirrus/llm/client/, "Retries"), one test per
rule, against the scripted server of tests/chat_server.py.

No test measures wall time: the waits the client asks for are recorded
instead of slept.  Two seams of the client module are replaced:

* ``AsyncRetrying`` is given a ``sleep`` that records each wait between
  tries (what ``ChatClient._wait`` computed: backoff or ``Retry-After``);
* the package modules' ``time`` and ``asyncio`` see a fake clock: ``time.monotonic``
  and ``time.time`` stand still until a recorded sleep moves them on, and
  ``asyncio.sleep`` (used by the endpoint's ``RateLimiter`` only) records its
  wait and moves the clock on by it.

The roles back off from 0.5 s (0.5 to 1.0 s before the first retry), so a
``Retry-After`` is told apart from the backoff by the wait it asks for.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tenacity import AsyncRetrying

from cirrus.evaluate.types import InfrastructureError
from cirrus.llm.client import chat as chat_module
from cirrus.llm.client import limits as limits_module
from cirrus.llm.client import retry as retry_module
from cirrus.llm.client import MAX_RETRY_AFTER, ChatClient, ClientPool, ModelAuthError, RoleConfig
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer, Reply, error

KEY_ENV = "CIRRUS_TEST_RETRY_KEY"
KEY = "sk-cirrus-retry-test-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "hello"}]
BACKOFF = (0.5, 1.0)  # the wait before the first retry: retry_initial_wait * 2**0 + jitter in [0, 0.5]
EPOCH = 1_750_000_000.0  # the fake clock's time.time() at the start of a test
_real_sleep = asyncio.sleep


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def role(server: ChatServer, **kw: Any) -> RoleConfig:
    settings = {"retry_initial_wait": BACKOFF[0], "retry_max_wait": 8.0, "timeout": 10.0, "max_retries": 3, **kw}
    return RoleConfig(Endpoint("model-x", server.base_url, KEY_ENV), **settings)


class _Delegate:
    """A module stand-in: the given attributes, the rest from ``module``."""

    def __init__(self, module: Any, **overrides: Any) -> None:
        self._module = module
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class Waits:
    """What the client asked to wait: ``retry`` between tries, ``limiter``
    in the endpoint's rate limiter; ``during_retry_wait`` (a coroutine
    function) runs inside the first wait between tries."""

    def __init__(self) -> None:
        self.retry: list[float] = []
        self.limiter: list[float] = []
        self.clock = 1000.0
        self.during_retry_wait: Callable[[], Awaitable[None]] | None = None
        self.time = _Delegate(time, monotonic=lambda: self.clock, time=lambda: EPOCH + self.clock - 1000.0)
        self.asyncio = _Delegate(asyncio, sleep=self._limiter_sleep)

    def retrying(self, *args: Any, **kwargs: Any) -> AsyncRetrying:
        return AsyncRetrying(*args, sleep=self._retry_sleep, **kwargs)

    async def _retry_sleep(self, seconds: float) -> None:
        self.retry.append(seconds)
        hook, self.during_retry_wait = self.during_retry_wait, None
        if hook is not None:
            await hook()
        self.clock += seconds
        await _real_sleep(0)

    async def _limiter_sleep(self, seconds: float, result: Any = None) -> Any:
        self.limiter.append(seconds)
        self.clock += seconds
        await _real_sleep(0)
        return result


@pytest.fixture
def waits(monkeypatch) -> Waits:
    recorded = Waits()
    monkeypatch.setattr(retry_module, "AsyncRetrying", recorded.retrying)  # the shared retry loop (send_with_retries)
    for module in (chat_module, limits_module, retry_module):  # the package's modules that read the clock
        monkeypatch.setattr(module, "time", recorded.time)
    for module in (chat_module, limits_module):
        monkeypatch.setattr(module, "asyncio", recorded.asyncio)
    return recorded


def complete(server: ChatServer, **kw: Any):
    async def main():
        async with ChatClient(role(server, **kw)) as client:
            return await client.complete(MESSAGES)
    return asyncio.run(main())


def _between(value: float, low: float, high: float) -> bool:
    return low <= value <= high


# --------------------------------------------------------------------------
# Which answers are retried
# --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_408_409_429_and_5xx_are_retried_after_the_backoff(waits, status):
    with ChatServer([status, "ok"]) as server:
        result = complete(server)
    assert result.content == "ok" and result.attempts == 2 and len(server.requests) == 2
    assert len(waits.retry) == 1 and _between(waits.retry[0], *BACKOFF), waits.retry


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_4xx_are_not_retried(waits, status):
    with ChatServer([error(status, error_message="no good"), "never"]) as server:
        with pytest.raises(InfrastructureError, match=f"HTTP {status}") as caught:
            complete(server)
    assert len(server.requests) == 1 and waits.retry == []
    assert "after" not in str(caught.value)  # one try, no "after N attempts"


@pytest.mark.parametrize("status", [401, 403])
def test_401_and_403_are_not_retried_and_name_the_key_variable(waits, status):
    with ChatServer([status, "never"]) as server:
        with pytest.raises(ModelAuthError, match=KEY_ENV) as caught:
            complete(server)
    assert len(server.requests) == 1 and waits.retry == []
    assert not isinstance(caught.value, InfrastructureError)
    assert KEY not in str(caught.value)


# a 200 whose body is not a chat completion
MALFORMED = {
    "not JSON": b"this is not JSON",
    "JSON cut short": b'{"id": "x", "object": "chat.completion", "choi',
    "no choices field": {"id": "x", "object": "chat.completion", "created": 0, "model": "m"},
    "empty choices": {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []},
    "choice without message": {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                               "choices": [{"index": 0, "finish_reason": "stop"}]},
}


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_200_answers_are_retried(waits, body):
    with ChatServer([Reply(body=body), "ok"]) as server:
        result = complete(server)
    assert result.content == "ok" and result.attempts == 2 and len(server.requests) == 2
    assert len(waits.retry) == 1 and _between(waits.retry[0], *BACKOFF), waits.retry


def test_malformed_200_answers_run_out_into_an_infrastructure_error(waits):
    with ChatServer(rule=lambda body: Reply(body=b"not JSON")) as server:
        with pytest.raises(InfrastructureError, match="after 3 attempts: malformed answer"):
            complete(server, max_retries=2)
    assert len(server.requests) == 3 and len(waits.retry) == 2


# --------------------------------------------------------------------------
# How long: Retry-After instead of the backoff
# --------------------------------------------------------------------------


def _retry_after_wait(waits: Waits, reply: Reply) -> float:
    with ChatServer([reply, "ok"]) as server:
        result = complete(server)
    assert result.content == "ok" and len(server.requests) == 2
    assert len(waits.retry) == 1, waits.retry
    return waits.retry[0]


def _jittered(asked: float) -> tuple[float, float]:
    """Retry-After is never waited less, and at most a little more."""
    return asked, asked + min(0.1 * asked, 1.0)


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("seconds", [0.2, 3, 30])  # below and above the 0.5 to 1.0 s backoff
def test_retry_after_in_seconds_is_waited_instead_of_the_backoff(waits, status, seconds):
    wait = _retry_after_wait(waits, error(status, retry_after=seconds))
    assert _between(wait, *_jittered(seconds)), wait


def test_retry_after_as_an_http_date_is_waited_until_that_time(waits):
    when = email.utils.formatdate(EPOCH + 45, usegmt=True)  # e.g. "Sun, 15 Jun 2025 15:07:25 GMT"
    wait = _retry_after_wait(waits, error(503, headers={"Retry-After": when}))
    assert _between(wait, *_jittered(45)), wait


def test_retry_after_ms_is_waited_instead_of_the_backoff(waits):
    wait = _retry_after_wait(waits, error(503, headers={"retry-after-ms": "2500"}))
    assert _between(wait, *_jittered(2.5)), wait


def test_a_retry_after_above_the_cap_is_waited_only_max_retry_after(waits):
    assert MAX_RETRY_AFTER == 120.0
    wait = _retry_after_wait(waits, error(503, retry_after=86_400))  # a day
    assert _between(wait, *_jittered(MAX_RETRY_AFTER)), wait


def test_an_unreadable_retry_after_falls_back_to_the_backoff(waits):
    wait = _retry_after_wait(waits, error(503, headers={"Retry-After": "soon, maybe"}))
    assert _between(wait, *BACKOFF), wait


# --------------------------------------------------------------------------
# A 429's Retry-After pauses the endpoint
# --------------------------------------------------------------------------


def _two_requests(waits: Waits, first_reply: Reply) -> list[str]:
    """Client A's first request gets ``first_reply``; while A waits to retry,
    client B (same endpoint, from the same pool) sends a request."""
    async def main() -> list[str]:
        answers = []
        async with ClientPool() as pool:
            a, b = pool.client(role(server)), pool.client(role(server))

            async def other_request():
                answers.append((await b.complete(MESSAGES)).content)

            waits.during_retry_wait = other_request
            answers.append((await a.complete(MESSAGES)).content)
        return answers

    with ChatServer([first_reply], rule=lambda body: "ok") as server:
        answers = asyncio.run(main())
    assert answers == ["ok", "ok"] and len(server.requests) == 3
    return answers


def test_a_429_retry_after_pauses_the_other_requests_to_the_endpoint(waits):
    _two_requests(waits, error(429, retry_after=7))
    assert _between(waits.retry[0], *_jittered(7)), waits.retry
    assert waits.limiter == [7.0]  # B started no request before A's Retry-After had passed


def test_another_status_with_retry_after_does_not_pause_the_endpoint(waits):
    _two_requests(waits, error(503, retry_after=7))
    assert _between(waits.retry[0], *_jittered(7)), waits.retry
    assert waits.limiter == []  # B went at once
