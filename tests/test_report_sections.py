"""The report page's Dataset, "Where the two runs part" and "Why turns were
rejected" sections: on the sample workspace's two offline baselines (the
numbers checked against ``cirrus.stats``, ``cirrus diff`` and the runs'
tasks.parquet, computed here independently), and on hand-made runs
(failure categories counted by hand, the notes for what is missing)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.report.command import report_command
from cirrus.report.extras import ReportExtras, load_run_diff
from cirrus.report.html import render_html
from cirrus.report.loading import load_runs
from cirrus.report.views.failures import failure_counts, failure_view
from cirrus.report.writing import STATS_FILE
from cirrus.schema import Task
from cirrus.stats import compute_stats
from cirrus.workspace_stats import stats_json
from tests.conftest import copy_workspace
from tests.test_report_tables import RUN_A_CHECKPOINTS, RUN_A_TASKS, RUN_B_CHECKPOINTS, RUN_B_TASKS, TASKS, write_run

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"> & </pre></details>'
NOTE = "no failure categories recorded (run finished before Cirrus recorded them; cirrus rescore fills them)"


# --------------------------------------------------------------------------
# A small DOM of the page (html.parser; no extra dependency)
# --------------------------------------------------------------------------

_VOID = {"br", "meta", "img", "hr", "input", "link", "col", "source", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        return [n for n in self.iter()
                if (tag is None or n.tag == tag) and (cls is None or cls in n.attrs.get("class", "").split())
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node | None:
        found = self.find_all(tag, cls, **attrs)
        return found[0] if found else None

    def rows(self) -> list[list[str]]:
        """Cell texts of a table's rows (head, body and foot)."""
        return [[" ".join(c.text().split()) for c in tr.children if isinstance(c, Node) and c.tag in ("td", "th")]
                for tr in self.find_all("tr")]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(text: str) -> Node:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    return builder.root


def _ids(page: Node) -> list[str]:
    return [n.attrs["id"] for n in page.iter() if "id" in n.attrs]


# --------------------------------------------------------------------------
# The sample workspace's two baselines
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory, sample_runs) -> Path:
    """The sample workspace with its oracle and retrieval runs; the oracle's
    first customer message carries HTML to be escaped."""
    workspace = copy_workspace(sample_runs, tmp_path_factory.mktemp("report-sections") / "ws")
    transcripts = workspace / "reports/oracle/transcripts.jsonl"
    lines = transcripts.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["turns"][0]["query"] = HOSTILE + first["turns"][0]["query"]
    lines[0] = json.dumps(first)
    transcripts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return workspace


@pytest.fixture(scope="module")
def two(sample: Path) -> dict:
    result = report_command(["oracle", "retrieval"], sample, None, 20)
    text = result["files"]["report.html"].read_text(encoding="utf-8")
    return {**result, "page": parse(text), "text": text}


def _differing(workspace: Path) -> set[tuple[str, int]]:
    """(task, attempt) pairs both runs finished whose covered or success differ,
    straight from the two tasks.parquet files."""
    a = pl.read_parquet(workspace / "reports/oracle/tasks.parquet")
    b = pl.read_parquet(workspace / "reports/retrieval/tasks.parquet")
    joined = a.join(b, on=["task_id", "attempt"], suffix="_b").filter(
        (pl.col("status") == "ok") & (pl.col("status_b") == "ok")
        & ((pl.col("covered") != pl.col("covered_b")) | (pl.col("success") != pl.col("success_b"))))
    return {(r["task_id"], r["attempt"]) for r in joined.iter_rows(named=True)}


def test_two_runs_have_the_three_sections_linked_from_the_menu(two):
    page = two["page"]
    ids = _ids(page)
    for section in ("dataset", "diff", "failures"):
        assert section in ids
        assert page.find("a", href=f"#{section}") is not None, section
    assert len(ids) == len(set(ids))
    links = {n.attrs["href"][1:] for n in page.find_all("a") if n.attrs.get("href", "").startswith("#")}
    assert links <= set(ids), sorted(links - set(ids))[:5]
    # still one file: nothing fetched from elsewhere, no script
    assert not [n for n in page.iter() if n.tag in ("script", "link", "img", "iframe")]
    assert not [n for n in page.iter() if n.attrs.get("src") or n.attrs.get("href", "#").split("#")[0]]


