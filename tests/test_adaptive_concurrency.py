"""Adaptive concurrency per endpoint (cirrus/llm/client/limits.py,
docs/concurrency.md): the AIMD window as pure bookkeeping with hand-worked
sequences, the asyncio limiter around it (no sleeps, no clock), the pool's
view of it, and ``cirrus eval`` against a server that serves at most N
requests at once and answers 429 beyond.

No assertion is on wall time; the end-to-end figures (429 share, requests in
service on average) are ratios with wide margins (see the integration test).
"""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.types import InfrastructureError
from cirrus.llm import endpoint_load
from cirrus.llm.client import (
    MAX_CROWDED_TRIES,
    AdaptiveLimiter,
    AimdWindow,
    ClientPool,
    RateLimiter,
    RoleConfig,
    is_overload,
)
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer, Reply, error
from tests.limited_server import LimitedServerProcess
from tests.scripted_models import make_task, write_workspace

KEY_ENV = "CIRRUS_TEST_ADAPTIVE_KEY"
KEY = "sk-cirrus-adaptive-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def status_error(status: int) -> Exception:
    """An error shaped like the SDK's ``APIStatusError`` (status and response)."""
    exc = RuntimeError(f"HTTP {status}")
    exc.status_code = status  # type: ignore[attr-defined]
    exc.response = SimpleNamespace(headers={})  # type: ignore[attr-defined]
    return exc


# --------------------------------------------------------------------------
# AimdWindow: pure bookkeeping
# --------------------------------------------------------------------------


def test_the_window_starts_at_the_ceiling_and_bounds_the_requests_in_flight():
    window = AimdWindow(ceiling=3)
    assert window.window == 3
    tickets = [window.start() for _ in range(3)]
    assert tickets == [0, 1, 2] and window.in_flight == 3 and not window.has_room()
    window.released(tickets[0])  # another error: a place back, nothing learned
    assert window.has_room() and window.window == 3 and window.decreases == 0


def test_an_overload_halves_the_window_once_per_round():
    window = AimdWindow(ceiling=8)
    for _ in range(8):
        window.start()  # tickets 0..7, 8 in flight
    # the first 429: flight 8, min(window 8, flight 8) = 8, half rounded up = 4; recovery = 8 tickets started
    assert window.overloaded(3) is True
    assert (window.window, window.in_flight, window.recovery, window.decreases) == (4, 7, 8, 1)
    # tickets 5 and 6 were sent before that decrease: the same crowding, no second cut
    assert window.overloaded(5) is False and window.overloaded(6) is False
    assert (window.window, window.in_flight, window.decreases, window.overloads) == (4, 5, 1, 3)
    # a request sent after the cut (ticket 8) may cut again, from min(window 4, flight 6) = 4 -> 2
    window.released(0)
    window.released(1)  # 3 in flight
    assert window.has_room()
    ticket = window.start()  # 8; 4 in flight
    assert ticket == 8 and window.overloaded(ticket) is True
    assert (window.window, window.recovery, window.decreases) == (2, 9, 2)


def test_the_cut_starts_from_the_requests_in_flight_and_never_goes_below_one():
    # unbounded: the first 429 comes with 10 in flight -> (10 + 1) // 2 = 5
    window = AimdWindow()
    assert window.window is None and window.has_room()
    for _ in range(10):
        window.start()
    assert window.overloaded(9) is True and window.window == 5
    # an overgrown window (20) with 3 in flight falls to half the flight: (3 + 1) // 2 = 2
    window = AimdWindow(ceiling=20)
    for _ in range(3):
        window.start()
    window.overloaded(2)
    assert window.window == 2
    # the floor: 1 in flight -> (1 + 1) // 2 = 1, and again 1
    window = AimdWindow(ceiling=1)
    window.overloaded(window.start())
    assert window.window == 1
    window.overloaded(window.start())  # ticket 1 >= recovery 1: a new round, still 1
    assert window.window == 1 and window.decreases == 2


