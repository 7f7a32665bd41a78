"""``report.html``: the report of one or more finished runs as one
self-contained web page (no network, no JavaScript, no files beside it).

:func:`write_html_report` renders the tables of ``cirrus report`` (the same
frames it writes as Parquet) with the Jinja2 template
``templates/report.html.j2``:

* the leaderboard with bootstrap confidence intervals, and a chart of SR
  pass@1 and ATPR per run with the intervals as error bars;
* bar charts of every breakdown (category, checkpoints, input tokens, tools:
  SR pass@1 and ATPR; reply type: acceptance and coverage rate), with error
  bars where ``intervals`` has the group;
* SR pass@1 against AMTL (quality against the paper's token-based
  latency: mean output tokens of the accepted turns, not seconds), one
  point per run;
* cost next to quality: per run the cost of each role (agent, judge,
  fluency), the total, the cost per success and the prompt-cache share
  (``summary.json``'s ``cost`` / ``usage``, see the leaderboard's cost
  columns), and SR pass@1 against the run's cost, one labelled point per run;
* subtask runs (``cirrus eval --mode subtask``) reported beside the walks:
  Table 4 (by input-token band) and Figure 6 (by reply type) with their
  intervals (:func:`cirrus.report.subtask.subtask_html_section`);
* TPR by checkpoint depth: per run, the share of ok attempts (of tasks with
  at least k checkpoints) whose walk covered checkpoint k;
* noise: per run, how often tasks flip between attempts (and the judge's
  own flip rate where measured), per pair of runs the minimal detectable
  difference of SR pass@1 and ATPR; leaderboard cells whose gap to the best
  run is within that noise are marked ``≈`` (see ``docs/noise.md``);
* why turns were rejected: per run, the rejected turns by the ``failure``
  column of ``checkpoints.parquet`` (a table and a bar chart; a note for runs
  written before that column existed);
* where the two runs part (a report of exactly two runs): every (task,
  attempt) whose outcome differs, with the first checkpoint where the walks
  differ, as :func:`cirrus.report.diff.diff_runs` finds it, in collapsible
  ``<details>``;
* the dataset: :func:`cirrus.stats.compute_stats` of the workspace's tasks
  (categories, turns / checkpoints / input tokens per task as box plots of
  its quartiles, tool-call and image shares, reply types, top tools);
* a task table linking every attempt to its transcript, and the transcripts
  themselves (customer, agent under test, tool calls with their replayed
  results, reference reply, judge verdicts with the judge's raw output) as
  sections of the same page, anchored ``#t-<task>-<attempt>-<run>``.

Charts are drawn by matplotlib (Agg, no pyplot state) and inlined as SVG;
every text from the tickets or the agent goes through Jinja2's HTML escaping.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cirrus.report import charts as plot
from cirrus.report.writing import HTML_FILE, REPORT_DISK_FULL_ADVICE

if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.loading import Run
    from cirrus.stats import DatasetStats

TRANSCRIPTS_FILE = "transcripts.jsonl"
TEMPLATE = "report.html.j2"
STATS_FILE = "stats.json"  # the text of `cirrus stats`'s reports/stats.json, for the report's workspace

TASK_DIMENSION_TITLES = {
    "category": "Service category",
    "checkpoints": "Checkpoints per task (K)",
    "input_tokens": "Task input tokens",
    "tools": "Reference uses tools",
}
METRIC_TITLES = {
    "sr_pass1": "SR pass@1", "sr_pass_at_k": "SR pass@K", "pass_hat_k": "pass^K", "atpr": "ATPR",
    "alj": "ALJ", "anei": "ANEI", "amtl": "AMTL", "acceptance_rate": "Acceptance rate",
    "coverage_rate": "Coverage rate (TPR)", "reach_rate": "Reach rate", "tia": "TIA", "tsa": "TSA", "tev": "TEV",
    "rr": "RR",
}
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def _table(tables: Mapping[str, pl.DataFrame], name: str) -> pl.DataFrame | None:
    """``tables[name]`` whether the key has the ``.parquet`` suffix or not."""
    for key in (f"{name}.parquet", name):
        if key in tables and tables[key] is not None:
            return tables[key]
    return None


def _num(value: Any) -> float:
    """A float for plotting: ``nan`` for null / non-finite."""
    if value is None:
        return math.nan
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pretty(value: Any) -> str:
    """JSON (indented) for tool arguments and results; strings as they are."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return str(value)


class _Anchors:
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


# --------------------------------------------------------------------------
# Charts (matplotlib -> inline SVG)
# --------------------------------------------------------------------------


def _ci_lookup(intervals: pl.DataFrame | None) -> dict[tuple[str, str, str, str], tuple[float, float]]:
    """``{(run_id, dimension, group, metric): (low, high)}`` of the defined intervals."""
    if intervals is None or intervals.is_empty():
        return {}
    out = {}
    for row in intervals.iter_rows(named=True):
        low, high = _num(row.get("ci_low")), _num(row.get("ci_high"))
        if not (math.isnan(low) or math.isnan(high)):
            out[(row["run_id"], row["dimension"], str(row["segment"]), row["metric"])] = (low, high)
    return out


def _leaderboard_chart(board: pl.DataFrame, cis: Mapping[tuple[str, str, str, str], tuple[float, float]],
                       runs: Sequence[str], colors: Sequence[Any]) -> str:
    metrics = ("sr_pass1", "atpr", "sr_pass_at_k", "pass_hat_k")
    fig = plot.figure(6.5, 2.8)
    ax = fig.add_subplot()
    values, ci = {}, {}
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    k = {r["k"] for r in rows.values()}
    if len(k) > 1:  # bars of several K under one label would compare unlike numbers: left out
        metrics = ("sr_pass1", "atpr")
    labels = [METRIC_TITLES[m].replace("K", str(next(iter(k)))) if len(k) == 1 and m != "sr_pass1" else METRIC_TITLES[m]
              for m in metrics]
    for run in runs:
        for m, label in zip(metrics, labels):
            values[(run, label)] = _num(rows.get(run, {}).get(m))
            if (run, "overall", "all", m) in cis:
                ci[(run, label)] = cis[(run, "overall", "all", m)]
    plot.grouped_bars(ax, labels, runs, values, ci, colors)
    ax.set_ylabel("score")
    plot.legend(fig, runs, colors)
    return plot.svg(fig, "chart-leaderboard")


