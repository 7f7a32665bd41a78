"""``cirrus ingest``: raw tickets in, workspace out (contract sections 1-2).

All file writing of ingestion happens here.  ``tickets/tasks.jsonl`` is
streamed to a temporary file and renamed into place only when the run
completes, the manifest is written the same way last, so a crash never leaves
a half-written file that looks complete.  Cassettes are written one by one
(each atomically) and stale ones from an earlier ingest are removed at the end.
Temporary files a killed ingest left behind are removed when the next starts.
Cassettes are rewritten in place, so while an ingest runs (or after one was
killed) ``tickets/.ingest-in-progress`` exists and ``cirrus eval`` refuses the
workspace until an ingest completes.

Before anything is written, the input is checked: a folder without a single
ticket file, or a file with another extension, raises
:class:`NoTicketFiles` (a usage error) and leaves the workspace untouched.
Loading the de-identification models takes seconds; a line on stderr says
so when it starts (unless ``progress`` is off).

Before the tickets are processed, the input is read once more for the
corpus pass (:mod:`cirrus.ingest.canned`, docs/canned-lines.md): the agents'
lines repeated across many tickets are counted and the procedural ones are
then cut while denoising, by whichever executor runs.  Below the pipeline's
``[denoise.corpus] min_corpus_tickets`` nothing changes and the manifest has
no ``canned_lines``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cirrus.pricing import run_cost
from cirrus.usage import UsageLedger
from cirrus import __version__
from cirrus.config import PipelineConfig
from cirrus.files import atomic_writer, remove_stale_temps
from cirrus.ingest.canned import CannedLines, find_canned_lines, wanted
from cirrus.ingest.cassettes import write_cassette
from cirrus.ingest.deid.ids import quarantine_id, safe_path, safe_reason
from cirrus.ingest.knowledge import load_kb
from cirrus.ingest.pipeline import (
    AnnotatorSpec,
    Outcome,
    Processed,
    ProcessorFactory,
    Skipped,
    local_outcomes,
    mark_duplicates,
    oversize,
)
from cirrus.ingest.readers import read_tickets
from cirrus.ingest.readers.files import NoTicketFiles, check_input
from cirrus.ingest.tool_schemas import load_tool_schemas
from cirrus.schema import Quarantined, Ticket
from cirrus.workspace import IN_PROGRESS_FILE, MANIFEST_FILE, MOCKS_DIR, TASKS_FILE

__all__ = ["IngestOptions", "IngestSummary", "NoTicketFiles", "canned_lines", "config_hash", "loading_message",
           "run_ingest", "selection_entry"]


@dataclass
class IngestOptions:
    raw_path: Path
    workspace: Path
    pipeline: PipelineConfig
    fmt: str = "auto"
    kb_dir: Path | None = None
    tool_schemas: Path | None = None
    annotator: AnnotatorSpec = field(default_factory=AnnotatorSpec)
    statuses: tuple[str, ...] = ("resolved",)
    jobs: int = 1
    progress: bool = True
    executor: str = "local"
    ray_address: str | None = None
    # the [prices] of cirrus.toml: the manifest's cost of the annotator's calls (cirrus.pricing)
    prices: dict[str, Any] = field(default_factory=dict)


@dataclass
class IngestSummary:
    manifest: dict[str, Any]
    # the first pass of ingest --batch: every annotator request, by custom_id (AnnotatorSpec.collect)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tasks(self) -> int:
        return int(self.manifest["counts"]["tasks"])


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for item in files:
        digest.update(str(item.relative_to(path) if path.is_dir() else item.name).encode())
        digest.update(item.read_bytes())
    return digest.hexdigest()[:16]


def config_hash(options: IngestOptions) -> str:
    """Hash of everything that changes the workspace besides the raw input."""
    parts = {
        "pipeline": options.pipeline.config_hash(),
        "format": options.fmt,
        "annotator": options.annotator.label,
        "statuses": sorted(options.statuses),
        "kb": _file_digest(options.kb_dir) if options.kb_dir else None,
        "tool_schemas": _file_digest(options.tool_schemas) if options.tool_schemas else None,
        "cirrus": __version__,
    }
    if options.annotator.checkpoints != "all":  # absent for "all": such workspaces keep their hash
        parts["checkpoints"] = {"mode": options.annotator.checkpoints, "select": options.pipeline.select_hash()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class _Tally:
    """What the manifest reports, gathered while streaming."""

    def __init__(self) -> None:
        self.read = 0
        self.by_status: Counter[str] = Counter()
        self.quarantined: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []
        self.tasks = 0
        self.checkpoints = 0
        self.with_tools = 0
        self.reply_types: Counter[str] = Counter()
        self.pii: Counter[str] = Counter()
        self.knowledge: Counter[str] = Counter()
        self.tokens: list[int] = []
        self.llm_fallbacks = 0
        self.candidates = 0
        self.usage = UsageLedger()  # the LLM annotator's or selector's calls (role "annotator")
        self.requests: dict[str, dict[str, Any]] = {}  # collected for a batch (AnnotatorSpec.collect)

    def add_task(self, result: Processed) -> None:
        task = result.task
        self.tasks += 1
        self.checkpoints += len(task["checkpoints"])
        self.with_tools += task["cassette"] is not None
        self.reply_types.update(c["reply_type"] for c in task["checkpoints"])
        self.pii.update(result.pii)
        self.knowledge[result.knowledge_source] += 1
        self.tokens.append(task["stats"]["input_tokens"])
        self.llm_fallbacks += result.llm_fallback
        self.candidates += result.candidates
        if result.usage:
            self.usage.merge(UsageLedger.from_dict(result.usage))
        self.requests.update(result.requests or ())


def selection_entry(options: IngestOptions, kept: int, total: int, fallbacks: int) -> dict[str, Any]:
    """The manifest's ``checkpoint_selection``: how checkpoints were chosen
    and how many of the agent turns that could have been were kept."""
    select = options.pipeline.select
    languages = {lang: section.select.model_dump(mode="json", include={"min_info_words", "duplicate_similarity"})
                 for lang, section in sorted(options.pipeline.languages.items()) if section.select is not None}
    return {
        "mode": options.annotator.checkpoints,
        "selector": options.annotator.selector_label,
        "config": {
            "rules_hash": options.pipeline.select_hash(),
            "min_info_words": select.min_info_words,
            "duplicate_similarity": select.duplicate_similarity,
            "languages": languages,
            "at_least_one": "last agent turn with a reply or tool calls",
        },
        "kept": kept,
        "total": total,
        "ratio": round(kept / total, 4) if total else None,
        "fallbacks": fallbacks,
    }


def _manifest(options: IngestOptions, tally: _Tally, canned: CannedLines | None = None) -> dict[str, Any]:
    tokens = sorted(tally.tokens)
    manifest = {
        "cirrus_version": __version__,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "input": options.raw_path.name,
        "format": options.fmt,
        "pipeline": options.pipeline.name,
        "config_hash": config_hash(options),
        "annotator": options.annotator.label,
        **({"domain": options.pipeline.domain.value().to_dict()} if options.pipeline.domain.value().is_set else {}),
        "statuses_ingested": sorted(options.statuses),
        "counts": {
            "read": tally.read,
            "tasks": tally.tasks,
            "checkpoints": tally.checkpoints,
            "tasks_with_tool_calls": tally.with_tools,
            "quarantined": len(tally.quarantined),
            "skipped": len(tally.skipped),
            "by_status": dict(sorted(tally.by_status.items())),
        },
        "reply_types": dict(sorted(tally.reply_types.items())),
        "pii": dict(sorted(tally.pii.items())),
        "knowledge": dict(sorted(tally.knowledge.items())),
        "tokens": {
            "input_tokens_total": sum(tokens),
            "input_tokens_mean": round(sum(tokens) / len(tokens), 1) if tokens else 0,
            "input_tokens_median": tokens[len(tokens) // 2] if tokens else 0,
            "input_tokens_max": tokens[-1] if tokens else 0,
            "encoding": "cl100k_base",
        },
        "annotator_fallbacks": tally.llm_fallbacks,
        "quarantined": tally.quarantined,
        "skipped": tally.skipped,
    }
    if tally.usage.clients:  # only when a model was called: offline manifests stay as they were
        manifest["usage"] = tally.usage.roles_dict()
        endpoint = options.annotator.endpoint
        manifest["cost"] = run_cost(tally.usage, {"annotator": endpoint.model} if endpoint else {}, options.prices)
    if options.annotator.checkpoints != "all":  # absent for "all": such manifests stay as they were
        manifest["checkpoint_selection"] = selection_entry(options, tally.checkpoints, tally.candidates,
                                                           tally.llm_fallbacks)
    if canned is not None:  # only when the corpus pass ran: other manifests stay as they were
        manifest["canned_lines"] = canned.to_manifest()
    return manifest


def canned_lines(options: IngestOptions) -> CannedLines | None:
    """The corpus pass (docs/canned-lines.md): the input's eligible tickets
    (status ingested, not too large) read once or twice more, on this
    process, in input order, so every executor gets the same lines.  None when the pass
    is off or no language has enough tickets."""
    if not wanted(options.pipeline):
        return None
    statuses, limit = frozenset(options.statuses), options.pipeline.limits.max_ticket_chars

    def eligible() -> Iterator[Ticket]:
        return (item for item in read_tickets(options.raw_path, options.fmt)
                if isinstance(item, Ticket) and item.status in statuses and oversize(item, limit) is None)

    return find_canned_lines(eligible, options.pipeline)


def _safe_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A quarantine or skip entry whose file names hold no personal data
    (:func:`cirrus.ingest.deid.ids.safe_path`)."""
    return {**entry, "source": safe_path(entry["source"]), "reason": safe_reason(entry["reason"])}


