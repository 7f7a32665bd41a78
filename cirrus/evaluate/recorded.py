"""Where a rescore's verdicts come from: the source run, Cirrus's cache, or
a call (issue 22).

Cirrus's response cache keeps one answer per question.  A run that asked the
same judge question twice (two attempts with the same turn) may have got two
different answers, and recorded each with its own attempt; a rescore answered
from the cache would give both attempts the one answer the cache kept, and
change an outcome without any judge having changed its mind.  So:

* **The same judge** (the rescore's ``judge_role`` fingerprint equals the
  source run's: model, parameters, prompts, history and input limits): a
  question the run asked -- the same saved turn, the same checkpoint, so the
  same prompt -- is answered with the verdict that attempt recorded, not
  asked again nor read from the cache.  A rescore with the run's own judge
  reproduces the run.  The same holds for the fluency checker given with
  ``--fluency-model`` when it is the run's own.
* **Any judge**: a verdict answered from Cirrus's cache is counted, and so is
  each such verdict that differs from the run's own verdict on the same
  (turn, checkpoint).

Each rescored verdict record taken so says where it came from
(``answer_from``: ``run`` or ``cache``), each attempt row counts them
(``verdict_sources``) and ``summary.json``'s ``rescore`` sums them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cirrus.usage import UsageLedger, record, recording

if TYPE_CHECKING:
    from cirrus.evaluate.saved_run import SavedAttempt, SavedTurn
    from cirrus.evaluate.types import CoverageJudge, Verdict
    from cirrus.evaluate.walk import WalkResult

ANSWER_FROM = "answer_from"  # added to a rescored verdict record taken from the run or the cache
FROM_RUN = "run"
FROM_CACHE = "cache"
# (saved turn index, verdict kind, checkpoint: None for fluency, one per turn)
SourceKey = tuple[int, str, int | None]


def same_role(rescore: Any, source: Any) -> bool:
    """Whether a rescore's role fingerprint is the source run's (as JSON:
    ``run.json`` holds it so)."""
    if rescore is None or source is None:
        return False
    return json.loads(json.dumps(rescore, sort_keys=True)) == source


async def asked(ask: Callable[[], Awaitable[Verdict]]) -> tuple[Verdict, bool]:
    """``ask()``'s verdict and whether Cirrus's cache answered (any of) its
    calls.  The calls' usage still goes to the ledger current here."""
    inner = UsageLedger()
    try:
        with recording(inner):
            verdict = await ask()
    finally:
        for client, usage in inner.clients.items():
            record(client, usage)
    return verdict, any(usage.cirrus_cache_hits for usage in inner.clients.values())


def recorded_verdict(saved: dict[str, Any], ok: bool) -> Verdict:
    """A verdict record of the source run as the verdict it was."""
    from cirrus.evaluate.types import Verdict

    votes = saved.get("votes")
    return Verdict(ok=ok, raw=str(saved.get("raw")), input_cut=saved.get("judge_input_cut") or None,
                   votes=tuple(dict(vote) for vote in votes) if votes else None, problem=saved.get("problem"),
                   missing=saved.get("missing"))


def _coverage_records(turn: SavedTurn) -> dict[int, dict[str, Any]]:
    return {v["checkpoint"]: v for v in turn.data.get("verdicts") or []
            if v.get("kind") == "coverage" and v.get("raw") is not None and isinstance(v.get("checkpoint"), int)}


