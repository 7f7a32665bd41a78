"""Limits on the requests to one endpoint.

:class:`RateLimiter` holds the fixed limits of ``cirrus.toml`` (requests per
minute, requests in flight) and the common pause after a 429's
``Retry-After``.  :class:`AdaptiveLimiter` adds a window of requests in
flight that follows the endpoint (:class:`AimdWindow`, additive increase and
multiplicative decrease, as TCP does): see docs/concurrency.md.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

# answers that say "fewer requests at once, please": 429 Too Many Requests;
# 503 Service Unavailable, which OpenAI ("the engine is currently overloaded"),
# vLLM-fronting gateways and load balancers send when their queue is full;
# 529, Anthropic's "overloaded".  Other errors (a 500, a timeout, a refused
# connection) say nothing about concurrency and leave the window as it is.
OVERLOAD_STATUSES = frozenset({429, 503, 529})
# A 429 to a try sent while other requests to the endpoint were in flight is
# the crowd's doing, not the request's: the window shrinks and the try is not
# charged to ``RoleConfig.max_retries``, at most this many times per request
# (enough to halve a window of 256 down to 1).  A 503 or 529 shrinks the
# window too but is charged: it may as well mean the server is down.
MAX_CROWDED_TRIES = 8


class RateLimiter:
    """Bounds the requests to one endpoint: at most ``concurrency`` in flight,
    starts spaced at least ``60 / rpm`` seconds apart, and a common pause
    after a 429 with ``Retry-After``.  Use as ``async with limiter:``.  Bound
    to the event loop it is first used in."""

    def __init__(self, rpm: float | None = None, concurrency: int | None = None) -> None:
        self.rpm = rpm
        self.concurrency = concurrency
        self._interval = 60.0 / rpm if rpm else 0.0
        self._next_start = 0.0
        self._paused_until = 0.0
        self._semaphore = asyncio.Semaphore(concurrency) if concurrency else None

    def pause(self, seconds: float) -> None:
        """Start no request for ``seconds`` from now (a server asked us to wait)."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    async def _wait_turn(self) -> None:
        while True:
            now = time.monotonic()
            if self._paused_until > now:
                await asyncio.sleep(self._paused_until - now)
                continue
            if not self._interval:
                return
            start = max(now, self._next_start)
            self._next_start = start + self._interval
            if start > now:
                await asyncio.sleep(start - now)
            return

    async def __aenter__(self) -> RateLimiter:
        if self._semaphore is not None:
            await self._semaphore.acquire()
        try:
            await self._wait_turn()
        except BaseException:
            if self._semaphore is not None:
                self._semaphore.release()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._semaphore is not None:
            self._semaphore.release()


    def slot(self) -> Any:
        """The async context manager of one request (``async with
        limiter.slot():``); here the limiter itself, which learns nothing
        from the outcome.  :class:`AdaptiveLimiter` returns one that does."""
        return self


