"""The task table and the transcripts of the page: every attempt of every
run, linked by an anchor (:class:`Anchors`) to its transcript, the walk turn
by turn (:func:`turn_view`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cirrus.report.views.cells import page_value, pretty_json

if TYPE_CHECKING:
    from cirrus.report.loading import Run

__all__ = ["Anchors", "Transcripts", "attempt_views", "turn_view"]

_ID_SAFE = re.compile(r"[^A-Za-z0-9_.-]")

# a run's transcripts.jsonl as read: {(task_id, attempt): transcript}
Transcripts = Mapping[tuple[str, int], Mapping[str, Any]]


class Anchors:
    """``t-<task>-<attempt>-<run>`` ids, HTML-safe and unique in the page."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str, int], str] = {}
        self._used: set[str] = set()

    def __call__(self, run_id: str, task_id: str, attempt: int) -> str:
        key = (run_id, task_id, attempt)
        if key not in self._ids:
            base = "t-" + "-".join(_ID_SAFE.sub("_", str(p)) for p in (task_id, attempt, run_id))
            anchor, n = base, 2
            while anchor in self._used:
                anchor, n = f"{base}~{n}", n + 1
            self._used.add(anchor)
            self._ids[key] = anchor
        return self._ids[key]

    def get(self, run_id: str, task_id: str, attempt: int) -> str | None:
        """The anchor already given out for that attempt, else ``None`` (no new one)."""
        return self._ids.get((run_id, task_id, attempt))


def turn_view(turn: Mapping[str, Any], reference_type: str | None) -> dict[str, Any]:
    """One turn of a transcript as the page shows it: tool calls and results
    as indented JSON, the verdicts, the agent's messages in order."""
    calls = []
    for call in turn.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        calls.append({"name": call.get("name"), "arguments": pretty_json(call.get("arguments")),
                      "result": pretty_json(call.get("result")) if call.get("result") is not None else None,
                      "recorded": call.get("recorded"), "error": call.get("error")})
    reference_calls = [{"name": c.get("name"), "arguments": pretty_json(c.get("arguments"))}
                       for c in turn.get("reference_tool_calls") or [] if isinstance(c, Mapping)]
    verdicts = [{"kind": v.get("kind"), "checkpoint": v.get("checkpoint"), "ok": v.get("ok"), "raw": v.get("raw")}
                for v in turn.get("verdicts") or [] if isinstance(v, Mapping)]
    steps = []  # the agent's messages in order, as sent and received
    for message in turn.get("agent_messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            steps.append({"kind": "tool_result", "text": pretty_json(message.get("content"))})
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            steps.append({"kind": "tool_call", "name": function.get("name"),
                          "text": pretty_json(function.get("arguments"))})
        if message.get("content"):
            steps.append({"kind": "text", "role": role, "text": str(message.get("content"))})
    return {"checkpoint": turn.get("checkpoint"), "reply_type": reference_type, "query": turn.get("query"),
            "reference": turn.get("reference"), "agent_text": turn.get("agent_text"), "tool_calls": calls,
            "reference_tool_calls": reference_calls, "verdicts": verdicts, "steps": steps,
            "accepted": turn.get("accepted"), "covered_through": turn.get("covered_through"),
            "fluent": turn.get("fluent")}


def attempt_views(runs: Sequence[Run], transcripts: Mapping[str, Transcripts], anchors: Anchors,
                  context: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The task table rows (one per task, its attempts per run) and the
    transcript sections (one per attempt with a transcript).
    ``transcripts``: ``{run_id: {(task_id, attempt): transcript}}``;
    ``context``: ``{task_id: task}`` of ``tickets/tasks.jsonl`` (the
    earlier messages; may be empty)."""
    import polars as pl

    tasks: dict[str, dict[str, Any]] = {}
    sections = []
    for run in runs:
        rows = run.tasks.select("task_id", "attempt", "category", "checkpoints", "covered", "tpr", "success",
                                "status").sort("task_id", "attempt").collect()
        saved = transcripts.get(run.run_id) or {}
        reply_types = {(r["task_id"], r["checkpoint"]): r["ref_reply_type"]
                       for r in run.reference.select("task_id", "checkpoint", "ref_reply_type").collect()
                       .iter_rows(named=True)}
        errors = {}
        if "error" in run.tasks.collect_schema().names():
            errors = {(r["task_id"], r["attempt"]): r["error"]
                      for r in run.tasks.select("task_id", "attempt", "error").filter(pl.col("error").is_not_null())
                      .collect().iter_rows(named=True)}
        for row in rows.iter_rows(named=True):
            task_id, attempt = str(row["task_id"]), int(row["attempt"])
            entry = tasks.setdefault(task_id, {"task_id": task_id, "category": row["category"],
                                               "checkpoints": row["checkpoints"], "runs": {}})
            record = saved.get((task_id, attempt))
            outcome = "error" if row["status"] != "ok" else ("pass" if row["success"] else "fail")
            anchor = anchors(run.run_id, task_id, attempt) if record is not None else None
            entry["runs"].setdefault(run.run_id, []).append({
                "attempt": attempt, "outcome": outcome, "anchor": anchor, "covered": row["covered"],
                "checkpoints": row["checkpoints"], "tpr": row["tpr"]})
            if record is None:
                continue
            task = context.get(task_id) or {}
            history = [{"role": m.get("role"), "content": m.get("content")} for m in task.get("history") or []
                       if isinstance(m, Mapping)]
            sections.append({
                "anchor": anchor, "run_id": run.run_id, "model": run.model, "task_id": task_id, "attempt": attempt,
                "category": row["category"], "channel": task.get("channel"), "outcome": outcome,
                "status": row["status"], "error": record.get("error") or errors.get((task_id, attempt)),
                "covered": row["covered"], "checkpoints": row["checkpoints"], "tpr": page_value(row["tpr"]),
                "history": history,
                "turns": [turn_view(t, reply_types.get((task_id, t.get("checkpoint"))))
                          for t in record.get("turns") or [] if isinstance(t, Mapping)],
            })
    table = sorted(tasks.values(), key=lambda t: t["task_id"])
    return table, sections
