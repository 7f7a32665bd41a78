"""Run an evaluation: every (task, attempt) walked, with bounded concurrency,
appended to the run store as it finishes, resumable (contract section 3).

Before the first attempt, ``preflight`` (the endpoint check of
:mod:`cirrus.evaluate.preflight`) runs when there is anything to do.  A run
this call created and that committed no attempt -- stopped by the check, a
refused key, Ctrl-C or any other error before its first commit -- leaves no
``reports/<run_id>/`` folder behind (a folder that existed before is never
removed).  Committed attempts stay committed whatever stops the run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cirrus import __version__
from cirrus.evaluate.store import RunStore
from cirrus.evaluate.tasks import TaskIndex, TaskRef
from cirrus.evaluate.types import Agent, CoverageJudge, FluencyChecker, InfrastructureError
from cirrus.evaluate.walk import WalkResult, walk
from cirrus.judges.agreement import panel_agreement, votes_of_rows
from cirrus.llm.providers import EndpointError
from cirrus.metrics import AttemptRow, dataset_metrics, task_metrics
from cirrus.replay import ToolReplayer
from cirrus.workspace import REPORTS_DIR


@dataclass
class EvalSettings:
    workspace: Path
    run_id: str
    runs: int
    pass_k: int
    concurrency: int
    limit: int | None = None
    progress: bool = True
    # what must not change when a run is resumed (models, parameters, prompts)
    fingerprint_extra: dict[str, Any] = field(default_factory=dict)
    # recorded with the run, free to change (base URLs, ``self_judged``: its
    # value is also summary.json's)
    details_extra: dict[str, Any] = field(default_factory=dict)


def judge_votes(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Each judge panel member's coverage verdict on a turn, ``{"checkpoint",
    "judge", "ok"}`` per member and checkpoint asked; ``None`` for a single
    judge."""
    votes = [{"checkpoint": verdict["checkpoint"], "judge": vote["judge"], "ok": vote["ok"]}
             for verdict in verdicts if verdict.get("kind") == "coverage" for vote in verdict.get("votes") or ()]
    return votes or None


def attempt_row(task: dict[str, Any], attempt: int, result: WalkResult | None, error: str | None) -> dict[str, Any]:
    base = {"task_id": task["task_id"], "attempt": attempt, "category": task.get("category"),
            "checkpoints": len(task["checkpoints"])}
    if result is None:
        return {**base, "status": "error", "error": error, "covered": None, "accepted_turns": None, "tpr": None,
                "lj": None, "nei": None, "mtl": None, "mtl_alg1": None, "success": None, "input_tokens": None,
                "output_tokens": None,
                "wall_s": None, "turns": []}
    metrics = task_metrics(result.outcome)
    turns = [{
        "checkpoint": t.checkpoint, "reply_type": t.reply_type, "accepted": t.decision.accepted,
        "covered_through": t.covered_through, "tia": t.decision.tia, "tsa": t.decision.tsa, "tev": t.decision.tev,
        "rr": t.decision.rr, "stl": t.turn.output_tokens, "fluent": t.fluent, "tool_calls": len(t.turn.tool_calls),
        "wall_s": round(t.turn.wall_s, 4), "input_tokens": t.turn.input_tokens, "model_calls": t.turn.model_calls,
        "judge_votes": judge_votes(t.verdicts),
    } for t in result.turns]
    return {**base, "status": "ok", "error": None, "covered": result.outcome.covered,
            "accepted_turns": result.outcome.accepted_turns, "tpr": metrics.tpr, "lj": metrics.lj, "nei": metrics.nei,
            "mtl": metrics.mtl, "mtl_alg1": metrics.mtl_alg1, "success": metrics.success,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens, "wall_s": round(result.wall_s, 4), "turns": turns}