def test_full_windows_of_successes_grow_the_window_by_one():
    window = AimdWindow(ceiling=10, window=2)
    t0, t1 = window.start(), window.start()
    window.succeeded(t0)  # flight 2 >= window 2: credit 1
    t2 = window.start()
    window.succeeded(t1)  # flight 2: credit 2 = window -> window 3, credit 0
    assert (window.window, window.credit) == (3, 0)
    t3, t4 = window.start(), window.start()  # 3 in flight: t2, t3, t4
    window.succeeded(t2)  # credit 1
    t5 = window.start()
    window.succeeded(t3)  # credit 2
    window.start()
    window.succeeded(t4)  # credit 3 = window -> 4
    assert (window.window, window.credit) == (4, 0)
    assert t5 == 5


def test_successes_below_a_full_window_do_not_grow_it():
    window = AimdWindow(ceiling=10, window=4)
    for _ in range(20):  # one request at a time: the window is never the limit
        window.succeeded(window.start())
    assert (window.window, window.credit) == (4, 0)
    unbounded = AimdWindow()
    for _ in range(5):
        unbounded.succeeded(unbounded.start())
    assert unbounded.window is None


def test_growth_stops_at_the_ceiling():
    window = AimdWindow(ceiling=3, window=2)
    for _ in range(3):  # keep 2, then 3, in flight
        while window.has_room():
            window.start()
        window.succeeded(0)
    # 2 full successes: 2 -> 3; from then on the ceiling holds
    assert window.window == 3
    for _ in range(9):
        while window.has_room():
            window.start()
        window.succeeded(0)
    assert window.window == 3


def test_successes_of_requests_sent_before_a_cut_do_not_count():
    window = AimdWindow(ceiling=4)
    tickets = [window.start() for _ in range(4)]
    window.overloaded(tickets[3])  # (4 + 1) // 2 = 2; recovery 4
    window.succeeded(tickets[0])  # flight 3 >= 2, but ticket 0 < 4: sent under the old window
    window.succeeded(tickets[1])
    assert (window.window, window.credit) == (2, 0)
    a, b = window.start(), window.start()  # tickets 4, 5: 3 in flight with ticket 2
    window.succeeded(a)  # flight 3 >= 2, ticket 4 >= 4: credit 1
    assert window.credit == 1 and b == 5


def test_a_ceiling_below_one_is_refused():
    with pytest.raises(ValueError, match="ceiling must be >= 1"):
        AimdWindow(ceiling=0)
    with pytest.raises(ValueError, match="ceiling must be >= 1"):
        ClientPool(ceiling=0)


def test_what_counts_as_an_overload():
    assert is_overload(status_error(429)) and is_overload(status_error(503)) and is_overload(status_error(529))
    assert not is_overload(status_error(500)) and not is_overload(status_error(400))
    assert not is_overload(TimeoutError()) and not is_overload(None)


# --------------------------------------------------------------------------
# AdaptiveLimiter: the window in an event loop
# --------------------------------------------------------------------------


def test_the_limiter_holds_requests_beyond_the_window_and_lets_them_in_in_order():
    async def main() -> list[str]:
        limiter = AdaptiveLimiter(ceiling=2)
        order: list[str] = []
        release = {name: asyncio.Event() for name in "abcd"}

        async def request(name: str) -> None:
            async with limiter.slot():
                order.append(name)
                await release[name].wait()

        tasks = [asyncio.create_task(request(name)) for name in "abcd"]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert order == ["a", "b"] and limiter.in_flight == 2  # c and d wait
        release["b"].set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert order == ["a", "b", "c"]  # the oldest waiter first
        for event in release.values():
            event.set()
        await asyncio.gather(*tasks)
        assert limiter.in_flight == 0
        return order

    assert asyncio.run(main()) == ["a", "b", "c", "d"]


