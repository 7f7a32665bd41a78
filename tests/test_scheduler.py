"""The scheduler (cirrus.evaluate.scheduler): it warms up the end of a run
(polars for the tables) while its last attempts are in flight, not before
(early on the event loop needs its CPU for the walks: issue 28), and a run
interrupted after its first attempt was written keeps its folder."""

from __future__ import annotations

import asyncio

import pytest

from cirrus.evaluate.scheduler import Schedule, run_attempts
from cirrus.evaluate.store import RunStore
from cirrus.evaluate.tasks import TaskIndex


@pytest.mark.parametrize("concurrency", [1, 8, 16, 64])
def test_warm_up_starts_once_every_attempt_has_started_and_few_are_left(sample_ingest, tmp_path, monkeypatch,
                                                                         concurrency):
    index = TaskIndex.scan(sample_ingest)
    total = len(index.refs) * 2
    finished = 0
    seen: list[int] = []  # attempts finished when warm_up was called

    def warm_up(store: RunStore) -> None:
        seen.append(finished)

    monkeypatch.setattr(RunStore, "warm_up", warm_up)

    async def run_attempt(task, attempt):
        nonlocal finished
        await asyncio.sleep(0.001 * (hash((task.task_id, attempt)) % 3))
        finished += 1
        return {"task_id": task.task_id, "attempt": attempt, "status": "ok"}, {"task_id": task.task_id,
                                                                              "attempt": attempt}

    schedule = Schedule(tmp_path / "reports" / "r", {"x": 1}, {}, 2, concurrency, "test", progress=False)
    outcome = asyncio.run(run_attempts(schedule, index, run_attempt))
    assert outcome.store.directory.is_dir()
    tail = max(1, concurrency // 8)
    assert seen, "warm_up was never called"
    assert seen[0] >= total - tail  # not before the last `tail` attempts
    assert seen[-1] == total  # called on the last commit at the latest


def test_warm_up_imports_polars_on_a_thread_once(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("threading.Thread.start", lambda thread: started.append(thread.name))
    store = RunStore(tmp_path)
    store.warm_up()
    store.warm_up()
    assert started == ["cirrus-store-warm-up"]


def test_an_interrupt_right_after_the_first_append_keeps_the_run_folder(sample_ingest, tmp_path, monkeypatch):
    """The attempt line is written on the writer thread; a Ctrl-C (a cancel)
    that reaches the event loop before it hears the append finished must
    not remove a run folder that holds a committed attempt."""
    index = TaskIndex.scan(sample_ingest)
    directory = tmp_path / "reports" / "r"
    real_append = RunStore.append
    where: dict[str, object] = {}

    def append(store: RunStore, row, transcript) -> None:
        real_append(store, row, transcript)
        # queued before the writer hands its result back to the loop: the cancel arrives first
        where["loop"].call_soon_threadsafe(where["task"].cancel)

    monkeypatch.setattr(RunStore, "append", append)

    async def run_attempt(task, attempt):
        return {"task_id": task.task_id, "attempt": attempt, "status": "ok"}, {"task_id": task.task_id,
                                                                              "attempt": attempt}

    async def main() -> None:
        where["loop"], where["task"] = asyncio.get_running_loop(), asyncio.current_task()
        await run_attempts(Schedule(directory, {"x": 1}, {}, 1, 1, "test", progress=False), index, run_attempt)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    lines = (directory / "attempts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and '"status":"ok"' in lines[0]
