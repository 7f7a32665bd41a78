"""What Cirrus writes and prints, as analysts and scripts see it:

* every column of every Parquet file a run or a report writes is documented
  in ``docs/report-schema.md``, with its type (parsed from the Markdown);
* per-run tables carry ``run_id``, ``model``, ``end_reason`` and
  ``end_checkpoint``; runs written before still load (filled in);
* the breakdown key is ``segment`` (``group`` is an SQL reserved word),
  schema version 2, queryable in DuckDB;
* ``reports/README.md`` names the files a run writes, and only those;
* every file written gets ``open()``'s mode under the user's umask;
* piped output keeps run ids whole; help texts keep their ``[brackets]``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.evaluate.store import (
    END_COMPLETED,
    END_ERROR,
    END_FLUENCY_STOP,
    END_REASONS,
    END_REJECTED,
    END_TRUNCATED,
    END_UNKNOWN,
    end_checkpoint,
    end_reason,
)
from cirrus.files import create_mode
from cirrus.report import schema as report_schema
from cirrus.report.loading import load_run
from cirrus.report.run_view import stop_reason
from tests.conftest import REPO, SAMPLE_KB, SAMPLE_RAW, copy_workspace

DOC = REPO / "docs" / "report-schema.md"
REPORTS_README = REPO / "reports" / "README.md"
LONG_RUN_ID = "nightly-2025-03-01-qwen3-max-thinking-temperature-0.3-judge-qwen3-max-fluency-local-seed-7"

# polars type of a column read back -> the Parquet half of the documented type
_PARQUET_NAMES = {pl.Int64: "int64", pl.Float64: "double", pl.String: "string", pl.Boolean: "boolean"}


def _invoke(args: list[str], **env: str | None) -> typer.testing.Result:
    return CliRunner().invoke(app, args, env={"COLUMNS": None, "LINES": None, **env})


# --------------------------------------------------------------------------
# The schema document, parsed as a reader would
# --------------------------------------------------------------------------


def documented_columns(text: str) -> dict[str, dict[str, str]]:
    """``{file name: {column: "int64 / BIGINT"}}`` from the Markdown: each
    ``###`` section whose ``Files:`` line names files (in backticks) and whose
    table starts with a ``column`` header documents those files' columns."""
    files: list[str] = []
    documented: dict[str, dict[str, str]] = {}
    in_table = False
    for line in text.splitlines():
        if line.startswith("#"):
            files, in_table = [], False
        elif line.startswith("Files:"):
            files = [Path(name).name for name in re.findall(r"`([^`]+\.parquet)`", line)]
        elif line.startswith("| column |"):
            in_table = True
        elif in_table and line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            name = cells[0].strip("`")
            for file in files:
                documented.setdefault(file, {})[name] = cells[1]
        elif not line.startswith("|"):
            in_table = False
    return documented


def _type_label(frame: pl.DataFrame, column: str, duckdb_types: dict[str, str]) -> str:
    return f"{_PARQUET_NAMES[type(frame.schema[column])]} / {duckdb_types[column]}"


@pytest.fixture(scope="module")
def reported(tmp_path_factory, sample_runs) -> Path:
    """The sample workspace, both offline baselines evaluated, reported
    together (a comparison, with paired.parquet) and the oracle alone."""
    workspace = copy_workspace(sample_runs, tmp_path_factory.mktemp("output-schema") / "ws")
    for run_ids in (["oracle", "retrieval"], ["oracle"]):
        result = _invoke(["report", *run_ids, "-w", str(workspace), "--bootstrap", "50"])
        assert result.exit_code == 0, result.output
    return workspace


