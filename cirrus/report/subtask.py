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

:func:`subtask_tables` makes the report's two tables of them (polars
frames).  Reading the runs is :mod:`cirrus.report.subtask_runs`'s
(:func:`~cirrus.report.subtask_runs.load_subtask_run`), writing them
:mod:`cirrus.report.command`'s; their rows as a page or terminal shows them
are :func:`cirrus.report.views.subtask.table_views`, Figure 6 is drawn by
:func:`cirrus.report.charts.figure6_svg`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cirrus.evaluate.subtask import needs_tool
from cirrus.metrics import pass_at_k
# re-exported: cirrus.commands._eval_output still imports it from here
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

def subtask_manifest(runs: Sequence[SubtaskRun]) -> list[dict[str, Any]]:
    """``subtask_runs`` of ``report.json``."""
    return [{"run_id": run.run_id, "model": run.model, "k": run.k, "dataset": run.dataset,
             "judge": run.summary.get("judge"), "self_judged": run.self_judged} for run in runs]


__all__ = ["ALL_METRICS", "BY_REPLY_TYPE_FILE", "BY_TOKENS_FILE", "FINE_BANDS", "PAPER_BANDS", "REPLY_TYPE_METRICS",
           "SUBTASK_REPORT_FILES", "TOKEN_BANDS", "TOKEN_BAND_EDGES", "TOKEN_BAND_SCHEMES", "TOKEN_METRICS",
           "SubtaskRun", "TokenBands", "by_reply_type", "by_tokens", "group_rows", "subtask_manifest",
           "subtask_tables", "task_sums", "token_band", "token_bands", "token_warnings"]
