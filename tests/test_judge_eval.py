"""`cirrus judge-eval`: label-file checks, the agreement metrics as pure
functions (edge cases included), and the command with the local judge on the
shipped example file and with a scripted LLM judge giving known answers."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cirrus.commands.judge_eval import judge_eval
from cirrus.evaluate.types import Verdict
from cirrus.judges.calibration import (
    Confusion,
    LabelFileError,
    LabelledCase,
    accuracy,
    cohen_kappa,
    confusion,
    f1,
    judge_history,
    judge_metrics,
    load_labels,
    precision,
    recall,
    run_judge,
    wilson_interval,
)
from tests.chat_server import ChatServer

LABELS = Path(__file__).parent / "data" / "judge_labels.jsonl"
KEY_ENV = "CIRRUS_JUDGE_EVAL_KEY"
ENV = {KEY_ENV: "sk-judge-eval-test-0123456789", "COLUMNS": "200"}

app = typer.Typer()


@app.callback()
def _main() -> None:
    pass


app.command("judge-eval")(judge_eval)


# --- metrics -----------------------------------------------------------------------


def test_metrics_of_a_mixed_confusion_matrix():
    labels = [True] * 6 + [False] * 4
    predictions = [True] * 4 + [False] * 2 + [True] + [False] * 3
    c = confusion(labels, predictions)
    assert c == Confusion(tp=4, fp=1, fn=2, tn=3) and c.n == 10
    assert accuracy(c) == 0.7 and precision(c) == 0.8 and recall(c) == pytest.approx(4 / 6)
    assert f1(c) == pytest.approx(8 / 11)
    # p_o = 0.7, p_e = (5 * 6 + 5 * 4) / 100 = 0.5 -> kappa = 0.2 / 0.5
    assert cohen_kappa(c) == pytest.approx(0.4)


def test_metrics_edge_cases():
    # everything one class, judge agreeing: p_e = 1, kappa undefined (not NaN)
    same = judge_metrics([True] * 5, [True] * 5)
    assert (same.accuracy, same.precision, same.recall, same.f1, same.kappa) == (1.0, 1.0, 1.0, 1.0, None)
    negatives = judge_metrics([False] * 4, [False] * 4)
    assert (negatives.accuracy, negatives.precision, negatives.recall, negatives.f1, negatives.kappa) == (
        1.0, None, None, None, None)
    # labels all one class, judge mixed: p_e = p_o -> kappa 0
    one_class = judge_metrics([True] * 10, [True] * 8 + [False] * 2)
    assert one_class.kappa == pytest.approx(0.0) and one_class.recall == 0.8 and one_class.precision == 1.0
    # a judge that never says Included: precision undefined, F1 0
    never = judge_metrics([True, True, False], [False, False, False])
    assert never.precision is None and never.recall == 0.0 and never.f1 == 0.0
    # complete disagreement
    assert cohen_kappa(confusion([True, False], [False, True])) == pytest.approx(-1.0)
    empty = judge_metrics([], [])
    assert (empty.accuracy, empty.kappa, empty.f1, empty.accuracy_ci95) == (None, None, None, None)
    with pytest.raises(ValueError):
        confusion([True], [True, False])


def test_wilson_interval():
    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(129, 141)  # the paper's 91.49% on 141 labels
    assert 0.85 < low < 129 / 141 < high < 0.96
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0


# --- the label file -------------------------------------------------------------------


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _row(i: int, label: str = "Included", **changes) -> dict:
    return {"id": f"r{i}", "history": "", "query": f"question {i}", "reference": f"reference {i}",
            "candidate": f"candidate {i}", "label": label, **changes}


def test_the_shipped_file_is_valid_and_balanced():
    cases = load_labels(LABELS)
    assert len(cases) >= 30
    included = sum(c.label for c in cases)
    assert 0.35 < included / len(cases) < 0.65
    assert any(c.history for c in cases) and len({c.id for c in cases}) == len(cases)


def test_label_rows_are_checked_with_file_line_and_reason(tmp_path):
    path = _write(tmp_path / "labels.jsonl", [
        _row(1),
        "{not json",
        _row(3, label="maybe"),
        {k: v for k, v in _row(4).items() if k != "candidate"},
        _row(5, reference="  "),
        _row(6, history="some text"),
        _row(7, history=[{"role": "bot", "content": "hi"}]),
        _row(1),
        [1, 2],
        _row(10, query=3),
    ])
    with pytest.raises(LabelFileError) as info:
        load_labels(path)
    lines = str(info.value).splitlines()
    expected = {2: "not valid JSON", 3: "label must be", 4: "missing candidate", 5: "reference is empty",
                6: "history must be a list", 7: "role 'bot'", 8: "duplicate id 'r1'", 9: "JSON object",
                10: "query must be a string"}
    assert len(lines) == len(expected)
    for line, (number, reason) in zip(lines, expected.items()):
        assert line.startswith(f"{path}:{number}: ") and reason in line
    with pytest.raises(LabelFileError, match="holds no labelled row"):
        load_labels(_write(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(LabelFileError, match="does not exist"):
        load_labels(tmp_path / "nope.jsonl")
    ok = load_labels(_write(tmp_path / "ok.jsonl", [_row(1, label="not_included"), _row(2, label=" included ")]))
    assert [c.label for c in ok] == [False, True]


def test_the_judge_sees_the_query_as_the_last_customer_message():
    case = LabelledCase(1, "a", [{"role": "assistant", "content": "hello"}], "my question", "ref", "cand", True)
    assert judge_history(case)[-1] == {"role": "user", "content": "my question"}
    already = LabelledCase(1, "a", [{"role": "user", "content": "my question"}], "my question", "ref", "cand", True)
    assert judge_history(already) == [{"role": "user", "content": "my question"}]


def test_judge_calls_are_bounded():
    class SlowJudge:
        name = "slow"

        def __init__(self) -> None:
            self.in_flight = 0
            self.most = 0

        async def covers(self, history, query, reference, candidate):
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await asyncio.sleep(0.01)
            self.in_flight -= 1
            return Verdict(candidate.endswith("0"), "scripted")

    judge = SlowJudge()
    cases = [LabelledCase(i, str(i), [], "q", "r", f"c{i % 2}", True) for i in range(12)]
    results = asyncio.run(run_judge(judge, cases, concurrency=3))
    assert judge.most == 3 and [r.case.id for r in results] == [str(i) for i in range(12)]
    assert [r.predicted for r in results] == [i % 2 == 0 for i in range(12)]


# --- the command -----------------------------------------------------------------------


def _invoke(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["judge-eval", *args, "-q"], env=ENV)
    assert result.exit_code == code, result.output
    return result.output


def test_local_judge_on_the_shipped_file(tmp_path):
    results = tmp_path / "results.jsonl"
    output = _invoke(str(LABELS), "--judge-model", "local", "-o", str(results), "-w", str(tmp_path))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    cases = load_labels(LABELS)
    assert [r["id"] for r in records] == [c.id for c in cases]
    assert all(r["predicted"] in ("Included", "Not Included") and r["error"] is None for r in records)
    metrics = judge_metrics([r["label"] == "Included" for r in records], [r["predicted"] == "Included" for r in records])
    assert metrics.accuracy == sum(r["correct"] for r in records) / len(records)
    assert metrics.accuracy >= 0.6  # a heuristic: well above chance, well below a good LLM judge
    for value in (metrics.accuracy, metrics.precision, metrics.recall, metrics.kappa):
        assert f"{value:.4f}" in output
    assert f"{len(cases)} rows" in output and "local-heuristic" in output


def _scripted_rule(verdicts: dict[str, str | None]):
    """A judge answering by the candidate: "Included", "Not Included", or
    None for an unreadable answer."""

    def rule(body: dict) -> str:
        user = body["messages"][1]["content"]
        candidate = re.search(r'<candidate_reply(?: id="\w+")?>\n?(.*?)\n?</candidate_reply(?: id="\w+")?>', user, re.S).group(1).strip()
        verdict = verdicts[candidate]
        return "I cannot decide." if verdict is None else json.dumps({"reason": "scripted", "verdict": verdict})

    return rule


def test_a_scripted_llm_judge_gives_exact_metrics(tmp_path):
    labels = ["Included"] * 6 + ["Not Included"] * 4 + ["Included"]
    answers = ["Included"] * 4 + ["Not Included"] * 2 + ["Included"] + ["Not Included"] * 3 + [None]
    rows = [_row(i, label=label, history=[{"role": "assistant", "content": "How can I help?"}] if i == 0 else "")
            for i, label in enumerate(labels)]
    path = _write(tmp_path / "labels.jsonl", rows)
    results = tmp_path / "out" / "results.jsonl"
    with ChatServer(rule=_scripted_rule({f"candidate {i}": a for i, a in enumerate(answers)})) as server:
        output = _invoke(str(path), "--judge-model", "scripted-judge", "--judge-base-url", server.base_url,
                         "--judge-api-key-env", KEY_ENV, "--concurrency", "4", "-o", str(results), "-w", str(tmp_path))
        first = next(r for r in server.requests if "candidate 0" in r["messages"][1]["content"])
    # tp 4, fn 2, fp 1, tn 3; the unreadable row is an infrastructure failure, left out
    assert "0.7000 (70.00%)" in output and "0.8000" in output and "0.6667" in output and "0.7273" in output
    assert "0.4000" in output and "rows failed (infrastructure) │ 1" in output
    assert re.search(r"label Included\s*│\s*4\s*│\s*2", output) and re.search(r"label Not Included\s*│\s*1\s*│\s*3", output)
    assert "Customer: question 0" in first["messages"][1]["content"]  # the query is the last customer turn
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert records[-1]["predicted"] is None and "unreadable" in records[-1]["error"]
    assert [r["correct"] for r in records[:10]] == [True] * 4 + [False] * 2 + [False] + [True] * 3


def test_command_errors_exit_2(tmp_path):
    bad = _write(tmp_path / "bad.jsonl", [_row(1), _row(2, label="yes")])
    output = _invoke(str(bad), code=2)
    assert f"{bad}:2: label must be" in output
    assert "does not exist" in _invoke(str(tmp_path / "missing.jsonl"), code=2)
    output = _invoke(str(LABELS), "--judge-model", "no-such-model-anywhere", "-w", str(tmp_path), code=2)
    assert "error:" in output
