"""``report.html``: the report of one or more finished runs as one
self-contained web page (no network, no JavaScript, no files beside it).

:func:`write_html_report` renders the tables of ``cirrus report`` (the same
frames it writes as Parquet) with the Jinja2 template
``templates/report.html.j2``:

* the leaderboard with bootstrap confidence intervals, and a chart of SR
  pass@1 and ATPR per run with the intervals as error bars;
* bar charts of every breakdown (category, checkpoints, input tokens, tools,
  the ticket's language and channel:
  SR pass@1 and ATPR; reply type: acceptance and coverage rate), with error
  bars where ``intervals`` has the group;
* SR pass@1 against AMTL (quality against the paper's token-based
  latency: mean output tokens of the accepted turns, not seconds), one
  point per run;
* cost next to quality: per run the cost of each role (agent, judge,
  fluency), the total, the cost per success and the prompt-cache share
  (``summary.json``'s ``cost`` / ``usage``, see the leaderboard's cost
  columns), and SR pass@1 against the run's cost, one labelled point per run;
* subtask runs (``cirrus eval --mode subtask``) reported beside the walks:
  Table 4 (by input-token band) and Figure 6 (by reply type) with their
  intervals (:func:`subtask_html_section`);
* TPR by checkpoint depth: per run, the share of ok attempts (of tasks with
  at least k checkpoints) whose walk covered checkpoint k;
* noise: per run, how often tasks flip between attempts (and the judge's
  own flip rate where measured), per pair of runs the verdict on SR pass@1
  and ATPR (the interval it read, the p-value, the minimal detectable
  difference); leaderboard cells whose difference to the best run is within
  the noise (its interval contains 0) are marked ``≈`` (see
  ``docs/noise.md``);
* why turns were rejected: per run, the rejected turns by the ``failure``
  column of ``checkpoints.parquet`` (a table and a bar chart; a note for runs
  written before that column existed);
* where the two runs part (a report of exactly two runs): every (task,
  attempt) whose outcome differs, with the first checkpoint where the walks
  differ, as :func:`cirrus.report.diff.diff_runs` finds it, in collapsible
  ``<details>``;
* the dataset: :func:`cirrus.stats.compute_stats` of the workspace's tasks
  (categories, turns / checkpoints / input tokens per task as box plots of
  its quartiles, tool-call and image shares, reply types, top tools);
* a task table linking every attempt to its transcript, and the transcripts
  themselves (customer, agent under test, tool calls with their replayed
  results, reference reply, judge verdicts with the judge's raw output) as
  sections of the same page, anchored ``#t-<task>-<attempt>-<run>``.

This module only renders: :func:`cirrus.report.page.page_view` reads and
computes what the page shows (a :class:`~cirrus.report.page.PageView`),
:func:`render_page` draws its charts (:mod:`cirrus.report.charts`, matplotlib
inlined as SVG) and fills the template; every text from the tickets or the
agent goes through Jinja2's HTML escaping.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cirrus.report import charts
from cirrus.report.labels import TASK_DIMENSION_TITLES
from cirrus.report.page import PageView, page_view
from cirrus.report.views.cells import page_value
from cirrus.report.writing import HTML_FILE, write_page

if TYPE_CHECKING:
    import polars as pl

    from cirrus.report.extras import ReportExtras
    from cirrus.report.loading import Run

__all__ = ["HTML_FILE", "TEMPLATE", "render_html", "render_page", "subtask_html_section", "write_html_report"]

TEMPLATE = "report.html.j2"


def render_page(view: PageView) -> str:
    """The page of ``view`` as a string: its charts drawn, the template filled."""
    import jinja2
    import matplotlib

    matplotlib.use("Agg", force=False)

    from cirrus.report.tables import TASK_DIMENSIONS

    run_ids = view.run_ids
    colors = charts.colors(len(run_ids))
    cis = view.cis
    with matplotlib.rc_context(charts.RC):
        svgs: dict[str, str | None] = {"leaderboard": charts.leaderboard_chart(view.board, cis, run_ids, colors)}
        breakdowns = []
        for dimension in TASK_DIMENSIONS:
            svg = charts.breakdown_chart(view.breakdowns[dimension], dimension, ("sr_pass1", "atpr"), cis, run_ids,
                                         colors)
            breakdowns.append({"id": f"breakdown-{dimension}", "title": TASK_DIMENSION_TITLES[dimension],
                               "svg": jinja2.utils.markupsafe.Markup(svg), "empty": view.breakdown_empty[dimension]})
        svgs["reply_type"] = charts.breakdown_chart(view.breakdowns["reply_type"], "reply_type",
                                                    ("acceptance_rate", "coverage_rate"), cis, run_ids, colors)
        svgs["scatter"] = charts.latency_chart(view.board, cis, run_ids, view.latency_runs, colors)
        svgs["cost"] = charts.cost_chart(view.board, cis, run_ids, view.cost_runs, view.cost_currency, colors)
        subtask = None
        if view.subtask_tables:
            figure = _subtask_section(view.subtask_views, view.subtask_tables)["figure6"]
            subtask = {"tables": view.subtask_views,
                       "figure6": jinja2.utils.markupsafe.Markup(figure) if figure else None}
        svgs["depth"] = charts.depth_chart(view.depths, run_ids, colors)
        dataset_svgs = charts.dataset_charts(view.stats) if view.stats is not None else {}
        svgs["failures"] = charts.failure_chart(view.failures, dict(zip(run_ids, colors)))

    env = jinja2.Environment(loader=jinja2.PackageLoader("cirrus.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = page_value
    template = env.get_template(TEMPLATE)
    run_colors = {run: "#%02x%02x%02x" % tuple(int(c * 255) for c in color[:3]) for run, color in zip(run_ids, colors)}
    return template.render(
        title="Cirrus report: " + ", ".join(run_ids),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        workspace=view.workspace, runs=[{**run, "color": run_colors[run["run_id"]]} for run in view.runs],
        self_judged_runs=[run["run_id"] for run in view.runs if run["self_judged"]],
        mixed_k=view.mixed_k,
        leaderboard=view.leaderboard,
        paired=view.paired, confidence=view.confidence, noise_runs=view.noise_runs, noise_pairs=view.noise_pairs,
        judge_measured=any(r["judge"] for r in view.noise_runs),
        charts={k: (jinja2.utils.markupsafe.Markup(v) if isinstance(v, str) else v) for k, v in svgs.items()},
        breakdowns=breakdowns,
        reply_empty=view.breakdown_empty["reply_type"], reply_rows=view.reply_rows,
        scatter_left_out=view.latency_left_out,
        depths=view.depths.to_dicts() if not view.depths.is_empty() else [], task_rows=view.task_rows,
        run_ids=run_ids, run_colors=run_colors, transcripts=view.transcripts, warnings=view.warnings,
        notes=view.notes, has_intervals=bool(cis),
        dataset=view.dataset, dataset_problem=view.dataset_problem,
        dataset_charts={k: jinja2.utils.markupsafe.Markup(v) for k, v in dataset_svgs.items()},
        diff_rows=view.diff_rows, diff_problem=view.diff_problem, diff_common=view.diff_common,
        failures=view.failures,
        costs=view.costs, cost_left_out=view.cost_left_out,
        subtask=subtask,
    )


def _subtask_section(table_views: list[dict[str, Any]], tables: Mapping[str, Any]) -> dict[str, Any]:
    from cirrus.report.subtask import BY_REPLY_TYPE_FILE

    figure = charts.figure6_svg(tables[BY_REPLY_TYPE_FILE]) if BY_REPLY_TYPE_FILE in tables else None
    return {"tables": table_views, "figure6": figure}


def subtask_html_section(tables: Mapping[str, Any]) -> dict[str, Any] | None:
    """The page's subtask section of the subtask tables ``tables`` (keyed by
    file name): ``{"tables": [table views], "figure6": svg or None}``; None
    when the report has no subtask run."""
    from cirrus.report.views.subtask import section_tables

    if not tables:
        return None
    return _subtask_section(section_tables(tables), tables)


def render_html(runs: Sequence[Run], tables: Mapping[str, pl.DataFrame], workspace: Path,
                warnings: Sequence[str] = (), *, extras: ReportExtras | None = None) -> str:
    """The page as a string (see :func:`write_html_report`)."""
    return render_page(page_view(runs, tables, workspace, warnings, extras=extras))


def write_html_report(runs: Sequence[Run], tables: Mapping[str, pl.DataFrame], out_dir: Path,
                      workspace: Path, warnings: Sequence[str] = (), *, extras: ReportExtras | None = None) -> Path:
    """Write ``out_dir/report.html`` (atomically) and return its path.

    ``runs``: the runs as :func:`~cirrus.report.loading.load_runs` gives
    them; ``tables``: the frames of ``cirrus report`` keyed by file name
    (``leaderboard.parquet``, ``breakdown_<dimension>.parquet``,
    ``intervals.parquet``, ``paired.parquet``, ``noise.parquet``, and the
    subtask runs' ``subtask_by_tokens.parquet`` / ``subtask_by_reply_type.parquet``
    when the report has any; the suffix may be left out).  A missing leaderboard, breakdown or noise table is
    computed (the noise table then without judge noise); without
    ``intervals`` the charts have no error bars, without ``paired`` there
    are no MDDs and no ``≈`` marks.  ``workspace``: for the tasks' earlier
    messages (``tickets/tasks.jsonl``) and its dataset statistics.
    ``warnings`` are shown at the top.  ``extras``: the dataset statistics
    and run diff (:func:`~cirrus.report.extras.report_extras`; read when not given).
    """
    return write_page(render_html(runs, tables, workspace, warnings, extras=extras), out_dir)
