"""Python's garbage collector while a run's attempts are in flight.

CPython's full collection (of its oldest generation) holds the event loop
while it scans every container object the process keeps.  It starts whenever
the objects that outlived two young collections have grown by a quarter, and
with hundreds of calls in flight every answer's objects live long enough to
count: at ``--concurrency 256`` on the tau-bench workspace it ran every one
or two seconds, 60-300 ms each time, 1.2 s of a 15 s run during which no
answer was read (issue 28; ``benchmarks/results/eval_cpu.md``).

Within :class:`RunCollector`:

* what exists when the attempts start (the modules imported, the task index,
  the clients) is frozen (``gc.freeze``): no collection scans it again, and
  reference counting still frees it;
* full collections are left to the run: one after every
  ``every`` committed attempts, not on the quarter rule.  Young collections
  run as before, so short-lived reference cycles are freed as they were; the
  cycles that outlive them wait for the next full collection, so memory
  holds at most ``every`` attempts' worth of them (about 3 KiB per model call
  measured on the tau-bench workspace).

On leaving, the thresholds are restored and the objects frozen here unfrozen,
so a process that runs several evaluations (the tests, a notebook) collects
as before between them.  ``cirrus eval`` holds one for the whole command
(:func:`held_for_the_command`): restored after the run's files are written,
the thresholds would start, at once, the full collection the run put off
(0.3 s), just before the process ends without one.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

_Command = TypeVar("_Command", bound=Callable[..., Any])

COLLECT_EVERY = 512  # committed attempts between two full collections

_NEVER = 1 << 30  # a full-collection threshold no run reaches


_lock = threading.Lock()
_held = 0  # RunCollectors inside their block, in every thread of the process
_saved: tuple[int, int, int] = (700, 10, 10)  # the thresholds to restore when the last one leaves
_unfreeze = False  # whether the first one found nothing frozen (then the last one unfreezes)


class RunCollector:
    """Held while a run's attempts are in flight (or a whole command).  The
    garbage collector is one per process: collectors nest and may be held by
    several threads at once (two evaluations in one process), so the first
    one in saves the settings and the last one out restores them."""

    def __init__(self, every: int = COLLECT_EVERY) -> None:
        self.every = max(1, every)
        self._since = 0

    def __enter__(self) -> RunCollector:
        global _held, _saved, _unfreeze
        with _lock:
            if _held == 0:
                _saved = gc.get_threshold()
                # an embedding application's freeze is left to its owner
                _unfreeze = gc.get_freeze_count() == 0
                gc.set_threshold(_saved[0], _saved[1], _NEVER)
            _held += 1
            gc.freeze()  # what exists now, whatever an outer collector froze before
        return self

    def attempt_done(self) -> None:
        """One attempt committed; every ``every``-th runs a full collection."""
        self._since += 1
        if self._since >= self.every:
            self._since = 0
            gc.collect()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        global _held
        with _lock:
            _held -= 1
            if _held == 0:
                gc.set_threshold(*_saved)
                if _unfreeze:
                    gc.unfreeze()


def held_for_the_command(command: _Command) -> _Command:
    """``command`` run inside a :class:`RunCollector` (its signature kept,
    for typer)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        with RunCollector():
            return command(*args, **kwargs)

    return run  # type: ignore[return-value]
