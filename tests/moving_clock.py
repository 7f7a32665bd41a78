"""An event-loop clock a test moves forward, so a timeout fires when the test
says and not after a wall-clock wait.

A test of "the first try hangs, the retry answers" with a real short timeout
depends on the machine: the retry's answer must also arrive within that
timeout, and on a loaded CI machine it sometimes does not.  Here the role's
timeout is long (30 s), and the scripted server moves the clock past it the
moment it starts to stall (``ChatServer(on_stall=clock.jump)``): the stalled
try times out at once, and the retry has the whole 30 s."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class MovingClock:
    def __init__(self) -> None:
        self.skew = 0.0  # seconds added to every loop's clock
        self._loops: list[asyncio.AbstractEventLoop] = []

    def jump(self, seconds: float = 3600.0) -> None:
        """Move the clock forward (from any thread); each loop wakes up and
        fires the timers that fell due."""
        self.skew += seconds
        for loop in list(self._loops):
            if not loop.is_closed():
                loop.call_soon_threadsafe(lambda: None)

    def jump_soon(self, seconds: float, after: float = 0.2) -> None:
        """Jump ``seconds`` forward ``after`` real seconds from now (from a
        timer thread): a server calls it as it answers a try the client will
        retry, so that the client's backoff sleep (begun by then) ends at
        once.  Only the time a test takes depends on when the jump comes:
        ``seconds`` is chosen well below every timeout of the requests that
        may be in flight then, so a jump that comes early, late or in the
        middle of another request cuts nothing."""
        timer = threading.Timer(after, self.jump, (seconds,))
        timer.daemon = True
        timer.start()


class _MovedLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: MovingClock) -> None:
        super().__init__()
        self._clock = clock

    def time(self) -> float:
        return super().time() + self._clock.skew


@contextmanager
def moving_clock() -> Iterator[MovingClock]:
    """Every event loop made inside the block (``asyncio.run`` included) runs
    on the returned clock."""
    clock = MovingClock()

    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            loop = _MovedLoop(clock)
            clock._loops.append(loop)
            return loop

    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(Policy())
    try:
        yield clock
    finally:
        asyncio.set_event_loop_policy(previous)
