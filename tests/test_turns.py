"""The event loop's turns (cirrus.llm.client.turns): answers that arrive
together are worked on most-calls-ahead first, one per pass of the loop; the
scheduler's length estimate (cirrus.evaluate.tasks.expected_calls)."""

from __future__ import annotations

import asyncio

from cirrus.evaluate.scheduler import attempt_order
from cirrus.evaluate.tasks import TaskRef, expected_calls
from cirrus.llm.client.turns import Turns, attempt_turns, my_turn
from cirrus.schema import Task


async def answer(order: list[str], turns: Turns, name: str, ahead: int) -> None:
    """An answer that waits for its turn, then notes its name."""
    await turns.wait(ahead)
    order.append(name)


def test_answers_waiting_together_go_most_calls_ahead_first():
    order: list[str] = []

    async def main() -> None:
        turns = Turns()
        await asyncio.gather(answer(order, turns, "short", 2), answer(order, turns, "long", 40), answer(order, turns, "middle", 9),
                             answer(order, turns, "middle-later", 9))
        assert len(turns) == 0

    asyncio.run(main())
    assert order == ["long", "middle", "middle-later", "short"]  # ties: first come, first served


def test_one_turn_per_pass_lets_a_later_answer_with_more_ahead_go_first():
    order: list[str] = []
    arrived_at: list[int] = []

    async def main() -> None:
        turns = Turns()
        early = [asyncio.create_task(answer(order, turns, f"early-{i}", 1)) for i in range(8)]
        while not order:  # the first early answer has had its turn: the others still wait
            await asyncio.sleep(0)
        arrived_at.append(len(order))
        late = asyncio.create_task(answer(order, turns, "late-long", 50))
        await asyncio.gather(*early, late)

    asyncio.run(main())
    # turns given in the pass it arrived in and the next may go to early ones; then it is its turn
    assert order.index("late-long") <= arrived_at[0] + 2 < 8
    assert [name for name in order if name != "late-long"] == [f"early-{i}" for i in range(8)]


def test_a_cancelled_wait_gives_its_turn_away():
    order: list[str] = []

    async def main() -> None:
        turns = Turns()
        gone = asyncio.create_task(answer(order, turns, "gone", 99))
        kept = asyncio.create_task(answer(order, turns, "kept", 1))
        await asyncio.sleep(0)
        gone.cancel()
        await kept
        assert gone.cancelled()

    asyncio.run(main())
    assert order == ["kept"]


def test_my_turn_counts_down_the_calls_of_its_attempt_and_is_free_outside_one():
    seen: list[int] = []

    async def main() -> None:
        turns = Turns()
        await my_turn()  # no attempt: returns without queueing
        assert len(turns) == 0
        original = turns.wait

        async def spy(ahead: int) -> None:
            seen.append(ahead)
            await original(ahead)

        turns.wait = spy  # type: ignore[method-assign]
        with attempt_turns(turns, 5):
            await my_turn()
            await asyncio.gather(my_turn(), my_turn())  # tasks started inside share the attempt's count
        await my_turn()  # the attempt is over

    asyncio.run(main())
    assert seen == [4, 3, 2]


def _task(tool_calls_per_checkpoint: list[int]) -> Task:
    return Task.model_validate({
        "task_id": "t", "stats": {"input_tokens": 10, "turns": 2, "checkpoints": len(tool_calls_per_checkpoint)},
        "checkpoints": [{"index": i, "query": "q", "reply": "r", "reply_type": "Solution",
                         "tool_calls": [{"name": "lookup", "arguments": {}}] * n}
                        for i, n in enumerate(tool_calls_per_checkpoint)]})


def test_expected_calls_of_a_walk_that_follows_the_log():
    # agent (1 + 0) + (1 + 2) + (1 + 1) = 6; judge 2 x 3 - 1 = 5; fluency 3 - 1 = 2
    assert expected_calls(_task([0, 2, 1])) == 13
    assert expected_calls(_task([0])) == 2  # one reply, one judge call


def test_longest_first_reads_the_expected_calls_before_the_checkpoints():
    refs = [TaskRef("many-checkpoints", 1, 0, 1, 6, 100, expected_calls=20),
            TaskRef("many-tool-calls", 2, 1, 1, 3, 100, expected_calls=31),
            TaskRef("tie", 3, 2, 1, 6, 200, expected_calls=20)]
    order = [(ref.task_id, attempt) for ref, attempt in attempt_order(refs, 2, done={("tie", 0)})]
    assert order == [("many-tool-calls", 0), ("many-tool-calls", 1), ("tie", 1),
                     ("many-checkpoints", 0), ("many-checkpoints", 1)]
