"""The ticket's ``language`` and ``channel`` in the report (issue 27): columns
of the loaded runs' task rows, breakdowns (``breakdown_language.parquet``,
``breakdown_channel.parquet``) with their intervals, and charts on the page,
so that English and Chinese tickets compare without joining
``tasks.jsonl`` by hand."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from cirrus.report import schema as report_schema
from cirrus.report.command import report_command
from cirrus.report.loading import load_runs
from cirrus.report.tables import breakdown_by
from tests.constructed_runs import make_tasks, outcomes, write_run, write_workspace

approx = pytest.approx


@pytest.fixture
def mixed_ws(tmp_path: Path) -> Path:
    """12 tasks alternating en / zh, channels email, chat, none in turn; one
    attempt each.  Run ``a`` fails the Chinese tasks t01, t03, t05."""
    tasks = make_tasks(12, languages=("en", "zh"), channels=("email", "chat", None))
    tasks[6].pop("language")  # a line without a language is English (the task schema's default)
    ws = write_workspace(tmp_path / "ws", tasks)
    write_run(ws, "a", tasks, outcomes(tasks, 1, {1: [0], 3: [0], 5: [0]}))
    write_run(ws, "b", tasks, outcomes(tasks, 1))
    return ws


def test_runs_carry_the_tickets_language_and_channel(mixed_ws: Path):
    (run,) = load_runs(mixed_ws, ["a"])
    rows = {r["task_id"]: r for r in run.tasks.select("task_id", "language", "channel").collect().iter_rows(named=True)}
    assert (rows["t00"]["language"], rows["t01"]["language"], rows["t06"]["language"]) == ("en", "zh", "en")
    assert (rows["t00"]["channel"], rows["t01"]["channel"], rows["t02"]["channel"]) == ("email", "chat", None)


def test_breakdowns_by_language_and_channel(mixed_ws: Path):
    runs = load_runs(mixed_ws, ["a", "b"])
    language = {(r["run_id"], r["segment"]): r for r in breakdown_by(runs, "language").iter_rows(named=True)}
    assert language[("a", "en")]["n_tasks"] == 6 and language[("a", "en")]["sr_pass1"] == 1.0
    assert language[("a", "zh")]["n_tasks"] == 6 and language[("a", "zh")]["sr_pass1"] == approx(0.5)
    assert language[("b", "zh")]["sr_pass1"] == 1.0
    channel = breakdown_by(runs, "channel").filter(pl.col("run_id") == "a")
    assert channel["segment"].to_list() == ["chat", "email", "unknown"]  # alphabetical, unknown last
    by = {r["segment"]: r for r in channel.iter_rows(named=True)}
    # the failed t01, t03, t05 are chat, email and no channel: one per channel
    assert {s: (r["n_tasks"], r["sr_pass1"]) for s, r in by.items()} == {
        "chat": (4, approx(0.75)), "email": (4, approx(0.75)), "unknown": (4, approx(0.75))}
    assert channel.schema == report_schema.polars_schema("breakdown")


def test_the_report_writes_and_draws_them(mixed_ws: Path):
    result = report_command(["a", "b"], mixed_ws, None, 200, 0, prices={})
    out = result["out_dir"]
    for dimension in ("language", "channel"):
        frame = pl.read_parquet(out / f"breakdown_{dimension}.parquet")
        assert set(frame["dimension"]) == {dimension}
    intervals = pl.read_parquet(out / "intervals.parquet")
    zh = intervals.filter((pl.col("dimension") == "language") & (pl.col("segment") == "zh")
                          & (pl.col("metric") == "sr_pass1") & (pl.col("run_id") == "a")).row(0, named=True)
    assert zh["estimate"] == approx(0.5) and zh["n_tasks"] == 6
    page = result["files"]["report.html"].read_text(encoding="utf-8")
    assert 'id="breakdown-language"' in page and 'id="breakdown-channel"' in page
    assert "Ticket language" in page and "Ticket channel" in page
