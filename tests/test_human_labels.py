"""Human labels that calibrate the judge (issue 27 item 2,
docs/human-labels.md): the stratified sample, the CSV round trip, bad rows
named by line and reason while the rest import, a stale reply refused, the
viewer's label form (same-origin only), and labels from the viewer and from
CSV changing ``cirrus judge-eval --human``'s figures and ``cirrus report``'s
line."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.judges import human_labels as hl
from cirrus.view import create_app

RUN = "retrieval"  # the offline retrieval baseline: its judge (the local heuristic) says Not Included throughout
ENV = {"COLUMNS": "200"}
BASE = "http://127.0.0.1:8000"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env=ENV)


def _accuracy(output: str) -> float:
    match = re.search(r"accuracy\s*│\s*([0-9.]+)", output)
    assert match, output
    return float(match.group(1))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(hl.CSV_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _item(i: int, verdict: bool, language: str) -> hl.JudgedItem:
    return hl.JudgedItem("r", f"T{i:03d}", 0, 1, 1, language, verdict, "raw", "q", f"reply {i}", "ref", None)


# --------------------------------------------------------------------------
# sampling (pure)


def test_sample_is_stratified_by_verdict_and_language_and_deterministic():
    items = ([_item(i, True, "en") for i in range(60)] + [_item(100 + i, False, "en") for i in range(30)]
             + [_item(200 + i, True, "zh") for i in range(9)] + [_item(300, False, "zh")])
    chosen = hl.sample(items, 20, seed=7)
    assert len(chosen) == 20 and len({i.key for i in chosen}) == 20
    strata = Counter((i.verdict, i.language) for i in chosen)
    assert strata[(False, "zh")] == 1  # a stratum of one is never left out
    assert strata[(True, "zh")] >= 1
    assert strata[(True, "en")] > strata[(False, "en")] >= 5  # in proportion to the strata's sizes
    assert hl.sample(items, 20, seed=7) == chosen  # same seed, same sample
    assert hl.sample(items, 20, seed=8) != chosen  # another seed, another sample
    assert hl.sample(items, 500, seed=1) == items  # fewer items than n: all of them
    with pytest.raises(hl.HumanLabelError):
        hl.sample(items, 0)


def test_sample_command_writes_a_csv_to_label(sample_runs_copy: Path, tmp_path: Path):
    out = tmp_path / "s.csv"
    result = _cli("annotate", "sample", RUN, "--n", "7", "--seed", "3", "--out", str(out), "-w", str(sample_runs_copy))
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert len(rows) == 7 and all(r["run_id"] == RUN and r["human"] == "" and len(r["reply_sha256"]) == 64
                                  for r in rows)
    again = tmp_path / "t.csv"
    _cli("annotate", "sample", RUN, "--n", "7", "--seed", "3", "--out", str(again), "-w", str(sample_runs_copy))
    assert again.read_bytes() == out.read_bytes()
    assert not (sample_runs_copy / hl.LABELS_FILE).exists()  # sampling stores no label


# --------------------------------------------------------------------------
# CSV


def test_csv_round_trip_and_labels_change_judge_eval(sample_runs_copy: Path, tmp_path: Path):
    ws = sample_runs_copy
    empty = _cli("judge-eval", "--human", RUN, "-w", str(ws))
    assert empty.exit_code == 2 and "no human label" in empty.output
    exported = tmp_path / "all.csv"
    assert _cli("annotate", "export", RUN, "--out", str(exported), "-w", str(ws)).exit_code == 0
    rows = _rows(exported)
    assert rows and all(r["judge_verdict"] == "Not Included" for r in rows)
    for row in rows[:4]:
        row["human"] = "right"
    rows[4].update(human="wrong", correct_verdict="Included", note="=covered the steps")
    result = _cli("annotate", "import", str(_write(tmp_path / "in.csv", rows)), "-w", str(ws))
    assert result.exit_code == 0, result.output
    assert "imported 5 labels" in result.output
    stored = hl.read_labels(ws, RUN)
    assert [label.human for label in stored] == ["right"] * 4 + ["wrong"]
    assert stored[4].correct_verdict == "Included" and stored[4].note == "=covered the steps"
    assert stored[4].reply_sha256 == rows[4]["reply_sha256"] and stored[4].source == "csv"
    first = _cli("judge-eval", "--human", RUN, "-w", str(ws))
    assert first.exit_code == 0, first.output
    assert _accuracy(first.output) == pytest.approx(0.8)
    assert "per language" in first.output and re.search(r"│ en\s+│\s+5 │", first.output)
    # exported again: the labels are filled in, the note guarded against spreadsheet formulas
    again = _rows(Path(hl.write_csv(tmp_path / "again.csv", hl.judged_items(ws, RUN),
                                    {lab.key: lab for lab in hl.current_labels(ws, RUN).labels})))
    assert [r["human"] for r in again[:5]] == ["right"] * 4 + ["wrong"]
    assert again[4]["note"] == "'=covered the steps" and again[4]["correct_verdict"] == "Included"
    # the latest label of an item wins: the fifth was right after all
    rows[4].update(human="right", correct_verdict="", note="")
    assert _cli("annotate", "import", str(_write(tmp_path / "fix.csv", rows[4:5])), "-w", str(ws)).exit_code == 0
    assert _accuracy(_cli("judge-eval", "--human", RUN, "-w", str(ws)).output) == pytest.approx(1.0)


def test_bad_rows_are_named_by_line_and_reason_and_the_rest_import(sample_runs_copy: Path, tmp_path: Path):
    ws = sample_runs_copy
    rows = [{k: r[k] for k in hl.CSV_COLUMNS} for r in _rows(Path(hl.write_csv(
        tmp_path / "x.csv", hl.judged_items(ws, RUN)[:6])))]
    for row in rows[:5]:
        row.update(query="one line", reply="one line", reference="one line", judge_raw="one line")
    rows[0]["human"] = "wrong"
    rows[1]["human"] = "maybe"  # not a label
    rows[2].update(human="wrong", correct_verdict="Not Included")  # contradicts itself
    rows[3].update(human="right", attempt="x")
    rows[4].update(human="right", task_id="NO-SUCH-TASK")
    rows[5]["human"] = ""  # not labelled yet: skipped, no problem
    path = _write(tmp_path / "bad.csv", rows)
    result = _cli("annotate", "import", str(path), "-w", str(ws))
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "imported 1 labels" in text and "1 rows unlabelled, 4 refused" in text
    assert f"{path}:3: row 2: the label must be 'right' or 'wrong', not 'maybe'" in text
    assert f"{path}:4: row 3:" in text and "correct_verdict is Not Included" in text
    assert f"{path}:5: row 4: attempt must be a whole number" in text
    assert f"{path}:6: row 5: run {RUN} has no judged verdict for task 'NO-SUCH-TASK'" in text
    assert [label.task_id for label in hl.read_labels(ws)] == [rows[0]["task_id"]]
    # a text over several lines: the row is named by the line it starts on
    multi = [dict(rows[0], human="maybe", reply="line one\nline two"), dict(rows[1], human="maybe")]
    problems = hl.import_csv(ws, _write(tmp_path / "multi.csv", multi), write=False).problems
    assert [p.split(": ")[0].rsplit(":", 1)[1] for p in problems] == ["2", "4"]


def test_a_label_on_a_reply_the_run_no_longer_holds_is_refused(sample_runs_copy: Path, tmp_path: Path):
    ws = sample_runs_copy
    rows = _rows(Path(hl.write_csv(tmp_path / "x.csv", hl.judged_items(ws, RUN)[:2])))
    rows[0]["human"] = rows[1]["human"] = "wrong"
    rows[0]["reply_sha256"] = "0" * 64  # labelled on another reply
    result = hl.import_csv(ws, _write(tmp_path / "stale.csv", rows))
    assert len(result.imported) == 1 and len(result.problems) == 1
    assert "is no longer the one labelled (its reply hash differs" in result.problems[0]
    # the run made again: a stored label on the old reply is left out, counted
    transcripts = ws / "reports" / RUN / "transcripts.jsonl"
    lines = [json.loads(line) for line in transcripts.read_text(encoding="utf-8").splitlines()]
    target = next(t for t in lines if t["task_id"] == rows[1]["task_id"] and t["attempt"] == int(rows[1]["attempt"]))
    target["turns"][0]["agent_text"] += " (made again)"
    transcripts.write_text("".join(json.dumps(t) + "\n" for t in lines), encoding="utf-8")
    current = hl.current_labels(ws, RUN)
    assert current.labels == [] and len(current.stale) == 1
    result = _cli("judge-eval", "--human", RUN, "-w", str(ws))
    assert result.exit_code == 2 and "1 labels left out" in " ".join(result.output.split())


# --------------------------------------------------------------------------
# the viewer


def _form(page: str, checkpoint: int = 1) -> dict[str, str]:
    form = re.search(r'<form class="label-form" method="post" action="([^"]+)">(.*?)</form>', page, re.S)
    assert form, "no label form on the page"
    hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form.group(2)))
    return {"action": form.group(1), **hidden}


def test_viewer_labels_change_judge_eval_and_the_report(sample_runs_copy: Path):
    ws = sample_runs_copy
    client = TestClient(create_app(ws), base_url=BASE)
    items = hl.judged_items(ws, RUN)
    pages = [f"/runs/{RUN}/tasks/{i.task_id}/attempts/{i.attempt}" for i in items[:2]]
    for url, human in zip(pages, ("right", "wrong")):
        form = _form(client.get(url).text)
        assert form["action"] == f"{url}/labels"
        answer = client.post(form.pop("action"), data={**form, "human": human, "note": "<b>seen</b>"},
                             headers={"Origin": BASE}, follow_redirects=False)
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == f"{url}#checkpoint-{form['turn']}"
    page = client.get(pages[1]).text
    assert "the judge was <b>wrong</b> (Included)" in page and "&lt;b&gt;seen&lt;/b&gt;" in page
    labels = hl.read_labels(ws, RUN)
    assert [(lab.human, lab.source) for lab in labels] == [("right", "view"), ("wrong", "view")]
    result = _cli("judge-eval", "--human", RUN, "-w", str(ws))
    assert result.exit_code == 0, result.output
    assert _accuracy(result.output) == pytest.approx(0.5)
    # the report says how the judge did against people; the oracle run was never checked
    report = _cli("report", RUN, "oracle", "--bootstrap", "0", "-w", str(ws))
    assert report.exit_code == 0, report.output
    text = " ".join(report.output.split())
    assert f"run {RUN}: the judge was checked against people on 2 labels: accuracy 0.50" in text
    assert "run oracle: the judge was never checked against people" in text
    manifest = json.loads(next((ws / "reports/_compare").glob("*/report.json")).read_text())
    assert manifest["human_labels"][RUN]["labels"] == 2
    assert manifest["human_labels"]["oracle"]["labels"] == 0


def test_viewer_refuses_cross_site_and_bad_label_posts(sample_runs_copy: Path):
    ws = sample_runs_copy
    item = hl.judged_items(ws, RUN)[0]
    url = f"/runs/{RUN}/tasks/{item.task_id}/attempts/{item.attempt}"
    client = TestClient(create_app(ws), base_url=BASE)
    form = _form(client.get(url).text)
    action = form.pop("action")
    good = {**form, "human": "wrong"}
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Origin": "http://rebind.example:8000", "Host": "rebind.example:8000"}):
        assert client.post(action, data=good, headers=headers, follow_redirects=False).status_code == 403
    same = {"Origin": BASE}
    assert client.post(action, data={**good, "human": "maybe"}, headers=same).status_code == 400
    assert client.post(action, data={**good, "reply_sha256": "0" * 64}, headers=same).status_code == 400
    assert client.post(action, data={**good, "checkpoint": "99"}, headers=same).status_code == 400
    assert client.post(action, content=json.dumps(good), headers={**same, "Content-Type": "application/json"}
                       ).status_code == 415
    assert client.post(f"/runs/{RUN}/tasks/NOPE/attempts/0/labels", data=good, headers=same).status_code == 404
    assert client.get(action).status_code == 405
    assert not (ws / hl.LABELS_FILE).exists()
    # the side-by-side page shows no form; the form's own origin is taken
    assert client.post(action, data=good, headers={"Referer": BASE + url}, follow_redirects=False).status_code == 303
    assert len(hl.read_labels(ws)) == 1
