"""Re-judge a finished run without calling the agent again (the library
behind ``cirrus rescore RUN_ID --judge-model M``, :mod:`cirrus.commands.rescore`;
tau2-bench's ``evaluate-trajs``).

The source run's ``transcripts.jsonl`` holds every agent turn that was judged
(its messages, final text and tool calls with the cassette's answers and
``recorded`` flags); ``attempts.jsonl`` holds each turn's STL.  Each
(task, attempt) is walked again with :func:`cirrus.evaluate.walk.walk`, the
contract's algorithm unchanged, with

* a :class:`ReplayAgent` that answers a turn with the saved turn whose input
  was exactly the same (the same history before the query and the same
  query): the agent's reply depends on nothing else, so the saved reply is a
  legitimate answer to that input.  Tool calls are not replayed again: their
  saved results and ``recorded`` flags are reused.  STL and per-turn wall
  time are the saved ones, so MTL is the agent's real MTL;
* the new coverage judge;
* a :class:`FluencyGate` in front of the fluency check (see below).

Where the walk can go
    A new judge may accept fewer or more, or other, checkpoints than the old
    one.  When it accepts less, the walk simply stops earlier: exact.  When
    it accepts more (a turn the old walk rejected, or a turn covering further
    or fewer later checkpoints than before), the walk reaches a conversation
    state the agent was never asked about, and the saved transcript has no
    answer for it.  The agent is never called, so the walk *cannot continue*:
    it stops right there, before the agent would be asked, and the attempt is
    marked ``truncated``.  Its covered checkpoints are then a lower bound of
    what the new judge would give with a live agent.  The gate is the fluency
    check because the walk asks it exactly at that point (after an accepted
    turn, before the next query), so no phantom agent turn is ever judged.

Fluency
    Without ``--fluency-model`` the saved fluency verdicts are reused: the old
    walk asked exactly the same question whenever the saved transcript goes
    on (and its answer was Yes), or when the old walk stopped on a fluency No
    (reused: the walk stops, not truncated).  A state the old walk never
    asked about is a truncation.  With ``--fluency-model`` (or ``local``)
    every fluency question is asked again: a No stops the walk (exact), a Yes
    where the transcript ends is a truncation.

Outputs
    A new run ``reports/<new_run_id>/`` with the contract's outputs (written
    by :class:`~cirrus.evaluate.store.RunStore`, so ``cirrus show`` and any
    reader of runs work on it) plus:

    * ``truncated`` in each ``attempts.jsonl`` row and transcript, and as a
      column of ``tasks.parquet`` (null for error rows);
    * ``rescore.parquet``: one row per (task, attempt) comparing the source
      run and the rescore (covered, success, status, truncated, turns);
    * ``verdict_sources`` in each ``attempts.jsonl`` row (verdicts taken
      from the run, from the cache, and cached ones differing from the
      run's), and ``answer_from`` (``run`` or ``cache``) on each verdict
      record so taken in ``transcripts.jsonl``;
    * ``summary.json``'s ``rescore`` object: the source run, its judge and
      scores, the number of truncated and changed attempts, and the agreement
      of the two judges on the (turn, checkpoint) pairs both judged.

    Per turn, ``fluent`` and the verdict list say what was really decided: at
    a truncation the walk's stop is recorded as a ``truncated`` verdict, not
    as a fluency No.  Each turn's ``failure`` category (docs/failures.md) is
    worked out as ``cirrus eval`` does (:func:`~cirrus.evaluate.runner.attempt_row`,
    after the truncation is noted): from the saved tool calls and their
    ``recorded`` flags, the new judge's verdict and ``problem``, and the
    (saved or rechecked) fluency verdict; a truncated turn has none.  ``wall_s`` of an attempt is the rescore's own time
    (judging); per turn it is the agent's saved time.  ``input_tokens`` of an
    attempt is the source's when every saved turn was replayed, else the sum
    of the per-turn counts when the source rows hold them, else null.

    An attempt that failed in the source run stays an error row; a judge
    failure during the rescore is an error row too, and is tried again when
    the same command is run again (the same ``--run-id`` resumes, like
    ``cirrus eval``; other judge settings under that id are refused).

Verdicts the run recorded
    With the source run's own judge (the same ``judge_role`` fingerprint), a
    question the run asked is answered with the verdict that attempt
    recorded, not from Cirrus's cache (which keeps one answer per question,
    where the run's attempts may have got two): the rescore reproduces the
    run.  Verdicts taken from the cache are counted, and so are those that
    differ from the run's own (``summary.json``'s ``rescore``;
    :mod:`cirrus.evaluate.recorded`).

Where the judge is
    Without ``--judge-base-url`` (nor a base URL in cirrus.toml), a judge that
    is the run's own model is asked at the base URL the run recorded
    (``run.json``'s ``judge_base_url``), with the run's judge key variable.

The tasks must be the ones the source run was made on: the dataset hash of
the first ``tasks`` tasks of ``tickets/tasks.jsonl`` is checked against the
source run's fingerprint.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cirrus.evaluate.saved_run import RescoreError, SavedAttempt, SourceRun, load_source, run_judge
from cirrus.files import read_jsonl
from cirrus.judges.agreement import panel_agreement, votes_of_rows
from cirrus.workspace import REPORTS_DIR

# the evaluation machinery is imported where it is used, so that importing
# this module (``cirrus rescore``) stays fast
if TYPE_CHECKING:
    import polars as pl

    from cirrus.evaluate.roles import RoleOptions
    from cirrus.evaluate.types import (
        AgentTurn,
        CoverageJudge,
        FluencyChecker,
        TurnRequest,
        Verdict,
    )
    from cirrus.evaluate.walk import WalkResult
    from cirrus.llm.batch import BatchStatus
    from cirrus.llm.batching import BatchCollector
    from cirrus.replay import ToolReplayer
    from cirrus.schema import Task

RESCORE_FILE = "rescore.parquet"
RESCORE_COLUMNS = {  # rescore.parquet: column -> polars type name
    "task_id": "Utf8", "attempt": "Int64", "checkpoints": "Int64", "source_status": "Utf8", "status": "Utf8",
    "source_covered": "Int64", "covered": "Int64", "source_success": "Boolean", "success": "Boolean",
    "truncated": "Boolean", "turns_saved": "Int64", "turns_replayed": "Int64", "changed": "Boolean",
    "run_id": "Utf8", "model": "Utf8",
}


class ReplayMismatch(RuntimeError):
    """The walk asked the replay agent for a turn the transcript does not hold
    (the gate should have stopped it first: a bug or an edited transcript)."""


# ---------------------------------------------------------------------------
# the replay agent and the fluency gate


class ReplayAgent:
    """An :class:`~cirrus.evaluate.types.Agent` that answers from one saved
    attempt and never calls a model."""

    def __init__(self, saved: SavedAttempt, name: str, offline: bool) -> None:
        self.saved = saved
        self.name = name
        self.offline = offline
        self.served = 0

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        turn = self.saved.find(request.history, request.query)
        if turn is None:
            raise ReplayMismatch(f"task {self.saved.typed_task.task_id} attempt {self.saved.attempt}: the saved "
                                 "transcript holds no agent turn for this conversation state")
        self.served += 1
        return turn.agent_turn()


TRUNCATED = "truncated"


class FluencyGate:
    """The fluency check of one rescored attempt: stops the walk where the
    saved transcript ends (see the module notes)."""

    def __init__(self, saved: SavedAttempt, checker: FluencyChecker | None, source_run: str,
                 reuse: bool = False) -> None:
        self.saved = saved
        self.checker = checker
        self.source_run = source_run
        # the checker is the source run's own (cirrus.evaluate.recorded): its saved verdicts are reused
        self.reuse = reuse
        self.name = checker.name if checker else "reused"
        self.truncated: dict[str, Any] | None = None  # what happened at the truncation
        self.sources: dict[tuple[int, str, int | None], str] = {}  # cirrus.evaluate.recorded.note_sources

    def _query_of(self, checkpoint: Any) -> str | None:
        checkpoints = self.saved.typed_task.checkpoints
        return checkpoints[checkpoint - 1].query if isinstance(checkpoint, int) and 0 < checkpoint <= len(
            checkpoints) else None

    def _saved(self, history: list[dict[str, Any]], next_query: str,
               has_next: bool) -> tuple[tuple[int, str, None] | None, dict[str, Any] | None]:
        """The saved turn this question follows (as a verdict-source key) and
        the fluency verdict the source run recorded for this very question,
        when it can be reused: a saved Yes only with the saved turn that
        followed it."""
        before = self.saved.finished_at(history)
        key = next(((index, "fluency", None) for index, turn in enumerate(self.saved.turns) if turn is before), None)
        old = before.fluency_verdict() if before else None
        if old is None or self._query_of(old.get("checkpoint")) != next_query or not (has_next or not old.get("ok")):
            old = None
        return key, old

    async def follows(self, history: list[dict[str, Any]], next_query: str) -> Verdict:
        from cirrus.evaluate.recorded import FROM_CACHE, FROM_RUN, asked
        from cirrus.evaluate.types import Verdict

        has_next = self.saved.find(history, next_query) is not None
        key, old = self._saved(history, next_query, has_next)
        if old is not None and self.checker is None:
            return Verdict(bool(old.get("ok")), f"reused from run {self.source_run}: {old.get('raw')}")
        if old is not None and self.reuse and key is not None:
            self.sources[key] = FROM_RUN
            return Verdict(bool(old.get("ok")), str(old.get("raw")))
        if self.checker is None:
            self.truncated = {"fluent": None, "raw": None}
            return Verdict(False, TRUNCATED)
        checker = self.checker
        verdict, cached = await asked(lambda: checker.follows(history, next_query))
        if cached and key is not None:
            self.sources[key] = FROM_CACHE
        if not verdict.ok or has_next:
            return verdict
        self.truncated = {"fluent": True, "raw": verdict.raw}
        return Verdict(False, TRUNCATED)


def _note_truncation(result: WalkResult, gate: FluencyGate) -> None:
    """Record the truncation as what it is, not as a fluency No."""
    if gate.truncated is None or not result.turns:
        return
    last = result.turns[-1]
    last.fluent = gate.truncated["fluent"]
    for index, record in enumerate(last.verdicts):
        if record["kind"] == "fluency" and record["raw"] == TRUNCATED:
            checkpoint = record["checkpoint"]
            replacement = [{"kind": TRUNCATED, "checkpoint": checkpoint, "ok": None,
                            "raw": f"the saved transcript has no agent turn for checkpoint {checkpoint} after this "
                                   "history: the walk cannot continue without calling the agent"}]
            if gate.truncated["fluent"] is not None:
                replacement.insert(0, {"kind": "fluency", "checkpoint": checkpoint, "ok": True,
                                       "raw": gate.truncated["raw"]})
            last.verdicts[index:index + 1] = replacement
            break


# ---------------------------------------------------------------------------
# the rescore


@dataclass
class RescoreSettings:
    workspace: Path
    source_run: str
    run_id: str
    concurrency: int = 8
    progress: bool = True
    fingerprint_extra: dict[str, Any] = field(default_factory=dict)
    details_extra: dict[str, Any] = field(default_factory=dict)
    # the model of each model client ("judge", a panel's "judge[2]", "fluency") and the [prices] of
    # cirrus.toml: summary.json's usage and cost, as in cirrus eval (cirrus.evaluate.runner.usage_and_cost)
    client_models: dict[str, str] = field(default_factory=dict)
    prices: dict[str, Any] = field(default_factory=dict)


def rescore_self_judged(source: SourceRun, clients: dict[str, Any], fluency_reused: bool) -> list[str]:
    """The roles of a rescore that grade the source run's agent with its own
    model: a new judge (or panel member) or fluency checker that is the
    agent's model at the agent's endpoint (as far as ``run.json`` shows it),
    and the source run's fluency verdicts when they are reused from a
    self-judged fluency checker."""
    agent_role = source.fingerprint.get("agent_role") or {}
    agent = (agent_role.get("model"), str(source.run.get("agent_base_url") or "").rstrip("/"))
    roles = set()
    if agent[0] is not None:
        from cirrus.llm.providers import shown_url

        for name, client in clients.items():
            endpoint = client.role.endpoint
            if (endpoint.model, str(shown_url(endpoint.base_url) or "").rstrip("/")) == agent:
                roles.add(name.split("[")[0])
    if fluency_reused and "fluency" in (source.run.get("self_judged_roles") or []):
        roles.add("fluency")
    return [name for name in ("judge", "fluency") if name in roles]


def _input_tokens(saved: SavedAttempt, replayed: int) -> int | None:
    if saved.row is None:
        return None
    if replayed == len(saved.turns):
        return saved.row.get("input_tokens")
    stats = [t.stats for t in saved.turns[:replayed]]
    if all("input_tokens" in s for s in stats):
        return sum(int(s["input_tokens"] or 0) for s in stats)
    return None


def _verdict_pairs(turns: list[dict[str, Any]]) -> dict[tuple[int, int], bool]:
    """(turn index, checkpoint) -> accepted, for the coverage verdicts a judge gave."""
    return {(i, v["checkpoint"]): bool(v["ok"]) for i, turn in enumerate(turns) for v in turn.get("verdicts") or []
            if v.get("kind") == "coverage" and v.get("raw") is not None}


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    frame.write_parquet(tmp)
    os.replace(tmp, path)


async def rescore_attempt(saved: SavedAttempt, source: SourceRun, agent_name: str, offline_agent: bool,
                          judge: CoverageJudge, fluency: FluencyChecker | None, *, reuse_judge: bool = False,
                          reuse_fluency: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Walk one saved attempt again: its attempts row and transcript, nothing
    written.  A judge failure is an error row; batch mode's
    :class:`~cirrus.llm.batching.Deferred` (a dry pass) and
    :class:`~cirrus.llm.batching.BatchMissing` (a bug) go through.
    ``reuse_judge`` / ``reuse_fluency``: the judge / fluency checker is the
    source run's own, whose recorded verdicts answer the questions it asked
    (:mod:`cirrus.evaluate.recorded`); the row's ``verdict_sources`` counts
    the verdicts taken from the run and from Cirrus's cache."""
    from cirrus.evaluate.recorded import RecordedJudge, note_sources
    from cirrus.evaluate.runner import attempt_row, attempt_transcript
    from cirrus.evaluate.walk import walk
    from cirrus.llm.batching import BatchMissing, Deferred
    from cirrus.replay import ToolReplayer, task_matching

    task, attempt = saved.typed_task, saved.attempt
    result, error, truncated, sources = None, None, None, None
    agent = ReplayAgent(saved, agent_name, offline_agent)
    if saved.status != "ok":
        reason = (saved.row or {}).get("error") or "no committed attempt"
        error = f"the source run's attempt failed: {reason}"
    else:
        gate = FluencyGate(saved, fluency, source.run_id, reuse_fluency)
        recorded = RecordedJudge(judge, saved, reuse_judge)
        try:
            # no cassette (the saved turns carry their results); the task's matching rules for TEV
            result = await walk(task, agent, recorded, gate, ToolReplayer(None, task_matching(task)), attempt)
            _note_truncation(result, gate)
            truncated = gate.truncated is not None
            sources = note_sources(result, {**recorded.sources, **gate.sources}, saved)
        except (Deferred, BatchMissing):
            raise
        except Exception as exc:  # noqa: BLE001  (one broken attempt must not stop the run; InfrastructureError too)
            error = f"{type(exc).__name__}: {exc}"
    row = attempt_row(task, attempt, result, error)
    transcript = attempt_transcript(task, attempt, result, error)
    row["truncated"] = transcript["truncated"] = truncated
    row["verdict_sources"] = sources
    transcript["source_run"] = source.run_id
    if result is not None:
        row["input_tokens"] = _input_tokens(saved, agent.served)
    return row, transcript