def loading_message(options: IngestOptions) -> str:
    """The line that says why the first ticket takes seconds."""
    return f"loading the de-identification models (spaCy {options.pipeline.deid.spacy_model}, Presidio)…"


def _canned_message(canned: CannedLines) -> str:
    counted = ", ".join(f"{tickets:,} {language}" for language, _, tickets in canned.configs)
    procedural = sum(line.procedural for line in canned.lines)
    return (f"canned lines: {procedural} procedural of {len(canned.lines)} frequent agent lines in the tickets counted "
            f"({counted}) are cut from agent messages (manifest: canned_lines)")


def _say(line: str) -> None:
    tqdm.write(line, file=sys.stderr)  # above the progress bar, not through it
    sys.stderr.flush()


def _outcomes(options: IngestOptions, factory: ProcessorFactory,
              on_load: Callable[[], None] | None = None) -> Iterator[Outcome]:
    """One outcome per item read, in input order.  The local readers quarantine
    repeated ticket ids as they read; Ray reads files in parallel, so its
    outcomes get the same check afterwards.  ``on_load`` is called before the
    models start loading (for Ray: its actors load them as they start)."""
    if options.executor == "ray":
        from cirrus.ingest.ray_executor import ray_outcomes

        if on_load is not None:
            on_load()
        return mark_duplicates(ray_outcomes(options.raw_path, options.fmt, factory, options.statuses,
                                            jobs=options.jobs, address=options.ray_address))
    if options.executor != "local":
        raise ValueError(f"unknown executor {options.executor!r}; expected local or ray")
    return local_outcomes(read_tickets(options.raw_path, options.fmt), factory, options.statuses, options.jobs,
                          on_load=on_load)