@dataclass
class AimdWindow:
    """How many requests to one endpoint may be in flight: pure bookkeeping,
    no clock and no event loop (:class:`AdaptiveLimiter` drives it).

    The window starts at ``ceiling`` (``None``: no bound until the endpoint
    first pushes back).  Every request started gets a ticket (0, 1, 2, ...).

    * An overload answer (:data:`OVERLOAD_STATUSES`) halves the window, from
      the smaller of the window and the requests in flight when it came (the
      refused one included; RFC 5681 halves the flight size, not the window,
      so an unbounded or overgrown window falls to what was really sent),
      rounded up (never below 1).  The requests started before that decrease saw the same
      crowding: their overloads (tickets below ``recovery``) change nothing,
      so a burst of refusals from one round halves the window once.
    * A success while the window was full (as many requests in flight as the
      window allows, this one included) counts towards growth; after
      ``window`` such successes the window grows by 1, up to ``ceiling``.
      Successes while the window was not full prove nothing about a larger
      one (RFC 7661), nor do those of requests started before the last
      decrease (they were sent under the old window): neither counts.
    """

    ceiling: int | None = None
    window: int | None = None  # None: unbounded; set from ceiling when not given
    in_flight: int = 0
    started: int = 0  # tickets handed out
    recovery: int = 0  # overloads of tickets below this belong to the last decrease
    credit: int = 0  # successes counted towards the next +1
    decreases: int = 0
    overloads: int = 0

    def __post_init__(self) -> None:
        if self.ceiling is not None and self.ceiling < 1:
            raise ValueError("the concurrency ceiling must be >= 1 (or None for no bound)")
        if self.window is None:
            self.window = self.ceiling

    def has_room(self) -> bool:
        return self.window is None or self.in_flight < self.window

    def start(self) -> int:
        """A request starts (the caller checked :meth:`has_room`); its ticket."""
        ticket = self.started
        self.started += 1
        self.in_flight += 1
        return ticket

    def succeeded(self, ticket: int) -> None:
        """The request of ``ticket`` was answered (not an overload)."""
        flight = self.in_flight
        self.in_flight -= 1
        if self.window is None or flight < self.window or ticket < self.recovery:
            return
        if self.ceiling is not None and self.window >= self.ceiling:
            return
        self.credit += 1
        if self.credit >= self.window:
            self.window += 1
            self.credit = 0

    def overloaded(self, ticket: int) -> bool:
        """The request of ``ticket`` got an overload answer; whether the
        window was halved (``False``: the last decrease already covered it)."""
        flight = self.in_flight
        self.in_flight -= 1
        self.overloads += 1
        if ticket < self.recovery:
            return False
        base = flight if self.window is None else min(self.window, flight)
        self.window = max(1, (base + 1) // 2)  # half, rounded up: 5 -> 3 (a cut of 40 %, not 60 %)
        self.credit = 0
        self.recovery = self.started
        self.decreases += 1
        return True

    def released(self, ticket: int) -> None:
        """The request of ``ticket`` ended otherwise (another error, a
        cancellation): the window learns nothing."""
        self.in_flight -= 1


def is_overload(exc: BaseException | None) -> bool:
    """Whether ``exc`` is an HTTP answer asking for fewer requests at once."""
    return getattr(exc, "status_code", None) in OVERLOAD_STATUSES and hasattr(exc, "response")


class AdaptiveLimiter(RateLimiter):
    """A :class:`RateLimiter` whose bound on the requests in flight is an
    :class:`AimdWindow` that follows the endpoint's overload answers, within
    ``min(concurrency, ceiling)`` (either may be ``None``).  Requests waiting
    for room start in arrival order; the rpm spacing and the ``Retry-After``
    pause still apply to every start.  Use ``async with limiter.slot():``
    around one try, so the window learns the try's outcome (a plain ``async
    with limiter:`` holds a place but teaches nothing).  Bound to the event
    loop it is first used in."""

    def __init__(self, rpm: float | None = None, concurrency: int | None = None, *,
                 ceiling: int | None = None, label: str = "") -> None:
        super().__init__(rpm, None)  # the window replaces the fixed semaphore
        self.concurrency = concurrency
        bounds = [limit for limit in (concurrency, ceiling) if limit is not None]
        self.window = AimdWindow(min(bounds) if bounds else None)
        self.label = label
        self._waiters: deque[asyncio.Future[int]] = deque()

    @property
    def level(self) -> int | None:
        """The requests in flight allowed now (``None``: no bound yet)."""
        return self.window.window

    @property
    def in_flight(self) -> int:
        return self.window.in_flight

    def slot(self) -> _Slot:
        return _Slot(self)

    async def _enter(self) -> int:
        if not self._waiters and self.window.has_room():
            ticket = self.window.start()
        else:
            waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                ticket = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():  # given a place, then cancelled
                    self._leave(waiter.result(), None)
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        try:
            await self._wait_turn()
        except BaseException:
            self._leave(ticket, None)
            raise
        return ticket

    def _leave(self, ticket: int, outcome: BaseException | None, *, answered: bool = False) -> None:
        if answered:
            self.window.succeeded(ticket)
        elif is_overload(outcome):
            self.window.overloaded(ticket)
        else:
            self.window.released(ticket)
        self._wake()

    def _wake(self) -> None:
        """Hand the room there is to the oldest waiters."""
        while self._waiters and self.window.has_room():
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(self.window.start())

    async def __aenter__(self) -> AdaptiveLimiter:
        await self._enter()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._leave(-1, None)  # a place given back; the ticket is not needed to learn nothing


class _Slot:
    """One try's place in an :class:`AdaptiveLimiter`.  ``crowded`` is set
    when the try got a 429 while other requests to the endpoint were in
    flight too (see :data:`MAX_CROWDED_TRIES`)."""

    __slots__ = ("crowded", "limiter", "ticket")

    def __init__(self, limiter: AdaptiveLimiter) -> None:
        self.limiter = limiter
        self.ticket = -1
        self.crowded = False

    async def __aenter__(self) -> _Slot:
        self.ticket = await self.limiter._enter()
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.crowded = getattr(exc, "status_code", None) == 429 and is_overload(exc) and self.limiter.in_flight > 1
        self.limiter._leave(self.ticket, exc, answered=exc is None)
