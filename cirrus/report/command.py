"""``cirrus report RUN_ID... [--out DIR]``: the report tables of one or more
finished runs, written as Parquet (schema: ``docs/report-schema.md``).

Files written to the output folder:

* ``leaderboard.parquet``: one row per run;
* ``breakdown_category.parquet``, ``breakdown_checkpoints.parquet``,
  ``breakdown_input_tokens.parquet``, ``breakdown_tools.parquet``,
  ``breakdown_reply_type.parquet``;
* ``intervals.parquet``: bootstrap confidence intervals (unless
  ``--bootstrap 0``);
* ``paired.parquet``: paired bootstrap differences of every two runs (when
  two or more runs are given, unless ``--bootstrap 0``), with the minimal
  detectable difference of SR pass@1 and ATPR and whether the gap is within
  the noise;
* ``noise.parquet``: one row per run: how often tasks flip between its
  attempts, and the judge's own noise where ``cirrus judge-consistency``
  measured it (``reports/<run_id>/judge_consistency.json``; see
  ``docs/noise.md``);
* ``failures.parquet``: one row per (run, reference reply type, failure
  category): how the failed turns split over the categories of
  ``docs/failures.md``;
* ``report.html``: one self-contained page for people: leaderboard, charts
  with confidence intervals, failure categories, the dataset's statistics,
  where two runs part, every attempt's transcript;
* ``stats.json``: the workspace's dataset statistics, the text ``cirrus
  stats`` writes (when ``tickets/tasks.jsonl`` is valid);
* ``diff.parquet``: for exactly two runs, the rows of ``cirrus diff``
  (every (task, attempt) whose outcome differs, with its first divergence);
* ``report.json``: what was reported, with which settings, and warnings
  (also printed, and shown at the top of ``report.html``): among them, runs
  that are not comparable (:func:`comparability_warnings`) and self-judged
  runs; and ``noise``: the rows of ``noise.parquet`` and, per pair of runs,
  the SR pass@1 and ATPR differences with their MDD (:func:`noise_summary`).

Default output folder: ``<workspace>/reports/<run_id>/report/`` for one run,
``<workspace>/reports/_compare/<run_1>+<run_2>+.../`` for several (in the
order given).  Report files of an earlier report in the same folder that this
one does not write (``paired.parquet`` after ``--bootstrap 0``) are removed,
so the folder always holds one consistent report.

Every file is written to a temporary file and renamed into place, so a full
disk leaves each report file whole (the old one or the new one, never a cut
one) and stops the command with one line, exit status 1: "could not write
the report: disk full while writing <path>: free space and run cirrus report
again; the runs themselves are untouched".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from cirrus.workspace import REPORTS_DIR

# polars, numpy and the table code are imported when a report is made, so
# that registering this command keeps `cirrus --help` fast
if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.loading import Price

DEFAULT_N_BOOT = 2000  # = cirrus.report.uncertainty.DEFAULT_N_BOOT
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
REPORT_FILE = "report.json"
# what a full disk's error says to do (cirrus.files.DiskFullError)
REPORT_DISK_FULL_ADVICE = "free space and run cirrus report again; the runs themselves are untouched"
COMPARE_DIR = "_compare"
_MAX_DIR_NAME = 120


def default_out_dir(workspace: Path, run_ids: Sequence[str]) -> Path:
    """``reports/<run_id>/report/`` for one run; ``reports/_compare/<a>+<b>...``
    for several (a long list is shortened to ``<a>+<n>-more-<hash>``)."""
    reports = workspace / REPORTS_DIR
    if len(run_ids) == 1:
        return reports / run_ids[0] / "report"
    name = "+".join(run_ids)
    if len(name) > _MAX_DIR_NAME:
        digest = hashlib.sha256("\0".join(run_ids).encode()).hexdigest()[:10]
        name = f"{run_ids[0][:60]}+{len(run_ids) - 1}-more-{digest}"
    return reports / COMPARE_DIR / name


def _fingerprint(run: Any) -> dict[str, Any]:
    value = run.config.get("fingerprint")
    return value if isinstance(value, dict) else {}


def _role_hash(run: Any, role: str, key: str = "prompt_sha256") -> str | None:
    """``key`` (``prompt_sha256``) of a role's fingerprint in run.json, when
    recorded; a dict value (``input_limits``) as canonical JSON."""
    part = _fingerprint(run).get(role)
    value = part.get(key) if isinstance(part, dict) else None
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return None if value is None else str(value)


# what must be equal for runs to be compared: (what, value of a run or None
# when unknown, whether a run that did not record it is left out of the check)
_COMPARED: tuple[tuple[str, Any, bool], ...] = (
    ("judge model", lambda run: run.summary.get("judge") or _fingerprint(run).get("judge"), False),
    ("fluency model", lambda run: run.summary.get("fluency") or _fingerprint(run).get("fluency"), False),
    ("judge prompt hash", lambda run: _role_hash(run, "judge_role"), True),
    ("judge logical-jump prompt hash", lambda run: _role_hash(run, "judge_role", "later_prompt_sha256"), True),
    ("judge input limits", lambda run: _role_hash(run, "judge_role", "input_limits"), True),
    ("fluency prompt hash", lambda run: _role_hash(run, "fluency_role"), True),
    ("fluency input limits", lambda run: _role_hash(run, "fluency_role", "input_limits"), True),
    ("K (--pass-k)", lambda run: run.k, False),
    ("dataset hash", lambda run: run.dataset, False),
    ("agent prompt hash", lambda run: _role_hash(run, "agent_role"), True),
    ("Cirrus version", lambda run: run.summary.get("cirrus_version") or _fingerprint(run).get("cirrus"), False),
)


def comparability_warnings(runs: Sequence[Any], k: int | None = None) -> list[str]:
    """Why the runs of one report may not be comparable: one warning per
    setting that differs across runs (judge and fluency model, their prompt
    hashes where run.json records them, K, dataset hash, agent prompt hash,
    Cirrus version), naming the value of every run; and one per self-judged
    run (also for a single run).  ``k``: the report's ``--k``, if given."""
    warnings: list[str] = []
    if len(runs) > 1:
        for what, get, skip_unrecorded in _COMPARED:
            values = {run.run_id: get(run) for run in runs}
            if skip_unrecorded:
                values = {r: v for r, v in values.items() if v is not None}
            if len(values) < 2 or len({str(v) for v in values.values()}) < 2:
                continue
            shown = ", ".join(f"{r}: {'unknown' if v is None else (str(v)[:12] if 'hash' in what else v)}"
                              for r, v in values.items())
            text = f"the runs differ in {what} ({shown}): their scores are not directly comparable"
            if what.startswith("K"):
                text += (f"; pass@K and pass^K are computed with K={k} for every run (--k)" if k is not None else
                         "; pass@K and pass^K are each run's own K, labelled per run (use --k N for one K)")
            elif what == "dataset hash":
                text += "; paired comparisons use the tasks they have in common"
            warnings.append(text)
    for run in runs:
        if run.self_judged:
            warnings.append(f"run {run.run_id!r} is self-judged: its judge or fluency checker is the agent's own "
                            f"model ({run.model}), so it grades itself; rerun it with a fixed --judge-model to "
                            "compare it fairly")
    return warnings