def batch_rounds_bound(tasks: list[Task]) -> int:
    """The most batch rounds a rescore can need: a walk of ``n`` checkpoints
    asks at most ``2n`` coverage questions (each checkpoint accepted once,
    each turn ending on at most one rejection) and ``n - 1`` fluency ones,
    one after the other, each up to the judges' parse attempts (a repair
    request follows an unreadable answer)."""
    from cirrus.judges.llm import DEFAULT_PARSE_ATTEMPTS

    longest = max((len(t.checkpoints) for t in tasks), default=0)
    return max(1, DEFAULT_PARSE_ATTEMPTS * (3 * longest - 1))


def verdict_sources(rows: list[dict[str, Any]], reuse_judge: bool, reuse_fluency: bool) -> dict[str, Any]:
    """``summary.json``'s account of where the rescore's verdicts came from
    (:mod:`cirrus.evaluate.recorded`), over its ok rows: whether the judge
    and fluency checker were the source run's own (``same_judge``,
    ``same_fluency``: their recorded verdicts reused), ``verdicts_reused``,
    ``verdicts_from_cache`` and, of those, ``cached_verdicts_differing`` from
    the source run's own verdict on the same turn and checkpoint."""
    counts = [row.get("verdict_sources") or {} for row in rows if row.get("status") == "ok"]
    return {"same_judge": reuse_judge, "same_fluency": reuse_fluency,
            "verdicts_reused": sum(int(c.get("run") or 0) for c in counts),
            "verdicts_from_cache": sum(int(c.get("cache") or 0) for c in counts),
            "cached_verdicts_differing": sum(int(c.get("cache_differing") or 0) for c in counts)}


