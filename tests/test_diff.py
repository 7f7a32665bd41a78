"""``cirrus diff RUN_A RUN_B``: the first checkpoint where two walks part
ways (pure cases worked out by hand), and the command on the sample's two
offline baselines."""

from __future__ import annotations

import polars as pl
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.report.diff import first_divergence


def _turn(checkpoint: int, accepted: bool, through: int | None = None) -> dict:
    return {"checkpoint": checkpoint, "accepted": accepted, "covered_through": through}


def test_walks_that_agree_have_no_divergence():
    walk = [_turn(1, True, 1), _turn(2, True, 3)]
    assert first_divergence(walk, list(walk)) is None


def test_one_turn_accepted_and_the_other_rejected():
    # both accept checkpoint 1; at 2, A is accepted and B rejected
    where = first_divergence([_turn(1, True, 1), _turn(2, True, 2)], [_turn(1, True, 1), _turn(2, False)])
    assert where.checkpoint == 2 and "run A's turn was accepted" in where.how


def test_a_logical_jump_in_one_run():
    # A's first turn covers 1-3 at once; B's covers only 1: they part at checkpoint 1
    where = first_divergence([_turn(1, True, 3)], [_turn(1, True, 1), _turn(2, True, 3)])
    assert where.checkpoint == 1 and "through 3" in where.how and "through 1" in where.how


def test_one_walk_stopped_where_the_other_went_on():
    # same turn 1, then A stopped (fluency) and B walked on to checkpoint 2
    where = first_divergence([_turn(1, True, 1)], [_turn(1, True, 1), _turn(2, True, 2)])
    assert where.checkpoint == 2 and "only run B reached" in where.how


def test_the_command_on_the_two_baselines(sample_runs_copy):
    result = CliRunner().invoke(app, ["diff", "oracle", "retrieval", "-w", str(sample_runs_copy), "--limit", "2"])
    assert result.exit_code == 0, result.output
    table = pl.read_parquet(sample_runs_copy / "reports" / "_diff" / "oracle+retrieval" / "diff.parquet")
    tasks = pl.read_parquet(sample_runs_copy / "reports" / "oracle" / "tasks.parquet")
    other = pl.read_parquet(sample_runs_copy / "reports" / "retrieval" / "tasks.parquet")
    joined = tasks.join(other, on=["task_id", "attempt"], suffix="_b")
    differ = joined.filter(pl.col("covered") != pl.col("covered_b")).height
    assert table.height == differ > 0
    assert set(table["better"]) == {"A"}  # the oracle replays the reference: it is never worse
    assert table["checkpoint"].null_count() == 0 and table["reference"].null_count() == 0
    assert "differ" in result.output and "parts at" in result.output


def test_the_command_refuses_the_same_run_twice_and_an_unknown_run(sample_runs_copy):
    runner = CliRunner()
    assert runner.invoke(app, ["diff", "oracle", "oracle", "-w", str(sample_runs_copy)]).exit_code == 2
    result = runner.invoke(app, ["diff", "oracle", "nope", "-w", str(sample_runs_copy)])
    assert result.exit_code == 2 and "no run 'nope'" in result.output
