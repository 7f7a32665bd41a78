"""``cirrus gate BASELINE CANDIDATE``: a pass / fail verdict for a CI
pipeline (the library behind :mod:`cirrus.commands.gate`; ``docs/ci.md``).

The gate compares two finished walk runs of one workspace on their common
tasks with the report's paired bootstrap
(:func:`cirrus.report.uncertainty.paired`), reads each named metric's
interval at the Bonferroni level for the metrics named, widened by the
judge's measured flip rate, and decides by the rule of
:mod:`cirrus.report.significance` with a tolerated drop (``margin``):

* ``non_inferior`` when the interval's lower end is above ``-margin``;
* ``regression`` when its upper end is below ``-margin`` (with no margin:
  below 0);
* ``inconclusive`` otherwise.

The gate's outcome is ``regression`` when any metric is one, else
``inconclusive`` when any metric is one, else ``non_inferior``; exit
statuses :data:`GATE_EXIT`.  Runs that differ in judge (or fluency
checker), K or dataset are refused (:class:`GateError`): their difference
would not be the agent's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cirrus.report.loading import ReportError

__all__ = ["DEFAULT_METRICS", "GATE_EXIT", "GATE_METRICS", "GateError", "GateOptions", "GateResult", "MetricGate",
           "RunNoise", "parse_margins", "parse_metrics", "run_gate"]

# what --metric accepts -> the paired table's metric
GATE_METRICS = {"sr": "sr_pass1", "sr_pass1": "sr_pass1", "atpr": "atpr"}
DEFAULT_METRICS = ("sr_pass1", "atpr")
INCONCLUSIVE_POLICIES = ("fail", "pass")
# the gate's outcome -> exit status (3 is also `cirrus eval`'s "budget" status: a different command)
GATE_EXIT = {"non_inferior": 0, "regression": 1, "inconclusive": 3, "inconclusive_passed": 0}


class GateError(ReportError):
    """The gate cannot decide: the runs are not comparable, share no task,
    or an option is wrong; the message says which (exit status 2)."""


@dataclass(frozen=True)
class GateOptions:
    """``metrics``: paired-table metric names (:data:`GATE_METRICS` values);
    ``margins``: the tolerated drop per metric (missing: 0); ``confidence``:
    the family's level; ``n_boot``, ``seed``: the bootstrap's;
    ``inconclusive``: ``fail`` (exit 3) or ``pass`` (exit 0)."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    margins: Mapping[str, float] = field(default_factory=dict)
    confidence: float = 0.95
    n_boot: int = 2000
    seed: int = 0
    inconclusive: str = "fail"


@dataclass(frozen=True)
class MetricGate:
    """One metric's comparison: the two runs' values on the common tasks,
    ``diff = candidate - baseline``, the bootstrap interval ``ci_low`` ..
    ``ci_high`` at the stated level and its ``p_value``; the interval the
    verdict reads (``test_low`` .. ``test_high`` at ``test_confidence``,
    widened by ``judge_sd``), the ``margin``, the ``mdd`` (for reading, not
    deciding) and ``verdict``."""

    metric: str
    baseline: float | None
    candidate: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    test_confidence: float
    test_low: float | None
    test_high: float | None
    judge_sd: float | None
    mdd: float | None
    margin: float
    verdict: str


@dataclass(frozen=True)
class RunNoise:
    """A run's measured noise: its flip rate across attempts (``tasks_multi``
    tasks with 2+ scored attempts; None with K = 1) and its judge's verdict
    flip rate where ``cirrus judge-consistency`` measured it."""

    run_id: str
    k: int
    tasks_multi: int
    flip_rate: float | None
    flip_low: float | None
    flip_high: float | None
    judge_flip_rate: float | None
    judge_measured: str | None


@dataclass(frozen=True)
class GateResult:
    """What the gate found (:func:`run_gate`)."""

    baseline: str
    candidate: str
    n_tasks: int
    k: int
    confidence: float
    n_boot: int
    seed: int
    inconclusive: str
    metrics: tuple[MetricGate, ...]
    noise: tuple[RunNoise, ...]
    warnings: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        """``regression`` if any metric is one, else ``inconclusive`` if any
        is, else ``non_inferior``."""
        verdicts = {m.verdict for m in self.metrics}
        for outcome in ("regression", "inconclusive"):
            if outcome in verdicts:
                return outcome
        return "non_inferior"

    @property
    def exit_code(self) -> int:
        """0 (non-inferior, or inconclusive with ``--inconclusive pass``), 1
        (regression), 3 (inconclusive)."""
        if self.outcome == "inconclusive" and self.inconclusive == "pass":
            return GATE_EXIT["inconclusive_passed"]
        return GATE_EXIT[self.outcome]


