"""The analyst-facing tables, as pure functions of loaded runs.

* :func:`leaderboard`: one row per run;
* :func:`breakdown_by`: one row per (run, group) for a dimension of the
  CirrusBench paper's tables: ``category`` (Table 6), ``checkpoints``
  (Table 5: 1, 2, 3, 4, 5+), ``input_tokens`` (Table 4: 0-8k, 8k-16k, 16k+
  tokens of task context), ``tools`` (Table 3: tasks whose reference used
  tools or not), ``language`` and ``channel`` (the ticket's, from
  ``tickets/tasks.jsonl``) and ``reply_type`` (Figure 6, over checkpoints);
* :func:`failure_breakdown`: one row per (run, reply type, failure
  category): how the failed turns of each run split over the categories of
  ``docs/failures.md``;
* :func:`task_stats`: per (run, group, task) sums and counts of every
  metric, from which every group's metric is sum / count; the bootstrap of
  :mod:`cirrus.report.uncertainty` resamples these rows.

Only ``status = ok`` rows are scored; error rows are counted.  The scores of a
group (SR pass@1 / pass@K, pass^K, ATPR, ALJ, ANEI, AMTL) come from
:func:`cirrus.metrics.dataset_metrics` on the group's rows, so they are the
numbers ``summary.json`` holds for the whole run; everything else is polars
over lazy frames.  Column meanings: :mod:`cirrus.report.schema` and
``docs/report-schema.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from cirrus.metrics import AttemptRow, dataset_metrics, pass_at_k, pass_hat_k
from cirrus.report.loading import Price, ReportError, Run, parse_prices
from cirrus.report.schema import conform
from cirrus.schema import REPLY_TYPES
from cirrus.usage import Usage, UsageLedger, role_of

OVERALL = "overall"
TASK_DIMENSIONS = ("category", "checkpoints", "input_tokens", "tools", "language", "channel")
DIMENSIONS = (*TASK_DIMENSIONS, "reply_type")

TOKEN_EDGES = (8_000, 16_000)  # task input tokens: [0, 8000), [8000, 16000), [16000, inf)
CHECKPOINT_GROUPS = ("1", "2", "3", "4", "5+")
TOKEN_GROUPS = ("0-8k", "8k-16k", "16k+")
TOOL_GROUPS = ("with_tool_calls", "without_tool_calls")
UNKNOWN = "unknown"

# the metrics every task-level group has, in table order
SCORE_METRICS = ("sr_pass1", "sr_pass_at_k", "pass_hat_k", "atpr", "alj", "anei", "amtl")
TURN_METRICS = ("tia", "tsa", "tev", "rr")
HEADLINE_METRICS = (*SCORE_METRICS, *TURN_METRICS)
REPLY_TYPE_METRICS = ("acceptance_rate", "coverage_rate", "reach_rate")

_ATTEMPT_FIELDS = ("task_id", "attempt", "status", "covered", "checkpoints", "accepted_turns", "tpr", "lj", "nei",
                   "mtl", "success")
_OK = pl.col("status") == "ok"


# --------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------


def group_label(dimension: str) -> pl.Expr:
    """The group of a ``Run.tasks`` row for a task-level dimension (or
    ``overall``), as a string expression named ``segment`` (the label of its segment)."""
    if dimension == OVERALL:
        label = pl.lit("all")
    elif dimension == "category":
        label = pl.col("category").fill_null(UNKNOWN)
    elif dimension == "checkpoints":
        label = pl.when(pl.col("checkpoints") >= 5).then(pl.lit("5+")).otherwise(pl.col("checkpoints").cast(pl.Utf8))
    elif dimension == "input_tokens":
        tokens = pl.col("task_input_tokens")
        label = (pl.when(tokens.is_null()).then(pl.lit(UNKNOWN))
                 .when(tokens < TOKEN_EDGES[0]).then(pl.lit(TOKEN_GROUPS[0]))
                 .when(tokens < TOKEN_EDGES[1]).then(pl.lit(TOKEN_GROUPS[1]))
                 .otherwise(pl.lit(TOKEN_GROUPS[2])))
    elif dimension in ("language", "channel"):  # the ticket's metadata (loading.TICKET_DIMENSIONS)
        label = pl.col(dimension).fill_null(UNKNOWN)
    elif dimension == "tools":
        label = (pl.when(pl.col("has_tool_calls").is_null()).then(pl.lit(UNKNOWN))
                 .when(pl.col("has_tool_calls")).then(pl.lit(TOOL_GROUPS[0]))
                 .otherwise(pl.lit(TOOL_GROUPS[1])))
    else:
        raise ValueError(f"unknown task-level dimension {dimension!r}; choose one of {', '.join(TASK_DIMENSIONS)}")
    return label.alias("segment")


def fixed_groups(dimension: str) -> tuple[str, ...]:
    """The groups a dimension always shows (in the paper's order), with zero
    counts when the run has no task in them; others found in the data follow
    in alphabetical order (``unknown`` last)."""
    return {OVERALL: ("all",), "checkpoints": CHECKPOINT_GROUPS, "input_tokens": TOKEN_GROUPS,
            "tools": TOOL_GROUPS, "reply_type": REPLY_TYPES}.get(dimension, ())


def ordered_groups(dimension: str, found: Sequence[str]) -> list[str]:
    fixed = list(fixed_groups(dimension))
    others = sorted((g for g in set(found) if g not in fixed), key=lambda g: (g == UNKNOWN, g))
    return fixed + others


def check_k(k: int | None) -> None:
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise ValueError(f"k must be an int >= 1, got {k!r}")


# --------------------------------------------------------------------------
# Per-task sufficient statistics
# --------------------------------------------------------------------------


def _pass_values(counts: pl.DataFrame, k: int) -> pl.DataFrame:
    """pass@k and pass^k of each distinct (n, c), by the estimators of
    :mod:`cirrus.metrics`; null where n < k."""
    pairs = counts.select("n_ok", "c").unique()
    rows = [{"n_ok": n, "c": c,
             "p_at_k": pass_at_k(n, c, k) if n >= k else None,
             "p_hat_k": pass_hat_k(n, c, k) if n >= k else None}
            for n, c in pairs.iter_rows()]
    return pl.DataFrame(rows, schema={"n_ok": pl.Int64, "c": pl.Int64, "p_at_k": pl.Float64, "p_hat_k": pl.Float64})


def _score_task_stats(run: Run, dimension: str, k: int) -> pl.DataFrame:
    attempts = run.tasks.with_columns(group_label(dimension)).filter(_OK)
    reached = pl.col("covered") >= 1
    has_mtl = pl.col("mtl").is_finite().fill_null(False)  # dataset_metrics skips a missing (or NaN) MTL
    per_task = (attempts.group_by("segment", "task_id").agg(
        pl.len().cast(pl.Int64).alias("n_ok"),
        pl.col("success").cast(pl.Int64).sum().alias("c"),
        pl.col("tpr").sum().alias("atpr__sum"),
        pl.len().cast(pl.Float64).alias("atpr__n"),
        pl.col("success").cast(pl.Float64).sum().alias("sr_pass1__sum"),
        pl.len().cast(pl.Float64).alias("sr_pass1__n"),
        pl.col("lj").filter(reached).cast(pl.Float64).sum().alias("alj__sum"),
        reached.cast(pl.Float64).sum().alias("alj__n"),
        pl.col("nei").filter(reached).sum().alias("anei__sum"),
        reached.cast(pl.Float64).sum().alias("anei__n"),
        pl.col("mtl").filter(reached & has_mtl).sum().alias("amtl__sum"),
        (reached & has_mtl).cast(pl.Float64).sum().alias("amtl__n"),
    ).collect())
    passes = _pass_values(per_task, k)
    per_task = per_task.join(passes, on=["n_ok", "c"], how="left").with_columns(
        pl.col("p_at_k").fill_null(0.0).alias("sr_pass_at_k__sum"),
        pl.col("p_at_k").is_not_null().cast(pl.Float64).alias("sr_pass_at_k__n"),
        pl.col("p_hat_k").fill_null(0.0).alias("pass_hat_k__sum"),
        pl.col("p_hat_k").is_not_null().cast(pl.Float64).alias("pass_hat_k__n"),
    ).drop("p_at_k", "p_hat_k")
    turns = (run.checkpoints.filter(_OK)
             .join(attempts.select("task_id", "attempt", "segment"), on=["task_id", "attempt"], how="inner")
             .group_by("segment", "task_id")
             .agg(*(e for m in TURN_METRICS for e in (
                 pl.col(m).cast(pl.Float64).sum().alias(f"{m}__sum"),
                 pl.col(m).is_not_null().cast(pl.Float64).sum().alias(f"{m}__n"))))
             .collect())
    per_task = per_task.join(turns, on=["segment", "task_id"], how="left").with_columns(
        pl.col(f"{m}__{part}").fill_null(0.0) for m in TURN_METRICS for part in ("sum", "n"))
    return per_task


def _reply_type_task_stats(run: Run) -> pl.DataFrame:
    ok = run.tasks.filter(_OK).select("task_id", "attempt", "covered")
    horizon = run.checkpoints.group_by("task_id", "attempt").agg(pl.col("checkpoint").max().alias("max_judged"))
    opportunities = (ok.join(run.reference, on="task_id", how="inner")
                     .join(horizon, on=["task_id", "attempt"], how="left")
                     .with_columns(
                         (pl.col("checkpoint") <= pl.col("covered")).alias("is_covered"),
                         (pl.col("checkpoint") <= pl.max_horizontal("covered", pl.col("max_judged").fill_null(0)))
                         .alias("is_reached"))
                     .group_by(pl.col("ref_reply_type").fill_null(UNKNOWN).alias("segment"), "task_id")
                     .agg(pl.len().cast(pl.Float64).alias("n_reference"),
                          pl.col("is_covered").cast(pl.Float64).sum().alias("n_covered"),
                          pl.col("is_reached").cast(pl.Float64).sum().alias("n_reached")))
    accepted = pl.col("accepted").fill_null(False)
    judged = (run.checkpoints.filter(_OK)
              .group_by(pl.col("reply_type").fill_null(UNKNOWN).alias("segment"), "task_id")
              .agg(pl.len().cast(pl.Float64).alias("n_judged"),
                   accepted.cast(pl.Float64).sum().alias("n_accepted"),
                   *(e for m in TURN_METRICS for e in (
                       pl.col(m).cast(pl.Float64).sum().alias(f"{m}__sum"),
                       pl.col(m).is_not_null().cast(pl.Float64).sum().alias(f"{m}__n"))),
                   pl.col("stl").filter(accepted).cast(pl.Float64).sum().alias("avg_stl__sum"),
                   accepted.cast(pl.Float64).sum().alias("avg_stl__n")))
    stats = opportunities.join(judged, on=["segment", "task_id"], how="full", coalesce=True).collect()
    numeric = [c for c in stats.columns if c not in ("segment", "task_id")]
    return stats.with_columns(pl.col(numeric).fill_null(0.0)).with_columns(
        pl.col("n_accepted").alias("acceptance_rate__sum"), pl.col("n_judged").alias("acceptance_rate__n"),
        pl.col("n_covered").alias("coverage_rate__sum"), pl.col("n_reference").alias("coverage_rate__n"),
        pl.col("n_reached").alias("reach_rate__sum"), pl.col("n_reference").alias("reach_rate__n"),
    )


def task_stats(runs: Sequence[Run], dimension: str = OVERALL, k: int | None = None) -> pl.DataFrame:
    """One row per (run, group, task) with at least one ok attempt:
    ``run_id``, ``segment``, ``task_id`` and, for every metric ``m`` of the
    dimension, ``m__sum`` and ``m__n`` such that the group's metric is
    ``sum(m__sum) / sum(m__n)`` over its tasks (undefined when the count is
    0).  For a task-level dimension (or ``overall``) the metrics are
    :data:`HEADLINE_METRICS`; for ``reply_type`` :data:`REPLY_TYPE_METRICS`,
    the turn metrics and ``avg_stl``.

    * ATPR, SR pass@1: sum of TPR / success over the task's ok attempts,
      count = its ok attempts;
    * ALJ, ANEI (AMTL): sums over the ok attempts with covered >= 1 (and an
      MTL), count = those attempts;
    * SR pass@K, pass^K: the task's estimator value (:func:`pass_at_k`,
      :func:`pass_hat_k`), count 1, when it has n >= K ok attempts; else 0, 0;
    * TIA, TSA, TEV, RR: sum of true verdicts over the judged turns of the
      task's ok attempts, count = turns where the verdict is not null.

    ``k``: K of pass@K (default: each run's own).
    """
    check_k(k)
    frames = []
    for run in runs:
        if dimension == "reply_type":
            stats = _reply_type_task_stats(run)
        else:
            stats = _score_task_stats(run, dimension, k or run.k)
        frames.append(stats.with_columns(pl.lit(run.run_id).alias("run_id")))
    frame = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    if frame.is_empty() and not frame.columns:
        return frame
    first = ["run_id", "segment", "task_id"]
    return frame.select(*first, *(c for c in frame.columns if c not in first)).sort(first)


def ratio(metric: str) -> pl.Expr:
    """``sum(metric__sum) / sum(metric__n)`` as an aggregation (null when the
    count is 0)."""
    total = pl.col(f"{metric}__n").sum()
    return pl.when(total > 0).then(pl.col(f"{metric}__sum").sum() / total).otherwise(None).alias(metric)


# --------------------------------------------------------------------------
# Task-level groups (overall, category, checkpoints, input_tokens, tools)
# --------------------------------------------------------------------------


def _scores(run: Run, attempts: pl.DataFrame, k: int) -> dict[str, Any]:
    rows = [AttemptRow(**row) for row in attempts.select(_ATTEMPT_FIELDS).iter_rows(named=True)]
    try:
        metrics = dataset_metrics(rows, k)
    except ValueError as exc:
        raise ReportError(f"{run.directory / 'tasks.parquet'}: {exc}") from exc
    return {"n_tasks": metrics.n_tasks, "n_attempts": len(rows), "n_ok": metrics.n_ok, "errors": metrics.errors,
            "n_tasks_k": metrics.n_tasks_k, "sr_pass1": metrics.sr_pass1, "sr_pass_at_k": metrics.pass_at_k,
            "pass_hat_k": metrics.pass_hat_k, "atpr": metrics.atpr, "alj": metrics.alj, "anei": metrics.anei,
            "amtl": metrics.amtl}


_SCORES_SCHEMA = {"segment": pl.Utf8, "segment_order": pl.Int64, "n_tasks": pl.Int64, "n_attempts": pl.Int64,
                  "n_ok": pl.Int64, "errors": pl.Int64, "n_tasks_k": pl.Int64, **{m: pl.Float64 for m in SCORE_METRICS}}


def _task_groups(run: Run, dimension: str, k: int) -> pl.DataFrame:
    """The task-level columns of one run's groups (schema ``breakdown``
    without ``schema_version``), plus the usage sums the leaderboard needs."""
    attempts = run.tasks.with_columns(group_label(dimension))
    collected = attempts.collect()
    parts = {key[0]: frame for key, frame in collected.partition_by("segment", as_dict=True).items()}
    groups = ordered_groups(dimension, list(parts))
    empty = collected.clear()
    rows = [{"segment": g, "segment_order": i, **_scores(run, parts.get(g, empty), k)} for i, g in enumerate(groups)]
    scores = pl.DataFrame(rows, schema=_SCORES_SCHEMA)
    usage = (attempts.filter(_OK).group_by("segment").agg(
        pl.col("input_tokens").mean().alias("avg_input_tokens"),
        pl.col("output_tokens").mean().alias("avg_output_tokens"),
        pl.col("wall_s").mean().alias("avg_wall_s"),
        pl.col("input_tokens").sum().alias("total_input_tokens"),
        pl.col("output_tokens").sum().alias("total_output_tokens"),
        pl.col("wall_s").sum().alias("total_wall_s"),
    ))
    turns = (run.checkpoints.filter(_OK)
             .join(attempts.select("task_id", "attempt", "segment"), on=["task_id", "attempt"], how="inner")
             .group_by("segment").agg(*(pl.col(m).cast(pl.Float64).mean().alias(m) for m in (*TURN_METRICS, "fluent")),
                                    pl.len().cast(pl.Int64).alias("n_turns")))
    joined = (scores.lazy().join(usage, on="segment", how="left").join(turns, on="segment", how="left")
              .with_columns(pl.col("n_turns").fill_null(0), pl.col("total_input_tokens").fill_null(0),
                            pl.col("total_output_tokens").fill_null(0), pl.col("total_wall_s").fill_null(0.0))
              .sort("segment_order").collect())
    return joined.with_columns(pl.lit(run.run_id).alias("run_id"), pl.lit(run.model).alias("model"),
                               pl.lit(dimension).alias("dimension"), pl.lit(k, dtype=pl.Int64).alias("k"))


def breakdown_by(runs: Sequence[Run], dimension: str, k: int | None = None) -> pl.DataFrame:
    """One row per (run, group) of ``dimension`` (one of :data:`DIMENSIONS`),
    runs in the given order, groups in :func:`fixed_groups` order then the
    others; the columns of schema ``breakdown`` (``breakdown_reply_type`` for
    ``reply_type``).

    Groups of the task-level dimensions:

    * ``category``: the task's service category (``unknown`` when it has none);
    * ``checkpoints``: the task's number of checkpoints K: ``1`` .. ``4``, ``5+``;
    * ``input_tokens``: ``stats.input_tokens`` of the task (its context
      before the agent answers): ``0-8k`` (< 8,000), ``8k-16k`` (< 16,000),
      ``16k+``;
    * ``tools``: ``with_tool_calls`` when any reference checkpoint of the
      task has a tool call, else ``without_tool_calls``;
    * ``language``, ``channel``: the ticket's ``language`` and ``channel``
      of ``tickets/tasks.jsonl`` (``unknown`` when it has none).

    ``reply_type`` groups checkpoints, not tasks, by their reference reply
    type; see :mod:`cirrus.report.schema` for its columns.

    ``k``: K of pass@K (default: each run's own).
    """
    check_k(k)
    if dimension == "reply_type":
        return _reply_type_breakdown(runs)
    if dimension not in TASK_DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; choose one of {', '.join(DIMENSIONS)}")
    frames = [_task_groups(run, dimension, k or run.k) for run in runs]
    frame = pl.concat(frames, how="diagonal_relaxed")
    return conform(frame.drop("total_input_tokens", "total_output_tokens", "total_wall_s"), "breakdown")


def _reply_type_breakdown(runs: Sequence[Run]) -> pl.DataFrame:
    frames = []
    for run in runs:
        stats = _reply_type_task_stats(run)
        sums = ("n_reference", "n_reached", "n_covered", "n_judged", "n_accepted")
        grouped = stats.group_by("segment").agg(
            *(pl.col(c).sum().cast(pl.Int64) for c in sums),
            *(ratio(m) for m in (*REPLY_TYPE_METRICS, *TURN_METRICS, "avg_stl")))
        # tasks and attempts per type, error attempts included
        types = run.reference.select(pl.col("ref_reply_type").fill_null(UNKNOWN).alias("segment"), "task_id").unique()
        attempts = (run.tasks.select("task_id", "status").join(types, on="task_id", how="inner")
                    .group_by("segment").agg(pl.col("task_id").n_unique().cast(pl.Int64).alias("n_tasks"),
                                           _OK.sum().cast(pl.Int64).alias("n_ok"),
                                           (~_OK).sum().cast(pl.Int64).alias("errors"))
                    .collect())
        found = set(grouped["segment"].to_list()) | set(attempts["segment"].to_list())
        order = pl.DataFrame({"segment": ordered_groups("reply_type", list(found))}).with_row_index("segment_order")
        frame = (order.join(attempts, on="segment", how="left").join(grouped, on="segment", how="left")
                 .with_columns(pl.col(c).fill_null(0) for c in ("n_tasks", "n_ok", "errors", *sums))
                 .with_columns(pl.lit(run.run_id).alias("run_id"), pl.lit(run.model).alias("model"),
                               pl.lit("reply_type").alias("dimension")))
        frames.append(frame.sort("segment_order"))
    return conform(pl.concat(frames, how="diagonal_relaxed"), "breakdown_reply_type")


# --------------------------------------------------------------------------
# Failure categories (docs/failures.md)
# --------------------------------------------------------------------------

ALL_REPLY_TYPES = "all"
UNCLASSIFIED = "unclassified"


def failure_breakdown(runs: Sequence[Run]) -> pl.DataFrame:
    """One row per (run, reply type, failure category) (schema ``failures``).

    The failed turns of a run are its judged turns of ok attempts that were
    rejected, or accepted with a fluency No: the turns the walks ended on
    for a reason other than reaching the end.  ``reply_type`` is ``all``
    (every failed turn of the run), then each reference reply type in the
    paper's order (others found follow); ``failure`` every category of
    :data:`cirrus.evaluate.failures.FAILURE_NAMES` in precedence order (zero
    counts included), then ``unclassified`` when the run has failed turns
    without a category (runs written before the ``failure`` column).
    ``share`` = count / n_failed of the row's run and reply type."""
    from collections import Counter

    from cirrus.evaluate.failures import FAILURE_NAMES

    rows: list[dict[str, Any]] = []
    for run in runs:
        accepted = pl.col("accepted").fill_null(False)
        failed = (run.checkpoints.filter(_OK)
                  .filter(~accepted | (accepted & (pl.col("fluent") == False)))  # noqa: E712  (null is not False)
                  .select(pl.col("reply_type").fill_null(UNKNOWN), pl.col("failure").fill_null(UNCLASSIFIED))
                  .collect())
        counts: Counter[tuple[str, str]] = Counter()
        for reply_type, failure in failed.iter_rows():
            counts[(ALL_REPLY_TYPES, failure)] += 1
            counts[(reply_type, failure)] += 1
        categories = list(FAILURE_NAMES)
        categories += sorted({f for _, f in counts if f not in FAILURE_NAMES}, key=lambda f: (f == UNCLASSIFIED, f))
        segments = [ALL_REPLY_TYPES, *ordered_groups("reply_type", sorted({t for t, _ in counts} - {ALL_REPLY_TYPES}))]
        for segment in segments:
            total = sum(counts[(segment, category)] for category in categories)
            for order, category in enumerate(categories):
                count = counts[(segment, category)]
                rows.append({"run_id": run.run_id, "model": run.model, "reply_type": segment, "failure": category,
                             "failure_order": order, "count": count, "n_failed": total,
                             "share": count / total if total else None})
    schema = {"run_id": pl.Utf8, "model": pl.Utf8, "reply_type": pl.Utf8, "failure": pl.Utf8,
              "failure_order": pl.Int64, "count": pl.Int64, "n_failed": pl.Int64, "share": pl.Float64}
    return conform(pl.DataFrame(rows, schema=schema), "failures")


# --------------------------------------------------------------------------
# Leaderboard
# --------------------------------------------------------------------------


def _price(run: Run, prices: Mapping[str, Price]) -> Price | None:
    if run.model in prices:
        return prices[run.model]
    role = run.config.get("fingerprint", {}).get("agent_role")
    model = role.get("model") if isinstance(role, dict) else None
    return prices.get(model) if isinstance(model, str) else None


COST_ROLES = ("agent", "judge", "fluency")


@dataclass(frozen=True)
class RunCost:
    """What a run cost, as the leaderboard shows it.

    ``roles``: cost per role of :data:`COST_ROLES` (0.0 for a role that sent
    no tokens, None when unknown); ``total``: every role of the run, None
    when any role's cost is unknown (a partial sum would flatter the run);
    ``currency``; ``source``: ``summary`` (``cost`` of ``summary.json``),
    ``repriced`` (some role priced here from ``usage`` with the report's
    prices), ``agent_tokens`` (a run written before ``usage`` existed: the
    agent's tokens of the ok attempts at the agent's price), or ``none``;
    ``unpriced``: ``(role, model)`` of each role left unknown (model None
    when the run does not name it); ``problem``: why re-pricing was not
    possible, if it was not."""

    roles: dict[str, float | None]
    total: float | None
    currency: str | None
    source: str
    unpriced: tuple[tuple[str, str | None], ...] = ()
    problem: str | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def run_cost(summary: Mapping[str, Any], models: Mapping[str, str], prices: Mapping[str, Price], *,
             agent_price: Price | None = None, agent_tokens: tuple[int, int] = (0, 0),
             client_usage: Mapping[str, Any] | None = None) -> RunCost:
    """The cost of a run from its ``summary.json`` (pure).

    With ``usage`` in the summary: each role's ``cost`` as recorded; a role
    recorded null is priced again from its ``usage`` with ``prices`` when
    they now know its model (``models``: client -> model, see
    :func:`cirrus.report.loading.run_models`; a judge panel of different
    models needs ``client_usage``, the usage per member); a role with no
    tokens costs 0.  Without ``usage`` (runs written before it): the
    agent's ``agent_tokens`` (input, output of the ok attempts) at
    ``agent_price``, the other roles unknown."""
    usage = summary.get("usage")
    if not isinstance(usage, Mapping):
        if agent_price is None:
            return RunCost({"agent": None, "judge": None, "fluency": None}, None, None, "none",
                           (("agent", models.get("agent")),))
        cost = agent_price.cost(*agent_tokens)
        return RunCost({"agent": cost, "judge": None, "fluency": None}, cost, agent_price.currency, "agent_tokens")
    ledger = UsageLedger.from_dict(usage)
    by_role = ledger.by_role()
    recorded = summary.get("cost") if isinstance(summary.get("cost"), Mapping) else {}
    currency = recorded.get("currency") if isinstance(recorded.get("currency"), str) else None
    roles: dict[str, float | None] = {}
    for role in dict.fromkeys((*COST_ROLES, *by_role)):
        spent = by_role.get(role)
        value = _number(recorded.get(role))
        if value is None and (spent is None or spent.input_tokens + spent.output_tokens == 0):
            value = 0.0  # no token sent: nothing to pay, priced or not
        roles[role] = value
    source, problem = "summary", None
    missing = [role for role, value in roles.items() if value is None]
    if missing and prices:
        priced = _reprice(missing, ledger, models, prices, client_usage)
        if isinstance(priced, str):
            problem = priced
        elif priced["currency"] is not None and currency not in (None, priced["currency"]):
            problem = (f"the run's cost is in {currency}, the report's prices in {priced['currency']}: "
                       "its unpriced roles are left unknown")
        else:
            for role in missing:
                if priced.get(role) is not None:
                    roles[role] = float(priced[role])
                    source = "repriced"
            currency = currency or priced["currency"]
    values = list(roles.values())
    total = math.fsum(v for v in values if v is not None) if all(v is not None for v in values) else None
    unpriced = tuple((role, _client_model(role, models)) for role, value in roles.items() if value is None)
    return RunCost(roles, total, currency, source, unpriced, problem)


def _client_model(role: str, models: Mapping[str, str]) -> str | None:
    if role in models:
        return models[role]
    members = sorted({m for client, m in models.items() if role_of(client) == role and client != role})
    return ",".join(members) if members else None


def _reprice(roles: Sequence[str], ledger: UsageLedger, models: Mapping[str, str], prices: Mapping[str, Price],
             client_usage: Mapping[str, Any] | None) -> dict[str, Any] | str:
    """:func:`cirrus.pricing.run_cost` of ``roles`` only; a role whose
    members have their own models (a judge panel) is priced from
    ``client_usage`` (usage per member).  A string says why it cannot be."""
    from cirrus.pricing import PriceError
    from cirrus.pricing import run_cost as price_ledger

    part = UsageLedger()
    per_client = UsageLedger.from_dict(client_usage) if client_usage else None
    for role in roles:
        if role in models or per_client is None:
            part.add(role, ledger.clients.get(role, Usage()))
            continue
        for client, usage in per_client.clients.items():
            if role_of(client) == role:
                part.add(client, usage)
    try:
        return price_ledger(part, models, prices)
    except PriceError as exc:
        return str(exc)


def _successes(run: Run) -> int:
    """Successful (task, attempt) pairs: ok rows with ``success``."""
    return int(run.tasks.filter(_OK & pl.col("success").fill_null(False)).select(pl.len()).collect().item())


def leaderboard(runs: Sequence[Run], k: int | None = None,
                prices: Mapping[str, Price | Mapping[str, Any]] | None = None) -> pl.DataFrame:
    """One row per run, in the given order (schema ``leaderboard``): the
    run's scores over all its tasks (as in its ``summary.json``), turn
    metrics, usage, and cost.

    Cost (:func:`run_cost`): per role (``cost_agent``, ``cost_judge``,
    ``cost_fluency``) and ``cost_total`` from ``summary.json``'s ``cost``,
    a role it left null priced again from its ``usage`` where ``prices``
    (``{model: Price}`` or the ``[prices]`` table of ``cirrus.toml`` as a
    dict) knows the role's model (``run.json``'s fingerprint).  Runs written
    before ``usage`` existed: the agent's tokens of the ok attempts at the
    price of ``summary.json``'s ``model`` (else the agent role's ``model``
    in ``run.json``), the judge and fluency costs null.  ``price_*``: the
    agent's price where ``prices`` has it.

    ``k``: K of pass@K (default: each run's own).
    """
    check_k(k)
    parsed = parse_prices(dict(prices or {}))
    rows = []
    for run in runs:
        frame = _task_groups(run, OVERALL, k or run.k)
        price = _price(run, parsed)
        row = frame.row(0, named=True)
        cost = cost_of(run, parsed, row)
        total = cost.total
        successes = _successes(run)
        rows.append(frame.drop("dimension", "segment", "segment_order").with_columns(
            pl.lit(run.summary.get("judge"), dtype=pl.Utf8).alias("judge"),
            pl.lit(run.summary.get("fluency"), dtype=pl.Utf8).alias("fluency_checker"),
            pl.lit(run.dataset, dtype=pl.Utf8).alias("dataset"),
            pl.lit(price.input_per_mtok if price else None, dtype=pl.Float64).alias("price_input_per_mtok"),
            pl.lit(price.output_per_mtok if price else None, dtype=pl.Float64).alias("price_output_per_mtok"),
            pl.lit(cost.currency, dtype=pl.Utf8).alias("currency"),
            pl.lit(total, dtype=pl.Float64).alias("cost_total"),
            pl.lit(total / row["n_ok"] if total is not None and row["n_ok"] else None,
                   dtype=pl.Float64).alias("cost_per_attempt"),
            *(pl.lit(cost.roles.get(role), dtype=pl.Float64).alias(f"cost_{role}") for role in COST_ROLES),
            pl.lit(total / successes if total is not None and successes else None,
                   dtype=pl.Float64).alias("cost_per_success"),
            pl.lit(run.config.get("agent_label"), dtype=pl.Utf8).alias("agent_label"),
        ))
    return conform(pl.concat(rows, how="diagonal_relaxed"), "leaderboard")


def cost_of(run: Run, prices: Mapping[str, Price], row: Mapping[str, Any] | None = None) -> RunCost:
    """:func:`run_cost` of a loaded run (``row``: its overall leaderboard
    group, for the agent's tokens of a run without ``usage``); reads the
    run's ``attempts.jsonl`` only for a judge panel of different models
    that needs pricing here."""
    from cirrus.report.loading import attempt_usage, run_models

    if row is None:
        row = _task_groups(run, OVERALL, run.k).row(0, named=True)
    models = run_models(run.config)
    if "agent" not in models and not run.model.startswith("baseline:"):
        models["agent"] = run.model
    agent_tokens = (int(row["total_input_tokens"] or 0), int(row["total_output_tokens"] or 0))
    cost = run_cost(run.summary, models, prices, agent_price=_price(run, prices), agent_tokens=agent_tokens)
    if cost.problem is None and any(role == "judge" for role, _ in cost.unpriced) and "judge" not in models \
            and any(role_of(client) == "judge" for client in models) and prices:
        cost = run_cost(run.summary, models, prices, agent_price=_price(run, prices), agent_tokens=agent_tokens,
                        client_usage=attempt_usage(run))
    return cost


def summary_mismatches(run: Run, row: Mapping[str, Any], tolerance: float = 1e-9) -> list[str]:
    """Where a leaderboard ``row`` computed with the run's own K disagrees
    with its ``summary.json`` (empty when they agree): a sign that the run's
    files were changed after it finished."""
    summary = run.summary
    expected = {"n_tasks": summary.get("n_tasks"), "errors": summary.get("errors"), "atpr": summary.get("atpr"),
                "alj": summary.get("alj"), "anei": summary.get("anei"), "amtl": summary.get("amtl"),
                "sr_pass1": (summary.get("sr") or {}).get("pass@1")}
    if row["k"] != 1:
        expected["sr_pass_at_k"] = (summary.get("sr") or {}).get(f"pass@{row['k']}")
    expected["pass_hat_k"] = summary.get(f"pass^{row['k']}")
    problems = []
    for name, want in expected.items():
        got = row[name]
        if want is None and got is None:
            continue
        if want is None or got is None or abs(float(want) - float(got)) > tolerance:
            problems.append(f"{name}: summary.json has {want!r}, the run's rows give {got!r}")
    return problems