def test_the_limiter_learns_from_each_slot_and_marks_crowded_429s():
    async def main() -> None:
        limiter = AdaptiveLimiter(concurrency=8, ceiling=4)  # the lower of the two: 4
        assert limiter.level == 4
        slots = [limiter.slot() for _ in range(4)]
        for slot in slots:
            await slot.__aenter__()
        await slots[0].__aexit__(RuntimeError, status_error(429), None)  # flight 4 -> (4 + 1) // 2 = 2
        assert limiter.level == 2 and slots[0].crowded  # 3 others were in flight
        await slots[1].__aexit__(RuntimeError, status_error(503), None)  # same round: no cut; a 503 is charged
        assert limiter.level == 2 and not slots[1].crowded
        await slots[2].__aexit__(None, None, None)
        await slots[3].__aexit__(None, None, None)
        assert limiter.in_flight == 0 and limiter.window.overloads == 2
        alone = limiter.slot()
        await alone.__aenter__()
        await alone.__aexit__(RuntimeError, status_error(429), None)  # nobody else in flight: the request's own
        assert not alone.crowded and limiter.level == 1  # a new round: (1 + 1) // 2 = 1

    asyncio.run(main())


def test_a_cancelled_waiter_gives_its_place_back():
    async def main() -> None:
        limiter = AdaptiveLimiter(ceiling=1)
        first = limiter.slot()
        await first.__aenter__()
        waiting = asyncio.create_task(limiter.slot().__aenter__())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await first.__aexit__(None, None, None)
        assert limiter.in_flight == 0 and not limiter._waiters
        again = limiter.slot()
        await asyncio.wait_for(again.__aenter__(), 1)  # the place is free, not held by the cancelled one
        await again.__aexit__(None, None, None)

    asyncio.run(main())


def test_the_rpm_spacing_still_applies_under_the_window():
    assert issubclass(AdaptiveLimiter, RateLimiter)
    limiter = AdaptiveLimiter(rpm=120, concurrency=3)
    assert limiter._interval == 0.5 and limiter.level == 3  # 60 / 120 rpm = 0.5 s between starts


# --------------------------------------------------------------------------
# the pool: one window per endpoint, and what the progress bar shows
# --------------------------------------------------------------------------


def test_the_pool_shares_one_window_per_endpoint_and_reports_it():
    async def main() -> None:
        async with ClientPool(ceiling=16) as pool:
            a = pool.client(RoleConfig(Endpoint("model-a", "http://127.0.0.1:9/v1", KEY_ENV)))
            b = pool.client(RoleConfig(Endpoint("model-a", "http://127.0.0.1:9/v1", KEY_ENV), temperature=0.0))
            c = pool.client(RoleConfig(Endpoint("model-c", "http://127.0.0.1:9/v1", KEY_ENV), concurrency=4))
            assert a.limiter is b.limiter and a.limiter is not c.limiter
            levels = pool.concurrency_levels()
            assert levels == {"model-a@http://127.0.0.1:9/v1": 16, "model-c@http://127.0.0.1:9/v1": 4}
            assert set(pool.in_flight().values()) == {0}
            gc.collect()  # pools of earlier tests left unclosed and unreferenced are gone
            async with a.limiter.slot():
                assert "1/16 0/4" in endpoint_load()["inflight"]  # this pool's endpoints, in order
        assert "1/16 0/4" not in endpoint_load().get("inflight", "")  # a closed pool is not shown

    asyncio.run(main())


def test_a_pool_without_adaptation_keeps_the_fixed_limits():
    async def main() -> None:
        async with ClientPool(adaptive=False) as pool:
            client = pool.client(RoleConfig(Endpoint("m", "http://127.0.0.1:9/v1", KEY_ENV), concurrency=2))
            assert type(client.limiter) is RateLimiter and pool.concurrency_levels() == {}

    asyncio.run(main())


