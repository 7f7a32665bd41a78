"""`cirrus judge-eval --role fluency`: the fluency label file and its checks,
"Yes" as the positive class, Cohen's kappa by scikit-learn, and the command
with the local checker on the shipped file and with a scripted LLM checker
answering from the labels in the shapes real models answer in."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import warnings
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cirrus.commands.judge_eval import judge_eval, print_metrics
from cirrus.evaluate.types import InfrastructureError, Verdict
from cirrus.judges.calibration import (
    FLUENCY_SPEC,
    CaseResult,
    CalibratedRole,
    Confusion,
    FluencyCase,
    LabelFileError,
    cohen_kappa,
    load_fluency_labels,
    load_labels,
    metrics_of,
    row_role,
    run_fluency,
)
from tests.chat_server import ChatServer

DATA = Path(__file__).parent / "data"
LABELS = DATA / "fluency_labels.jsonl"
COVERAGE_LABELS = DATA / "judge_labels.jsonl"
KEY_ENV = "CIRRUS_FLUENCY_EVAL_KEY"
ENV = {KEY_ENV: "sk-fluency-eval-test-0123456789", "COLUMNS": "200"}
CJK = re.compile(r"[\u4e00-\u9fff]")

app = typer.Typer()


@app.callback()
def _main() -> None:
    pass


app.command("judge-eval")(judge_eval)


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _row(i: int, label: object = "Yes", **changes: object) -> dict:
    return {"id": f"f{i}", "history": [{"role": "user", "content": f"question {i}"},
                                       {"role": "assistant", "content": f"answer {i}"}],
            "next_query": f"next {i}", "label": label, **changes}


# --- the label file --------------------------------------------------------------------


def test_the_shipped_file_is_valid_balanced_and_bilingual():
    cases = load_fluency_labels(LABELS)
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]
    assert len(cases) == len(rows) >= 48 and len({c.id for c in cases}) == len(cases)
    assert 0.4 < sum(c.label for c in cases) / len(cases) < 0.6
    assert sum(bool(CJK.search(c.next_query)) for c in cases) >= 10
    assert all(isinstance(r.get("why"), str) and r["why"].strip() for r in rows)
    assert all(any(m["role"] == "assistant" for m in c.history) for c in cases)


def test_fluency_rows_are_checked_with_file_line_and_reason(tmp_path):
    path = _write(tmp_path / "labels.jsonl", [
        _row(1),
        "{not json",
        _row(3, label="maybe"),
        {k: v for k, v in _row(4).items() if k != "history"},
        _row(5, next_query="   "),
        _row(6, history=[]),
        _row(7, history="some text"),
        _row(8, history=[{"role": "bot", "content": "hi"}]),
        _row(9, history=[{"role": "user", "content": "only the customer"}]),
        _row(1),
        [1, 2],
        _row(12, next_query=3),
        _row(13, label="Included"),
        {k: v for k, v in _row(14).items() if k != "next_query"},
    ])
    with pytest.raises(LabelFileError) as info:
        load_fluency_labels(path)
    lines = str(info.value).splitlines()
    expected = {2: "not valid JSON", 3: "label must be 'Yes' or 'No'", 4: "missing history",
                5: "next_query is empty", 6: "history is empty", 7: "history must be a list", 8: "role 'bot'",
                9: "no assistant message", 10: "duplicate id 'f1'", 11: "JSON object",
                12: "next_query must be a string", 13: "are coverage labels (--role coverage)", 14: "missing next_query"}
    assert len(lines) == len(expected)
    for line, (number, reason) in zip(lines, expected.items()):
        assert line.startswith(f"{path}:{number}: ") and reason in line, line
    with pytest.raises(LabelFileError, match="holds no labelled row"):
        load_fluency_labels(_write(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(LabelFileError, match="does not exist"):
        load_fluency_labels(tmp_path / "nope.jsonl")


def test_fluency_labels_are_read_case_insensitively(tmp_path):
    values = ["Yes", " no ", "YES", "False", "true", True, False]
    cases = load_fluency_labels(_write(tmp_path / "ok.jsonl", [_row(i, label=v) for i, v in enumerate(values)]))
    assert [c.label for c in cases] == [True, False, True, False, True, True, False]
    assert [c.line for c in cases] == list(range(1, 8)) and cases[0].id == "f0"
    assert load_fluency_labels(LABELS, limit=3) == load_fluency_labels(LABELS)[:3]


def test_a_file_of_the_other_role_gets_a_hint(tmp_path):
    with pytest.raises(LabelFileError) as info:
        load_fluency_labels(COVERAGE_LABELS)
    message = str(info.value)
    assert message.splitlines()[0].startswith(f"{COVERAGE_LABELS}:1: this is a coverage label row")
    assert "run with --role coverage (the default)" in message
    assert message.splitlines()[-1] == (f"{COVERAGE_LABELS} looks like a coverage label file: run "
                                        f"cirrus judge-eval --role coverage {COVERAGE_LABELS}")
    with pytest.raises(LabelFileError) as info:
        load_labels(LABELS)
    message = str(info.value)
    assert message.splitlines()[0].startswith(f"{LABELS}:1: this is a fluency label row") and "--role fluency" in message
    assert message.splitlines()[-1].endswith(f"run cirrus judge-eval --role fluency {LABELS}")
    # one stray row of the other role: its line says so, no whole-file hint
    mixed = _write(tmp_path / "mixed.jsonl", [_row(1), {"query": "q", "reference": "r", "candidate": "c",
                                                        "label": "Included"}])
    with pytest.raises(LabelFileError) as info:
        load_fluency_labels(mixed)
    assert str(info.value).splitlines() == [
        f"{mixed}:2: this is a coverage label row (query, reference, candidate, Included/Not Included labels), "
        "not a fluency one: run with --role coverage (the default), or give history, next_query, Yes/No labels"]
    assert row_role({"next_query": "x"}) is CalibratedRole.fluency and row_role({"query": "x"}) is CalibratedRole.coverage
    assert row_role({"query": "x", "next_query": "y"}) is None and row_role([1]) is None


# --- metrics ---------------------------------------------------------------------------------


def _case(i: int, label: bool) -> FluencyCase:
    return FluencyCase(i, f"c{i}", [{"role": "assistant", "content": "hi"}], f"next {i}", label)


def test_yes_is_the_positive_class(capsys):
    labels = [True, True, True, False, False]
    predictions = [True, False, True, True, False]
    results = [CaseResult(_case(i, label), predicted, "raw") for i, (label, predicted)
               in enumerate(zip(labels, predictions))]
    metrics = metrics_of(results + [CaseResult(_case(9, True), None, None, "APIError: down")])
    assert metrics.confusion == Confusion(tp=2, fp=1, fn=1, tn=1)
    assert metrics.precision == pytest.approx(2 / 3) and metrics.recall == pytest.approx(2 / 3)
    assert [r.record()["label"] for r in results] == ["Yes", "Yes", "Yes", "No", "No"]
    assert results[1].record() == {"line": 1, "id": "c1", "label": "Yes", "predicted": "No", "correct": False,
                                   "raw": "raw", "error": None}
    print_metrics(metrics, "fluency", 1, FLUENCY_SPEC)
    printed = capsys.readouterr().out
    for text in ("labelled Yes", "precision (Yes)", "recall (Yes)", "F1 (Yes)", "checker Yes", "checker No",
                 "label Yes", "label No", "columns: checker"):
        assert text in printed
    assert "Included" not in printed


def test_kappa_comes_from_sklearn_and_is_none_when_undefined():
    def by_hand(c: Confusion) -> float:
        n = c.n
        chance = (c.tp + c.fp) * (c.tp + c.fn) + (c.fn + c.tn) * (c.fp + c.tn)
        return (n * (c.tp + c.tn) - chance) / (n * n - chance)

    for cells in itertools.product(range(4), repeat=4):
        c = Confusion(*cells)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the undefined case warns nothing either
            kappa = cohen_kappa(c)
        one_class = c.n == 0 or c.tp + c.fp + c.fn == 0 or c.fp + c.fn + c.tn == 0
        assert (kappa is None) == one_class, cells
        if kappa is not None:
            assert kappa == pytest.approx(by_hand(c)), cells


def test_run_fluency_asks_with_history_and_next_message():
    class Checker:
        name = "scripted"

        def __init__(self) -> None:
            self.asked: list[tuple[list, str]] = []

        async def follows(self, history, next_query):
            self.asked.append((history, next_query))
            if next_query == "next 2":
                raise InfrastructureError("no answer")
            return Verdict(next_query == "next 0", "scripted")

    checker = Checker()
    cases = [_case(i, True) for i in range(3)]
    results = asyncio.run(run_fluency(checker, cases, concurrency=2))
    assert [r.predicted for r in results] == [True, False, None]
    assert results[2].error == "InfrastructureError: no answer"
    assert sorted(q for _, q in checker.asked) == ["next 0", "next 1", "next 2"]
    assert all(h == [{"role": "assistant", "content": "hi"}] for h, _ in checker.asked)


# --- the command ------------------------------------------------------------------------------


def _invoke(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["judge-eval", "--role", "fluency", *args, "-q"], env=ENV)
    assert result.exit_code == code, result.output
    return result.output


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_local_checker_on_the_shipped_file(tmp_path):
    results = tmp_path / "results.jsonl"
    output = _invoke(str(LABELS), "--judge-model", "local", "-o", str(results), "-w", str(tmp_path))
    cases = load_fluency_labels(LABELS)
    records = _records(results)
    assert [r["id"] for r in records] == [c.id for c in cases]
    assert [r["label"] for r in records] == ["Yes" if c.label else "No" for c in cases]
    assert all(r["predicted"] in ("Yes", "No") and r["error"] is None for r in records)
    assert f"judge-eval --role fluency: local-heuristic on fluency_labels.jsonl ({len(cases)} rows)" in output
    assert "checker Yes" in output and "precision (Yes)" in output and "Included" not in output
    assert "local fluency checker is an offline heuristic" in output


def _answer(verdict: bool | None, number: int) -> str:
    """The verdict in one of the shapes real models answer in, by ``number``."""
    if verdict is None:
        return "I cannot decide."
    shapes = [
        lambda yes: json.dumps({"reason": "scripted", "answer": "Yes" if yes else "No"}),
        lambda yes: f"The customer's message was checked.\n<answer>{'Yes' if yes else 'No'}</answer>",
        lambda yes: f"It depends on the agent's last reply.\n\n**Final answer:** {'Yes' if yes else 'No'}",
        lambda yes: f"结论：{'是' if yes else '否'}",
        lambda yes: json.dumps({"reason": "脚本", "answer": "是" if yes else "否"}, ensure_ascii=False),
    ]
    return shapes[number % len(shapes)](verdict)


def _between(text: str, tag: str) -> str:
    match = re.search(rf'<{tag}(?: id="\w+")?>\n?(.*?)\n?</{tag}(?: id="\w+")?>', text, re.S)
    assert match, text
    return match.group(1).strip()


def _scripted_checker(verdicts: dict[str, bool | None]):
    """An LLM fluency checker answering by the next customer message of the
    prompt (a repair request repeats the first prompt as messages[1])."""
    numbers = {query: number for number, query in enumerate(verdicts)}

    def rule(body: dict) -> str:
        query = _between(body["messages"][1]["content"], "next_customer_message")
        return _answer(verdicts[query], numbers[query])

    return rule


def _run_scripted(tmp_path: Path, verdicts: dict[str, bool | None]) -> tuple[str, list[dict], ChatServer]:
    results = tmp_path / "out" / "results.jsonl"
    with ChatServer(rule=_scripted_checker(verdicts)) as server:
        output = _invoke(str(LABELS), "--judge-model", "scripted-fluency", "--judge-base-url", server.base_url,
                         "--judge-api-key-env", KEY_ENV, "--concurrency", "8", "-o", str(results),
                         "-w", str(tmp_path))
    return output, _records(results), server


def test_a_scripted_checker_that_always_agrees(tmp_path):
    cases = load_fluency_labels(LABELS)
    output, records, server = _run_scripted(tmp_path, {c.next_query.strip(): c.label for c in cases})
    assert re.search(r"accuracy\s*│\s*1\.0000 \(100\.00%\)", output)
    assert re.search(r"Cohen's kappa\s*│\s*1\.0000", output)
    assert "llm-fluency:scripted-fluency" in output and "offline heuristic" not in output
    assert all(r["correct"] and r["label"] == r["predicted"] for r in records) and len(records) == len(cases)
    assert len(server.requests) == len(cases)
    assert "<conversation id=" in server.requests[0]["messages"][1]["content"]


def test_a_scripted_checker_flipping_known_rows_gives_the_exact_matrix(tmp_path):
    cases = load_fluency_labels(LABELS)
    yes = [c for c in cases if c.label]
    no = [c for c in cases if not c.label]
    flipped = {yes[0].id, yes[5].id, no[1].id, no[7].id, no[-1].id}  # 2 Yes rows and 3 No rows
    unreadable = yes[-1].id  # an infrastructure failure, left out of the metrics
    verdicts = {c.next_query.strip(): None if c.id == unreadable else c.label != (c.id in flipped) for c in cases}
    output, records, _ = _run_scripted(tmp_path, verdicts)
    tp, fn, fp, tn = len(yes) - 3, 2, 3, len(no) - 3
    assert re.search(rf"label Yes\s*│\s*{tp}\s*│\s*{fn}\s*│", output)
    assert re.search(rf"label No\s*│\s*{fp}\s*│\s*{tn}\s*│", output)
    assert re.search(r"rows failed \(infrastructure\)\s*│\s*1\s*│", output)
    assert re.search(rf"rows scored\s*│\s*{len(cases) - 1}\s*│", output)
    by_id = {r["id"]: r for r in records}
    assert by_id[unreadable]["predicted"] is None and "unreadable" in by_id[unreadable]["error"]
    assert {r["id"] for r in records if r["correct"] is False} == flipped
    metrics = metrics_of([CaseResult(c, None if c.id == unreadable else c.label != (c.id in flipped))
                          for c in cases])
    assert metrics.confusion == Confusion(tp=tp, fp=fp, fn=fn, tn=tn)
    assert f"{metrics.kappa:.4f}" in output and f"{metrics.accuracy:.4f}" in output


def test_command_errors_exit_2(tmp_path):
    output = _invoke(str(COVERAGE_LABELS), code=2)
    assert "looks like a coverage label file" in output and "--role coverage" in output
    bad = _write(tmp_path / "bad.jsonl", [_row(1), _row(2, label="Included")])
    assert f"{bad}:2: label must be 'Yes' or 'No'" in _invoke(str(bad), code=2)
    # and the other way round: a fluency file given to the coverage judge (the default role)
    result = CliRunner().invoke(app, ["judge-eval", str(LABELS), "-q"], env=ENV)
    assert result.exit_code == 2 and "--role fluency" in result.output
