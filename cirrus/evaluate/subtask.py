"""Single-turn subtask mode: ``cirrus eval --mode subtask`` (docs/subtasks.md).

Every checkpoint ``k`` of every task is one *subtask*: the agent answers
``query_k`` once, after the **real** dialogue up to it (the reference
replies and the reference tool calls with their recorded results, never the
agent's own earlier turns), and the turn is judged exactly as the walk judges
a checkpoint (:func:`cirrus.evaluate.walk.judge_checkpoint`: RR, plus TIA,
TSA and TEV when the reference made calls).  There is no logical jump, no
fluency check and no early stop: every subtask is asked.

Pieces:

* :func:`reference_histories` / :func:`reference_history`: the real history
  before each checkpoint's query (pure but for the replayer it reads);
* :func:`run_subtasks`: one (task, attempt), all its subtasks;
* :func:`subtask_attempt_row` / :func:`subtask_transcript`: what the run store
  keeps of it (one ``attempts.jsonl`` line per (task, attempt), so resume
  works as in the walk);
* :func:`subtask_scores`: the summary scores from plain subtask rows (pure);
* :func:`run_subtask_eval`: the run (bounded concurrency, resumable), and
  :func:`finalize_subtask_run`: ``subtasks.parquet``, ``transcripts.jsonl``,
  ``summary.json``.

Tasks and checkpoints travel as :class:`~cirrus.schema.Task` and
:class:`~cirrus.schema.Checkpoint` (a mapping given to an entry point is
validated into one); the agent is given the dict of the task's line
(``TurnRequest.task``), built once per (task, attempt).

Errors: an infrastructure failure on one subtask (API errors after retries,
a judge that never answered parseably) marks that subtask ``status =
"error"`` and the other subtasks of the attempt are still asked; the
(task, attempt) row is then ``status = "error"`` so that resuming the run
asks all its subtasks again.  Scores count every subtask whose own status is
``ok`` (an ok subtask of a partly failed attempt included).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cirrus import __version__
from cirrus.metrics import pass_at_k
from cirrus.workspace import REPORTS_DIR

# the replay and agent modules (vcrpy, httpx) are imported where a run needs
# them: the report's schema reads SUBTASK_COLUMNS from here
if TYPE_CHECKING:
    from cirrus.evaluate.types import Agent, AgentTurn, CoverageJudge
    from cirrus.metrics import CheckpointDecision
    from cirrus.evaluate.run_settings import EvalSettings
    from cirrus.evaluate.tasks import TaskIndex
    from cirrus.schema import Checkpoint, Task

MODE_WALK = "walk"
MODE_SUBTASK = "subtask"
MODES = (MODE_WALK, MODE_SUBTASK)
SUBTASKS_FILE = "subtasks.parquet"


class Replay(Protocol):
    """What :func:`reference_histories` needs of a replayer (a
    :class:`~cirrus.replay.ToolReplayer`, or a test double): the recorded
    result of a call, :class:`~cirrus.replay.NoRecordedResult` when none."""

    def call(self, name: str, arguments: Any) -> Any: ...


# --------------------------------------------------------------------------
# The real history
# --------------------------------------------------------------------------


def _context(checkpoint: Checkpoint) -> list[dict[str, Any]]:
    """A checkpoint's optional ``context``: the real messages between the
    previous checkpoint's reference reply and its query (copies; empty when
    it has none)."""
    return [dict(m) for m in checkpoint.context or []]


def consume_calls(messages: Iterable[Mapping[str, Any]], replay: Replay) -> None:
    """Replay the tool calls that ``messages`` already show with their results
    (the task's history, a checkpoint's context), only to move the replayer
    past them: the cassette holds them too, so a later reference call with
    the same arguments gets its own, later answer."""
    from cirrus.replay import NoRecordedResult

    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            try:
                replay.call(str(function.get("name") or ""), function.get("arguments") or "{}")
            except NoRecordedResult:
                pass


def reference_turn(checkpoint: Checkpoint | Mapping[str, Any], number: int, replay: Replay) -> list[dict[str, Any]]:
    """Checkpoint ``number``'s reference agent turn as OpenAI messages: its
    tool calls (ids ``ref-<number>-<i>``, arguments as JSON strings) and
    their results replayed from the cassette, then the reply (none when
    empty).  ``checkpoint``: a :class:`~cirrus.schema.Checkpoint` (a mapping
    is validated into one)."""
    from cirrus.agents import prompts
    from cirrus.evaluate.walk import as_checkpoint
    from cirrus.replay import NoRecordedResult

    checkpoint = as_checkpoint(checkpoint)
    messages: list[dict[str, Any]] = []
    calls = checkpoint.tool_calls
    if calls:
        ids = [f"ref-{number}-{i}" for i in range(len(calls))]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
            for cid, call in zip(ids, calls)]})
        for cid, call in zip(ids, calls):
            try:
                content = prompts.tool_result_content(replay.call(call.name, call.arguments))
            except NoRecordedResult:
                content = prompts.no_recorded_result_content()  # what the agent's own call would get
            messages.append({"role": "tool", "tool_call_id": cid, "content": content})
    reply = checkpoint.reply
    if reply.strip():
        messages.append({"role": "assistant", "content": reply})
    return messages


def reference_histories(task: Task | Mapping[str, Any], replay: Replay, *,
                        at_checkpoint: Callable[[int], None] | None = None) -> list[list[dict[str, Any]]]:
    """The real history before each checkpoint's query: item ``k - 1`` is
    what the agent sees before ``query_k`` in subtask ``k``.

    It is the task's ``history``; then for every earlier checkpoint ``i``:
    its ``context`` messages, the user message ``query_i`` and the reference
    agent turn (tool calls with their replayed results, then ``reply_i``);
    then checkpoint ``k``'s own ``context``.  ``replay`` is read in dialogue
    order, so it must be a replayer of its own (not the one the agent's
    calls go to), fresh for the task.  ``at_checkpoint(k)`` is called when
    ``replay`` stands past every call the real dialogue made before
    checkpoint ``k``'s query (history and contexts included): where the
    agent's own replay of subtask ``k`` must start.  ``task``: a
    :class:`~cirrus.schema.Task` (a mapping is validated into one)."""
    from cirrus.schema import as_task

    task = as_task(task)
    checkpoints = task.checkpoints
    base = [dict(m) for m in task.history]
    consume_calls(base, replay)
    histories: list[list[dict[str, Any]]] = []
    so_far = base
    for number, checkpoint in enumerate(checkpoints, 1):
        context = _context(checkpoint)
        consume_calls(context, replay)
        if at_checkpoint is not None:
            at_checkpoint(number)
        before = so_far + context
        histories.append(before)
        so_far = before + [{"role": "user", "content": checkpoint.query}] + reference_turn(checkpoint, number,
                                                                                              replay)
    return histories


def reference_history(task: Task | Mapping[str, Any], k: int, replay: Replay) -> list[dict[str, Any]]:
    """The real history before checkpoint ``k``'s (1-based) query; see
    :func:`reference_histories` (``replay`` fresh for the task)."""
    from cirrus.schema import as_task

    task = as_task(task)
    if not 1 <= k <= len(task.checkpoints):
        raise ValueError(f"checkpoint {k} is not in 1..{len(task.checkpoints)}")
    return reference_histories(task, replay)[k - 1]


def message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of a subtask's dialogue (real history + query), counted as
    ingest counts a task's ``stats.input_tokens`` (tiktoken ``cl100k_base``,
    offline): each message's text, or its tool calls as JSON, one per line.
    ``subtasks.parquet``'s ``dialogue_tokens``; the token bands read
    :func:`agent_input_tokens`."""
    from cirrus.offline import count_tokens

    # json.dumps with its defaults, as ingest (cirrus.ingest.tasks.build_task) counts
    return count_tokens("\n".join(m.get("content") or json.dumps(m.get("tool_calls", "")) for m in messages))


