"""The numbers of the HTML report's leaderboard are the numbers of
``leaderboard.parquet`` (and of ``intervals.parquet`` for the brackets), each
in its own column.

``cirrus report`` is run through the command line; report.html is read with
the standard library's HTML parser, the leaderboard table found by its header
cells, and every cell of every run compared with the Parquet row, formatted
the way the page formats it (``cirrus.report.views.cells.page_value``: three decimals, AMTL one,
"–" for a missing value; intervals with two decimals, AMTL's with one).

The offline baselines on the sample workspace score 1 or 0 on most metrics,
so two swapped columns can show the same text there; the hand-made runs of
test_report_tables.py have seven different leaderboard numbers, and the test
on them checks that every two metric columns show different text, so any
swap of two columns fails it.
"""

from __future__ import annotations

import math
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from tests.test_report_tables import (
    RUN_A_CHECKPOINTS,
    RUN_A_TASKS,
    RUN_B_CHECKPOINTS,
    RUN_B_TASKS,
    TASKS,
    write_run,
)

# header cell -> leaderboard column and the digits the page shows it with
METRICS = {
    "SR pass@1": ("sr_pass1", 3),
    "SR pass@K": ("sr_pass_at_k", 3),
    "pass^K": ("pass_hat_k", 3),
    "ATPR": ("atpr", 3),
    "ALJ": ("alj", 3),
    "ANEI": ("anei", 3),
    "AMTL": ("amtl", 1),
}
OTHER_HEADERS = ("run", "model", "tasks (errors)", "cost", "judge")
DASH = "–"  # what the page shows for a missing value


# --------------------------------------------------------------------------
# Reading the page
# --------------------------------------------------------------------------


class _Cell:
    """One table cell: its own text (outside any child element), the text of
    its spans by class, and all of its text."""

    def __init__(self) -> None:
        self.own: list[str] = []
        self.spans: dict[str, list[str]] = {}
        self.all: list[str] = []

    @staticmethod
    def text(parts: list[str]) -> str:
        return " ".join(" ".join(parts).split())


class _Tables(HTMLParser):
    """Every <table> of a page: its header cells (<th>) and its body rows
    (<tr> of <td> cells)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []  # tables being read, innermost last
        self._in_head = False
        self._header: list[str] | None = None  # text of the <th> being read
        self._cell: _Cell | None = None  # the <td> being read
        self._spans: list[str] = []  # classes of the spans open in that cell

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._open.append({"headers": [], "rows": []})
        if not self._open:
            return
        table = self._open[-1]
        if tag == "thead":
            self._in_head = True
        elif tag == "tr" and not self._in_head:
            table["rows"].append([])
        elif tag == "th":
            self._header = []
        elif tag == "td":
            assert table["rows"], "a <td> outside a body row"
            self._cell = _Cell()
            self._spans = []
            table["rows"][-1].append(self._cell)
        elif tag == "span" and self._cell is not None:
            self._spans.append(dict(attrs).get("class") or "")

    def handle_endtag(self, tag: str) -> None:
        if not self._open:
            return
        if tag == "table":
            self.tables.append(self._open.pop())
        elif tag == "thead":
            self._in_head = False
        elif tag == "th" and self._header is not None:
            self._open[-1]["headers"].append(" ".join("".join(self._header).split()))
            self._header = None
        elif tag == "td":
            self._cell = None
        elif tag == "span" and self._cell is not None and self._spans:
            self._spans.pop()

    def handle_data(self, data: str) -> None:
        if self._header is not None:
            self._header.append(data)
        elif self._cell is not None:
            self._cell.all.append(data)
            if not self._spans:
                self._cell.own.append(data)
            for name in self._spans:
                self._cell.spans.setdefault(name, []).append(data)


def leaderboard_cells(html: str) -> dict[str, dict[str, _Cell]]:
    """``{run_id: {header: cell}}`` of the page's leaderboard table: the one
    table whose header cells name every leaderboard column."""
    parser = _Tables()
    parser.feed(html)
    parser.close()
    wanted = set(METRICS) | set(OTHER_HEADERS)
    found = [t for t in parser.tables if wanted <= set(t["headers"])]
    assert len(found) == 1, [t["headers"] for t in parser.tables]
    table = found[0]
    headers = table["headers"]
    assert len(headers) == len(set(headers)), headers
    rows = {}
    for row in table["rows"]:
        assert len(row) == len(headers), (headers, [c.text(c.all) for c in row])
        cells = dict(zip(headers, row))
        run_id = cells["run"].text(cells["run"].all)
        assert run_id not in rows, f"run {run_id!r} shown twice"
        rows[run_id] = cells
    return rows


# --------------------------------------------------------------------------
# What the page shows for a value
# --------------------------------------------------------------------------


def shown(value: Any, digits: int) -> str:
    """``cirrus.report.views.cells.page_value``, written out again."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def overall_interval(intervals: pl.DataFrame | None, run_id: str, metric: str) -> tuple[float, float] | None:
    """The run's overall interval of ``metric`` (the ``overall`` dimension has
    a single group: the group column is not read)."""
    if intervals is None:
        return None
    rows = intervals.filter((pl.col("run_id") == run_id) & (pl.col("dimension") == "overall")
                            & (pl.col("metric") == metric))
    assert rows.height <= 1, rows
    if rows.is_empty():
        return None
    low, high = rows["ci_low"][0], rows["ci_high"][0]
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    return low, high


