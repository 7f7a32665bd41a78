"""``cirrus rescore RUN_ID``: a finished run's saved transcripts judged again
by another judge, without calling the agent
(:func:`cirrus.evaluate.rescore.run_rescore`), written as a new run; the
source and rescored scores printed side by side, with the judges' usage and
cost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, console, fail, out
from cirrus.workspace import REPORTS_DIR

if TYPE_CHECKING:
    from cirrus.llm.batch import BatchStatus

__all__ = ["print_rescore", "print_usage_cost", "rescore"]

BATCH_HELP = ("Send the judge (and fluency) questions through the provider's Batch API, at its batch price: one "
              "batch per endpoint per round (a walk's next question depends on the last verdict, so a rescore "
              "takes a few rounds). Each round waits for the provider, up to its completion window (24h). "
              "Interrupted? Run the same command again: the batches already sent are polled, not sent again "
              "(state under .cirrus-cache/batches/). Poll interval: $CIRRUS_BATCH_POLL_S seconds (default 30).")


def rescore(
    run_id: Annotated[str, typer.Argument(help="The finished run (reports/<RUN_ID>/) whose transcripts are judged again.")],
    judge_model: Annotated[Optional[list[str]], typer.Option(help="The new coverage judge: a model name, or 'local' for the offline heuristic (default: cirrus.toml's judge). Several (repeated, or a comma list) make a judge panel: the majority decides, a tie is Not Included.")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the judge (default: cirrus.toml's; for the run's own judge model, the URL the run recorded; else the provider registry).")] = None,
    judge_api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the judge's API key (default: cirrus.toml's; at the URL the run recorded, the run's judge key variable).")] = None,
    fluency_model: Annotated[Optional[str], typer.Option(help="Re-check fluency with this model (or 'local'); default: reuse the run's saved fluency verdicts.")] = None,
    fluency_base_url: Annotated[Optional[str], typer.Option(help="Base URL of the fluency checker (default: the judge's).")] = None,
    fluency_api_key_env: Annotated[Optional[str], typer.Option(help="Key variable of the fluency checker (default: the judge's).")] = None,
    new_run_id: Annotated[Optional[str], typer.Option("--run-id", help="Name of the new run (default: <RUN_ID>-rescored-<judge>); the same id resumes.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="(task, attempt) pairs in flight at once.")] = 8,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")] = Path("."),
    config: Annotated[Optional[Path], typer.Option(help="Settings file (default: cirrus.toml in the workspace or here).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    batch: Annotated[bool, typer.Option("--batch", help=BATCH_HELP)] = False,
) -> None:
    """Judge a finished run's saved transcripts again with another judge, without calling the agent; writes a new run."""
    from cirrus.evaluate.rescore import (
        RescoreError,
        RescoreSettings,
        default_run_id,
        judge_options,
        rescore_self_judged,
        run_rescore,
    )
    from cirrus.evaluate.roles import LOCAL, SELF_JUDGED_HINT, RoleError, RoleOptions, build_roles
    from cirrus.evaluate.saved_run import RUN_ID_PATTERN, SourceRun, load_source
    from cirrus.evaluate.store import RunMismatch
    from cirrus.evaluate.tasks import TaskFileError
    from cirrus.llm.batch import BatchError, BatchFailed, BatchUnsupported
    from cirrus.llm.batching import BatchMissing
    from cirrus.llm.providers import EndpointError
    from cirrus.pricing import PriceError, parse_prices
    from cirrus.schema import task_dict
    from cirrus.settings import SettingsError, load_settings

    try:
        settings_file = load_settings(workspace, config)
        prices = parse_prices(settings_file.prices, "cirrus.toml: prices")
    except (SettingsError, PriceError) as exc:
        fail(str(exc), highlight=False)
    configured_judge = settings_file.role("judge")
    judge_name = ",".join(judge_model) if judge_model else configured_judge.model
    if not judge_name:
        fail("give the new judge with --judge-model (a model name, or 'local')", highlight=False)
    fluency = None
    if fluency_model:
        configured_fluency = settings_file.role("fluency")
        fluency = RoleOptions(fluency_model, fluency_base_url or configured_fluency.base_url,
                              fluency_api_key_env or configured_fluency.api_key_env, configured_fluency.params())
    target = new_run_id or default_run_id(run_id, judge_name)
    if not RUN_ID_PATTERN.fullmatch(target) or target.startswith("."):
        fail(f"--run-id {target!r}: use letters, digits, '.', '_' and '-' only", highlight=False)

    async def main(source: SourceRun) -> dict[str, Any]:
        judge, where = judge_options(source, judge_name, judge_base_url or configured_judge.base_url,
                                     judge_api_key_env or configured_judge.api_key_env, configured_judge.params())
        if where:
            _note(where)
        # build_roles wants an agent: an offline baseline that is never called (agents read tasks as dicts)
        roles = build_roles(RoleOptions("baseline:oracle"), judge, fluency or RoleOptions(LOCAL),
                            [task_dict(task) for task in source.tasks], workspace)
        try:
            extra = {"judge_role": roles.fingerprint["judge_role"]}
            if fluency is not None:
                extra["fluency_role"] = roles.fingerprint["fluency_role"]
            details = {k: v for k, v in roles.details.items() if k != "agent_base_url"}
            if fluency is None:
                details.pop("fluency_base_url", None)
            selfish = rescore_self_judged(source, roles.clients, fluency is None)
            details.update(self_judged=bool(selfish), self_judged_roles=selfish)
            if selfish:
                console.print(f"[yellow]warning:[/] the rescore grades the agent with itself ({', '.join(selfish)}: "
                              f"the agent's own model); recorded as self_judged; {escape(SELF_JUDGED_HINT)}")
            models = {name: client.model for name, client in roles.clients.items() if name != "agent"}
            settings = RescoreSettings(workspace, run_id, target, concurrency, not quiet, extra,
                                       {**details, "batch": batch}, models, prices)
            collector = None
            if batch:
                from cirrus.llm.batching import BatchCollector

                collector = BatchCollector()
                if not roles.use_batch(collector):
                    console.print("[yellow]note:[/] --batch: no role calls a model (the local judge), nothing to batch")
                    collector = None
            return await run_rescore(settings, roles.judge, roles.fluency if fluency else None, source,
                                     batch=collector, notify=None if quiet else _note,
                                     batch_progress=None if quiet else _batch_progress())
        finally:
            await roles.aclose()

    try:
        source = load_source(workspace, run_id)
        summary = asyncio.run(main(source))
    except BatchUnsupported as exc:
        fail(str(exc), code=EXIT_USAGE, highlight=False)
    except BatchFailed as exc:
        fail(str(exc), code=EXIT_FAILED, highlight=False)  # names the batch id and the state file to delete
    except BatchError as exc:  # a state file of other requests, polling that kept failing, TooManyRounds
        fail(str(exc), code=EXIT_FAILED, highlight=False)
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted:[/] run the same command again to resume"
                      + (" (the batches already sent are polled, not sent again)" if batch else ""))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (RescoreError, TaskFileError, RoleError, EndpointError, RunMismatch, ValueError) as exc:
        fail(str(exc), highlight=False)
    except BatchMissing as exc:
        fail(str(exc), code=EXIT_FAILED, highlight=False)
    print_rescore(summary, workspace / REPORTS_DIR / target)
    print_usage_cost(summary)