def agent_input_tokens(task: Task | Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                       system_prompt: str | None = None) -> int:
    """Tokens of the whole input the agent is sent for a subtask, as the
    paper's Table 4 bins it: the system message (``system_prompt``, default
    Cirrus's own, with the task's knowledge), the task's tool schemas as
    JSON, and ``messages`` (real history + query), counted with the run's
    tokenizer (Cirrus's offline ``cl100k_base``,
    :func:`cirrus.agents.prompts.request_tokens`).  ``task``: the task as
    the agent is given it (the dict of its line, :func:`~cirrus.schema.task_dict`;
    a :class:`~cirrus.schema.Task` is turned into that dict)."""
    from cirrus.agents import prompts
    from cirrus.offline import count_tokens
    from cirrus.schema import Task, task_dict
    from cirrus.tool_matching import without_rules

    seen_by_agent = task_dict(task) if isinstance(task, Task) else task
    system = prompts.system_message(seen_by_agent,
                                    system_prompt if system_prompt is not None else prompts.SYSTEM_PROMPT)
    return prompts.request_tokens(system, without_rules(seen_by_agent.get("tools") or None), messages,
                                  count_tokens)


# --------------------------------------------------------------------------
# One (task, attempt)
# --------------------------------------------------------------------------


@dataclass(slots=True)
class SubtaskResult:
    """One subtask of one attempt: the agent's turn and its verdicts, or the
    infrastructure error that stopped it (``turn`` and ``decision`` None)."""

    checkpoint: int
    reply_type: str
    input_tokens: int  # the agent's whole input: system message, tools, real history + query
    history_messages: int
    dialogue_tokens: int = 0  # the real history + query only
    needs_tool: bool = False  # the reference made tool calls at this checkpoint
    turn: AgentTurn | None = None
    decision: CheckpointDecision | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0

    @property
    def status(self) -> str:
        return "ok" if self.error is None else "error"


