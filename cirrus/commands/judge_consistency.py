"""``cirrus judge-consistency RUN_ID``: how noisy the judge is, measured by
:mod:`cirrus.judges.consistency` (a sample of the run's saved coverage
verdicts asked again) and printed as a table, one reading line and notes;
the result is written to ``reports/<RUN_ID>/judge_consistency.json``."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, console, fail, out
from cirrus.judges.consistency import OUTPUT_FILE, ci95_text, percent

if TYPE_CHECKING:
    from cirrus.judges.consistency import ConsistencyStats

__all__ = ["judge_consistency", "print_stats"]

_MAX_SHOWN_ERRORS = 5


def judge_consistency(
    run_id: Annotated[str, typer.Argument(help="The finished run (reports/<RUN_ID>/) whose saved coverage verdicts are asked again.")],
    sample: Annotated[int, typer.Option("--sample", "-n", min=1, help="How many saved verdicts (items) to draw at random; all of them when the run has fewer.")] = 50,
    repeats: Annotated[int, typer.Option("--repeats", "-r", min=1, help="Fresh judge calls per item (R); self-agreement needs R >= 2.")] = 3,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random draw and of the bootstrap: the same seed draws the same items.")] = 0,
    judge_model: Annotated[Optional[str], typer.Option(help="The judge to ask: a model name, a comma list (a panel) or 'local' (default: the run's own judge from run.json, else cirrus.toml's judge role).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the judge (default: the run's, else cirrus.toml's, else the provider registry).")] = None,
    judge_api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the judge's API key (default: the run's, else cirrus.toml's).")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Judge calls in flight at once.")] = 8,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help=f"Write the result here instead of reports/<RUN_ID>/{OUTPUT_FILE}.")] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, reports/, cirrus.toml).")] = Path("."),
    config: Annotated[Optional[Path], typer.Option(help="Settings file (default: cirrus.toml in the workspace or here).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Measure how noisy the judge is: ask it a run's saved coverage questions again and count changed verdicts."""
    from tqdm import tqdm

    from cirrus.evaluate.roles import LOCAL, RoleError, RoleOptions, build_roles
    from cirrus.evaluate.saved_run import run_judge
    from cirrus.files import DiskFullError
    from cirrus.judges.consistency import (
        ConsistencyError,
        ask_again,
        bypass_cache,
        collect_items,
        consistency_result,
        draw_sample,
        judge_options,
        load_run,
        reading,
        write_result,
    )
    from cirrus.llm.providers import EndpointError
    from cirrus.settings import SettingsError, load_settings

    try:
        configured = load_settings(workspace, config).role("judge")
        source = load_run(workspace, run_id)
        items, unknown = collect_items(source)
        recorded = run_judge(source.run)
        options = judge_options(recorded, configured, judge_model, judge_base_url, judge_api_key_env)
    except (SettingsError, ConsistencyError) as exc:
        fail(str(exc), highlight=False)
    if not items:
        fail(f"run {run_id} holds no coverage verdict given by a judge call: there is nothing to ask again",
             highlight=False)
    asked = draw_sample(items, sample, seed)
    target = output or source.directory / OUTPUT_FILE

    async def main() -> tuple[Any, Any, list[str]]:
        # build_roles wants an agent: an offline baseline that is never called
        roles = build_roles(RoleOptions("baseline:oracle"), options, RoleOptions(LOCAL), [], workspace)
        try:
            bypass_cache(roles.judge)
            bar = tqdm(total=len(asked) * repeats, desc=f"judge-consistency {run_id}", unit="call", disable=quiet,
                       dynamic_ncols=True)
            try:
                errors = await ask_again(roles.judge, asked, repeats, concurrency, lambda: bar.update(1))
            finally:
                bar.close()
            return roles.judge, roles.fingerprint["judge_role"], errors
        finally:
            await roles.aclose()

    try:
        judge, fingerprint, errors = asyncio.run(main())
    except (RoleError, EndpointError, ValueError) as exc:
        fail(str(exc), highlight=False)
    stats, result = consistency_result(source, asked, len(items), repeats, seed, judge.name, fingerprint)
    overall = stats["all"]
    print_stats(f"cirrus judge-consistency: {judge.name} on run {source.run_id} ({len(asked)} of {len(items)} "
                f"verdicts, {repeats} fresh calls each, seed {seed})", stats)
    distinct = Counter(errors)  # the repeats of one item often fail alike
    for message, count in list(distinct.items())[:_MAX_SHOWN_ERRORS]:
        times = f" ({count} calls)" if count > 1 else ""
        console.print(f"[yellow]failed call{times}[/] {escape(message)}", highlight=False)
    if len(distinct) > _MAX_SHOWN_ERRORS:
        console.print(f"[yellow]... and {len(distinct) - _MAX_SHOWN_ERRORS} more kinds of failed calls[/]")
    if overall.calls and overall.failed_calls == overall.calls:
        fail(f"every judge call failed ({overall.calls}): nothing was measured and {target} was not written; "
             "check the judge's endpoint and key (--judge-base-url, --judge-api-key-env)", code=EXIT_FAILED,
             highlight=False)
    out.print(escape(reading(overall)), highlight=False)
    if repeats == 1:
        console.print("[yellow]note:[/] self-agreement needs at least 2 fresh calls per item (--repeats 2 or more)")
    if unknown:
        console.print(f"[yellow]note:[/] {unknown} saved verdicts were left out: their turn's tool calls decided the "
                      "checkpoint and the judge's own verdict cannot be read from the saved answer")
    if getattr(judge, "offline", False):
        console.print("[yellow]note:[/] the local judge is a deterministic offline heuristic: the same question always "
                      "gets the same answer, so 0 flips is expected; it says nothing of an LLM judge's noise")
    elif recorded.fingerprint is not None and fingerprint != recorded.fingerprint:
        console.print(f"[yellow]note:[/] this judge is not the one that made run {source.run_id} (model, parameters, "
                      "prompts or input limits differ): a changed verdict may be that difference, not noise")
    try:
        write_result(target, result)
    except (DiskFullError, OSError) as exc:
        fail(f"cannot write {target}: {exc}", code=EXIT_FAILED, highlight=False)
    out.print(f"written: {escape(str(target))}", highlight=False)


