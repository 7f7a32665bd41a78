from __future__ import annotations

import asyncio
import time

import pytest

from cirrus.evaluate.types import InfrastructureError
from cirrus.llm.cache import ResponseCache
from cirrus.llm.client import (
    ChatClient,
    ClientPool,
    ModelAuthError,
    RateLimiter,
    RoleConfig,
    UnparseableOutput,
    roles_from_options,
)
from cirrus.llm.providers import Endpoint, EndpointError
from tests.chat_server import OMIT, ChatServer, Reply, error, text
from tests.moving_clock import moving_clock

KEY_ENV = "CIRRUS_TEST_LLM_KEY"
KEY = "sk-cirrus-test-secret-0123456789abcdef"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def role(server: ChatServer, **kw) -> RoleConfig:
    settings = {"retry_initial_wait": 0.01, "retry_max_wait": 0.05, "timeout": 5.0, "max_retries": 3, **kw}
    return RoleConfig(Endpoint("model-x", server.base_url, KEY_ENV), **settings)


def run(coro_fn, *args, **kw):
    """Run ``coro_fn(client, ...)`` with a fresh ChatClient in a fresh loop."""
    async def main():
        async with ChatClient(*args, **kw) as client:
            return await coro_fn(client)
    return asyncio.run(main())


def test_request_carries_role_parameters_and_key():
    with ChatServer([text("hi there", prompt_tokens=12, completion_tokens=4, reasoning_tokens=1)]) as server:
        r = role(server, temperature=0.3, max_tokens=99, reasoning_effort="low", extra_body={"top_p": 0.5})
        result = run(lambda c: c.complete(MESSAGES), r)
    assert result.content == "hi there"
    assert (result.prompt_tokens, result.completion_tokens, result.reasoning_tokens) == (12, 4, 1)
    assert result.output_tokens() == 4  # completion_tokens already includes reasoning tokens
    assert result.attempts == 1 and not result.cached
    body = server.requests[0]
    assert body == {"model": "model-x", "messages": MESSAGES, "temperature": 0.3, "max_tokens": 99,
                    "reasoning_effort": "low", "top_p": 0.5}
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert server.headers[0]["content-type"].startswith("application/json")


def test_unset_parameters_are_not_sent_and_max_completion_tokens_is_supported():
    with ChatServer(["a"]) as server:
        run(lambda c: c.complete(MESSAGES), role(server, max_tokens=7, max_tokens_param="max_completion_tokens"))
    assert server.requests[0] == {"model": "model-x", "messages": MESSAGES, "max_completion_tokens": 7}


def test_role_from_cli_options():
    agent, judge, fluency = roles_from_options(
        "my-local-model", "http://127.0.0.1:9/v1/", "LOCAL_KEY",
        judge_model="judge-model", agent_params={"temperature": 0.7, "extra_body": '{"enable_thinking": false}'},
        judge_params={"rpm": 60, "concurrency": 4},
    )
    assert agent.endpoint == Endpoint("my-local-model", "http://127.0.0.1:9/v1", "LOCAL_KEY")
    assert agent.body_params() == {"model": "my-local-model", "temperature": 0.7, "enable_thinking": False}
    # the agent's base URL and key variable are the judge's and fluency checker's defaults
    assert judge.endpoint == Endpoint("judge-model", "http://127.0.0.1:9/v1", "LOCAL_KEY")
    assert judge.temperature == 0.0 and judge.rpm == 60 and judge.concurrency == 4
    assert fluency.endpoint.model == "judge-model" and fluency.temperature == 0.0
    # a known model without a base URL goes to its provider
    qwen = RoleConfig.from_options("qwen3-max", reasoning_effort="high", max_tokens=512)
    assert qwen.endpoint.api_key_env == "DASHSCOPE_API_KEY" and "dashscope" in qwen.endpoint.base_url
    # the fingerprint is what a resume must keep: not the base URL, never the key
    moved = RoleConfig.from_options("my-local-model", "http://elsewhere:8000/v1", "OTHER", temperature=0.7,
                                    extra_body={"enable_thinking": False})
    assert moved.fingerprint() == agent.fingerprint()
    with pytest.raises(ValueError, match="JSON"):
        RoleConfig.from_options("m", "http://x", extra_body="{not json")
    with pytest.raises(ValueError, match="reasoning effort"):
        RoleConfig.from_options("m", "http://x", reasoning_effort="maximal")
    with pytest.raises(EndpointError, match="--base-url"):
        RoleConfig.from_options("unknown-model")


def test_missing_key_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(EndpointError, match=KEY_ENV):
        ChatClient(RoleConfig(Endpoint("m", "http://127.0.0.1:9/v1", KEY_ENV)))


def test_429_retry_after_is_honoured_then_success():
    with ChatServer([error(429, retry_after=1), text("finally")]) as server:
        # the backoff alone would wait ~0.01 s: only Retry-After explains a 1 s gap
        result = run(lambda c: c.complete(MESSAGES), role(server))
    assert result.content == "finally" and result.attempts == 2
    gap = server.times[1] - server.times[0]
    assert gap >= 0.95, gap