class RecordedJudge:
    """The coverage judge of one rescored attempt: ``judge``, with the source
    run's own verdicts reused for the questions it asked when ``reuse``, and
    where each verdict came from noted in :attr:`sources`."""

    def __init__(self, judge: CoverageJudge, saved: SavedAttempt, reuse: bool) -> None:
        self.judge = judge
        self.saved = saved
        self.reuse = reuse
        self.name = judge.name
        self.sources: dict[SourceKey, str] = {}
        self._asked: set[SourceKey] = set()
        if getattr(judge, "covers_later", None) is None:
            self.covers_later = None  # the walk then asks ``covers`` with the later query, as it would the judge

    def _turn_at(self, history: list[dict[str, Any]], candidate: str) -> int | None:
        """The saved turn whose judged history (the query last) and reply these are."""
        for index, turn in enumerate(self.saved.turns):
            if (turn.data.get("agent_text") or "") == candidate and (
                    turn.history + [{"role": "user", "content": turn.query}]) == history:
                return index
        return None

    def _checkpoint(self, turn: SavedTurn, index: int, query: str, reference: str, later: bool) -> int | None:
        """The checkpoint (1-based) this question is about: the turn's own,
        else the first later one with this query and reference not yet asked."""
        checkpoints = self.saved.typed_task.checkpoints
        own = turn.data.get("checkpoint")
        if not isinstance(own, int):
            return None
        first = own if not later else own + 1
        for number in range(first, len(checkpoints) + 1):
            point = checkpoints[number - 1]
            if (point.query, point.reply) == (query, reference) and (
                    index, "coverage", number) not in self._asked:
                return number
            if not later:
                break
        return None

    async def _answer(self, history: list[dict[str, Any]], candidate: str, query: str, reference: str,
                      later: bool, ask: Callable[[], Awaitable[Verdict]]) -> Verdict:
        index = self._turn_at(history, candidate)
        turn = self.saved.turns[index] if index is not None else None
        number = self._checkpoint(turn, index, query, reference, later) if turn is not None else None
        key: SourceKey | None = (index, "coverage", number) if number is not None else None
        if key is None:
            return await ask()
        self._asked.add(key)
        saved = _coverage_records(turn).get(number)  # type: ignore[union-attr]
        if self.reuse and saved is not None:
            self.sources[key] = FROM_RUN
            rr = turn.stats.get("rr") if number == turn.data.get("checkpoint") else None  # type: ignore[union-attr]
            # a later checkpoint's record holds the turn's decision on it: the same decision follows
            return recorded_verdict(saved, rr if isinstance(rr, bool) else bool(saved.get("ok")))
        verdict, cached = await asked(ask)
        if cached:
            self.sources[key] = FROM_CACHE
        return verdict

    async def covers(self, history: list[dict[str, Any]], query: str, reference: str, candidate: str) -> Verdict:
        later = bool(history) and history[-1].get("content") != query  # a judge without covers_later
        return await self._answer(history, candidate, query, reference, later,
                                  lambda: self.judge.covers(history, query, reference, candidate))

    async def covers_later(self, history: list[dict[str, Any]], query: str, candidate: str,
                           later_query: str, later_reference: str) -> Verdict:
        return await self._answer(history, candidate, later_query, later_reference, True,
                                  lambda: self.judge.covers_later(history, query, candidate, later_query,
                                                                  later_reference))


def note_sources(result: WalkResult, sources: dict[SourceKey, str], saved: SavedAttempt) -> dict[str, int]:
    """Mark the verdict records of ``result`` taken from the run or the cache
    (``answer_from``) and count them: ``run``, ``cache`` and
    ``cache_differing`` (a cached verdict whose decision differs from the
    source run's on the same turn and checkpoint)."""
    counts = {FROM_RUN: 0, FROM_CACHE: 0, "cache_differing": 0}
    for index, turn in enumerate(result.turns):
        old_turn = saved.turns[index] if index < len(saved.turns) else None
        for verdict in turn.verdicts:
            kind = verdict.get("kind")
            key = (index, kind, verdict.get("checkpoint") if kind == "coverage" else None)
            source = sources.get(key)  # type: ignore[arg-type]
            if source is None:
                continue
            verdict[ANSWER_FROM] = source
            counts[source] += 1
            old = _old_record(old_turn, key) if old_turn is not None else None
            if source == FROM_CACHE and old is not None and bool(old.get("ok")) != bool(verdict.get("ok")):
                counts["cache_differing"] += 1
    return counts


def _old_record(turn: SavedTurn, key: SourceKey) -> dict[str, Any] | None:
    if key[1] == "fluency":
        return turn.fluency_verdict()
    return _coverage_records(turn).get(key[2])  # type: ignore[arg-type]