@dataclass(slots=True)
class SubtaskAttempt:
    subtasks: list[SubtaskResult]
    wall_s: float

    @property
    def error(self) -> str | None:
        """The first subtask error, naming its checkpoint; None when all are ok."""
        failed = next((s for s in self.subtasks if s.error is not None), None)
        return None if failed is None else f"checkpoint {failed.checkpoint}: {failed.error}"


async def run_subtasks(task: Task | Mapping[str, Any], agent: Agent, judge: CoverageJudge, workspace: Path,
                       attempt: int = 0) -> SubtaskAttempt:
    """Ask and judge every subtask of ``task`` once.  The history is built
    with a replayer of its own; the agent's calls in subtask ``k`` go to a
    second replayer set to where the real dialogue stood before checkpoint
    ``k`` (every call of the history, the contexts and the earlier
    reference turns already played), so a call the ticket repeated gets the
    answer recorded at that point, not the first one.
    :class:`~cirrus.llm.providers.EndpointError` (a refused key) is raised;
    any other failure is that subtask's error.  ``task``: a
    :class:`~cirrus.schema.Task` (a mapping is validated into one)."""
    from cirrus.agents.config import replay_matching
    from cirrus.replay import ToolReplayer
    from cirrus.schema import as_task, task_dict

    started = time.perf_counter()
    task = as_task(task)
    seen_by_agent = task_dict(task)  # TurnRequest.task: the task's line, as agents read it
    system_prompt = getattr(agent, "system_prompt", None)
    with ToolReplayer.for_task(workspace, task) as history_replay:
        positions: list[dict[int, int]] = []
        histories = reference_histories(task, history_replay,
                                        at_checkpoint=lambda _: positions.append(history_replay.position()))
    results: list[SubtaskResult] = []
    with ToolReplayer.for_task(workspace, task, replay_matching(agent, seen_by_agent)) as replayer:
        for number, (checkpoint, history) in enumerate(zip(task.checkpoints, histories), 1):
            results.append(await _run_subtask(seen_by_agent, number, checkpoint, history, positions[number - 1],
                                              replayer, agent, judge, attempt, system_prompt))
    return SubtaskAttempt(results, time.perf_counter() - started)