def test_the_diff_section_lists_what_cirrus_diff_finds(sample, two):
    want = _differing(sample)
    assert len(want) > 0
    section = two["page"].find("section", id="diff")
    items = section.find_all("details", cls="diff-item")
    shown = [(n.attrs["data-task"], int(n.attrs["data-attempt"])) for n in items]
    assert len(shown) == len(set(shown)) == len(want) and set(shown) == want
    assert section.find("strong", cls="diff-count").text() == str(len(want))
    # the same rows as diff.parquet beside the page, and as `cirrus diff` writes them
    table = pl.read_parquet(two["out_dir"] / "diff.parquet")
    assert set(zip(table["task_id"], table["attempt"])) == want and "diff.parquet" in two["files"]
    result = CliRunner().invoke(app, ["diff", "oracle", "retrieval", "-w", str(sample)])
    assert result.exit_code == 0, result.output
    assert pl.read_parquet(sample / "reports/_diff/oracle+retrieval/diff.parquet").equals(table)
    # each item: first divergent checkpoint, query, reference, both replies and verdicts, links to both transcripts
    first = items[0]
    row = table.row(0, named=True)
    summary = " ".join(first.find("summary").text().split())
    assert f"parts at checkpoint {row['checkpoint']}" in summary
    sides = first.find_all("div", cls="diff-side")
    assert [s.attrs["data-side"] for s in sides] == ["A", "B"]
    assert " ".join(row["reply_a"].split()) in " ".join(sides[0].text().split())
    assert row["verdict_b"] in sides[1].text()
    for side in sides:
        link = side.find("a")
        assert link is not None and two["page"].find("article", id=link.attrs["href"][1:]) is not None


def test_ticket_text_in_the_diff_is_escaped(two):
    section = two["page"].find("section", id="diff")
    assert not section.find_all("script") and not section.find_all("img")
    customers = [n.text() for n in section.find_all("div", cls="customer")]
    assert any(text.startswith("Customer" + HOSTILE) for text in customers)


def test_the_dataset_section_shows_what_cirrus_stats_counts(sample, two):
    lines = (sample / "tickets/tasks.jsonl").read_text(encoding="utf-8").splitlines()
    raw = [json.loads(line) for line in lines if line.strip()]
    section = two["page"].find("section", id="dataset")
    overview = dict(section.find("table", cls="dataset-overview").rows())
    assert overview["tasks"] == str(len(raw)) == "31"
    assert overview["checkpoints"] == str(sum(len(t["checkpoints"]) for t in raw))
    # categories counted here from the raw lines: name -> tasks, every one on the page
    categories = Counter(t["category"] for t in raw)
    shown = {name: int(n) for name, n, _ in section.find("table", cls="dataset-categories").rows()[1:]}
    assert shown == dict(categories)
    stats = compute_stats(Task.model_validate(t) for t in raw)
    replies = {name: int(n) for name, n, _ in section.find("table", cls="dataset-reply-types").rows()[1:]}
    assert replies == stats.reply_types and sum(replies.values()) == int(overview["checkpoints"])
    quartiles = {row[0]: row[1:] for row in section.find("table", cls="dataset-distributions").rows()[1:]}
    dist = stats.input_tokens
    assert quartiles["input tokens"][:5] == [str(dist.min), f"{dist.p25:.2f}", str(int(dist.p50)), f"{dist.p75:.2f}",
                                             str(dist.max)]
    tools = section.find("table", cls="dataset-tools").rows()[1:]
    assert [(name, int(calls)) for _, name, calls in tools] == [(t.name, t.calls) for t in stats.top_tools]
    assert overview["tasks with tool calls"] == f"{stats.tasks_with_tool_calls} ({stats.tool_call_share:.1%})"
    # the plots: categories, distributions, shares, reply types, tools
    assert {n.attrs["aria-label"] for n in section.find_all("svg")} == {
        "chart-dataset-categories", "chart-dataset-distributions", "chart-dataset-shares",
        "chart-dataset-reply-types", "chart-dataset-tools"}
    # stats.json beside the page is the text `cirrus stats` writes
    assert (two["out_dir"] / STATS_FILE).read_text(encoding="utf-8") == stats_json(stats)