def _breakdown_chart(frame: pl.DataFrame, dimension: str, metrics: Sequence[str],
                     cis: Mapping[tuple[str, str, str, str], tuple[float, float]], runs: Sequence[str],
                     colors: Sequence[Any], width: float = 6.0) -> tuple[str, list[str]]:
    """Bars of ``metrics`` per group of ``dimension``; groups without a task
    in any run are left out (named in the returned list)."""
    order: list[str] = []
    sizes: dict[str, int] = {}
    for row in frame.sort("segment_order").iter_rows(named=True):
        group = str(row["segment"])
        if group not in order:
            order.append(group)
        sizes[group] = max(sizes.get(group, 0), int(row.get("n_tasks") or 0))
    groups = [g for g in order if sizes.get(g, 0) > 0]
    empty = [g for g in order if sizes.get(g, 0) == 0]
    fig = plot.figure(width, 2.3 * len(metrics) + 0.4)
    axes = fig.subplots(len(metrics), 1, squeeze=False)[:, 0]
    labels = {g: f"{g}\n(n={sizes[g]})" for g in groups}
    for ax, metric in zip(axes, metrics):
        values, ci = {}, {}
        for row in frame.iter_rows(named=True):
            group = str(row["segment"])
            if group in labels:
                values[(row["run_id"], labels[group])] = _num(row.get(metric))
                key = (row["run_id"], dimension, group, metric)
                if key in cis:
                    ci[(row["run_id"], labels[group])] = cis[key]
        plot.grouped_bars(ax, [labels[g] for g in groups], runs, values, ci, colors)
        ax.set_ylabel(METRIC_TITLES.get(metric, metric))
        if len(groups) > 5:
            ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    plot.legend(fig, runs, colors)
    return plot.svg(fig, f"chart-{dimension}"), empty


def _scatter_chart(board: pl.DataFrame, cis: Mapping[tuple[str, str, str, str], tuple[float, float]],
                   runs: Sequence[str], colors: Sequence[Any]) -> tuple[str | None, list[str]]:
    """SR pass@1 (y) against AMTL (x), one point per run with its intervals;
    runs without an AMTL (no accepted turn) are returned, not drawn."""
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    drawable = [r for r in runs
                if not math.isnan(_num(rows[r].get("amtl"))) and not math.isnan(_num(rows[r].get("sr_pass1")))]
    left_out = [r for r in runs if r not in drawable]
    if not drawable:
        return None, left_out
    svg = _sr_against(rows, runs, drawable, colors, cis, "amtl", "chart-quality-latency",
                      xlabel="AMTL: mean output tokens per accepted turn (token-based latency; lower = faster)",
                      x_intervals=True,
                      min_span=1.0, floor_share=0.0)
    return svg, left_out