async def _run_subtask(seen_by_agent: dict[str, Any], number: int, checkpoint: Checkpoint,
                       history: list[dict[str, Any]], position: dict[int, int], replayer: Any, agent: Agent,
                       judge: CoverageJudge, attempt: int, system_prompt: str | None) -> SubtaskResult:
    """Subtask ``number`` (``checkpoint``) asked after the real ``history``;
    ``seen_by_agent``: the task as the agent is given it."""
    from cirrus.evaluate.plan import subtask_done
    from cirrus.evaluate.types import TurnRequest
    from cirrus.evaluate.walk import _verdict_record, judge_checkpoint
    from cirrus.llm.providers import EndpointError

    seen = history + [{"role": "user", "content": checkpoint.query}]
    result = SubtaskResult(number, checkpoint.reply_type, agent_input_tokens(seen_by_agent, seen, system_prompt),
                           len(history), dialogue_tokens=message_tokens(seen),
                           needs_tool=bool(checkpoint.tool_calls))
    begun = time.perf_counter()
    try:
        replayer.seek(position)
        result.turn = await agent.respond(TurnRequest(seen_by_agent, history, checkpoint.query, attempt), replayer)
        subtask_done(len(checkpoint.tool_calls), result.turn.model_calls)  # the run's length model (plan.py)
        result.decision, verdict = await judge_checkpoint(judge, seen, checkpoint, result.turn,
                                                          matching=getattr(replayer, "matching", None))
        result.verdicts.append(_verdict_record("coverage", number, verdict, result.decision.accepted))
    except EndpointError:
        raise
    except Exception as exc:  # noqa: BLE001  (InfrastructureError and any other: this subtask only)
        result.turn, result.decision = None, None
        result.error = f"{type(exc).__name__}: {exc}"
    result.wall_s = time.perf_counter() - begun
    return result


def _subtask_record(result: SubtaskResult) -> dict[str, Any]:
    from cirrus.judges.agreement import judge_votes

    turn, decision = result.turn, result.decision
    ok = turn is not None and decision is not None
    return {
        "checkpoint": result.checkpoint, "reply_type": result.reply_type, "input_tokens": result.input_tokens,
        "dialogue_tokens": result.dialogue_tokens, "needs_tool": result.needs_tool,
        # usage the API reported; null when the agent made no model call (an offline baseline)
        "api_input_tokens": turn.input_tokens if ok and turn.model_calls else None,
        "tia": decision.tia if ok else None, "tsa": decision.tsa if ok else None,
        "tev": decision.tev if ok else None, "rr": decision.rr if ok else None,
        "accepted": decision.accepted if ok else None, "stl": turn.output_tokens if ok else None,
        "tool_calls": len(turn.tool_calls) if ok else None, "model_calls": turn.model_calls if ok else None,
        "status": result.status, "error": result.error, "wall_s": round(result.wall_s, 4),
        "judge_votes": judge_votes(result.verdicts) if ok else None,
    }


def subtask_attempt_row(task: Task | Mapping[str, Any], attempt: int, result: SubtaskAttempt | None,
                        error: str | None = None) -> dict[str, Any]:
    """The ``attempts.jsonl`` line of a (task, attempt) in subtask mode:
    ``mode``, ``status`` (``error`` when any subtask, or the attempt itself,
    failed), ``subtasks`` (one record per checkpoint).  ``task``: a
    :class:`~cirrus.schema.Task` (a mapping is validated into one)."""
    from cirrus.schema import as_task

    task = as_task(task)
    subtasks = [_subtask_record(s) for s in result.subtasks] if result is not None else []
    error = error if result is None else result.error
    ok = [s for s in subtasks if s["status"] == "ok"]
    return {"task_id": task.task_id, "attempt": attempt, "mode": MODE_SUBTASK, "category": task.category,
            "checkpoints": len(task.checkpoints), "status": "ok" if error is None else "error", "error": error,
            "input_tokens": sum(s["api_input_tokens"] or 0 for s in ok),
            "output_tokens": sum(s["stl"] or 0 for s in ok),
            "wall_s": None if result is None else round(result.wall_s, 4), "subtasks": subtasks}


