"""``cirrus show RUN_ID [--task ID] [--failed]``: a run in the terminal.

Without ``--task``: the run's summary table and one line per (task, attempt)
(covered / K, TPR, success, why the walk stopped); ``--failed`` keeps the
attempts that did not succeed (``success`` false, or ``status = error``).

With ``--task ID``: the summary table and one attempt's walk through its
checkpoints, turn by turn: the customer's query, the reference reply and
tool calls, the agent's tool calls (answered from the cassette or not) and
reply, the failure category of a failed turn (docs/failures.md), every
verdict the turn got (``accepts k?``: whether the turn was
accepted for each checkpoint it was judged against, with the coverage judge's
raw answer; RR / TIA / TSA / TEV of the checkpoint it answered; ``fluent ->
k?``: the fluency check of the next query), and why the walk stopped.  The attempt is
``--attempt N``, else the first failing one with ``--failed``, else the
first.

The run is read by :mod:`cirrus.report.run_view` (a run still going, or
killed, can be looked at too: its summary is then missing and said so).
Texts longer than ``--width`` characters are cut unless ``--full`` is given;
output that is not a terminal (piped, redirected) is then laid out for that
width too (:func:`walk_width`), so a line is about ``--width`` plus the
labels wide and the texts that are never cut (a failure's description) wrap,
as they do in a terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cirrus.commands._common import console, fail, out
from cirrus.report.run_view import RunView, ShowError, failed, failure_description, load_run_view, pick_attempt
from cirrus.report.run_view import stop_reason

__all__ = ["WALK_OVERHEAD", "attempts_table", "show", "summary_table", "walk_view", "walk_width"]


def show(
    run_id: Annotated[str, typer.Argument(help="The run to show (reports/<RUN_ID>/).")],
    task: Annotated[Optional[str], typer.Option("--task", "-t", help="Show this task's walk, checkpoint by checkpoint.")] = None,
    attempt: Annotated[Optional[int], typer.Option(min=0, help="Which attempt of --task (default: the first, or the first failing one with --failed).")] = None,
    failed_only: Annotated[bool, typer.Option("--failed", help="Only attempts that did not succeed (or, with --task, its first failing attempt).")] = False,
    limit: Annotated[int, typer.Option(min=1, help="Most attempts listed without --task.")] = 50,
    full: Annotated[bool, typer.Option("--full", help="Do not cut long texts.")] = False,
    width: Annotated[int, typer.Option(min=40, help="Cut texts longer than this many characters (unless --full); piped or redirected output is laid out for this width too.")] = 600,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")] = Path("."),
) -> None:
    """Show a run: its summary, and one task's walk with the verdict at each checkpoint."""
    try:
        view = load_run_view(workspace, run_id)
        attempts, chosen = pick_attempt(view, task, attempt, failed_only)
    except ShowError as exc:
        fail(str(exc), highlight=False)
    cut = None if full else width
    if view.summary is not None:
        out.print(summary_table(view.summary, f"cirrus show: {run_id}", str(view.directory)))
    else:
        console.print(f"[yellow]note:[/] run {escape(run_id)} has no summary.json yet (not finished); "
                      f"{len(view.rows)} attempts are committed")
    if task is None:
        rows = [view.rows[key] for key in sorted(view.rows)]
        if failed_only:
            rows = [r for r in rows if failed(r)]
        if not rows:
            out.print(Text(f"no {'failing ' if failed_only else ''}attempt in run {run_id}"))
            return
        out.print(attempts_table(rows[:limit], f"{'failing attempts' if failed_only else 'attempts'} of {run_id}: "
                                               f"{len(rows)}"))
        if len(rows) > limit:
            console.print(f"... and {len(rows) - limit} more (use --limit)")
        return
    if chosen is None:
        out.print(Text(f"task {task} has no failing attempt in run {run_id} "
                       f"({len(attempts)} attempts, all successful)"))
        return
    out.print(walk_view(view, chosen, cut, expand=not getattr(out, "unbounded", False)), width=walk_width(out, cut))
    others = [r for r in attempts if r is not chosen]
    if others:
        listed = ", ".join(f"{r['attempt']}: {'error' if r.get('status') != 'ok' else 'ok' if r.get('success') else 'failed'}"
                           f" ({r.get('covered', '-')}/{r.get('checkpoints')})" for r in others)
        console.print(f"other attempts of {escape(task)}: {escape(listed)} (use --attempt N)")