def print_rescore(summary: dict[str, Any], directory: Path) -> None:
    """The source run's scores beside the rescore's, then its notes."""
    def fmt(value: object) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    info = summary["rescore"]
    source_sr = info.get("source_sr") or {}
    table = Table(title=f"cirrus rescore: {info['source_run']} -> {directory.name}", caption=str(directory))
    for column, justify in (("", "left"), ("source", "right"), ("rescored", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_row("judge", str(info["source_judge"]), str(summary["judge"]))
    table.add_row("fluency", str(info["source_fluency"]), str(summary["fluency"]))
    table.add_row("ATPR", fmt(info.get("source_atpr")), fmt(summary["atpr"]))
    for name, value in summary["sr"].items():
        table.add_row(f"SR {name}", fmt(source_sr.get(name)), fmt(value))
    table.add_row("attempts (errors)", "", f"{summary['attempts']} ({summary['errors']})")
    table.add_row("attempts changed / truncated", "", f"{info['changed']} / {info['truncated']}")
    agreement = info["verdict_agreement"]
    table.add_row("verdict agreement", "", f"{fmt(agreement)} ({info['verdicts_compared']} pairs)")
    if "verdicts_reused" in info:
        table.add_row("verdicts from the run / the cache", "",
                      f"{info['verdicts_reused']} / {info['verdicts_from_cache']}")
    out.print(table)
    if info.get("same_judge"):
        console.print(f"[yellow]note:[/] the judge is run {info['source_run']}'s own: {info['verdicts_reused']} "
                      "verdicts were taken as the run recorded them, not asked again (the cache keeps one answer "
                      "per question; the run's attempts may have got different ones)", highlight=False)
    if info.get("cached_verdicts_differing"):
        console.print(f"[yellow]note:[/] {info['cached_verdicts_differing']} of the {info['verdicts_from_cache']} "
                      f"verdicts answered from Cirrus's cache differ from run {info['source_run']}'s own verdict on "
                      "the same turn (`answer_from: cache` in transcripts.jsonl; summary.json: "
                      "rescore.cached_verdicts_differing)", highlight=False)
    if info["truncated"]:
        console.print(f"[yellow]note:[/] {info['truncated']} attempts were truncated: the new judge accepted turns "
                      "past where the saved transcripts end; their coverage is a lower bound (column `truncated`)")
    if summary.get("judge_panel"):
        from cirrus.judges.agreement import describe_agreement

        for line in describe_agreement(summary["judge_panel"]):
            out.print(escape(line), highlight=False)
    if summary.get("offline_heuristics"):
        console.print(f"[yellow]note:[/] offline heuristics used for: {', '.join(summary['offline_heuristics'])}")


def _note(text: str) -> None:
    """A line for the user on stderr, as written (no markup)."""
    console.print(escape(text), highlight=False)


def _batch_progress() -> Callable[[str, BatchStatus], None]:
    """A progress callback printing a batch's status when it changes."""
    last: dict[tuple[str, str], str] = {}

    def show(endpoint: str, status: BatchStatus) -> None:
        key = (endpoint, status.batch_id)
        if last.get(key) != status.status:
            last[key] = status.status
            part = f" part {status.part}/{status.parts}" if status.parts > 1 else ""
            console.print(escape(f"batch {status.batch_id}{part} at {endpoint}: {status.status} "
                                 f"({status.completed} done, {status.failed} failed of {status.total})"),
                          highlight=False)
    return show


def print_usage_cost(summary: dict[str, Any]) -> None:
    """The judges' calls and what they cost (summary.json's usage and cost)."""
    usage, cost = summary.get("usage") or {}, summary.get("cost") or {}
    if not usage:
        return
    currency = cost.get("currency") or ""
    for role, counts in usage.items():
        value = cost.get(role)
        shown = "no price" if value is None else f"{value:.4f} {currency}".strip()
        batched = f", {counts.get('batch_calls', 0)} in batches" if counts.get("batch_calls") else ""
        out.print(escape(f"{role}: {counts.get('calls', 0)} calls{batched}, {counts.get('cirrus_cache_hits', 0)} "
                         f"from the cache, {counts.get('input_tokens', 0)} input / {counts.get('output_tokens', 0)} "
                         f"output tokens, cost {shown}"), highlight=False)
    if summary.get("batch"):
        info = summary["batch"]
        out.print(escape(f"batch: {info['requests']} requests in {info['rounds']} rounds"), highlight=False)
