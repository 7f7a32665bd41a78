"""Whose answer the event loop works on first.

With hundreds of calls in flight, answers arrive in bursts, and the one event
loop does each answer's work (read it, judge it, build and send the next
request) one after the other, in the order they arrived.  The attempt with
the run's longest chain of calls then waits behind work that had time to
spare, on every one of its calls, and the whole run ends later: at
``--concurrency 256`` on the tau-bench workspace, answers waited 80-100 ms
each (issue 28, the chain-bound regime).

Inside :func:`attempt_turns`, an answer waits for its turn before that work,
and turns go to the attempt with the most calls still ahead of it: the calls
its task's recorded log leads one to expect
(:func:`cirrus.evaluate.tasks.expected_calls`), less the calls it has made.
One turn is given per pass of the event loop, so an answer that arrives
meanwhile can still go first.  Outside
:func:`attempt_turns` (a single call, ingest's annotator) nothing waits."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


class Turns:
    """The queue of answers waiting for the event loop, most calls ahead first
    (then first come, first served)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._releasing = False

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait(self, calls_ahead: int) -> None:
        """Return when it is this answer's turn."""
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiting, (-calls_ahead, next(self._order), turn))
        if not self._releasing:
            self._releasing = True
            loop.call_soon(self._release)
        await turn

    def _release(self) -> None:
        # the answer whose turn it is runs in the next pass, before this
        # method's next call: one turn per pass, with new answers read between
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():  # a cancelled wait (a timeout, Ctrl-C) gives its turn away
                turn.set_result(None)
                break
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._release)
        else:
            self._releasing = False


@dataclass
class Claim:
    """One attempt's place in :class:`Turns`: its calls still expected, and
    the calls it has made (answers received)."""

    turns: Turns
    calls_ahead: int
    calls_made: int = 0


_CLAIM: ContextVar[Claim | None] = ContextVar("cirrus_turn_claim", default=None)


@contextmanager
def attempt_turns(turns: Turns, calls_expected: int) -> Iterator[Claim]:
    """The model calls made inside the block (tasks started from it included)
    wait for their turn in ``turns``, as one attempt expected to make
    ``calls_expected`` calls; the block gets the attempt's :class:`Claim`."""
    claim = Claim(turns, calls_expected)
    token = _CLAIM.set(claim)
    try:
        yield claim
    finally:
        _CLAIM.reset(token)


async def start_turn() -> None:
    """Called as an attempt starts: reading its task and its cassette and
    building its first request wait for a turn too.  At the start of a run
    every worker starts an attempt at once, and in arrival order the first
    answers (the longest attempt's among them) waited behind all of that:
    0.7 s at ``--concurrency 256``."""
    claim = _CLAIM.get()
    if claim is not None:
        await claim.turns.wait(claim.calls_ahead)


async def my_turn() -> None:
    """Called once per answer received: wait for the turn of the attempt
    this call belongs to (no wait outside :func:`attempt_turns`)."""
    claim = _CLAIM.get()
    if claim is None:
        return
    claim.calls_ahead -= 1
    claim.calls_made += 1
    await claim.turns.wait(claim.calls_ahead)

