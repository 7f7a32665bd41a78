"""The schema of the report tables: one place for column names, types and
meanings.  ``docs/report-schema.md`` is generated from it
(``python -m cirrus.report.schema docs/report-schema.md`` rewrites the part
between the markers), and :func:`conform` makes every table written match it
exactly: the documented columns, in the documented order, with the
documented types, and ``schema_version`` first.

Bump :data:`SCHEMA_VERSION` when a column is removed, renamed, retyped or
changes meaning; adding a column at the end of a table is backward compatible
and keeps the version.  Version 2 renamed ``group`` / ``group_order`` (``group``
is an SQL reserved word) to ``segment`` / ``segment_order``; the ``noise``
table, ``paired``'s ``mdd`` / ``within_noise`` / ``test_*`` / ``judge_sd`` /
``verdict`` and the ``language`` / ``channel`` breakdowns were added later
within version 2.

The per-run tables a run writes (``reports/<run_id>/tasks.parquet``,
``checkpoints.parquet``, and a rescore's ``rescore.parquet``) are documented
here too (:data:`RUN_TABLES`), with the types the run store writes them with;
they carry no ``schema_version`` column (their columns follow the contract and
only grow).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl

SCHEMA_VERSION = 2

BEGIN_MARK = "<!-- BEGIN GENERATED: python -m cirrus.report.schema docs/report-schema.md -->"
END_MARK = "<!-- END GENERATED -->"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType
    meaning: str


I64, F64, STR, BOOL = pl.Int64(), pl.Float64(), pl.Utf8(), pl.Boolean()

_VERSION = Column("schema_version", I64, f"Version of this schema ({SCHEMA_VERSION}); the same in every row.")
_RUN = Column("run_id", STR, "The run: `reports/<run_id>/` of the workspace.")
_MODEL = Column("model", STR, "The agent under test (`model` of the run's `summary.json`).")
_K = Column("k", I64, "K of pass@K and pass^K in this row (the run's `--pass-k` unless `cirrus report --k` overrides it).")
_DIMENSION = Column("dimension", STR, "What the rows are grouped by: `category`, `checkpoints`, `input_tokens`, `tools`, `language`, `channel` (the ticket's language and channel from `tickets/tasks.jsonl`; null ones are `unknown`) or `reply_type` (`overall` in intervals: the whole run).")
_SEGMENT = Column("segment", STR, "The segment (group of rows) of the dimension: its label (see the dimension's section); `all` for `overall`. Named `group` before schema version 2.")
_ORDER = Column("segment_order", I64, "Position of the segment in the paper's order (0-based); sort by it to print the table. Named `group_order` before schema version 2.")

_COUNTS = (
    Column("n_tasks", I64, "Distinct tasks with any row in the segment (the leaderboard: the run), error rows included."),
    Column("n_attempts", I64, "(task, attempt) rows in the segment, error rows included."),
    Column("n_ok", I64, "Rows with `status = ok`: the rows scored."),
    Column("errors", I64, "Rows with `status = error` (infrastructure failures): counted, never scored."),
    Column("n_tasks_k", I64, "Tasks with at least K ok attempts: those that enter pass@K and pass^K."),
)
_SCORES = (
    Column("sr_pass1", F64, "SR pass@1: mean `success` over ok rows."),
    Column("sr_pass_at_k", F64, "SR pass@K: mean over tasks with n >= K ok attempts of the unbiased estimator 1 - C(n-c, K)/C(n, K) (c successes)."),
    Column("pass_hat_k", F64, "pass^K: mean over the same tasks of C(c, K)/C(n, K)."),
    Column("atpr", F64, "ATPR: mean TPR (covered / K) over ok rows."),
    Column("alj", F64, "ALJ: mean LJ (covered - accepted turns) over ok rows with covered >= 1."),
    Column("anei", F64, "ANEI: mean NEI over ok rows with covered >= 1."),
    Column("amtl", F64, "AMTL: mean MTL (mean output tokens of the accepted turns) over ok rows with covered >= 1."),
)
_TURNS = (
    Column("tia", F64, "Mean TIA over the judged agent turns of ok rows (`checkpoints.parquet`): the turn called a tool exactly when the reference did."),
    Column("tsa", F64, "Mean TSA over judged turns whose checkpoint has reference tool calls (TSA is null elsewhere)."),
    Column("tev", F64, "Mean TEV over judged turns whose checkpoint has reference tool calls (TEV is null elsewhere)."),
    Column("rr", F64, "Mean RR over judged turns: the judge found the reference reply's key information."),
    Column("fluent", F64, "Share of fluency checks passed (turns where none was asked are left out)."),
    Column("n_turns", I64, "Judged agent turns of ok rows (rows of `checkpoints.parquet`)."),
)
_USAGE = (
    Column("avg_input_tokens", F64, "Mean agent input tokens per ok attempt (all model calls of the walk, from the API's usage)."),
    Column("avg_output_tokens", F64, "Mean agent output tokens per ok attempt."),
    Column("avg_wall_s", F64, "Mean wall time of an ok attempt, seconds."),
)

_TASK_GROUP_COLUMNS = (*_COUNTS, *_SCORES, *_TURNS, *_USAGE)

TABLES: dict[str, tuple[Column, ...]] = {
    "leaderboard": (
        _VERSION, _RUN, _MODEL,
        Column("judge", STR, "The coverage judge (`judge` of `summary.json`): scores are comparable across runs with the same judge."),
        Column("fluency_checker", STR, "The fluency checker (`fluency` of `summary.json`)."),
        Column("dataset", STR, "Hash of the tasks the run was started on (`fingerprint.dataset` of `run.json`): runs with the same hash ran the same tasks."),
        _K, *_TASK_GROUP_COLUMNS,
        Column("total_input_tokens", I64, "Agent input tokens summed over ok attempts."),
        Column("total_output_tokens", I64, "Agent output tokens summed over ok attempts."),
        Column("total_wall_s", F64, "Wall time summed over ok attempts, seconds (attempts run concurrently, so this is more than the run took)."),
        Column("price_input_per_mtok", F64, "The agent's price of a million input tokens from the `[prices.\"<model>\"]` table of `cirrus.toml` the report read; null when it has no price for the agent's model."),
        Column("price_output_per_mtok", F64, "The agent's price of a million output tokens; null when unknown."),
        Column("currency", STR, "Currency of the cost columns: `cost.currency` of `summary.json`, else of the prices the report priced with (default `USD`); null when nothing is priced."),
        Column("cost_total", F64, "What the whole run cost, every role (agent, judge, fluency), error attempts included: the sum of `cost_agent`, `cost_judge` and `cost_fluency`; null when any of them is unknown (a partial sum would flatter the run). Runs written before `summary.json` had `usage`: the agent's tokens of the ok attempts at its price, total_input_tokens / 1e6 * price_input_per_mtok + total_output_tokens / 1e6 * price_output_per_mtok (judge and fluency not included); null when unknown."),
        Column("cost_per_attempt", F64, "cost_total / n_ok; null when unknown or no attempt is ok."),
        Column("cost_agent", F64, "The agent's cost: `cost.agent` of `summary.json`; when that is null, priced again from `usage.agent` with the report's prices if they know the agent's model (`fingerprint.agent_role.model` of `run.json`); 0 when the agent sent no tokens (offline baselines). Runs without `usage`: as cost_total. Null when unknown. Added after version 2 was released (same version)."),
        Column("cost_judge", F64, "The coverage judge's cost, as cost_agent (`cost.judge`, `usage.judge`, `fingerprint.judge_role.model`; a judge panel of different models is priced per member from the `usage` of `attempts.jsonl`); 0 for the local judge; null for runs without `usage`. Added after version 2 was released (same version)."),
        Column("cost_fluency", F64, "The fluency checker's cost, as cost_agent (`cost.fluency`, `usage.fluency`, `fingerprint.fluency_role.model`); null for runs without `usage`. Added after version 2 was released (same version)."),
        Column("cost_per_success", F64, "cost_total / successful (task, attempt) pairs (ok rows with `success`): what one solved conversation cost; null when unknown or nothing succeeded. Added after version 2 was released (same version)."),
        Column("agent_label", STR, "Your agent's version (`cirrus eval --agent-label`, or `label` of `[agent]`; `agent_label` of `run.json`); null when not given. Added after version 2 was released (same version)."),
    ),
    "breakdown": (_VERSION, _RUN, _MODEL, _DIMENSION, _SEGMENT, _ORDER, _K, *_TASK_GROUP_COLUMNS),
    "breakdown_reply_type": (
        _VERSION, _RUN, _MODEL, _DIMENSION,
        Column("segment", STR, "The reference reply type of the checkpoint: Solution, Standard, Inquire, Clarify, Appease (others, from another annotator, follow). Named `group` before schema version 2."),
        _ORDER,
        Column("n_tasks", I64, "Distinct tasks of the run with at least one checkpoint of this type."),
        Column("n_ok", I64, "Ok attempts of those tasks."),
        Column("errors", I64, "Error attempts of those tasks (not scored)."),
        Column("n_reference", I64, "Reference checkpoints of this type, counted once per ok attempt: the opportunities."),
        Column("n_reached", I64, "Of those, the checkpoints the walk reached: covered (also by a jump) or judged as the turn's target."),
        Column("n_covered", I64, "Of those, the checkpoints covered (index <= the attempt's `covered`)."),
        Column("n_judged", I64, "Agent turns judged against a checkpoint of this type (rows of `checkpoints.parquet`)."),
        Column("n_accepted", I64, "Of those turns, the ones accepted."),
        Column("acceptance_rate", F64, "n_accepted / n_judged: the share of turns accepted when the walk asked a checkpoint of this type (Figure 6)."),
        Column("coverage_rate", F64, "n_covered / n_reference: the TPR of this type's checkpoints."),
        Column("reach_rate", F64, "n_reached / n_reference: how far walks got, the share of this type's checkpoints the walk reached at all."),
        Column("tia", F64, "Mean TIA over the judged turns of this type."),
        Column("tsa", F64, "Mean TSA over the judged turns of this type with reference tool calls."),
        Column("tev", F64, "Mean TEV over the judged turns of this type with reference tool calls."),
        Column("rr", F64, "Mean RR over the judged turns of this type."),
        Column("avg_stl", F64, "Mean STL (output tokens) of the accepted turns of this type."),
    ),
    "intervals": (
        _VERSION, _RUN, _MODEL, _DIMENSION, _SEGMENT,
        Column("metric", STR, "A column name of the leaderboard / breakdown tables (reply_type: acceptance_rate, coverage_rate, reach_rate)."),
        Column("k", I64, "K of pass@K and pass^K (as in the leaderboard); null for `reply_type`, whose metrics have none."),
        Column("estimate", F64, "The metric on the run's data: equal to the value in the leaderboard / breakdown table."),
        Column("ci_low", F64, "Lower end of the percentile bootstrap interval (tasks resampled with replacement, all attempts of a task together)."),
        Column("ci_high", F64, "Upper end of that interval."),
        Column("se", F64, "Bootstrap standard error (standard deviation of the replicates)."),
        Column("confidence", F64, "Confidence level of the interval (0.95)."),
        Column("n_tasks", I64, "Tasks resampled: those of the segment with at least one ok attempt."),
        Column("n_boot", I64, "Bootstrap replicates in which the metric was defined (a replicate without e.g. any covered >= 1 row leaves ALJ undefined)."),
        Column("seed", I64, "Seed of the resampling: the same inputs and seed give the same interval."),
    ),
    "paired": (
        _VERSION,
        Column("run_a", STR, "The first run (earlier on the command line)."),
        Column("run_b", STR, "The second run."),
        Column("model_a", STR, "Agent of run_a."),
        Column("model_b", STR, "Agent of run_b."),
        Column("metric", STR, "A leaderboard score column."),
        Column("k", I64, "K of pass@K / pass^K: the smaller of the two runs' K unless `--k` is given."),
        Column("n_tasks", I64, "Common tasks: those with at least one ok attempt in both runs; everything here is computed on them only."),
        Column("estimate_a", F64, "The metric of run_a on the common tasks."),
        Column("estimate_b", F64, "The metric of run_b on the common tasks."),
        Column("diff", F64, "estimate_b - estimate_a."),
        Column("ci_low", F64, "Lower end of the percentile interval of the difference, from a paired bootstrap (the same resampled tasks for both runs)."),
        Column("ci_high", F64, "Upper end of that interval."),
        Column("p_value", F64, "Two-sided bootstrap p-value of 'no difference': (1 + #{|d* - diff| >= |diff|}) / (1 + n_boot), d* the replicate differences (the bootstrap distribution shifted to the null). Small (< 0.05) means the gap is unlikely to be noise."),
        Column("confidence", F64, "Confidence level of the interval (0.95)."),
        Column("n_boot", I64, "Replicates in which the difference was defined."),
        Column("seed", I64, "Seed of the resampling."),
        Column("mdd", F64, "Minimal detectable difference (`sr_pass1` and `atpr` only, else null): the smallest true difference this comparison finds with 80% power at two-sided alpha 0.05, (z_0.975 + z_0.80) * sd(d_t) / sqrt(n_tasks), d_t the per-task differences of the task's mean over its ok attempts (normal approximation over tasks; see `docs/noise.md`). Null when n_tasks < 2 or every task differs by the same amount (sd 0). Added after version 2 was released (same version)."),
        Column("within_noise", BOOL, "True when the difference is within the noise of this comparison: the interval the verdict reads, test_low .. test_high, contains 0 (`verdict = inside_noise`); null when it is undefined. The MDD plays no part (see `docs/noise.md`). Added after version 2 was released (same version); until the columns below existed it was also true when |diff| < mdd, which called significant differences noise."),
        Column("test_confidence", F64, "The level the verdict reads the interval at: for `sr_pass1` and `atpr`, which the report decides on together, the Bonferroni level 1 - (1 - confidence) / 2 (0.975); for the other metrics `confidence`. Added after version 2 was released (same version)."),
        Column("test_low", F64, "Lower end of the interval the verdict reads: the paired bootstrap's percentile interval at test_confidence (the same replicates as ci_low), widened by judge_sd when the judge's flip rate was measured. Added after version 2 was released (same version)."),
        Column("test_high", F64, "Upper end of that interval. Added after version 2 was released (same version)."),
        Column("judge_sd", F64, "`sr_pass1` and `atpr` only: the standard deviation re-judging could add to diff, from the judges' verdict flip rates that `cirrus judge-consistency` measured (sqrt(q_a / n_a + q_b / n_b), q = 1 - (1 - flip rate) ^ (verdicts per attempt), n = scored attempts; a run not measured adds 0); null when neither run's judge was measured. Added after version 2 was released (same version)."),
        Column("verdict", STR, "`higher` (test_low > 0: run_b is significantly higher), `lower` (test_high < 0) or `inside_noise` (the interval contains 0); null without an interval. The rule of `docs/noise.md` and of `cirrus gate`. Added after version 2 was released (same version)."),
    ),
    "noise": (
        _VERSION, _RUN, _MODEL,
        Column("k", I64, "The run's K (`--pass-k`, `k` of `summary.json`): its attempts per task (whatever `cirrus report --k` says)."),
        Column("tasks_multi", I64, "Tasks with at least 2 ok (scored) attempts: those a flip can be seen on."),
        Column("tasks_flipping", I64, "Of those, the tasks whose attempts disagree on `success` (some succeed, some fail)."),
        Column("flip_rate", F64, "tasks_flipping / tasks_multi: the share of tasks whose outcome changes between attempts of the same run. Grows with the attempts per task; null when tasks_multi = 0 (K = 1)."),
        Column("flip_rate_low", F64, "Lower end of the 95% Wilson interval of flip_rate; null with it."),
        Column("flip_rate_high", F64, "Upper end of that interval."),
        Column("success_var_within", F64, "Mean over the tasks_multi tasks of the unbiased within-task variance of `success`, c (n - c) / (n (n - 1)) for c successes in n ok attempts: estimates the mean of p_t (1 - p_t). Twice it is the chance that two attempts of a task disagree (a flip rate that does not depend on K). Null when tasks_multi = 0."),
        Column("judge_measured", STR, "The judge whose consistency `cirrus judge-consistency` measured on this run (`judge` of `reports/<run_id>/judge_consistency.json`), shown as recorded, not checked against the run's judge (`unknown` when the file names none); null when not measured or the file cannot be read (so are the judge columns below)."),
        Column("judge_sample", I64, "Saved verdicts the judge was asked again (`sample`)."),
        Column("judge_repeats", I64, "Fresh judge calls per verdict (`repeats`)."),
        Column("judge_item_flip_rate", F64, "Share of the verdicts asked again where at least one fresh verdict differs from the saved one (`item_flip_rate`)."),
        Column("judge_item_flip_rate_low", F64, "Lower end of its 95% interval (`item_flip_rate_ci95`)."),
        Column("judge_item_flip_rate_high", F64, "Upper end of that interval."),
        Column("judge_verdict_flip_rate", F64, "Share of all fresh verdicts that differ from the saved one (`verdict_flip_rate`)."),
        Column("judge_verdict_flip_rate_low", F64, "Lower end of its 95% interval (`verdict_flip_rate_ci95`)."),
        Column("judge_verdict_flip_rate_high", F64, "Upper end of that interval."),
    ),
    "diff": (
        _VERSION,
        Column("task_id", STR, "A task whose outcome differs between the two runs (`covered` or `success`)."),
        Column("attempt", I64, "The attempt (0-based) compared: attempt n of run A against attempt n of run B."),
        Column("run_a", STR, "Run A (the first run named)."),
        Column("run_b", STR, "Run B."),
        Column("covered_a", I64, "Checkpoints run A's walk covered."),
        Column("covered_b", I64, "Checkpoints run B's walk covered."),
        Column("success_a", BOOL, "Whether run A's walk covered every checkpoint."),
        Column("success_b", BOOL, "Whether run B's walk covered every checkpoint."),
        Column("better", STR, "`A` or `B`: the run whose walk covered more (or succeeded)."),
        Column("checkpoint", I64, "The first checkpoint where the two walks differ (null when the saved turns do not show one)."),
        Column("how", STR, "How they part there, in words (one accepted and the other rejected, a logical jump in one, one walk going on where the other stopped)."),
        Column("query", STR, "The customer's query of that checkpoint (de-identified, as in the workspace)."),
        Column("reference", STR, "The reference reply of that checkpoint."),
        Column("reference_tool_calls", STR, "The reference's tool calls, as JSON."),
        Column("reply_a", STR, "Run A's reply at that checkpoint (null when its walk had stopped)."),
        Column("reply_b", STR, "Run B's reply at that checkpoint."),
        Column("tool_calls_a", STR, "Run A's tool calls in that turn, as JSON."),
        Column("tool_calls_b", STR, "Run B's tool calls in that turn, as JSON."),
        Column("verdict_a", STR, "Run A's verdicts on that turn (the judge's raw answers), as JSON."),
        Column("verdict_b", STR, "Run B's verdicts on that turn, as JSON."),
    ),
    "failures": (
        _VERSION, _RUN, _MODEL,
        Column("reply_type", STR, "`all`: every failed turn of the run; else the reference reply type of the checkpoint the failed turn answered (Solution, Standard, Inquire, Clarify, Appease; others found follow, `unknown` last)."),
        Column("failure", STR, "A failure category of `docs/failures.md` (`missed_tool_call`, `wrong_tool`, `unrecorded_call`, `wrong_arguments`, `premature_solution`, `contradiction`, `missing_information`, `not_followable`; every one listed, zero counts included), then `unclassified` when the run has failed turns without one (runs written before the `failure` column)."),
        Column("failure_order", I64, "Position of the category in the precedence order of `docs/failures.md` (0-based; `unclassified` last): sort by it to print the table."),
        Column("count", I64, "Failed turns of the run (and reply type) with this category. A failed turn is a judged turn of an ok attempt that was rejected, or accepted with a fluency No (`not_followable`); the counts of the other categories sum to the rejected turns."),
        Column("n_failed", I64, "Failed turns of the run (and reply type): the sum of `count` over its categories."),
        Column("share", F64, "count / n_failed; null when n_failed = 0."),
    ),
}

# file name -> table schema
FILES: dict[str, str] = {
    "leaderboard.parquet": "leaderboard",
    "breakdown_category.parquet": "breakdown",
    "breakdown_checkpoints.parquet": "breakdown",
    "breakdown_input_tokens.parquet": "breakdown",
    "breakdown_tools.parquet": "breakdown",
    "breakdown_language.parquet": "breakdown",
    "breakdown_channel.parquet": "breakdown",
    "breakdown_reply_type.parquet": "breakdown_reply_type",
    "intervals.parquet": "intervals",
    "paired.parquet": "paired",
    "noise.parquet": "noise",
    "failures.parquet": "failures",
}


# The report tables of subtask runs (`cirrus eval --mode subtask`, docs/subtasks.md;
# built by cirrus.report.subtask).  Written only when a report has a subtask
# run, so they are not in FILES (the files of every walk report).
def _interval(name: str, title: str, meaning: str) -> tuple[Column, Column, Column]:
    return (Column(name, F64, meaning),
            Column(f"{name}_low", F64, f"Lower end of the percentile bootstrap interval of {title} (`confidence`; the "
                   "segment's tasks resampled with replacement, all their subtasks and attempts together); null when "
                   f"{title} is null or with `--bootstrap 0`."),
            Column(f"{name}_high", F64, f"Upper end of that interval of {title}."))


_SUBTASK_COUNTS = (
    Column("segment_order", I64, "Position of the row's segment in the fixed order (0-based); sort by it to print the table."),
    Column("k", I64, "K of pass@K (the run's `--pass-k` unless `cirrus report --k` overrides it)."),
    Column("n_tasks", I64, "Distinct tasks with a subtask in the segment."),
    Column("n_subtasks", I64, "Distinct subtasks (task, checkpoint) in the segment, error ones included."),
    Column("n_ok", I64, "Subtask attempts with `status = ok`: the ones scored."),
    Column("errors", I64, "Subtask attempts with `status = error` (infrastructure failures): counted, never scored."),
)
_SUBTASK_PASS = (
    *_interval("pass_at_1", "pass_at_1", "pass@1: mean over the segment's subtasks with an ok attempt of c / n (c accepted of n ok attempts)."),
    *_interval("pass_at_k", "pass_at_k", "pass@K: mean over subtasks with n >= K ok attempts of the unbiased 1 - C(n-c, K) / C(n, K); null when none has K."),
)
_SUBTASK_BOOT = (
    Column("confidence", F64, "Confidence level of the intervals (0.95)."),
    Column("n_boot", I64, "Bootstrap replicates asked (`--bootstrap`; 0: no intervals)."),
    Column("seed", I64, "Seed of the resampling: the same runs and seed give the same intervals."),
)
TABLES.update({
    "subtask_by_tokens": (
        _VERSION, _RUN, _MODEL,
        Column("band", STR, "Band of the agent's whole input tokens (system prompt, knowledge, tools, real history + query; `input_tokens` of `subtasks.parquet`): by default the paper's `0-8k`, `8k-16k`, `16k+`; with `cirrus report --token-bands fine` `<1k`, `1k-2k`, `2k-4k`, `4k-8k`, `8k-16k`, `16k+` (lower edge included). Every band is listed, with zero counts when empty (paper Table 4)."),
        *_SUBTASK_COUNTS, *_SUBTASK_PASS,
        *_interval("tia", "tia", "Mean TIA over all ok subtask attempts: the turn called a tool exactly when the reference did (a subtask that needs no tool counts when the agent called none)."),
        *_interval("tia_tool", "tia_tool", "Mean TIA over the ok attempts of subtasks whose reference calls a tool (`needs_tool`): the population of TSA and TEV, and of the paper's TIA column as we read it."),
        *_interval("tsa", "tsa", "Mean TSA over the ok subtask attempts whose checkpoint has reference tool calls."),
        *_interval("tev", "tev", "Mean TEV over the ok subtask attempts whose checkpoint has reference tool calls."),
        *_SUBTASK_BOOT,
    ),
    "subtask_by_reply_type": (
        _VERSION, _RUN, _MODEL,
        Column("reply_type", STR, "The reference reply type of the checkpoint: Solution, Standard, Inquire, Clarify, Appease (always listed), others after (paper Figure 6)."),
        *_SUBTASK_COUNTS, *_SUBTASK_PASS,
        *_interval("amtl", "amtl", "AMTL: mean STL (output tokens of the agent's turn) over the accepted ok subtask attempts."),
        *_SUBTASK_BOOT,
    ),
})
SUBTASK_FILES: dict[str, str] = {"subtask_by_tokens.parquet": "subtask_by_tokens",
                                 "subtask_by_reply_type.parquet": "subtask_by_reply_type"}
# written only by a report of exactly two runs (and by `cirrus diff`)
DIFF_FILES: dict[str, str] = {"diff.parquet": "diff"}


# --------------------------------------------------------------------------
# Per-run tables (written by the run store, read by the report)
# --------------------------------------------------------------------------

_TASK_MEANINGS = {
    "task_id": "The task (`task_id` of `tickets/tasks.jsonl`).",
    "attempt": "The attempt, 0-based: each task is walked max(`--pass-k`, `--runs`) times, independently.",
    "category": "The task's service category (null when it has none).",
    "checkpoints": "K: the task's number of checkpoints.",
    "covered": "Checkpoints covered: the last checkpoint an accepted turn covered (a turn may cover several at once); 0 when the first turn was rejected. Null for error rows (as every score column).",
    "accepted_turns": "Agent turns accepted by the judge.",
    "tpr": "TPR = covered / K.",
    "lj": "LJ = covered - accepted_turns: checkpoints skipped by covering several at once (logical jumps).",
    "nei": "NEI = LJ / (covered - 1) when covered > 1; 1 when covered = 1; 0 when covered = 0.",
    "mtl": "MTL: mean output tokens (STL) of the accepted turns; null (never NaN) when no turn was accepted.",
    "mtl_alg1": "MTL as the paper's Algorithm 1 computes it: the output tokens of every turn of the walk, the rejected one included, divided by covered; null when covered = 0. Beside `mtl` (the paper's text) for comparison with the paper's tables. Runs written before it existed lack it (null).",
    "language": "The ticket's language code (`en`, `zh`, ...), from the task; runs written before it existed lack it (the report reads it from tasks.jsonl).",
    "channel": "The ticket's channel (`online-chat`, `email`, ...; null when the ticket named none), from the task; runs written before it existed lack it (the report reads it from tasks.jsonl).",
    "success": "covered = K: every checkpoint covered.",
    "status": "`ok`, or `error`: an infrastructure failure (API errors after retries, timeouts, unparseable judge output), left out of every score.",
    "error": "Why an error row failed (one line); null for ok rows.",
    "input_tokens": "Agent input tokens of the attempt: all model calls of all its turns, from the API's usage.",
    "output_tokens": "Agent output tokens of the attempt (reasoning tokens included).",
    "wall_s": "Wall time of the attempt (agent, judge and fluency calls), seconds.",
    "run_id": "The run: `reports/<run_id>/` of the workspace. Added after the first release: runs written before lack it (`cirrus report` fills it in).",
    "model": "The agent under test (`model` of the run's `summary.json`). Runs written before it existed lack it (`cirrus report` fills it in).",
    "end_reason": "Why the walk ended: `completed` (every checkpoint covered), `rejected` (the judge did not accept the agent's turn), `fluency_stop` (the fluency checker said the next real query could no longer follow), `truncated` (rescore runs: the saved transcript has no turn for where the new judge's walk got), `error` (status = error), `unknown` (an ok row whose turns do not say; not written by Cirrus's walk). `cirrus show`'s \"walk ended\" says the same in words. Filled in by `cirrus report` for older runs.",
    "end_checkpoint": "Where the walk ended: K for `completed`; otherwise the first checkpoint not covered: the one whose turn was rejected (`rejected`), whose query could not follow (`fluency_stop`), or that has no saved turn (`truncated`). Null for `error` and `unknown`.",
}
_TRUNCATED_MEANING = "Rescore runs only (`cirrus rescore`): the walk was cut where the saved transcript ends, so `covered` is a lower bound; null for error rows."
_CHECKPOINT_MEANINGS = {
    "task_id": "The task.",
    "attempt": "The attempt, 0-based.",
    "checkpoint": "k: the checkpoint (1-based) the agent's turn answered: its query was the customer's last message.",
    "reply_type": "The reference reply type of checkpoint k: Solution, Standard, Inquire, Clarify, Appease.",
    "accepted": "Whether the turn was accepted for checkpoint k: RR and, when k has reference tool calls, TIA, TSA and TEV.",
    "covered_through": "j: the last checkpoint the accepted turn covered (j > k: a logical jump); null when not accepted.",
    "tia": "TIA: the turn called any tool exactly when checkpoint k's reference did.",
    "tsa": "TSA: every tool name of the reference calls was called in the turn; null when k has no reference tool calls.",
    "tev": "TEV: every reference call (name and canonical arguments) was made in the turn and answered from the cassette; null when k has no reference tool calls.",
    "rr": "RR: the coverage judge found the key information of the reference reply in the turn's reply (true for a tool-calls-only checkpoint).",
    "stl": "STL: output tokens of the agent's turn (all its model calls, reasoning included; from the API's usage, counted with a tokenizer only where the API gave none).",
    "fluent": "The fluency verdict after an accepted turn: can the next real query still follow this history? Null when none was asked (the turn was rejected, or it covered the last checkpoint).",
    "tool_calls": "Tool calls the agent made in the turn.",
    "wall_s": "Wall time of the agent's turn (its model calls and replayed tools), seconds.",
    "judge_votes": "With a judge panel: every member's coverage verdict on the turn, as a JSON array of `{\"checkpoint\": j, \"judge\": name, \"ok\": bool}` (one per member and checkpoint asked: k, and the later checkpoints of a logical jump); the panel's verdict is the strict majority (`rr`, `covered_through`). Read it with DuckDB's `from_json` / `json_extract` or polars' `str.json_decode`. Null with a single judge.",
    "run_id": "The run: `reports/<run_id>/` of the workspace. Runs written before it existed lack it.",
    "model": "The agent under test (`model` of the run's `summary.json`). Runs written before it existed lack it.",
    "failure": "Why the walk ended on this turn, one of the categories of `docs/failures.md` in their precedence order: `missed_tool_call`, `wrong_tool`, `unrecorded_call`, `wrong_arguments`, `premature_solution`, `contradiction`, `missing_information` (a rejected turn), `not_followable` (an accepted turn whose next real query could not follow). Null for a turn accepted and followable (or whose fluency was not asked). Added after the first release, at the end: runs written before it lack it (`cirrus report` reads null).",
}
_RESCORE_MEANINGS = {
    "task_id": "The task.",
    "attempt": "The attempt, 0-based.",
    "checkpoints": "K: the task's number of checkpoints.",
    "source_status": "`status` of the attempt in the source run (`missing` when it has none).",
    "status": "`status` of the attempt rescored.",
    "source_covered": "`covered` in the source run.",
    "covered": "`covered` with the new judge.",
    "source_success": "`success` in the source run.",
    "success": "`success` with the new judge.",
    "truncated": _TRUNCATED_MEANING,
    "turns_saved": "Agent turns the source run's transcript holds for the attempt.",
    "turns_replayed": "Agent turns the rescore's walk judged; null for error rows.",
    "changed": "Whether `covered` differs from the source run's (null unless both rows are ok).",
    "run_id": "The rescore run: `reports/<run_id>/` of the workspace (its source is `rescore.source_run` of `summary.json`).",
    "model": "The agent under test whose saved replies were rescored (`model` of the run's `summary.json`).",
}
_SUBTASK_MEANINGS = {
    "run_id": "The subtask run: `reports/<run_id>/` of the workspace.",
    "model": "The agent under test (`model` of the run's `summary.json`).",
    "task_id": "The task.",
    "attempt": "The attempt, 0-based.",
    "checkpoint": "k: the checkpoint (1-based) this subtask asks: the agent answered its query after the real dialogue up to it (docs/subtasks.md).",
    "category": "The task's service category.",
    "reply_type": "The reference reply type of checkpoint k: Solution, Standard, Inquire, Clarify, Appease.",
    "input_tokens": "Tokens of the agent's whole input for the subtask, as the paper's Table 4 counts it: the system message (the agent's system prompt with the task's knowledge), the tool schemas as JSON, and the real history + query (each message's text and tool calls as JSON), counted offline with tiktoken cl100k_base; the token band of `subtask_by_tokens` is taken from it. Runs written before `dialogue_tokens` existed hold the dialogue's count here.",
    "api_input_tokens": "Input tokens the API reported for the agent's turn (all its model calls); null for an offline baseline (no model call) and error subtasks.",
    "tia": "TIA: the turn called any tool exactly when checkpoint k's reference did; null for error subtasks.",
    "tsa": "TSA: every tool name of the reference calls was called; null when k has no reference tool calls (or on error).",
    "tev": "TEV: every reference call (name and canonical arguments) was made and answered from the cassette; null when k has no reference tool calls (or on error).",
    "rr": "RR: the coverage judge found the key information of the reference reply (true for a tool-calls-only checkpoint); null on error.",
    "accepted": "The walk's per-checkpoint decision: RR and, when k has reference tool calls, TIA, TSA and TEV (no logical jump, no fluency check); null on error.",
    "stl": "STL: output tokens of the agent's turn (API usage, reasoning included; a tokenizer only where the API gave none); null on error.",
    "tool_calls": "Tool calls the agent made in the turn; null on error.",
    "status": "`ok`, or `error`: an infrastructure failure on this subtask, left out of every score.",
    "error": "Why an error subtask failed (one line); null when ok.",
    "wall_s": "Wall time of the subtask (the agent's turn and the judge), seconds.",
    "judge_votes": "With a judge panel: every member's coverage verdict, a JSON array of `{\"checkpoint\": k, \"judge\": name, \"ok\": bool}`; null with a single judge.",
    "dialogue_tokens": "Tokens of the real history + query alone (each message's text, or its tool calls as JSON, one per line; tiktoken cl100k_base, as ingest counts `stats.input_tokens`): the same for every model and prompt.",
    "needs_tool": "Whether checkpoint k's reference made tool calls: the subtasks of `tia_tool`, `tsa` and `tev`.",
}


def _run_columns(schema: dict[str, object], meanings: dict[str, str], last: tuple[str, ...] = ()
                 ) -> tuple[Column, ...]:
    """The documented columns of ``schema`` in order, leaving out ``last``
    (placed by the caller after the columns that came before them)."""
    if set(schema) != set(meanings):  # a column written must be documented, and only those
        raise ValueError(f"per-run columns without a meaning: {sorted(set(schema) - set(meanings))}; "
                         f"meanings of no column: {sorted(set(meanings) - set(schema))}")
    return tuple(Column(name, dtype() if isinstance(dtype, type) else dtype, meanings[name])  # type: ignore[arg-type]
                 for name, dtype in schema.items() if name not in last)


def _run_tables() -> dict[str, tuple[Column, ...]]:
    from cirrus.evaluate.rescore import RESCORE_COLUMNS
    from cirrus.evaluate.subtask import SUBTASK_COLUMNS
    from cirrus.evaluate.store import CHECKPOINT_FILE_SCHEMA, TASK_ADDED_SCHEMA, TASK_FILE_SCHEMA

    return {
        # columns added later come after `truncated`, at the end, so older readers keep their positions
        "tasks": (*_run_columns(TASK_FILE_SCHEMA, _TASK_MEANINGS, last=tuple(TASK_ADDED_SCHEMA)),
                  Column("truncated", pl.Boolean(), _TRUNCATED_MEANING),
                  *(c for c in _run_columns(TASK_FILE_SCHEMA, _TASK_MEANINGS) if c.name in TASK_ADDED_SCHEMA)),
        "checkpoints": _run_columns(CHECKPOINT_FILE_SCHEMA, _CHECKPOINT_MEANINGS),
        "rescore": _run_columns({n: getattr(pl, t) for n, t in RESCORE_COLUMNS.items()}, _RESCORE_MEANINGS),
        "subtasks": _run_columns({n: getattr(pl, t) for n, t in SUBTASK_COLUMNS.items()}, _SUBTASK_MEANINGS),
    }


RUN_TABLES: dict[str, tuple[Column, ...]] = _run_tables()
# file of reports/<run_id>/ -> table
RUN_FILES: dict[str, str] = {"tasks.parquet": "tasks", "checkpoints.parquet": "checkpoints",
                             "rescore.parquet": "rescore", "subtasks.parquet": "subtasks"}
RUN_TABLE_NOTES = {
    "tasks": "One row per (task, attempt), in (task_id, attempt) order. `truncated` is written by `cirrus rescore` only, "
             "after the other columns.",
    "checkpoints": "One row per agent turn judged, in (task_id, attempt, checkpoint) order; error attempts have none.",
    "rescore": "`cirrus rescore` runs only: the source run and the rescore side by side, one row per (task, attempt).",
    "subtasks": "Subtask runs only (`cirrus eval --mode subtask`, docs/subtasks.md), instead of `tasks.parquet` and "
                "`checkpoints.parquet`: one row per (task, checkpoint, attempt), in (task_id, attempt, checkpoint) order.",
}


def polars_schema(table: str) -> pl.Schema:
    return pl.Schema({c.name: c.dtype for c in TABLES[table]})


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """``df`` with exactly the documented columns of ``table``, in order and
    cast to their types, ``schema_version`` set.  A documented column that is
    missing, or a column that is not documented, is a programming error and
    raises ``ValueError``."""
    columns = TABLES[table]
    df = df.with_columns(pl.lit(SCHEMA_VERSION, dtype=I64).alias("schema_version"))
    names = [c.name for c in columns]
    missing = [n for n in names if n not in df.columns]
    extra = [n for n in df.columns if n not in names]
    if missing or extra:
        raise ValueError(f"table {table}: missing columns {missing}, undocumented columns {extra}")
    return df.select(pl.col(c.name).cast(c.dtype) for c in columns)


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=polars_schema(table))


_DUCKDB_TYPES = {pl.Int64: "BIGINT", pl.Float64: "DOUBLE", pl.Utf8: "VARCHAR", pl.Boolean: "BOOLEAN"}
_PARQUET_TYPES = {"BIGINT": "int64", "DOUBLE": "double", "VARCHAR": "string", "BOOLEAN": "boolean"}


def type_label(dtype: pl.DataType) -> str:
    """``int64 / BIGINT``: a column's type in Parquet and in DuckDB, as the
    column tables of the schema document give it."""
    sql = _DUCKDB_TYPES[type(dtype)]
    return f"{_PARQUET_TYPES[sql]} / {sql}"


def _column_table(columns: tuple[Column, ...]) -> list[str]:
    lines = ["| column | type (Parquet / DuckDB) | meaning |", "| --- | --- | --- |"]
    for c in columns:
        meaning = c.meaning.replace("|", r"\|")
        lines.append(f"| `{c.name}` | {type_label(c.dtype)} | {meaning} |")
    return lines


def markdown() -> str:
    """The column tables of ``docs/report-schema.md``: the report's tables,
    then the per-run tables."""
    lines: list[str] = [f"Schema version: **{SCHEMA_VERSION}**.", ""]
    for table, columns in TABLES.items():
        files = [name for name, schema in {**FILES, **SUBTASK_FILES, **DIFF_FILES}.items() if schema == table]
        lines += [f"### `{table}`", "", "Files: " + ", ".join(f"`{f}`" for f in files) + ".", "",
                  *_column_table(columns), ""]
    lines += ["### Per-run tables", "",
              "Written by `cirrus eval` (and `cirrus rescore`) to `reports/<run_id>/`; no `schema_version` "
              "column: their columns follow the contract and only grow, new ones at the end.", ""]
    for table, columns in RUN_TABLES.items():
        files = [name for name, schema in RUN_FILES.items() if schema == table]
        lines += [f"### `{table}` (per run)", "", "Files: " + ", ".join(f"`reports/<run_id>/{f}`" for f in files)
                  + ". " + RUN_TABLE_NOTES[table], "", *_column_table(columns), ""]
    return "\n".join(lines).rstrip() + "\n"


def render_doc(text: str) -> str:
    """``text`` with the generated part replaced by :func:`markdown`."""
    head, sep, rest = text.partition(BEGIN_MARK)
    _, sep2, tail = rest.partition(END_MARK)
    if not sep or not sep2:
        raise ValueError("the schema document has no generated section markers")
    return f"{head}{BEGIN_MARK}\n\n{markdown()}\n{END_MARK}{tail}"


if __name__ == "__main__":  # pragma: no cover
    doc = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/report-schema.md")
    doc.write_text(render_doc(doc.read_text(encoding="utf-8")), encoding="utf-8")