def subtask_transcript(task: Task | Mapping[str, Any], attempt: int, result: SubtaskAttempt | None,
                       error: str | None = None) -> dict[str, Any]:
    """The ``transcripts.jsonl`` line: per subtask the query, the reference,
    the agent's messages, tool calls and verdicts (the real history is not
    repeated: it follows from the task, ``history_messages`` says how long
    it was).  ``task``: a :class:`~cirrus.schema.Task` (a mapping is
    validated into one)."""
    from cirrus.schema import as_task

    task = as_task(task)
    subtasks = []
    for s in result.subtasks if result is not None else []:
        checkpoint = task.checkpoints[s.checkpoint - 1]
        turn = s.turn
        subtasks.append({
            "checkpoint": s.checkpoint, "history_messages": s.history_messages, "query": checkpoint.query,
            "reference": checkpoint.reply,
            "reference_tool_calls": [call.model_dump(mode="json") for call in checkpoint.tool_calls],
            "agent_messages": turn.messages if turn else [], "agent_text": turn.text if turn else None,
            "tool_calls": [c.record() for c in (turn.tool_calls if turn else [])],
            "verdicts": s.verdicts, "accepted": s.decision.accepted if s.decision else None,
            "status": s.status, "error": s.error,
            **({"agent_notes": turn.notes} if turn and turn.notes else {}),
        })
    error = error if result is None else result.error
    return {"task_id": task.task_id, "attempt": attempt, "mode": MODE_SUBTASK,
            "status": "ok" if error is None else "error", "error": error, "subtasks": subtasks}


# --------------------------------------------------------------------------
# Scores (pure)
# --------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def subtask_pass_counts(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], tuple[int, int]]:
    """``(task_id, checkpoint) -> (n, c)``: the subtask's ok attempts and how
    many of them were accepted.  A subtask with no ok attempt has ``n = 0``."""
    counts: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        pair = counts.setdefault((row["task_id"], int(row["checkpoint"])), [0, 0])
        if row["status"] == "ok":
            pair[0] += 1
            pair[1] += int(bool(row["accepted"]))
    return {key: (n, c) for key, (n, c) in counts.items()}


