"""``cirrus gate BASELINE CANDIDATE`` (issue 27) on run pairs built by hand
whose answer is known: a clear regression exits 1, a clear improvement 0, a
difference inside the noise 3 (0 with ``--inconclusive pass``); a margin
tolerates a small drop; the judge's measured flip rate widens the interval;
incomparable runs are refused (exit 2) with a message naming what differs;
the Markdown and JUnit XML outputs are written and parse."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.report.gate import GateError, GateOptions, parse_margins, parse_metrics, run_gate
from cirrus.report.views.gate import gate_junit, gate_markdown, gate_rows, headline
from tests.constructed_runs import judge_consistency, make_tasks, outcomes, write_run, write_workspace

WIDE = {"COLUMNS": "200"}
N = 60


@pytest.fixture(scope="module")
def gate_ws(tmp_path_factory) -> Path:
    """60 tasks, K = 2.  ``base`` fails tasks 0-5 (SR 0.9); ``worse`` fails
    0-39 (0.333: a clear regression); ``better`` fails task 0 only (0.983:
    a clear improvement); ``same`` fails 0-4 and 40 (one lost, one gained: no
    difference); ``slight`` fails 0-11 (0.8: a drop of 0.1, smaller than
    its MDD but significant)."""
    tasks = make_tasks(N)
    ws = write_workspace(tmp_path_factory.mktemp("gate") / "ws", tasks)
    failed = {"base": range(6), "worse": range(40), "better": range(1), "same": [0, 1, 2, 3, 4, 40],
              "slight": range(12)}
    for run_id, tasks_failed in failed.items():
        write_run(ws, run_id, tasks, outcomes(tasks, 2, {i: [0, 0] for i in tasks_failed}))
    return ws


def gate(ws: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["gate", *args, "-w", str(ws)], env=WIDE)
    return result.exit_code, result.output


def test_clear_regression_exits_1(gate_ws: Path):
    code, output = gate(gate_ws, "base", "worse")
    assert code == 1, output
    assert "gate: regression on SR pass@1, ATPR (exit 1)" in output
    assert output.count("regression │") == 2


def test_clear_improvement_exits_0(gate_ws: Path):
    code, output = gate(gate_ws, "base", "better")
    assert code == 0, output
    assert "gate: non-inferior (exit 0)" in output
    code, _ = gate(gate_ws, "worse", "base")  # the regression the other way round
    assert code == 0


def test_a_difference_inside_the_noise_exits_3_or_0_when_told(gate_ws: Path):
    code, output = gate(gate_ws, "base", "same")
    assert code == 3, output
    assert "gate: inconclusive on SR pass@1, ATPR (exit 3)" in output
    code, output = gate(gate_ws, "base", "same", "--inconclusive", "pass")
    assert code == 0, output
    assert "inconclusive, passed by --inconclusive pass" in output
    # a tolerated drop makes "no difference" non-inferior: the interval's lower end is above -margin
    code, _ = gate(gate_ws, "base", "same", "--margin", "0.1")
    assert code == 0


def test_a_drop_below_its_mdd_is_a_regression_and_a_margin_can_tolerate_it(gate_ws: Path):
    result = run_gate(gate_ws, "base", "slight", GateOptions(metrics=("sr_pass1",)))
    (sr,) = result.metrics
    assert sr.diff == pytest.approx(-0.1) and abs(sr.diff) < sr.mdd  # smaller than the MDD ...
    assert sr.test_high < 0 and sr.verdict == "regression"  # ... and still a regression (issue 27)
    assert result.exit_code == 1 and sr.test_confidence == 0.95  # one metric: no correction
    # a margin wider than the whole interval: non-inferior, with a note that it is significantly lower
    code, output = gate(gate_ws, "base", "slight", "--margin", "sr=0.3,atpr=0.3")
    assert code == 0, output
    assert "note: SR pass@1 is significantly lower than the baseline's" in output
    # a margin inside the interval: it may or may not be more than tolerated
    code, _ = gate(gate_ws, "base", "slight", "--margin", "0.1")
    assert code == 3


def test_bonferroni_over_the_metrics_named(gate_ws: Path):
    one = run_gate(gate_ws, "base", "slight", GateOptions(metrics=("sr_pass1",)))
    two = run_gate(gate_ws, "base", "slight", GateOptions(metrics=("sr_pass1", "atpr")))
    assert two.metrics[0].test_confidence == pytest.approx(0.975)
    assert two.metrics[0].test_low <= one.metrics[0].test_low and two.metrics[0].test_high >= one.metrics[0].test_high


def test_the_judges_measured_flip_rate_widens_the_interval(tmp_path: Path):
    tasks = make_tasks(N)
    ws = write_workspace(tmp_path / "ws", tasks)
    write_run(ws, "base", tasks, outcomes(tasks, 2, {i: [0, 0] for i in range(6)}))
    write_run(ws, "slight", tasks, outcomes(tasks, 2, {i: [0, 0] for i in range(12)}))
    assert gate(ws, "base", "slight", "--metric", "sr")[0] == 1
    judge_consistency(ws, "base", 0.2)
    judge_consistency(ws, "slight", 0.2)
    result = run_gate(ws, "base", "slight", GateOptions(metrics=("sr_pass1",)))
    assert result.metrics[0].judge_sd > 0 and result.metrics[0].verdict == "inconclusive"
    assert [n.judge_flip_rate for n in result.noise] == [0.2, 0.2]
    code, output = gate(ws, "base", "slight", "--metric", "sr")
    assert code == 3, output
    assert "(95%, +judge)" in output and "judge flip rate 0.200 (judge-x, cirrus judge-consistency)" in output


@pytest.mark.parametrize(("change", "named"), [
    ({"judge": "judge-y"}, "judge model (base: judge-x, other: judge-y)"),
    ({"fluency": "fluency-y"}, "fluency model"),
    ({"k": 3}, "K (--pass-k) (base: 2, other: 3)"),
    ({"tasks": 50}, "dataset hash"),
])
def test_incomparable_runs_are_refused(tmp_path: Path, change: dict, named: str):
    tasks = make_tasks(N)
    ws = write_workspace(tmp_path / "ws", tasks)
    write_run(ws, "base", tasks, outcomes(tasks, 2))
    other_tasks = tasks[:change.get("tasks", N)]
    write_run(ws, "other", other_tasks, outcomes(other_tasks, change.get("k", 2)),
              judge=change.get("judge", "judge-x"), fluency=change.get("fluency", "fluency-x"))
    code, output = gate(ws, "base", "other")
    text = " ".join(output.split())
    assert code == 2, output
    assert "runs 'base' and 'other' cannot be gated: they differ in" in text and named in text
    assert "rerun the candidate with the baseline's judge, --pass-k and tasks" in text
    with pytest.raises(GateError, match="cannot be gated"):
        run_gate(ws, "base", "other")


def test_bad_options_and_runs_exit_2(gate_ws: Path):
    assert gate(gate_ws, "base", "base")[0] == 2
    code, output = gate(gate_ws, "base", "worse", "--metric", "alj")
    assert code == 2 and "choose among sr, sr_pass1, atpr" in output
    assert gate(gate_ws, "base", "worse", "--margin", "lots")[0] == 2
    assert gate(gate_ws, "base", "worse", "--margin", "tia=0.1")[0] == 2
    assert gate(gate_ws, "base", "worse", "--inconclusive", "maybe")[0] == 2
    code, output = gate(gate_ws, "base", "nope")
    assert code == 2 and "no run 'nope'" in output
    assert parse_metrics("SR, atpr,sr") == ("sr_pass1", "atpr")
    assert parse_margins("0.02", ("sr_pass1", "atpr")) == {"sr_pass1": 0.02, "atpr": 0.02}
    assert parse_margins("atpr=0.05", ("sr_pass1", "atpr")) == {"sr_pass1": 0.0, "atpr": 0.05}


def test_markdown_and_junit_are_written_and_parse(gate_ws: Path, tmp_path: Path):
    md, xml = tmp_path / "out/gate.md", tmp_path / "out/gate.xml"
    code, output = gate(gate_ws, "base", "worse", "--markdown", str(md), "--junit", str(xml))
    assert code == 1, output
    text = md.read_text(encoding="utf-8")
    assert text.startswith("### cirrus gate: regression (exit 1)\n")
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0] == "| metric | baseline | candidate | difference | interval tested | margin | MDD | verdict |"
    assert len(table) == 4 and all(line.count("|") == 9 for line in table)
    assert table[2].startswith("| SR pass@1 | 0.900 | 0.333 | -0.567 |") and table[2].endswith("| **regression** |")
    assert "Rule: paired bootstrap" in text
    suites = ET.fromstring(xml.read_text(encoding="utf-8"))
    assert suites.tag == "testsuites" and suites.get("tests") == "2" and suites.get("failures") == "2"
    cases = suites.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["SR pass@1 vs base", "ATPR vs base"]
    assert all(c.find("failure").get("type") == "regression" for c in cases)
    properties = {p.get("name"): p.get("value") for p in suites.findall("./testsuite/properties/property")}
    assert properties["outcome"] == "regression" and properties["exit_code"] == "1"

    # inconclusive: failing test cases, or passing ones with --inconclusive pass
    result = run_gate(gate_ws, "base", "same")
    assert ET.fromstring(gate_junit(result)).get("failures") == "2"
    passed = run_gate(gate_ws, "base", "same", GateOptions(inconclusive="pass"))
    suites = ET.fromstring(gate_junit(passed))
    assert suites.get("failures") == "0" and len(suites.findall("./testsuite/testcase/system-out")) == 2
    assert "add tasks or attempts" in gate_markdown(result)
    assert gate_rows(passed)[0][-1] == "inconclusive" and headline(passed).endswith("(exit 0)")


def test_gate_table_rows_by_hand(gate_ws: Path):
    result = run_gate(gate_ws, "base", "worse", GateOptions(metrics=("sr_pass1",), margins={"sr_pass1": 0.05}))
    (row,) = gate_rows(result)
    assert row[:4] == ["SR pass@1", "0.900", "0.333", "-0.567"]
    assert row[4].endswith("(95%)") and row[5:] == ["0.050", row[6], "regression"]
    assert result.n_tasks == N and result.k == 2
