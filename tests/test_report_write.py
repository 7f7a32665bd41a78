"""``cirrus report`` on awkward workspaces and disks (issue 22):

* a workspace whose tasks have no tool calls gets its page (the Dataset
  section says "No reference tool calls." instead of a template error);
* the quality chart says what it plots: AMTL, output tokens, the paper's
  token-based latency, not seconds;
* a full disk while writing any report file (Parquet, JSON, HTML) stops the
  command with one line naming the file and what to do, exit status 1, no
  traceback, the old file kept whole and no temporary file left; once there
  is room the same command writes the report.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from tests.conftest import REPO

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture(scope="module")
def no_tools(tmp_path_factory) -> Path:
    """The sample tasks without reference tool calls, evaluated by the oracle."""
    workspace = tmp_path_factory.mktemp("no-tools") / "ws"
    (workspace / "tickets").mkdir(parents=True)
    lines = (REPO / "tickets/tasks.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if json.loads(line)["cassette"] is None]
    assert kept
    (workspace / "tickets/tasks.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["eval", "--model", "baseline:oracle", "-w", str(workspace), "--run-id", "o",
                                      "-q"])
    assert result.exit_code == 0, result.output
    return workspace


def _report(workspace: Path, *extra: str):
    return CliRunner().invoke(app, ["report", "o", "-w", str(workspace), "--bootstrap", "50", *extra])


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def no_tools_reported(no_tools, tmp_path_factory) -> Path:
    """``no_tools`` reported once (``_report``, exit status 0): read by the
    page tests, copied by the full-disk tests (the report a full disk must
    leave whole)."""
    workspace = shutil.copytree(no_tools, tmp_path_factory.mktemp("no-tools-reported") / "ws")
    result = _report(workspace)
    assert result.exit_code == 0, result.output
    return workspace


def test_a_workspace_without_tool_calls_gets_its_page(no_tools_reported):
    page = (no_tools_reported / "reports/o/report/report.html").read_text(encoding="utf-8")
    assert "No reference tool calls." in page and 'id="dataset"' in page


def test_the_quality_chart_says_it_plots_output_tokens(no_tools_reported):
    page = (no_tools_reported / "reports/o/report/report.html").read_text(encoding="utf-8")
    assert "<h2>Quality vs. token-based latency (AMTL)</h2>" in page
    assert "Quality vs. latency<" not in page
    assert "the paper's token-based latency: the mean number of output tokens of the accepted turns" in page
    assert "mean output tokens per accepted turn (token-based latency" in page  # the x axis


def _fail_with(monkeypatch, name: str, target: str) -> None:
    real = getattr(os, name)

    def failing(*args, **kwargs):
        destination = args[1] if name == "replace" else None
        if name == "replace" and Path(destination).name == target:
            raise ENOSPC
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize("target", ["leaderboard.parquet", "noise.parquet", "stats.json", "report.html",
                                    "report.json"])
def test_a_full_disk_stops_the_report_with_one_line(no_tools_reported, tmp_path, monkeypatch, target):
    workspace = shutil.copytree(no_tools_reported, tmp_path / "ws")  # reported once: the file to keep whole
    out = workspace / "reports/o/report"
    before = (out / target).read_bytes()
    _fail_with(monkeypatch, "replace", target)
    full = _report(workspace, "--seed", "7")
    monkeypatch.undo()
    assert full.exit_code == 1, full.output
    assert full.exception is None or isinstance(full.exception, SystemExit), repr(full.exception)
    assert "Traceback" not in full.output
    assert (f"could not write the report: disk full while writing {out / target}: free space and run cirrus "
            "report again; the runs themselves are untouched") in _flat(full.output)
    assert (out / target).read_bytes() == before  # the old file, whole
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    again = _report(workspace, "--seed", "7")  # room again: the same command
    assert again.exit_code == 0, again.output


def test_a_full_disk_on_fsync_is_said_the_same_way(no_tools, tmp_path, monkeypatch):
    workspace = shutil.copytree(no_tools, tmp_path / "ws")
    real = os.fsync

    def failing(fd):
        raise ENOSPC

    monkeypatch.setattr(os, "fsync", failing)
    full = _report(workspace)
    monkeypatch.setattr(os, "fsync", real)
    assert full.exit_code == 1 and "Traceback" not in full.output
    assert "could not write the report: disk full while writing" in _flat(full.output)
    out = workspace / "reports/o/report"
    assert not out.exists() or not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
