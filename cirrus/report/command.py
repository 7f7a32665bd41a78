"""The report of one or more finished runs (the library behind ``cirrus
report RUN_ID... [--out DIR]``, :mod:`cirrus.commands.report`): its tables,
written as Parquet (schema: ``docs/report-schema.md``), by
:func:`report_command`.

Files written to the output folder:

* ``leaderboard.parquet``: one row per run;
* ``breakdown_category.parquet``, ``breakdown_checkpoints.parquet``,
  ``breakdown_input_tokens.parquet``, ``breakdown_tools.parquet``,
  ``breakdown_language.parquet``, ``breakdown_channel.parquet``,
  ``breakdown_reply_type.parquet``;
* ``intervals.parquet``: bootstrap confidence intervals (unless
  ``--bootstrap 0``);
* ``paired.parquet``: paired bootstrap differences of every two runs (when
  two or more runs are given, unless ``--bootstrap 0``), with the minimal
  detectable difference of SR pass@1 and ATPR and each difference's verdict
  (:mod:`cirrus.report.significance`: significantly higher, lower, or
  within the noise);
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
  the SR pass@1 and ATPR differences with their MDD (:func:`noise_summary`);
  and ``human_labels``: per run, whether its judge was checked against
  people (labels, accuracy and its interval, kappa:
  :func:`cirrus.judges.human_labels.human_check`).

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
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cirrus.report.comparability import comparability_warnings
from cirrus.report.subtask import PAPER_BANDS, TokenBands
from cirrus.report.writing import (
    HTML_FILE,
    REPORT_DISK_FULL_ADVICE,
    REPORT_FILE,
    STATS_FILE,
    default_out_dir,
    write_parquet,
)

# polars, numpy and the table code are imported when a report is made, so
# that importing this module (as `cirrus report` does) stays fast
if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.extras import ReportExtras
    from cirrus.report.loading import Price

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_N_BOOT", "DEFAULT_SEED", "cost_warnings", "noise_summary",
           "report_command", "subtask_report", "unpriced_line", "write_extras", "write_subtask_tables"]

from cirrus.report.defaults import DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, DEFAULT_SEED  # noqa: E402


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
    from cirrus.report.loading import judge_flip_rates, load_judge_consistency, load_prices, load_runs
    from cirrus.report.schema import FILES, SCHEMA_VERSION
    from cirrus.report.tables import DIMENSIONS, breakdown_by, leaderboard, summary_mismatches
    from cirrus.report.uncertainty import intervals, noise, paired

    if not isinstance(bootstrap, int) or isinstance(bootstrap, bool) or bootstrap < 0:
        raise ValueError(f"bootstrap must be an int >= 0, got {bootstrap!r}")
    from cirrus.report.subtask_runs import split_modes
    from cirrus.report.subtask import subtask_manifest, token_bands as bands_called

    bands = bands_called(token_bands)
    walk_ids, subtask_ids = split_modes(workspace, list(run_ids))
    if subtask_ids and not walk_ids:  # subtask runs only: their tables, never the walk leaderboard
        return subtask_report(subtask_ids, workspace, out, bootstrap, seed, k=k, confidence=confidence, bands=bands)
    runs = load_runs(workspace, walk_ids)
    price_table = dict(prices) if prices is not None else load_prices(workspace, config)
    warnings = [w for run in runs for w in run.warnings] + comparability_warnings(runs, k)

    tables: dict[str, pl.DataFrame] = {"leaderboard.parquet": leaderboard(runs, k, price_table)}
    unpriced = []
    for run, row in zip(runs, tables["leaderboard.parquet"].iter_rows(named=True)):
        if k is None or k == run.k:
            warnings += [f"run {run.run_id!r}: {p}" for p in summary_mismatches(run, row)]
        if row["cost_total"] is None:
            unpriced.append(run)
    warnings += cost_warnings(unpriced, price_table)  # one line names every unpriced model
    for dimension in DIMENSIONS:
        tables[f"breakdown_{dimension}.parquet"] = breakdown_by(runs, dimension, k)
    judge_noise = {}
    for run in runs:
        judge_noise[run.run_id], problems = load_judge_consistency(run)
        warnings += problems
    interval_table = paired_table = None
    if bootstrap > 0:
        interval_table = intervals(runs, k=k, n_boot=bootstrap, seed=seed, confidence=confidence)
        tables["intervals.parquet"] = interval_table
        if len(runs) > 1:
            paired_table = paired(runs, k=k, n_boot=bootstrap, seed=seed, confidence=confidence,
                                  judge_flips=judge_flip_rates(judge_noise))
            tables["paired.parquet"] = paired_table
            for row in paired_table.filter(pl.col("metric") == "sr_pass1").iter_rows(named=True):
                if row["n_tasks"] == 0:
                    warnings.append(f"runs {row['run_a']!r} and {row['run_b']!r} have no scored task in common")
    noise_table = noise(runs, judge_noise)
    tables["noise.parquet"] = noise_table
    from cirrus.report.tables import failure_breakdown

    tables["failures.parquet"] = failure_breakdown(runs)  # docs/failures.md

    out_dir = out if out is not None else default_out_dir(workspace, list(run_ids))
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    for name, frame in tables.items():
        path = out_dir / name
        write_parquet(frame, path, FILES[name])
        files[name] = path
    for name in FILES:
        if name not in tables:
            (out_dir / name).unlink(missing_ok=True)
    # subtask runs given with walks: their own tables beside (docs/subtasks.md)
    subtask_part = write_subtask_tables(subtask_ids, workspace, out_dir, bootstrap, seed, k=k, confidence=confidence,
                                        bands=bands)
    files.update(subtask_part["files"])
    warnings += subtask_part["warnings"]
    from cirrus.report.extras import report_extras
    from cirrus.report.html import write_html_report

    extras = report_extras(runs, workspace)  # dataset statistics; the run diff of exactly two runs
    files.update(write_extras(extras, out_dir))  # stats.json, diff.parquet
    # the page also shows the subtask runs' tables (their section appears only with them)
    files[HTML_FILE] = write_html_report(runs, {**tables, **subtask_part["tables"]}, out_dir, workspace, warnings,
                                         extras=extras)
    from cirrus.judges.human_labels import human_check

    # whether each run's judge was checked against people (docs/human-labels.md)
    human = {run.run_id: human_check(workspace, run.run_id) for run in runs}
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
        "human_labels": human,
    }
    with atomic_writer(out_dir / REPORT_FILE, advice=REPORT_DISK_FULL_ADVICE) as handle:
        json.dump(manifest, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    files[REPORT_FILE] = out_dir / REPORT_FILE
    return {"out_dir": out_dir, "files": files, "leaderboard": tables["leaderboard.parquet"],
            "intervals": interval_table, "paired": paired_table, "noise": noise_table, "warnings": warnings,
            "failures": tables["failures.parquet"], "subtask": subtask_part, "human_labels": human}


def cost_warnings(runs: Sequence[Any], prices: Mapping[str, Any]) -> list[str]:
    """Why the runs' ``cost_total`` is null, in one line that names every
    unpriced model with the roles and runs it served (and the runs that do
    not name a role's model), plus one line per run whose re-pricing failed
    (a broken usage record, another currency).  Nothing for a run without
    ``usage`` when there is no price table: nothing was asked to be priced."""
    from cirrus.report.loading import parse_prices
    from cirrus.report.tables import cost_of

    parsed = parse_prices(dict(prices))
    problems: list[str] = []
    unpriced: list[tuple[str | None, str, str]] = []  # (model or None when unnamed, role, run)
    for run in runs:
        if not prices and not isinstance(run.summary.get("usage"), dict):
            continue
        cost = cost_of(run, parsed)
        if cost.problem:
            problems.append(f"run {run.run_id!r}: {cost.problem}")
            continue
        roles = (("agent", run.model),) if cost.source == "none" else cost.unpriced
        unpriced += [(model, role, run.run_id) for role, model in roles]
    line = unpriced_line(unpriced)
    return ([line] if line else []) + problems


def unpriced_line(unpriced: Sequence[tuple[str | None, str, str]]) -> str | None:
    """The one price warning of ``(model, role, run_id)`` triples (model
    None: the run does not name that role's model), e.g. ``no price for 2
    models, 'm' (agent of runs 'a', 'b') and 'j' (judge and fluency of run
    'c'): the cost columns of those roles and cost_total are null (add
    [prices."m"] and [prices."j"] to cirrus.toml)``; None when nothing is
    unpriced."""
    def runs_text(run_ids: Sequence[str]) -> str:
        return ("run " if len(run_ids) == 1 else "runs ") + ", ".join(repr(r) for r in run_ids)

    def served(triples: Sequence[tuple[str | None, str, str]]) -> str:
        roles: dict[str, list[str]] = {}  # run -> its roles, then grouped by the same roles
        for _, role, run_id in triples:
            roles.setdefault(run_id, []).append(role)
        by_roles: dict[tuple[str, ...], list[str]] = {}
        for run_id, names in roles.items():
            by_roles.setdefault(tuple(names), []).append(run_id)
        return "; ".join(f"{' and '.join(names)} of {runs_text(ids)}" for names, ids in by_roles.items())

    models = list(dict.fromkeys(model for model, _, _ in unpriced if model))
    parts = []
    if models:
        named = [f"{m!r} ({served([t for t in unpriced if t[0] == m])})" for m in models]
        listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
        tables = " and ".join(f'[prices."{m}"]' for m in models)
        parts.append(f"no price for {'model' if len(models) == 1 else f'{len(models)} models,'} {listed}: the cost "
                     f"columns of those roles and cost_total are null (add {tables} to cirrus.toml)")
    unnamed = [t for t in unpriced if not t[0]]
    if unnamed:
        parts.append(f"no model named for the {served(unnamed)}: those cost columns and cost_total are null")
    return "; ".join(parts) or None


def noise_summary(noise_table: pl.DataFrame, paired_table: pl.DataFrame | None) -> dict[str, Any]:
    """``noise`` of ``report.json``: ``runs``, the rows of ``noise.parquet``
    (without ``schema_version``), and ``pairs``: per pair of runs and metric
    of :data:`~cirrus.report.uncertainty.MDD_METRICS`, the ``difference``
    (run_b - run_a on the common tasks), its ``mdd``, the interval its
    verdict reads (``test_*``, ``judge_sd``), ``verdict`` and
    ``within_noise`` (empty without a paired table: one run, or
    ``--bootstrap 0``)."""
    import polars as pl

    from cirrus.report.uncertainty import MDD_METRICS

    runs = noise_table.drop("schema_version").to_dicts()
    pairs = []
    if paired_table is not None:
        for row in paired_table.filter(pl.col("metric").is_in(list(MDD_METRICS))).iter_rows(named=True):
            pairs.append({"run_a": row["run_a"], "run_b": row["run_b"], "metric": row["metric"],
                          "n_tasks": row["n_tasks"], "estimate_a": row["estimate_a"], "estimate_b": row["estimate_b"],
                          "difference": row["diff"], "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                          "mdd": row["mdd"], "within_noise": row["within_noise"],
                          "test_confidence": row["test_confidence"], "test_low": row["test_low"],
                          "test_high": row["test_high"], "judge_sd": row["judge_sd"], "verdict": row["verdict"]})
    return {"runs": runs, "pairs": pairs}


def write_subtask_tables(run_ids: Sequence[str], workspace: Path, out_dir: Path, bootstrap: int, seed: int, *,
                         k: int | None = None, confidence: float = 0.95,
                         bands: TokenBands = PAPER_BANDS) -> dict[str, Any]:
    """The subtask part of a report into ``out_dir``: the tables of the
    subtask runs ``run_ids`` (none: the subtask files an earlier report left
    there are removed).  Returns ``{"runs", "tables", "files", "warnings", "bands"}``."""
    from cirrus.report.subtask_runs import load_subtask_run
    from cirrus.report.subtask import SUBTASK_REPORT_FILES, subtask_tables, token_warnings

    runs = [load_subtask_run(workspace, run_id) for run_id in run_ids]
    tables = subtask_tables(runs, k=k, n_boot=bootstrap, seed=seed, confidence=confidence,
                            bands=bands) if runs else {}
    files = {}
    for name, table in SUBTASK_REPORT_FILES.items():
        if name in tables:
            write_parquet(tables[name], out_dir / name, table)
            files[name] = out_dir / name
        else:
            (out_dir / name).unlink(missing_ok=True)
    warnings = [*comparability_warnings(runs, k), *token_warnings(runs)] if runs else []
    return {"runs": runs, "tables": tables, "files": files, "warnings": warnings, "bands": bands.name}


def subtask_report(run_ids: Sequence[str], workspace: Path, out: Path | None, bootstrap: int, seed: int, *,
                   k: int | None = None, confidence: float = 0.95,
                   bands: TokenBands = PAPER_BANDS) -> dict[str, Any]:
    """``cirrus report`` when every run given is a subtask run: the two
    subtask tables and ``report.json`` (no walk tables: a subtask run is
    never put on the walk leaderboard).  Returns what
    :func:`report_command` returns, with
    ``leaderboard`` None and ``subtask`` the :func:`write_subtask_tables`
    result."""
    from cirrus.files import atomic_writer
    from cirrus.report.loading import ReportError
    from cirrus.report.schema import FILES, SCHEMA_VERSION
    from cirrus.report.subtask import subtask_manifest

    if len(set(run_ids)) != len(run_ids):
        raise ReportError("a run is given twice")
    out_dir = out if out is not None else default_out_dir(workspace, list(run_ids))
    out_dir.mkdir(parents=True, exist_ok=True)
    part = write_subtask_tables(run_ids, workspace, out_dir, bootstrap, seed, k=k, confidence=confidence,
                                bands=bands)
    for name in (*FILES, HTML_FILE):  # walk tables of an earlier report in this folder
        (out_dir / name).unlink(missing_ok=True)
    from cirrus.judges.human_labels import human_check

    # whether each run's judge was checked against people (docs/human-labels.md)
    human = {run_id: human_check(workspace, run_id) for run_id in run_ids}
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "workspace": str(workspace), "runs": [], "subtask_runs": subtask_manifest(part["runs"]),
        "k": k, "bootstrap": bootstrap, "seed": seed, "confidence": confidence, "token_bands": bands.name,
        "files": sorted(part["files"]), "warnings": part["warnings"],
    }
    with atomic_writer(out_dir / REPORT_FILE) as handle:
        json.dump(manifest, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    files = {**part["files"], REPORT_FILE: out_dir / REPORT_FILE}
    return {"out_dir": out_dir, "files": files, "leaderboard": None, "intervals": None, "paired": None,
            "noise": None, "warnings": part["warnings"], "subtask": part}


def write_extras(extras: ReportExtras, out_dir: Path) -> dict[str, Path]:
    """Write ``stats.json`` (the text ``cirrus stats`` writes) and, with a
    run diff, ``diff.parquet`` (the columns ``cirrus diff`` writes) into
    ``out_dir``; remove those an earlier report there left and this one
    does not write.  Returns ``{file name: path}`` of the files written."""
    from cirrus.files import atomic_writer
    from cirrus.report.diff import DIFF_FILE, write_diff
    from cirrus.workspace_stats import stats_json

    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if extras.stats is not None:
        with atomic_writer(out_dir / STATS_FILE, advice=REPORT_DISK_FULL_ADVICE) as handle:
            handle.write(stats_json(extras.stats))
        written[STATS_FILE] = out_dir / STATS_FILE
    if extras.diff is not None:
        path = out_dir / DIFF_FILE
        write_diff(extras.diff, path)
        written[DIFF_FILE] = path
    for name in (STATS_FILE, DIFF_FILE):
        if name not in written:
            (out_dir / name).unlink(missing_ok=True)
    return written