def subtask_scores(rows: Iterable[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """Summary scores of subtask rows (one per (task, checkpoint, attempt):
    ``task_id``, ``checkpoint``, ``status``, ``accepted``, ``tia``, ``tsa``,
    ``tev``, ``rr``, ``stl``):

    * ``pass@1``: mean over subtasks with an ok attempt of ``c / n``;
      ``pass@K`` (K > 1): mean over subtasks with ``n >= K`` of the unbiased
      ``1 - C(n-c, K) / C(n, K)``; None where no subtask qualifies;
    * ``atia``, ``atsa``, ``atev``, ``arr``: means over ok subtask attempts
      where the value is defined (TSA / TEV are null when the reference made
      no call); ``atia_tool``: TIA over the ok attempts of subtasks whose
      reference calls a tool (``needs_tool``, or TSA defined in rows that
      lack it), the population of the paper's TIA column as we read it;
      ``amtl``: mean STL of the accepted ones;
    * ``n_tasks``, ``n_subtasks`` (distinct, errors included), ``n_ok``,
      ``subtask_errors`` (subtask attempts that failed), ``n_subtasks_k``."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    rows = list(rows)
    ok = [r for r in rows if r["status"] == "ok"]
    counts = subtask_pass_counts(rows)
    pass1 = [c / n for n, c in counts.values() if n >= 1]
    at_k = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]

    def defined(name: str) -> list[float]:
        return [float(bool(r[name])) for r in ok if r[name] is not None]

    scores: dict[str, Any] = {
        "n_tasks": len({r["task_id"] for r in rows}), "n_subtasks": len(counts), "n_ok": len(ok),
        "subtask_errors": len(rows) - len(ok), "pass@1": _mean(pass1)}
    if k != 1:
        scores[f"pass@{k}"] = _mean(at_k)
    tool_tia = [float(bool(r["tia"])) for r in ok if r["tia"] is not None and needs_tool(r)]
    scores.update({"n_subtasks_k": len(at_k), "atia": _mean(defined("tia")), "atia_tool": _mean(tool_tia),
                   "atsa": _mean(defined("tsa")),
                   "atev": _mean(defined("tev")), "arr": _mean(defined("rr")),
                   "amtl": _mean([float(r["stl"]) for r in ok if r["accepted"] and r["stl"] is not None])})
    return scores


def needs_tool(row: Mapping[str, Any]) -> bool:
    """Whether a subtask row's reference called a tool: its ``needs_tool``;
    in a row written before that column, whether TSA is defined (it is
    exactly when the reference made calls, on ok rows)."""
    value = row.get("needs_tool")
    return bool(value) if value is not None else row.get("tsa") is not None


def flat_rows(attempt_rows: Iterable[Mapping[str, Any]], run_id: str, model: str | None) -> Iterator[dict[str, Any]]:
    """One ``subtasks.parquet`` row per (task, checkpoint, attempt) of the
    committed attempt rows.  An attempt that failed before its subtasks ran
    (no ``subtasks``) gives one error row per checkpoint."""
    for row in attempt_rows:
        subtasks = row.get("subtasks") or [
            {"checkpoint": k, "status": "error", "error": row.get("error")} for k in range(1, row["checkpoints"] + 1)]
        for s in subtasks:
            yield {"run_id": run_id, "model": model, "task_id": row["task_id"], "attempt": row["attempt"],
                   **{c: s.get(c) for c in SUBTASK_COLUMNS if c not in ("run_id", "model", "task_id", "attempt",
                                                                         "category")},
                   "category": row.get("category")}


# subtasks.parquet: column -> polars type name (docs/report-schema.md, docs/subtasks.md)
SUBTASK_COLUMNS: dict[str, str] = {
    "run_id": "Utf8", "model": "Utf8", "task_id": "Utf8", "attempt": "Int64", "checkpoint": "Int64",
    "category": "Utf8", "reply_type": "Utf8", "input_tokens": "Int64", "api_input_tokens": "Int64",
    "tia": "Boolean", "tsa": "Boolean", "tev": "Boolean", "rr": "Boolean", "accepted": "Boolean", "stl": "Int64",
    "tool_calls": "Int64", "status": "Utf8", "error": "Utf8", "wall_s": "Float64", "judge_votes": "Utf8",
    # appended when input_tokens became the agent's whole input (runs written before lack them)
    "dialogue_tokens": "Int64", "needs_tool": "Boolean",
}
# columns a run written before they existed lacks (read as null)
LATER_SUBTASK_COLUMNS = ("dialogue_tokens", "needs_tool")


def subtask_frame(rows: Iterable[Mapping[str, Any]]) -> Any:
    """``subtasks.parquet``'s table (polars) from flat rows, in
    (task_id, attempt, checkpoint) order."""
    import polars as pl

    schema = {name: getattr(pl, dtype) for name, dtype in SUBTASK_COLUMNS.items()}
    prepared = [{**{c: r.get(c) for c in SUBTASK_COLUMNS},
                 "judge_votes": None if r.get("judge_votes") is None else json.dumps(
                     r["judge_votes"], ensure_ascii=False, separators=(",", ":"))} for r in rows]
    return pl.DataFrame(prepared, schema=schema).sort("task_id", "attempt", "checkpoint")


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------


def finalize_subtask_run(directory: Path, summary: dict[str, Any]) -> None:
    """Write ``subtasks.parquet`` and ``summary.json`` and compact
    ``transcripts.jsonl`` (the last committed line of each (task, attempt))
    of a subtask run's folder; never ``tasks.parquet`` /
    ``checkpoints.parquet`` (their meaning is the walk's)."""
    from cirrus.evaluate.store import ATTEMPTS_FILE, DISK_FULL_ADVICE, TRANSCRIPTS_FILE, RunStore, _latest_lines
    from cirrus.files import atomic_writer

    store = RunStore(directory)
    committed = _latest_lines(directory / ATTEMPTS_FILE)
    frame = subtask_frame(flat_rows(store.latest_rows(committed), directory.name, summary.get("model")))
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    with atomic_writer(directory / SUBTASKS_FILE, binary=True, advice=DISK_FULL_ADVICE) as out:
        out.write(buffer.getbuffer())
    transcripts = directory / TRANSCRIPTS_FILE
    latest = _latest_lines(transcripts)
    with transcripts.open("rb") as source, atomic_writer(transcripts, binary=True, advice=DISK_FULL_ADVICE) as out:
        for key in sorted(k for k in latest if k in committed):
            source.seek(latest[key])
            out.write(source.readline())
    with atomic_writer(directory / "summary.json", advice=DISK_FULL_ADVICE) as out:
        json.dump(summary, out, indent=2, ensure_ascii=False)
        out.write("\n")


async def run_subtask_eval(settings: EvalSettings, agent: Agent, judge: CoverageJudge, index: TaskIndex, *,
                           preflight: Callable[[], Awaitable[Any]] | None = None,
                           notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every (task, attempt) of ``index`` not yet in the run store, in
    subtask mode (:func:`cirrus.evaluate.runner.run_eval` with ``mode =
    "subtask"`` comes here).  Same scheduling, resume and clean-up rules as
    the walk (:mod:`cirrus.evaluate.scheduler`); the fingerprint holds
    ``"mode": "subtask"``, so a walk run cannot be resumed in subtask mode or
    the other way round.  Returns ``summary.json``'s content plus
    ``error_reasons``."""
    from cirrus.evaluate.run_settings import budget, usage_and_cost
    from cirrus.evaluate.scheduler import Schedule, run_attempts
    from cirrus.llm.providers import EndpointError

    attempts = max(settings.pass_k, settings.runs)
    schedule = Schedule(
        settings.workspace / REPORTS_DIR / settings.run_id,
        {"agent": agent.name, "judge": judge.name, "mode": MODE_SUBTASK, "attempts": attempts,
         "dataset": index.dataset_hash, "cirrus": __version__, **settings.fingerprint_extra},
        {"mode": MODE_SUBTASK, "tasks": len(index), **settings.details_extra}, attempts, settings.concurrency,
        f"subtasks {settings.run_id}", settings.progress, budget(settings), subtasks=True)
    tally = {"errors": 0, "accepted": 0, "asked": 0}

    async def subtask_attempt(task: Task, attempt: int) -> tuple[dict[str, Any], dict[str, Any]]:
        result, error = None, None
        try:
            result = await run_subtasks(task, agent, judge, settings.workspace, attempt)
        except EndpointError:
            raise
        except Exception as exc:  # noqa: BLE001  (a broken cassette: this attempt only)
            error = f"{type(exc).__name__}: {exc}"
        return (subtask_attempt_row(task, attempt, result, error),
                subtask_transcript(task, attempt, result, error))

    def progress(row: dict[str, Any]) -> dict[str, Any]:
        tally["errors"] += row["status"] != "ok"
        for s in row["subtasks"]:
            if s["status"] == "ok":
                tally["asked"] += 1
                tally["accepted"] += bool(s["accepted"])
        return {"errors": tally["errors"], "pass1": f"{tally['accepted'] / max(tally['asked'], 1):.3f}"}

    outcome = await run_attempts(schedule, index, subtask_attempt, on_commit=progress, preflight=preflight,
                                 notify=notify)
    store = outcome.store
    keys = {(ref.task_id, a) for ref in index.refs for a in range(attempts)}
    rows = [row for row in store.latest_rows() if (row["task_id"], row["attempt"]) in keys]
    reasons: Counter[str] = Counter()
    for row in rows:
        for s in row.get("subtasks") or [{"status": "error", "error": row.get("error")}]:
            if s["status"] != "ok":
                reasons[str(s.get("error") or "unknown error")] += 1
    scores = subtask_scores(flat_rows(rows, settings.run_id, agent.name), settings.pass_k)
    summary = {
        "mode": MODE_SUBTASK, "model": agent.name, **scores, "errors": sum(r["status"] != "ok" for r in rows),
        "attempts": len(rows), "k": settings.pass_k, "cirrus_version": __version__,
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "judge": judge.name, "run_id": settings.run_id,
        "offline_heuristics": [role for role, part in (("agent", agent), ("judge", judge))
                               if getattr(part, "offline", False)],
        "wall_s_this_session": round(outcome.elapsed_s, 2),
        "self_judged": bool(settings.details_extra.get("self_judged", False)),
        **usage_and_cost((row.get("usage") for row in rows), settings, outcome.overhead),
        **({"budget_stop": outcome.budget_stop} if outcome.budget_stop else {}),
    }
    finalize_subtask_run(directory=schedule.directory, summary=summary)
    return {**summary, "error_reasons": reasons.most_common()}


def run_mode(directory: Path) -> str:
    """``subtask`` or ``walk``: the mode of the run in ``directory``, from its
    ``summary.json`` or ``run.json`` (a run without either, or one written
    before subtask mode existed, is a walk)."""
    for name, key in (("summary.json", ("mode",)), ("run.json", ("fingerprint", "mode"))):
        try:
            value: Any = json.loads((directory / name).read_text(encoding="utf-8"))
            for part in key:
                value = value.get(part) if isinstance(value, dict) else None
        except (OSError, ValueError):
            continue
        if value in MODES:
            return str(value)
    return MODE_WALK


def check_resume_mode(directory: Path, mode: str) -> None:
    """Refuse, with :class:`~cirrus.evaluate.store.RunMismatch`, to resume
    the run in ``directory`` in another mode than it was started in (the
    fingerprint check would refuse too, naming only the fields that differ)."""
    from cirrus.evaluate.store import RUN_FILE, RunMismatch

    if not (directory / RUN_FILE).is_file():
        return
    started = run_mode(directory)
    if started != mode:
        raise RunMismatch(f"run {directory.name} was started with --mode {started}; it cannot be resumed with --mode "
                          f"{mode}: resume it with --mode {started}, or choose a new --run-id")


def refuse_subtask_run(directory: Path, command: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error`` when ``directory`` holds a subtask run, which
    ``command`` (show, diff, rescore, judge-consistency: walk tools) cannot
    read."""
    if run_mode(directory) == MODE_SUBTASK:
        raise error(f"run {directory.name} is a subtask run (cirrus eval --mode subtask): `cirrus {command}` "
                         f"reads walks only; read its {SUBTASKS_FILE} and transcripts.jsonl, or `cirrus report "
                         f"{directory.name}` for its tables (docs/subtasks.md)")


__all__ = ["MODES", "MODE_SUBTASK", "MODE_WALK", "SUBTASKS_FILE", "SUBTASK_COLUMNS", "SubtaskAttempt",
           "SubtaskResult", "LATER_SUBTASK_COLUMNS", "agent_input_tokens", "check_resume_mode", "finalize_subtask_run", "flat_rows",
           "message_tokens", "needs_tool", "reference_histories",
           "reference_history", "refuse_subtask_run", "run_mode", "run_subtask_eval", "run_subtasks",
           "subtask_attempt_row", "subtask_frame", "subtask_pass_counts", "subtask_scores", "subtask_transcript"]