# ---------------------------------------------------------------------------
# the renderables


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _mark(value: Any) -> Text:
    if value is None:
        return Text("-", style="dim")
    return Text("yes", style="green") if value else Text("NO", style="bold red")


# what a walk's panel adds to its texts: the label column ("context: tool result"),
# the borders and padding, and the " [... N more chars]" that _cut appends
WALK_OVERHEAD = 40


def walk_width(console: Any, width: int | None) -> int | None:
    """The width a walk is printed at: ``--width`` plus the panel's
    labels and borders when the output is not a terminal and texts are cut
    (``width`` given); ``None`` (the console's own width) otherwise: a
    terminal keeps its width, ``--full`` output its long lines."""
    if width is None or getattr(console, "is_terminal", True):
        return None
    return width + WALK_OVERHEAD


def _cut(text: str, width: int | None) -> str:
    text = (text or "").strip()
    if width is None or len(text) <= width:
        return text
    return text[: max(0, width - 14)].rstrip() + f" [... {len(text) - width + 14} more chars]"


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------------------
# printing


def summary_table(summary: dict[str, Any], title: str, caption: str | None = None) -> Table:
    table = Table(title=title, caption=caption, show_header=False)
    rows: list[tuple[str, Any]] = [("model", summary.get("model")), ("tasks", summary.get("n_tasks")),
                                   ("attempts (errors)", f"{summary.get('attempts', '-')} ({summary.get('errors', '-')})"),
                                   ("ATPR", summary.get("atpr")), ("ALJ", summary.get("alj")),
                                   ("ANEI", summary.get("anei")), ("AMTL", summary.get("amtl"))]
    rows += [(f"SR {name}", value) for name, value in (summary.get("sr") or {}).items()]
    rows += [(key, summary[key]) for key in summary if key.startswith("pass^")]
    rows += [("judge / fluency", f"{summary.get('judge', '-')} / {summary.get('fluency', '-')}")]
    rescore = summary.get("rescore")
    if isinstance(rescore, dict):
        rows += [("rescore of", f"{rescore.get('source_run')} (judge {rescore.get('source_judge')})"),
                 ("truncated attempts", rescore.get("truncated"))]
    for name, value in rows:
        table.add_row(name, Text(_fmt(value)))
    return table


def _result(row: dict[str, Any]) -> Text:
    if row.get("status") != "ok":
        return Text("error", style="bold red")
    return Text("success", style="green") if row.get("success") else Text("failed", style="red")


