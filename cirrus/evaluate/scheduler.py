"""Run every (task, attempt) of an evaluation not yet in its run store:
bounded concurrency, a progress bar, resume, and usage recorded per attempt.

Both modes of ``cirrus eval`` (the walk, :mod:`cirrus.evaluate.runner`, and
single-turn subtasks, :mod:`cirrus.evaluate.subtask`) hand this module one
coroutine per attempt and get the same scheduling:

* resume: (task, attempt) pairs already committed ``ok`` are not run again;
* order: longest tasks first (a long task started last would run alone at the
  end; measured in benchmarks/README.md), the length being the model calls
  the task's recorded log leads one to expect, and a task's attempts one after the
  other, so a provider's prompt cache can serve the later attempts the prefix
  the first one sent (issue 16);
* the queue: once the first attempts have started, the run learns how long
  walks really are (agent rounds per recorded tool call, how often a walk
  goes on) and orders the attempts still waiting to pack them onto the slots
  as they free up (:mod:`cirrus.evaluate.plan`);
* turns: when many answers arrive at once, the event loop works first on the
  attempt with the most calls still ahead of it (:mod:`cirrus.llm.client.turns`);
* garbage collection: the full one runs once per 512 committed attempts,
  not every second or two, with what existed at the start frozen
  (:mod:`cirrus.evaluate.collector`);
* memory: ``concurrency`` workers share one queue, so only the attempts in
  flight have their task in memory;
* usage: each attempt's model calls are recorded in a ledger of their own
  (:mod:`cirrus.usage`) and stored with its row as ``usage``, so a resumed
  run's usage and cost still add up; the endpoint check's calls go, one line
  per session, to the run's ``overhead.jsonl`` (:mod:`cirrus.evaluate.overhead`);
* one writer: the run store's lock (:mod:`cirrus.evaluate.runlock`) refuses
  a second process on the same run before it runs or writes anything;
* clean-up: a run this call created that committed nothing leaves no folder
  (its lock file included); a call refused by the lock removes nothing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cirrus.evaluate.collector import RunCollector
from cirrus.evaluate.overhead import PREFLIGHT, overhead_records, run_recorded
from cirrus.evaluate.plan import LengthModel, StartQueue, learning
from cirrus.evaluate.runlock import RunLocked
from cirrus.evaluate.store import RunStore
from cirrus.evaluate.tasks import TaskIndex, TaskRef
from cirrus.llm.client.turns import Claim, Turns, attempt_turns, start_turn
from cirrus.llm.providers import EndpointError
from cirrus.pricing import Price, run_cost
from cirrus.schema import Task
from cirrus.usage import UsageLedger, recording

# (task, attempt) -> (attempts.jsonl row, transcripts.jsonl record); the row has "status"
AttemptRunner = Callable[[Task, int], Awaitable[tuple[dict[str, Any], dict[str, Any]]]]


@dataclass
class Budget:
    """``--max-cost``: no attempt starts once the run's spend (every
    committed attempt's usage, attempts run again and every session's
    endpoint check included, priced with
    ``prices``; ``models``: the model of each model client) reaches
    ``max_cost``; the attempts in flight finish."""

    max_cost: float
    models: Mapping[str, str]
    prices: Mapping[str, Price]

    def spent(self, ledger: UsageLedger) -> float:
        return run_cost(ledger, self.models, self.prices)["total"] or 0.0


class BudgetTooSmall(ValueError):
    """``--max-cost`` was spent before the run's first attempt could start
    (by the endpoint check): a run of no attempt has nothing to stop."""


def _check_first_start(budget: Budget, spending: UsageLedger) -> None:
    """Raise :class:`BudgetTooSmall` when ``spending`` (the endpoint check's
    alone: no attempt is stored yet) has reached ``budget``."""
    spent = budget.spent(spending)
    if spent >= budget.max_cost:
        currency = run_cost(spending, budget.models, budget.prices).get("currency") or ""
        raise BudgetTooSmall(f"--max-cost {budget.max_cost:g} was spent before the first attempt could start: the "
                             f"endpoint check cost {spent:.4f} {currency}".rstrip() + "; give a higher --max-cost")


@dataclass
class Outcome:
    """What :func:`run_attempts` did: the store, the seconds spent, the
    billed usage outside the attempts' final rows (``overhead``: every
    session's endpoint check and the attempts run again,
    :func:`~cirrus.evaluate.overhead.overhead_records`) and, when
    ``--max-cost`` stopped the run, what was spent and how many attempts are
    left (``budget_stop``)."""

    store: RunStore
    elapsed_s: float
    budget_stop: dict[str, Any] | None = None
    overhead: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Schedule:
    """What the attempts of one run are: the run's folder, what a resume must
    match (``fingerprint``) and what is only recorded (``details``), how many
    attempts each task gets, and the progress bar's label; ``subtasks``: each
    attempt asks a task's checkpoints alone (subtask mode), so its length is
    estimated as such (:meth:`~cirrus.evaluate.plan.LengthModel.subtask_calls`)."""

    directory: Path
    fingerprint: dict[str, Any]
    details: dict[str, Any]
    attempts: int
    concurrency: int
    desc: str
    progress: bool = True
    budget: Budget | None = None
    subtasks: bool = False


def attempt_order(refs: list[TaskRef], attempts: int, done: set[tuple[str, int]],
                  length: Callable[[TaskRef], float] | None = None) -> list[tuple[TaskRef, int]]:
    """The (task, attempt) pairs still to run: longest tasks first (most
    expected model calls, ``length(ref)``, by default the walk's
    ``ref.expected_calls``; then most checkpoints, then most input tokens),
    ties in file order, and a task's attempts next to each other in attempt
    order."""
    position = {ref.task_id: number for number, ref in enumerate(refs)}
    calls = {ref.task_id: length(ref) if length else ref.expected_calls for ref in refs}
    todo = [(ref, a) for ref in refs for a in range(attempts) if (ref.task_id, a) not in done]
    todo.sort(key=lambda pair: (-calls[pair[0].task_id], -pair[0].checkpoints, -pair[0].input_tokens,
                                position[pair[0].task_id], pair[1]))
    return todo


async def run_attempts(schedule: Schedule, index: TaskIndex, run_attempt: AttemptRunner, *,
                       on_commit: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
                       preflight: Callable[[], Awaitable[Any]] | None = None,
                       notify: Callable[[str], None] | None = None) -> Outcome:
    """Run every (task, attempt) of ``index`` not yet committed, each with
    ``run_attempt``, and append its row (with ``usage``) and transcript to
    the run store.  ``on_commit(row)`` returns what the progress bar shows
    after it; ``preflight`` is awaited once before the first attempt (not
    when everything is done already), its calls' usage appended to the run's
    ``overhead.jsonl``; ``notify`` gets lines for the user.
    With a ``schedule.budget``, no attempt starts once the run has spent it
    (:class:`Budget`; the outcome's ``budget_stop`` says so).

    An :class:`~cirrus.llm.providers.EndpointError` (a refused key) stops the
    run: every attempt would fail the same way; any other exception of the
    workers (a store that cannot write) is raised as it is.  Another process
    writing the run raises :class:`~cirrus.evaluate.runlock.RunLocked`
    before anything is run."""
    created = _make_folder(schedule.directory)
    store = RunStore(schedule.directory)
    try:
        store.open(schedule.fingerprint, {"run_id": schedule.directory.name, "started_at": dt.datetime.now(
            dt.timezone.utc).isoformat(timespec="seconds"), **schedule.details})
    except RunLocked:
        raise  # another process's run: its folder stays as it is
    except BaseException:
        if created:  # e.g. a full disk before run.json; removed while still locked
            shutil.rmtree(schedule.directory, ignore_errors=True)
        store.close()
        raise
    if store.lock is not None and store.lock.taken_over and notify is not None:
        notify(f"run {schedule.directory.name}: took over the lock of pid {store.lock.taken_over.get('pid')}, "
               "which is no longer running")
    try:
        return await _run_locked(schedule, index, run_attempt, store, created, on_commit=on_commit,
                                 preflight=preflight, notify=notify)
    finally:
        store.close()


def _make_folder(directory: Path) -> bool:
    """Make the run's folder; whether this call made it (not another process)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir()
    except FileExistsError:
        return False
    return True


async def _run_locked(schedule: Schedule, index: TaskIndex, run_attempt: AttemptRunner, store: RunStore,
                      created: bool, *, on_commit: Callable[[dict[str, Any]], Mapping[str, Any]] | None,
                      preflight: Callable[[], Awaitable[Any]] | None,
                      notify: Callable[[str], None] | None) -> Outcome:
    """:func:`run_attempts` once the run's lock is held."""
    # attempts committed, counted by the writer thread as it writes them: a
    # Ctrl-C can cancel the loop's await after an append ran, and a run folder
    # holding a committed attempt must not be removed
    committed = [0]

    def append(row: dict[str, Any], transcript: dict[str, Any]) -> None:
        store.append(row, transcript)
        committed[0] += 1

    # one thread writes the run's lines, in order: the two fsyncs of an append
    # must not stall the event loop (every call in flight waits on them)
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cirrus-run-store")
    try:
        done: set[tuple[str, int]] = set()
        spending = UsageLedger()  # the run's usage so far, for --max-cost
        stored = 0
        for row in store.latest_rows():
            stored += 1
            spending.merge(UsageLedger.from_dict(row.get("usage")))
            if row["status"] == "ok":
                done.add((row["task_id"], row["attempt"]))
        lengths = LengthModel()  # taught by the walks' checkpoints (or the subtasks) as they finish

        def estimate(ref: TaskRef) -> float:  # the expected calls of one attempt at ref's task
            if not ref.shape:
                return float(ref.expected_calls)
            return lengths.subtask_calls(ref.shape) if schedule.subtasks else lengths.calls(ref.shape)

        # before anything is learned a walk's estimate is its task's expected_calls: no need to compute it
        todo = attempt_order(index.refs, schedule.attempts, done, estimate if schedule.subtasks else None)
        budget = schedule.budget
        left = {"attempts": len(todo)}
        total = len(index.refs) * schedule.attempts
        if todo and len(todo) < total and notify is not None:
            notify(f"resuming run {schedule.directory.name}: {total - len(todo)} of {total} attempts already done")
        if todo and preflight is not None:
            await run_recorded(store.directory, PREFLIGHT, preflight)
        for record in overhead_records(store.directory):  # endpoint checks, attempts run again: billed too
            spending.merge(UsageLedger.from_dict(record["usage"]))
        if budget is not None and todo and not stored:
            _check_first_start(budget, spending)
        from tqdm import tqdm

        from cirrus.llm import endpoint_load  # requests in flight / adaptive window per endpoint

        bar = tqdm(total=total, initial=total - len(todo), desc=schedule.desc, unit="attempt",
                   disable=not schedule.progress, dynamic_ncols=True)

        async def one(ref: TaskRef, attempt: int) -> None:
            ledger = UsageLedger()
            with recording(ledger), attempt_turns(turns, round(estimate(ref))) as claim:
                in_flight[ref, attempt] = claim
                try:
                    await start_turn()
                    task = index.load_task(ref)
                    row, transcript = await run_attempt(task, attempt)
                finally:
                    del in_flight[ref, attempt]
            row["usage"] = ledger.to_dict()
            await asyncio.get_running_loop().run_in_executor(writer, append, row, transcript)
            collector.attempt_done()
            spending.merge(ledger)
            left["attempts"] -= 1
            if started_attempts == len(todo) and left["attempts"] <= tail:
                store.warm_up()  # the last few attempts: the loop has CPU to spare for the end's imports
            bar.update(1)
            bar.set_postfix(**(on_commit(row) if on_commit else {}), **endpoint_load(), refresh=False)

        turns = Turns()  # answers that arrive together: the attempt with the most calls ahead goes first
        in_flight: dict[tuple[TaskRef, int], Claim] = {}

        def ahead() -> list[float]:  # each attempt in flight: its call in flight is half done, on average
            return [estimate(pair[0]) - claim.calls_made - 0.5 for pair, claim in in_flight.items()]

        queue = StartQueue(todo, schedule.concurrency, lengths, lambda pair: estimate(pair[0]), ahead)
        # once every attempt has started and at most `tail` are left, the end of the run is near
        tail = max(1, schedule.concurrency // 8)
        started_attempts = 0

        async def worker() -> None:
            nonlocal started_attempts
            while queue:
                if budget is not None and budget.spent(spending) >= budget.max_cost:
                    return  # the budget is spent: start nothing more (the others finish what they hold)
                pair = queue.take()
                if pair is None:
                    return
                started_attempts += 1
                await one(*pair)

        started = time.perf_counter()
        collector = RunCollector()  # full collections once per 512 attempts, not every second or two
        try:
            with collector, learning(lengths):
                async with asyncio.TaskGroup() as group:  # the first EndpointError cancels the rest
                    for _ in range(min(max(1, schedule.concurrency), len(todo))):
                        group.create_task(worker())
        except* EndpointError as failures:
            raise failures.exceptions[0] from None
        except* Exception as failures:  # e.g. the run store could not write: report it plainly
            raise failures.exceptions[0] from None
        finally:
            writer.shutdown(wait=True)  # every append handed over is on disk (or has failed) before we go on
            bar.close()
        outcome = Outcome(store, time.perf_counter() - started, overhead=overhead_records(store.directory))
        if budget is not None and left["attempts"] > 0:
            outcome.budget_stop = {"max_cost": budget.max_cost, "spent": budget.spent(spending),
                                   "attempts_left": left["attempts"]}
        return outcome
    except BaseException:  # Ctrl-C (a cancelled task, KeyboardInterrupt) included
        writer.shutdown(wait=True)
        if created and not committed[0]:  # the writer has stopped: its count is final
            shutil.rmtree(schedule.directory, ignore_errors=True)  # a run that never started lists as nothing
        raise
