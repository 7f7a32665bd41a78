"""A finished walk run read back from ``reports/<run_id>/``: its ``run.json``,
``summary.json``, tasks and every attempt's saved turns, each with the input
it answered (:func:`load_source` -> :class:`SourceRun` of
:class:`SavedAttempt` and :class:`SavedTurn`), and the judge that made it
(:func:`run_judge` -> :class:`RunJudge`).  Read by ``cirrus rescore``
(:mod:`cirrus.evaluate.rescore`, :mod:`cirrus.evaluate.recorded`) and
``cirrus judge-consistency`` (:mod:`cirrus.judges.consistency`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cirrus.files import read_jsonl
from cirrus.workspace import REPORTS_DIR

if TYPE_CHECKING:
    from cirrus.evaluate.types import AgentTurn
    from cirrus.schema import Task

__all__ = ["RUN_ID_PATTERN", "RescoreError", "RunJudge", "SavedAttempt", "SavedTurn", "SourceRun", "load_source",
           "run_judge"]

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}")  # a run id: never a path outside reports/


class RescoreError(ValueError):
    """The source run cannot be rescored (missing, unfinished, other tasks)."""


# ---------------------------------------------------------------------------
# the saved attempts


@dataclass(slots=True)
class SavedTurn:
    """One judged agent turn of the source run, with the input it answered."""

    history: list[dict[str, Any]]  # what the agent saw before the query
    query: str
    data: dict[str, Any]  # the transcript's turn
    stats: dict[str, Any]  # the attempts row's turn (stl, wall_s, ...)

    @property
    def after(self) -> list[dict[str, Any]]:
        """The history once this turn is in it (the walk's ``history`` after an accepted turn)."""
        return self.history + [{"role": "user", "content": self.query}] + list(self.data.get("agent_messages") or [])

    def fluency_verdict(self) -> dict[str, Any] | None:
        return next((v for v in self.data.get("verdicts") or [] if v.get("kind") == "fluency"), None)

    def agent_turn(self) -> AgentTurn:
        from cirrus.evaluate.types import AgentTurn, ToolCallMade

        calls = [ToolCallMade(c.get("name", ""), c.get("arguments"), c.get("result"), bool(c.get("recorded")),
                              c.get("error"), c.get("read_from_text")) for c in self.data.get("tool_calls") or []]
        return AgentTurn(
            text=self.data.get("agent_text") or "",
            tool_calls=calls,
            messages=[dict(m) for m in self.data.get("agent_messages") or []],
            output_tokens=int(self.stats.get("stl") or 0),
            input_tokens=int(self.stats.get("input_tokens") or 0),
            model_calls=int(self.stats.get("model_calls") or 0),
            wall_s=float(self.stats.get("wall_s") or 0.0),
            notes=[dict(n) for n in self.data.get("agent_notes") or []],
        )


@dataclass(slots=True)
class SavedAttempt:
    typed_task: Task  # the task the attempt walked (rescore and judge-consistency read it)
    attempt: int
    row: dict[str, Any] | None  # the source's committed attempts row
    transcript: dict[str, Any] | None
    turns: list[SavedTurn] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.row["status"] if self.row else "missing"

    @classmethod
    def build(cls, task: Task | Mapping[str, Any], attempt: int, row: dict[str, Any] | None,
              transcript: dict[str, Any] | None) -> SavedAttempt:
        """The saved attempt of ``task`` (a mapping is validated into a
        :class:`~cirrus.schema.Task`): its turns, each with the input it answered."""
        from cirrus.schema import as_task

        task = as_task(task)
        saved = cls(task, attempt, row, transcript)
        if not row or row.get("status") != "ok" or not transcript:
            return saved
        stats = row.get("turns") or []
        history = list(task.history)
        for index, data in enumerate(transcript.get("turns") or []):
            history = history + _context(task, data.get("checkpoint"))  # as the walk adds it (docs/checkpoints.md)
            turn = SavedTurn(history, data.get("query", ""), data, stats[index] if index < len(stats) else {})
            saved.turns.append(turn)
            history = turn.after
        return saved

    def find(self, history: list[dict[str, Any]], query: str) -> SavedTurn | None:
        """The saved turn that answered exactly this input."""
        return next((t for t in self.turns if t.query == query and t.history == history), None)

    def finished_at(self, history: list[dict[str, Any]]) -> SavedTurn | None:
        """The saved turn after which the dialogue is ``history`` (the fluency
        check's history also holds the next checkpoint's context, if any)."""
        contexts = [_context(self.typed_task, k) for k in range(1, len(self.typed_task.checkpoints) + 1)]
        return next((t for t in self.turns if history[:len(t.after)] == t.after and (
            len(history) == len(t.after) or history[len(t.after):] in contexts)), None)


def _context(task: Task, checkpoint: Any) -> list[dict[str, Any]]:
    """The ``context`` of checkpoint ``checkpoint`` (1-based) of a select-mode
    task; empty when it has none or the number is not a checkpoint's."""
    checkpoints = task.checkpoints
    if isinstance(checkpoint, int) and 0 < checkpoint <= len(checkpoints):
        return list(checkpoints[checkpoint - 1].context or [])
    return []


@dataclass
class SourceRun:
    run_id: str
    directory: Path
    run: dict[str, Any]
    summary: dict[str, Any]
    tasks: list[Task]
    attempts: int
    saved: dict[tuple[str, int], SavedAttempt]

    @property
    def fingerprint(self) -> dict[str, Any]:
        return self.run["fingerprint"]


def load_source(workspace: Path, run_id: str) -> SourceRun:
    """The finished walk run ``reports/<run_id>/`` of ``workspace``, its tasks
    and every attempt's saved turns; a :class:`RescoreError` for a bad run id,
    no such run, a subtask run, an unfinished run, or tasks that are not the
    ones the run was made on (its dataset hash differs)."""
    from cirrus.evaluate.store import ATTEMPTS_FILE, RUN_FILE, TRANSCRIPTS_FILE
    from cirrus.evaluate.tasks import TaskIndex

    if not RUN_ID_PATTERN.fullmatch(run_id) or run_id.startswith("."):  # never a run outside reports/
        raise RescoreError(f"run id {run_id!r}: a run id has letters, digits, '.', '_' and '-' only")
    directory = workspace / REPORTS_DIR / run_id
    run_file = directory / RUN_FILE
    if not run_file.is_file():
        raise RescoreError(f"no run {run_id!r} in {workspace / 'reports'}")
    from cirrus.evaluate.subtask import refuse_subtask_run

    refuse_subtask_run(directory, "rescore", RescoreError)  # a subtask run has no walk to rescore
    if not (directory / "summary.json").is_file():
        raise RescoreError(f"run {run_id} is not finished (no summary.json): resume it with `cirrus eval` first")
    run = json.loads(run_file.read_text(encoding="utf-8"))
    summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    fingerprint = run.get("fingerprint") or {}
    if "tasks" not in run or "attempts" not in fingerprint or "dataset" not in fingerprint:
        raise RescoreError(f"{run_file} does not say which tasks and attempts the run was made of")
    index = TaskIndex.scan(workspace, run["tasks"])
    if len(index) != run["tasks"] or index.dataset_hash != fingerprint["dataset"]:
        raise RescoreError(f"{workspace / 'tickets/tasks.jsonl'} is not the task set run {run_id} was made on "
                           "(its dataset hash differs): rescore in the workspace the run was made in")
    rows = {(r["task_id"], r["attempt"]): r for r in read_jsonl(directory / ATTEMPTS_FILE)}
    transcripts = {(t["task_id"], t["attempt"]): t for t in read_jsonl(directory / TRANSCRIPTS_FILE)}
    attempts = int(fingerprint["attempts"])
    tasks = list(index.tasks())
    saved = {(t.task_id, a): SavedAttempt.build(t, a, rows.get((t.task_id, a)), transcripts.get((t.task_id, a)))
             for t in tasks for a in range(attempts)}
    return SourceRun(run_id, directory, run, summary, tasks, attempts, saved)


# ---------------------------------------------------------------------------
# which judge made the run


@dataclass(frozen=True, slots=True)
class RunJudge:
    """The judge that made a run, as its ``run.json`` shows it."""

    model: str | None  # a model name, a comma list (a panel) or "local"; None when run.json does not say
    base_url: str | None  # credentials masked (***)
    api_key_envs: tuple[str, ...]  # every role's key variable
    params: dict[str, Any]  # RoleConfig keywords that shape the answers
    fingerprint: Any


def _role_params(body: Mapping[str, Any]) -> dict[str, Any]:
    """RoleConfig keywords giving this request body (``RoleConfig.body_params``)."""
    rest = {k: v for k, v in body.items() if k != "model"}
    params = {name: rest.pop(name) for name in ("temperature", "reasoning_effort") if name in rest}
    if "max_completion_tokens" in rest:
        params.update(max_tokens=rest.pop("max_completion_tokens"), max_tokens_param="max_completion_tokens")
    elif "max_tokens" in rest:
        params["max_tokens"] = rest.pop("max_tokens")
    if rest:
        params["extra_body"] = rest
    return params


def run_judge(run: Mapping[str, Any]) -> RunJudge:
    """Model, base URL, key variables and parameters of a run's judge."""
    fingerprint = run.get("fingerprint") or {}
    role = fingerprint.get("judge_role")
    model, params = None, {}
    if isinstance(role, dict) and isinstance(role.get("panel"), list) and role["panel"]:
        members = [m if isinstance(m, dict) else {} for m in role["panel"]]
        names = [m.get("model") if isinstance(m.get("model"), str) else
                 "local" if m.get("name") == "local-heuristic" else None for m in members]
        if all(names):
            model = ",".join(str(name) for name in names)
            params = _role_params(next((m.get("params") or {} for m in members if "params" in m), {}))
    elif isinstance(role, dict) and isinstance(role.get("model"), str):
        model, params = role["model"], _role_params(role.get("params") or {})
    elif isinstance(role, dict) and role.get("name") == "local-heuristic":
        model = "local"
    else:
        name = str(fingerprint.get("judge") or "")
        if name == "local-heuristic":
            model = "local"
        elif name.startswith("llm-coverage:"):
            model = name.split(":", 1)[1]
    envs = run.get("api_key_envs") or []
    return RunJudge(model, run.get("judge_base_url"), tuple(e for e in envs if isinstance(e, str)), params, role)