def test_the_failure_section_of_the_sample_runs(sample, two):
    section = two["page"].find("section", id="failures")
    names = pl.read_parquet_schema(sample / "reports/oracle/checkpoints.parquet")
    if "failure" not in names:  # runs written before the column existed
        assert " ".join(section.text().split()).endswith(NOTE + ".")
    else:
        counts, missing = failure_counts({r: pl.read_parquet(sample / f"reports/{r}/checkpoints.parquet")
                                          for r in ("oracle", "retrieval")})
        assert missing == []
        table = section.find("table", cls="failures")
        if counts.height:  # one row per category any run has
            shown = [n.attrs["data-failure"] for n in table.find_all("tr") if "data-failure" in n.attrs]
            assert sorted(shown) == sorted(set(counts["failure"]))


def test_one_run_has_no_diff_section_and_no_diff_file(sample):
    result = report_command(["oracle"], sample, sample / "one", 0)
    page = parse(result["files"]["report.html"].read_text(encoding="utf-8"))
    assert page.find("section", id="diff") is None and page.find("a", href="#diff") is None
    assert "diff.parquet" not in result["files"] and not (sample / "one/diff.parquet").exists()
    assert page.find("section", id="dataset") is not None and (sample / "one" / STATS_FILE).is_file()


def test_a_second_report_in_the_same_folder_removes_the_stale_diff(sample, two):
    # the first report: the two runs' (``two``, copied: the shared one stays as it is)
    out = shutil.copytree(two["out_dir"], sample / "again")
    assert (out / "diff.parquet").is_file()
    report_command(["retrieval"], sample, out, 0)
    assert not (out / "diff.parquet").exists()


# --------------------------------------------------------------------------
# Hand-made runs
# --------------------------------------------------------------------------