def _keep_creation_time(manifest: dict[str, Any], path: Path) -> dict[str, Any]:
    """``manifest`` with the previous manifest's ``created_at`` when nothing
    else changed: ingesting the same input again leaves the workspace
    byte-identical (a committed sample workspace stays clean)."""
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return manifest
    if not isinstance(previous, dict) or "created_at" not in previous:
        return manifest
    unchanged = {**previous, "created_at": None} == {**manifest, "created_at": None}
    return {**manifest, "created_at": previous["created_at"]} if unchanged else manifest


class _InterruptLatch:
    """Makes sure a Ctrl-C stops the ingest.

    Python raises KeyboardInterrupt wherever the main thread happens to be,
    and where that is a ``__del__`` or a weakref callback (garbage collection
    runs them at any moment) the exception is swallowed, with an "Exception
    ignored in" traceback on stderr, and the run would go on to the end.
    While the latch is held, SIGINT is recorded before it is raised, a
    swallowed KeyboardInterrupt is silenced, and :meth:`check` raises it again
    at the next safe point.  Installed only from the main thread over
    Python's default handler (a caller's own handler is left alone)."""

    def __init__(self) -> None:
        self.hit = False
        self._previous_handler: Any = None
        self._previous_hook: Any = None

    def __enter__(self) -> _InterruptLatch:
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint)
            self._previous_hook = sys.unraisablehook
            sys.unraisablehook = self._on_unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            sys.unraisablehook = self._previous_hook

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.hit = True
        raise KeyboardInterrupt

    def _on_unraisable(self, unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) or unraisable.exc_type is KeyboardInterrupt:
            self.hit = True  # check() raises it again
            return
        self._previous_hook(unraisable)

    def check(self) -> None:
        if self.hit:
            raise KeyboardInterrupt


