"""Walk one task checkpoint by checkpoint (contract section 4).

``walk`` is the algorithm exactly as the contract writes it: the agent answers
checkpoint ``k``; the turn is accepted when the judge finds the reference's key
information in it (and, when the reference made tool calls, when the turn made
the same calls and they were answered from the cassette); the same turn may
also cover later checkpoints (a logical jump); the walk stops at the first
rejected turn, after the last checkpoint, or when the next real customer
message can no longer follow the dialogue.

The walk reads the task as a :class:`~cirrus.schema.Task`; the agent is
given it as the dict of its ``tasks.jsonl`` line (``TurnRequest.task``,
:func:`~cirrus.schema.task_dict`), built once per walk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cirrus.evaluate.plan import CheckpointShape, checkpoint_done, shapes
from cirrus.evaluate.types import AgentTurn, Agent, CoverageJudge, FluencyChecker, TurnRequest, Verdict
from cirrus.metrics import CheckpointDecision, WalkOutcome, accepts
from cirrus.replay import ToolReplayer
from cirrus.schema import Checkpoint, Task, as_task, task_dict
from cirrus.tool_matching import ToolMatching, match_key
from cirrus.usage import calls_sent


@dataclass(slots=True)
class JudgedTurn:
    """One agent turn and every verdict given on it."""

    checkpoint: int  # the k the turn answered (1-based)
    reply_type: str
    turn: AgentTurn
    decision: CheckpointDecision
    covered_through: int | None = None
    fluent: bool | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class WalkResult:
    outcome: WalkOutcome
    turns: list[JudgedTurn]
    wall_s: float

    @property
    def input_tokens(self) -> int:
        return sum(t.turn.input_tokens for t in self.turns)

    @property
    def output_tokens(self) -> int:
        return sum(t.turn.output_tokens for t in self.turns)


def as_checkpoint(value: Checkpoint | Mapping[str, Any]) -> Checkpoint:
    """``value`` as a :class:`Checkpoint`: a checkpoint as it is, a mapping
    (a checkpoint of a ``tasks.jsonl`` line) validated."""
    return value if isinstance(value, Checkpoint) else Checkpoint.model_validate(dict(value))


async def ask_coverage(judge: CoverageJudge, history: list[dict[str, Any]],
                       answered: Checkpoint | Mapping[str, Any], judged: Checkpoint | Mapping[str, Any],
                       candidate: str) -> Verdict | None:
    """The judge's verdict on whether ``candidate``, the agent's reply to
    checkpoint ``answered``'s query (the last message of ``history``), holds
    the key information of checkpoint ``judged``'s reference reply; ``None``
    when that reference has no text (a checkpoint of tool calls only).

    When ``judged`` is a later checkpoint (a logical jump), the judge is told
    so (:meth:`CoverageJudge.covers_later`): the later reference was written
    after the customer's later message, which the agent never saw.  A judge
    without ``covers_later`` is asked the plain question (with the later
    query as the customer's last message).  The checkpoints are the task's
    :class:`Checkpoint` objects (``cirrus judge-consistency`` asks with those
    of a saved run); a mapping is still accepted and validated."""
    answered, judged = as_checkpoint(answered), as_checkpoint(judged)
    if not judged.reply.strip():
        return None
    covers_later = getattr(judge, "covers_later", None)
    if covers_later is None or judged is answered or judged == answered:
        return await judge.covers(history, judged.query, judged.reply, candidate)
    return await covers_later(history, answered.query, candidate, judged.query, judged.reply)


async def judge_checkpoint(
    judge: CoverageJudge, history: list[dict[str, Any]], checkpoint: Checkpoint | Mapping[str, Any],
    turn: AgentTurn, answered: Checkpoint | Mapping[str, Any] | None = None, matching: ToolMatching | None = None,
) -> tuple[CheckpointDecision, Verdict | None]:
    """``accepts(response, k)`` of the contract for one checkpoint;
    ``answered`` is the checkpoint whose query the turn answered (default:
    ``checkpoint`` itself); ``matching``: the argument-matching rules the
    replay answered the calls with (:mod:`cirrus.tool_matching`), so that a
    call the cassette answered under them is the reference call it matched."""
    checkpoint = as_checkpoint(checkpoint)
    verdict = await ask_coverage(judge, history, checkpoint if answered is None else answered, checkpoint,
                                 turn.text)
    rr = verdict.ok if verdict is not None else True  # True: a checkpoint of tool calls only
    reference = [(c.name, match_key(c.name, c.arguments, matching)) for c in checkpoint.tool_calls]
    made = [(c.name, match_key(c.name, c.arguments, matching), c.recorded) for c in turn.tool_calls]
    return accepts(rr, reference, made), verdict


def _verdict_record(kind: str, checkpoint: int, verdict: Verdict | None, ok: bool) -> dict[str, Any]:
    record = {"kind": kind, "checkpoint": checkpoint, "ok": ok, "raw": verdict.raw if verdict else None}
    if verdict is not None and verdict.input_cut:  # what of the judge's input was cut (docs/judging.md)
        record["judge_input_cut"] = verdict.input_cut
    if verdict is not None and verdict.votes:  # a judge panel: every member's verdict (docs/judging.md)
        record["votes"] = [dict(vote) for vote in verdict.votes]
    if verdict is not None and verdict.problem:  # what the judge says is wrong (docs/failures.md)
        record["problem"] = verdict.problem
        if verdict.missing:
            record["missing"] = verdict.missing
    return record


def _learn(shape: tuple[CheckpointShape, ...], k: int, turn: AgentTurn, counted: int | None, *,
           covered_later: int = 0, outcome: str) -> None:
    """What checkpoint ``k`` (1-based) teaches the run's estimate of walk
    lengths (:func:`cirrus.evaluate.plan.checkpoint_done`); ``counted``: the
    judge's and the fluency checker's calls of the attempt before it."""
    now = _judging_sent()
    judging = None if counted is None or now is None else now - counted
    checkpoint_done(shape, k - 1, turn.model_calls, judging, covered_later=covered_later, outcome=outcome)


def _judging_sent() -> int | None:
    return calls_sent("judge", "fluency")


async def walk(
    task: Task | Mapping[str, Any],
    agent: Agent,
    judge: CoverageJudge,
    fluency: FluencyChecker,
    replayer: ToolReplayer,
    attempt: int = 0,
) -> WalkResult:
    """Walk ``task`` (a :class:`Task`; a mapping is validated into one) with
    ``agent``, judged by ``judge`` and ``fluency``, its tool calls answered by
    ``replayer``."""
    started = time.perf_counter()
    task = as_task(task)
    seen_by_agent = task_dict(task)  # TurnRequest.task: the task's line, as agents read it
    checkpoints = task.checkpoints
    total = len(checkpoints)
    shape = shapes(checkpoints)  # what the run learns walk lengths by (cirrus.evaluate.plan)
    matching = getattr(replayer, "matching", None)  # the rules the replay answers with
    history: list[dict[str, Any]] = list(task.history)
    k, covered, accepted_turns = 1, 0, 0
    stl_accepted: list[int] = []
    stl_rejected: int | None = None
    judged: list[JudgedTurn] = []
    while k <= total:
        current = checkpoints[k - 1]
        # the real turns between the previous checkpoint and this query (select-mode
        # tasks, docs/checkpoints.md); a jump skips the contexts of the checkpoints it covered
        history = history + list(current.context or [])
        counted = _judging_sent()  # the judge's and fluency checker's calls so far: this checkpoint's from here
        turn = await agent.respond(TurnRequest(seen_by_agent, history, current.query, attempt), replayer)
        seen = history + [{"role": "user", "content": current.query}]
        decision, verdict = await judge_checkpoint(judge, seen, current, turn, matching=matching)
        record = JudgedTurn(k, current.reply_type, turn, decision)
        record.verdicts.append(_verdict_record("coverage", k, verdict, decision.accepted))
        judged.append(record)
        if not decision.accepted:
            stl_rejected = turn.output_tokens
            _learn(shape, record.checkpoint, turn, counted, outcome="stopped")
            break
        j = k
        while j < total:
            later, later_verdict = await judge_checkpoint(judge, seen, checkpoints[j], turn, current, matching)
            record.verdicts.append(_verdict_record("coverage", j + 1, later_verdict, later.accepted))
            if not later.accepted:
                break
            j += 1
        accepted_turns += 1
        stl_accepted.append(turn.output_tokens)
        covered = j
        record.covered_through = j
        history = seen + turn.messages
        if j == total:
            _learn(shape, record.checkpoint, turn, counted, covered_later=j - record.checkpoint, outcome="ended")
            break
        k = j + 1
        follows = await fluency.follows(history + list(checkpoints[k - 1].context or []),
                                        checkpoints[k - 1].query)
        record.fluent = follows.ok
        record.verdicts.append(_verdict_record("fluency", k, follows, follows.ok))
        _learn(shape, record.checkpoint, turn, counted, covered_later=j - record.checkpoint,
               outcome="went on" if follows.ok else "stopped")
        if not follows.ok:
            break
    outcome = WalkOutcome(checkpoints=total, covered=covered, accepted_turns=accepted_turns,
                          stl_accepted=tuple(stl_accepted), stl_rejected=stl_rejected)
    return WalkResult(outcome, judged, time.perf_counter() - started)