def attempt_transcript(task: dict[str, Any], attempt: int, result: WalkResult | None, error: str | None) -> dict[str, Any]:
    turns = []
    for judged in result.turns if result else []:
        checkpoint = task["checkpoints"][judged.checkpoint - 1]
        turns.append({
            "checkpoint": judged.checkpoint, "query": checkpoint["query"], "reference": checkpoint["reply"],
            "reference_tool_calls": checkpoint["tool_calls"], "agent_messages": judged.turn.messages,
            "agent_text": judged.turn.text,
            "tool_calls": [{"name": c.name, "arguments": c.arguments, "result": c.result, "recorded": c.recorded,
                            "error": c.error} for c in judged.turn.tool_calls],
            "verdicts": judged.verdicts, "accepted": judged.decision.accepted,
            "covered_through": judged.covered_through, "fluent": judged.fluent,
        })
    return {"task_id": task["task_id"], "attempt": attempt, "status": "ok" if result else "error", "error": error,
            "turns": turns}


# what the dataset metrics read of an attempt row
SUMMARY_FIELDS = ("task_id", "attempt", "status", "covered", "checkpoints", "accepted_turns", "tpr", "lj", "nei",
                  "mtl", "success")
# read too when present (rows of runs written before it lack it)
OPTIONAL_SUMMARY_FIELDS = ("mtl_alg1",)


