"""``cirrus gate``'s result as people and CI read it: the terminal table's
rows and lines (:func:`gate_rows`, :func:`gate_lines`), the Markdown of a CI
step summary (:func:`gate_markdown`) and JUnit XML (:func:`gate_junit`).
Pure: a :class:`~cirrus.report.gate.GateResult` in, text out."""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from cirrus.report.labels import METRIC_TITLES
from cirrus.report.significance import level_text
from cirrus.report.views.cells import fmt_value

if TYPE_CHECKING:
    from cirrus.report.gate import GateResult, MetricGate, RunNoise

__all__ = ["GATE_COLUMNS", "OUTCOME_WORDS", "gate_junit", "gate_lines", "gate_markdown", "gate_rows", "headline",
           "notes", "rule_text"]

GATE_COLUMNS = ("metric", "baseline", "candidate", "difference", "interval tested", "margin", "MDD", "verdict")
OUTCOME_WORDS = {"non_inferior": "non-inferior", "regression": "regression", "inconclusive": "inconclusive"}


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{fmt_value(low)}, {fmt_value(high)}]"


def _tested(m: MetricGate) -> str:
    widened = ", +judge" if m.judge_sd else ""
    return f"{_interval(m.test_low, m.test_high)} ({level_text(m.test_confidence)}{widened})"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def gate_rows(result: GateResult) -> list[list[str]]:
    """One row of :data:`GATE_COLUMNS` per metric gated."""
    return [[METRIC_TITLES.get(m.metric, m.metric), fmt_value(m.baseline), fmt_value(m.candidate), _signed(m.diff),
             _tested(m), fmt_value(m.margin), fmt_value(m.mdd), OUTCOME_WORDS[m.verdict]] for m in result.metrics]


def rule_text(result: GateResult) -> str:
    """The rule, in one line, with this gate's levels."""
    count = len(result.metrics)
    level = level_text(result.metrics[0].test_confidence) if result.metrics else level_text(result.confidence)
    family = (f"Bonferroni over {count} metrics: each interval at {level} for {level_text(result.confidence)} "
              f"overall" if count > 1 else f"the interval at {level}")
    return (f"paired bootstrap over the common tasks ({result.n_boot} replicates, seed {result.seed}); {family}, "
            "widened where the judge's flip rate was measured; non-inferior when the interval's lower end is above "
            "-margin, regression when its upper end is below -margin, inconclusive otherwise (docs/ci.md)")


def _noise_text(noise: RunNoise) -> str:
    if noise.flip_rate is None:
        flips = f"flip rate across attempts: needs K >= 2 (K = {noise.k})"
    else:
        flips = (f"flip rate across attempts {fmt_value(noise.flip_rate)} {_interval(noise.flip_low, noise.flip_high)}"
                 f" over {noise.tasks_multi} tasks")
    judge = ("judge flip rate not measured" if noise.judge_flip_rate is None else
             f"judge flip rate {fmt_value(noise.judge_flip_rate)} ({noise.judge_measured}, cirrus judge-consistency)")
    return f"{noise.run_id}: {flips}; {judge}"


def headline(result: GateResult) -> str:
    """``gate: regression (exit 1)``, naming the metrics that decided it."""
    outcome = result.outcome
    deciding = [METRIC_TITLES.get(m.metric, m.metric) for m in result.metrics if m.verdict == outcome]
    said = OUTCOME_WORDS[outcome]
    if outcome == "inconclusive" and result.inconclusive == "pass":
        said += ", passed by --inconclusive pass"
    which = f" on {', '.join(deciding)}" if outcome != "non_inferior" else ""
    return f"gate: {said}{which} (exit {result.exit_code})"


def gate_lines(result: GateResult) -> list[str]:
    """The lines around the terminal table: what was compared, the noise,
    the rule, and the headline last."""
    lines = [f"baseline {result.baseline} -> candidate {result.candidate}: {result.n_tasks} common tasks, "
             f"K = {result.k}"]
    lines += [f"noise: {_noise_text(noise)}" for noise in result.noise]
    lines += notes(result)
    lines.append(f"rule: {rule_text(result)}")
    return lines


