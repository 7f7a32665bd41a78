"""Run an evaluation: every (task, attempt) walked, with bounded concurrency,
appended to the run store as it finishes, resumable (contract section 3).

Before the first attempt, ``preflight`` (the endpoint check of
:mod:`cirrus.evaluate.preflight`) runs when there is anything to do.  A run
this call created and that committed no attempt -- stopped by the check, a
refused key, Ctrl-C or any other error before its first commit -- leaves no
``reports/<run_id>/`` folder behind (a folder that existed before is never
removed).  Committed attempts stay committed whatever stops the run.  The
scheduling itself is :mod:`cirrus.evaluate.scheduler`'s, shared with the
subtask mode; this module holds what a walk's rows and summary are.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from cirrus import __version__
from cirrus.agents.config import replay_matching
from cirrus.evaluate.failures import failure_of
from cirrus.evaluate.run_settings import EvalSettings, budget, usage_and_cost
from cirrus.evaluate.scheduler import Schedule, run_attempts
from cirrus.evaluate.tasks import TaskIndex
from cirrus.evaluate.types import Agent, CoverageJudge, FluencyChecker
from cirrus.evaluate.walk import WalkResult, walk
from cirrus.judges.agreement import judge_votes, panel_agreement, votes_of_rows
from cirrus.llm.providers import EndpointError
from cirrus.metrics import AttemptRow, dataset_metrics, task_metrics
from cirrus.replay import ToolReplayer
from cirrus.schema import Task, as_task, task_dict
from cirrus.workspace import REPORTS_DIR


def attempt_row(task: Task | Mapping[str, Any], attempt: int, result: WalkResult | None,
                error: str | None) -> dict[str, Any]:
    """The ``attempts.jsonl`` row of one walk of ``task`` (a mapping is
    validated into a :class:`Task`); ``result`` None: an error row."""
    task = as_task(task)
    base = {"task_id": task.task_id, "attempt": attempt, "category": task.category,
            "checkpoints": len(task.checkpoints), "language": task.language, "channel": task.channel}
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
        "judge_votes": judge_votes(t.verdicts), "failure": failure_of(t, task),
    } for t in result.turns]
    noted = agent_note_counts(note for t in result.turns for note in t.turn.notes)
    return {**base, "status": "ok", "error": None, "covered": result.outcome.covered,
            "accepted_turns": result.outcome.accepted_turns, "tpr": metrics.tpr, "lj": metrics.lj, "nei": metrics.nei,
            "mtl": metrics.mtl, "mtl_alg1": metrics.mtl_alg1, "success": metrics.success,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens, "wall_s": round(result.wall_s, 4), "turns": turns,
            **({"agent_notes": noted} if noted else {})}


def agent_note_counts(notes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The agent notes (``AgentTurn.notes``, cirrus.agents.replies) per kind."""
    return dict(sorted(Counter(str(note.get("kind")) for note in notes).items()))