def check_leaderboard(out_dir: Path) -> dict[str, dict[str, str]]:
    """Compare every leaderboard cell of ``out_dir/report.html`` with
    ``leaderboard.parquet`` and ``intervals.parquet``; the metric cells' values
    as shown, by run and header."""
    board = pl.read_parquet(out_dir / "leaderboard.parquet")
    intervals_file = out_dir / "intervals.parquet"
    intervals = pl.read_parquet(intervals_file) if intervals_file.exists() else None
    page = leaderboard_cells((out_dir / "report.html").read_text(encoding="utf-8"))
    assert list(page) == board["run_id"].to_list()  # every run, in the leaderboard's order
    values: dict[str, dict[str, str]] = {}
    for row in board.iter_rows(named=True):
        run = row["run_id"]
        cells = page[run]
        text = {header: cell.text(cell.all) for header, cell in cells.items()}
        assert text["model"] == row["model"]
        assert text["tasks (errors)"] == f"{row['n_tasks']} ({row['errors']})"
        cost = DASH if row["cost_total"] is None else f"{row['cost_total']:.4f} {row.get('currency') or ''}".strip()
        assert text["cost"] == cost
        assert text["judge"] == (row["judge"] or DASH)
        values[run] = {}
        for header, (column, digits) in METRICS.items():
            cell = cells[header]
            value = cell.text(cell.own)
            assert value == shown(row[column], digits), (run, header, column, text[header])
            values[run][header] = value
            interval = overall_interval(intervals, run, column)
            ci = cell.text(cell.spans.get("ci", []))
            if interval is None:
                assert ci == "", (run, header, ci)
            else:
                assert ci == f"[{interval[0]:.{min(digits, 2)}f}, {interval[1]:.{min(digits, 2)}f}]", (run, header)
            muted = cell.text(cell.spans.get("muted", []))
            assert muted == (f"(K={row['k']})" if header in ("SR pass@K", "pass^K") else ""), (run, header, muted)
    return values


def _report(workspace: Path, *run_ids: str) -> Path:
    result = CliRunner().invoke(app, ["report", *run_ids, "-w", str(workspace), "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    out_dir = workspace / "reports" / "_compare" / "+".join(run_ids)
    assert (out_dir / "report.html").is_file() and (out_dir / "leaderboard.parquet").is_file()
    return out_dir


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


def test_sample_report_shows_the_leaderboard_numbers(sample_runs_copy):
    out_dir = _report(sample_runs_copy, "oracle", "retrieval")
    values = check_leaderboard(out_dir)
    assert set(values) == {"oracle", "retrieval"}
    # the sample's own numbers: the oracle covers every checkpoint, with no jump
    assert values["oracle"]["ATPR"] == "1.000" and values["oracle"]["ALJ"] == "0.000"
    assert values["retrieval"]["ATPR"] == "0.000" and values["retrieval"]["AMTL"] == DASH


@pytest.fixture
def hand_runs(tmp_path: Path) -> Path:
    """test_report_tables.py's hand-made runs ``a`` and ``b``, with a price
    for model-a (its cost cell is shown)."""
    import json

    workspace = tmp_path / "hand"
    (workspace / "tickets").mkdir(parents=True)
    (workspace / "tickets/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    write_run(workspace, "a", "model-a", 2, RUN_A_TASKS, RUN_A_CHECKPOINTS)
    write_run(workspace, "b", "model-b", 1, RUN_B_TASKS, RUN_B_CHECKPOINTS)
    (workspace / "cirrus.toml").write_text('[prices."model-a"]\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0\n'
                                           'currency = "EUR"\n')
    return workspace


def test_every_metric_column_shows_its_own_number(hand_runs):
    out_dir = _report(hand_runs, "a", "b")
    values = check_leaderboard(out_dir)
    # run a's seven metrics differ from one another: two swapped columns cannot
    # both still match the Parquet row (the check above would fail)
    shown_a = values["a"]
    assert len(set(shown_a.values())) == len(METRICS), shown_a
    assert shown_a == {"SR pass@1": "0.600", "SR pass@K": "1.000", "pass^K": "0.000", "ATPR": "0.667",
                       "ALJ": "0.500", "ANEI": "0.625", "AMTL": "17.0"}
    board = pl.read_parquet(out_dir / "leaderboard.parquet")
    assert board.filter(pl.col("run_id") == "a")["cost_total"][0] is not None  # the cost cell was checked too


def test_the_checker_sees_a_swapped_column(hand_runs):
    """The comparison itself: the page with two metric cells exchanged (ATPR
    and ALJ of run a) no longer passes."""
    out_dir = _report(hand_runs, "a", "b")
    page = out_dir / "report.html"
    html = page.read_text(encoding="utf-8")
    check_leaderboard(out_dir)
    # run a's row of the leaderboard: from its run cell to the end of the row
    start = html.index('<section id="leaderboard">')
    start = html.index("</span>a</td>", start)
    end = html.index("</tr>", start)
    row = html[start:end]
    atpr, alj = "<td>0.667<br>", "<td>0.500<br>"
    assert row.count(atpr) == 1 and row.count(alj) == 1, "the page's cells changed shape: update this test"
    swapped = row.replace(atpr, "\0").replace(alj, atpr).replace("\0", alj)
    page.write_text(html[:start] + swapped + html[end:], encoding="utf-8")
    with pytest.raises(AssertionError, match="ATPR"):
        check_leaderboard(out_dir)

