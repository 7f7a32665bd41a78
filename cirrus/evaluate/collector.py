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
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

_Command = TypeVar("_Command", bound=Callable[..., Any])

COLLECT_EVERY = 512  # committed attempts between two full collections

_NEVER = 1 << 30  # a full-collection threshold no run reaches


class RunCollector:
    def __init__(self, every: int = COLLECT_EVERY) -> None:
        self.every = max(1, every)
        self._since = 0
        self._thresholds: tuple[int, int, int] | None = None
        self._froze = False

    def __enter__(self) -> RunCollector:
        self._thresholds = gc.get_threshold()
        young, middle, _ = self._thresholds
        # unfrozen on leaving only when nothing was frozen before: an outer
        # collector's freeze, or an embedding application's, is left to its owner
        self._froze = gc.get_freeze_count() == 0
        gc.freeze()
        gc.set_threshold(young, middle, _NEVER)
        return self

    def attempt_done(self) -> None:
        """One attempt committed; every ``every``-th runs a full collection."""
        self._since += 1
        if self._since >= self.every:
            self._since = 0
            gc.collect()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
        if self._froze:
            gc.unfreeze()


def held_for_the_command(command: _Command) -> _Command:
    """``command`` run inside a :class:`RunCollector` (its signature kept,
    for typer)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        with RunCollector():
            return command(*args, **kwargs)

    return run  # type: ignore[return-value]