async def run_rescore(settings: RescoreSettings, judge: CoverageJudge, fluency: FluencyChecker | None,
                      source: SourceRun | None = None, *, batch: BatchCollector | None = None,
                      notify: Callable[[str], None] | None = None,
                      batch_progress: Callable[[str, BatchStatus], None] | None = None) -> dict[str, Any]:
    """Rescore ``settings.source_run`` into ``settings.run_id``; returns the
    new summary.  ``fluency=None`` reuses the saved fluency verdicts.

    With ``batch`` (a collector already set on the judges' clients), the
    questions are first sent through the Batch API in rounds
    (:func:`cirrus.llm.batching.run_in_rounds`, state under
    ``.cirrus-cache/batches/rescore-<run_id>/``), then the attempts are
    walked and written with every answer read from the batches."""
    import polars as pl
    from tqdm import tqdm

    from cirrus import __version__
    from cirrus.evaluate.overhead import overhead_records
    from cirrus.evaluate.recorded import same_role
    from cirrus.evaluate.run_settings import EvalSettings, usage_and_cost
    from cirrus.evaluate.runner import summarize
    from cirrus.evaluate.store import TRANSCRIPTS_FILE, RunStore
    from cirrus.usage import UsageLedger, recording

    if settings.run_id == settings.source_run:
        raise RescoreError("the rescored run needs its own --run-id (it would overwrite the source run)")
    source = source or load_source(settings.workspace, settings.source_run)
    source_fp = source.fingerprint
    offline_source = set(source.summary.get("offline_heuristics") or [])
    agent_name = source_fp.get("agent") or source.summary.get("model", "?")
    fluency_name = fluency.name if fluency else f"reused:{source_fp.get('fluency', '?')}"
    store = RunStore(settings.workspace / REPORTS_DIR / settings.run_id)
    fingerprint = {
        "agent": agent_name, "judge": judge.name, "fluency": fluency_name, "attempts": source.attempts,
        "dataset": source_fp["dataset"], "cirrus": __version__, "agent_role": source_fp.get("agent_role"),
        "rescore_of": {"run_id": source.run_id, "fingerprint": _sha(source_fp)}, **settings.fingerprint_extra,
    }
    if fluency is None:
        fingerprint["fluency_role"] = {"reused": source_fp.get("fluency_role", source_fp.get("fluency"))}
    store.open(fingerprint, {"run_id": settings.run_id, "started_at": dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="seconds"), "tasks": len(source.tasks), "rescore_of": source.run_id, **settings.details_extra})
    done = {key for key, row in store.committed().items() if row["status"] == "ok"}
    todo = [saved for key, saved in source.saved.items() if key not in done]
    offline_agent = "agent" in offline_source
    reuse = {"reuse_judge": same_role(settings.fingerprint_extra.get("judge_role"), source_fp.get("judge_role")),
             "reuse_fluency": fluency is not None and same_role(settings.fingerprint_extra.get("fluency_role"),
                                                                source_fp.get("fluency_role"))}
    started = time.perf_counter()
    rounds = None
    if batch is not None:
        from cirrus.evaluate.roles import CACHE_DIR
        from cirrus.llm.batching import STATE_SUBDIR, Deferred, run_in_rounds

        async def dry_pass() -> None:
            async def probe(saved: SavedAttempt) -> None:
                try:
                    await rescore_attempt(saved, source, agent_name, offline_agent, judge, fluency, **reuse)
                except Deferred:
                    pass  # this attempt waits for the next batch

            await asyncio.gather(*(probe(saved) for saved in todo if saved.status == "ok"))

        state_dir = settings.workspace / CACHE_DIR / STATE_SUBDIR / f"rescore-{settings.run_id}"
        rounds = await run_in_rounds(batch, dry_pass, state_dir, max_rounds=batch_rounds_bound(source.tasks),
                                     notify=notify, progress=batch_progress)
    semaphore = asyncio.Semaphore(max(1, settings.concurrency))
    bar = tqdm(total=len(todo), desc=f"rescore {settings.run_id}", unit="attempt", disable=not settings.progress,
               dynamic_ncols=True)

    async def one(saved: SavedAttempt) -> None:
        async with semaphore:
            with recording(UsageLedger()) as ledger:
                row, transcript = await rescore_attempt(saved, source, agent_name, offline_agent, judge, fluency,
                                                        **reuse)
            row["usage"] = ledger.to_dict()
            store.append(row, transcript)
            bar.update(1)

    await asyncio.gather(*(one(saved) for saved in todo))
    bar.close()
    committed = store.committed()
    rows = [committed[key] for key in source.saved if key in committed]
    costed = EvalSettings(settings.workspace, settings.run_id, source.attempts, 1, settings.concurrency,
                          client_models=settings.client_models, prices=settings.prices)
    transcripts = {(t["task_id"], t["attempt"]): t for t in read_jsonl(store.directory / TRANSCRIPTS_FILE)}
    comparison, compared, agreed = [], 0, 0
    for row in rows:
        saved = source.saved[(row["task_id"], row["attempt"])]
        old, new = saved.row or {}, row
        new_turns = (transcripts.get((row["task_id"], row["attempt"])) or {}).get("turns") or []
        old_pairs = _verdict_pairs((saved.transcript or {}).get("turns") or [])
        for key, accepted in _verdict_pairs(new_turns).items():
            if key in old_pairs:
                compared += 1
                agreed += old_pairs[key] == accepted
        comparison.append({
            "task_id": row["task_id"], "attempt": row["attempt"], "checkpoints": row["checkpoints"],
            "source_status": old.get("status", "missing"), "status": new["status"],
            "source_covered": old.get("covered"), "covered": new["covered"], "source_success": old.get("success"),
            "success": new["success"], "truncated": new.get("truncated"), "turns_saved": len(saved.turns),
            "turns_replayed": len(new_turns) if new["status"] == "ok" else None,
            "changed": (new["covered"] != old.get("covered")) if new["status"] == old.get("status") == "ok" else None,
        })
    ok = [c for c in comparison if c["status"] == "ok"]
    rescore_info = {
        "source_run": source.run_id, "source_judge": source_fp.get("judge"),
        "source_fluency": source_fp.get("fluency"), "fluency": "rechecked" if fluency else "reused",
        "truncated": sum(1 for c in ok if c["truncated"]),
        "changed": sum(1 for c in ok if c["changed"]),
        "source_atpr": source.summary.get("atpr"), "source_sr": source.summary.get("sr"),
        "verdicts_compared": compared, "verdict_agreement": agreed / compared if compared else None,
        **verdict_sources(rows, reuse["reuse_judge"], reuse["reuse_fluency"]),
    }
    offline = [role for role, is_offline in (
        ("agent", "agent" in offline_source), ("judge", getattr(judge, "offline", False)),
        ("fluency", getattr(fluency, "offline", False) if fluency else "fluency" in offline_source)) if is_offline]
    summary = summarize(rows, source.summary.get("model", agent_name), int(source.summary.get("k", 1)), {
        "judge": judge.name, "fluency": fluency_name, "run_id": settings.run_id, "offline_heuristics": offline,
        "wall_s_this_session": round(time.perf_counter() - started, 2), "rescore": rescore_info,
        "self_judged": bool(settings.details_extra.get("self_judged", False)),
        **({"judge_panel": panel_agreement(members, votes_of_rows([r for r in rows if r["status"] == "ok"], members))}
           if (members := getattr(judge, "member_names", None)) else {}),
        **usage_and_cost((row.get("usage") for row in rows), costed, overhead_records(store.directory)),
        **({"batch": {"rounds": rounds, "requests": batch.sent}} if batch is not None else {}),
    })
    store.finalize(summary)
    # the contract's columns are written by finalize; the truncation flag joins them here
    flags = pl.DataFrame([{"task_id": r["task_id"], "attempt": r["attempt"], "truncated": r.get("truncated")}
                          for r in rows], schema={"task_id": pl.Utf8, "attempt": pl.Int64, "truncated": pl.Boolean})
    tasks_file = store.directory / "tasks.parquet"
    joined = pl.read_parquet(tasks_file).join(flags, on=["task_id", "attempt"], how="left")
    _write_parquet(joined.sort(["task_id", "attempt"]), tasks_file)
    comparison.sort(key=lambda c: (c["task_id"], c["attempt"]))
    for row in comparison:  # like tasks.parquet: the tables of several runs read together
        row.update(run_id=settings.run_id, model=summary["model"])
    schema = {name: getattr(pl, dtype) for name, dtype in RESCORE_COLUMNS.items()}
    _write_parquet(pl.DataFrame(comparison, schema=schema), store.directory / RESCORE_FILE)
    return summary