def attempt_transcript(task: Task | Mapping[str, Any], attempt: int, result: WalkResult | None,
                       error: str | None) -> dict[str, Any]:
    """The ``transcripts.jsonl`` record of one walk of ``task`` (a mapping is
    validated into a :class:`Task`): per judged turn the checkpoint's query,
    reference and reference tool calls, the agent's messages and the verdicts."""
    task = as_task(task)
    turns = []
    for judged in result.turns if result else []:
        checkpoint = task.checkpoints[judged.checkpoint - 1]
        turn = {"context": checkpoint.context} if checkpoint.context else {}  # docs/checkpoints.md
        turns.append({
            **turn, "checkpoint": judged.checkpoint, "query": checkpoint.query, "reference": checkpoint.reply,
            "reference_tool_calls": [call.model_dump(mode="json") for call in checkpoint.tool_calls],
            "agent_messages": judged.turn.messages,
            "agent_text": judged.turn.text,
            "tool_calls": [c.record() for c in judged.turn.tool_calls],
            "verdicts": judged.verdicts, "accepted": judged.decision.accepted,
            "covered_through": judged.covered_through, "fluent": judged.fluent,
            # what the model answered besides a clean reply (cirrus.agents.replies)
            **({"agent_notes": judged.turn.notes} if judged.turn.notes else {}),
        })
    return {"task_id": task.task_id, "attempt": attempt, "status": "ok" if result else "error", "error": error,
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
    tasks) not yet in the run store (:func:`cirrus.evaluate.scheduler.run_attempts`:
    bounded concurrency, resume, usage per attempt).  ``preflight`` is
    awaited once before the first attempt (not when everything is done
    already); ``notify`` gets lines for the user (a resumed run's "resuming
    run X: 11 of 20 attempts already done").  ``settings.mode`` "subtask"
    runs :func:`cirrus.evaluate.subtask.run_subtask_eval` instead.

    The returned summary is ``summary.json``'s plus ``error_reasons``: the
    error rows' reasons with their counts, most frequent first."""
    from cirrus.evaluate.subtask import MODES, check_resume_mode, run_subtask_eval

    if index is None:
        index = TaskIndex.scan(settings.workspace, settings.limit)
    if settings.mode not in MODES:
        raise ValueError(f"unknown mode {settings.mode!r}; choose walk or subtask")
    check_resume_mode(settings.workspace / REPORTS_DIR / settings.run_id, settings.mode)
    if settings.mode != "walk":  # the fluency checker has no part in a subtask run
        return await run_subtask_eval(settings, agent, judge, index, preflight=preflight, notify=notify)
    attempts = max(settings.pass_k, settings.runs)
    schedule = Schedule(
        settings.workspace / REPORTS_DIR / settings.run_id,
        {"agent": agent.name, "judge": judge.name, "fluency": fluency.name, "attempts": attempts,
         "dataset": index.dataset_hash, "cirrus": __version__, **settings.fingerprint_extra},
        {"tasks": len(index), **settings.details_extra}, attempts, settings.concurrency, f"eval {settings.run_id}",
        settings.progress, budget(settings))
    tally = {"errors": 0, "tpr_sum": 0.0, "ok": 0}

    async def walk_attempt(task: Task, attempt: int) -> tuple[dict[str, Any], dict[str, Any]]:
        result, error = None, None
        try:
            # the agent's tool view reads the task as agents do: the dict of its line
            matching = replay_matching(agent, task_dict(task))
            with ToolReplayer.for_task(settings.workspace, task, matching) as replayer:
                result = await walk(task, agent, judge, fluency, replayer, attempt)
        except EndpointError:
            raise  # a missing or refused key: every attempt would fail the same way
        except Exception as exc:  # noqa: BLE001  (one broken attempt must not stop the run)
            error = f"{type(exc).__name__}: {exc}"  # InfrastructureError included: an error row
        return attempt_row(task, attempt, result, error), attempt_transcript(task, attempt, result, error)

    def progress(row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] == "ok":
            tally["ok"] += 1
            tally["tpr_sum"] += row["tpr"]
        else:
            tally["errors"] += 1
        return {"errors": tally["errors"], "atpr": f"{tally['tpr_sum'] / max(tally['ok'], 1):.3f}"}

    outcome = await run_attempts(schedule, index, walk_attempt, on_commit=progress, preflight=preflight,
                                 notify=notify)
    store = outcome.store
    keys = {(ref.task_id, a) for ref in index.refs for a in range(attempts)}
    rows = []
    usages = []
    reasons: Counter[str] = Counter()
    members = getattr(judge, "member_names", None)  # a judge panel (cirrus.judges.panel)
    votes: list[list[bool]] = []
    noted: Counter[str] = Counter()
    for row in store.latest_rows():
        if (row["task_id"], row["attempt"]) in keys:
            rows.append({**{f: row[f] for f in SUMMARY_FIELDS}, **{f: row.get(f) for f in OPTIONAL_SUMMARY_FIELDS}})
            usages.append(row.get("usage"))
            noted.update(row.get("agent_notes") or {})
            if row["status"] == "error":
                reasons[str(row.get("error") or "unknown error")] += 1
            elif members:
                votes += votes_of_rows([row], members)
    summary = summarize(rows, agent.name, settings.pass_k, {
        "judge": judge.name, "fluency": fluency.name, "run_id": settings.run_id,
        "offline_heuristics": [role for role, part in (("agent", agent), ("judge", judge), ("fluency", fluency))
                               if getattr(part, "offline", False)],
        "wall_s_this_session": round(outcome.elapsed_s, 2),
        # the judge or fluency checker is the agent's own model (cirrus.evaluate.roles.self_judged_roles)
        "self_judged": bool(settings.details_extra.get("self_judged", False)),
        # agent notes per kind over the committed attempts (docs/report-schema.md)
        "agent_notes": dict(sorted(noted.items())),
        **({"judge_panel": panel_agreement(members, votes)} if members else {}),
        **usage_and_cost(usages, settings, outcome.overhead),
        **({"budget_stop": outcome.budget_stop} if outcome.budget_stop else {}),
    })
    store.finalize(summary)
    return {**summary, "error_reasons": reasons.most_common()}