def run_ingest(options: IngestOptions) -> IngestSummary:
    """Ingest ``options.raw_path`` into ``options.workspace``.

    Raises ``FileNotFoundError`` for a missing input and :class:`NoTicketFiles`
    for one without ticket files, both before the workspace is touched.  A
    ``KeyboardInterrupt`` stops the workers and propagates, leaving the
    workspace marked in progress (``tickets/.ingest-in-progress``) with no
    temporary file; running the same ingest again completes it."""
    if not options.raw_path.exists():
        raise FileNotFoundError(f"raw input {options.raw_path} does not exist")
    check_input(options.raw_path)
    canned = canned_lines(options)
    if canned is not None and options.progress:
        _say(_canned_message(canned))
    factory = ProcessorFactory(
        config=options.pipeline,
        kb_docs=load_kb(options.kb_dir) if options.kb_dir else None,
        tool_schemas=load_tool_schemas(options.tool_schemas) if options.tool_schemas else None,
        annotator=options.annotator,
        canned=canned,
    )
    if factory.kb_docs and (options.executor == "ray" or options.jobs > 1):
        # several processes (or Ray actors) would each de-identify every document: done once, here
        if options.executor == "local" and options.annotator.endpoint is not None:
            options.annotator.endpoint.api_key()  # local workers share this environment: a missing key fails now
        if options.progress:
            _say(f"de-identifying {len(factory.kb_docs):,} knowledge documents once for every worker (loading the "
                 f"models: spaCy {options.pipeline.deid.spacy_model}, Presidio)…")
        factory = factory.deidentified_kb()
    workspace = options.workspace
    mocks = workspace / MOCKS_DIR
    mocks.mkdir(parents=True, exist_ok=True)
    for folder in (workspace / TASKS_FILE.parent, mocks):
        remove_stale_temps(folder)  # from an ingest that was killed
    in_progress = workspace / IN_PROGRESS_FILE
    in_progress.parent.mkdir(parents=True, exist_ok=True)
    in_progress.write_text(f"cirrus ingest {options.raw_path.name} started "
                           f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}\n", encoding="utf-8")
    tally = _Tally()
    written_cassettes: set[str] = set()
    bar = tqdm(desc="ingest", unit="ticket", disable=not options.progress, dynamic_ncols=True)
    on_load = (lambda: _say(loading_message(options))) if options.progress else None
    # closing(): on an interrupt the executor's pool is shut down here, before
    # the exception leaves, not whenever the generator is collected
    try:
        with _InterruptLatch() as interrupts, closing(bar), atomic_writer(workspace / TASKS_FILE) as out, \
                closing(_outcomes(options, factory, on_load)) as outcomes:
            for outcome in outcomes:
                interrupts.check()
                bar.update(1)
                tally.read += 1
                if outcome.status is not None:
                    tally.by_status[outcome.status] += 1
                result = outcome.result
                if result is None:
                    continue
                if isinstance(result, Quarantined):  # its id shown only when it reads as a code, its file when safe
                    tally.quarantined.append(_safe_entry(
                        replace(result, ticket_id=quarantine_id(result.ticket_id)).to_manifest()))
                elif isinstance(result, Skipped):
                    tally.skipped.append(_safe_entry({**result.origin.to_manifest(), "ticket_id": result.ticket_id,
                                                      "reason": result.reason}))
                else:
                    if result.cassette is not None:
                        relative = result.task["cassette"]
                        write_cassette(workspace / relative, result.cassette)
                        written_cassettes.add(Path(relative).name)
                    out.write(json.dumps(result.task, ensure_ascii=False, separators=(",", ":")) + "\n")
                    tally.add_task(result)
                bar.set_postfix(tasks=tally.tasks, quarantined=len(tally.quarantined), refresh=False)
            interrupts.check()  # still inside the writer: an interrupted run commits nothing
    except KeyboardInterrupt:
        # Ctrl-C can land between a temporary file's creation and the clean-up
        # that guards it: leave no temporary file behind (one writer per workspace)
        for folder in (workspace / TASKS_FILE.parent, mocks):
            remove_stale_temps(folder)
        raise
    for stale in mocks.glob("*.yaml"):
        if stale.name not in written_cassettes:
            stale.unlink()
    manifest = _keep_creation_time(_manifest(options, tally, canned), workspace / MANIFEST_FILE)
    with atomic_writer(workspace / MANIFEST_FILE) as out:
        json.dump(manifest, out, indent=2, ensure_ascii=False)
        out.write("\n")
    in_progress.unlink()
    return IngestSummary(manifest, tally.requests)
