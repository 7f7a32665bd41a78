"""``cirrus judge-eval LABELS.jsonl [--role fluency]``: a coverage judge (or
the fluency checker) measured against human labels by
:mod:`cirrus.judges.calibration`, printed as a metrics table, a confusion
matrix and the calls' usage and cost."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, console, fail, out
from cirrus.judges.calibration import COVERAGE_SPEC, CalibratedRole, JudgeMetrics, RoleSpec

__all__ = ["judge_eval", "print_metrics"]


def judge_eval(
    labels: Annotated[Optional[Path], typer.Argument(help="JSONL of human-labelled rows: history, query, reference, candidate, label (with --role fluency: history, next_query, label Yes/No). Not with --human.")] = None,
    human: Annotated[Optional[str], typer.Option("--human", metavar="RUN", help="Instead of a labels file: the verdicts the judge gave in run RUN against the labels people gave them (`cirrus view`, `cirrus annotate import`; labels/human.jsonl of the workspace). Calls no model.")] = None,
    role: Annotated[CalibratedRole, typer.Option(help="What to measure: the coverage judge (labels Included/Not Included) or the fluency checker (labels Yes/No: does the customer's next message still follow?).")] = CalibratedRole.coverage,
    judge_model: Annotated[Optional[str], typer.Option(help="The model being measured, the judge or with --role fluency the fluency checker: a model name, or 'local' for the offline heuristic (default: cirrus.toml's \\[roles.judge], or \\[roles.fluency] with --role fluency, else local).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the model being measured (default: provider registry).")] = None,
    judge_api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the API key of the model being measured.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Judge calls in flight at once.")] = 8,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write one JSON line per row (label, verdict, raw answer) here.")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Only the first N rows.")] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (cirrus.toml, response cache).")] = Path("."),
    config: Annotated[Optional[Path], typer.Option(help="Settings file (default: cirrus.toml in the workspace or here).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    batch: Annotated[bool, typer.Option("--batch", help="Send the questions through the provider's Batch API, at its batch price (one batch, a second round only to repair unreadable answers). Waits for the provider, up to its completion window (24h). Interrupted? Run the same command again: the batch already sent is polled, not sent again (state under .cirrus-cache/batches/). Poll interval: $CIRRUS_BATCH_POLL_S seconds (default 30).")] = False,
) -> None:
    """Measure a coverage judge (or, with --role fluency, the fluency checker) against human labels: accuracy, precision, recall, Cohen's kappa, confusion matrix.

    With --human RUN: the judge's verdicts in run RUN against the labels
    people gave them, overall and per language (no model is called)."""
    if human is not None:
        if labels is not None:
            fail("give a labels file or --human RUN, not both", code=EXIT_USAGE)
        if role is not CalibratedRole.coverage:
            fail("--human measures the coverage judge: people label its verdicts (leave out --role)", code=EXIT_USAGE)
        _human_eval(human, workspace, output)
        return
    if labels is None:
        fail("give a labels file (JSONL) or --human RUN", code=EXIT_USAGE)
    from tqdm import tqdm

    from cirrus.evaluate.roles import CACHE_DIR, LOCAL, RoleError, RoleOptions, build_roles
    from cirrus.judges.calibration import (
        SPECS,
        Case,
        CaseResult,
        FluencyCase,
        LabelFileError,
        LabelledCase,
        batch_rounds,
        coverage_question,
        fluency_question,
        load_fluency_labels,
        load_labels,
        metrics_of,
        run_fluency,
        run_judge,
        write_records,
    )
    from cirrus.llm.batch import BatchError, BatchUnsupported
    from cirrus.llm.batching import STATE_SUBDIR, BatchCollector, BatchMissing
    from cirrus.llm.providers import EndpointError
    from cirrus.pricing import PriceError, parse_prices
    from cirrus.settings import SettingsError, load_settings
    from cirrus.usage import UsageLedger, recording

    fluency = role is CalibratedRole.fluency
    spec = SPECS[role]
    coverage_cases: list[LabelledCase] = []
    fluency_cases: list[FluencyCase] = []
    try:
        if fluency:
            fluency_cases = load_fluency_labels(labels, limit)
        else:
            coverage_cases = load_labels(labels, limit)
        settings_file = load_settings(workspace, config)
        configured = settings_file.role("fluency" if fluency else "judge")
        prices = parse_prices(settings_file.prices, "cirrus.toml: prices")
    except (LabelFileError, SettingsError, PriceError) as exc:
        fail(str(exc), highlight=False)
    options = RoleOptions(judge_model or configured.model or LOCAL, judge_base_url or configured.base_url,
                          judge_api_key_env or configured.api_key_env, configured.params(),
                          option_prefix="judge")  # --judge-base-url, --judge-api-key-env, also with --role fluency
    cases: Sequence[Case] = fluency_cases or coverage_cases
    ledger = UsageLedger()
    models: dict[str, str] = {}

    def note(text: str) -> None:
        console.print(escape(text), highlight=False)

    async def main() -> tuple[str, list[CaseResult]]:
        # build_roles wants an agent: an offline baseline that is never called
        if fluency:
            roles = build_roles(RoleOptions("baseline:oracle"), RoleOptions(LOCAL), options, [], workspace)
        else:
            roles = build_roles(RoleOptions("baseline:oracle"), options, RoleOptions(LOCAL), [], workspace)
        models.update({name: client.model for name, client in roles.clients.items() if name != "agent"})
        try:
            if batch:
                collector = BatchCollector()
                if roles.use_batch(collector):
                    ask: Any = fluency_question(roles.fluency) if fluency else coverage_question(roles.judge)
                    name = "fluency" if fluency else "judge"
                    await batch_rounds(ask, cases, collector, workspace / CACHE_DIR / STATE_SUBDIR /
                                       f"judge-eval-{name}", notify=None if quiet else note)
                else:
                    note("note: --batch: the local heuristic calls no model, nothing to batch")
            bar = tqdm(total=len(cases), desc="judge-eval", unit="row", disable=quiet, dynamic_ncols=True)
            try:
                with recording(ledger):
                    if fluency:
                        return roles.fluency.name, await run_fluency(roles.fluency, fluency_cases, concurrency,
                                                                     lambda: bar.update(1))
                    return roles.judge.name, await run_judge(roles.judge, coverage_cases, concurrency,
                                                             lambda: bar.update(1))
            finally:
                bar.close()
        finally:
            await roles.aclose()

    try:
        judge_name, results = asyncio.run(main())
    except BatchUnsupported as exc:
        fail(str(exc), code=EXIT_USAGE, highlight=False)
    except (BatchError, BatchMissing) as exc:  # BatchFailed names the batch and the state file to delete
        fail(str(exc), code=EXIT_FAILED, highlight=False)
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted:[/] run the same command again to resume"
                      + (" (the batch already sent is polled, not sent again)" if batch else ""))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (RoleError, EndpointError, ValueError) as exc:
        fail(str(exc), highlight=False)
    if output is not None:
        write_records(output, results)
    errors = [r for r in results if r.error]
    metrics = metrics_of(results)
    what = "judge-eval --role fluency" if fluency else "judge-eval"
    print_metrics(metrics, f"cirrus {what}: {judge_name} on {labels.name} ({len(cases)} rows)", len(errors), spec)
    for result in errors[:10]:
        console.print(f"[yellow]failed[/] {escape(f'{labels}:{result.case.line} ({result.case.id}): {result.error}')}",
                      highlight=False)
    _print_usage(ledger, models, prices)
    if judge_name.startswith("local"):
        measured = "fluency checker" if fluency else "judge"
        console.print(f"[yellow]note:[/] the local {measured} is an offline heuristic, not a model judgement")
    if metrics.n == 0:
        fail(f"no row could be judged (every {'checker' if fluency else 'judge'} call failed)", code=EXIT_FAILED,
             highlight=False)


def _human_eval(run_id: str, workspace: Path, output: Path | None) -> None:
    """``judge-eval --human RUN``: the run's judge against its human labels."""
    import json

    from cirrus.judges.human_labels import HumanLabelError, current_labels, human_metrics

    try:
        current = current_labels(workspace, run_id)
    except HumanLabelError as exc:
        fail(str(exc), highlight=False)
    if current.stale:
        console.print(f"[yellow]note:[/] {len(current.stale)} labels left out: the run no longer holds the reply "
                      "or verdict they were given on (the run was made again under the same id)", highlight=False)
    if not current.labels:
        fail(f"run {run_id} has no human label: label its verdicts in `cirrus view` or with `cirrus annotate "
             f"sample {run_id}` and `cirrus annotate import`", highlight=False)
    labels = current.labels
    measured = human_metrics(labels)
    hashes = sorted({label.judge_prompt_hash or "not recorded" for label in labels})
    print_metrics(measured["overall"], f"cirrus judge-eval --human: run {run_id}'s judge against {len(labels)} "
                  "human labels")
    out.print(escape(f"judge prompt hash: {', '.join(hashes)}"), highlight=False)
    table = Table(title="per language (95% Wilson interval of the accuracy)")
    for column in ("language", "labels", "accuracy", "95% CI", "Cohen's kappa", "TP", "FP", "FN", "TN"):
        table.add_column(column, justify="left" if column == "language" else "right")
    for language, metrics in measured["by_language"].items():
        c, ci = metrics.confusion, metrics.accuracy_ci95
        table.add_row(language, str(c.n), _fmt(metrics.accuracy), f"{ci[0]:.4f}-{ci[1]:.4f}" if ci else "-",
                      _fmt(metrics.kappa), str(c.tp), str(c.fp), str(c.fn), str(c.tn))
    out.print(table)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            with output.open("w", encoding="utf-8") as handle:
                for label in labels:
                    record = {**label.record(), "correct": label.truth == label.predicted}
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        except OSError as exc:
            fail(f"cannot write {output}: {exc}", code=EXIT_FAILED, highlight=False)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_metrics(metrics: JudgeMetrics, title: str, errors: int = 0, spec: RoleSpec = COVERAGE_SPEC) -> None:
    c = metrics.confusion
    yes, no, measured = spec.positive, spec.negative, spec.measured
    table = Table(title=title, show_header=False)
    table.add_row("rows scored", str(c.n))
    table.add_row("rows failed (infrastructure)", str(errors))
    table.add_row(f"labelled {yes}", f"{c.tp + c.fn} of {c.n}")
    ci = metrics.accuracy_ci95
    accuracy_text = _fmt(metrics.accuracy)
    if metrics.accuracy is not None:
        accuracy_text += f" ({metrics.accuracy:.2%})"
    if ci is not None:
        accuracy_text += f", 95% CI {ci[0]:.4f}-{ci[1]:.4f}"
    table.add_row("accuracy", accuracy_text)
    table.add_row(f"precision ({yes})", _fmt(metrics.precision))
    table.add_row(f"recall ({yes})", _fmt(metrics.recall))
    table.add_row(f"F1 ({yes})", _fmt(metrics.f1))
    kappa = _fmt(metrics.kappa)
    if metrics.kappa is None and c.n:
        kappa += " (undefined: labels and verdicts are all one class)"
    table.add_row("Cohen's kappa", kappa)
    out.print(table)
    matrix = Table(title=f"confusion matrix (rows: human label, columns: {measured})")
    matrix.add_column("")
    matrix.add_column(f"{measured} {yes}", justify="right")
    matrix.add_column(f"{measured} {no}", justify="right")
    matrix.add_row(f"label {yes}", str(c.tp), str(c.fn))
    matrix.add_row(f"label {no}", str(c.fp), str(c.tn))
    out.print(matrix)


def _print_usage(ledger: Any, models: dict[str, str], prices: dict[str, Any]) -> None:
    """One line per model client: calls (in batches), cache hits, tokens and
    cost (``[prices]`` of cirrus.toml; batch calls at the batch price)."""
    from cirrus.pricing import PriceError, run_cost

    if not ledger.clients:
        return
    try:
        cost = run_cost(ledger, models, prices)
    except PriceError as exc:
        console.print(f"[yellow]note:[/] no cost: {escape(str(exc))}")
        cost = {}
    for role, usage in ledger.by_role().items():
        value = cost.get(role)
        shown = "no price" if value is None else f"{value:.6f} {cost.get('currency') or ''}".strip()
        batched = f" ({usage.batch_calls} in batches)" if usage.batch_calls else ""
        out.print(escape(f"{role}: {usage.calls} calls{batched}, {usage.cirrus_cache_hits} from the cache, "
                         f"{usage.input_tokens} input / {usage.output_tokens} output tokens, cost {shown}"),
                  highlight=False)