def test_retry_after_ms_is_honoured():
    with ChatServer([error(429, headers={"retry-after-ms": "400"}), "ok"]) as server:
        run(lambda c: c.complete(MESSAGES), role(server))
    assert server.times[1] - server.times[0] >= 0.38


def test_a_429_pauses_the_other_requests_to_the_endpoint():
    async def two(client):
        first = asyncio.create_task(client.complete(MESSAGES))
        await asyncio.sleep(0.15)  # the 429 has arrived; this one waits for its Retry-After too
        return await asyncio.gather(first, client.complete(MESSAGES))

    with ChatServer([error(429, retry_after=0.8)], rule=lambda body: "ok") as server:
        run(two, role(server))
    assert len(server.requests) == 3
    assert min(server.times[1:]) - server.times[0] >= 0.75


def test_500_is_retried_with_backoff():
    with ChatServer([500, 503, text("recovered")]) as server:
        result = run(lambda c: c.complete(MESSAGES), role(server))
    assert result.content == "recovered" and result.attempts == 3 and len(server.requests) == 3


def test_retries_run_out_into_an_infrastructure_error():
    with ChatServer(rule=lambda body: 500) as server:
        with pytest.raises(InfrastructureError, match=r"after 3 attempts: HTTP 500"):
            run(lambda c: c.complete(MESSAGES), role(server, max_retries=2))
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [401, 403])
def test_bad_key_is_not_retried_and_names_the_variable(status):
    with ChatServer([status, "never"]) as server:
        with pytest.raises(ModelAuthError, match=KEY_ENV) as caught:
            run(lambda c: c.complete(MESSAGES), role(server))
    assert len(server.requests) == 1
    assert not isinstance(caught.value, InfrastructureError)
    assert KEY not in str(caught.value)


def test_other_client_errors_are_not_retried():
    with ChatServer([error(400, error_message="context too long"), "never"]) as server:
        with pytest.raises(InfrastructureError, match="HTTP 400"):
            run(lambda c: c.complete(MESSAGES), role(server))
    assert len(server.requests) == 1


def test_timeouts_are_retried():
    with moving_clock() as clock, ChatServer([Reply(hang=True), text("in time")], on_stall=clock.jump) as server:
        result = run(lambda c: c.complete(MESSAGES), role(server, timeout=30.0))
    assert result.content == "in time" and result.attempts == 2


def test_connection_errors_are_retried_then_reported():
    with ChatServer() as server:
        dead = role(server, max_retries=1)
    # the server is gone: nothing listens on its port any more
    with pytest.raises(InfrastructureError, match="after 2 attempts"):
        run(lambda c: c.complete(MESSAGES), dead)