def test_every_column_of_every_parquet_file_written_is_documented_with_its_type(reported):
    documented = documented_columns(DOC.read_text(encoding="utf-8"))
    written = sorted(reported.rglob("*.parquet"))
    names = {path.name for path in written}
    # the workspace holds what a run and a report write: both per-run tables and every report table
    assert {"tasks.parquet", "checkpoints.parquet", *report_schema.FILES} <= names, names
    problems = []
    for path in written:
        columns = documented.get(path.name)
        if columns is None:
            problems.append(f"{path.name}: not documented")
            continue
        frame = pl.read_parquet(path)
        duckdb_types = dict(duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()[i][:2]
                            for i in range(frame.width))
        for column in frame.columns:
            if column not in columns:
                problems.append(f"{path.relative_to(reported)}: column {column} is not documented")
            elif columns[column] != _type_label(frame, column, duckdb_types):
                problems.append(f"{path.relative_to(reported)}: column {column} is "
                                f"{_type_label(frame, column, duckdb_types)}, documented as {columns[column]}")
        if path.name in report_schema.FILES:  # report tables hold exactly the documented columns
            missing = sorted(set(columns) - set(frame.columns))
            if missing:
                problems.append(f"{path.name}: documented columns {missing} are not written")
    assert not problems, "\n".join(problems)


def test_the_parser_sees_an_undocumented_column(reported, tmp_path):
    # the check above can fail: a column the document lacks is found
    documented = documented_columns(DOC.read_text(encoding="utf-8"))
    assert {"lj", "nei", "mtl", "end_reason", "end_checkpoint", "run_id", "model"} <= set(documented["tasks.parquet"])
    assert {"tia", "tsa", "tev", "rr", "stl", "covered_through", "run_id"} <= set(documented["checkpoints.parquet"])
    assert documented["tasks.parquet"]["lj"] == "int64 / BIGINT"
    without = documented_columns(DOC.read_text(encoding="utf-8").replace("| `nei` |", "| `nei_old` |"))
    assert "nei" not in without["tasks.parquet"] and "nei" not in without["checkpoints.parquet"]


# --------------------------------------------------------------------------
# Per-run tables: run_id, model, end_reason, end_checkpoint
# --------------------------------------------------------------------------


def _attempt_rows(run: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(line) for line in (run / "attempts.jsonl").read_text(encoding="utf-8").splitlines()]
    return {(r["task_id"], r["attempt"]): r for r in rows}