def summarize(rows: list[dict[str, Any]], model: str, k: int, extra: dict[str, Any]) -> dict[str, Any]:
    metrics = dataset_metrics([AttemptRow(**{f: r[f] for f in SUMMARY_FIELDS},
                                          **{f: r.get(f) for f in OPTIONAL_SUMMARY_FIELDS}) for r in rows], k)
    return {"model": model, **metrics.summary(), "attempts": len(rows), "k": k, "cirrus_version": __version__,
            "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **extra}


async def run_eval(settings: EvalSettings, agent: Agent, judge: CoverageJudge, fluency: FluencyChecker,
                   index: TaskIndex | None = None, *, preflight: Callable[[], Awaitable[Any]] | None = None,
                   notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Walk every (task, attempt) of ``index`` (default: the workspace's
    tasks) not yet in the run store.  Tasks are read from the file when their
    attempt starts, so memory grows with ``concurrency``, not with the task
    count.  ``preflight`` is awaited once before the first attempt (not when
    everything is done already); ``notify`` gets lines for the user (a
    resumed run's "resuming run X: 11 of 20 attempts already done").

    The returned summary is ``summary.json``'s plus ``error_reasons``: the
    error rows' reasons with their counts, most frequent first."""
    if index is None:
        index = TaskIndex.scan(settings.workspace, settings.limit)
    directory = settings.workspace / REPORTS_DIR / settings.run_id
    created = not directory.exists()
    tally = {"errors": 0, "tpr_sum": 0.0, "ok": 0, "committed": 0}
    try:
        return await _run(settings, agent, judge, fluency, index, directory, tally, preflight, notify)
    except BaseException:  # Ctrl-C (a cancelled task, KeyboardInterrupt) included
        if created and not tally["committed"]:
            shutil.rmtree(directory, ignore_errors=True)  # a run that never started lists as nothing
        raise


async def _run(settings: EvalSettings, agent: Agent, judge: CoverageJudge, fluency: FluencyChecker,
               index: TaskIndex, directory: Path, tally: dict[str, Any],
               preflight: Callable[[], Awaitable[Any]] | None,
               notify: Callable[[str], None] | None) -> dict[str, Any]:
    attempts = max(settings.pass_k, settings.runs)
    store = RunStore(directory)
    fingerprint = {"agent": agent.name, "judge": judge.name, "fluency": fluency.name, "attempts": attempts,
                   "dataset": index.dataset_hash, "cirrus": __version__, **settings.fingerprint_extra}
    store.open(fingerprint, {"run_id": settings.run_id, "started_at": dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="seconds"), "tasks": len(index), **settings.details_extra})
    done = {(row["task_id"], row["attempt"]) for row in store.latest_rows() if row["status"] == "ok"}
    todo = [(ref, a) for ref in index.refs for a in range(attempts) if (ref.task_id, a) not in done]
    total = len(index.refs) * attempts
    if todo and len(todo) < total and notify is not None:
        notify(f"resuming run {settings.run_id}: {total - len(todo)} of {total} attempts already done")
    if todo and preflight is not None:
        await preflight()
    # Longest walks first: a long task started last would run alone at the
    # end (measured: efficiency 0.72 -> 0.82 at concurrency 64; see
    # benchmarks/README.md).  Outputs are sorted, so the order changes nothing else.
    todo.sort(key=lambda pair: (pair[0].checkpoints, pair[0].input_tokens), reverse=True)
    bar = tqdm(total=total, initial=total - len(todo), desc=f"eval {settings.run_id}", unit="attempt",
               disable=not settings.progress, dynamic_ncols=True)

    async def one(ref: TaskRef, attempt: int) -> None:
        task = index.load(ref)
        result, error = None, None
        try:
            with ToolReplayer.for_task(settings.workspace, task) as replayer:
                result = await walk(task, agent, judge, fluency, replayer, attempt)
        except EndpointError:
            raise  # a missing or refused key: every attempt would fail the same way
        except InfrastructureError as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001  (one broken attempt must not stop the run)
            error = f"{type(exc).__name__}: {exc}"
        row = attempt_row(task, attempt, result, error)
        store.append(row, attempt_transcript(task, attempt, result, error))
        tally["committed"] += 1
        if result is None:
            tally["errors"] += 1
        else:
            tally["ok"] += 1
            tally["tpr_sum"] += row["tpr"]
        bar.update(1)
        bar.set_postfix(errors=tally["errors"], atpr=f"{tally['tpr_sum'] / max(tally['ok'], 1):.3f}", refresh=False)

    queue: Iterator[tuple[TaskRef, int]] = iter(todo)

    async def worker() -> None:
        # ``concurrency`` workers share one queue: only the attempts in flight
        # have their task in memory (one coroutine per attempt would hold all)
        for ref, attempt in queue:
            await one(ref, attempt)

    started = time.perf_counter()
    try:
        async with asyncio.TaskGroup() as group:  # the first EndpointError cancels the rest
            for _ in range(min(max(1, settings.concurrency), len(todo))):
                group.create_task(worker())
    except* EndpointError as failures:
        raise failures.exceptions[0] from None
    except* Exception as failures:  # e.g. the run store could not write: report it plainly
        raise failures.exceptions[0] from None
    finally:
        bar.close()
    keys = {(ref.task_id, a) for ref in index.refs for a in range(attempts)}
    rows = []
    reasons: Counter[str] = Counter()
    members = getattr(judge, "member_names", None)  # a judge panel (cirrus.judges.panel)
    votes: list[list[bool]] = []
    for row in store.latest_rows():
        if (row["task_id"], row["attempt"]) in keys:
            rows.append({**{f: row[f] for f in SUMMARY_FIELDS}, **{f: row.get(f) for f in OPTIONAL_SUMMARY_FIELDS}})
            if row["status"] == "error":
                reasons[str(row.get("error") or "unknown error")] += 1
            elif members:
                votes += votes_of_rows([row], members)
    summary = summarize(rows, agent.name, settings.pass_k, {
        "judge": judge.name, "fluency": fluency.name, "run_id": settings.run_id,
        "offline_heuristics": [role for role, part in (("agent", agent), ("judge", judge), ("fluency", fluency))
                               if getattr(part, "offline", False)],
        "wall_s_this_session": round(time.perf_counter() - started, 2),
        # the judge or fluency checker is the agent's own model (cirrus.evaluate.roles.self_judged_roles)
        "self_judged": bool(settings.details_extra.get("self_judged", False)),
        **({"judge_panel": panel_agreement(members, votes)} if members else {}),
    })
    store.finalize(summary)
    return {**summary, "error_reasons": reasons.most_common()}
