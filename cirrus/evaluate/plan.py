"""Which attempt starts next, once the run has started.

The first ``--concurrency`` attempts start longest first, by the model calls
their tasks' recorded logs lead one to expect (:func:`logged_calls`): one
agent round per recorded tool call, every reply accepted.  The model under
test decides otherwise: it may make several tool calls in one round, search
its knowledge first, or fail a checkpoint and end its walk there.

So the run learns as it goes (:class:`LengthModel`): each checkpoint a walk
reaches says how many agent rounds a checkpoint with that many recorded tool
calls took, how many judge and fluency calls followed, and whether the walk
went on; in subtask mode, each subtask says the agent's rounds.  The
attempts not yet started are then ordered to pack onto the slots as they
free up (:func:`start_order`, with each task's expected length re-estimated
and each attempt in flight's calls still ahead).

The queue is planned when the first slot frees up, then each time the run
has learned twice as much; not more often (planned again every few starts,
the order chased the noise of call times and packed worse in simulation).
It is planned only while at most :data:`PLAN_LIMIT_PER_SLOT` attempts per
slot and :data:`PLAN_LIMIT_WORK` waiting attempts x slots are left: further
from the end longest first is as good, and a plan runs on the event loop
(about 1 ms for 188 attempts on 64 slots).

Where a slot runs only four or five attempts over the run, longest first
leaves a tail: on the tau-bench workspace at ``--concurrency 64``, the
attempts' true lengths in longest-first order by the log's estimate end
after 20.4 s of calls, where the load's bound is 19.2 s; in the planned
order with learned lengths, after 19.6 s (issue 28,
``benchmarks/results/eval_cpu.md``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from cirrus.schema import Checkpoint

Key = TypeVar("Key")

# the recorded tool-call counts learned apart: 0, 1, 2, 3, and 4 or more
_BUCKETS = 4
# the run plans its queue only while at most this many attempts per slot are
# left, and (a plan's cost grows with both) at most PLAN_LIMIT_WORK waiting x slots
PLAN_LIMIT_PER_SLOT = 8
PLAN_LIMIT_WORK = 1 << 16


@dataclass
class _Mean:
    """A mean that starts at a prior worth ``weight`` observations."""

    prior: float
    weight: float
    total: float = 0.0
    count: float = 0.0

    def add(self, value: float, count: float = 1.0) -> None:
        self.total += value
        self.count += count

    @property
    def value(self) -> float:
        return (self.prior * self.weight + self.total) / (self.weight + self.count)


# what the recorded log says of one checkpoint: its tool calls, and whether its
# reference reply has text (the coverage judge is asked about it only then)
CheckpointShape = tuple[int, bool]


# one object per distinct shape: a run over 100,000 tasks keeps every task's
# shapes (TaskRef.shape), mostly the same few
_SHAPES: dict[CheckpointShape, CheckpointShape] = {}


def shapes(checkpoints: Sequence[Checkpoint]) -> tuple[CheckpointShape, ...]:
    """The :data:`CheckpointShape` of each of a task's checkpoints, in order."""
    return tuple(_SHAPES.setdefault(shape, shape) for shape in
                 ((len(checkpoint.tool_calls), bool(checkpoint.reply.strip())) for checkpoint in checkpoints))


def judging_calls(shape: Sequence[CheckpointShape], k: int) -> int:
    """The judge's and the fluency checker's calls at checkpoint ``k``
    (0-based) of a walk that goes on after it: the judge on its reference
    and, before the next checkpoint, on the next one, and the fluency
    check; only the first after the last checkpoint."""
    judged = int(shape[k][1])
    if k == len(shape) - 1:
        return judged
    return judged + int(shape[k + 1][1]) + 1


def logged_calls(shape: Sequence[CheckpointShape]) -> int:
    """The model calls of a walk that follows the recorded log: at each
    checkpoint the agent's reply and one round per recorded tool call, and
    :func:`judging_calls`."""
    return sum(1 + tool_calls + judging_calls(shape, k) for k, (tool_calls, _) in enumerate(shape))