@pytest.mark.parametrize("run_id", ["oracle", "retrieval"])
def test_per_run_tables_name_their_run_and_model_and_say_where_each_walk_ended(sample_runs, run_id):
    run = sample_runs / "reports" / run_id
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    tasks = pl.read_parquet(run / "tasks.parquet")
    checkpoints = pl.read_parquet(run / "checkpoints.parquet")
    for frame in (tasks, checkpoints):
        assert set(frame["run_id"]) == {run_id} and set(frame["model"]) == {summary["model"]}
    documented = next(line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `end_reason` |"))
    vocabulary = set(re.findall(r"`([a-z_]+)` \(", documented))  # "`completed` (every checkpoint covered), ..."
    assert vocabulary == set(END_REASONS)
    assert set(tasks["end_reason"]) <= vocabulary
    rows = _attempt_rows(run)
    turns = {(r["task_id"], r["attempt"], r["checkpoint"]): r for r in checkpoints.iter_rows(named=True)}
    for row in tasks.iter_rows(named=True):
        key = (row["task_id"], row["attempt"])
        reason, at = row["end_reason"], row["end_checkpoint"]
        assert (reason, at) == (end_reason(rows[key]), end_checkpoint(rows[key]))  # the function show words
        if row["status"] != "ok":
            assert (reason, at) == ("error", None)
        elif row["success"]:
            assert (reason, at) == ("completed", row["checkpoints"])
        else:
            assert reason in ("rejected", "fluency_stop") and at == row["covered"] + 1
            if reason == "rejected":
                assert turns[(*key, at)]["accepted"] is False
            else:
                assert turns[(*key, max(c for t, a, c in turns if (t, a) == key))]["fluent"] is False
    if run_id == "oracle":
        assert set(tasks["end_reason"]) == {"completed"}
    else:
        assert "rejected" in set(tasks["end_reason"])  # the retrieval baseline fails checkpoints with tools


def _row(status="ok", covered=1, checkpoints=3, turns=(), truncated=None):
    return {"status": status, "error": "Boom" if status != "ok" else None, "covered": covered,
            "checkpoints": checkpoints, "truncated": truncated, "turns": list(turns)}


def test_end_reason_and_checkpoint_and_shows_words_for_each_ending():
    accepted = {"checkpoint": 1, "accepted": True, "covered_through": 1, "fluent": True}
    cases = [
        (_row(covered=3, turns=[{**accepted, "covered_through": 3, "fluent": None}]), END_COMPLETED, 3,
         "all covered"),
        (_row(turns=[accepted, {"checkpoint": 2, "accepted": False}]), END_REJECTED, 2, "rejected at 2"),
        (_row(covered=0, turns=[{"checkpoint": 1, "accepted": False}]), END_REJECTED, 1, "rejected at 1"),
        (_row(turns=[{**accepted, "fluent": False}]), END_FLUENCY_STOP, 2, "not fluent before 2"),
        (_row(covered=2, turns=[{**accepted, "covered_through": 2}], truncated=True), END_TRUNCATED, 3,
         "truncated before 3"),
        (_row(status="error", covered=None), END_ERROR, None, "error: Boom"),
        (_row(turns=[]), END_UNKNOWN, None, "no turn judged"),
    ]
    for row, reason, at, words in cases:
        assert (end_reason(row), end_checkpoint(row), stop_reason(row, short=True)) == (reason, at, words), row


def test_runs_written_without_the_new_columns_still_load_report_and_show(tmp_path, sample_runs):
    workspace = copy_workspace(sample_runs, tmp_path / "ws")
    new = {run_id: load_run(workspace, run_id) for run_id in ("oracle", "retrieval")}
    expected = {run_id: run.tasks.select("task_id", "attempt", "model", "end_reason", "end_checkpoint").collect()
                for run_id, run in new.items()}
    for run_id in new:  # as an earlier Cirrus wrote them
        run = workspace / "reports" / run_id
        tasks = pl.read_parquet(run / "tasks.parquet")
        tasks.drop("run_id", "model", "end_reason", "end_checkpoint").write_parquet(run / "tasks.parquet")
        pl.read_parquet(run / "checkpoints.parquet").drop("run_id", "model").write_parquet(run / "checkpoints.parquet")
    for run_id in new:
        old = load_run(workspace, run_id)
        filled = old.tasks.select("task_id", "attempt", "model", "end_reason", "end_checkpoint").collect()
        assert filled.equals(expected[run_id])
        assert set(old.tasks.select("run_id").collect()["run_id"]) == {run_id}
        assert set(old.checkpoints.select("model").collect()["model"]) == {new[run_id].model}
    result = _invoke(["report", "oracle", "retrieval", "-w", str(workspace), "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    board = pl.read_parquet(workspace / "reports/_compare/oracle+retrieval/leaderboard.parquet")
    assert board["run_id"].to_list() == ["oracle", "retrieval"] and board["atpr"][0] == 1.0
    result = _invoke(["show", "retrieval", "-w", str(workspace)])
    assert result.exit_code == 0 and "rejected at" in result.stdout, result.output


# --------------------------------------------------------------------------
# segment, not group: schema version 2
# --------------------------------------------------------------------------


def test_breakdowns_and_intervals_key_on_segment_which_duckdb_can_select(reported):
    out = reported / "reports/_compare/oracle+retrieval"
    metric = {"breakdown_reply_type.parquet": "acceptance_rate", "intervals.parquet": "estimate"}
    keyed = [name for name in report_schema.FILES if name.startswith("breakdown_") or name == "intervals.parquet"]
    assert len(keyed) == 8  # the paper's five breakdowns, language, channel, and the intervals
    for name in keyed:
        path = out / name
        rows = duckdb.sql(f"SELECT segment, {metric.get(name, 'atpr')} FROM '{path}'").fetchall()
        assert rows and all(isinstance(segment, str) for segment, _ in rows), name
        order = f", segment_order FROM '{path}' ORDER BY run_id, segment_order" if name != "intervals.parquet" else None
        if order:
            assert duckdb.sql(f"SELECT segment{order}").fetchall()[0][1] == 0
    for path in out.glob("*.parquet"):
        columns = pl.read_parquet_schema(path)
        assert "group" not in columns and "group_order" not in columns, path.name
        assert set(pl.read_parquet(path)["schema_version"]) == {2}
        metadata = dict(duckdb.sql(f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{path}')").fetchall())
        assert metadata["cirrus.report.schema_version"] == "2"
    with pytest.raises(duckdb.ParserException):  # why: the old name is a reserved word
        duckdb.sql("SELECT group, atpr FROM (SELECT 'x' AS \"group\", 1.0 AS atpr)")
    categories = duckdb.sql(f"SELECT segment FROM '{out / 'breakdown_category.parquet'}' WHERE run_id = 'oracle'")
    assert {c for (c,) in categories.fetchall()} == set(pl.read_parquet(reported / "reports/oracle/tasks.parquet")
                                                        ["category"].fill_null("unknown"))


def test_the_schema_document_records_the_rename_in_version_2():
    text = DOC.read_text(encoding="utf-8")
    assert report_schema.SCHEMA_VERSION == 2 and "Schema version: **2**." in text
    changes = [line for line in text.splitlines() if line.startswith("| 2 |")]
    assert len(changes) == 1
    assert all(word in changes[0] for word in ("`group`", "`segment`", "`group_order`", "`segment_order`"))
    for table in ("breakdown", "breakdown_reply_type", "intervals"):
        names = [c.name for c in report_schema.TABLES[table]]
        assert "segment" in names and "group" not in names and "group_order" not in names


# --------------------------------------------------------------------------
# reports/README.md
# --------------------------------------------------------------------------


def test_reports_readme_names_what_a_run_writes_and_nothing_else(reported):
    text = REPORTS_README.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w.-]+\.(?:parquet|jsonl|json|html))`", text))
    run = reported / "reports/oracle"
    written = {p.name for p in run.iterdir() if p.is_file()}
    written_report = {p.name for p in (run / "report").iterdir()}
    compared = {p.name for p in (reported / "reports/_compare/oracle+retrieval").iterdir()}
    assert written == {"run.json", "attempts.jsonl", "transcripts.jsonl", "tasks.parquet", "checkpoints.parquet",
                       "summary.json"}
    missing = (written | written_report | compared) - named
    assert not missing, f"reports/README.md does not name {sorted(missing)}"
    rescore_only = {"rescore.parquet"}
    subtask_only = {"subtasks.parquet", "subtask_by_tokens.parquet", "subtask_by_reply_type.parquet"}
    unknown = named - written - written_report - compared - rescore_only - subtask_only
    assert not unknown, f"reports/README.md names files no run writes: {sorted(unknown)}"
    assert "results.parquet" not in text and "transcripts/" not in text


# --------------------------------------------------------------------------
# File modes
# --------------------------------------------------------------------------

_PIPELINE = r"""
import os, sys
raw, kb, *runs = sys.argv[1:]  # then (umask, workspace) pairs
os.umask(int(runs[0], 8))  # the first umask is set before cirrus is imported, the next ones after
from cirrus.cli import app
for umask, workspace in zip(runs[::2], runs[1::2]):
    os.umask(int(umask, 8))
    for args in (["ingest", raw, "--kb", kb, "-w", workspace, "-q", "--jobs", "1"],
                 ["eval", "--model", "baseline:oracle", "-w", workspace, "--run-id", "oracle", "-q"],
                 ["report", "oracle", "-w", workspace, "--bootstrap", "20"]):
        try:
            app(args, prog_name="cirrus")
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
"""

UMASKS = (0o022, 0o077)
UMASK_TICKET, UMASK_KB = "NC-2025-0029", "kb-billing-refund-policy.md"  # of tickets/raw/billing.json, tickets/kb


@pytest.fixture(scope="module")
def pipelines_under_umasks(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[int, Path]]:
    """ingest, eval and report, each umask in turn, into its own workspace:
    one child process (the models and libraries load once), the first umask
    set before cirrus is imported, the second after (a mode computed at
    import would show in the second workspace)."""
    root = tmp_path_factory.mktemp("umask")
    workspaces = {umask: root / f"ws-{umask:03o}" for umask in UMASKS}
    runs = [arg for umask, workspace in workspaces.items() for arg in (oct(umask), str(workspace))]
    # what is checked is how files are created, not how many: one raw file holding one resolved ticket with a
    # tool call (a task, a cassette) and one knowledge document -- each ticket and document de-identified costs
    # both ingests time, and the files written are of the same kinds
    raw, kb = root / "raw" / "billing.json", root / "kb"
    raw.parent.mkdir()
    tickets = json.loads((SAMPLE_RAW / "billing.json").read_text(encoding="utf-8"))
    ticket = next(t for t in tickets if t["ticket_id"] == UMASK_TICKET)
    assert ticket["status"] == "resolved" and any(e["role"] == "tool_call" for e in ticket["events"])
    raw.write_text(json.dumps([ticket], ensure_ascii=False), encoding="utf-8")
    kb.mkdir()
    shutil.copy2(SAMPLE_KB / UMASK_KB, kb / UMASK_KB)
    result = subprocess.run([sys.executable, "-c", _PIPELINE, str(raw), str(kb), *runs], capture_output=True,
                            text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    return result, workspaces


@pytest.mark.parametrize("umask", UMASKS)
def test_every_file_written_has_the_mode_open_gives_under_the_umask(pipelines_under_umasks, umask):
    result, workspaces = pipelines_under_umasks
    assert result.returncode == 0, result.stderr[-3000:]
    workspace = workspaces[umask]
    files = [p for p in workspace.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in files}
    assert {".parquet", ".html", ".yaml", ".jsonl", ".json"} <= kinds, kinds  # report, cassettes, run, tasks
    want = 0o666 & ~umask
    wrong = {str(p.relative_to(workspace)): oct(p.stat().st_mode & 0o777) for p in files
             if p.stat().st_mode & 0o777 != want}
    assert not wrong, f"expected {oct(want)}: {wrong}"


def test_create_mode_follows_the_umask_set_after_import(tmp_path):
    old = os.umask(0o027)
    try:
        assert create_mode() == 0o640
        with open(tmp_path / "plain", "w"):
            pass
        assert (tmp_path / "plain").stat().st_mode & 0o777 == create_mode()
    finally:
        os.umask(old)


# --------------------------------------------------------------------------
# Piped output keeps run ids whole
# --------------------------------------------------------------------------


def _assert_whole(text: str, run_id: str) -> None:
    """The id appears, and every line holding its start or its end holds all of it."""
    lines = [line for line in text.splitlines() if run_id[:16] in line or run_id[-16:] in line]
    assert lines, text
    broken = [line for line in lines if run_id not in line]
    assert not broken, "\n".join(broken)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory, sample_ingest) -> tuple[Path, str]:
    workspace = copy_workspace(sample_ingest, tmp_path_factory.mktemp("long-id") / "ws")
    result = _invoke(["eval", "--model", "baseline:retrieval", "-w", str(workspace), "--run-id", LONG_RUN_ID, "-q"])
    assert result.exit_code == 0, result.output
    return workspace, result.stdout


def test_eval_output_keeps_a_long_run_id_whole_when_piped(long_run):
    workspace, stdout = long_run
    assert len(LONG_RUN_ID) > 80
    _assert_whole(stdout, LONG_RUN_ID)


def test_show_and_report_keep_a_long_run_id_whole_when_piped(long_run):
    workspace, _ = long_run
    shown = _invoke(["show", LONG_RUN_ID, "-w", str(workspace)])
    assert shown.exit_code == 0, shown.output
    _assert_whole(shown.stdout, LONG_RUN_ID)
    assert sum(LONG_RUN_ID in line for line in shown.stdout.splitlines()) >= 2  # the summary and the attempts
    task = json.loads((workspace / "reports" / LONG_RUN_ID / "attempts.jsonl").read_text().splitlines()[0])["task_id"]
    walk = _invoke(["show", LONG_RUN_ID, "-w", str(workspace), "--task", task])
    assert walk.exit_code == 0, walk.output
    _assert_whole(walk.stdout, LONG_RUN_ID)
    assert max(len(line) for line in walk.stdout.splitlines()) < 1000  # panels fit their text, not 1000 columns
    reported = _invoke(["report", LONG_RUN_ID, "-w", str(workspace), "--bootstrap", "0"])
    assert reported.exit_code == 0, reported.output
    _assert_whole(reported.stdout, LONG_RUN_ID)
    assert any(line.lstrip("│| ").startswith(LONG_RUN_ID) for line in reported.stdout.splitlines())  # the table row


def test_a_real_pipe_keeps_the_id_whole_and_columns_is_respected(long_run):
    workspace, _ = long_run
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-c", "from cirrus.cli import app; app(prog_name='cirrus')", "show", LONG_RUN_ID,
               "-w", str(workspace)]
    piped = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert piped.returncode == 0, piped.stderr
    _assert_whole(piped.stdout, LONG_RUN_ID)
    narrow = subprocess.run(command, capture_output=True, text=True, env={**env, "COLUMNS": "70"}, timeout=300)
    assert narrow.returncode == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 70
    assert LONG_RUN_ID[:16] in narrow.stdout


# --------------------------------------------------------------------------
# Help texts keep their [brackets]
# --------------------------------------------------------------------------


def test_report_help_shows_the_prices_table_name():
    result = _invoke(["report", "--help"], COLUMNS="200")
    assert result.exit_code == 0
    assert "Settings file with a [prices] table" in result.stdout


def test_every_bracketed_word_of_a_help_text_is_shown():
    command = typer.main.get_command(app)
    checked = 0
    for name, sub in command.commands.items():  # type: ignore[attr-defined]
        helps = [p.help for p in sub.params if getattr(p, "help", None)] + [sub.help or ""]
        words = {w for text in helps for w in re.findall(r"\\?\[([A-Za-z_.\"-]+)\]", text)}
        if not words:
            continue
        shown = _invoke([name, "--help"], COLUMNS="250").stdout
        for word in words:
            checked += 1
            assert f"[{word}]" in shown, (name, word)
    assert checked >= 2  # report's [prices], ingest's cirrus[ray]


def test_the_console_reads_columns_when_it_prints_not_when_it_is_made(monkeypatch):
    from cirrus.commands._console import PIPE_WIDTH, cli_console

    monkeypatch.setenv("COLUMNS", "80")  # as some environments set it before cirrus is imported
    console = cli_console()
    monkeypatch.delenv("COLUMNS")
    assert console.width == PIPE_WIDTH  # piped (pytest captures the output)
    monkeypatch.setenv("COLUMNS", "123")
    assert console.width == 123


@pytest.mark.parametrize("umask", [0o002, 0o077])
def test_the_judge_cache_gets_the_mode_open_gives_under_the_umask(tmp_path, umask):
    from cirrus.llm.cache import ResponseCache

    old = os.umask(umask)
    try:
        with ResponseCache(tmp_path / "cache") as cache:  # WAL mode: -wal and -shm files beside it while open
            cache.put(ResponseCache.key("http://127.0.0.1:1/v1", "{}"), {"content": "ok"})
            files = [p for p in (tmp_path / "cache").iterdir() if p.is_file()]
            modes = {p.name: oct(p.stat().st_mode & 0o777) for p in files}
    finally:
        os.umask(old)
    assert len(modes) >= 1 and set(modes.values()) == {oct(0o666 & ~umask)}, modes