def _write_parquet(frame: pl.DataFrame, path: Path, table: str) -> None:
    """Write atomically, with the schema version also in the file's metadata.
    The table is encoded in memory (report tables are small) and written
    with :func:`~cirrus.files.atomic_writer`: a full disk is a
    :class:`~cirrus.files.DiskFullError` naming the file, the old file kept."""
    from cirrus.files import atomic_writer
    from cirrus.report.schema import SCHEMA_VERSION

    buffer = io.BytesIO()
    frame.write_parquet(buffer, metadata={"cirrus.report.schema_version": str(SCHEMA_VERSION),
                                          "cirrus.report.table": table})
    with atomic_writer(path, binary=True, advice=REPORT_DISK_FULL_ADVICE) as out:
        out.write(buffer.getbuffer())


def report_command(run_ids: list[str], workspace: Path, out: Path | None, bootstrap: int = DEFAULT_N_BOOT,
                   seed: int = DEFAULT_SEED, *, k: int | None = None, config: Path | None = None,
                   prices: Mapping[str, Price | Mapping[str, Any]] | None = None,
                   confidence: float = DEFAULT_CONFIDENCE, token_bands: str = "paper") -> dict[str, Any]:
    """Compute and write the report of ``run_ids`` (see the module doc).

    ``bootstrap``: replicates of the bootstrap (0: no intervals, no paired
    tests); ``seed``: its seed; ``k``: K of pass@K (default: each run's own);
    ``prices``: ``{model: Price or {input_per_mtok, output_per_mtok,
    currency}}``, else the ``[prices]`` table of ``config`` /
    ``<workspace>/cirrus.toml`` / ``./cirrus.toml``; ``token_bands``: the
    token bands of subtask runs' Table 4 (``paper``: 0-8k, 8k-16k, 16k+;
    ``fine``: <1k ... 16k+).

    Returns ``{"out_dir": Path, "files": {file name: Path}, "leaderboard":
    DataFrame, "intervals": DataFrame | None, "paired": DataFrame | None,
    "noise": DataFrame, "warnings": [str]}``.  Raises :class:`ReportError`
    for an unknown or unfinished run, a broken file or a bad price table,
    ``ValueError`` for bad arguments; a broken ``judge_consistency.json`` is
    a warning only.
    """
    import polars as pl

    from cirrus.files import atomic_writer
    from cirrus.report.loading import load_judge_consistency, load_prices, load_runs
    from cirrus.report.schema import FILES, SCHEMA_VERSION
    from cirrus.report.tables import DIMENSIONS, breakdown_by, leaderboard, summary_mismatches
    from cirrus.report.uncertainty import intervals, noise, paired

    if not isinstance(bootstrap, int) or isinstance(bootstrap, bool) or bootstrap < 0:
        raise ValueError(f"bootstrap must be an int >= 0, got {bootstrap!r}")
    from cirrus.report.subtask import split_modes, subtask_manifest, subtask_report, token_bands as bands_called
    from cirrus.report.subtask import write_subtask_tables

    bands = bands_called(token_bands)
    walk_ids, subtask_ids = split_modes(workspace, list(run_ids))
    if subtask_ids and not walk_ids:  # subtask runs only: their tables, never the walk leaderboard
        return subtask_report(subtask_ids, workspace, out, bootstrap, seed, k=k, confidence=confidence, bands=bands)
    runs = load_runs(workspace, walk_ids)
    price_table = dict(prices) if prices is not None else load_prices(workspace, config)
    warnings = [w for run in runs for w in run.warnings] + comparability_warnings(runs, k)

    tables: dict[str, pl.DataFrame] = {"leaderboard.parquet": leaderboard(runs, k, price_table)}
    for run, row in zip(runs, tables["leaderboard.parquet"].iter_rows(named=True)):
        if k is None or k == run.k:
            warnings += [f"run {run.run_id!r}: {p}" for p in summary_mismatches(run, row)]
        if row["cost_total"] is None:
            warnings += cost_warnings(run, price_table)
    for dimension in DIMENSIONS:
        tables[f"breakdown_{dimension}.parquet"] = breakdown_by(runs, dimension, k)
    interval_table = paired_table = None
    if bootstrap > 0:
        interval_table = intervals(runs, k=k, n_boot=bootstrap, seed=seed, confidence=confidence)
        tables["intervals.parquet"] = interval_table
        if len(runs) > 1:
            paired_table = paired(runs, k=k, n_boot=bootstrap, seed=seed, confidence=confidence)
            tables["paired.parquet"] = paired_table
            for row in paired_table.filter(pl.col("metric") == "sr_pass1").iter_rows(named=True):
                if row["n_tasks"] == 0:
                    warnings.append(f"runs {row['run_a']!r} and {row['run_b']!r} have no scored task in common")
    judge_noise = {}
    for run in runs:
        judge_noise[run.run_id], problems = load_judge_consistency(run)
        warnings += problems
    noise_table = noise(runs, judge_noise)
    tables["noise.parquet"] = noise_table
    from cirrus.report.tables import failure_breakdown

    tables["failures.parquet"] = failure_breakdown(runs)  # docs/failures.md

    out_dir = out if out is not None else default_out_dir(workspace, list(run_ids))
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    for name, frame in tables.items():
        path = out_dir / name
        _write_parquet(frame, path, FILES[name])
        files[name] = path
    for name in FILES:
        if name not in tables:
            (out_dir / name).unlink(missing_ok=True)
    # subtask runs given with walks: their own tables beside (docs/subtasks.md)
    subtask_part = write_subtask_tables(subtask_ids, workspace, out_dir, bootstrap, seed, k=k, confidence=confidence,
                                        bands=bands)
    files.update(subtask_part["files"])
    warnings += subtask_part["warnings"]
    from cirrus.report.html import HTML_FILE, report_extras, write_extras, write_html_report

    extras = report_extras(runs, workspace)  # dataset statistics; the run diff of exactly two runs
    files.update(write_extras(extras, out_dir))  # stats.json, diff.parquet
    # the page also shows the subtask runs' tables (their section appears only with them)
    files[HTML_FILE] = write_html_report(runs, {**tables, **subtask_part["tables"]}, out_dir, workspace, warnings,
                                         extras=extras)
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "workspace": str(workspace),
        "runs": [{"run_id": run.run_id, "model": run.model, "k": run.k, "dataset": run.dataset,
                  "judge": run.summary.get("judge"), "fluency": run.summary.get("fluency"),
                  "self_judged": run.self_judged} for run in runs],
        "subtask_runs": subtask_manifest(subtask_part["runs"]),
        "k": k, "bootstrap": bootstrap, "seed": seed, "confidence": confidence,
        **({"token_bands": bands.name} if subtask_ids else {}),
        "files": sorted(files), "warnings": warnings, "noise": noise_summary(noise_table, paired_table),
    }
    with atomic_writer(out_dir / REPORT_FILE, advice=REPORT_DISK_FULL_ADVICE) as handle:
        json.dump(manifest, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    files[REPORT_FILE] = out_dir / REPORT_FILE
    return {"out_dir": out_dir, "files": files, "leaderboard": tables["leaderboard.parquet"],
            "intervals": interval_table, "paired": paired_table, "noise": noise_table, "warnings": warnings,
            "failures": tables["failures.parquet"], "subtask": subtask_part}


def cost_warnings(run: Any, prices: Mapping[str, Any]) -> list[str]:
    """Why a run's ``cost_total`` is null, one warning per unpriced role
    (none for a run without ``usage`` when there is no price table: nothing
    was asked to be priced)."""
    from cirrus.report.loading import parse_prices
    from cirrus.report.tables import cost_of

    if not prices and not isinstance(run.summary.get("usage"), dict):
        return []
    cost = cost_of(run, parse_prices(dict(prices)))
    if cost.problem:
        return [f"run {run.run_id!r}: {cost.problem}"]
    if cost.source == "none":
        return [f"no price for model {run.model!r} (run {run.run_id!r}): its cost columns are null"]
    return [f"no price for model {model!r}, the {role} of run {run.run_id!r}: its cost_{role} and cost_total are "
            f"null (add [prices.\"{model}\"] to cirrus.toml)" if model else
            f"run {run.run_id!r} does not name its {role}'s model: its cost_{role} and cost_total are null"
            for role, model in cost.unpriced]


def noise_summary(noise_table: pl.DataFrame, paired_table: pl.DataFrame | None) -> dict[str, Any]:
    """``noise`` of ``report.json``: ``runs``, the rows of ``noise.parquet``
    (without ``schema_version``), and ``pairs``: per pair of runs and metric
    of :data:`~cirrus.report.uncertainty.MDD_METRICS`, the ``difference``
    (run_b - run_a on the common tasks), its ``mdd`` and ``within_noise``
    (empty without a paired table: one run, or ``--bootstrap 0``)."""
    import polars as pl

    from cirrus.report.uncertainty import MDD_METRICS

    runs = noise_table.drop("schema_version").to_dicts()
    pairs = []
    if paired_table is not None:
        for row in paired_table.filter(pl.col("metric").is_in(list(MDD_METRICS))).iter_rows(named=True):
            pairs.append({"run_a": row["run_a"], "run_b": row["run_b"], "metric": row["metric"],
                          "n_tasks": row["n_tasks"], "estimate_a": row["estimate_a"], "estimate_b": row["estimate_b"],
                          "difference": row["diff"], "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                          "mdd": row["mdd"], "within_noise": row["within_noise"]})
    return {"runs": runs, "pairs": pairs}


def noise_lines(paired_table: pl.DataFrame | None, metric: str = "sr_pass1") -> list[str]:
    """One line per pair of runs whose ``metric`` difference is within the
    noise, e.g. ``SR pass@1: a 0.620 vs b 0.580: within the noise (difference
    0.040 < MDD 0.110 at 30 tasks)``."""
    import polars as pl

    from cirrus.report.html import METRIC_TITLES
    from cirrus.report.uncertainty import noise_reason

    if paired_table is None:
        return []
    lines = []
    for row in paired_table.filter((pl.col("metric") == metric) & pl.col("within_noise")).iter_rows(named=True):
        reason = noise_reason(row["diff"], row["mdd"], row["ci_low"], row["ci_high"], row["n_tasks"],
                              row["confidence"])
        lines.append(f"{METRIC_TITLES.get(metric, metric)}: {row['run_a']} {_fmt(row['estimate_a'])} vs "
                     f"{row['run_b']} {_fmt(row['estimate_b'])}: within the noise ({reason})")
    return lines


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def report(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN_ID...", help="Finished runs of the workspace (reports/<run_id>/); two or more are also compared pairwise.")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")] = Path("."),
    out: Annotated[Optional[Path], typer.Option("--out", help="Output folder (default: reports/<run_id>/report/, or reports/_compare/<run1>+<run2>.../ for several runs).")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap replicates for confidence intervals and paired tests (0: none).")] = DEFAULT_N_BOOT,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = DEFAULT_SEED,
    k: Annotated[Optional[int], typer.Option("--k", min=1, help="K of pass@K and pass^K (default: each run's --pass-k).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Settings file with a \\[prices] table (default: cirrus.toml in the workspace or here).")] = None,
    token_bands: Annotated[str, typer.Option("--token-bands", help="Token bands of subtask runs' Table 4 (the agent's whole input): paper (0-8k, 8k-16k, 16k+, as the paper) or fine (<1k, 1k-2k, 2k-4k, 4k-8k, 8k-16k, 16k+).")] = "paper",
) -> None:
    """Leaderboard, breakdowns and confidence intervals of finished runs, as Parquet.

    Exit status: 0 when the report is written; 2 for an unknown or
    unfinished run, a broken file or a bad option; 1 when it cannot be
    written (a full disk: the file is named, the runs are untouched).
    """
    from cirrus.cli import _fail, console  # imported here: cirrus.cli imports this module
    from cirrus.report.loading import ReportError

    try:
        result = report_command(run_ids, workspace, out, bootstrap, seed, k=k, config=config, token_bands=token_bands)
    except (ReportError, ValueError) as exc:
        _fail(str(exc))
        return
    except OSError as exc:  # a full disk, a read-only folder: said in one line, the runs untouched
        _fail(write_error(exc), code=1)
        return
    from cirrus.report.subtask import print_subtask_report

    if result["leaderboard"] is not None:
        _print_report(result)
    print_subtask_report(result)  # the tables of subtask runs, when the report has any
    from rich.markup import escape

    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}")  # a warning may name [prices."model"]


def write_error(exc: OSError) -> str:
    """The line ``cirrus report`` exits with when it cannot write (exit
    status 1): a full disk's :class:`~cirrus.files.DiskFullError` names the
    file and what to do; another error its reason and file."""
    from cirrus.files import DiskFullError, disk_full, is_disk_full

    if is_disk_full(exc) and not isinstance(exc, DiskFullError):
        exc = disk_full(exc, exc.filename or "the report folder", REPORT_DISK_FULL_ADVICE)
    if isinstance(exc, DiskFullError):
        return f"could not write the report: {exc}"
    where = f" ({exc.filename})" if exc.filename else ""
    return f"could not write the report: {exc.strerror or exc}{where}; the runs themselves are untouched"


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print_report(result: dict[str, Any]) -> None:
    import polars as pl
    from rich.table import Table

    from cirrus.cli import out as stdout

    board: pl.DataFrame = result["leaderboard"]
    cis: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    if result["intervals"] is not None:
        for row in result["intervals"].filter(pl.col("dimension") == "overall").iter_rows(named=True):
            cis[(row["run_id"], row["metric"])] = (row["ci_low"], row["ci_high"])

    def with_ci(run_id: str, metric: str, value: float | None) -> str:
        low, high = cis.get((run_id, metric), (None, None))
        return _fmt(value) + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")

    table = Table(title=f"cirrus report -> {result['out_dir']}")
    # runs may differ in K: every pass@K and pass^K cell names its run's K
    for column in ("run", "model", "tasks (errors)", "SR pass@1 [95% CI]", "SR pass@K", "pass^K",
                   "ATPR [95% CI]", "AMTL", "cost", "cost / success"):
        table.add_column(column, justify="left" if column in ("run", "model") else "right", overflow="fold")
    for row in board.iter_rows(named=True):
        cost = "-" if row["cost_total"] is None else f"{row['cost_total']:.4f} {row['currency'] or ''}".rstrip()
        per_success = ("-" if row["cost_per_success"] is None
                       else f"{row['cost_per_success']:.4f} {row['currency'] or ''}".rstrip())
        table.add_row(row["run_id"], row["model"], f"{row['n_tasks']} ({row['errors']})",
                      with_ci(row["run_id"], "sr_pass1", row["sr_pass1"]),
                      f"{_fmt(row['sr_pass_at_k'])} (K={row['k']})", f"{_fmt(row['pass_hat_k'])} (K={row['k']})",
                      with_ci(row["run_id"], "atpr", row["atpr"]), _fmt(row["amtl"], 1), cost, per_success)
    stdout.print(table)
    pairs = result["paired"]
    if pairs is not None and not pairs.is_empty():
        diff_table = Table(title="paired bootstrap: run_b - run_a on common tasks")
        for column in ("run_a", "run_b", "metric", "tasks", "diff", "95% interval", "p", "MDD"):
            diff_table.add_column(column, justify="left" if column in ("run_a", "run_b", "metric") else "right",
                                  overflow="fold")
        for row in pairs.filter(pl.col("metric").is_in(["sr_pass1", "atpr"])).iter_rows(named=True):
            interval = "-" if row["ci_low"] is None else f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"
            diff_table.add_row(row["run_a"], row["run_b"], row["metric"], str(row["n_tasks"]), _fmt(row["diff"]),
                               interval, _fmt(row["p_value"], 4), _fmt(row["mdd"]))
        stdout.print(diff_table)
    if result.get("failures") is not None:
        _print_failures(result["failures"], stdout)
    for line in noise_lines(pairs):
        stdout.print(line, highlight=False, markup=False, soft_wrap=True)  # one greppable line
    stdout.print(f"wrote {len(result['files'])} files to {result['out_dir']}")


def _print_failures(failures: pl.DataFrame, stdout: Any) -> None:
    """Why the failed turns failed: one row per category (docs/failures.md),
    one column per run, "count (share)"; nothing when no run has a failed turn."""
    import polars as pl
    from rich.table import Table

    overall = failures.filter(pl.col("reply_type") == "all")
    if overall.is_empty() or not overall["count"].sum():
        return
    runs = list(dict.fromkeys(overall["run_id"].to_list()))
    table = Table(title="failed turns by category (docs/failures.md)")
    table.add_column("failure", justify="left")
    for run_id in runs:
        table.add_column(run_id, justify="right", overflow="fold")
    cells = {(row["run_id"], row["failure"]): row for row in overall.iter_rows(named=True)}
    for failure in overall.sort("failure_order")["failure"].unique(maintain_order=True).to_list():
        values = []
        for run_id in runs:
            row = cells.get((run_id, failure))
            values.append("-" if row is None else f"{row['count']} ({_fmt(row['share'] or 0.0, 2)})")
        table.add_row(failure, *values)
    totals = {row["run_id"]: row["n_failed"] for row in overall.iter_rows(named=True)}
    table.add_row("failed turns", *(str(totals.get(run_id, 0)) for run_id in runs))
    stdout.print(table)