def attempts_table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    table.add_column("task", no_wrap=True)
    table.add_column("att", justify="right", no_wrap=True)
    table.add_column("category", max_width=12, overflow="ellipsis", no_wrap=True)
    table.add_column("covered", justify="right", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("walk ended", min_width=16)
    for row in rows:
        ok = row.get("status") == "ok"
        covered = f"{row.get('covered')}/{row.get('checkpoints')}" if ok else f"-/{row.get('checkpoints')}"
        table.add_row(Text(str(row["task_id"])), str(row["attempt"]), Text(_fmt(row.get("category"))), covered,
                      _result(row), Text(stop_reason(row, short=True)))
    return table


def _turn_panel(turn: dict[str, Any], stats: dict[str, Any], width: int | None, expand: bool = True) -> Panel:
    body = Table(show_header=False, box=None, padding=(0, 1), expand=expand)
    body.add_column("what", style="bold", no_wrap=True)
    body.add_column("value", ratio=1)
    for message in turn.get("context") or []:  # turns between checkpoints, shown to the agent, never judged
        role = {"user": "customer", "assistant": "agent", "tool": "tool result"}.get(message.get("role"), "?")
        text = message.get("content") or " ".join(
            f"{(c.get('function') or {}).get('name')} {(c.get('function') or {}).get('arguments')}"
            for c in message.get("tool_calls") or [])
        body.add_row(Text(f"context: {role}", style="dim"), Text(_cut(str(text), width), style="dim"))
    body.add_row("customer", Text(_cut(turn.get("query", ""), width)))
    body.add_row("reference", Text(_cut(turn.get("reference", ""), width) or "(no text: tool calls only)"))
    for call in turn.get("reference_tool_calls") or []:
        body.add_row("reference tool", Text(f"{call.get('name')} {_cut(_arguments(call.get('arguments')), width)}"))
    for call in turn.get("tool_calls") or []:
        answered = (Text(" answered from the cassette", style="green") if call.get("recorded")
                    else Text(f" {call.get('error') or 'no recorded result'}", style="red"))
        body.add_row("agent tool", Text(f"{call.get('name')} {_cut(_arguments(call.get('arguments')), width)}")
                     + answered)
    body.add_row("agent", Text(_cut(turn.get("agent_text", ""), width) or "(no text)"))
    for verdict in turn.get("verdicts") or []:
        kind, checkpoint = verdict.get("kind"), verdict.get("checkpoint")
        label = {"coverage": f"accepts {checkpoint}?", "fluency": f"fluent -> {checkpoint}?",
                 "truncated": f"continue -> {checkpoint}?"}.get(kind, f"{kind} {checkpoint}")
        raw = verdict.get("raw")
        detail = "(no judge asked: tool calls only)" if raw is None and kind == "coverage" else (raw or "")
        body.add_row(label, _mark(verdict.get("ok")) + Text("  ") + Text(_cut(detail, width), style="dim"))
    checks = Text()
    for name in ("rr", "tia", "tsa", "tev"):
        checks += Text(f"{name.upper()} ") + _mark(stats.get(name)) + Text("  ")
    checks += Text(f"STL {_fmt(stats.get('stl'))}")
    body.add_row("checks", checks)
    accepted = turn.get("accepted")
    failure = stats.get("failure")  # docs/failures.md; runs written before it lack it
    if accepted:
        through = turn.get("covered_through")
        span = f"{turn.get('checkpoint')}" if through == turn.get("checkpoint") else f"{turn.get('checkpoint')}-{through}"
        title = Text(f"checkpoint {turn.get('checkpoint')}: ACCEPTED, covers {span}", style="bold green")
        if failure:
            title += Text(f" (failure: {failure})", style="bold red")
    else:
        title = Text(f"checkpoint {turn.get('checkpoint')}: REJECTED" + (f" ({failure})" if failure else ""),
                     style="bold red")
    if failure:
        body.add_row("failure", Text(f"{failure}: {failure_description(failure)}", style="red"))
    reply_type = stats.get("reply_type") or ""
    return Panel(body, title=title, subtitle=Text(reply_type) if reply_type else None, title_align="left",
                 expand=expand)


def walk_view(view: RunView, row: dict[str, Any], width: int | None, expand: bool = True) -> Group:
    """One attempt's walk; ``expand=False``: panels as wide as their text,
    not the console (output that is not a terminal)."""
    key = (row["task_id"], row["attempt"])
    transcript = view.transcripts.get(key) or {}
    header = Table(show_header=False, title=Text(f"task {row['task_id']}, attempt {row['attempt']}"))
    header.add_row("category", Text(_fmt(row.get("category"))))
    header.add_row("status", Text(_fmt(row.get("status"))))
    if row.get("status") == "ok":
        header.add_row("covered", f"{row.get('covered')} of {row.get('checkpoints')} checkpoints "
                                  f"({row.get('accepted_turns')} accepted turns)")
        header.add_row("TPR / LJ / NEI / MTL",
                       f"{_fmt(row.get('tpr'))} / {_fmt(row.get('lj'))} / {_fmt(row.get('nei'))} / {_fmt(row.get('mtl'))}")
        header.add_row("success", _mark(row.get("success")))
    header.add_row("walk ended", Text(stop_reason(row)))
    parts: list[Any] = [header]
    stats_by_turn = row.get("turns") or []
    for index, turn in enumerate(transcript.get("turns") or []):
        stats = stats_by_turn[index] if index < len(stats_by_turn) else {}
        parts.append(_turn_panel(turn, stats, width, expand))
    covered, total = row.get("covered") or 0, row.get("checkpoints") or 0
    if row.get("status") == "ok" and covered < total:
        missing = f"checkpoint {total}" if covered + 1 == total else f"checkpoints {covered + 1}-{total}"
        parts.append(Text(f"{missing} not covered", style="yellow"))
    return Group(*parts)
