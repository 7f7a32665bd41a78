"""The ``cirrus`` command line: options in, library call, table out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cirrus import __version__
from cirrus.audit import register as audit_register
from cirrus.stats_command import register as stats_register
from cirrus.console import cli_console
from cirrus.workspace import REPORTS_DIR

app = typer.Typer(
    help="Cirrus: a replay-based benchmark for LLM customer-service agents, built from support-ticket logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
console: Console = cli_console(stderr=True)  # error lines stay whole, greppable
out: Console = cli_console()  # tables keep run ids whole when piped (wide, or COLUMNS wide): see CliConsole

WorkspaceOpt = Annotated[Path, typer.Option("--workspace", "-w", help="Workspace folder (tickets/, tool_mocks/, reports/).")]


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        out.print(f"cirrus {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = None,
) -> None:
    pass


@app.command()
def ingest(
    raw_path: Annotated[Path, typer.Argument(help="A raw ticket file or a folder of .json/.jsonl(.gz) files.")],
    workspace: WorkspaceOpt = Path("."),
    fmt: Annotated[str, typer.Option("--format", help="Raw format: auto, native, openai or abcd.")] = "auto",
    pipeline: Annotated[str, typer.Option(help="Pipeline config: a built-in name or a .toml path.")] = "default",
    kb: Annotated[Optional[Path], typer.Option("--kb", help="Knowledge folder (Markdown/text) for tickets without documents.")] = None,
    tool_schemas: Annotated[Optional[Path], typer.Option(help="JSON/YAML file of OpenAI function schemas; else inferred.")] = None,
    annotator_model: Annotated[Optional[str], typer.Option(help="Label reply types with this LLM instead of the offline rules.")] = None,
    annotator_base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the annotator model.")] = None,
    annotator_api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the annotator's API key.")] = None,
    checkpoints: Annotated[str, typer.Option("--checkpoints", help=(
        "Which agent turns become checkpoints: all (default; every agent reply, as in earlier workspaces) or "
        "select (only critical turns: intent, tool calls, solutions, state checks; greetings, holds, thanks and "
        "repeats stay as context and are never judged). select uses --annotator-model when given, else "
        "offline rules. See docs/checkpoints.md."))] = "all",
    batch: Annotated[bool, typer.Option("--batch", help="Send the annotator's calls (--annotator-model) through the provider's Batch API at its batch price: a first pass collects them, one batch answers them (up to the provider's 24 h window), then the workspace is written; interrupted, run the same command again. De-identification runs twice. See docs/batch.md.")] = False,
    status: Annotated[list[str], typer.Option("--status", help="Ticket statuses that become tasks (repeatable).")] = ["resolved"],
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Workers: processes, or Ray actors (default: all cores of the machine or cluster).")] = 0,
    executor: Annotated[str, typer.Option(help="local (processes on this machine) or ray (Ray Data; pip install 'cirrus\\[ray]').")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="Ray cluster to join (e.g. auto or ray://head:10001); default: start a local Ray.")] = None,
    max_ticket_chars: Annotated[Optional[int], typer.Option(min=1, help="Quarantine a ticket whose texts hold more characters than this in all, unread (default: the pipeline's \\[limits] max_ticket_chars, 1,000,000; de-identification takes about a minute per million).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Read raw tickets, de-identify them and write benchmark tasks and tool-replay cassettes."""
    try:
        from cirrus.config import ConfigError, load_pipeline
        from cirrus.ingest.knowledge import KnowledgeError
        from cirrus.ingest.pipeline import AnnotatorSpec
        from cirrus.ingest.ray_executor import RayUnavailable
        from cirrus.ingest.readers import FORMATS
        from cirrus.ingest.readers.files import NoTicketFiles, check_input
        from cirrus.ingest.run import IngestOptions, run_ingest
        from cirrus.ingest.tool_schemas import ToolSchemaError
        from cirrus.llm.providers import EndpointError, ModelAuthError, resolve_endpoint

        if fmt not in FORMATS:
            _fail(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
        if not raw_path.exists():
            _fail(f"raw input {raw_path} does not exist")
        if executor not in ("local", "ray"):
            _fail(f"unknown --executor {executor!r}; choose local or ray")
        if checkpoints not in ("all", "select"):
            _fail(f"unknown --checkpoints {checkpoints!r}; choose all or select")
        if ray_address and executor != "ray":
            _fail("--ray-address needs --executor ray")
        if batch and not annotator_model:
            _fail("--batch sends the annotator's calls as a batch: give the model with --annotator-model")
        if batch:
            from cirrus.llm.batching import poll_interval

            try:
                poll_interval()  # a malformed CIRRUS_BATCH_POLL_S is a usage error, before any work
            except ValueError as exc:
                _fail(str(exc))
        try:  # before the pipeline, the key or the models: nothing to read is a usage error
            check_input(raw_path)
        except NoTicketFiles as exc:
            _fail(str(exc))
        except OSError as exc:  # an unreadable folder
            _fail(f"could not read the raw input {raw_path}: {exc.strerror or exc}")
        try:
            config = load_pipeline(pipeline)
            if max_ticket_chars is not None:
                config = config.with_max_ticket_chars(max_ticket_chars)
            endpoint = None
            prices: dict = {}
            if annotator_model:
                from cirrus.pricing import PriceError, load_prices

                endpoint = resolve_endpoint(annotator_model, annotator_base_url, annotator_api_key_env,
                                            option_prefix="annotator")
                endpoint.api_key()  # fail now, naming the variable, not in a worker
                try:  # the annotator's cost in the manifest (docs/cost.md)
                    prices = load_prices(workspace)
                except PriceError as exc:
                    _fail(str(exc))
            options = IngestOptions(
                raw_path=raw_path, workspace=workspace, pipeline=config, fmt=fmt, kb_dir=kb,
                tool_schemas=tool_schemas, annotator=AnnotatorSpec(endpoint, checkpoints),  # type: ignore[arg-type]
                statuses=tuple(status),
                jobs=jobs or (0 if executor == "ray" else os.cpu_count() or 1), progress=not quiet,
                executor=executor, ray_address=ray_address, prices=prices,
            )
            if batch:
                from cirrus.ingest.batched import run_ingest_batched

                summary = run_ingest_batched(options, notify=lambda line: console.print(line, markup=False,
                                                                                        highlight=False))
            else:
                summary = run_ingest(options)
        except ModelAuthError as exc:
            _fail(f"{exc}\ningest stopped before it finished; run it again once the key is fixed "
                  "(until then eval refuses this workspace)", code=1)
            return
        except (ConfigError, KnowledgeError, ToolSchemaError, EndpointError, FileNotFoundError, RayUnavailable,
                NoTicketFiles) as exc:
            _fail(str(exc))
            return
        except OSError as exc:  # a full disk, a read-only workspace: the previous workspace files are intact
            _fail(f"could not write the workspace {workspace}: {exc.strerror or exc}", code=1)
            return
        except Exception as exc:  # the Batch API's own errors (cirrus.llm.batch)
            from cirrus.llm.batch import BatchError, BatchUnsupported

            if isinstance(exc, BatchUnsupported):
                _fail(str(exc))
            if isinstance(exc, BatchError):
                _fail(f"{exc}\nthe batch state is kept under {workspace / '.cirrus-cache/batches'}: run the same "
                      "command again to resume, or delete that folder to start over", code=1)
            raise
    except KeyboardInterrupt:
        # Ctrl-C: the workers ignore SIGINT and run_ingest has already shut
        # the pool down; tickets/.ingest-in-progress stays until a re-run
        console.print("interrupted: ingest did not finish; run the same command again "
                      "(eval refuses this workspace until then)", markup=False, highlight=False)
        raise typer.Exit(130) from None
    _print_ingest(summary.manifest, workspace)
    selection = summary.manifest.get("checkpoint_selection")
    if selection is not None:
        share = f" ({selection['kept'] / selection['total']:.0%})" if selection["total"] else ""
        console.print(f"checkpoints: kept {selection['kept']} of {selection['total']}{share} "
                      f"(selector {selection['selector']}, {selection['fallbacks']} fallbacks to rules)",
                      markup=False, highlight=False)
    if summary.tasks == 0:
        counts = summary.manifest["counts"]
        if counts["read"] == 0:
            _fail(f"no task was written: {raw_path} holds no ticket (its files are empty lists or blank lines)",
                  code=1)
        not_ingested = counts["read"] - counts["quarantined"] - counts["skipped"]
        _fail(f"no task was written: of {counts['read']} tickets read, {counts['quarantined']} were quarantined, "
              f"{counts['skipped']} skipped and {not_ingested} not of the statuses ingested "
              f"({', '.join(status)}; --status adds others); see tickets/manifest.json", code=1)


def _print_ingest(manifest: dict, workspace: Path) -> None:
    counts = manifest["counts"]
    table = Table(title=f"cirrus ingest -> {workspace / 'tickets'}", show_header=False)
    table.add_row("tickets read", str(counts["read"]))
    table.add_row("tasks written", str(counts["tasks"]))
    table.add_row("checkpoints", str(counts["checkpoints"]))
    table.add_row("tasks with tool calls", str(counts["tasks_with_tool_calls"]))
    table.add_row("by status", ", ".join(f"{k}: {v}" for k, v in counts["by_status"].items()) or "-")
    table.add_row("quarantined", str(counts["quarantined"]))
    table.add_row("skipped", str(counts["skipped"]))
    table.add_row("reply types", ", ".join(f"{k}: {v}" for k, v in manifest["reply_types"].items()) or "-")
    table.add_row("PII replaced", ", ".join(f"{k}: {v}" for k, v in manifest["pii"].items()) or "-")
    table.add_row("config hash", manifest["config_hash"])
    out.print(table)
    for entry in manifest["quarantined"][:20]:
        where = entry["source"] + (f":{entry['line']}" if "line" in entry else f" item {entry['item']}" if "item" in entry else "")
        console.print(f"[yellow]quarantined[/] {where}: {entry['reason']}")
    if len(manifest["quarantined"]) > 20:
        console.print(f"... and {len(manifest['quarantined']) - 20} more in tickets/manifest.json")


@app.command("eval")
def eval_(
    ctx: typer.Context,
    model: Annotated[str, typer.Option(help="Agent under test: a model name, or baseline:oracle / baseline:retrieval (offline).")],
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the agent (default: provider registry).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the agent's API key.")] = None,
    judge_model: Annotated[Optional[list[str]], typer.Option(help="Coverage judge model, or 'local' for the offline heuristic (default: the agent's model, a self-judged run that is warned about and recorded; local for baselines). Give it several times, or a comma list, for a judge panel: every member judges every checkpoint, the majority decides (a tie is Not Included).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="Base URL of the judge (default: the agent's).")] = None,
    judge_api_key_env: Annotated[Optional[str], typer.Option(help="Key variable of the judge (default: the agent's).")] = None,
    fluency_model: Annotated[Optional[str], typer.Option(help="Fluency checker model, or 'local' (default: the judge's).")] = None,
    fluency_base_url: Annotated[Optional[str], typer.Option(help="Base URL of the fluency checker (default: the judge's).")] = None,
    fluency_api_key_env: Annotated[Optional[str], typer.Option(help="Key variable of the fluency checker (default: the judge's).")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="Agent sampling temperature (default: the server's).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Agent output token limit per model call.")] = None,
    reasoning_effort: Annotated[Optional[str], typer.Option(help="Agent reasoning effort (low/medium/high) for models that take it.")] = None,
    extra_body: Annotated[Optional[str], typer.Option(help="Extra JSON body fields for the agent's requests, e.g. '{\"enable_thinking\": false}'.")] = None,
    pass_k: Annotated[int, typer.Option("--pass-k", min=1, help="K of pass@K and pass^K.")] = 1,
    runs: Annotated[int, typer.Option(min=1, help="Attempts per task (at least --pass-k).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="(task, attempt) pairs in flight at once; one process is fastest at ~128-256 (benchmarks/README.md).")] = 8,
    run_id: Annotated[Optional[str], typer.Option(help="Name of reports/<run_id>/; the same id resumes a run (one process at a time: another one is refused).")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Only the first N tasks of tickets/tasks.jsonl.")] = None,
    workspace: WorkspaceOpt = Path("."),
    config: Annotated[Optional[Path], typer.Option(help="Settings file (default: cirrus.toml in the workspace or here).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    mode: Annotated[str, typer.Option(help="walk: the multi-turn walk (default); subtask: every checkpoint alone, after the real dialogue up to it, no fluency check (docs/subtasks.md).")] = "walk",
    estimate: Annotated[bool, typer.Option("--estimate", help="Print the calls, tokens and cost per role the run would take (counted over the workspace, no model called) and stop (docs/cost.md).")] = False,
    max_cost: Annotated[Optional[float], typer.Option(min=0, help="Start no attempt once the run has spent this much (the \\[prices] currency of cirrus.toml; every model the run calls needs a price); attempts in flight finish, the run stops with exit status 3 and resumes with a higher --max-cost.")] = None,
) -> None:
    """Walk every task checkpoint by checkpoint against a model and score it.

    Every model endpoint is checked with one tiny request before the first
    attempt.  Exit status: 0 when the run finished with at least one attempt
    scored; 1 when it could not start (an endpoint check failed, a refused
    key) or every attempt ended in an error; 2 for a bad option, setting or
    workspace (a missing key variable included), or a --run-id that another
    cirrus process is writing (its pid is named); 3 when --max-cost stopped
    the run (resume it with a higher budget); 130 on Ctrl-C, after printing
    the command that resumes the run.
    """
    import asyncio
    import re
    import shlex
    import time
    import warnings

    from cirrus.evaluate.preflight import PreflightError, check_endpoints
    from cirrus.evaluate.roles import SELF_JUDGED_HINT, RoleError, RoleOptions, build_roles
    from cirrus.evaluate.runlock import RunLocked, held_until_done
    from cirrus.evaluate.runner import EvalSettings, run_eval
    from cirrus.evaluate.store import RunMismatch
    from cirrus.evaluate.tasks import TaskFileError, TaskIndex
    from cirrus.llm.providers import EndpointError, ModelAuthError, shown_url

    given_run_id = run_id
    run_id = run_id or re.sub(r"[^A-Za-z0-9._-]", "_", f"{model}-{time.strftime('%Y%m%d-%H%M%S')}")

    def resume_command() -> str:
        """``cirrus eval`` with the options given on the command line (key
        variables by name, never a key; credentials in a URL masked), plus
        the ``--run-id`` when it was generated."""
        words = ["cirrus", "eval"]
        for param in ctx.command.params:
            if param.param_type_name != "option" or param.name is None:
                continue
            source = ctx.get_parameter_source(param.name)
            if source is None or source.name != "COMMANDLINE":
                continue
            value = ctx.params.get(param.name)
            flag = max((o for o in param.opts if o.startswith("--")), key=len, default=param.opts[0])
            if param.is_flag:
                words += [flag] if value else []
            elif isinstance(value, (list, tuple)):  # a repeatable option
                for item in value:
                    words += [flag, str(item)]
            elif value is not None:
                words += [flag, str(shown_url(value) if param.name.endswith("base_url") else value)]
        if given_run_id is None:
            words += ["--run-id", run_id]
        return shlex.join(words)

    resume = resume_command()
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", run_id) or run_id.startswith("."):
        _fail(f"--run-id {run_id!r}: use letters, digits, '.', '_' and '-' only")
    if mode not in ("walk", "subtask"):
        _fail(f"unknown --mode {mode!r}; choose walk or subtask")
    from cirrus.settings import SettingsError, load_settings

    try:
        settings_file = load_settings(workspace, config)
    except SettingsError as exc:
        _fail(str(exc))
        return
    cli_params = {k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens,
                                    "reasoning_effort": reasoning_effort, "extra_body": extra_body}.items()
                  if v is not None}

    def role(name: str, model_: str | None, base_url_: str | None, key_env: str | None, params: dict) -> RoleOptions | None:
        configured = settings_file.role(name)  # type: ignore[arg-type]
        chosen = model_ or configured.model
        if chosen is None:
            return None
        return RoleOptions(chosen, base_url_ or configured.base_url, key_env or configured.api_key_env,
                           {**configured.params(), **params})

    agent = role("agent", model, base_url, api_key_env, cli_params)
    assert agent is not None
    judge = role("judge", ",".join(judge_model) if judge_model else None, judge_base_url, judge_api_key_env, {})
    fluency = role("fluency", fluency_model, fluency_base_url, fluency_api_key_env, {})
    if mode == "subtask":  # a subtask run asks no fluency question: no fluency endpoint is used or checked
        if fluency_model:
            console.print("[yellow]note:[/] --fluency-model is not used with --mode subtask")
        fluency = RoleOptions("local")

    def warn(text: str) -> None:
        console.print(f"[yellow]warning:[/] {escape(text)}")

    def note(text: str) -> None:
        console.print(escape(text))

    from cirrus.pricing import PriceError, parse_prices

    try:
        prices = parse_prices(settings_file.prices, "cirrus.toml: prices")
    except PriceError as exc:
        _fail(str(exc))
        return

    async def main() -> dict:
        with warnings.catch_warnings(record=True) as caught:  # a damaged cache moved aside: said as a warning line
            warnings.simplefilter("always", RuntimeWarning)
            roles = build_roles(agent, judge, fluency, index, workspace, concurrency=concurrency)
        for caught_warning in caught:
            if issubclass(caught_warning.category, RuntimeWarning):
                warn(str(caught_warning.message))
            else:
                warnings.showwarning(caught_warning.message, caught_warning.category, caught_warning.filename,
                                     caught_warning.lineno)
        models = {name: client.model for name, client in roles.clients.items()}
        unpriced = sorted({m for m in models.values() if m not in prices})
        if max_cost is not None and unpriced:
            await roles.aclose()
            raise ValueError(f"--max-cost needs a price for every model the run calls; none for "
                             f"{', '.join(map(repr, unpriced))}: add [prices.\"MODEL\"] input_per_mtok and "
                             "output_per_mtok to cirrus.toml (docs/cost.md)")
        try:
            _print_estimate(roles, index, workspace, max(runs, pass_k), prices, mode, final=estimate)
        except Exception as exc:  # noqa: BLE001  (a run does not depend on its estimate)
            if estimate:
                raise ValueError(f"no estimate: {exc}") from exc
            warn(f"no estimate: {exc}")
        if estimate:
            await roles.aclose()
            return {}
        selfish = roles.details.get("self_judged_roles") or []
        if selfish:
            which = " and ".join({"judge": "the coverage judge", "fluency": "the fluency checker"}[r] for r in selfish)
            warn(f"the run grades the agent with itself: {which} {'is' if len(selfish) == 1 else 'are'} the agent's "
                 f"own model {agent.model!r} at the same endpoint, so its scores are self-graded (recorded as "
                 f"self_judged in run.json and summary.json); {SELF_JUDGED_HINT}")
        try:
            settings = EvalSettings(workspace=workspace, run_id=run_id, runs=max(runs, pass_k), pass_k=pass_k,
                                    concurrency=concurrency, limit=limit, progress=not quiet,
                                    fingerprint_extra=roles.fingerprint, details_extra=roles.details, mode=mode,
                                    client_models=models, prices=prices, max_cost=max_cost)
            return await run_eval(settings, roles.agent, roles.judge, roles.fluency, index,
                                  preflight=lambda: check_endpoints(roles.clients, warn), notify=note)
        finally:
            await roles.aclose()

    try:
        index = TaskIndex.scan(workspace, limit)
        with held_until_done(workspace / REPORTS_DIR / run_id):  # through the outputs, not just the attempts
            summary = asyncio.run(main())
    except RunLocked as exc:  # another process is writing this run
        _fail(str(exc))
        return
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted:[/] the attempts already finished are kept; resume the run with:\n"
                      f"  {escape(resume)}")
        raise typer.Exit(130) from None
    except PreflightError as exc:
        _fail(f"the run cannot start, no task was run:\n{exc}", code=1)
        return
    except ModelAuthError as exc:
        _fail(str(exc), code=1)
        return
    except (TaskFileError, RoleError, EndpointError, RunMismatch, ValueError) as exc:
        _fail(str(exc))
        return
    except OSError as exc:  # a full disk, a read-only workspace
        _fail(f"could not write the run to {workspace / 'reports' / run_id}: {exc.strerror or exc}", code=1)
        return
    if estimate:
        return
    if mode == "subtask":
        from cirrus.report.subtask import print_subtask_summary

        print_subtask_summary(summary, workspace / REPORTS_DIR / run_id)
        _print_cost(summary)
        _budget_exit(summary, resume)
        if summary["n_subtasks"] and not summary["n_ok"]:
            _fail(f"every subtask of run {run_id} ended in an error (reasons above); no score was measured", code=1)
        return
    _print_summary(summary, workspace / REPORTS_DIR / run_id)
    _print_cost(summary)
    if summary["attempts"] and summary["errors"] == summary["attempts"]:
        _fail(f"every attempt of run {run_id} ended in an error (reasons above); no score was measured", code=1)
    _budget_exit(summary, resume)


def _print_estimate(roles: object, index: object, workspace: Path, attempts: int, prices: dict, mode: str, *,
                    final: bool) -> None:
    """The estimate of a run as configured (cirrus.estimate): a table per
    role on stderr when a run starts, on stdout with --estimate."""
    from cirrus.estimate import CassetteTurns, LineCounter, estimate, renderers
    from cirrus.offline import count_tokens

    parts = renderers(roles)
    if mode == "subtask":  # one question per subtask, no jump or fluency question
        parts["fluency"] = None
    turns = CassetteTurns(workspace)
    try:
        result = estimate(index, attempts, LineCounter(count_tokens), jumps=mode != "subtask", **parts,
                          prices=prices, reference=turns)
    finally:
        turns.close()
    target = out if final else console
    table = Table(title=f"estimate: {result.tasks} tasks, {result.checkpoints} checkpoints, {attempts} attempt(s) each "
                        f"(an upper bound: docs/cost.md)", title_justify="left")
    for column in ("role", "calls", "input tokens", "output tokens", "cost"):
        table.add_column(column, justify="left" if column == "role" else "right")
    currency = result.currency or ""
    for role, usage in result.roles.items():
        cost = "no price" if usage.cost is None else f"{usage.cost:.4f} {currency}"
        table.add_row(role, f"{usage.calls:,}", f"{usage.input_tokens:,}", f"{usage.output_tokens:,}", cost)
    total = "-" if result.total_cost is None else f"{result.total_cost:.4f} {currency}"
    table.add_row("total", "", "", "", total)
    if not result.roles:
        target.print("estimate: every role of this run is offline: no model call, no cost")
        return
    target.print(table)
    if final:
        for assumption in result.assumptions:
            out.print(f"  assumes: {assumption}")


def _print_cost(summary: dict) -> None:
    """Usage and cost per role of a finished run (summary.json's)."""
    usage, cost = summary.get("usage") or {}, summary.get("cost") or {}
    if not usage:
        return
    currency = cost.get("currency") or ""
    table = Table(title="usage and cost", title_justify="left")
    for column in ("role", "calls", "cache hits", "input", "cached input", "output", "reasoning", "cost"):
        table.add_column(column, justify="left" if column == "role" else "right")
    for role, used in usage.items():
        value = cost.get(role)
        table.add_row(role, f"{used['calls']:,}", f"{used['cirrus_cache_hits']:,}", f"{used['input_tokens']:,}",
                      f"{used['cached_input_tokens']:,}", f"{used['output_tokens']:,}", f"{used['reasoning_tokens']:,}",
                      "no price" if value is None else f"{value:.4f} {currency}")
    total = cost.get("total")
    table.add_row("total", "", "", "", "", "", "", "-" if total is None else f"{total:.4f} {currency}")
    out.print(table)
    overhead = summary.get("overhead_usage") or {}
    parts = [f"{sum(used.get('calls', 0) for used in overhead[kind].values())} {what}"
             for kind, what in (("preflight", "of endpoint checks"), ("rerun", "of attempts run again"))
             if kind in overhead]
    if parts:
        out.print(f"  calls include {' and '.join(parts)} (billed too: docs/cost.md)")


def _budget_exit(summary: dict, resume: str) -> None:
    stop = summary.get("budget_stop")
    if not stop:
        return
    currency = (summary.get("cost") or {}).get("currency") or ""
    console.print(f"[yellow]stopped:[/] the run spent {stop['spent']:.4f} {escape(currency)} of its --max-cost "
                  f"{stop['max_cost']:g}; {stop['attempts_left']} attempt(s) were not started. Resume with a higher "
                  f"budget:\n  {escape(resume)} --max-cost AMOUNT", highlight=False)
    raise typer.Exit(3)


def _print_summary(summary: dict, directory: Path) -> None:
    def fmt(value: object) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    table = Table(title=f"cirrus eval: {summary['model']} ({directory})", show_header=False)
    rows = [("tasks", summary["n_tasks"]), ("attempts (errors)", f"{summary['attempts']} ({summary['errors']})"),
            ("ATPR", summary["atpr"]), ("ALJ", summary["alj"]), ("ANEI", summary["anei"]), ("AMTL", summary["amtl"])]
    rows += [(f"SR {name}", value) for name, value in summary["sr"].items()]
    rows += [(key, summary[key]) for key in summary if key.startswith("pass^")]
    rows += [("judge / fluency", f"{summary['judge']} / {summary['fluency']}")]
    for name, value in rows:
        table.add_row(name, fmt(value))
    out.print(table)
    if summary.get("judge_panel"):
        from cirrus.judges.agreement import describe_agreement

        for line in describe_agreement(summary["judge_panel"]):
            out.print(escape(line), highlight=False)
    if summary.get("offline_heuristics"):
        console.print(f"[yellow]note:[/] offline heuristics used for: {', '.join(summary['offline_heuristics'])}; "
                      "scores are a harness check, not a model judgement")
    reasons = summary.get("error_reasons") or []
    if reasons:  # already redacted by the client; identical reasons grouped, most frequent first
        console.print(f"[yellow]errors:[/] {summary['errors']} attempt(s) ended in an error, left out of the scores:")
        for reason, count in reasons[:10]:
            shown = reason.removeprefix("InfrastructureError: ")
            console.print(f"  {count} x {escape(shown if len(shown) <= 500 else shown[:500] + '...')}")
        if len(reasons) > 10:
            console.print(f"  ... and {len(reasons) - 10} other reasons (cirrus show {directory.name})")


@app.command("pii-eval")
def pii_eval(
    labels: Annotated[Path, typer.Argument(help="Labelled PII set (presidio-research JSON format).")],
    pipeline: Annotated[str, typer.Option(help="Pipeline config whose de-identification is measured.")] = "default",
    limit: Annotated[Optional[int], typer.Option(help="Only the first N examples.")] = None,
    language: Annotated[Optional[str], typer.Option(
        help="Language of the set (en, zh): its de-identifier is measured. Default: detected from the texts.")] = None,
) -> None:
    """Measure de-identification recall and precision per entity type."""
    from cirrus.config import ConfigError, load_pipeline
    from cirrus.ingest.deid.deidentify import Deidentifiers
    from cirrus.ingest.language import detect_language, normalize_language
    from cirrus.pii_eval import evaluate, load_examples

    try:
        examples = load_examples(labels)[:limit]
        config = load_pipeline(pipeline)
    except (ValueError, ConfigError, FileNotFoundError) as exc:
        _fail(str(exc))
        return
    lang = normalize_language(language) if language else detect_language(e["full_text"] for e in examples)
    with console.status(f"analysing {len(examples)} examples ({lang})"):
        scores = evaluate(Deidentifiers(config).for_language(lang), examples)
    table = Table(title=f"de-identification on {labels.name} ({len(examples)} texts, {lang}, pipeline {config.name})")
    for column in ("entity", "gold", "recall", "masked recall", "detected", "precision"):
        table.add_column(column, justify="left" if column == "entity" else "right")
    for s in scores:
        fmt = lambda v: "-" if v != v else f"{v:.3f}"  # noqa: E731  (nan -> '-')
        table.add_row(s.entity, str(s.gold), fmt(s.recall), fmt(s.masked_recall), str(s.predicted), fmt(s.precision))
    out.print(table)


def _register_report_commands() -> None:
    from cirrus.evaluate.rescore import rescore
    from cirrus.judges.calibration import judge_eval
    from cirrus.judges.consistency import judge_consistency
    from cirrus.report.command import report
    from cirrus.report.diff import diff
    from cirrus.report.show import show

    app.command("report")(report)
    app.command("show")(show)
    app.command("diff")(diff)
    app.command("rescore")(rescore)
    app.command("judge-eval")(judge_eval)
    app.command("judge-consistency")(judge_consistency)


_register_report_commands()
audit_register(app)
stats_register(app)

if __name__ == "__main__":
    app()