def test_cache_answers_a_repeated_request(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    with ChatServer(rule=lambda body: "cached answer") as server:
        async def twice(client):
            first = await client.complete(MESSAGES, cache=True)
            second = await client.complete(MESSAGES, cache=True)
            other = await client.complete(MESSAGES, cache=True, temperature=0.9)  # other parameters: a miss
            uncached = await client.complete(MESSAGES)  # not asked to cache: always sent
            return first, second, other, uncached, client.cache_hits

        first, second, other, uncached, hits = run(twice, role(server), cache=cache)
    assert len(server.requests) == 3 and hits == 1
    assert not first.cached and second.cached and second.content == "cached answer"
    assert second.completion_tokens == first.completion_tokens and not other.cached and not uncached.cached
    assert len(cache) == 2
    cache.close()


def test_cache_key_ignores_the_api_key_and_never_stores_it(tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    with ChatServer(rule=lambda body: "answer") as server:
        run(lambda c: c.complete(MESSAGES, cache=True), role(server), cache=ResponseCache(cache_dir))
        monkeypatch.setenv(KEY_ENV, "sk-a-completely-different-key-999")
        result = run(lambda c: c.complete(MESSAGES, cache=True), role(server), cache=ResponseCache(cache_dir))
        assert result.cached and len(server.requests) == 1  # same question, other key: answered from the cache
        # a trailing slash is the same base URL; another base URL is another question
        same = RoleConfig(Endpoint("model-x", server.base_url + "/", KEY_ENV), retry_initial_wait=0.01)
        assert run(lambda c: c.complete(MESSAGES, cache=True), same, cache=ResponseCache(cache_dir)).cached
    assert ResponseCache.key("http://a/v1", "{}") == ResponseCache.key("http://a/v1/", "{}")
    assert ResponseCache.key("http://a/v1", "{}") != ResponseCache.key("http://b/v1", "{}")
    files = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data and b"sk-a-completely-different-key-999" not in data
        assert KEY_ENV.encode() not in data


def _parse_word(raw: str) -> str:
    if raw.strip() not in ("alpha", "beta"):
        raise UnparseableOutput("not a known word")
    return raw.strip()


def test_complete_parsed_retries_unreadable_answers_with_a_repair_message(tmp_path):
    cache = ResponseCache(tmp_path)
    with ChatServer(["hmm", "well...", "beta"]) as server:
        value, result = run(lambda c: c.complete_parsed(MESSAGES, _parse_word, repair="ONE WORD!"), role(server),
                            cache=cache)
        assert value == "beta" and len(server.requests) == 3
        assert server.requests[0]["messages"] == MESSAGES
        assert server.requests[2]["messages"][-2:] == [{"role": "assistant", "content": "well..."},
                                                       {"role": "user", "content": "ONE WORD!"}]
        assert len(cache) == 1  # cached under the first request: asking again costs nothing
        value, again = run(lambda c: c.complete_parsed(MESSAGES, _parse_word, repair="ONE WORD!"), role(server),
                           cache=cache)
    assert value == "beta" and again.cached and len(server.requests) == 3


def test_complete_parsed_gives_up_with_an_infrastructure_error(tmp_path):
    cache = ResponseCache(tmp_path)
    with ChatServer(rule=lambda body: "gibberish") as server:
        with pytest.raises(InfrastructureError, match="unreadable answer .* after 3 attempts"):
            run(lambda c: c.complete_parsed(MESSAGES, _parse_word), role(server), cache=cache)
    assert len(server.requests) == 3 and len(cache) == 0  # nothing unreadable is cached


def test_missing_usage_is_counted_with_tiktoken():
    from cirrus.offline import count_tokens

    with ChatServer([Reply(content="The instance is running.", usage=OMIT)]) as server:
        result = run(lambda c: c.complete(MESSAGES), role(server))
    assert result.completion_tokens is None
    assert result.output_tokens() == count_tokens("The instance is running.") > 0


def test_missing_usage_counts_reasoning_text_too_and_history_leaves_it_out():
    from cirrus.offline import count_tokens

    reply = Reply(content="Restart it.", reasoning_content="The user wants a fix. Restarting helps.", usage=OMIT)
    with ChatServer([reply]) as server:
        result = run(lambda c: c.complete(MESSAGES), role(server))
    assert result.reasoning_content == "The user wants a fix. Restarting helps."
    assert result.output_tokens() == count_tokens("Restart it.") + count_tokens(result.reasoning_content)
    assert result.assistant_message() == {"role": "assistant", "content": "Restart it."}


def test_rate_limiter_spaces_requests_and_bounds_concurrency():
    async def burst(limit: RateLimiter, n: int) -> tuple[float, int]:
        """Time from the first start to the last, and the most requests inside at once."""
        starts, inside, most = [], 0, 0

        async def one():
            nonlocal inside, most
            async with limit:
                starts.append(time.monotonic())
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.05)
                inside -= 1

        await asyncio.gather(*(one() for _ in range(n)))
        return max(starts) - min(starts), most

    spread, _ = asyncio.run(burst(RateLimiter(rpm=600), 5))
    assert spread >= 0.38  # one start every 0.1 s (a slow machine only spreads them more)
    assert asyncio.run(burst(RateLimiter(concurrency=2), 6))[1] == 2
    assert asyncio.run(burst(RateLimiter(), 20))[1] == 20  # unbounded: all inside at once


def test_pool_shares_connections_and_limiters_per_endpoint():
    async def main(base_url):
        async with ClientPool() as pool:
            a = pool.client(RoleConfig(Endpoint("m1", base_url, KEY_ENV), concurrency=2))
            b = pool.client(RoleConfig(Endpoint("m1", base_url, KEY_ENV), temperature=0.0))
            c = pool.client(RoleConfig(Endpoint("m2", base_url, KEY_ENV)))
            assert a._openai is b._openai is c._openai
            assert a.limiter is b.limiter and a.limiter is not c.limiter
            return [r.content for r in await asyncio.gather(a.complete(MESSAGES), c.complete(MESSAGES))]

    with ChatServer(rule=lambda body: body["model"]) as server:
        assert asyncio.run(main(server.base_url)) == ["m1", "m2"]


def test_a_key_echoed_in_a_normal_answer_is_scrubbed_before_anything_keeps_it(tmp_path):
    """An endpoint (a gateway, or a model that read it in a log) that echoes
    the API key in a 200 answer: content, reasoning and tool-call arguments
    reach transcripts and the cache without it."""
    echo = Reply(content=f"your key is {KEY}, keep it safe", reasoning_content=f"they sent {KEY}",
                 tool_calls=[("Lookup", {"token": KEY, "n": 1})])
    cache = ResponseCache(tmp_path)
    with ChatServer([echo]) as server:
        async def main():
            async with ChatClient(role(server), cache=cache) as client:
                return await client.complete([{"role": "user", "content": "hi"}], cache=True)

        result = asyncio.run(main())
    dumped = repr(result.to_cache())
    assert KEY not in dumped and "your key is ***, keep it safe" == result.content
    assert result.reasoning_content == "they sent ***"
    assert '"token": "***"' in result.tool_calls[0]["function"]["arguments"]
    assert KEY not in (tmp_path / ResponseCache.FILENAME).read_bytes().decode("utf-8", "replace")