# ---------------------------------------------------------------------------
# the new run's id and judge


def default_run_id(source_run: str, judge_model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{source_run}-rescored-{judge_model}")[:100]


def judge_options(source: SourceRun, name: str, base_url: str | None, api_key_env: str | None,
                  params: dict[str, Any]) -> tuple[RoleOptions, str | None]:
    """The new judge's options (``base_url`` and ``api_key_env``: those given,
    or cirrus.toml's), and a line saying where it is asked when that is where
    the source run asked it: without a base URL, a judge that is the run's
    own model (a panel: the same members) is asked at the run's judge base
    URL (``run.json``), with the run's judge key variable when none is given
    (``judge_api_key_env``, else the run's only key variable)."""
    from cirrus.evaluate.roles import LOCAL, RoleOptions

    recorded = run_judge(source.run)
    if base_url or name == LOCAL or name != recorded.model or not recorded.base_url:
        return RoleOptions(name, base_url, api_key_env, params), None
    if "***" in recorded.base_url:
        raise RescoreError(f"run {source.run_id} recorded its judge's base URL with the credentials masked "
                           f"({recorded.base_url}): give the full URL with --judge-base-url")
    key = api_key_env or source.run.get("judge_api_key_env")
    if key is None and len(recorded.api_key_envs) == 1:
        key = recorded.api_key_envs[0]
    note = (f"judge {name} at {recorded.base_url}: where run {source.run_id} asked it (choose another with "
            "--judge-base-url)")
    return RoleOptions(name, recorded.base_url, key, params), note
