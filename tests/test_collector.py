"""The garbage collector during a run's attempts (cirrus.evaluate.collector):
the start frozen, full collections once per N committed attempts, and the
process's settings back as they were afterwards."""

from __future__ import annotations

import gc
import inspect
import threading

import pytest

from cirrus.evaluate.collector import RunCollector, held_for_the_command


def _full_collections(during) -> int:
    """Full collections started by this thread while ``during()`` ran (another
    thread of the test process may collect on its own)."""
    seen: list[int] = []
    me = threading.get_ident()

    def callback(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2 and threading.get_ident() == me:
            seen.append(1)

    gc.callbacks.append(callback)
    try:
        during()
    finally:
        gc.callbacks.remove(callback)
    return len(seen)


@pytest.fixture(autouse=True)
def _nothing_frozen():
    """These tests start from a process where nothing is frozen (a test run
    in this worker before may have frozen objects; unfreezing is harmless)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_start_is_frozen_and_full_collections_wait_for_the_run():
    before = gc.get_threshold()
    with RunCollector(every=3) as collector:
        assert gc.get_freeze_count() > 0  # what existed at the start is out of every scan
        assert gc.get_threshold()[:2] == before[:2]  # young collections as before
        assert gc.get_threshold()[2] > 10**6  # no full collection of its own accord

        def churn() -> None:  # enough promoted objects for several full collections under the usual rule
            keep = []
            for i in range(300_000):
                keep.append([i])
                if len(keep) > 100_000:
                    keep.clear()

        assert _full_collections(churn) == 0
        assert _full_collections(lambda: (collector.attempt_done(), collector.attempt_done())) == 0
        assert _full_collections(collector.attempt_done) == 1  # the third attempt
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_by_someone_else_is_left_to_its_owner():
    before = gc.get_threshold()
    gc.freeze()
    frozen = gc.get_freeze_count()
    with RunCollector():
        with RunCollector():  # an inner one (the scheduler's, inside the command's)
            assert gc.get_freeze_count() >= frozen
        assert gc.get_freeze_count() >= frozen and gc.get_threshold()[2] > 10**6  # still the outer's
    assert gc.get_freeze_count() >= frozen  # not unfrozen under its owner
    assert gc.get_threshold() == before


def test_collectors_held_by_two_threads_restore_when_the_last_leaves():
    before = gc.get_threshold()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with RunCollector():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with RunCollector():
            second_in.set()
            first_out.wait(10)
            seen.append(gc.get_threshold()[2])  # the first has left: still held by this one

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen and seen[0] > 10**6
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_the_command_holds_one_from_start_to_end():
    seen = []

    @held_for_the_command
    def command(name: str, *, times: int = 1) -> str:
        """What typer reads."""
        seen.append((gc.get_freeze_count() > 0, gc.get_threshold()[2] > 10**6))
        return name * times

    assert command("ab", times=2) == "abab" and seen == [(True, True)]
    assert command.__doc__ == "What typer reads." and inspect.signature(command).parameters.keys() == {"name", "times"}
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[2] < 10**6


def test_an_error_inside_restores_the_settings():
    before = gc.get_threshold()
    try:
        with RunCollector():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