def print_stats(title: str, stats: dict[str, ConsistencyStats], caption: str | None = None) -> None:
    """The table: one column for all items, one per kind."""
    table = Table(title=title, caption=caption)
    columns = {"all": "all items", "own": "own checkpoint (j = k)", "jump": "logical jump (j > k)"}
    table.add_column("")
    for name in columns:
        table.add_column(columns[name], justify="right")

    def rate(value: float | None, count: int, total: int, ci: Sequence[float] | None) -> str:
        if value is None:
            return "-"
        return f"{percent(value)} ({count} of {total}), {ci95_text(ci)}"

    rows: list[tuple[str, Callable[[ConsistencyStats], str]]] = [
        ("items asked", lambda s: str(s.sample)),
        ("fresh calls (failed)", lambda s: f"{s.calls} ({s.failed_calls})"),
        ("item flip rate", lambda s: rate(s.item_flip_rate, s.items_flipped, s.items_scored, s.item_flip_rate_ci95)),
        ("verdict flip rate", lambda s: rate(s.verdict_flip_rate, s.verdicts_flipped, s.verdicts,
                                             s.verdict_flip_rate_ci95)),
        ("self-agreement", lambda s: "-" if s.self_agreement is None else
         f"{percent(s.self_agreement)} ({s.items_self_agreeing} of {s.items_compared})"),
    ]
    for label, show in rows:
        table.add_row(label, *(show(stats[name]) for name in columns))
    out.print(table)