def parse_metrics(text: str) -> tuple[str, ...]:
    """``sr,atpr`` -> ``("sr_pass1", "atpr")`` (in order, once each)."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in GATE_METRICS]
    if unknown or not names:
        raise GateError(f"--metric {text!r}: choose among {', '.join(GATE_METRICS)} (comma-separated)")
    return tuple(dict.fromkeys(GATE_METRICS[n] for n in names))


def parse_margins(text: str, metrics: Sequence[str]) -> dict[str, float]:
    """``0.02`` (every metric) or ``sr=0.02,atpr=0.05`` (a metric left out:
    0) -> ``{metric: margin}``; a margin is a number >= 0 in the metric's
    units (a share: 0.02 is two points)."""
    def number(value: str) -> float:
        try:
            margin = float(value)
        except ValueError:
            raise GateError(f"--margin {text!r}: {value!r} is not a number") from None
        if not 0 <= margin < 1:
            raise GateError(f"--margin {text!r}: a margin is a share between 0 and 1, got {margin}")
        return margin

    text = text.strip()
    if "=" not in text:
        return {metric: number(text or "0") for metric in metrics}
    margins = {metric: 0.0 for metric in metrics}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        metric = GATE_METRICS.get(name.strip().lower())
        if metric is None or metric not in metrics:
            raise GateError(f"--margin {text!r}: {name.strip()!r} is not one of the metrics gated "
                            f"({', '.join(metrics)})")
        margins[metric] = number(value)
    return margins


def _check(baseline: str, candidate: str, options: GateOptions) -> None:
    if baseline == candidate:
        raise GateError(f"the baseline and the candidate are the same run ({baseline!r})")
    if not options.metrics or any(m not in GATE_METRICS.values() for m in options.metrics):
        raise GateError(f"metrics must be among {', '.join(sorted(set(GATE_METRICS.values())))}")
    if options.inconclusive not in INCONCLUSIVE_POLICIES:
        raise GateError(f"--inconclusive must be fail or pass, got {options.inconclusive!r}")
    if not 0 < options.confidence < 1:
        raise GateError(f"--confidence must be between 0 and 1, got {options.confidence}")
    if any(not 0 <= m < 1 for m in options.margins.values()):
        raise GateError("a margin is a share between 0 and 1")


def run_gate(workspace: Path, baseline: str, candidate: str, options: GateOptions | None = None) -> GateResult:
    """Compare ``candidate`` against ``baseline`` (see the module doc).

    Raises :class:`GateError` for incomparable runs (different judge or
    fluency model or prompt, K or dataset), runs without a common scored
    task and bad options; :class:`~cirrus.report.loading.ReportError` for
    an unknown, unfinished or broken run."""
    from cirrus.report.comparability import differing_settings
    from cirrus.report.loading import judge_flip_rates, load_judge_consistency, load_runs
    from cirrus.report.significance import gate_verdict
    from cirrus.report.uncertainty import attempt_flips, paired

    options = options or GateOptions()
    _check(baseline, candidate, options)
    runs = load_runs(workspace, [baseline, candidate])
    differ = differing_settings(runs)
    if differ:
        raise GateError(f"runs {baseline!r} and {candidate!r} cannot be gated: they differ in "
                        f"{'; '.join(differ)}. A gate compares agents under the same judge, K and tasks: rerun the "
                        "candidate with the baseline's judge, --pass-k and tasks")
    warnings = [w for run in runs for w in run.warnings]
    warnings += [f"the runs differ in {d}" for d in differing_settings(runs, ("Cirrus version",))]
    warnings += [f"run {run.run_id!r} is self-judged: its judge or fluency checker is its own model ({run.model})"
                 for run in runs if run.self_judged]
    judge: dict[str, Mapping[str, Any] | None] = {}
    for run in runs:
        judge[run.run_id], problems = load_judge_consistency(run)
        warnings += problems
    table = paired(runs, n_boot=options.n_boot, seed=options.seed, confidence=options.confidence,
                   family=options.metrics, judge_flips=judge_flip_rates(judge))
    rows = {row["metric"]: row for row in table.iter_rows(named=True)}
    n_tasks = rows[options.metrics[0]]["n_tasks"] if rows else 0
    if not n_tasks:
        raise GateError(f"runs {baseline!r} and {candidate!r} have no scored task in common: nothing to compare")
    metrics = []
    for metric in options.metrics:
        row = rows[metric]
        margin = float(options.margins.get(metric, 0.0))
        verdict = gate_verdict(row["test_low"], row["test_high"], margin) or "inconclusive"
        metrics.append(MetricGate(metric, row["estimate_a"], row["estimate_b"], row["diff"], row["ci_low"],
                                  row["ci_high"], row["p_value"], row["test_confidence"], row["test_low"],
                                  row["test_high"], row["judge_sd"], row["mdd"], margin, verdict))
    noise = []
    rates = judge_flip_rates(judge)
    for run in runs:
        flips = attempt_flips(run.tasks.select("task_id", "status", "success"))
        noise.append(RunNoise(run.run_id, run.k, flips.tasks_multi, flips.rate, flips.low, flips.high,
                              rates.get(run.run_id), (judge.get(run.run_id) or {}).get("judge_measured")))
    return GateResult(baseline, candidate, n_tasks, runs[0].k, options.confidence, options.n_boot, options.seed,
                      options.inconclusive, tuple(metrics), tuple(noise), tuple(warnings))
