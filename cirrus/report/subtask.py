"""The report of subtask runs (``cirrus eval --mode subtask``): the paper's
Table 4 (scores by the band of the agent's whole input: by default the
paper's 0-8k, 8k-16k, 16k+; ``fine`` bands on request) and Figure 6 (pass@1,
pass@K and AMTL by reference reply type), with bootstrap intervals.

Pure part (plain rows in, plain rows out; no polars): :func:`token_band`,
:func:`task_sums` and :func:`group_rows`, the last resampling **tasks** (all
subtasks and attempts of a drawn task go together) with
:func:`cirrus.report.uncertainty.ratio_bootstrap`, as the walk's intervals do.
Every metric is a ratio of per-task sums, so a task-level bootstrap is
exact to the estimator:

* ``pass_at_1``: mean over subtasks (with an ok attempt) of ``c / n``;
* ``pass_at_k``: mean over subtasks with ``n >= K`` of ``1 - C(n-c, K)/C(n, K)``;
* ``tia``, ``tsa``, ``tev``, ``rr``: means over ok subtask attempts where defined
  (TSA and TEV: subtasks whose reference calls a tool);
* ``tia_tool``: TIA over the ok attempts of subtasks whose reference calls a
  tool only (the population of the paper's TIA column, as we read it);
* ``amtl``: mean STL of the accepted ok subtask attempts.

Edges: :func:`load_subtask_run` (``reports/<run_id>/subtasks.parquet`` and
``summary.json``), :func:`subtask_report` (``cirrus report`` given only
subtask runs), :func:`write_subtask_tables` (the subtask part of any
report), the rows a page or terminal shows (:func:`table_views`; the terminal
tables are printed by :mod:`cirrus.commands`), and for the HTML page
:func:`subtask_html_section` and :func:`figure6_svg`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrus.evaluate.subtask import needs_tool
from cirrus.metrics import pass_at_k
from cirrus.report import charts as plot
from cirrus.schema import REPLY_TYPES


@dataclass(frozen=True)
class TokenBands:
    """Bands of a subtask's input tokens (the agent's whole input: system
    message, tools, real history + query): ``labels[i]`` holds the counts
    below ``edges[i]`` (and at or above the edge before); the last label
    holds the rest."""

    name: str
    edges: tuple[int, ...]
    labels: tuple[str, ...]

    def band(self, tokens: int | None) -> str:
        if tokens is None:
            return UNKNOWN
        for edge, label in zip(self.edges, self.labels):
            if tokens < edge:
                return label
        return self.labels[-1]


UNKNOWN = "unknown"
# The paper's Table 4 bands (its inputs run from 520 to 37,054 tokens), the default
PAPER_BANDS = TokenBands("paper", (8_000, 16_000), ("0-8k", "8k-16k", "16k+"))
# Finer bands for short-ticket workspaces, where every subtask is under 8k (`cirrus report --token-bands fine`)
FINE_BANDS = TokenBands("fine", (1_000, 2_000, 4_000, 8_000, 16_000),
                        ("<1k", "1k-2k", "2k-4k", "4k-8k", "8k-16k", "16k+"))
TOKEN_BAND_SCHEMES = {bands.name: bands for bands in (PAPER_BANDS, FINE_BANDS)}
TOKEN_BAND_EDGES = PAPER_BANDS.edges
TOKEN_BANDS = PAPER_BANDS.labels
TOKEN_METRICS = ("pass_at_1", "pass_at_k", "tia", "tia_tool", "tsa", "tev")  # Table 4
REPLY_TYPE_METRICS = ("pass_at_1", "pass_at_k", "amtl")  # Figure 6
ALL_METRICS = ("pass_at_1", "pass_at_k", "tia", "tia_tool", "tsa", "tev", "rr", "amtl")
BY_TOKENS_FILE = "subtask_by_tokens.parquet"
BY_REPLY_TYPE_FILE = "subtask_by_reply_type.parquet"
SUBTASK_REPORT_FILES = {BY_TOKENS_FILE: "subtask_by_tokens", BY_REPLY_TYPE_FILE: "subtask_by_reply_type"}
METRIC_TITLES = {"pass_at_1": "pass@1", "pass_at_k": "pass@K", "tia": "TIA", "tia_tool": "TIA (tool)", "tsa": "TSA",
                 "tev": "TEV",
                 "rr": "RR", "amtl": "AMTL"}


def token_band(tokens: int | None, bands: TokenBands = PAPER_BANDS) -> str:
    """The band label of a subtask's input tokens: by default the paper's
    ``0-8k`` (< 8,000), ``8k-16k``, ``16k+`` (>= 16,000); ``unknown`` for None."""
    return bands.band(tokens)


def token_bands(name: str) -> TokenBands:
    """The band scheme called ``name`` (``paper`` or ``fine``); ValueError naming the choices."""
    try:
        return TOKEN_BAND_SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown token bands {name!r}; choose {' or '.join(TOKEN_BAND_SCHEMES)}") from None


# --------------------------------------------------------------------------
# Pure tables
# --------------------------------------------------------------------------


def task_sums(rows: Iterable[Mapping[str, Any]], k: int,
              metrics: Sequence[str] = ALL_METRICS) -> dict[str, dict[str, tuple[float, int]]]:
    """Per task, per metric: ``(sum, count)``, so that a metric over any set
    of tasks is ``sum of sums / sum of counts`` (see the module doc).
    ``rows``: subtask rows (``task_id``, ``checkpoint``, ``status``,
    ``accepted``, ``tia``, ``tsa``, ``tev``, ``rr``, ``stl``, and
    ``needs_tool`` for ``tia_tool``)."""
    unknown = set(metrics) - set(ALL_METRICS)
    if unknown:
        raise ValueError(f"unknown subtask metrics {sorted(unknown)}; known: {', '.join(ALL_METRICS)}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    sums: dict[str, dict[str, list[float]]] = {}
    counts: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        task = sums.setdefault(row["task_id"], {m: [0.0, 0] for m in metrics})
        pair = counts.setdefault((row["task_id"], int(row["checkpoint"])), [0, 0])
        if row["status"] != "ok":
            continue
        pair[0] += 1
        pair[1] += int(bool(row["accepted"]))
        for metric in ("tia", "tsa", "tev", "rr"):
            if metric in task and row.get(metric) is not None:
                task[metric][0] += float(bool(row[metric]))
                task[metric][1] += 1
        if "tia_tool" in task and row.get("tia") is not None and needs_tool(row):
            task["tia_tool"][0] += float(bool(row["tia"]))
            task["tia_tool"][1] += 1
        if "amtl" in task and row["accepted"] and row.get("stl") is not None:
            task["amtl"][0] += float(row["stl"])
            task["amtl"][1] += 1
    for (task_id, _), (n, c) in counts.items():
        task = sums[task_id]
        if "pass_at_1" in task and n >= 1:
            task["pass_at_1"][0] += c / n
            task["pass_at_1"][1] += 1
        if "pass_at_k" in task and n >= k:
            task["pass_at_k"][0] += pass_at_k(n, c, k)
            task["pass_at_k"][1] += 1
    return {t: {m: (float(v[0]), int(v[1])) for m, v in per.items()} for t, per in sums.items()}


def _ordered(fixed: Sequence[str], found: Iterable[str]) -> list[str]:
    others = sorted((g for g in set(found) if g not in fixed), key=lambda g: (g == UNKNOWN, g))
    return [*fixed, *others]


def group_rows(rows: Iterable[Mapping[str, Any]], segment_of: Callable[[Mapping[str, Any]], str],
               fixed: Sequence[str], k: int, metrics: Sequence[str], *, n_boot: int = 2000, seed: int = 0,
               confidence: float = 0.95) -> list[dict[str, Any]]:
    """One row per segment (``fixed`` segments first, always, with zero
    counts when empty; others found after, ``unknown`` last):
    ``segment``, ``segment_order``, ``n_tasks``, ``n_subtasks`` (distinct
    (task, checkpoint)), ``n_ok`` / ``errors`` (subtask attempts), and per
    metric its value and ``<metric>_low`` / ``<metric>_high``: the
    ``confidence`` percentile interval of a bootstrap over the segment's
    tasks (``n_boot`` replicates, ``seed``; None when ``n_boot`` is 0 or the
    metric is undefined)."""
    import numpy as np

    from cirrus.report.uncertainty import ratio_bootstrap

    by_segment: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_segment.setdefault(segment_of(row), []).append(row)
    out = []
    for order, segment in enumerate(_ordered(fixed, by_segment)):
        part = by_segment.get(segment, [])
        per_task = task_sums(part, k, metrics)
        tasks = sorted(per_task)
        sums = np.array([[per_task[t][m][0] for m in metrics] for t in tasks], dtype=np.float64).reshape(
            len(tasks), len(metrics))
        counts = np.array([[per_task[t][m][1] for m in metrics] for t in tasks], dtype=np.float64).reshape(
            len(tasks), len(metrics))
        record: dict[str, Any] = {
            "segment": segment, "segment_order": order, "n_tasks": len(tasks),
            "n_subtasks": len({(r["task_id"], int(r["checkpoint"])) for r in part}),
            "n_ok": sum(1 for r in part if r["status"] == "ok"),
            "errors": sum(1 for r in part if r["status"] != "ok")}
        total, count = sums.sum(axis=0), counts.sum(axis=0)
        low = high = None
        if n_boot > 0 and tasks:
            interval = ratio_bootstrap(sums, counts, n_boot=n_boot, seed=seed, confidence=confidence)
            low, high = interval.low, interval.high
        for i, metric in enumerate(metrics):
            record[metric] = float(total[i] / count[i]) if count[i] > 0 else None
            record[f"{metric}_low"] = _finite(low[i]) if low is not None and count[i] > 0 else None
            record[f"{metric}_high"] = _finite(high[i]) if high is not None and count[i] > 0 else None
        out.append(record)
    return out


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def by_tokens(rows: Sequence[Mapping[str, Any]], k: int, bands: TokenBands = PAPER_BANDS,
              **bootstrap: Any) -> list[dict[str, Any]]:
    """Table 4: :func:`group_rows` by the ``bands`` of ``input_tokens`` (the
    agent's whole input), with :data:`TOKEN_METRICS`."""
    return group_rows(rows, lambda r: bands.band(r.get("input_tokens")), bands.labels, k, TOKEN_METRICS, **bootstrap)


def by_reply_type(rows: Sequence[Mapping[str, Any]], k: int, **bootstrap: Any) -> list[dict[str, Any]]:
    """Figure 6: :func:`group_rows` by the reference ``reply_type``, with
    :data:`REPLY_TYPE_METRICS`."""
    return group_rows(rows, lambda r: r.get("reply_type") or UNKNOWN, REPLY_TYPES, k, REPLY_TYPE_METRICS,
                      **bootstrap)


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SubtaskRun:
    """A finished subtask run: ``rows`` of its ``subtasks.parquet`` (dicts),
    ``summary.json`` and ``run.json`` as read.  Has what
    :func:`cirrus.report.comparability.comparability_warnings` reads."""

    run_id: str
    directory: Path
    summary: dict[str, Any]
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    # written before input_tokens counted the agent's whole input: its
    # input_tokens are the dialogue's alone (real history + query)
    dialogue_only_tokens: bool = False

    @property
    def model(self) -> str:
        return str(self.summary.get("model") or self.config.get("fingerprint", {}).get("agent") or self.run_id)

    @property
    def k(self) -> int:
        k = self.summary.get("k")
        return k if isinstance(k, int) and not isinstance(k, bool) and k >= 1 else 1

    @property
    def self_judged(self) -> bool:
        return self.summary.get("self_judged", self.config.get("self_judged")) is True

    @property
    def dataset(self) -> str | None:
        value = self.config.get("fingerprint", {}).get("dataset")
        return None if value is None else str(value)


def split_modes(workspace: Path, run_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(walk run ids, subtask run ids)`` in the given order; an id that is
    no run (or a bad id) counts as a walk, for the walk loader to refuse."""
    from cirrus.evaluate.subtask import MODE_SUBTASK, run_mode
    from cirrus.report.loading import RUN_ID_PATTERN
    from cirrus.workspace import REPORTS_DIR

    walks, subtasks = [], []
    for run_id in run_ids:
        plain = RUN_ID_PATTERN.fullmatch(run_id) and not run_id.startswith(".")
        directory = workspace / REPORTS_DIR / run_id
        (subtasks if plain and directory.is_dir() and run_mode(directory) == MODE_SUBTASK else walks).append(run_id)
    return walks, subtasks


def load_subtask_run(workspace: Path, run_id: str) -> SubtaskRun:
    """The finished subtask run ``reports/<run_id>/``; :class:`ReportError`
    for an unfinished or damaged one, or a walk run."""
    import polars as pl

    from cirrus.evaluate.subtask import LATER_SUBTASK_COLUMNS, MODE_SUBTASK, SUBTASK_COLUMNS, SUBTASKS_FILE, run_mode
    from cirrus.report.loading import ReportError, check_run_id
    from cirrus.workspace import REPORTS_DIR

    check_run_id(run_id)
    directory = workspace / REPORTS_DIR / run_id
    if not directory.is_dir() or run_mode(directory) != MODE_SUBTASK:
        raise ReportError(f"no subtask run {run_id!r} in {workspace / REPORTS_DIR}")
    summary_file, table = directory / "summary.json", directory / SUBTASKS_FILE
    if not summary_file.is_file() or not table.is_file():
        raise ReportError(f"subtask run {run_id!r} has not finished (no {summary_file.name} or {table.name}): resume "
                          f"it with `cirrus eval --mode subtask ... --run-id {run_id}`")
    parts = []
    for path in (summary_file, directory / "run.json"):
        try:
            parts.append(json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {})
        except (OSError, ValueError) as exc:
            raise ReportError(f"{path}: not valid JSON ({exc}); the run's record is damaged") from exc
    try:
        frame = pl.read_parquet(table)
    except Exception as exc:  # noqa: BLE001  (polars raises several kinds for a damaged file)
        raise ReportError(f"{table}: not a readable Parquet file ({exc})") from exc
    missing = [c for c in SUBTASK_COLUMNS if c not in frame.columns and c not in LATER_SUBTASK_COLUMNS]
    if missing:
        raise ReportError(f"{table}: missing columns {', '.join(missing)}")
    dialogue_only = "dialogue_tokens" not in frame.columns
    rows = frame.to_dicts()
    for row in rows:
        for column in LATER_SUBTASK_COLUMNS:
            row.setdefault(column, None)
    return SubtaskRun(run_id, directory, parts[0], parts[1] if isinstance(parts[1], dict) else {}, rows,
                      dialogue_only_tokens=dialogue_only)


def subtask_tables(runs: Sequence[SubtaskRun], *, k: int | None = None, n_boot: int = 2000, seed: int = 0,
                   confidence: float = 0.95, bands: TokenBands = PAPER_BANDS) -> dict[str, Any]:
    """``{file name: polars frame}`` of :data:`SUBTASK_REPORT_FILES`, one
    row per (run, segment), conformed to their schemas.  ``k``: K of pass@K
    (default: each run's own); ``bands``: Table 4's token bands."""
    import functools

    import polars as pl

    from cirrus.report.schema import conform, empty

    out = {}
    for name, table, build, label in ((BY_TOKENS_FILE, "subtask_by_tokens", functools.partial(by_tokens, bands=bands),
                                       "band"),
                                      (BY_REPLY_TYPE_FILE, "subtask_by_reply_type", by_reply_type, "reply_type")):
        rows = []
        for run in runs:
            run_k = k or run.k
            for record in build(run.rows, run_k, n_boot=n_boot, seed=seed, confidence=confidence):
                record[label] = record.pop("segment")
                rows.append({"run_id": run.run_id, "model": run.model, "k": run_k, **record,
                             "confidence": confidence, "n_boot": n_boot, "seed": seed})
        floats = [c for c in rows[0] if c.startswith(ALL_METRICS) or c == "confidence"] if rows else []
        out[name] = (conform(pl.DataFrame(rows, schema_overrides={c: pl.Float64 for c in floats}), table)
                     if rows else empty(table))
    return out


def token_warnings(runs: Sequence[SubtaskRun]) -> list[str]:
    """A warning per run whose ``input_tokens`` count the dialogue only
    (written before they counted the agent's whole input): its token bands
    are not comparable with the paper's or with newer runs'."""
    return [f"subtask run {run.run_id} was written before input_tokens counted the agent's whole input (system "
            f"prompt, knowledge, tools, history); its token bands count the real history + query only: run it again "
            f"to compare its Table 4 with the paper's" for run in runs if run.dialogue_only_tokens]


def write_subtask_tables(run_ids: Sequence[str], workspace: Path, out_dir: Path, bootstrap: int, seed: int, *,
                         k: int | None = None, confidence: float = 0.95,
                         bands: TokenBands = PAPER_BANDS) -> dict[str, Any]:
    """The subtask part of a report into ``out_dir``: the tables of the
    subtask runs ``run_ids`` (none: the subtask files an earlier report left
    there are removed).  Returns ``{"runs", "tables", "files", "warnings"}``."""
    from cirrus.report.comparability import comparability_warnings
    from cirrus.report.writing import write_parquet

    runs = [load_subtask_run(workspace, run_id) for run_id in run_ids]
    tables = subtask_tables(runs, k=k, n_boot=bootstrap, seed=seed, confidence=confidence,
                            bands=bands) if runs else {}
    files = {}
    for name, table in SUBTASK_REPORT_FILES.items():
        if name in tables:
            write_parquet(tables[name], out_dir / name, table)
            files[name] = out_dir / name
        else:
            (out_dir / name).unlink(missing_ok=True)
    warnings = [*comparability_warnings(runs, k), *token_warnings(runs)] if runs else []
    return {"runs": runs, "tables": tables, "files": files, "warnings": warnings, "bands": bands.name}


def subtask_report(run_ids: Sequence[str], workspace: Path, out: Path | None, bootstrap: int, seed: int, *,
                   k: int | None = None, confidence: float = 0.95,
                   bands: TokenBands = PAPER_BANDS) -> dict[str, Any]:
    """``cirrus report`` when every run given is a subtask run: the two
    subtask tables and ``report.json`` (no walk tables: a subtask run is
    never put on the walk leaderboard).  Returns what
    :func:`cirrus.report.command.report_command` returns, with
    ``leaderboard`` None and ``subtask`` the :func:`write_subtask_tables`
    result."""
    from cirrus.files import atomic_writer
    from cirrus.report.writing import HTML_FILE, REPORT_FILE, default_out_dir
    from cirrus.report.schema import FILES, SCHEMA_VERSION

    if len(set(run_ids)) != len(run_ids):
        from cirrus.report.loading import ReportError

        raise ReportError("a run is given twice")
    out_dir = out if out is not None else default_out_dir(workspace, list(run_ids))
    out_dir.mkdir(parents=True, exist_ok=True)
    part = write_subtask_tables(run_ids, workspace, out_dir, bootstrap, seed, k=k, confidence=confidence,
                                bands=bands)
    for name in (*FILES, HTML_FILE):  # walk tables of an earlier report in this folder
        (out_dir / name).unlink(missing_ok=True)
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "workspace": str(workspace), "runs": [], "subtask_runs": subtask_manifest(part["runs"]),
        "k": k, "bootstrap": bootstrap, "seed": seed, "confidence": confidence, "token_bands": bands.name,
        "files": sorted(part["files"]), "warnings": part["warnings"],
    }
    with atomic_writer(out_dir / REPORT_FILE) as handle:
        json.dump(manifest, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    files = {**part["files"], REPORT_FILE: out_dir / REPORT_FILE}
    return {"out_dir": out_dir, "files": files, "leaderboard": None, "intervals": None, "paired": None,
            "noise": None, "warnings": part["warnings"], "subtask": part}


def subtask_manifest(runs: Sequence[SubtaskRun]) -> list[dict[str, Any]]:
    """``subtask_runs`` of ``report.json``."""
    return [{"run_id": run.run_id, "model": run.model, "k": run.k, "dataset": run.dataset,
             "judge": run.summary.get("judge"), "self_judged": run.self_judged} for run in runs]


# --------------------------------------------------------------------------
# What a page or a terminal shows
# --------------------------------------------------------------------------


def fmt_value(value: Any, digits: int = 3) -> str:
    """A table cell of the terminal: ``-`` for no value, a float to ``digits``."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def interval_text(value: Any, low: Any, high: Any, digits: int = 3) -> str:
    """``0.812 [0.70, 0.90]``; ``-`` for no value; the value alone without an interval."""
    if value is None:
        return "-"
    if low is None or high is None:
        return fmt_value(value, digits)
    if digits == 3:
        return f"{value:.3f} [{low:.2f}, {high:.2f}]"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def table_views(tables: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What a page or terminal shows of the subtask tables: per file,
    ``{"title", "columns": [...], "rows": [[str, ...]]}``, every score with
    its interval (``0.812 [0.70, 0.90]``), K named in the pass@K header of
    each row's run.  This is also the HTML section's data
    (:func:`subtask_html_section`)."""
    views = {}
    specs = ((BY_TOKENS_FILE, "band", TOKEN_METRICS,
              "Table 4: subtasks by the agent's input tokens (system prompt, knowledge, tools, real history + query)"),
             (BY_REPLY_TYPE_FILE, "reply_type", REPLY_TYPE_METRICS, "Figure 6: subtasks by reference reply type"))
    for name, label, metrics, title in specs:
        frame = tables.get(name)
        if frame is None:
            continue
        columns = ["run", "model", label.replace("_", " "), "tasks", "subtasks", "errors",
                   *(f"{METRIC_TITLES[m]} [95% CI]" for m in metrics)]
        rows = []
        for row in frame.sort("run_id", "segment_order", maintain_order=True).iter_rows(named=True):
            if not row["n_subtasks"]:
                continue
            cells = [interval_text(row[m], row[f"{m}_low"], row[f"{m}_high"], 1 if m == "amtl" else 3)
                     for m in metrics]
            cells = [c + (f" (K={row['k']})" if m == "pass_at_k" and c != "-" else "") for m, c in zip(metrics, cells)]
            rows.append([row["run_id"], row["model"], str(row[label]), str(row["n_tasks"]), str(row["n_subtasks"]),
                         str(row["errors"]), *cells])
        views[name] = {"title": title, "columns": columns, "rows": rows}
    return views


# --------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------


def subtask_html_section(tables: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the page's subtask section needs: ``{"tables": [table_views
    ...], "figure6": svg or None}``; None when the report has no subtask run."""
    if not tables:
        return None
    views = table_views(tables)
    figure = figure6_svg(tables[BY_REPLY_TYPE_FILE]) if BY_REPLY_TYPE_FILE in tables else None
    return {"tables": [views[name] for name in SUBTASK_REPORT_FILES if name in views], "figure6": figure}


def figure6_svg(frame: Any) -> str | None:
    """Figure 6 as an inline ``<svg>``: per reference reply type, bars of
    pass@1, pass@K and AMTL for every run, with their intervals (the style of
    the page's other charts); None when no reply type has a subtask."""
    present = frame.filter(frame["n_subtasks"] > 0) if len(frame) else frame
    if not len(present):
        return None
    order: list[str] = []
    sizes: dict[str, int] = {}
    for row in present.sort("segment_order").iter_rows(named=True):
        if row["reply_type"] not in order:
            order.append(row["reply_type"])
        sizes[row["reply_type"]] = max(sizes.get(row["reply_type"], 0), int(row["n_subtasks"]))
    runs = list(dict.fromkeys(present["run_id"].to_list()))
    ks = set(present["k"].to_list())
    colors = plot.colors(len(runs))
    labels = {g: f"{g}\n(n={sizes[g]})" for g in order}
    fig = plot.figure(6.0, 2.3 * len(REPLY_TYPE_METRICS) + 0.4)
    axes = fig.subplots(len(REPLY_TYPE_METRICS), 1, squeeze=False)[:, 0]
    for ax, metric in zip(axes, REPLY_TYPE_METRICS):
        values, cis = {}, {}
        for row in present.iter_rows(named=True):
            key = (row["run_id"], labels[row["reply_type"]])
            values[key] = math.nan if row[metric] is None else float(row[metric])
            if row[f"{metric}_low"] is not None and row[f"{metric}_high"] is not None:
                cis[key] = (float(row[f"{metric}_low"]), float(row[f"{metric}_high"]))
        amtl = metric == "amtl"
        top = max([v for v in values.values() if not math.isnan(v)] + [hi for _, hi in cis.values()] + [1.0])
        plot.grouped_bars(ax, [labels[g] for g in order], runs, values, cis, colors,
                      ylim=(0, top * 1.1) if amtl else (0, 1.05))
        title = METRIC_TITLES[metric]
        if metric == "pass_at_k" and len(ks) == 1:
            title = f"pass@{next(iter(ks))}"
        ax.set_ylabel("AMTL (tokens)" if amtl else title)
    plot.legend(fig, runs, colors)
    return plot.svg(fig, "chart-subtask-reply-type")


__all__ = ["ALL_METRICS", "BY_REPLY_TYPE_FILE", "BY_TOKENS_FILE", "FINE_BANDS", "PAPER_BANDS", "REPLY_TYPE_METRICS",
           "SUBTASK_REPORT_FILES", "TOKEN_BANDS", "TOKEN_BAND_EDGES", "TOKEN_BAND_SCHEMES", "TOKEN_METRICS",
           "SubtaskRun", "TokenBands", "token_bands", "token_warnings", "by_reply_type", "by_tokens",
           "figure6_svg", "fmt_value", "group_rows", "interval_text", "load_subtask_run", "split_modes",
           "subtask_html_section", "subtask_manifest", "subtask_report",
           "subtask_tables", "table_views", "task_sums", "token_band", "write_subtask_tables"]