def test_a_crowded_429_is_not_charged_to_max_retries_but_a_lone_one_is():
    """Two requests at once, max_retries 0: the scripted server refuses the
    first one it sees with a 429 while the other is in flight (crowded: a free
    try), then answers; a request alone that gets a 429 fails at once."""
    def role(server: ChatServer) -> RoleConfig:
        return RoleConfig(Endpoint("m", server.base_url, KEY_ENV), max_retries=0, retry_initial_wait=0.01,
                          retry_max_wait=0.01)

    async def pair(server: ChatServer) -> list:
        async with ClientPool() as pool:
            client = pool.client(role(server))
            return await asyncio.gather(*(client.complete([{"role": "user", "content": str(i)}]) for i in range(2)),
                                        return_exceptions=True)

    # the 429 comes after 0.2 s, while the other request (answered after 0.5 s) is still in flight
    with ChatServer([error(429, retry_after=0, delay=0.2), Reply(content="slow", delay=0.5), "ok"]) as server:
        results = asyncio.run(pair(server))
    assert [getattr(r, "content", r) for r in results].count("ok") == 1, results
    assert len(server.requests) == 3
    with ChatServer([error(429, retry_after=0), "never"]) as server:
        async def alone() -> None:
            async with ClientPool() as pool:
                client = pool.client(role(server))
                await client.complete([{"role": "user", "content": "x"}])

        with pytest.raises(InfrastructureError, match="HTTP 429"):
            asyncio.run(alone())
        assert len(server.requests) == 1
    assert MAX_CROWDED_TRIES >= 1


# --------------------------------------------------------------------------
# end to end: cirrus eval against an endpoint that serves 4 requests at once
# --------------------------------------------------------------------------

LIMIT = 4
CONCURRENCY = 4 * LIMIT  # attempts at once: the first burst is 4x what the endpoint serves
TASKS = 40  # 3 checkpoints each: 120 agent calls, 30 full rounds of the endpoint's 4 places


def test_cirrus_eval_follows_an_endpoint_that_serves_n_requests_at_once(tmp_path: Path):
    """--concurrency 16 against a server serving 4 at once: every attempt
    succeeds, the 429s are a small share of the requests, and the server is
    kept busy (>= 0.6 * 4 requests in service on average).

    Why 0.2 s per answer (not 50 ms): the client (SDK, walk, judges, run
    store) runs on the same loaded cores; at 50 ms even a fixed limit of
    exactly 4 keeps only ~2 requests in service on average on a busy 2-core
    machine (the client's own work between answers dominates), which would
    measure the machine, not the limiter.  The 429 share: the first burst of
    16 is refused but for 4 (12), then the retries while the window falls
    8 -> 4 (about 8 more), then about one per sawtooth of the window
    (3 -> 4 -> 5: one refusal per ~12 answers): about 20 + 120 / 12 = 30 of
    ~150 requests, ~20 % (measured 18 %); asserted below 30 %.  (The burst's
    refusals are a fixed cost: with --concurrency 32 the run would need ~80
    tasks, 12 s of answers, to bring them under 30 %.)"""
    workspace = write_workspace(tmp_path, [make_task(f"T-{i:03d}", False) for i in range(TASKS)])
    with LimitedServerProcess(LIMIT, delay=0.2) as server:
        result = CliRunner().invoke(app, [
            "eval", "--model", "limited", "--base-url", server.base_url, "--api-key-env", KEY_ENV,
            "--judge-model", "local", "--fluency-model", "local", "--concurrency", str(CONCURRENCY),
            "--run-id", "adaptive", "-w", str(workspace), "-q",
        ], env={KEY_ENV: KEY})
        stats = server.stats()
    assert result.exit_code == 0, result.output
    tasks = pl.read_parquet(workspace / "reports" / "adaptive" / "tasks.parquet")
    assert tasks.height == TASKS and set(tasks["status"]) == {"ok"}  # no error rows
    assert tasks["covered"].to_list() == [3] * TASKS  # every checkpoint walked: 3 answers per task
    summary = json.loads((workspace / "reports" / "adaptive" / "summary.json").read_text())
    assert summary["errors"] == 0
    served, rejected = stats["served"], stats["rejected"]
    assert served == TASKS * 3 + 1  # + the endpoint check before the run
    assert stats["peak"] <= LIMIT
    assert rejected / (served + rejected) < 0.30, stats
    assert stats["mean_in_flight"] >= 0.6 * LIMIT, stats
