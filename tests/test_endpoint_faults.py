"""What the chat client does with a broken endpoint: garbled, cut or empty
200 answers, refused keys, rate limits with ``Retry-After``, and servers that
hang or trickle their answer (see the ``Retries`` and ``Timeouts`` sections of
``cirrus.llm.client``).  Every fault is played by the scripted
:class:`tests.chat_server.ChatServer`."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from cirrus.evaluate.types import InfrastructureError
from cirrus.llm.client import ChatClient, ClientPool, ModelAuthError, RoleConfig
from tests.chat_server import ChatServer, Reply, error, text
from tests.moving_clock import moving_clock
from tests.test_llm_client import KEY, KEY_ENV, _key, role  # noqa: F401  (_key: the autouse fixture setting the key)

MESSAGES = [{"role": "user", "content": "hello"}]

GOOD_ANSWER = {
    "id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "model-x",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}],
}


# role(): a tiny backoff, so a gap between tries longer than ~0.1 s is a Retry-After's doing


def call(r: RoleConfig, *, pool: bool = False):
    """One ``complete(MESSAGES)`` with a fresh client (or pool) in a fresh loop."""
    async def main():
        if pool:
            async with ClientPool() as clients:
                return await clients.client(r).complete(MESSAGES)
        async with ChatClient(r) as client:
            return await client.complete(MESSAGES)
    return asyncio.run(main())


def timed_call(r: RoleConfig, **kw):
    started = time.monotonic()
    try:
        return call(r, **kw), None, time.monotonic() - started
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return None, exc, time.monotonic() - started


# ---------------------------------------------------------------------------
# malformed 200 answers


MALFORMED_BODIES = {
    "not json": "this is not JSON at all",
    "html error page": "<html><body><h1>502 Bad Gateway</h1></body></html>",
    "not utf-8": b"\xff\xfe\x00garbage\x80",
    "empty body": b"",
    "half json": json.dumps(GOOD_ANSWER)[:40],
    "empty choices": {"choices": []},
    "no choices": {"id": "x", "object": "chat.completion"},
    "choice without message": {"choices": [{"index": 0, "finish_reason": "stop"}]},
    "json list": [1, 2, 3],
    "json string": "\"just a string\"",
}


@pytest.mark.parametrize("body", list(MALFORMED_BODIES.values()), ids=list(MALFORMED_BODIES))
def test_malformed_200_is_retried_then_the_good_answer_is_used(body):
    with ChatServer([Reply(body=body), text("recovered")]) as server:
        result = call(role(server))
    assert result.content == "recovered"
    assert result.attempts == 2
    assert len(server.requests) == 2


def test_body_not_json_is_retried():
    with ChatServer([Reply(body="definitely { not json"), text("second try")]) as server:
        result = call(role(server))
    assert result.content == "second try" and result.attempts == 2
    assert len(server.requests) == 2
    assert server.requests[0] == server.requests[1]  # the same request is sent again


@pytest.mark.parametrize("cut", [1, 30, 80])
def test_body_truncated_mid_way_is_retried(cut):
    # Content-Length announces the whole answer; the connection ends after `cut` bytes
    with ChatServer([Reply(content="the first answer, cut short", truncate=cut), text("whole")]) as server:
        result = call(role(server))
    assert result.content == "whole" and result.attempts == 2
    assert len(server.requests) == 2


def test_empty_choices_is_retried():
    with ChatServer([Reply(body={"choices": []}), text("has a choice")]) as server:
        result = call(role(server))
    assert result.content == "has a choice" and result.attempts == 2
    assert len(server.requests) == 2


@pytest.mark.parametrize("max_retries", [0, 2])
@pytest.mark.parametrize("body", ["<<not json>>", {"choices": []}], ids=["not-json", "empty-choices"])
def test_persistent_malformed_answers_raise_infrastructure_error(body, max_retries):
    with ChatServer(rule=lambda req: Reply(body=body)) as server:
        with pytest.raises(InfrastructureError, match="malformed") as caught:
            call(role(server, max_retries=max_retries))
    assert len(server.requests) == 1 + max_retries
    message = str(caught.value)
    assert "model-x" in message
    if max_retries:
        assert f"after {1 + max_retries} attempts" in message
    assert KEY not in message


def test_persistent_truncated_answers_raise_infrastructure_error():
    with ChatServer(rule=lambda req: Reply(content="x" * 200, truncate=50)) as server:
        with pytest.raises(InfrastructureError, match="after 3 attempts"):
            call(role(server, max_retries=2))
    assert len(server.requests) == 3


# ---------------------------------------------------------------------------
# a refused key


@pytest.mark.parametrize("status", [401, 403])
def test_refused_key_raises_model_auth_error_after_one_request(status):
    with ChatServer([error(status, error_message="invalid api key"), "never", "never"]) as server:
        with pytest.raises(ModelAuthError) as caught:
            call(role(server, max_retries=5))
    assert len(server.requests) == 1
    message = str(caught.value)
    assert "--api-key-env" in message
    assert KEY_ENV in message
    assert KEY not in message
    assert not isinstance(caught.value, InfrastructureError)


def test_refused_key_names_the_judge_option_for_the_judge_role():
    with ChatServer([401, "never"]) as server:
        with pytest.raises(ModelAuthError, match="--judge-api-key-env") as caught:
            call(role(server, name="judge"), pool=True)
    assert len(server.requests) == 1
    assert KEY_ENV in str(caught.value)


# ---------------------------------------------------------------------------
# rate limits


def test_429_retry_after_seconds_is_waited():
    with ChatServer([error(429, retry_after=1), text("after the pause")]) as server:
        result = call(role(server))
    assert result.content == "after the pause" and result.attempts == 2
    assert len(server.requests) == 2
    gap = server.times[1] - server.times[0]
    assert gap >= 0.9, gap


def test_429_retry_after_ms_is_waited():
    with ChatServer([error(429, headers={"retry-after-ms": "300"}), text("ok")]) as server:
        result = call(role(server))
    assert result.content == "ok" and result.attempts == 2
    gap = server.times[1] - server.times[0]
    assert gap >= 0.25, gap  # (the waits themselves: tests/test_retry_rules.py, without a clock)


def test_retry_after_ms_takes_precedence_over_retry_after():
    headers = {"retry-after-ms": "300", "Retry-After": "30"}
    with ChatServer([error(429, headers=headers), text("ok")]) as server:
        result, exc, elapsed = timed_call(role(server))
    assert exc is None and result.content == "ok"
    assert server.times[1] - server.times[0] >= 0.25
    assert elapsed < 25.0  # not the 30 s of Retry-After


def test_503_retry_after_is_honoured_too():
    with ChatServer([error(503, retry_after="0.5"), text("ok")]) as server:
        result = call(role(server))
    assert result.attempts == 2
    assert server.times[1] - server.times[0] >= 0.45


def test_persistent_429_runs_out_into_an_infrastructure_error():
    with ChatServer(rule=lambda req: error(429, headers={"retry-after-ms": "50"})) as server:
        with pytest.raises(InfrastructureError, match=r"after 3 attempts: HTTP 429"):
            call(role(server, max_retries=2))
    assert len(server.requests) == 3


# ---------------------------------------------------------------------------
# servers that hang or never finish


def test_hang_longer_than_timeout_raises_timed_out_after_two_requests():
    with ChatServer(rule=lambda req: Reply(hang=True)) as server:
        _, exc, elapsed = timed_call(role(server, timeout=0.5, max_retries=1))
        count = len(server.requests)
    assert isinstance(exc, InfrastructureError), exc
    assert "timed out" in str(exc)
    assert "after 2 attempts" in str(exc)
    assert count == 2
    # two tries of 0.5 s and a tiny backoff: nowhere near the server's endless hang
    assert 0.9 <= elapsed < 30.0, elapsed
    assert server.times[1] - server.times[0] >= 0.45


def test_hang_then_answer_is_retried():
    # the clock jumps past the 30 s timeout as the server starts to hang: the
    # hanging try is cut at once, and the retry has 30 real seconds to answer
    with moving_clock() as clock, ChatServer([Reply(hang=True), text("awake")], on_stall=clock.jump) as server:
        result, exc, elapsed = timed_call(role(server, timeout=30.0, max_retries=1), pool=True)
    assert exc is None and result.content == "awake" and result.attempts == 2
    assert len(server.requests) == 2
    assert elapsed < 25.0  # the first try was cut by the timeout, not waited out


def test_trickling_body_is_cut_by_the_whole_request_timeout():
    # one byte every 0.2 s never trips a per-read timeout of 0.5 s, and the
    # whole answer (hundreds of bytes) would take over a minute
    long_answer = "a long answer " * 30
    with ChatServer(rule=lambda req: Reply(content=long_answer, trickle=0.2)) as server:
        _, exc, elapsed = timed_call(role(server, timeout=0.5, max_retries=1))
        count = len(server.requests)
    assert isinstance(exc, InfrastructureError), exc
    assert "timed out" in str(exc)
    assert count == 2
    assert elapsed < 30.0, elapsed  # a whole answer would take over a minute per try


def test_trickle_then_good_answer_succeeds():
    with moving_clock() as clock, \
            ChatServer([Reply(content="slow " * 100, trickle=0.2), text("fast")], on_stall=clock.jump) as server:
        result, exc, elapsed = timed_call(role(server, timeout=30.0, max_retries=2))
    assert exc is None and result.content == "fast" and result.attempts == 2
    assert elapsed < 25.0  # the trickle (100 s for its 500 bytes) was cut