def _sr_against(rows: Mapping[str, Mapping[str, Any]], runs: Sequence[str], drawable: Sequence[str],
                colors: Sequence[Any], cis: Mapping[tuple[str, str, str, str], tuple[float, float]], x_metric: str,
                name: str, *, xlabel: str, x_intervals: bool, min_span: float, floor_share: float) -> str:
    """SR pass@1 (y) against ``x_metric`` (x) of the ``drawable`` runs, one
    labelled point each with its intervals (on x too with ``x_intervals``);
    the x axis starts at ``-floor_share`` of the data's span (0: at zero)."""
    fig = plot.figure(6.5, 3.6)
    ax = fig.add_subplot()
    ax.grid(True, axis="both")
    for run in drawable:
        color = colors[runs.index(run)]
        x, y = _num(rows[run][x_metric]), _num(rows[run]["sr_pass1"])
        ylo, yhi = cis.get((run, "overall", "all", "sr_pass1"), (y, y))
        xerr = None
        if x_intervals:
            xlo, xhi = cis.get((run, "overall", "all", x_metric), (x, x))
            xerr = [[max(x - xlo, 0)], [max(xhi - x, 0)]]
        ax.errorbar([x], [y], xerr=xerr, yerr=[[max(y - ylo, 0)], [max(yhi - y, 0)]], fmt="o", color=color,
                    ecolor=color, elinewidth=1, capsize=3, markersize=7, label=run)
        ax.annotate(run, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("SR pass@1")
    ax.set_ylim(-0.05, 1.05)
    xs = [_num(rows[r][x_metric]) for r in drawable]
    span = max(max(xs) - min(xs), max(xs) * 0.2, min_span)
    ax.set_xlim(max(min(xs) - span * 0.6, -span * floor_share), max(xs) + span * 0.6)
    return plot.svg(fig, name)


def _money(value: Any) -> str:
    return "–" if value is None else f"{value:.4f}"


def _tokens(usage: Any) -> int:
    """Input plus output tokens of a role's ``usage`` entry (0 when malformed)."""
    if not isinstance(usage, Mapping):
        return 0
    return sum(v for k in ("input_tokens", "output_tokens")
               if isinstance(v := usage.get(k), int) and not isinstance(v, bool))


def cost_view(board: pl.DataFrame, summaries: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the Cost section, one per run: cost per role, total, per
    success, currency, the prompt-cache share per role (``prompt_cache_share``
    of ``summary.json``) and what the numbers rest on (``basis``)."""
    rows = []
    for row in board.iter_rows(named=True):
        summary = summaries.get(row["run_id"]) or {}
        recorded = summary.get("cost") if isinstance(summary.get("cost"), Mapping) else {}
        if not isinstance(summary.get("usage"), Mapping):
            basis = "agent tokens only (run written before usage was recorded)" if row["cost_total"] is not None \
                else "no price for the agent's model"
        elif any(recorded.get(r) is None and row[f"cost_{r}"] is not None and _tokens(summary["usage"].get(r))
                 for r in ("agent", "judge", "fluency")):
            basis = "recorded; unpriced roles priced here from their usage"
        else:
            basis = "recorded by the run"
        shares = summary.get("prompt_cache_share")
        cache = ", ".join(f"{role} {share:.2f}" for role, share in shares.items()
                          if isinstance(share, (int, float)) and not isinstance(share, bool)) \
            if isinstance(shares, Mapping) else ""
        rows.append({"run_id": row["run_id"], "model": row["model"], "agent": _money(row["cost_agent"]),
                     "judge": _money(row["cost_judge"]), "fluency": _money(row["cost_fluency"]),
                     "total": _money(row["cost_total"]), "per_success": _money(row["cost_per_success"]),
                     "per_attempt": _money(row["cost_per_attempt"]), "currency": row["currency"] or "–",
                     "cache": cache or "–", "basis": basis})
    return rows


def _cost_chart(board: pl.DataFrame, cis: Mapping[tuple[str, str, str, str], tuple[float, float]],
                runs: Sequence[str], colors: Sequence[Any]) -> tuple[str | None, list[str]]:
    """SR pass@1 (y) against the run's total cost (x), one labelled point per
    run; runs without a cost (or SR), or priced in another currency than
    the first drawn run, are returned, not drawn."""
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    drawable = [r for r in runs if not math.isnan(_num(rows[r].get("cost_total")))
                and not math.isnan(_num(rows[r].get("sr_pass1")))]
    currency = rows[drawable[0]].get("currency") if drawable else None
    drawable = [r for r in drawable if rows[r].get("currency") in (currency, None) or currency is None]
    left_out = [r for r in runs if r not in drawable]
    if not drawable:
        return None, left_out
    svg = _sr_against(rows, runs, drawable, colors, cis, "cost_total", "chart-cost-quality",
                      xlabel=f"cost of the run ({currency or 'no currency: nothing priced'}; every role)",
                      x_intervals=False, min_span=1e-6, floor_share=0.05)  # a free run stays visible at 0
    return svg, left_out


def depth_table(runs: Sequence[Run]) -> pl.DataFrame:
    """TPR by checkpoint depth: one row per (run, depth k) with ``n`` (ok
    attempts of tasks with at least k checkpoints), ``covered`` (those whose
    walk covered checkpoint k) and ``share`` = covered / n."""
    import polars as pl

    frames = []
    for run in runs:
        ok = run.tasks.filter(pl.col("status") == "ok").select("checkpoints", "covered").collect()
        top = int(ok["checkpoints"].max() or 0) if ok.height else 0
        rows = []
        for depth in range(1, top + 1):
            eligible = ok.filter(pl.col("checkpoints") >= depth)
            covered = int((eligible["covered"].fill_null(0) >= depth).sum())
            rows.append({"run_id": run.run_id, "depth": depth, "n": eligible.height, "covered": covered,
                         "share": covered / eligible.height if eligible.height else None})
        frames.append(pl.DataFrame(rows, schema={"run_id": pl.Utf8, "depth": pl.Int64, "n": pl.Int64,
                                                 "covered": pl.Int64, "share": pl.Float64}))
    return pl.concat(frames) if frames else pl.DataFrame()


def _depth_chart(depths: pl.DataFrame, runs: Sequence[str], colors: Sequence[Any]) -> str | None:
    if depths.is_empty():
        return None
    fig = plot.figure(6.5, 3.2)
    ax = fig.add_subplot()
    ax.grid(True, axis="both")
    for run, color in zip(runs, colors):
        part = depths.filter(depths["run_id"] == run).sort("depth")
        if part.is_empty():
            continue
        ax.plot(part["depth"].to_list(), [_num(v) for v in part["share"].to_list()], marker="o", color=color,
                label=run, linewidth=1.6)
    top = int(depths["depth"].max())
    ns = {row["depth"]: row["n"] for row in depths.filter(depths["run_id"] == runs[0]).iter_rows(named=True)}
    ax.set_xticks(range(1, top + 1), [f"{d}\n(n={ns.get(d, 0)})" for d in range(1, top + 1)])
    ax.set_xlabel(f"checkpoint k (n: ok attempts of tasks with at least k checkpoints, run {runs[0]})")
    ax.set_ylabel("share of attempts covering k")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(frameon=False, loc="best")
    return plot.svg(fig, "chart-depth")


# --------------------------------------------------------------------------
# Transcripts and the task table
# --------------------------------------------------------------------------


def _read_transcripts(run: Run) -> tuple[dict[tuple[str, int], dict[str, Any]], str | None]:
    """``{(task_id, attempt): transcript}`` of a run (the last line of an
    attempt wins), and a warning when the file is missing or has bad lines."""
    path = Path(run.directory) / TRANSCRIPTS_FILE
    if not path.is_file():
        return {}, f"run {run.run_id!r} has no {TRANSCRIPTS_FILE}: its attempts have no transcript view"
    out: dict[tuple[str, int], dict[str, Any]] = {}
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                out[(str(record["task_id"]), int(record["attempt"]))] = record
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                bad += 1
    return out, (f"{path}: {bad} unreadable line(s) skipped" if bad else None)


def _load_task_context(workspace: Path) -> dict[str, dict[str, Any]]:
    """``{task_id: task}`` of ``tickets/tasks.jsonl`` (empty when unreadable)."""
    try:
        from cirrus.evaluate.tasks import load_tasks

        return {str(t.get("task_id")): t for t in load_tasks(workspace)}
    except Exception:  # noqa: BLE001  (the context is a nicety; the report stands without it)
        return {}


def _turn_view(turn: Mapping[str, Any], reference_type: str | None) -> dict[str, Any]:
    calls = []
    for call in turn.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        calls.append({"name": call.get("name"), "arguments": _pretty(call.get("arguments")),
                      "result": _pretty(call.get("result")) if call.get("result") is not None else None,
                      "recorded": call.get("recorded"), "error": call.get("error")})
    reference_calls = [{"name": c.get("name"), "arguments": _pretty(c.get("arguments"))}
                       for c in turn.get("reference_tool_calls") or [] if isinstance(c, Mapping)]
    verdicts = [{"kind": v.get("kind"), "checkpoint": v.get("checkpoint"), "ok": v.get("ok"), "raw": v.get("raw")}
                for v in turn.get("verdicts") or [] if isinstance(v, Mapping)]
    steps = []  # the agent's messages in order, as sent and received
    for message in turn.get("agent_messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            steps.append({"kind": "tool_result", "text": _pretty(message.get("content"))})
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            steps.append({"kind": "tool_call", "name": function.get("name"),
                          "text": _pretty(function.get("arguments"))})
        if message.get("content"):
            steps.append({"kind": "text", "role": role, "text": str(message.get("content"))})
    return {"checkpoint": turn.get("checkpoint"), "reply_type": reference_type, "query": turn.get("query"),
            "reference": turn.get("reference"), "agent_text": turn.get("agent_text"), "tool_calls": calls,
            "reference_tool_calls": reference_calls, "verdicts": verdicts, "steps": steps,
            "accepted": turn.get("accepted"), "covered_through": turn.get("covered_through"),
            "fluent": turn.get("fluent")}


def _attempt_views(runs: Sequence[Run], anchors: _Anchors, context: Mapping[str, Mapping[str, Any]],
                   warnings: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The task table rows and the transcript sections."""
    import polars as pl

    tasks: dict[str, dict[str, Any]] = {}
    transcripts = []
    for run in runs:
        rows = run.tasks.select("task_id", "attempt", "category", "checkpoints", "covered", "tpr", "success",
                                "status").sort("task_id", "attempt").collect()
        saved, warning = _read_transcripts(run)
        if warning:
            warnings.append(warning)
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
            transcripts.append({
                "anchor": anchor, "run_id": run.run_id, "model": run.model, "task_id": task_id, "attempt": attempt,
                "category": row["category"], "channel": task.get("channel"), "outcome": outcome,
                "status": row["status"], "error": record.get("error") or errors.get((task_id, attempt)),
                "covered": row["covered"], "checkpoints": row["checkpoints"], "tpr": _fmt(row["tpr"]),
                "history": history,
                "turns": [_turn_view(t, reply_types.get((task_id, t.get("checkpoint"))))
                          for t in record.get("turns") or [] if isinstance(t, Mapping)],
            })
    table = sorted(tasks.values(), key=lambda t: t["task_id"])
    return table, transcripts


# --------------------------------------------------------------------------
# Dataset, run diff and failure categories (sections of their own)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportExtras:
    """What the report adds beside its tables: the dataset statistics of the
    workspace (``stats``, or why there are none in ``stats_problem``) and,
    for exactly two runs, :func:`cirrus.report.diff.diff_runs`'s rows
    (``diff``; ``None`` for one run or three and more, or when the two runs
    cannot be compared, said in ``diff_problem``)."""

    stats: DatasetStats | None = None
    stats_problem: str | None = None
    diff: list[dict[str, Any]] | None = None
    diff_problem: str | None = None
    diff_common: int = 0


def load_dataset_stats(workspace: Path) -> tuple[DatasetStats | None, str | None]:
    """:func:`cirrus.stats.compute_stats` of ``tickets/tasks.jsonl``, or
    ``None`` and why (a message naming the file and line, no ticket text)."""
    from pydantic import ValidationError

    from cirrus.evaluate.tasks import TaskFileError, load_tasks
    from cirrus.schema import Task
    from cirrus.stats import compute_stats

    try:
        raw = load_tasks(workspace)
    except TaskFileError as exc:
        return None, f"no dataset statistics: {exc}"
    except OSError as exc:
        return None, f"no dataset statistics: could not read the tasks of {workspace} ({exc.strerror or exc})"
    tasks = []
    for number, item in enumerate(raw, 1):
        try:
            tasks.append(Task.model_validate(item))
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "task"
            return None, (f"no dataset statistics: task {number} of tickets/tasks.jsonl is not a valid task "
                          f"({where}: {problem['msg']}); `cirrus stats` names its line")
    return compute_stats(tasks), None


def load_run_diff(workspace: Path, run_ids: Sequence[str]) -> tuple[list[dict[str, Any]] | None, str | None, int]:
    """For exactly two runs: :func:`cirrus.report.diff.diff_runs` of their
    committed attempts, with the number of (task, attempt) pairs they share;
    ``(None, None, 0)`` for another number of runs, ``(None, why, n)`` when
    they cannot be compared."""
    if len(run_ids) != 2:
        return None, None, 0
    from cirrus.report.diff import diff_runs
    from cirrus.report.run_view import ShowError, load_run_view

    try:
        view_a, view_b = (load_run_view(workspace, run_id) for run_id in run_ids)
    except ShowError as exc:
        return None, f"the two runs could not be compared: {exc}", 0
    common = len(set(view_a.rows) & set(view_b.rows))
    if not common:
        return None, ("the two runs share no recorded (task, attempt) in their attempts.jsonl: "
                      "nothing to compare"), 0
    return diff_runs(view_a, view_b), None, common


def report_extras(runs: Sequence[Run], workspace: Path) -> ReportExtras:
    """The dataset statistics and (two runs) the run diff of a report."""
    stats, stats_problem = load_dataset_stats(workspace)
    diff, diff_problem, common = load_run_diff(workspace, [run.run_id for run in runs])
    return ReportExtras(stats, stats_problem, diff, diff_problem, common)


def write_extras(extras: ReportExtras, out_dir: Path) -> dict[str, Path]:
    """Write ``stats.json`` (the text ``cirrus stats`` writes) and, with a
    run diff, ``diff.parquet`` (the columns ``cirrus diff`` writes) into
    ``out_dir``; remove those an earlier report there left and this one
    does not write.  Returns ``{file name: path}`` of the files written."""
    from cirrus.files import atomic_writer
    from cirrus.report.diff import DIFF_FILE, write_diff
    from cirrus.workspace_stats import stats_json

    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if extras.stats is not None:
        with atomic_writer(out_dir / STATS_FILE, advice=REPORT_DISK_FULL_ADVICE) as handle:
            handle.write(stats_json(extras.stats))
        written[STATS_FILE] = out_dir / STATS_FILE
    if extras.diff is not None:
        path = out_dir / DIFF_FILE
        write_diff(extras.diff, path)
        written[DIFF_FILE] = path
    for name in (STATS_FILE, DIFF_FILE):
        if name not in written:
            (out_dir / name).unlink(missing_ok=True)
    return written


def _share_text(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def _number(value: float | int | None) -> str:
    """Integers as integers, other numbers with two decimals (as ``cirrus stats``)."""
    if value is None:
        return "–"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}"


def dataset_view(stats: DatasetStats) -> dict[str, Any]:
    """The rows of the Dataset section's tables, from ``stats`` as it is."""
    overview = [
        ("tasks", str(stats.tasks)),
        ("checkpoints", str(stats.checkpoints)),
        ("languages", ", ".join(f"{k}: {v}" for k, v in stats.languages.items()) or "–"),
        ("categories", str(len(stats.categories))),
        ("tasks with tool calls",
         f"{stats.tasks_with_tool_calls} ({_share_text(stats.tasks_with_tool_calls, stats.tasks)})"),
        ("tasks with images (OCR)", f"{stats.tasks_with_images} ({_share_text(stats.tasks_with_images, stats.tasks)})"),
        ("tool calls", f"{stats.tool_calls} ({stats.distinct_tools} distinct tools)"),
        ("knowledge docs per task", _number(stats.knowledge_docs_mean)),
    ]
    distributions = []
    for key, label, dist in (("turns", "turns", stats.turns),
                             ("checkpoints", "checkpoints", stats.checkpoints_per_task),
                             ("input_tokens", "input tokens", stats.input_tokens)):
        distributions.append({"key": key, "label": label, "min": _number(dist.min), "p25": _number(dist.p25),
                              "p50": _number(dist.p50), "p75": _number(dist.p75), "max": _number(dist.max),
                              "mean": _number(dist.mean)})
    return {
        "tasks": stats.tasks,
        "overview": [{"label": label, "value": value} for label, value in overview],
        "categories": [{"name": name, "tasks": count, "share": _share_text(count, stats.tasks)}
                       for name, count in stats.categories.items()],
        "distributions": distributions,
        "reply_types": [{"name": name, "checkpoints": count, "share": _share_text(count, stats.checkpoints)}
                        for name, count in stats.reply_types.items()],
        "tools": [{"rank": rank, "name": tool.name, "calls": tool.calls}
                  for rank, tool in enumerate(stats.top_tools, 1)],
        "distinct_tools": stats.distinct_tools,
    }


def _hbars(names: Sequence[str], counts: Sequence[int], prefix: str, xlabel: str, color: Any) -> str:
    """Horizontal bars, largest first from the top, each with its count."""
    fig = plot.figure(6.0, 0.45 + 0.26 * max(len(names), 2))
    ax = fig.add_subplot()
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")
    y = list(range(len(names)))
    ax.barh(y, list(counts), color=color, height=0.7)
    ax.set_yticks(y, list(names))
    ax.invert_yaxis()
    top = max(counts) if counts else 1
    for yi, count in zip(y, counts):
        ax.text(count + top * 0.01, yi, str(count), va="center", fontsize=8)
    ax.set_xlim(0, top * 1.12 + 0.5)
    ax.set_xlabel(xlabel)
    return plot.svg(fig, prefix)


def _distribution_chart(stats: DatasetStats, color: Any) -> str:
    """Box plots drawn from the quartiles ``cirrus.stats`` computed (whiskers
    at min and max, the mean as a dot): turns and checkpoints per task on one
    axis, input tokens on its own."""
    fig = plot.figure(6.5, 2.6)
    left, right = fig.subplots(1, 2, width_ratios=[2, 1])

    def box(dist: Any, label: str) -> dict[str, Any]:
        return {"label": label, "whislo": dist.min, "q1": dist.p25, "med": dist.p50, "q3": dist.p75,
                "whishi": dist.max, "mean": dist.mean, "fliers": []}

    props = {"patch_artist": True, "showmeans": True, "widths": 0.5,
             "boxprops": {"facecolor": color, "alpha": 0.55},
             "meanprops": {"marker": "o", "markerfacecolor": "#ffffff", "markeredgecolor": "#333333"},
             "medianprops": {"color": "#1d2430"}}
    left.bxp([box(stats.turns, "turns"), box(stats.checkpoints_per_task, "checkpoints")], **props)
    left.set_ylabel("per task")
    right.bxp([box(stats.input_tokens, "input tokens")], **props)
    right.set_ylabel("tokens per task")
    return plot.svg(fig, "chart-dataset-distributions")


def _shares_chart(stats: DatasetStats, color: Any) -> str:
    fig = plot.figure(6.0, 1.3)
    ax = fig.add_subplot()
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")
    labels = ["with tool calls", "with images (OCR)"]
    parts = [stats.tasks_with_tool_calls, stats.tasks_with_images]
    shares = [_num(stats.tool_call_share), _num(stats.image_share)]
    ax.barh([0, 1], [1.0, 1.0], color="#eeeeee", height=0.6)
    ax.barh([0, 1], shares, color=color, height=0.6)
    ax.set_yticks([0, 1], labels)
    ax.invert_yaxis()
    for yi, (part, share) in enumerate(zip(parts, shares)):
        inside = share > 0.6  # the label goes inside a long bar, in white
        ax.text(share - 0.01 if inside else share + 0.01, yi, f"{part} of {stats.tasks} ({share:.1%})", va="center",
                ha="right" if inside else "left", fontsize=8, color="#ffffff" if inside else "#1d2430")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of tasks")
    return plot.svg(fig, "chart-dataset-shares")


def dataset_charts(stats: DatasetStats) -> dict[str, str]:
    """The Dataset section's charts (empty for a dataset without tasks)."""
    if stats.tasks == 0:
        return {}
    color = plot.colors(1)[0]
    charts = {
        "categories": _hbars(list(stats.categories), list(stats.categories.values()), "chart-dataset-categories",
                             "tasks", color),
        "distributions": _distribution_chart(stats, color),
        "shares": _shares_chart(stats, color),
        "reply_types": _hbars(list(stats.reply_types), list(stats.reply_types.values()),
                              "chart-dataset-reply-types", "checkpoints (reference reply type)", color),
    }
    if stats.top_tools:
        charts["tools"] = _hbars([t.name for t in stats.top_tools], [t.calls for t in stats.top_tools],
                                 "chart-dataset-tools", "reference tool calls", color)
    return charts


def _json_view(text: str | None) -> str | None:
    return None if text is None else _pretty(text)


def diff_view(rows: Sequence[Mapping[str, Any]], anchor_of: Any = None) -> list[dict[str, Any]]:
    """The rows of :func:`cirrus.report.diff.diff_runs` for the page: tool
    calls as indented JSON, and ``link_a`` / ``link_b``, the anchors of both
    runs' transcripts of that attempt (``anchor_of(run_id, task_id,
    attempt)``, ``None`` where the page has none)."""
    out = []
    for row in rows:
        def link(run: str) -> str | None:
            return anchor_of(run, row["task_id"], row["attempt"]) if anchor_of else None

        out.append({**row, "link_a": link(row["run_a"]), "link_b": link(row["run_b"]),
                    "tool_calls_a": _json_view(row.get("tool_calls_a")),
                    "tool_calls_b": _json_view(row.get("tool_calls_b")),
                    "reference_tool_calls": _json_view(row.get("reference_tool_calls"))})
    return out


def _failure_order() -> list[str]:
    """``FAILURE_CATEGORIES`` when this Cirrus has it (it orders ties), else []."""
    try:
        from cirrus.evaluate.failures import FAILURE_CATEGORIES
    except ImportError:
        return []
    return [str(c) for c in FAILURE_CATEGORIES]


def failure_counts(checkpoints: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> tuple[pl.DataFrame, list[str]]:
    """Rejected turns by failure category, per run.

    ``checkpoints``: ``{run_id: checkpoints frame}``.  Returns a frame
    ``run_id, failure, n`` (only non-null categories, counted over the rows
    of the run: rejected turns, and accepted ones the fluency check failed)
    and the runs whose frame has no ``failure`` column (runs
    written before Cirrus recorded it)."""
    import polars as pl

    schema = {"run_id": pl.Utf8, "failure": pl.Utf8, "n": pl.Int64}
    frames, missing = [], []
    for run_id, frame in checkpoints.items():
        lazy = frame.lazy()
        if "failure" not in lazy.collect_schema().names():
            missing.append(run_id)
            continue
        frames.append(lazy.filter(pl.col("failure").is_not_null())
                      .group_by(pl.col("failure").cast(pl.Utf8)).agg(pl.len().cast(pl.Int64).alias("n"))
                      .select(pl.lit(run_id, dtype=pl.Utf8).alias("run_id"), "failure", "n").collect())
    if not frames:
        return pl.DataFrame(schema=schema), missing
    return pl.concat(frames).sort("run_id", "failure"), missing


def _failed(frame: pl.DataFrame | pl.LazyFrame) -> tuple[int, int]:
    """Failed turns (rejected, or accepted with a fluency No: the turns that
    get a category, docs/failures.md) and those of them without a category."""
    import polars as pl

    lazy = frame.lazy()
    names = lazy.collect_schema().names()
    if "accepted" not in names:
        return 0, 0
    accepted = pl.col("accepted").fill_null(False)
    fluent_no = (pl.col("fluent") == False) if "fluent" in names else pl.lit(False)  # noqa: E712  (null is not False)
    failed = lazy.filter(~accepted | (accepted & fluent_no.fill_null(False)))
    uncategorised = failed.filter(pl.col("failure").is_null()) if "failure" in names else failed
    return (int(failed.select(pl.len()).collect().item()), int(uncategorised.select(pl.len()).collect().item()))


def recorded_checkpoints(run: Run) -> pl.LazyFrame:
    """``run.checkpoints`` as its ``checkpoints.parquet`` holds them: without
    ``failure`` when the file has no such column (the loader fills it with
    nulls for older runs; the page must tell "not recorded" from "none")."""
    import polars as pl

    try:
        names = pl.read_parquet_schema(Path(run.directory) / "checkpoints.parquet")
    except Exception:  # noqa: BLE001  (the loader read it already; a vanished file reads as "not recorded")
        names = {}
    return run.checkpoints if "failure" in names else run.checkpoints.drop("failure", strict=False)


def failure_view(checkpoints: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> dict[str, Any]:
    """The Why-turns-were-rejected section: ``runs`` (those with categories),
    ``missing`` (those without), ``rows`` (one per category, most rejections
    first over all runs, ties in ``FAILURE_CATEGORIES`` order then by name:
    ``{"failure", "counts": {run: n}, "shares": {run: "12.5%"}}``) and per
    run ``categorised``, ``failed`` (rejected, or accepted with a fluency
    No) and ``uncategorised`` (failed without a category) turns."""
    counts, missing = failure_counts(checkpoints)
    runs = [run for run in checkpoints if run not in missing]
    by = {(r["run_id"], r["failure"]): r["n"] for r in counts.iter_rows(named=True)}
    totals: dict[str, int] = {}
    for (_, failure), n in by.items():
        totals[failure] = totals.get(failure, 0) + n
    known = _failure_order()
    rank = {name: i for i, name in enumerate(known)}
    ordered = sorted(totals, key=lambda f: (-totals[f], rank.get(f, len(rank)), f))
    categorised = {run: sum(n for (r, _), n in by.items() if r == run) for run in runs}
    rows = [{"failure": f, "counts": {run: by.get((run, f), 0) for run in runs},
             "shares": {run: _share_text(by.get((run, f), 0), categorised[run]) for run in runs}} for f in ordered]
    failed, uncategorised = {}, {}
    for run in runs:
        failed[run], uncategorised[run] = _failed(checkpoints[run])
    return {"runs": runs, "missing": missing, "rows": rows, "categorised": categorised, "failed": failed,
            "uncategorised": uncategorised}


def _failure_chart(view: Mapping[str, Any], colors: Mapping[str, Any]) -> str | None:
    if not view["rows"]:
        return None
    runs = view["runs"]
    groups = [row["failure"] for row in view["rows"]]
    values = {(run, row["failure"]): float(row["counts"][run]) for row in view["rows"] for run in runs}
    fig = plot.figure(6.5, 3.0)
    ax = fig.add_subplot()
    plot.grouped_bars(ax, groups, runs, values, {}, [colors[run] for run in runs], ylim=None)
    ax.set_ylabel("failed turns")
    if len(groups) > 3:
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    plot.legend(fig, runs, [colors[run] for run in runs])
    return plot.svg(fig, "chart-failures")


# --------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------


def _leaderboard_rows(board: pl.DataFrame, cis: Mapping[tuple[str, str, str, str], tuple[float, float]],
                      self_judged: Mapping[str, bool] | None = None,
                      marks: Mapping[tuple[str, str], str] | None = None) -> list[dict[str, Any]]:
    def with_ci(run_id: str, metric: str, value: Any) -> dict[str, str | None]:
        low, high = cis.get((run_id, "overall", "all", metric), (None, None))
        return {"value": _fmt(value), "ci": f"[{low:.2f}, {high:.2f}]" if low is not None else "",
                "noise": (marks or {}).get((run_id, metric))}

    rows = []
    for row in board.iter_rows(named=True):
        run = row["run_id"]
        cost = None if row.get("cost_total") is None else f"{row['cost_total']:.4f} {row.get('currency') or ''}"
        rows.append({
            "run_id": run, "model": row.get("model"), "agent_label": row.get("agent_label"), "k": row.get("k"),
            "tasks": row.get("n_tasks"),
            "errors": row.get("errors"),
            "sr_pass1": with_ci(run, "sr_pass1", row.get("sr_pass1")),
            "sr_pass_at_k": with_ci(run, "sr_pass_at_k", row.get("sr_pass_at_k")),
            "pass_hat_k": with_ci(run, "pass_hat_k", row.get("pass_hat_k")),
            "atpr": with_ci(run, "atpr", row.get("atpr")),
            "alj": with_ci(run, "alj", row.get("alj")),
            "anei": with_ci(run, "anei", row.get("anei")),
            "amtl": {"value": _fmt(row.get("amtl"), 1), "ci": (lambda c: f"[{c[0]:.1f}, {c[1]:.1f}]" if c else "")(
                cis.get((run, "overall", "all", "amtl"))), "noise": None},
            "cost": cost or "–", "judge": row.get("judge") or "–",
            "self_judged": bool((self_judged or {}).get(run)),
        })
    return rows


def _interval_text(value: Any, low: Any, high: Any) -> str:
    if value is None:
        return "–"
    return _fmt(value) + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def noise_marks(board: pl.DataFrame, paired: pl.DataFrame | None,
                metrics: Sequence[str] = ("sr_pass1", "atpr")) -> dict[tuple[str, str], str]:
    """``{(run_id, metric): tooltip}`` of the leaderboard cells to mark ``≈``:
    runs whose difference to the best run on ``metric`` (the highest value;
    the first of a tie) is within the noise of their paired comparison
    (``within_noise`` of ``paired``)."""
    from cirrus.report.uncertainty import noise_reason

    if paired is None or paired.is_empty() or board.height < 2:
        return {}
    pairs = {(r["run_a"], r["run_b"], r["metric"]): r for r in paired.iter_rows(named=True)}
    marks = {}
    for metric in metrics:
        values = [(r["run_id"], r[metric]) for r in board.iter_rows(named=True) if r.get(metric) is not None]
        if len(values) < 2:
            continue
        best = max(values, key=lambda v: v[1])[0]
        for run_id, _ in values:
            row = pairs.get((best, run_id, metric)) or pairs.get((run_id, best, metric))
            if run_id == best or row is None or not row.get("within_noise"):
                continue
            reason = noise_reason(row["diff"], row["mdd"], row["ci_low"], row["ci_high"], row["n_tasks"],
                                  row.get("confidence") or 0.95)
            marks[(run_id, metric)] = (f"within the noise of this comparison with {best}, the best "
                                       f"{METRIC_TITLES[metric]}: {reason}")
    return marks


def _noise_views(noise: pl.DataFrame, paired: pl.DataFrame | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows of the Noise section: per run, and per pair of runs (SR pass@1 and ATPR)."""
    from cirrus.report.uncertainty import MDD_METRICS

    runs = []
    for row in noise.iter_rows(named=True):
        judge = None
        if row["judge_measured"] is not None:
            judge = {"name": row["judge_measured"], "sample": _fmt(row["judge_sample"]),
                     "repeats": _fmt(row["judge_repeats"]),
                     "item": _interval_text(row["judge_item_flip_rate"], row["judge_item_flip_rate_low"],
                                            row["judge_item_flip_rate_high"]),
                     "verdict": _interval_text(row["judge_verdict_flip_rate"], row["judge_verdict_flip_rate_low"],
                                               row["judge_verdict_flip_rate_high"])}
        runs.append({"run_id": row["run_id"], "k": row["k"], "tasks_multi": row["tasks_multi"],
                     "tasks_flipping": row["tasks_flipping"],
                     "flip": None if row["flip_rate"] is None else _interval_text(
                         row["flip_rate"], row["flip_rate_low"], row["flip_rate_high"]),
                     "variance": _fmt(row["success_var_within"]), "judge": judge})
    pairs = []
    if paired is not None:
        for row in paired.iter_rows(named=True):
            if row["metric"] not in MDD_METRICS:
                continue
            within = row["within_noise"]
            pairs.append({"run_a": row["run_a"], "run_b": row["run_b"], "metric": METRIC_TITLES[row["metric"]],
                          "n_tasks": row["n_tasks"], "diff": _fmt(row["diff"]),
                          "ci": "–" if row["ci_low"] is None else f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]",
                          "mdd": _fmt(row["mdd"]),
                          "within": "–" if within is None else ("within the noise" if within else "beyond the noise"),
                          "within_noise": within})
    return runs, pairs


def render_html(runs: Sequence[Run], tables: Mapping[str, pl.DataFrame], workspace: Path,
                warnings: Sequence[str] = (), *, extras: ReportExtras | None = None) -> str:
    """The page as a string (see :func:`write_html_report`)."""
    import jinja2
    import matplotlib

    matplotlib.use("Agg", force=False)
    import polars as pl

    from cirrus.report.tables import DIMENSIONS, TASK_DIMENSIONS, breakdown_by, leaderboard

    run_ids = [run.run_id for run in runs]
    colors = plot.colors(len(run_ids))
    page_warnings = list(warnings)
    board = _table(tables, "leaderboard")
    if board is None:
        board = leaderboard(runs)
    intervals = _table(tables, "intervals")
    cis = _ci_lookup(intervals)
    breakdowns = {}
    for dimension in DIMENSIONS:
        frame = _table(tables, f"breakdown_{dimension}")
        breakdowns[dimension] = frame if frame is not None else breakdown_by(runs, dimension)

    with matplotlib.rc_context(plot.RC):
        charts: dict[str, Any] = {"leaderboard": _leaderboard_chart(board, cis, run_ids, colors)}
        sections = []
        for dimension in TASK_DIMENSIONS:
            svg, empty = _breakdown_chart(breakdowns[dimension], dimension, ("sr_pass1", "atpr"), cis, run_ids, colors)
            sections.append({"id": f"breakdown-{dimension}", "title": TASK_DIMENSION_TITLES[dimension], "svg": svg,
                             "empty": empty})
        charts["breakdowns"] = sections
        charts["reply_type"], reply_empty = _breakdown_chart(
            breakdowns["reply_type"], "reply_type", ("acceptance_rate", "coverage_rate"), cis, run_ids, colors)
        charts["scatter"], scatter_left_out = _scatter_chart(board, cis, run_ids, colors)
        charts["cost"], cost_left_out = _cost_chart(board, cis, run_ids, colors)
        subtask = _subtask_section(tables)
        depths = depth_table(runs)
        charts["depth"] = _depth_chart(depths, run_ids, colors)
        if extras is None:
            extras = report_extras(runs, workspace)
        dataset = dataset_view(extras.stats) if extras.stats is not None else None
        dataset_svgs = dataset_charts(extras.stats) if extras.stats is not None else {}
        failures = failure_view({run.run_id: recorded_checkpoints(run) for run in runs})
        charts["failures"] = _failure_chart(failures, dict(zip(run_ids, colors)))

    paired = _table(tables, "paired")
    paired_rows = []
    if paired is not None and not paired.is_empty():
        for row in paired.iter_rows(named=True):
            paired_rows.append({
                "run_a": row["run_a"], "run_b": row["run_b"],
                # the pair's K (the smaller of the two runs' K unless --k), never a bare "K"
                "metric": (METRIC_TITLES[row["metric"]].replace("K", str(row["k"]))
                           if row["metric"] in ("sr_pass_at_k", "pass_hat_k") and row.get("k") is not None
                           else METRIC_TITLES.get(row["metric"], row["metric"])),
                "n_tasks": row["n_tasks"], "diff": _fmt(row["diff"]),
                "ci": "–" if row["ci_low"] is None else f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]",
                "p": _fmt(row["p_value"], 4)})
    noise_table = _table(tables, "noise")
    if noise_table is None:
        from cirrus.report.uncertainty import noise

        noise_table = noise(runs)
    marks = noise_marks(board, paired)
    noise_runs, noise_pairs = _noise_views(noise_table, paired)
    confidence = None
    if intervals is not None and not intervals.is_empty():
        confidence = intervals["confidence"][0]
    reply_rows = breakdowns["reply_type"].select(
        "run_id", "segment", "n_reference", "n_reached", "n_covered", "n_judged", "n_accepted", "acceptance_rate",
        "coverage_rate").with_columns(pl.col("acceptance_rate", "coverage_rate").round(3)).to_dicts()

    anchors = _Anchors()
    task_rows, transcripts = _attempt_views(runs, anchors, _load_task_context(workspace), page_warnings)
    diff_rows = diff_view(extras.diff, anchors.get) if extras.diff is not None else None
    notes = sorted({f"run {run.run_id!r}: offline heuristics used for {', '.join(run.summary['offline_heuristics'])}; "
                    "scores are a harness check, not a model judgement"
                    for run in runs if run.summary.get("offline_heuristics")})

    env = jinja2.Environment(loader=jinja2.PackageLoader("cirrus.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = _fmt
    template = env.get_template(TEMPLATE)
    run_colors = {run: "#%02x%02x%02x" % tuple(int(c * 255) for c in color[:3]) for run, color in zip(run_ids, colors)}
    return template.render(
        title="Cirrus report: " + ", ".join(run_ids),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        workspace=str(workspace), runs=[{"run_id": r.run_id, "model": r.model, "k": r.k, "dataset": r.dataset,
                                         "color": run_colors[r.run_id], "self_judged": r.self_judged} for r in runs],
        self_judged_runs=[r.run_id for r in runs if r.self_judged],
        mixed_k=len(set(board["k"].to_list())) > 1,
        leaderboard=_leaderboard_rows(board, cis, {r.run_id: r.self_judged for r in runs}, marks),
        paired=paired_rows, confidence=confidence, noise_runs=noise_runs, noise_pairs=noise_pairs,
        judge_measured=any(r["judge"] for r in noise_runs),
        charts={k: (jinja2.utils.markupsafe.Markup(v) if isinstance(v, str) else v) for k, v in charts.items()
                if k != "breakdowns"},
        breakdowns=[{**s, "svg": jinja2.utils.markupsafe.Markup(s["svg"])} for s in charts["breakdowns"]],
        reply_empty=reply_empty, reply_rows=reply_rows, scatter_left_out=scatter_left_out,
        depths=depths.to_dicts() if not depths.is_empty() else [], task_rows=task_rows, run_ids=run_ids,
        run_colors=run_colors, transcripts=transcripts, warnings=page_warnings, notes=notes,
        has_intervals=bool(cis),
        dataset=dataset, dataset_problem=extras.stats_problem,
        dataset_charts={k: jinja2.utils.markupsafe.Markup(v) for k, v in dataset_svgs.items()},
        diff_rows=diff_rows, diff_problem=extras.diff_problem, diff_common=extras.diff_common,
        failures=failures,
        costs=cost_view(board, {run.run_id: run.summary for run in runs}), cost_left_out=cost_left_out,
        subtask=subtask,
    )


def _subtask_section(tables: Mapping[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The subtask runs' section (Table 4 and Figure 6), when the report has
    their tables (``subtask_by_tokens`` / ``subtask_by_reply_type``, with or
    without ``.parquet``); None otherwise.  Called inside the page's rc context."""
    import jinja2

    from cirrus.report.subtask import SUBTASK_REPORT_FILES, subtask_html_section

    found = {name: frame for name in SUBTASK_REPORT_FILES
             if (frame := _table(tables, name.removesuffix(".parquet"))) is not None}
    if not found or not any(frame.height for frame in found.values()):
        return None
    section = subtask_html_section(found)
    if section is None:
        return None
    figure = section["figure6"]
    return {"tables": section["tables"], "figure6": jinja2.utils.markupsafe.Markup(figure) if figure else None}


def write_html_report(runs: Sequence[Run], tables: Mapping[str, pl.DataFrame], out_dir: Path,
                      workspace: Path, warnings: Sequence[str] = (), *, extras: ReportExtras | None = None) -> Path:
    """Write ``out_dir/report.html`` (atomically) and return its path.

    ``runs``: the runs as :func:`~cirrus.report.loading.load_runs` gives
    them; ``tables``: the frames of ``cirrus report`` keyed by file name
    (``leaderboard.parquet``, ``breakdown_<dimension>.parquet``,
    ``intervals.parquet``, ``paired.parquet``, ``noise.parquet``, and the
    subtask runs' ``subtask_by_tokens.parquet`` / ``subtask_by_reply_type.parquet``
    when the report has any; the suffix may be left out).  A missing leaderboard, breakdown or noise table is
    computed (the noise table then without judge noise); without
    ``intervals`` the charts have no error bars, without ``paired`` there
    are no MDDs and no ``≈`` marks.  ``workspace``: for the tasks' earlier
    messages (``tickets/tasks.jsonl``) and its dataset statistics.
    ``warnings`` are shown at the top.  ``extras``: the dataset statistics
    and run diff (:func:`report_extras`; computed when not given).
    """
    from cirrus.files import atomic_writer

    text = render_html(runs, tables, workspace, warnings, extras=extras)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / HTML_FILE
    with atomic_writer(path, advice=REPORT_DISK_FULL_ADVICE) as handle:
        handle.write(text)
    return path