@dataclass
class LengthModel:
    """Model calls per checkpoint, learned from the checkpoints a run's walks
    reach, starting from the recorded log's count (:func:`logged_calls`).

    What is learned, each from a prior worth ``prior_weight`` observations:

    * the agent's rounds: at a checkpoint without recorded tool calls, 1
      plus the mean of extra rounds (prior 0); with ``t`` recorded calls,
      ``1 + r * t``, ``r`` learned per count (1, 2, 3, 4 or more; prior 1:
      one round per recorded call, as the log made them);
    * the judge's and the fluency checker's calls, as a share of
      :func:`judging_calls` (prior 1), apart for the checkpoints the walk
      went on after, ended at, and stopped at (a rejected reply: the judge
      once);
    * how often the walk goes on (prior: always), and how many later
      checkpoints a reply covers (prior 0): a covered checkpoint is not asked.
    """

    prior_weight: float = 4.0
    observations: int = 0
    _extra_rounds: _Mean = field(init=False)
    _rounds_per_call: list[_Mean] = field(init=False)
    _judging: dict[str, _Mean] = field(init=False)
    _went_on: _Mean = field(init=False)
    _covered_later: _Mean = field(init=False)

    def __post_init__(self) -> None:
        weight = self.prior_weight
        self._extra_rounds = _Mean(0.0, weight)
        self._rounds_per_call = [_Mean(1.0, weight) for _ in range(_BUCKETS)]
        self._judging = {outcome: _Mean(1.0, weight) for outcome in ("went on", "ended", "stopped")}
        self._went_on = _Mean(1.0, weight)
        self._covered_later = _Mean(0.0, weight)

    def observe(self, shape: Sequence[CheckpointShape], k: int, agent_calls: int, judging: int | None, *,
                covered_later: int = 0, outcome: str) -> None:
        """Checkpoint ``k`` (0-based) of a walk over checkpoints of this
        ``shape``: the agent's model calls on it, the judge's and fluency
        checker's (``None``: not counted), the later checkpoints its reply
        covered, and what the walk did next (``outcome``: "went on", "ended"
        after the last checkpoint, or "stopped")."""
        self.observe_agent(shape[k][0], agent_calls)
        expected = int(shape[k][1]) if outcome == "stopped" else judging_calls(shape, k)
        if judging is not None and expected:
            self._judging[outcome].add(max(0, judging), expected)
        if outcome != "ended":
            self._went_on.add(1.0 if outcome == "went on" else 0.0)
        if outcome == "went on":
            self._covered_later.add(max(0, covered_later))

    def observe_agent(self, tool_calls: int, agent_calls: int) -> None:
        """The agent's model calls at a checkpoint with ``tool_calls``
        recorded tool calls (all a subtask, asked alone, teaches)."""
        extra = max(0, agent_calls - 1)
        if tool_calls <= 0:
            self._extra_rounds.add(extra)
        else:
            self._rounds_per_call[min(tool_calls, _BUCKETS) - 1].add(extra, tool_calls)
        self.observations += 1

    def agent_calls(self, tool_calls: int) -> float:
        """The agent's expected calls at a checkpoint with ``tool_calls`` recorded tool calls."""
        if tool_calls <= 0:
            return 1.0 + self._extra_rounds.value
        return 1.0 + self._rounds_per_call[min(tool_calls, _BUCKETS) - 1].value * tool_calls

    def subtask_calls(self, shape: Sequence[CheckpointShape]) -> float:
        """The expected model calls of a subtask attempt over checkpoints of
        this shape: each checkpoint asked alone, the agent's reply and the
        judge on each reference that has text."""
        return sum(self.agent_calls(tool_calls) + judged for tool_calls, judged in shape)

    def calls(self, shape: Sequence[CheckpointShape]) -> float:
        """The expected model calls of a walk over checkpoints of this shape."""
        going_on = self._went_on.value
        # a reply covers this many later checkpoints on average, so a walk asks about n / (1 + covered) of
        # its n checkpoints: the first, and that share of the others
        count = len(shape)
        asked = 1.0 if count <= 1 else min(1.0, max(0.0, (count / (1.0 + self._covered_later.value) - 1.0)
                                                      / (count - 1)))
        on, ended, stopped = (self._judging[o].value for o in ("went on", "ended", "stopped"))
        alive, total = 1.0, 0.0
        last = len(shape) - 1
        for k, (tool_calls, judged) in enumerate(shape):
            reached = alive * (1.0 if k == 0 else asked)
            if k == last:
                judging = ended * judging_calls(shape, k)
            else:
                judging = going_on * on * judging_calls(shape, k) + (1.0 - going_on) * stopped * judged
            total += reached * (self.agent_calls(tool_calls) + judging)
            alive -= reached * (1.0 - going_on)
        return total


_MODEL: ContextVar[LengthModel | None] = ContextVar("cirrus_length_model", default=None)


@contextmanager
def learning(model: LengthModel) -> Iterator[None]:
    """The checkpoints walks finish inside the block teach ``model``."""
    token = _MODEL.set(model)
    try:
        yield
    finally:
        _MODEL.reset(token)


def checkpoint_done(shape: Sequence[CheckpointShape], k: int, agent_calls: int, judging: int | None, *,
                    covered_later: int = 0, outcome: str) -> None:
    """Called by the walk after each checkpoint it reached (nothing happens
    outside :func:`learning`); the arguments are :meth:`LengthModel.observe`'s."""
    model = _MODEL.get()
    if model is not None:
        model.observe(shape, k, agent_calls, judging, covered_later=covered_later, outcome=outcome)


def subtask_done(recorded_tool_calls: int, agent_calls: int) -> None:
    """Called after each subtask the agent answered (nothing happens outside
    :func:`learning`): :meth:`LengthModel.observe_agent`."""
    model = _MODEL.get()
    if model is not None:
        model.observe_agent(recorded_tool_calls, agent_calls)