def notes(result: GateResult) -> list[str]:
    """A line per metric passed by its margin although significantly lower."""
    return [f"note: {METRIC_TITLES.get(m.metric, m.metric)} is significantly lower than the baseline's (the "
            f"interval tested lies below 0), by less than the margin {fmt_value(m.margin)}"
            for m in result.metrics
            if m.verdict == "non_inferior" and m.test_high is not None and m.test_high < 0]


def gate_markdown(result: GateResult) -> str:
    """A Markdown section for a CI step summary (``$GITHUB_STEP_SUMMARY``)."""
    def cell(text: str) -> str:
        return text.replace("|", r"\|")

    lines = [f"### cirrus gate: {OUTCOME_WORDS[result.outcome]} (exit {result.exit_code})", "",
             f"Candidate `{result.candidate}` against baseline `{result.baseline}` on {result.n_tasks} common tasks "
             f"(K = {result.k}).", "",
             "| " + " | ".join(GATE_COLUMNS) + " |", "|" + " --- |" * len(GATE_COLUMNS)]
    for row in gate_rows(result):
        row[-1] = f"**{row[-1]}**"
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    lines += ["", "Noise:", ""] + [f"- {cell(_noise_text(noise))}" for noise in result.noise]
    lines += [""] + [cell(n) for n in notes(result)] if notes(result) else []
    lines += ["", f"Rule: {rule_text(result)}.", ""]
    if result.outcome == "inconclusive":
        lines += ["An inconclusive gate means these tasks cannot tell: add tasks or attempts (--pass-k), or set a "
                  "tolerated drop with --margin.", ""]
    lines += [f"> warning: {cell(w)}" for w in result.warnings]
    return "\n".join(lines).rstrip("\n") + "\n"


def _case_text(result: GateResult, m: MetricGate) -> str:
    title = METRIC_TITLES.get(m.metric, m.metric)
    return (f"{title}: baseline {fmt_value(m.baseline)}, candidate {fmt_value(m.candidate)}, difference "
            f"{_signed(m.diff)}, interval tested {_tested(m)}, margin {fmt_value(m.margin)}, MDD {fmt_value(m.mdd)}, "
            f"p {fmt_value(m.p_value, 4)}: {OUTCOME_WORDS[m.verdict]}")


def gate_junit(result: GateResult) -> str:
    """JUnit XML: one test case per metric; a regression fails, an
    inconclusive metric fails unless ``--inconclusive pass`` (then it passes
    with the reason in ``system-out``)."""
    cases = []
    failures = 0
    for m in result.metrics:
        case = ET.Element("testcase", {"classname": f"cirrus.gate.{result.candidate}",
                                       "name": f"{METRIC_TITLES.get(m.metric, m.metric)} vs {result.baseline}",
                                       "time": "0"})
        text = _case_text(result, m)
        if m.verdict == "regression" or (m.verdict == "inconclusive" and result.inconclusive == "fail"):
            failures += 1
            failure = ET.SubElement(case, "failure", {"type": m.verdict, "message": text})
            failure.text = f"{text}\nrule: {rule_text(result)}"
        ET.SubElement(case, "system-out").text = text
        cases.append(case)
    attributes = {"name": "cirrus gate", "tests": str(len(cases)), "failures": str(failures), "errors": "0",
                  "skipped": "0"}
    suites = ET.Element("testsuites", attributes)
    suite = ET.SubElement(suites, "testsuite", {**attributes, "name": f"cirrus gate {result.candidate} vs "
                                                                      f"{result.baseline}"})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("baseline", result.baseline), ("candidate", result.candidate),
                        ("common_tasks", str(result.n_tasks)), ("k", str(result.k)),
                        ("outcome", result.outcome), ("exit_code", str(result.exit_code)),
                        ("inconclusive", result.inconclusive), ("rule", rule_text(result))):
        ET.SubElement(properties, "property", {"name": name, "value": value})
    suite.extend(cases)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