@pytest.fixture
def hand_ws(tmp_path: Path) -> Path:
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    write_run(tmp_path, "a", "model-a", 2, RUN_A_TASKS, RUN_A_CHECKPOINTS)
    write_run(tmp_path, "b", "model-b", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    return tmp_path


def _add_failures(workspace: Path, run_id: str, failures: dict[tuple[str, int, int], str]) -> None:
    """Give a hand-made run a ``failure`` column: ``failures[(task, attempt,
    checkpoint)]``, null elsewhere."""
    path = workspace / "reports" / run_id / "checkpoints.parquet"
    frame = pl.read_parquet(path)
    column = [failures.get((r["task_id"], r["attempt"], r["checkpoint"])) for r in frame.iter_rows(named=True)]
    frame.with_columns(pl.Series("failure", column, dtype=pl.Utf8)).write_parquet(path)


def test_failure_counts_and_view_by_hand():
    frames = {
        # a: 5 rejected turns: wrong_tool 2, missed_tool_call 1, contradiction 1, one without a category
        "a": pl.DataFrame({"accepted": [True, False, False, False, False, False, True],
                           "failure": [None, "wrong_tool", "missed_tool_call", "wrong_tool", "contradiction", None,
                                       None]}),
        # b: contradiction 3, wrong_tool 1
        "b": pl.DataFrame({"accepted": [False, False, False, False],
                           "failure": ["contradiction", "contradiction", "wrong_tool", "contradiction"]}),
        "old": pl.DataFrame({"accepted": [False, True]}),  # written before the column existed
        # accepted with a fluency No is a failed turn too (not_followable); fluency null is not a No
        "fluency": pl.DataFrame({"accepted": [True, True, True], "fluent": [False, None, True],
                                 "failure": ["not_followable", None, None]}),
    }
    counts, missing = failure_counts(frames)
    assert missing == ["old"]
    assert {(r["run_id"], r["failure"]): r["n"] for r in counts.iter_rows(named=True)} == {
        ("a", "wrong_tool"): 2, ("a", "missed_tool_call"): 1, ("a", "contradiction"): 1,
        ("b", "contradiction"): 3, ("b", "wrong_tool"): 1, ("fluency", "not_followable"): 1}
    view = failure_view(frames)
    assert view["runs"] == ["a", "b", "fluency"] and view["missing"] == ["old"]
    # most failed turns over all runs first: contradiction 1 + 3 = 4, wrong_tool 2 + 1 = 3, then two with 1
    # (missed_tool_call before not_followable: the taxonomy's order, and also by name)
    assert [row["failure"] for row in view["rows"]] == ["contradiction", "wrong_tool", "missed_tool_call",
                                                        "not_followable"]
    assert view["rows"][1]["counts"] == {"a": 2, "b": 1, "fluency": 0}
    # shares of each run's categorised failed turns: a 2/4 = 50.0%, b 1/4 = 25.0%, fluency 0/1
    assert view["rows"][1]["shares"] == {"a": "50.0%", "b": "25.0%", "fluency": "0.0%"}
    assert view["categorised"] == {"a": 4, "b": 4, "fluency": 1}
    # failed: a's 5 rejected; b's 4; fluency's one accepted turn with a fluency No (None is not a No)
    assert view["failed"] == {"a": 5, "b": 4, "fluency": 1}
    assert view["uncategorised"] == {"a": 1, "b": 0, "fluency": 0}


def test_a_failure_column_is_rendered_with_its_counts(hand_ws):
    # a's rejected turns (accepted false): T1 attempt 1 cp 1, T2 attempt 0 cp 2; b's: T2 attempt 0 cp 1 and
    # T4 attempt 0 cp 1 (left without a category)
    _add_failures(hand_ws, "a", {("T1", 1, 1): "wrong_tool", ("T2", 0, 2): "wrong_tool"})
    _add_failures(hand_ws, "b", {("T2", 0, 1): "premature_solution"})
    runs = load_runs(hand_ws, ["a", "b"])
    page = parse(render_html(runs, {}, hand_ws, extras=ReportExtras()))
    section = page.find("section", id="failures")
    rows = section.find("table", cls="failures").rows()
    # wrong_tool: a 2 (100.0% of its 2), b 0; premature_solution: a 0, b 1 (100.0%)
    assert rows[1:3] == [["wrong_tool", "2", "100.0%", "0", "0.0%"], ["premature_solution", "0", "0.0%", "1", "100.0%"]]
    assert rows[-2:] == [["categorised", "2", "", "1", ""], ["failed turns", "2", "", "2", ""]]
    assert "Run b: 1 failed turn(s) without a category." in " ".join(section.text().split())
    assert section.find("svg", aria_label="chart-failures") is not None
    assert NOTE not in " ".join(section.text().split())


def test_runs_without_the_failure_column_get_the_note(hand_ws):
    _add_failures(hand_ws, "a", {("T1", 1, 1): "wrong_tool"})
    page = parse(render_html(load_runs(hand_ws, ["a", "b"]), {}, hand_ws, extras=ReportExtras()))
    section = page.find("section", id="failures")
    assert section.find("table", cls="failures").rows()[1] == ["wrong_tool", "1", "100.0%"]  # a only
    assert f"b: {NOTE}." in " ".join(section.text().split())
    page = parse(render_html(load_runs(hand_ws, ["b"]), {}, hand_ws, extras=ReportExtras()))
    section = page.find("section", id="failures")
    assert section.find("table") is None and " ".join(section.text().split()).endswith(NOTE + ".")


def test_diff_section_only_for_exactly_two_runs(hand_ws):
    write_run(hand_ws, "c", "model-c", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    three = parse(render_html(load_runs(hand_ws, ["a", "b", "c"]), {}, hand_ws))
    assert three.find("section", id="diff") is None and three.find("a", href="#diff") is None
    assert "exactly two runs" in three.text()
    # two hand-made runs without attempts.jsonl: the section says why there is no diff
    assert load_run_diff(hand_ws, ["a", "b"])[0] is None
    two = parse(render_html(load_runs(hand_ws, ["a", "b"]), {}, hand_ws))
    section = two.find("section", id="diff")
    assert "share no recorded (task, attempt)" in section.text() and not section.find_all("details")


def test_a_workspace_without_tasks_says_so(hand_ws, tmp_path):
    runs = load_runs(hand_ws, ["a"])
    empty = tmp_path / "empty"
    (empty / "tickets").mkdir(parents=True)
    (empty / "tickets/tasks.jsonl").write_text("")
    section = parse(render_html(runs, {}, empty)).find("section", id="dataset")
    assert "has no tasks" in section.text() and not section.find_all("svg") and not section.find_all("table")
    missing = parse(render_html(runs, {}, tmp_path / "nowhere")).find("section", id="dataset")
    assert "no dataset statistics" in missing.text() and "does not exist" in missing.text()