def list_finish(busy: Sequence[float], lengths: Sequence[float]) -> float:
    """When the last of ``lengths`` ends, started in this order on slots
    free after ``busy``, each on the first slot to free up."""
    slots = list(busy)
    heapq.heapify(slots)
    end = max(slots, default=0.0)
    for length in lengths:
        finish = heapq.heappop(slots) + length
        end = max(end, finish)
        heapq.heappush(slots, finish)
    return end


def _pack(busy: Sequence[float], ordered: Sequence[tuple[int, float]], horizon: float) -> list[list[int]] | None:
    """First-fit decreasing: each job (in ``ordered``, longest first) on the
    first slot, least busy first, where it still ends by ``horizon``; ``None``
    when one does not fit.  (Best fit packs as tightly, but its order lost
    more to the noise of real call times in the benchmark's simulation.)"""
    slots = sorted(range(len(busy)), key=busy.__getitem__)
    held = [busy[slot] for slot in slots]
    placed: list[list[int]] = [[] for _ in busy]
    for job, length in ordered:
        for at, used in enumerate(held):
            if used + length <= horizon:
                held[at] = used + length
                placed[slots[at]].append(job)
                break
        else:
            return None
    return placed


def start_order(busy: Sequence[float], jobs: Sequence[tuple[Key, float]], *, tolerance: float = 0.5) -> list[Key]:
    """The order to start ``jobs`` ((key, expected length) pairs, in their
    order of preference) on ``len(busy)`` slots, each free after its
    ``busy`` length, each job taken by the first slot to free up.

    MULTIFIT: the smallest horizon (to ``tolerance``) into which first-fit
    decreasing packs every job, then the jobs in the order their slots reach
    them.  When that order, started slot by slot as they free up, does not
    end before longest first would, longest first is kept.  Ties keep the
    order of preference."""
    if not jobs or not busy:
        return [key for key, _ in jobs]
    ordered = sorted(range(len(jobs)), key=lambda i: -jobs[i][1])  # stable: ties in order of preference
    longest_first = [jobs[i][0] for i in ordered]
    by_length = [(i, jobs[i][1]) for i in ordered]
    longest_finish = high = list_finish(busy, [length for _, length in by_length])
    low = max(max(busy), min(busy) + by_length[0][1], (sum(busy) + sum(length for _, length in by_length)) / len(busy))
    best = None
    while high - low > tolerance:
        middle = (low + high) / 2
        placed = _pack(busy, by_length, middle)
        if placed is None:
            low = middle
        else:
            high, best = middle, placed
    if best is None:
        return longest_first
    starts = []
    for slot, placed_jobs in enumerate(best):
        start = busy[slot]
        for job in placed_jobs:
            starts.append((start, job))
            start += jobs[job][1]
    starts.sort()
    planned = [job for _, job in starts]
    if list_finish(busy, [jobs[job][1] for job in planned]) >= longest_finish:
        return longest_first
    return [jobs[job][0] for job in planned]


class StartQueue(Generic[Key]):
    """The attempts not yet started, in the order to start them: first as
    given, then as :func:`start_order` plans them with what the run has
    learned.  ``length(key)``: a waiting attempt's expected calls;
    ``ahead()``: the expected calls still ahead of each attempt in flight
    (both read the same :class:`LengthModel`, ``model``)."""

    def __init__(self, keys: Sequence[Key], slots: int, model: LengthModel, length: Callable[[Key], float],
                 ahead: Callable[[], Sequence[float]]) -> None:
        self._waiting = list(reversed(keys))  # the next to start last: taken with pop()
        self._slots = max(1, slots)
        self._length = length
        self._ahead = ahead
        self.model = model
        self.taken = 0
        self.plans = 0
        self._planned_at: int | None = None  # the model's observations at the last plan

    def __len__(self) -> int:
        return len(self._waiting)

    def waiting(self) -> list[Key]:
        """The waiting attempts, next first."""
        return list(reversed(self._waiting))

    def take(self) -> Key | None:
        """The attempt to start now (planning the queue again first when
        the run has learned enough since the last plan); ``None`` when none is left."""
        if not self._waiting:
            return None
        if self._ready_to_plan():
            self._plan()
        self.taken += 1
        return self._waiting.pop()

    def _ready_to_plan(self) -> bool:
        if self.taken < self._slots or len(self._waiting) < 2:
            return False  # the first slots start as given; one attempt has no order
        if len(self._waiting) > min(PLAN_LIMIT_PER_SLOT * self._slots, PLAN_LIMIT_WORK // self._slots):
            return False  # longest first is as good this far from the end
        # the first plan, then each time the run has learned twice as much
        return self._planned_at is None or self.model.observations >= 2 * max(1, self._planned_at)

    def _plan(self) -> None:
        waiting = self.waiting()
        busy = [max(0.0, ahead) for ahead in self._ahead()][: self._slots]
        busy += [0.0] * (self._slots - len(busy))
        order = start_order(busy, [(key, self._length(key)) for key in waiting])
        self._waiting = list(reversed(order))
        self._planned_at = self.model.observations
        self.plans += 1
