"""What ``cirrus view`` shows, as plain data: the workspace's runs (the
leaderboard), one run's attempts (the task table), one attempt's walk and
two runs' walks of one attempt side by side.

Every run is read through the report's own readers: a run's attempts and
transcripts by :func:`cirrus.report.run_view.load_run_view` (so a run still
writing, or killed, is read too), a finished run's tables by
:func:`cirrus.report.loading.load_run` for the leaderboard's intervals and
noise (:mod:`cirrus.report.uncertainty`), and the first divergence of two
walks by :func:`cirrus.report.diff.first_divergence`.  Nothing is cached
beyond a request except the leaderboard's bootstrap, keyed by the
modification times of the files it was computed from.

A run id or task id from a URL is never joined into a path: it is looked
up among the runs ``reports/`` holds (:func:`known_run_ids`) and the tasks
the run has (:meth:`RunView.task_ids`); anything else is :class:`NotFound`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrus.report.run_view import (
    RUN_FILE,
    SUMMARY_FILE,
    RunView,
    ShowError,
    failed,
    failure_description,
    load_run_view,
    stop_reason,
)
from cirrus.workspace import REPORTS_DIR, TASKS_FILE

__all__ = ["LabelRefused", "NotFound", "add_label", "attempt_view", "compare_view", "known_run_ids", "leaderboard", "task_rows"]

BOOTSTRAP = 500  # resamples of the leaderboard's intervals: enough for two decimals, quick on a page load
MAX_TEXT_SEARCHED = 200_000  # characters of one attempt's transcript that the text search reads


class NotFound(LookupError):
    """An unknown run, task, attempt or file: the page answers 404 with this message."""


# ---------------------------------------------------------------------------
# runs


def known_run_ids(workspace: Path) -> list[str]:
    """The runs of ``workspace/reports/``: folders holding a ``run.json``,
    whose names are valid run ids (the report's own rule)."""
    from cirrus.report.loading import RUN_ID_PATTERN

    reports = workspace / REPORTS_DIR
    if not reports.is_dir():
        return []
    return sorted(p.name for p in reports.iterdir()
                  if RUN_ID_PATTERN.fullmatch(p.name) and not p.name.startswith(".") and (p / RUN_FILE).is_file())


def open_run(workspace: Path, run_id: str) -> RunView:
    """The run ``run_id`` of the workspace, read now; :class:`NotFound` for
    a run id ``reports/`` does not hold (or one that cannot be shown)."""
    if run_id not in known_run_ids(workspace):
        raise NotFound(f"no run {run_id!r} in this workspace")
    try:
        return load_run_view(workspace, run_id)
    except ShowError as exc:
        raise NotFound(str(exc)) from None


def in_progress(view: RunView) -> bool:
    """A run still writing (or stopped before the end): no ``summary.json`` yet."""
    return view.summary is None


def _json_file(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


_board_cache: dict[tuple[Any, ...], dict[str, Any]] = {}
_board_lock = threading.Lock()


def _statistics(workspace: Path, finished: list[str]) -> dict[str, Any]:
    """``{"ci": {(run, metric): (low, high)}, "marks": {(run, metric): text},
    "flips": {run: (rate, low, high)}, "warnings": [...]}`` of the finished
    runs: the report's bootstrap intervals, ``≈`` marks and flip rates,
    cached while none of the files they come from changes."""
    key = (str(workspace.resolve()), _mtime(workspace / TASKS_FILE),
           *((r, _mtime(workspace / REPORTS_DIR / r / SUMMARY_FILE),
              _mtime(workspace / REPORTS_DIR / r / "tasks.parquet")) for r in finished))
    with _board_lock:
        if key in _board_cache:
            return _board_cache[key]
    result: dict[str, Any] = {"ci": {}, "marks": {}, "flips": {}, "warnings": []}
    if finished:
        import polars as pl

        from cirrus.report.loading import ReportError, load_run, load_task_metadata
        from cirrus.report.uncertainty import intervals, noise, paired
        from cirrus.report.views.leaderboard import ci_lookup
        from cirrus.report.views.noise import noise_marks

        runs = []
        try:
            metadata = load_task_metadata(workspace)
        except ReportError as exc:
            metadata = None
            result["warnings"].append(str(exc))
        for run_id in finished if metadata is not None else []:
            try:
                runs.append(load_run(workspace, run_id, metadata))
            except ReportError as exc:
                result["warnings"].append(str(exc))
        if runs:
            try:
                table = intervals(runs, n_boot=BOOTSTRAP, dimensions=("overall",))
                result["ci"] = {(run, metric): value for (run, _, _, metric), value in ci_lookup(table).items()}
                estimates = {(r["run_id"], r["metric"]): r["estimate"] for r in table.iter_rows(named=True)}
                board = pl.DataFrame([{"run_id": r.run_id, "sr_pass1": estimates.get((r.run_id, "sr_pass1")),
                                       "atpr": estimates.get((r.run_id, "atpr"))} for r in runs],
                                     schema={"run_id": pl.Utf8, "sr_pass1": pl.Float64, "atpr": pl.Float64})
                if len(runs) >= 2:
                    result["marks"] = noise_marks(board, paired(runs, n_boot=BOOTSTRAP))
                for row in noise(runs).iter_rows(named=True):
                    result["flips"][row["run_id"]] = (row["flip_rate"], row["flip_rate_low"], row["flip_rate_high"])
            except Exception as exc:  # noqa: BLE001 - a page still shows the runs without their intervals
                result["warnings"].append(f"intervals not computed: {exc}")
    with _board_lock:
        if len(_board_cache) > 32:
            _board_cache.clear()
        _board_cache[key] = result
    return result


def _interval(cis: dict[tuple[str, str], tuple[float, float]], run_id: str, metric: str) -> str:
    low_high = cis.get((run_id, metric))
    return f"[{low_high[0]:.2f}, {low_high[1]:.2f}]" if low_high else ""


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def run_summary(workspace: Path, run_id: str) -> dict[str, Any]:
    """One run's leaderboard cells before its intervals: what ``run.json``
    and ``summary.json`` say (model, judge, dataset, date, scores), and
    whether it is finished."""
    directory = workspace / REPORTS_DIR / run_id
    config = _json_file(directory / RUN_FILE)
    summary = _json_file(directory / SUMMARY_FILE) if (directory / SUMMARY_FILE).is_file() else None
    fingerprint = config.get("fingerprint") if isinstance(config.get("fingerprint"), dict) else {}
    done = summary is not None and (directory / "tasks.parquet").is_file()
    source = summary or {}
    date = str(source.get("finished_at") or config.get("started_at") or "")[:10]
    k = source.get("k") if isinstance(source.get("k"), int) else fingerprint.get("attempts")
    sr = source.get("sr") if isinstance(source.get("sr"), dict) else {}
    return {
        "run_id": run_id, "finished": done, "mode": config.get("mode") or "walk",
        "model": str(source.get("model") or fingerprint.get("agent") or run_id),
        "judge": str(source.get("judge") or fingerprint.get("judge") or "–"),
        "fluency": str(source.get("fluency") or fingerprint.get("fluency") or "–"),
        "dataset": str(fingerprint.get("dataset") or "–"), "date": date or "–", "k": k,
        "tasks": source.get("n_tasks", config.get("tasks")), "attempts": source.get("attempts"),
        "errors": source.get("errors"), "sr_pass1": sr.get("pass@1"),
        "sr_pass_k": sr.get(f"pass@{k}") if k else None, "atpr": source.get("atpr"),
        "self_judged": source.get("self_judged", config.get("self_judged")) is True,
        "cost": (source.get("cost") or {}).get("total") if isinstance(source.get("cost"), dict) else None,
        "currency": (source.get("cost") or {}).get("currency") if isinstance(source.get("cost"), dict) else None,
    }


LEADERBOARD_FILTERS = ("model", "judge", "date", "dataset")


def leaderboard(workspace: Path, filters: dict[str, str]) -> dict[str, Any]:
    """The runs page: every run of the workspace (finished ones with their
    95% intervals and ``≈`` marks, runs still writing as in progress with
    the attempts they committed), filtered by ``model``, ``judge``,
    ``dataset`` (exact) and ``date`` (a prefix of the run's date,
    ``2025-06`` or ``2025-06-14``); the choices of each filter."""
    summaries = [run_summary(workspace, run_id) for run_id in known_run_ids(workspace)]
    choices = {name: sorted({s[name] for s in summaries}) for name in LEADERBOARD_FILTERS}
    shown = [s for s in summaries
             if all(not filters.get(n) or (s[n].startswith(filters[n]) if n == "date" else s[n] == filters[n])
                    for n in LEADERBOARD_FILTERS)]
    stats = _statistics(workspace, [s["run_id"] for s in shown if s["finished"] and s["mode"] == "walk"])
    for s in shown:
        run_id = s["run_id"]
        s["sr_pass1_text"], s["atpr_text"] = _number(s["sr_pass1"]), _number(s["atpr"])
        s["sr_pass_k_text"] = _number(s["sr_pass_k"])
        s["sr_pass1_ci"], s["atpr_ci"] = _interval(stats["ci"], run_id, "sr_pass1"), _interval(stats["ci"], run_id, "atpr")
        s["sr_pass1_noise"] = stats["marks"].get((run_id, "sr_pass1"))
        s["atpr_noise"] = stats["marks"].get((run_id, "atpr"))
        flip = stats["flips"].get(run_id)
        s["flip_text"] = (f"{flip[0]:.2f} [{flip[1]:.2f}, {flip[2]:.2f}]" if flip and flip[0] is not None
                          and flip[1] is not None else "–")
        s["cost_text"] = f"{s['cost']:.4f} {s['currency'] or ''}".strip() if isinstance(s["cost"], (int, float)) else "–"
        if not s["finished"]:
            committed = _committed(workspace, run_id)
            s["progress"] = f"in progress: {committed} attempts committed" if committed is not None else "in progress"
    order = sorted(shown, key=lambda s: (not s["finished"], -(s["sr_pass1"] or 0.0), s["run_id"]))
    return {"runs": order, "choices": choices, "filters": {n: filters.get(n, "") for n in LEADERBOARD_FILTERS},
            "warnings": stats["warnings"], "total": len(summaries)}


def _committed(workspace: Path, run_id: str) -> int | None:
    try:
        return len(load_run_view(workspace, run_id).rows)
    except (ShowError, OSError, ValueError):
        return None


# ---------------------------------------------------------------------------
# one run's attempts


def outcome(row: dict[str, Any]) -> str:
    """``success``, ``failed`` or ``error`` (an attempt not scored)."""
    if row.get("status") != "ok":
        return "error"
    return "success" if row.get("success") else "failed"


def _failures(row: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(t["failure"] for t in row.get("turns") or [] if t.get("failure")))


def _attempt_cost(row: dict[str, Any], models: dict[str, str], prices: dict[str, Any]) -> float | None:
    usage = row.get("usage")
    if not isinstance(usage, dict) or not usage or not prices:
        return None
    from cirrus.pricing import PriceError, run_cost
    from cirrus.usage import UsageLedger

    try:
        return run_cost(UsageLedger.total_of([usage]), models, prices).get("total")
    except (PriceError, ValueError, TypeError, KeyError):
        return None


def _searchable(row: dict[str, Any], transcript: dict[str, Any] | None) -> str:
    parts = [str(row.get(k) or "") for k in ("task_id", "category", "language", "channel", "error")]
    parts += _failures(row)
    for turn in (transcript or {}).get("turns") or []:
        parts += [str(turn.get(k) or "") for k in ("query", "reference", "agent_text")]
        parts += [str(v.get("raw") or "") for v in turn.get("verdicts") or []]
        parts += [str(c.get("name") or "") for c in turn.get("tool_calls") or []]
    return " ".join(parts)[:MAX_TEXT_SEARCHED].casefold()


TASK_FILTERS = ("outcome", "end", "failure", "category", "language", "channel", "q")


def task_rows(workspace: Path, view: RunView, filters: dict[str, str]) -> dict[str, Any]:
    """The tasks page: one row per (task, attempt) of the run (outcome, why
    the walk ended, failure categories, category, language, channel, tokens
    and cost), filtered by any of :data:`TASK_FILTERS` (``q``: text in the
    task id, the category, the failure categories or the transcript's
    messages, replies, verdicts and tool names, in any letter case), and
    the choices of each filter."""
    from cirrus.evaluate.store import end_reason
    from cirrus.pricing import PriceError, load_prices
    from cirrus.report.loading import run_models

    config = _json_file(view.directory / RUN_FILE)
    try:
        prices = load_prices(workspace)
    except (PriceError, OSError, ValueError):
        prices = {}
    models = run_models(config)
    rows = []
    for key in sorted(view.rows):
        row = view.rows[key]
        cost = _attempt_cost(row, models, prices)
        tokens = (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)
        rows.append({
            "task_id": row["task_id"], "attempt": row["attempt"], "outcome": outcome(row),
            "end": end_reason(row), "ended": stop_reason(row, short=True), "failures": _failures(row),
            "category": str(row.get("category") or "–"), "language": str(row.get("language") or "–"),
            "channel": str(row.get("channel") or "–"),
            "covered": f"{row.get('covered') if row.get('status') == 'ok' else '-'}/{row.get('checkpoints')}",
            "tokens": tokens, "cost": f"{cost:.5f}" if isinstance(cost, (int, float)) else "–",
            "_row": row,
        })
    choices = {name: sorted({r[name] for r in rows}) for name in ("outcome", "end", "category", "language", "channel")}
    choices["failure"] = sorted({f for r in rows for f in r["failures"]})
    text = (filters.get("q") or "").strip().casefold()
    shown = []
    for r in rows:
        if any(filters.get(n) and r[n] != filters[n] for n in ("outcome", "end", "category", "language", "channel")):
            continue
        if filters.get("failure") and filters["failure"] not in r["failures"]:
            continue
        if text and text not in _searchable(r["_row"], view.transcripts.get((r["task_id"], r["attempt"]))):
            continue
        shown.append(r)
    return {"rows": shown, "total": len(rows), "choices": choices,
            "filters": {n: filters.get(n, "") for n in TASK_FILTERS}}


# ---------------------------------------------------------------------------
# one attempt


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            return value
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


_ROLE = {"user": "customer", "assistant": "agent", "tool": "tool result", "system": "system"}


def _verdict_view(verdict: dict[str, Any]) -> dict[str, Any]:
    kind, checkpoint = verdict.get("kind"), verdict.get("checkpoint")
    label = {"coverage": f"accepts {checkpoint}?", "fluency": f"fluent -> {checkpoint}?",
             "truncated": f"continue -> {checkpoint}?"}.get(kind, f"{kind} {checkpoint}")
    raw = verdict.get("raw")
    detail = "(no judge asked: tool calls only)" if raw is None and kind == "coverage" else (raw or "")
    votes = verdict.get("votes")
    judged = kind == "coverage" and raw is not None and isinstance(verdict.get("ok"), bool) and \
        isinstance(checkpoint, int)  # a judge verdict a person can label (docs/human-labels.md)
    return {"label": label, "kind": kind, "checkpoint": checkpoint, "ok": verdict.get("ok"), "raw": detail,
            "judged": judged, "human": None,
            "problem": verdict.get("problem"), "missing": verdict.get("missing"),
            "votes": _pretty(votes) if votes not in (None, [], {}) else None}


@dataclass
class Checkpoint:
    """One turn of a walk as the attempt page shows it."""

    checkpoint: int
    accepted: bool
    covered_through: int | None
    title: str
    jump: str | None
    fluency_stop: str | None
    failure: str | None
    failure_text: str | None
    context: list[dict[str, str]]
    query: str
    reference: str
    reference_tools: list[dict[str, str]]
    agent_tools: list[dict[str, Any]]
    agent: str
    verdicts: list[dict[str, Any]]
    checks: list[tuple[str, Any]]
    stl: Any
    reply_type: str
    judge_votes: str | None


def _checkpoint(turn: dict[str, Any], stats: dict[str, Any]) -> Checkpoint:
    number = turn.get("checkpoint")
    through = turn.get("covered_through")
    accepted = bool(turn.get("accepted"))
    failure = stats.get("failure")
    if accepted:
        span = f"{number}" if through in (None, number) else f"{number}-{through}"
        title = f"checkpoint {number}: ACCEPTED, covers {span}"
    else:
        title = f"checkpoint {number}: REJECTED"
    jump = (f"logical jump: this turn covers checkpoints {number}-{through}"
            if accepted and isinstance(through, int) and isinstance(number, int) and through > number else None)
    stop = next((f"fluency stop: the next query (checkpoint {v.get('checkpoint')}) no longer follows the history"
                 for v in turn.get("verdicts") or [] if v.get("kind") == "fluency" and v.get("ok") is False), None)
    context = []
    for message in turn.get("context") or []:
        text = message.get("content") or " ".join(
            f"{(c.get('function') or {}).get('name')} {(c.get('function') or {}).get('arguments')}"
            for c in message.get("tool_calls") or [])
        context.append({"role": _ROLE.get(message.get("role"), "?"), "text": str(text)})
    tools = []
    for call in turn.get("tool_calls") or []:
        tools.append({"name": call.get("name"), "arguments": _pretty(call.get("arguments")),
                      "recorded": bool(call.get("recorded")),
                      "result": _pretty(call.get("result")) if call.get("recorded") else None,
                      "error": call.get("error") or (None if call.get("recorded") else "no recorded result")})
    votes = stats.get("judge_votes")
    return Checkpoint(
        checkpoint=number, accepted=accepted, covered_through=through, title=title, jump=jump, fluency_stop=stop,
        failure=failure, failure_text=failure_description(failure) if failure else None, context=context,
        query=str(turn.get("query") or ""), reference=str(turn.get("reference") or ""),
        reference_tools=[{"name": c.get("name"), "arguments": _pretty(c.get("arguments"))}
                         for c in turn.get("reference_tool_calls") or []],
        agent_tools=tools, agent=str(turn.get("agent_text") or ""),
        verdicts=[_verdict_view(v) for v in turn.get("verdicts") or []],
        checks=[(name.upper(), stats.get(name)) for name in ("rr", "tia", "tsa", "tev")], stl=stats.get("stl"),
        reply_type=str(stats.get("reply_type") or ""),
        judge_votes=_pretty(votes) if votes not in (None, "", [], {}) else None)


def _find_attempt(view: RunView, task_id: str, attempt: int) -> dict[str, Any]:
    if task_id not in view.task_ids():
        raise NotFound(f"task {task_id!r} is not in run {view.run_id}")
    row = view.rows.get((task_id, attempt))
    if row is None:
        have = ", ".join(str(r["attempt"]) for r in view.attempts_of(task_id))
        raise NotFound(f"task {task_id} has no attempt {attempt} in run {view.run_id} (attempts: {have})")
    return row


def walk(view: RunView, row: dict[str, Any]) -> list[Checkpoint]:
    transcript = view.transcripts.get((row["task_id"], row["attempt"])) or {}
    stats = row.get("turns") or []
    return [_checkpoint(turn, stats[i] if i < len(stats) else {})
            for i, turn in enumerate(transcript.get("turns") or [])]


def header(row: dict[str, Any]) -> dict[str, Any]:
    ok = row.get("status") == "ok"
    covered, total = row.get("covered") or 0, row.get("checkpoints") or 0
    missing = None
    if ok and covered < total:
        missing = f"checkpoint {total}" if covered + 1 == total else f"checkpoints {covered + 1}-{total}"
    return {"task_id": row["task_id"], "attempt": row["attempt"], "outcome": outcome(row), "ok": ok,
            "failed": failed(row), "category": row.get("category"), "language": row.get("language"),
            "channel": row.get("channel"), "covered": row.get("covered"), "checkpoints": total,
            "accepted_turns": row.get("accepted_turns"),
            "metrics": " / ".join(_number(row.get(m)) for m in ("tpr", "lj", "nei", "mtl")),
            "ended": stop_reason(row), "not_covered": missing, "error": row.get("error")}


def attempt_view(workspace: Path, run_id: str, task_id: str, attempt: int) -> dict[str, Any]:
    """The attempt page: the attempt's header and walk, the task's other
    attempts, and the other runs holding the same (task, attempt) (the
    side-by-side links)."""
    view = open_run(workspace, run_id)
    row = _find_attempt(view, task_id, attempt)
    others = []
    for other in known_run_ids(workspace):
        if other == run_id:
            continue
        try:
            other_view = load_run_view(workspace, other)
        except (ShowError, OSError, ValueError):
            continue
        if (task_id, attempt) in other_view.rows:
            others.append({"run_id": other, "outcome": outcome(other_view.rows[(task_id, attempt)])})
    checkpoints = walk(view, row)
    _attach_labels(workspace, run_id, task_id, attempt, checkpoints)
    return {"run_id": run_id, "in_progress": in_progress(view), "head": header(row), "walk": checkpoints,
            "attempts": [{"attempt": r["attempt"], "outcome": outcome(r)} for r in view.attempts_of(task_id)],
            "others": others}


def _attach_labels(workspace: Path, run_id: str, task_id: str, attempt: int, checkpoints: list[Checkpoint]) -> None:
    """Give each judge verdict of the walk the hash of the reply it judged
    and its latest human label (``stale``: given on another reply)."""
    from cirrus.judges.human_labels import latest_labels, read_labels, reply_hash

    labels = latest_labels(read_labels(workspace, run_id))
    for c in checkpoints:
        digest = reply_hash(c.agent)
        for v in c.verdicts:
            v["reply_sha256"] = digest
            label = labels.get((run_id, task_id, attempt, c.checkpoint, v["checkpoint"])) if v["judged"] else None
            if label is not None:
                v["human"] = {"human": label.human, "correct_verdict": label.correct_verdict, "note": label.note,
                              "created_at": label.created_at, "source": label.source,
                              "stale": label.reply_sha256 != digest}


class LabelRefused(ValueError):
    """A label the viewer's form sent that cannot be stored: the page answers 400 with this message."""


def add_label(workspace: Path, run_id: str, task_id: str, attempt: int, form: dict[str, str]) -> int:
    """Store the label of the form (``turn``, ``checkpoint``, ``human``,
    ``correct_verdict``, ``note``, ``reply_sha256``) for a judge verdict of
    this attempt; returns the turn (the page's anchor).  :class:`NotFound`
    for an unknown run, task or attempt, :class:`LabelRefused` for a bad
    form, a verdict the run does not hold or a reply that changed."""
    from cirrus.judges.human_labels import HumanLabelError, append_label, judged_items, make_label

    view = open_run(workspace, run_id)
    _find_attempt(view, task_id, attempt)
    try:
        turn, checkpoint = int(form.get("turn", "")), int(form.get("checkpoint", ""))
    except ValueError:
        raise LabelRefused("the form names no turn and checkpoint") from None
    if not form.get("reply_sha256"):
        raise LabelRefused("the form does not say which reply was read (reply_sha256): reload the page")
    try:
        item = next((i for i in judged_items(workspace, run_id)
                     if i.key == (run_id, task_id, attempt, turn, checkpoint)), None)
        if item is None:
            raise LabelRefused(f"attempt {attempt} of task {task_id} has no judge verdict on checkpoint "
                               f"{checkpoint} at turn {turn}")
        label = make_label(item, form.get("human", ""), form.get("correct_verdict"), form.get("note", ""),
                           source="view", reply_sha256=form.get("reply_sha256") or None)
        append_label(workspace, label)
    except HumanLabelError as exc:
        raise LabelRefused(str(exc)) from None
    return turn


def compare_view(workspace: Path, run_id: str, task_id: str, attempt: int, other_run: str) -> dict[str, Any]:
    """The side-by-side page: both walks of one (task, attempt), aligned by
    checkpoint, and the first divergence as ``cirrus diff`` finds it
    (:func:`cirrus.report.diff.first_divergence`; None when they agree)."""
    from cirrus.report.diff import first_divergence

    if other_run == run_id:
        raise NotFound("compare a run with another run")
    view_a, view_b = open_run(workspace, run_id), open_run(workspace, other_run)
    row_a = _find_attempt(view_a, task_id, attempt)
    row_b = _find_attempt(view_b, task_id, attempt)
    turns_a = (view_a.transcripts.get((task_id, attempt)) or {}).get("turns") or []
    turns_b = (view_b.transcripts.get((task_id, attempt)) or {}).get("turns") or []
    where = first_divergence(turns_a, turns_b)
    walk_a = {c.checkpoint: c for c in walk(view_a, row_a)}
    walk_b = {c.checkpoint: c for c in walk(view_b, row_b)}
    pairs = [{"checkpoint": n, "a": walk_a.get(n), "b": walk_b.get(n),
              "diverges": where is not None and where.checkpoint == n}
             for n in sorted(set(walk_a) | set(walk_b))]
    return {"run_a": run_id, "run_b": other_run, "task_id": task_id, "attempt": attempt,
            "head_a": header(row_a), "head_b": header(row_b), "pairs": pairs,
            "divergence": {"checkpoint": where.checkpoint, "how": where.how} if where else None,
            "in_progress": in_progress(view_a) or in_progress(view_b)}
