"""``cirrus ingest RAW``: raw tickets read, de-identified and written as
benchmark tasks and tool-replay cassettes by :func:`cirrus.ingest.run.run_ingest`
(or, with ``--batch``, :func:`cirrus.ingest.batched.run_ingest_batched`);
the counts printed as a table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from cirrus.commands._common import EXIT_FAILED, EXIT_INTERRUPTED, WorkspaceOpt, console, fail, out

__all__ = ["ingest"]


def ingest(
    raw_path: Annotated[Path, typer.Argument(help="A raw ticket file or a folder of .json/.jsonl(.gz) files.")],
    workspace: WorkspaceOpt = Path("."),
    fmt: Annotated[str, typer.Option("--format", help=(
        "Raw format: auto (detected per ticket), native, openai, abcd, zendesk, intercom, freshdesk, salesforce or "
        "meiqia. See docs/input-formats.md."))] = "auto",
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
        from cirrus.ingest.readers import FORMATS, FORMATS_DOC
        from cirrus.ingest.readers.files import NoTicketFiles, check_input
        from cirrus.ingest.run import IngestOptions, run_ingest
        from cirrus.ingest.tool_schemas import ToolSchemaError
        from cirrus.llm.providers import EndpointError, ModelAuthError, resolve_endpoint

        if fmt not in FORMATS:
            fail(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)} (see {FORMATS_DOC})")
        if not raw_path.exists():
            fail(f"raw input {raw_path} does not exist")
        if executor not in ("local", "ray"):
            fail(f"unknown --executor {executor!r}; choose local or ray")
        if checkpoints not in ("all", "select"):
            fail(f"unknown --checkpoints {checkpoints!r}; choose all or select")
        if ray_address and executor != "ray":
            fail("--ray-address needs --executor ray")
        if batch and not annotator_model:
            fail("--batch sends the annotator's calls as a batch: give the model with --annotator-model")
        if batch:
            from cirrus.llm.batching import poll_interval

            try:
                poll_interval()  # a malformed CIRRUS_BATCH_POLL_S is a usage error, before any work
            except ValueError as exc:
                fail(str(exc))
        try:  # before the pipeline, the key or the models: nothing to read is a usage error
            check_input(raw_path)
        except NoTicketFiles as exc:
            fail(str(exc))
        except OSError as exc:  # an unreadable folder
            fail(f"could not read the raw input {raw_path}: {exc.strerror or exc}")
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
                    fail(str(exc))
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
            fail(f"{exc}\ningest stopped before it finished; run it again once the key is fixed "
                  "(until then eval refuses this workspace)", code=EXIT_FAILED)
        except (ConfigError, KnowledgeError, ToolSchemaError, EndpointError, FileNotFoundError, RayUnavailable,
                NoTicketFiles) as exc:
            fail(str(exc))
        except OSError as exc:  # a full disk, a read-only workspace: the previous workspace files are intact
            fail(f"could not write the workspace {workspace}: {exc.strerror or exc}", code=EXIT_FAILED)
        except Exception as exc:  # the Batch API's own errors (cirrus.llm.batch)
            from cirrus.llm.batch import BatchError, BatchUnsupported

            if isinstance(exc, BatchUnsupported):
                fail(str(exc))
            if isinstance(exc, BatchError):
                fail(f"{exc}\nthe batch state is kept under {workspace / '.cirrus-cache/batches'}: run the same "
                      "command again to resume, or delete that folder to start over", code=EXIT_FAILED)
            raise
    except KeyboardInterrupt:
        # Ctrl-C: the workers ignore SIGINT and run_ingest has already shut
        # the pool down; tickets/.ingest-in-progress stays until a re-run
        console.print("interrupted: ingest did not finish; run the same command again "
                      "(eval refuses this workspace until then)", markup=False, highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
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
            fail(f"no task was written: {raw_path} holds no ticket (its files are empty lists or blank lines)",
                  code=EXIT_FAILED)
        not_ingested = counts["read"] - counts["quarantined"] - counts["skipped"]
        fail(f"no task was written: of {counts['read']} tickets read, {counts['quarantined']} were quarantined, "
              f"{counts['skipped']} skipped and {not_ingested} not of the statuses ingested "
              f"({', '.join(status)}; --status adds others); see tickets/manifest.json", code=EXIT_FAILED)


def _print_ingest(manifest: dict, workspace: Path) -> None:
    """The ingest's counts as a table, then the first 20 quarantined tickets."""
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
